//! Whether this engine bounds a sandbox's memory and processes, decided once at start: by a
//! probe where the engine's word is in doubt (a rootless engine, no cgroup driver, no memory
//! limits reported; see `sandbox::rootless` and `sandbox::enforcement`). A server whose
//! sandboxes would run unbounded refuses to start, naming the cause and the fix, unless
//! `--allow-unenforced-limits` accepts it; then every result says which limits do not hold.
//! The same probe serves `doctor`. Also here: the user sandboxes run as on a rootless engine.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::app::StartError;
use crate::config::{Config, SANDBOX_UID};
use crate::sandbox::container::rootless::{self, Isolation};
use crate::sandbox::container::runtime::RuntimeKind;
use crate::sandbox::container::seccomp_file;
use crate::sandbox::container::spec::Seccomp;
use crate::sandbox::enforcement::{self, Limit, ProbeSettings, Verdict};
use crate::sandbox::engine::paths::HostPaths;
use crate::sandbox::{Engine, EngineInfo};

/// What the server knows of its engine's limits.
#[derive(Debug, Clone, Default)]
pub struct EngineLimits {
    pub isolation: Isolation,
    /// Limits the engine does not enforce, accepted with `--allow-unenforced-limits`. Every
    /// execution's result names them.
    pub unenforced: Vec<Limit>,
}

impl EngineLimits {
    /// The uid and gid sandboxes run as, given the workspace's (see `rootless::sandbox_ids`).
    pub fn sandbox_ids(&self, workspace: (u32, u32)) -> (u32, u32) {
        rootless::sandbox_ids(self.isolation.rootless, workspace)
    }

    /// The names of the limits a result must not report as applied (`limits.not_enforced`).
    pub fn not_enforced(&self) -> Vec<String> {
        self.unenforced
            .iter()
            .map(|l| l.name().to_string())
            .collect()
    }

    /// The note every result carries while limits are not enforced.
    pub fn note(&self) -> Option<String> {
        if self.unenforced.is_empty() {
            return None;
        }
        let what: Vec<&str> = self.unenforced.iter().map(|l| l.consequence()).collect();
        Some(format!(
            "limits not enforced: this server's engine ({}) does not enforce {}, and the server was started with --allow-unenforced-limits: {}",
            self.isolation.describe(),
            names(&self.unenforced),
            what.join("; ")
        ))
    }
}

/// "memory_mb and pids_limit".
fn names(limits: &[Limit]) -> String {
    let names: Vec<&str> = limits.iter().map(|l| l.name()).collect();
    names.join(" and ")
}

/// How the engine isolates containers (rootless, its cgroups), from its version and `/info`.
/// An engine that does not report its features is in doubt, and gets probed.
pub async fn isolation(engine: &Engine, info: &EngineInfo) -> Isolation {
    let features = engine.features().await.unwrap_or_else(|e| {
        tracing::warn!("the engine did not report its cgroups and security options: {e}");
        Default::default()
    });
    Isolation {
        kind: info.kind.clone(),
        version: info.version.clone(),
        rootless: features.rootless,
        cgroup_version: features.cgroup_version,
        cgroup_driver: features.cgroup_driver,
        memory_reported: features.memory_and_swap_limits,
    }
}

/// Runs the probes of `limits` in sandboxes of `image` made as executions' are (as the user
/// sandboxes run as on this engine), in a throwaway workspace ([`ProbeDir`]).
pub async fn probe(
    engine: &Engine,
    config: &Config,
    runtime_kind: RuntimeKind,
    isolation: &Isolation,
    oom_reported: bool,
    image: &str,
    limits: &[Limit],
) -> Result<Vec<(Limit, Verdict)>, String> {
    let dir = ProbeDir::new(config);
    let settings = dir
        .settings(engine, config, runtime_kind, isolation, oom_reported, image)
        .await?;
    Ok(enforcement::probe(Arc::new(engine.clone()), settings, limits).await)
}

/// A throwaway directory for probe sandboxes (their workspace, and the seccomp profile where
/// the engine takes a file), removed when dropped: under the data directory when it exists (in
/// the server's container, the mount the engine can bind), else the temp directory.
pub struct ProbeDir(PathBuf);

