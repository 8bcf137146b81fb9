//! The OCI runtime the sandbox runs under, as the engine registered it, and what that changes.
//!
//! runc (or crun) runs the code on the host's kernel, behind the kernel's own seccomp filter,
//! cgroups and namespaces. gVisor's `runsc` puts a user-space kernel in between, and with it
//! differences the sandbox must account for (SECURITY.md, "By engine and runtime"; costs in
//! docs/measured.md, "Runtimes"):
//!
//! - **seccomp**: plain `runsc` ignores the OCI profile (a setuid bit can be set); registered
//!   with `--oci-seccomp` it enforces it inside its kernel, but answers every denial with
//!   `EPERM` whatever `errnoRet` says. The profile's `clone3 → ENOSYS` becomes `EPERM`, glibc
//!   does not fall back to `clone`, and no thread starts. The gVisor variant of the profile
//!   ([`RuntimeKind::seccomp_profile`]) therefore lets `clone3` through to gVisor's kernel,
//!   which returns `ENOSYS` itself; every other denial stays denied. A registration without
//!   `--oci-seccomp` is refused ([`Registration::problems`]).
//! - **pids**: the container's pids cgroup counts runsc's own threads (about 60) and 4-5 host
//!   tasks per process inside, and a sandbox that reaches it dies whole: gVisor's kernel cannot
//!   make a process's address space and exits with code 2 and no output
//!   ([`RuntimeKind::ended_at_process_limit`]). gVisor's kernel is the sandbox's alone, so its
//!   `RLIMIT_NPROC` counts this sandbox's processes and threads only (runc's kernel counts a uid
//!   across every container): under gVisor that rlimit is `--pids-limit`, and code gets `EAGAIN`
//!   at the limit as under runc, while the engine's pids limit is scaled to stay out of its way
//!   as a backstop ([`RuntimeKind::engine_pids_limit`], [`RuntimeKind::nproc_limit`]).
//! - **limits are fixed at start**: runsc has no `update`, so a pooled container's memory limit
//!   cannot be changed ([`RuntimeKind::updates_limits`]).
//! - **a failed start leaves processes**: the engine removes the container, the shim and runsc's
//!   sandbox and gofer stay (`execution::start`, `host::runtime_leftovers`).
//! - **speed**: system calls go through ptrace on machines without nested virtualisation (about
//!   80× slower), and a start takes about twice as long ([`RuntimeKind::start_limit`]).

use std::collections::HashMap;
use std::time::Duration;

/// Seccomp profile: Docker's default allowlist without io_uring and without setuid/setgid file
/// modes (see images/python/SECCOMP.md).
pub const SECCOMP_PROFILE: &str = include_str!("../../../images/python/seccomp.json");

/// What kind of runtime runs the sandbox's containers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// runc, crun or the engine's default: the host's kernel.
    #[default]
    Native,
    /// gVisor's runsc: a user-space kernel.
    Gvisor,
}

/// The host tasks one process inside gVisor may cost the container's pids cgroup (measured:
/// 4-6 at rest, more while processes fork), with room to spare: the engine's limit is a
/// backstop behind `RLIMIT_NPROC`, and a sandbox that reaches it dies whole.
const GVISOR_TASKS_PER_PROCESS: i64 = 16;
/// The host tasks gVisor's sandbox and gofer take before any process runs (measured: about
/// 60), doubled.
const GVISOR_OWN_TASKS: i64 = 128;
/// The exit code of a gVisor sandbox that could not make a process (`unable to activate mm`).
const GVISOR_PROCESS_LIMIT_EXIT: i64 = 2;

impl RuntimeKind {
    /// The pids limit to give the engine so that `processes` processes and threads fit inside.
    pub fn engine_pids_limit(self, processes: i64) -> i64 {
        match self {
            RuntimeKind::Native => processes,
            RuntimeKind::Gvisor => GVISOR_OWN_TASKS + GVISOR_TASKS_PER_PROCESS * processes,
        }
    }

    /// The `RLIMIT_NPROC` to give the sandbox for `processes` processes and threads, where
    /// `host_default` is what runc's sandboxes get (a per-uid count across containers, so far
    /// above any one sandbox's need).
    pub fn nproc_limit(self, processes: i64, host_default: i64) -> i64 {
        match self {
            RuntimeKind::Native => host_default,
            RuntimeKind::Gvisor => processes,
        }
    }

