//! Tests of the sandbox user rule and the handover of a root-owned workspace.

use super::*;
use crate::workspace::owner::{Decision, Refusal, decide_sandbox_user};

// ----- the sandbox user -----

#[test]
fn sandbox_user_rule() {
    let u = |uid, gid| SandboxUser { uid, gid };
    assert_eq!(
        decide_sandbox_user(1000, 1000, 1000, 10001),
        Decision::Use(u(1000, 1000))
    );
    assert_eq!(
        decide_sandbox_user(1000, 0, 0, 10001),
        Decision::Use(u(1000, 1000))
    );
    assert_eq!(
        decide_sandbox_user(0, 0, 0, 10001),
        Decision::ChownRoot(u(10001, 10001))
    );
    assert_eq!(
        decide_sandbox_user(0, 0, 1000, 10001),
        Decision::Refuse(Refusal::RootOwnedNotRoot)
    );
    assert_eq!(
        decide_sandbox_user(0, 0, 0, 0),
        Decision::Refuse(Refusal::SandboxUidIsRoot)
    );
    let msg = Refusal::RootOwnedNotRoot.message(Path::new("/srv/ws"), 1000, 10001);
    assert!(msg.contains("sudo chown 1000:$(id -g) /srv/ws"), "{msg}");
    assert!(msg.contains("never runs as root"), "{msg}");
    assert_eq!(u(5, 6).docker_user(), "5:6");
}

#[test]
#[ignore = "needs root: chowns the workspace to the sandbox user"]
fn prepare_for_sandbox_hands_a_root_owned_workspace_over() {
    require_root("handing a root-owned workspace over");
    let f = Fixture::new();
    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    assert_eq!(fs::metadata(&f.root).unwrap().uid(), 0);
    let user = ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap();
    assert_eq!(
        user,
        SandboxUser {
            uid: 10001,
            gid: 10001
        }
    );
    let m = fs::metadata(&f.root).unwrap();
    assert_eq!((m.uid(), m.gid()), (10001, 10001));
    // Idempotent, and files written now belong to the sandbox user.
    assert_eq!(ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap(), user);
    ws.write_file("x", b"x").unwrap();
    assert_eq!(fs::metadata(f.p("x")).unwrap().uid(), 10001);
    // A developer's workspace keeps its owner.
    std::os::unix::fs::chown(&f.root, Some(1000), Some(1000)).unwrap();
    assert_eq!(
        ws.prepare_for_sandbox(DEFAULT_SANDBOX_UID).unwrap(),
        SandboxUser {
            uid: 1000,
            gid: 1000
        }
    );
    assert!(
        ws.prepare_for_sandbox(0).is_ok(),
        "owner wins over the configured uid"
    );
    std::os::unix::fs::chown(&f.root, Some(0), Some(0)).unwrap();
    assert!(matches!(
        ws.prepare_for_sandbox(0),
        Err(WorkspaceError::SandboxUser { .. })
    ));
}

#[test]
fn workspace_can_be_shared_across_blocking_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Workspace>();
    assert_send_sync::<WorkspaceError>();
}
