//! Tests of the sandbox user rule, the handover of a root-owned workspace, and of a workspace
//! to a tenant's own uid.

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
#[ignore = "needs root: hands a workspace from uid 10001 to a tenant's uid"]
fn hand_over_gives_the_previous_owners_entries_and_never_follows_links() {
    use std::os::unix::fs::{chown, lchown};
    require_root("handing a workspace to another uid");
    let f = Fixture::new();
    let old = DEFAULT_SANDBOX_UID;
    let new = SandboxUser {
        uid: 2_000_000_001,
        gid: 2_000_000_001,
    };
    // A workspace of the shared sandbox user, as every tenant's was: its files, a directory, a
    // link out of it (to the canary), a file root put there and one of another user.
    fs::create_dir_all(f.p("d/e")).unwrap();
    fs::write(f.p("d/e/deep.txt"), "deep").unwrap();
    fs::write(f.p("top.txt"), "top").unwrap();
    symlink(f.outside.join("secret"), f.p("d/out")).unwrap();
    for rel in ["", "d", "d/e", "d/e/deep.txt", "top.txt"] {
        chown(f.p(rel), Some(old), Some(old)).unwrap();
    }
    lchown(f.p("d/out"), Some(old), Some(old)).unwrap();
    fs::write(f.p("roots.txt"), "root's").unwrap();
    fs::write(f.p("d/users.txt"), "a user's").unwrap();
    chown(f.p("d/users.txt"), Some(1000), Some(1000)).unwrap();

    let ws = Workspace::open(&f.root, WorkspaceLimits::default()).unwrap();
    let done = ws.hand_over(new).unwrap();
    assert_eq!(done.from, Some(SandboxUser { uid: old, gid: old }));
    assert_eq!((done.changed, done.left), (5, 0), "{done:?}");
    let owner = |rel: &str| {
        let m = fs::symlink_metadata(f.p(rel)).unwrap();
        (m.uid(), m.gid())
    };
    for rel in ["", "d", "d/e", "d/e/deep.txt", "top.txt", "d/out"] {
        assert_eq!(owner(rel), (new.uid, new.gid), "{rel}");
    }
    assert_eq!(owner("roots.txt"), (0, 0));
    assert_eq!(owner("d/users.txt"), (1000, 1000));
    let mode = fs::metadata(&f.root).unwrap().mode() & 0o7777;
    assert_eq!(mode, PRIVATE_ROOT_MODE);
    // The link's target is not the workspace's: untouched.
    assert_eq!(fs::metadata(f.outside.join("secret")).unwrap().uid(), 0);
    f.assert_outside_untouched(&["secret"]);
    // Files written now belong to the new owner; a second handover has nothing to do.
    ws.write_file("new.txt", b"x").unwrap();
    assert_eq!(owner("new.txt"), (new.uid, new.gid));
    assert_eq!(ws.hand_over(new).unwrap(), Handover::default());

    // A new, root-owned workspace: only its root changes hands, root's files stay root's.
    chown(&f.root, Some(0), Some(0)).unwrap();
    let done = ws.hand_over(new).unwrap();
    assert_eq!(
        (done.from, done.changed),
        (Some(SandboxUser { uid: 0, gid: 0 }), 0)
    );
    assert_eq!(owner(""), (new.uid, new.gid));
    assert_eq!(owner("roots.txt"), (0, 0));
}

#[test]
fn workspace_can_be_shared_across_blocking_tasks() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Workspace>();
    assert_send_sync::<WorkspaceError>();
}
