//! The sandbox image's `/usr` served from a copy on the host (`--image-tree host`), against the
//! real engine: pooled and cold executions read it, it is read-only from inside, a second server
//! reuses the copy instead of making another, and neither a leftover temp directory nor a
//! symlink where the copy should be is ever mounted. A copy whose image was deleted is kept
//! while a server holds it (that server's executions following the tag) and removed by the
//! first start after.

mod common;

use std::path::{Path, PathBuf};

use code_execution_mcp::config::{Config, ImageProfile, ImageTreeMode};
use code_execution_mcp::sandbox::image::tree as image_tree;
use code_execution_mcp::sandbox::{Backend, Engine};
use common::{TestApp, assert_ok, stdout, wait_for_full_pool};

/// Prints the `/usr/lib` line of the container's mount table (where Python's modules and the
/// shared libraries are): `root options`.
const USR_MOUNT: &str = r#"
for line in open("/proc/self/mountinfo"):
    f = line.split()
    if f[4] == "/usr/lib":
        print("USR", f[3], f[5])
"#;

fn host_tree(c: &mut Config) {
    c.sandbox.image_tree = ImageTreeMode::Host;
}

/// The short id of the image a configuration runs.
async fn short_id_of(config: &Config) -> String {
    let engine = Engine::connect().await.expect("engine");
    let id = engine
        .image_id(&config.sandbox.image_tag())
        .await
        .expect("inspect")
        .expect("the sandbox image is built");
    image_tree::short_id(&id).expect("a sha256 id").to_string()
}

/// The `/usr/lib` mount the code saw: (root on the host's filesystem, options), if any.
fn usr_mount(out: &str) -> Option<(String, String)> {
    out.lines().find_map(|l| {
        let mut f = l.strip_prefix("USR ")?.split(' ');
        Some((f.next()?.to_string(), f.next()?.to_string()))
    })
}

#[tokio::test]
async fn pooled_and_cold_executions_read_usr_from_the_host_copy() {
    for pool_size in [1, 0] {
        let t = TestApp::start_with(|c| {
            host_tree(c);
            c.pool.pool_size = pool_size;
        })
        .await;
        let tree = (t.app.shared().image_tree().cloned()).expect("the copy is served");
        assert!(tree.root.join("usr").is_dir());
        if pool_size > 0 {
            wait_for_full_pool(&t.app, pool_size).await;
        }
        let o = t
            .run(&format!(
                "{USR_MOUNT}\nimport sys, json\nprint(sys.version_info[:2])"
            ))
            .await;
        assert_ok(&o);
        let (root, options) = usr_mount(stdout(&o)).expect("/usr/lib is a mount of its own");
        let short = tree.root.file_name().unwrap().to_str().unwrap();
        assert!(
            root.contains(short),
            "mounted from {root}, not the copy {short}"
        );
        assert!(
            options.split(',').any(|o| o == "ro"),
            "/usr/lib mounted {options}"
        );
        assert_eq!(
            t.app.stats().snapshot().executions_pooled,
            u64::from(pool_size > 0),
            "pool size {pool_size}"
        );
        t.finish().await;
    }
    // And without it, the image's own /usr.
    let t = TestApp::start_with(|c| c.sandbox.image_tree = ImageTreeMode::Engine).await;
    assert!(t.app.shared().image_tree().is_none());
    let o = t.run(USR_MOUNT).await;
    assert_ok(&o);
    assert_eq!(usr_mount(stdout(&o)), None);
    t.finish().await;
}

#[tokio::test]
async fn the_host_copy_is_read_only_from_inside() {
    let t = TestApp::start_with(host_tree).await;
    assert!(t.app.shared().image_tree().is_some());
    let o = t
        .run(
            r#"
import errno, os, sys
tried = {}
for attempt, call in {
    "create": lambda: open("/usr/planted", "w"),
    "overwrite": lambda: open(os.path.realpath(sys.executable), "r+b"),
    "mkdir": lambda: os.mkdir("/usr/lib/planted"),
    "chmod": lambda: os.chmod("/usr/bin", 0o777),
    "remove": lambda: os.unlink(os.path.realpath(sys.executable)),
}.items():
    try:
        call()
        tried[attempt] = "succeeded"
    except OSError as e:
        tried[attempt] = errno.errorcode[e.errno]
print(tried)
result = tried
"#,
        )
        .await;
    assert_ok(&o);
    let tried = &o.result;
    for attempt in ["create", "overwrite", "mkdir", "chmod", "remove"] {
        let got = tried[attempt].as_str().unwrap_or_default();
        assert!(
            matches!(got, "EROFS" | "EACCES" | "EPERM"),
            "{attempt}: {got}"
        );
    }
    // The mount itself is read-only, whoever the sandbox runs as.
    let o = t.run(USR_MOUNT).await;
    let (_, options) = usr_mount(stdout(&o)).expect("a /usr/lib mount");
    assert!(options.split(',').any(|o| o == "ro"), "{options}");
    t.finish().await;
}