    /// The seccomp profile for this runtime (see the module's docs for the gVisor variant).
    pub fn seccomp_profile(self) -> &'static str {
        match self {
            RuntimeKind::Native => SECCOMP_PROFILE,
            RuntimeKind::Gvisor => gvisor_profile(),
        }
    }

    /// The start limit for a configured `limit`: gVisor's starts take about twice runc's, and
    /// the default limit was set for runc.
    pub fn start_limit(self, limit: Duration) -> Duration {
        match self {
            RuntimeKind::Native => limit,
            RuntimeKind::Gvisor => limit * 2,
        }
    }

    /// Whether the engine can change a running container's memory limit (runsc has no
    /// `update` command: the engine's call fails).
    pub fn updates_limits(self) -> bool {
        self == RuntimeKind::Native
    }

    /// Whether a container that ended with `exit_code` before its harness reported ended at its
    /// process limit (gVisor only: runc's processes get `EAGAIN` and the harness reports it).
    pub fn ended_at_process_limit(self, exit_code: Option<i64>) -> bool {
        self == RuntimeKind::Gvisor && exit_code == Some(GVISOR_PROCESS_LIMIT_EXIT)
    }
}

/// The profile with `clone3` allowed, made once from the shipped one.
fn gvisor_profile() -> &'static str {
    static PROFILE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PROFILE.get_or_init(|| {
        let mut profile: serde_json::Value =
            serde_json::from_str(SECCOMP_PROFILE).expect("the shipped profile parses");
        let rules = profile["syscalls"]
            .as_array_mut()
            .expect("the shipped profile has syscalls");
        let clone3 = rules
            .iter_mut()
            .find(|rule| rule["names"] == serde_json::json!(["clone3"]))
            .expect("the shipped profile has a clone3 rule of its own");
        *clone3 = serde_json::json!({
            "comment": "clone3 reaches gVisor's kernel, which answers ENOSYS (runsc ignores errnoRet)",
            "names": ["clone3"],
            "action": "SCMP_ACT_ALLOW"
        });
        profile.to_string()
    })
}

/// One runtime as the engine registered it (`docker info`'s `Runtimes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    /// The runtime's binary (for runc under Docker 20.10: `runc`).
    pub path: String,
    /// The arguments the engine passes before its own (`runtimeArgs` in daemon.json).
    pub args: Vec<String>,
}

/// Something wrong with a runtime's registration: whether it stops the server, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationProblem {
    /// The server refuses to start (a guarantee would not hold); otherwise a warning.
    pub fatal: bool,
    pub what: String,
    pub fix: String,
}

/// The registration `docker info` would show for runsc as the docs give it, for messages.
pub const GVISOR_REGISTRATION: &str = r#""runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--oci-seccomp", "--host-uds=open"]}"#;

impl Registration {
    /// The registrations the engine reports, by name.
    pub fn from_info(
        runtimes: HashMap<String, bollard::models::Runtime>,
    ) -> HashMap<String, Registration> {
        runtimes
            .into_iter()
            .map(|(name, runtime)| {
                let registration = Registration {
                    name: name.clone(),
                    path: runtime.path.unwrap_or_default(),
                    args: runtime.runtime_args.unwrap_or_default(),
                };
                (name, registration)
            })
            .collect()
    }

    pub fn kind(&self) -> RuntimeKind {
        let binary = self.path.rsplit('/').next().unwrap_or_default();
        if binary == "runsc" || binary.starts_with("runsc-") {
            RuntimeKind::Gvisor
        } else {
            RuntimeKind::Native
        }
    }

    /// Whether the engine passes `flag` (`--flag`, `--flag=…` or `-flag`, as runsc parses them).
    fn passes(&self, flag: &str) -> Option<&str> {
        self.args.iter().find_map(|arg| {
            let bare = arg.trim_start_matches('-');
            (arg.starts_with('-') && (bare == flag || bare.starts_with(&format!("{flag}="))))
                .then_some(bare)
        })
    }

