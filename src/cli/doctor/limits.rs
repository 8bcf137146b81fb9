//! `doctor`'s checks of the engine's isolation beyond memory: whether it is rootless (and so
//! what the sandbox runs as), and a probe of the pids limit, a real container that tries to
//! pass it. On a rootless engine the memory check's fix is replaced by the real one: the
//! kernel command line does not give a rootless engine cgroups.

use super::Check;
use crate::app::open::engine_limits;
use crate::config::Config;
use crate::sandbox::Engine;
use crate::sandbox::enforcement::Limit;

/// Adds the `rootless` and `pids limit` checks (the probe when the image is there) and puts
/// the rootless cause and fix on a failed memory check.
pub(super) async fn add(
    engine: &Engine,
    config: &Config,
    runtime_kind: crate::sandbox::container::runtime::RuntimeKind,
    image_present: bool,
    checks: &mut Vec<Check>,
) {
    let Ok(info) = engine.info().await else {
        return; // The engine check has said why.
    };
    let isolation = engine_limits::isolation(engine, &info).await;
    if isolation.rootless {
        checks.push(Check {
            name: "rootless",
            ok: true,
            detail: format!(
                "{}: sandboxes run as uid 0 of the engine's user namespace, which is the engine's user (every capability dropped, no-new-privileges, seccomp): the workspace must be that user's, and what sandboxes write there is theirs",
                isolation.describe()
            ),
            fix: None,
        });
        for check in checks.iter_mut() {
            if check.name == "memory limit" && !check.ok {
                check.fix = Some(with_flag(isolation.cause_and_fix(true, false)));
            }
        }
    }
    if !image_present {
        return;
    }
    let tag = config.sandbox.image_tag();
    let probed = engine_limits::probe(
        engine,
        config,
        runtime_kind,
        &isolation,
        info.reports_oom_kills(),
        &tag,
        &[Limit::Pids],
    )
    .await;
    let verdict = probed.and_then(|v| {
        (v.into_iter().next().map(|(_, verdict)| verdict)).ok_or_else(|| "no verdict".into())
    });
    checks.push(match verdict {
        Ok(verdict) if verdict.enforced() => Check {
            name: "pids limit",
            ok: true,
            detail: verdict.detail(Limit::Pids),
            fix: None,
        },
        Ok(verdict) => Check {
            name: "pids limit",
            ok: false,
            detail: verdict.detail(Limit::Pids),
            fix: Some(with_flag(isolation.cause_and_fix(false, true))),
        },
        Err(e) => Check {
            name: "pids limit",
            ok: false,
            detail: e,
            fix: Some("see the checks above".into()),
        },
    });
}

fn with_flag(fix: String) -> String {
    format!(
        "{fix}. Until then `serve` refuses to start unless --allow-unenforced-limits accepts it"
    )
}
