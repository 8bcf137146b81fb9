//! Rootless engines: how one is recognised, what it means for the sandbox's limits, and which
//! user the sandbox runs as under one.
//!
//! A rootless engine (Docker's rootless mode, rootless Podman) runs as an ordinary user inside a
//! user namespace of its own, where uid 0 is that user and every other uid is one of the user's
//! subordinate uids (`/etc/subuid`). Two things follow for the sandbox:
//!
//! - **Limits come from cgroups the user was given.** On cgroup v1, or on cgroup v2 without the
//!   memory and pids controllers delegated to the user, the engine has no cgroup to put a limit
//!   in (its cgroup driver is `none`) and accepts `--memory` and `--pids-limit` without a word.
//!   The engine's word is therefore not taken: `enforcement` probes both limits with a real
//!   container, and the server refuses to serve unbounded sandboxes unless told to.
//! - **The workspace owner's uid is the wrong one.** Inside the engine's namespace the host user
//!   is uid 0; the uid the server would use on a rootful engine (the workspace owner's, or
//!   10001) names a subordinate uid there, which cannot write the user's workspace, and whose
//!   files the user could not delete. See [`sandbox_ids`].

/// What to do when a rootless engine has no cgroups (the `memory and swap limits` problem of
/// `EngineFeatures::problems` and the cause named by `doctor`).
pub const NO_CGROUPS_FIX: &str = "the engine is rootless and has no cgroups of its own, so a sandbox's memory and processes are not bounded: a rootless engine gets cgroups only on cgroup v2 with the memory and pids controllers delegated to its user (systemd's `Delegate=`). Boot the host with cgroup v2, delegate the controllers to users, log in again and restart the engine; or run a rootful engine. `code-execution-mcp doctor` says how";

/// Whether the engine's security options (`docker info`'s `SecurityOptions`, which Podman's
/// Docker-compatible API fills the same way) mark it rootless: an option whose fields include
/// `name=rootless`.
pub fn rootless_option(options: &[String]) -> bool {
    options.iter().any(|option| {
        option
            .split(',')
            .any(|field| field.trim() == "name=rootless")
    })
}

/// How the engine isolates containers, as far as the sandbox's limits go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Isolation {
    /// `Docker` or `Podman`.
    pub kind: String,
    pub version: String,
    pub rootless: bool,
    /// 1 or 2; 0 when the engine does not say.
    pub cgroup_version: u8,
    /// `cgroupfs`, `systemd`, `none`, or empty when the engine does not say.
    pub cgroup_driver: String,
    /// Whether the engine says it supports memory and swap limits.
    pub memory_reported: bool,
}

impl Isolation {
    /// Whether the limits need a probe before the server trusts them: a rootless engine, one
    /// without a cgroup driver, or one that says it has no memory limits. A rootful engine with
    /// cgroups enforces what it accepts (`doctor` probes it anyway).
    pub fn limits_in_doubt(&self) -> bool {
        self.rootless || self.cgroup_driver == "none" || !self.memory_reported
    }

    /// "rootless Docker 20.10.24, cgroup v1, cgroup driver none".
    pub fn describe(&self) -> String {
        let cgroup = match self.cgroup_version {
            0 => "cgroup version not reported".to_string(),
            v => format!("cgroup v{v}"),
        };
        let driver = match self.cgroup_driver.as_str() {
            "" => String::new(),
            d => format!(", cgroup driver {d}"),
        };
        let mode = if self.rootless { "rootless" } else { "rootful" };
        format!("{mode} {} {}, {cgroup}{driver}", self.kind, self.version)
    }

    /// The cause of limits the engine accepts and does not enforce, and the fix, for the
    /// refusal at start and `doctor`. `memory`, `pids`: which of them failed.
    pub fn cause_and_fix(&self, memory: bool, pids: bool) -> String {
        let what = match (memory, pids) {
            (true, true) => "memory and pids",
            (true, false) => "memory",
            _ => "pids",
        };
        let delegate = "delegate the controllers to users with systemd (a drop-in such as /etc/systemd/system/user@.service.d/delegate.conf holding `[Service]` and `Delegate=cpu cpuset io memory pids`, then `systemctl daemon-reload`), log in again and restart the engine (`systemctl --user restart docker`; rootless Podman also needs `cgroup_manager = \"systemd\"` in containers.conf)";
        if self.rootless && self.cgroup_version == 2 {
            format!(
                "{}: the engine's user has not been given the {what} cgroup controllers: the host runs cgroup v2, but `cat /sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service/cgroup.controllers` must list memory and pids. Fix: {delegate}; or run a rootful engine",
                self.describe()
            )
        } else if self.rootless {
            let host = match self.cgroup_version {
                1 => "this host runs cgroup v1, where it has none",
                _ => "here it has none",
            };
            format!(
                "{}: a rootless engine gets cgroups (and with them {what} limits) only on cgroup v2 with the memory and pids controllers delegated to its user; {host}. Fix: boot the host with cgroup v2 (kernel command line `systemd.unified_cgroup_hierarchy=1` where it is not the default), {delegate}; or run a rootful engine",
                self.describe()
            )
        } else if memory {
            format!(
                "{} does not enforce {what} limits. Fix: enable the memory cgroup with swap accounting (kernel command line `cgroup_enable=memory swapaccount=1`, or cgroup v2){} and restart the engine",
                self.describe(),
                if pids { " and the pids controller" } else { "" }
            )
        } else {
            format!(
                "{} does not enforce pids limits. Fix: enable the pids cgroup controller (a kernel built with CONFIG_CGROUP_PIDS, mounted by the init system) and restart the engine",
                self.describe()
            )
        }
    }
}