    /// What this registration lacks for the sandbox's guarantees.
    pub fn problems(&self) -> Vec<RegistrationProblem> {
        if self.kind() != RuntimeKind::Gvisor {
            return Vec::new();
        }
        let fix = format!(
            "register it in the engine's daemon.json as {GVISOR_REGISTRATION} and reload the engine (`systemctl reload docker`, or SIGHUP to dockerd); see README, \"Engines\""
        );
        let mut problems = Vec::new();
        if !matches!(
            self.passes("oci-seccomp"),
            Some("oci-seccomp" | "oci-seccomp=true")
        ) {
            problems.push(RegistrationProblem {
                fatal: true,
                what: format!(
                    "runtime {} (gVisor) is registered without --oci-seccomp, so it ignores the sandbox's seccomp profile: code could set setuid bits on workspace files and use io_uring and ptrace inside gVisor",
                    self.name
                ),
                fix: fix.clone(),
            });
        }
        if !matches!(self.passes("network"), Some("network=none")) {
            problems.push(RegistrationProblem {
                fatal: false,
                what: format!(
                    "runtime {} (gVisor) is registered without --network=none: on kernels that show network sysctls in every namespace runsc refuses to start any container (\"cannot run with network enabled in root network namespace\"); the sandbox has no network either way",
                    self.name
                ),
                fix: fix.clone(),
            });
        }
        if !matches!(
            self.passes("host-uds"),
            Some("host-uds=open" | "host-uds=all")
        ) {
            problems.push(RegistrationProblem {
                fatal: false,
                what: format!(
                    "runtime {} (gVisor) is registered without --host-uds=open, so its sandboxes cannot open the egress proxy's socket: code's requests to the upstreams file's \"egress\" hosts fail (nothing else needs it)",
                    self.name
                ),
                fix,
            });
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runsc(args: &[&str]) -> Registration {
        Registration {
            name: "runsc".into(),
            path: "/usr/bin/runsc".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn runsc_is_gvisor_and_runc_is_native() {
        assert_eq!(runsc(&[]).kind(), RuntimeKind::Gvisor);
        let runc = Registration {
            name: "runc".into(),
            path: "runc".into(),
            args: vec![],
        };
        assert_eq!(runc.kind(), RuntimeKind::Native);
        assert!(runc.problems().is_empty());
    }

    #[test]
    fn gvisor_without_oci_seccomp_is_refused_and_without_network_none_or_host_uds_warned() {
        let plain = runsc(&[]).problems();
        assert_eq!(plain.len(), 3);
        assert!(plain[0].fatal && plain[0].what.contains("--oci-seccomp"));
        assert!(!plain[1].fatal && plain[1].what.contains("--network=none"));
        assert!(!plain[2].fatal && plain[2].what.contains("--host-uds=open"));
        assert!(plain[0].fix.contains(r#""--oci-seccomp""#));
        assert!(plain[0].fix.contains(r#""--host-uds=open""#));
        let full = ["--network=none", "--oci-seccomp", "--host-uds=open"];
        assert!(runsc(&full).problems().is_empty());
        assert!(
            runsc(&["-network=none", "-oci-seccomp=true", "-host-uds=all"])
                .problems()
                .is_empty()
        );
        let off = runsc(&["--network=none", "--oci-seccomp=false", "--host-uds=open"]).problems();
        assert!(off.len() == 1 && off[0].fatal);
    }

    #[test]
    fn the_gvisor_profile_allows_clone3_and_nothing_else_more() {
        let rules = |text: &str| -> Vec<serde_json::Value> {
            let profile: serde_json::Value = serde_json::from_str(text).unwrap();
            profile["syscalls"].as_array().unwrap().clone()
        };
        let native = rules(RuntimeKind::Native.seccomp_profile());
        let gvisor = rules(RuntimeKind::Gvisor.seccomp_profile());
        assert_eq!(native.len(), gvisor.len());
        let differ: Vec<_> = native
            .iter()
            .zip(&gvisor)
            .filter(|(a, b)| a != b)
            .map(|(_, b)| b)
            .collect();
        assert_eq!(differ.len(), 1, "only the clone3 rule changes");
        assert_eq!(differ[0]["names"], serde_json::json!(["clone3"]));
        assert_eq!(differ[0]["action"], "SCMP_ACT_ALLOW");
        assert!(differ[0].get("args").is_none());
    }

    #[test]
    fn gvisor_counts_processes_by_rlimit_and_reads_exit_2_as_the_limit() {
        assert_eq!(RuntimeKind::Native.engine_pids_limit(128), 128);
        assert_eq!(RuntimeKind::Gvisor.engine_pids_limit(128), 2176);
        assert_eq!(RuntimeKind::Gvisor.nproc_limit(128, 32768), 128);
        assert_eq!(RuntimeKind::Native.nproc_limit(128, 32768), 32768);
        assert!(RuntimeKind::Gvisor.ended_at_process_limit(Some(2)));
        assert!(!RuntimeKind::Native.ended_at_process_limit(Some(2)));
        assert!(!RuntimeKind::Gvisor.ended_at_process_limit(Some(1)));
        assert_eq!(
            RuntimeKind::Gvisor.start_limit(Duration::from_secs(30)),
            Duration::from_secs(60)
        );
    }
}