impl ProbeDir {
    pub fn new(config: &Config) -> Self {
        let parent = Some(config.storage.data_dir())
            .filter(|d| d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        Self(parent.join(format!(".cem-probe-{}", uuid::Uuid::new_v4().simple())))
    }

    /// Makes the workspace (writable by the sandbox's user) and the profile, and the settings
    /// of sandboxes that use them, with every path as the engine sees it.
    pub async fn settings(
        &self,
        engine: &Engine,
        config: &Config,
        runtime_kind: RuntimeKind,
        isolation: &Isolation,
        oom_reported: bool,
        image: &str,
    ) -> Result<ProbeSettings, String> {
        let dir = &self.0;
        let workspace = dir.join("workspace");
        let seccomp = std::fs::create_dir_all(&workspace)
            .and_then(|()| {
                std::fs::set_permissions(
                    &workspace,
                    std::os::unix::fs::PermissionsExt::from_mode(0o777),
                )
            })
            .and_then(|()| {
                seccomp_file::for_engine(
                    &isolation.kind,
                    runtime_kind,
                    &dir.join(seccomp_file::DIR_NAME),
                )
            })
            .map_err(|e| {
                format!(
                    "cannot prepare {}: {e}; make the data directory (or, without one, the temp directory) writable",
                    dir.display()
                )
            })?;
        let paths = HostPaths::detect(engine).await.map_err(|e| e.to_string())?;
        let for_engine = |p: &Path| {
            paths
                .to_engine(&p.canonicalize().unwrap_or(p.to_path_buf()))
                .map_err(|e| format!("cannot hand {} to the engine: {e}; run where the server runs, with the same mounts", p.display()))
        };
        let seccomp = match seccomp {
            Seccomp::File(f) => Seccomp::File(for_engine(&f)?),
            Seccomp::Inline => Seccomp::Inline,
        };
        let (uid, gid) = rootless::sandbox_ids(isolation.rootless, (SANDBOX_UID, SANDBOX_UID));
        Ok(ProbeSettings {
            image: image.to_string(),
            workspace: for_engine(&workspace)?,
            seccomp,
            uid,
            gid,
            runtime: config.sandbox.runtime.clone(),
            runtime_kind,
            oom_reported,
        })
    }
}

impl Drop for ProbeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// At start: the engine's isolation and, where its limits are in doubt, the probes' verdicts.
/// Refuses to serve with limits that do not hold unless `--allow-unenforced-limits`.
pub(crate) async fn check(
    config: &Config,
    runtime_kind: RuntimeKind,
    engine: &Engine,
    info: &EngineInfo,
    image: &str,
) -> Result<EngineLimits, StartError> {
    let isolation = isolation(engine, info).await;
    if isolation.rootless {
        tracing::info!(
            "the engine is {}: sandboxes run as uid 0 of its user namespace (the engine's user, every capability dropped)",
            isolation.describe()
        );
    }
    if !isolation.limits_in_doubt() {
        return Ok(EngineLimits {
            isolation,
            unenforced: Vec::new(),
        });
    }
    let verdicts = probe(
        engine,
        config,
        runtime_kind,
        &isolation,
        info.reports_oom_kills(),
        image,
        &[Limit::Memory, Limit::Pids],
    )
    .await
    .unwrap_or_else(|e| {
        [Limit::Memory, Limit::Pids]
            .map(|l| (l, Verdict::Unknown(format!("the probe could not run: {e}"))))
            .to_vec()
    });
    let unenforced: Vec<Limit> = (verdicts.iter())
        .filter(|(_, v)| !v.enforced())
        .map(|(l, _)| *l)
        .collect();
    if unenforced.is_empty() {
        tracing::info!(
            "{}: memory and pids limits enforced (probed)",
            isolation.describe()
        );
    } else if config.limits.allow_unenforced_limits {
        tracing::warn!(
            "{}; serving anyway (--allow-unenforced-limits): every result says so",
            unenforced_text(&isolation, &verdicts)
        );
    } else {
        return Err(StartError::LimitsNotEnforced(refusal(
            &isolation, &verdicts,
        )));
    }
    Ok(EngineLimits {
        isolation,
        unenforced,
    })
}

/// "the engine does not enforce …: what the probes saw. Cause and fix".
fn unenforced_text(isolation: &Isolation, verdicts: &[(Limit, Verdict)]) -> String {
    let failed: Vec<&(Limit, Verdict)> = verdicts.iter().filter(|(_, v)| !v.enforced()).collect();
    let limits: Vec<Limit> = failed.iter().map(|(l, _)| *l).collect();
    let seen: Vec<String> = failed.iter().map(|(l, v)| v.detail(*l)).collect();
    format!(
        "the sandbox's {} not enforced on this engine ({}). Cause: {}",
        match limits.as_slice() {
            [one] => format!("{} is", one.name()),
            _ => format!("{} are", names(&limits)),
        },
        seen.join("; "),
        isolation.cause_and_fix(
            limits.contains(&Limit::Memory),
            limits.contains(&Limit::Pids)
        )
    )
}

/// The refusal to start: what does not hold, why, the fix, and the flag that accepts it.
fn refusal(isolation: &Isolation, verdicts: &[(Limit, Verdict)]) -> String {
    format!(
        "refusing to serve: {}. Code could take all of the host's memory or every process id. To serve anyway, with every result saying which limits are not enforced, pass --allow-unenforced-limits (CEM_ALLOW_UNENFORCED_LIMITS=true); `code-execution-mcp doctor` shows the checks",
        unenforced_text(isolation, verdicts)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rootless_v1() -> Isolation {
        Isolation {
            kind: "Docker".into(),
            version: "20.10.24".into(),
            rootless: true,
            cgroup_version: 1,
            cgroup_driver: "none".into(),
            memory_reported: false,
        }
    }

    #[test]
    fn the_refusal_names_what_does_not_hold_the_cause_and_the_flag() {
        let verdicts = [
            (
                Limit::Memory,
                Verdict::NotEnforced("a 64 MB sandbox allocated 256 MB and ended ok".into()),
            ),
            (
                Limit::Pids,
                Verdict::NotEnforced("a sandbox limited to 32 processes started 96 threads".into()),
            ),
        ];
        let text = refusal(&rootless_v1(), &verdicts);
        for part in [
            "refusing to serve: the sandbox's memory_mb and pids_limit are not enforced",
            "allocated 256 MB",
            "started 96 threads",
            "rootless Docker 20.10.24, cgroup v1, cgroup driver none",
            "Delegate=",
            "--allow-unenforced-limits",
            "CEM_ALLOW_UNENFORCED_LIMITS",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let one = refusal(
            &rootless_v1(),
            &[
                (Limit::Memory, Verdict::Enforced),
                (
                    Limit::Pids,
                    Verdict::Unknown("the pids probe did not run".into()),
                ),
            ],
        );
        assert!(one.contains("pids_limit is not enforced"), "{one}");
        assert!(!one.contains("memory_mb"), "{one}");
    }

    #[test]
    fn results_carry_a_note_only_while_limits_are_not_enforced() {
        let mut limits = EngineLimits {
            isolation: rootless_v1(),
            unenforced: Vec::new(),
        };
        assert_eq!(limits.note(), None);
        assert!(limits.not_enforced().is_empty());
        limits.unenforced = vec![Limit::Memory, Limit::Pids];
        assert_eq!(limits.not_enforced(), ["memory_mb", "pids_limit"]);
        let note = limits.note().unwrap();
        assert!(
            note.starts_with("limits not enforced: this server's engine (rootless Docker")
                && note.contains("memory_mb and pids_limit")
                && note.contains("--allow-unenforced-limits"),
            "{note}"
        );
        assert_eq!(limits.sandbox_ids((1000, 1000)), (0, 0));
        limits.isolation.rootless = false;
        assert_eq!(limits.sandbox_ids((1000, 1000)), (1000, 1000));
    }
}
