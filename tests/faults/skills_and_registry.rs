//! Skills directories and tool registries the server cannot use: an unusable path stops the
//! start saying which and what to do; unreadable files in them give errors per call while the
//! rest serves.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::{call_tool, serve_command};
use crate::server::Server;

/// Runs `serve` with `args` expecting it to refuse to start; returns its stderr.
async fn refused_start(dir: &Path, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        serve_command(dir, &[&["--pool-size", "0"], args].concat())
            .stderr(std::process::Stdio::piped())
            .output(),
    )
    .await
    .expect("the server gives up within a minute")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "it started: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {}",
        path.display()
    );
}

/// A registry file with one tool.
fn registry_file(server: &str, tool: &str) -> String {
    json!({"categories": {"testing": {"description": "Tools of the fault tests", "tools": {
        format!("{server}/{tool}"): {
            "description": "Counts the rings of a tree in a photograph",
            "functions": [tool], "use_cases": ["dendrochronology"],
            "input_schema": {"type": "object", "properties": {}}
        }
    }}}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_skills_directory_or_registry_path_stops_the_start_saying_which_and_what_to_do()
{
    // The skills path (`<dir>/skills` for serve_command) is a regular file, or a dangling link.
    let as_file = tempfile::tempdir().unwrap();
    std::fs::write(as_file.path().join("skills"), "not a directory").unwrap();
    let as_link = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        as_link.path().join("nowhere"),
        as_link.path().join("skills"),
    )
    .unwrap();
    for (dir, why) in [
        (&as_file, "Not a directory"),
        (&as_link, "No such file or directory"),
    ] {
        let stderr = refused_start(dir.path(), &[]).await;
        let path = dir.path().join("skills");
        assert!(
            stderr.contains(&format!("skills directory {}", path.display()))
                && stderr.contains(why)
                && stderr.contains("Point --skills-dir"),
            "{stderr}"
        );
    }
    // The registry path is a regular file.
    let fresh = tempfile::tempdir().unwrap();
    let registry = fresh.path().join("registry");
    std::fs::write(&registry, "{}").unwrap();
    let stderr = refused_start(
        fresh.path(),
        &["--registry-dir", &registry.display().to_string()],
    )
    .await;
    assert!(
        stderr.contains(&format!("tool registry {}", registry.display()))
            && stderr.contains("not a directory")
            && stderr.contains("Point --registry-dir"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_skills_and_registry_files_give_errors_per_call_and_the_rest_serves() {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    std::fs::create_dir(&skills).unwrap();
    std::fs::write(
        skills.join("good_skill.py"),
        "def good_skill():\n    return 1\n",
    )
    .unwrap();
    std::fs::create_dir(skills.join("dir_skill.py")).unwrap();
    mkfifo(&skills.join("fifo_skill.py"));
    std::fs::write(
        skills.join("latin1_skill.py"),
        b"def latin1_skill():\n    return '\xe9'\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone.py"), skills.join("dangling_skill.py"))
        .unwrap();

    let registry = dir.path().join("registry");
    std::fs::create_dir(&registry).unwrap();
    let good = registry_file("faults", "count_tree_rings");
    std::fs::write(registry.join("good.json"), &good).unwrap();
    std::fs::write(registry.join("bad.json"), "{not json").unwrap();
    std::fs::write(registry.join("truncated.json"), &good[..good.len() / 2]).unwrap();
    std::fs::write(
        registry.join("latin1.json"),
        b"{\"categories\": {\"caf\xe9\": {}}}",
    )
    .unwrap();
    mkfifo(&registry.join("fifo.json"));
    std::fs::create_dir(registry.join("dir.json")).unwrap();
    std::fs::write(
        registry.join("dir.json/inner.json"),
        registry_file("faults", "inner_tool"),
    )
    .unwrap();

    let server = Server::spawn(
        dir.path(),
        &[],
        &[
            "--pool-size",
            "0",
            "--registry-dir",
            &registry.display().to_string(),
        ],
    )
    .await;
    let stderr = server.stderr();
    for (file, why) in [
        ("bad.json", "not valid JSON"),
        ("truncated.json", "not valid JSON"),
        ("latin1.json", "cannot read file"),
    ] {
        let line = stderr
            .lines()
            .find(|l| l.contains(&registry.join(file).display().to_string()))
            .unwrap_or_else(|| panic!("nothing logged about {file}:\n{stderr}"));
        assert!(line.contains(why), "{line}");
    }

    // The readable files serve (a folder named *.json is a folder of registry files).
    for (query, id) in [
        ("count tree rings", "faults/count_tree_rings"),
        ("inner tool", "faults/inner_tool"),
    ] {
        let (err, v) = call_tool(
            &server.client,
            "search_tools",
            json!({"query": query, "detail_level": "name"}),
        )
        .await;
        assert!(!err, "{v}");
        assert_eq!(v["tools"][0]["id"], id, "{v}");
    }

    // Each broken skill is an error naming it and what is wrong; the rest list and load.
    for (name, why) in [
        ("dir_skill", "is a directory, not a regular file"),
        ("fifo_skill", "not a regular file"),
        ("latin1_skill", "not valid UTF-8"),
        ("dangling_skill", "is a symbolic link"),
    ] {
        let (err, v) = call_tool(&server.client, "load_skill", json!({ "name": name })).await;
        assert!(err, "{name}: {v}");
        let text = v.to_string();
        assert!(
            text.contains(&format!("{name}.py")) && text.contains(why),
            "{name}: {text}"
        );
    }
    let (err, v) = call_tool(&server.client, "load_skill", json!({"name": "good_skill"})).await;
    assert!(!err, "{v}");
    let (err, v) = call_tool(&server.client, "list_skills", json!({})).await;
    assert!(!err, "{v}");
    let listed: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(listed.contains(&"good_skill"), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|n| n.ends_with("_skill") && *n != "good_skill"),
        "{listed:?}"
    );

    // The registry path turns into a file while the server runs: searches keep the last
    // catalog that loaded, and the server says why it did not reload.
    std::fs::rename(&registry, dir.path().join("registry.old")).unwrap();
    std::fs::write(&registry, "not a directory").unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (err, v) = call_tool(
        &server.client,
        "search_tools",
        json!({"query": "count tree rings", "detail_level": "name"}),
    )
    .await;
    assert!(!err, "{v}");
    assert_eq!(v["tools"][0]["id"], "faults/count_tree_rings", "{v}");

    let stderr = server.close(Duration::from_secs(60)).await;
    assert!(!stderr.contains("panicked"), "{stderr}");
}