/// A configuration on the minimal image (a smaller copy) with the copies in `trees`.
fn minimal_in(trees: &Path) -> impl FnOnce(&mut Config) {
    let trees = trees.to_path_buf();
    move |c: &mut Config| {
        host_tree(c);
        c.sandbox.image_profile = ImageProfile::Minimal;
        c.sandbox.image = None;
        c.sandbox.image_tree_dir = Some(trees);
        c.pool.pool_size = 0;
    }
}

#[tokio::test]
async fn a_second_server_reuses_the_copy() {
    let trees = tempfile::tempdir().unwrap();
    let first = TestApp::start_with(minimal_in(trees.path())).await;
    let root: PathBuf = first
        .app
        .shared()
        .image_tree()
        .cloned()
        .expect("served")
        .root;
    // A mark only this copy carries: a second extraction would make a new directory.
    std::fs::write(root.join("mark"), b"first").unwrap();
    let second = TestApp::start_with(minimal_in(trees.path())).await;
    assert_eq!(
        second.app.shared().image_tree().map(|t| &t.root),
        Some(&root)
    );
    assert_eq!(std::fs::read(root.join("mark")).unwrap(), b"first");
    let o = second.run("print(sum(range(10)))").await;
    assert_ok(&o);
    assert_eq!(stdout(&o).trim(), "45");
    first.finish().await;
    second.finish().await;
    // Only the copy and its lock; no temp directory left.
    let mut names: Vec<String> = std::fs::read_dir(trees.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let short = root.file_name().unwrap().to_str().unwrap().to_string();
    assert_eq!(names, [short.clone(), format!("{short}.lock")]);
}

#[tokio::test]
async fn a_partial_temp_copy_is_never_used() {
    let trees = tempfile::tempdir().unwrap();
    let mut config = Config::defaults();
    minimal_in(trees.path())(&mut config);
    let short = short_id_of(&config).await;
    // What an extraction that died midway leaves: a temp directory with a broken python.
    let temp = trees.path().join(format!(".{short}.tmp-0123"));
    std::fs::create_dir_all(temp.join("usr/bin")).unwrap();
    std::fs::write(temp.join("usr/bin/python3"), b"not a program").unwrap();
    let t = TestApp::start_with(minimal_in(trees.path())).await;
    let tree = t.app.shared().image_tree().cloned().expect("served");
    assert_eq!(tree.root, trees.path().join(&short));
    assert!(!temp.exists(), "the leftover is removed");
    let o = t.run(&format!("{USR_MOUNT}\nprint('ran')")).await;
    assert_ok(&o);
    assert!(usr_mount(stdout(&o)).is_some_and(|(root, _)| root.contains(&short)));
    t.finish().await;
}

#[tokio::test]
async fn a_link_where_the_copy_belongs_is_not_mounted() {
    let trees = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(elsewhere.path().join("usr/bin")).unwrap();
    let mut config = Config::defaults();
    minimal_in(trees.path())(&mut config);
    let short = short_id_of(&config).await;
    std::os::unix::fs::symlink(elsewhere.path(), trees.path().join(&short)).unwrap();
    let t = TestApp::start_with(minimal_in(trees.path())).await;
    assert!(
        t.app.shared().image_tree().is_none(),
        "the link was followed"
    );
    assert!(
        t.app.shared().image_tree_reason().contains("copy failed"),
        "{}",
        t.app.shared().image_tree_reason()
    );
    // Served all the same, from the engine's storage.
    let o = t.run(&format!("{USR_MOUNT}\nprint('ran')")).await;
    assert_ok(&o);
    assert_eq!(usr_mount(stdout(&o)), None);
    t.finish().await;
}

/// An image of the test's own under one tag: built `FROM` the minimal sandbox image with a
/// label that makes its id new, retagged to another such build, its images deleted when dropped.
struct OwnImage {
    tag: String,
    base: String,
}

impl OwnImage {
    fn new(base: String) -> Self {
        let tag = format!("cem-test-image-tree:{}", uuid::Uuid::new_v4().simple());
        Self { tag, base }
    }

    /// Builds a new image under the tag (the previous one keeps its id, untagged); its id.
    async fn build(&self) -> String {
        let dockerfile = format!(
            "FROM {}\nLABEL io.code-execution-mcp.test-build={}\n",
            self.base,
            uuid::Uuid::new_v4().simple()
        );
        let mut child = std::process::Command::new("docker")
            .args(["build", "--quiet", "--tag", &self.tag, "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the docker CLI");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(dockerfile.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "docker build: {out:?}");
        let engine = Engine::connect().await.expect("engine");
        (engine.image_id(&self.tag).await.expect("inspect")).expect("the image just built")
    }
}

impl Drop for OwnImage {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rmi", &self.tag])
            .output();
    }
}

/// Deletes the image `id` from the engine, waiting for the removal of containers made from it.
async fn delete_image(id: &str) {
    for _ in 0..100 {
        let out = std::process::Command::new("docker")
            .args(["rmi", id])
            .output()
            .unwrap();
        if out.status.success() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the image {id} could not be deleted");
}

#[tokio::test]
async fn an_old_copy_is_removed_at_start_but_never_while_another_server_uses_it() {
    let trees = tempfile::tempdir().unwrap();
    let mut base = Config::defaults();
    minimal_in(trees.path())(&mut base);
    let image = OwnImage::new(base.sandbox.image_tag());
    let own_image = |c: &mut Config| {
        minimal_in(trees.path())(c);
        c.sandbox.image = Some(image.tag.clone());
    };
    let old_id = image.build().await;
    let old = trees.path().join(image_tree::short_id(&old_id).unwrap());

    // A serves the old image from its copy.
    let a = TestApp::start_with(own_image).await;
    assert_eq!(a.app.shared().image_tree().map(|t| &t.root), Some(&old));
    let o = a.run(&format!("{USR_MOUNT}\nprint('ran')")).await;
    assert_ok(&o);
    assert!(usr_mount(stdout(&o)).is_some());

    // The tag moves to a new image and the old one is deleted from the engine: A, which still
    // holds the old copy, follows the tag.
    let new_id = image.build().await;
    // (The engine's image event reaches A within moments; A's executions say whether it came.)
    for _ in 0..100 {
        if a.app.sandbox().pool_image() == new_id {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    delete_image(&old_id).await;
    let o = a
        .run(&format!("{USR_MOUNT}\nprint('after the old image went')"))
        .await;
    assert_ok(&o);
    assert_eq!(
        usr_mount(stdout(&o)),
        None,
        "A reads the new image's own /usr"
    );

    // B starts on the new image: the old copy's image is gone, but A holds it.
    let b = TestApp::start_with(own_image).await;
    let new_short = image_tree::short_id(&new_id).unwrap();
    let new = trees.path().join(new_short);
    assert_eq!(b.app.shared().image_tree().map(|t| &t.root), Some(&new));
    assert!(
        old.join("usr").is_dir(),
        "the copy A holds was removed by B's start"
    );
    let o = a.run("print('A still runs')").await;
    assert_ok(&o);
    a.finish().await;
    // No server uses it now; it stays until a start removes it.
    assert!(old.join("usr").is_dir(), "removed before any start");

    // C's start removes it; the copy B uses stays.
    let c = TestApp::start_with(own_image).await;
    assert!(!old.exists(), "the unused copy of a deleted image is kept");
    assert!(new.join("usr").is_dir());
    let o = b.run(&format!("{USR_MOUNT}\nprint('B still runs')")).await;
    assert_ok(&o);
    assert!(usr_mount(stdout(&o)).is_some_and(|(root, _)| root.contains(new_short)));
    c.finish().await;
    b.finish().await;
}