/// The uid and gid sandboxes run as, given the workspace's (the owner's, or the sandbox user's
/// on a workspace the server handed over).
///
/// On a rootless engine this is `0:0` *inside the engine's user namespace*, which the kernel
/// maps to the user who runs the engine: the user who owns the workspace and runs the server.
/// That is the only mapping under which the sandbox can write the workspace without widening
/// its permissions (no world-writable directory), and under which the files it makes belong to
/// that user, who can change and delete them. It is not root on the host, and not root in the
/// container either in any sense that matters: the container has every capability dropped (so
/// uid 0 there overrides no permission and cannot leave its namespace's bounds),
/// no-new-privileges, the seccomp profile (no setuid or setgid modes, no namespace or mount
/// calls), a read-only root and no network. What the sandbox can reach is what it could reach
/// as the workspace owner on a rootful engine: its mounts, as the user. Any other uid inside the
/// namespace is a subordinate uid: it cannot write a workspace the user owns, and what it
/// writes into a world-writable one is a file the user cannot delete.
///
/// On a rootful engine the ids are the workspace's, unchanged.
pub fn sandbox_ids(rootless: bool, workspace_ids: (u32, u32)) -> (u32, u32) {
    if rootless { (0, 0) } else { workspace_ids }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn isolation(rootless: bool, version: u8, driver: &str, memory: bool) -> Isolation {
        Isolation {
            kind: "Docker".into(),
            version: "20.10.24".into(),
            rootless,
            cgroup_version: version,
            cgroup_driver: driver.into(),
            memory_reported: memory,
        }
    }

    #[test]
    fn the_rootless_option_is_found_in_dockers_and_podmans_security_options() {
        let opts = |o: &[&str]| o.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Docker 20.10 rootless on cgroup v1, and on cgroup v2.
        assert!(rootless_option(&opts(&[
            "name=seccomp,profile=default",
            "name=rootless"
        ])));
        assert!(rootless_option(&opts(&[
            "name=seccomp,profile=default",
            "name=rootless",
            "name=cgroupns"
        ])));
        // Podman's Docker-compatible /info, rootless.
        assert!(rootless_option(&opts(&[
            "name=seccomp,profile=/usr/share/containers/seccomp.json",
            "name=rootless",
            "name=selinux"
        ])));
        // Rootful engines, and look-alikes.
        assert!(!rootless_option(&opts(&[
            "name=apparmor",
            "name=seccomp,profile=default"
        ])));
        assert!(!rootless_option(&opts(&["name=seccomp,profile=rootless"])));
        assert!(!rootless_option(&[]));
    }

    #[test]
    fn limits_are_in_doubt_on_rootless_or_cgroupless_engines() {
        assert!(!isolation(false, 1, "cgroupfs", true).limits_in_doubt());
        assert!(!isolation(false, 2, "systemd", true).limits_in_doubt());
        assert!(isolation(true, 1, "none", false).limits_in_doubt());
        // Rootless on cgroup v2 with delegation says it has limits: a probe still decides.
        assert!(isolation(true, 2, "systemd", true).limits_in_doubt());
        assert!(isolation(false, 1, "none", true).limits_in_doubt());
        assert!(isolation(false, 1, "cgroupfs", false).limits_in_doubt());
    }

    #[test]
    fn the_cause_names_rootless_and_the_real_fix() {
        let v1 = isolation(true, 1, "none", false);
        assert_eq!(
            v1.describe(),
            "rootless Docker 20.10.24, cgroup v1, cgroup driver none"
        );
        let text = v1.cause_and_fix(true, true);
        for part in [
            "rootless",
            "memory and pids",
            "cgroup v2",
            "Delegate=",
            "rootful engine",
            "this host runs cgroup v1",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        assert!(!text.contains("swapaccount"), "{text}");
        let v2 = isolation(true, 2, "systemd", true).cause_and_fix(false, true);
        assert!(
            v2.contains("has not been given the pids cgroup controllers")
                && v2.contains("Delegate="),
            "{v2}"
        );
        let rootful = isolation(false, 1, "cgroupfs", false).cause_and_fix(true, false);
        assert!(
            rootful.contains("rootful Docker") && rootful.contains("swapaccount=1"),
            "{rootful}"
        );
        let pids = isolation(false, 1, "cgroupfs", true).cause_and_fix(false, true);
        assert!(pids.contains("CONFIG_CGROUP_PIDS"), "{pids}");
        assert!(NO_CGROUPS_FIX.contains("rootless") && NO_CGROUPS_FIX.contains("Delegate="));
    }

    #[test]
    fn a_rootless_engine_runs_the_sandbox_as_its_own_user() {
        assert_eq!(sandbox_ids(true, (1000, 1000)), (0, 0));
        assert_eq!(sandbox_ids(true, (10001, 10001)), (0, 0));
        assert_eq!(sandbox_ids(false, (1000, 100)), (1000, 100));
        assert_eq!(sandbox_ids(false, (10001, 10001)), (10001, 10001));
    }
}
