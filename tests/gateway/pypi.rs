//! Upstreams from PyPI: structured results (time), a write tool against a repository the test
//! creates (git), and Python-repr text that is not JSON (sqlite).

use serde_json::json;

use super::{app_with, git, run_ok, statuses};
use crate::common::upstreams::{main_python, sqlite_python};
use crate::common::{call_tool, mcp_client};

#[tokio::test(flavor = "multi_thread")]
async fn pypi_servers_are_python_packages_in_the_sandbox() {
    let python = main_python();
    let sqlite = sqlite_python();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q", "-b", "main"]);
    git(repo.path(), &["config", "user.email", "test@example.com"]);
    git(repo.path(), &["config", "user.name", "Test"]);
    std::fs::write(repo.path().join("a.txt"), "hello\n").unwrap();
    let db = tempfile::tempdir().unwrap();
    let t = app_with(
        json!({
            "time": {"command": python, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]},
            "git": {"command": python, "args": ["-m", "mcp_server_git", "--repository", repo.path()]},
            // The package has no __main__: its console script starts it.
            "sqlite": {"command": sqlite.with_file_name("mcp-server-sqlite"), "args": ["--db-path", db.path().join("t.db")]},
        }),
        |_| {},
    )
    .await;
    assert!(
        statuses(&t).iter().all(|(_, s)| s == "Ready"),
        "{:?}",
        statuses(&t)
    );

    let repo_path = repo.path().to_str().unwrap();
    let o = run_ok(
        &t,
        &format!(
            r#"
import os
from servers.time import get_current_time
from servers import git as g
import servers.sqlite as db

now = get_current_time(timezone="Europe/Paris")
g.git_add(repo_path={repo_path:?}, files=["a.txt"])
g.git_commit(repo_path={repo_path:?}, message="from the sandbox")
log = g.git_log(repo_path={repo_path:?})
db.create_table(query="CREATE TABLE t (name TEXT, n INTEGER)")
db.write_query(query="INSERT INTO t VALUES ('a', 1), ('b', 2)")
rows = db.read_query(query="SELECT name, n FROM t ORDER BY n")
result = {{
    "servers": sorted(os.listdir("/servers")),
    "time_files": sorted(os.listdir("/servers/time")),
    "timezone": now["timezone"],
    "log_has_commit": "from the sandbox" in str(log),
    "rows": rows,
}}
"#
        ),
    )
    .await;
    let r = &o.outcome.result;
    assert_eq!(
        r["servers"],
        json!(["__init__.py", "git", "sqlite", "time"]),
        "{r}"
    );
    assert!(
        r["time_files"]
            .as_array()
            .unwrap()
            .contains(&json!("get_current_time.py")),
        "{r}"
    );
    assert_eq!(
        r["timezone"], "Europe/Paris",
        "structured content comes back as a dict"
    );
    assert_eq!(r["log_has_commit"], true, "{r}");
    // read_query answers with Python-repr text, which is not JSON: it stays text.
    let rows = r["rows"].as_str().expect("text, not parsed");
    assert!(
        rows.contains("'name': 'a'") && rows.contains("'n': 2"),
        "{rows}"
    );
    // The commit really happened in the host repository, through the upstream.
    let out = std::process::Command::new("git")
        .args(["-C", repo_path, "log", "--format=%s"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "from the sandbox"
    );

    let calls: Vec<(&str, &str, bool)> = o
        .tool_calls
        .iter()
        .map(|c| (c.server.as_str(), c.tool.as_str(), c.ok))
        .collect();
    assert_eq!(
        calls,
        [
            ("time", "get_current_time", true),
            ("git", "git_add", true),
            ("git", "git_commit", true),
            ("git", "git_log", true),
            ("sqlite", "create_table", true),
            ("sqlite", "write_query", true),
            ("sqlite", "read_query", true),
        ]
    );

    // A skill that imports servers.* works like any other code.
    let client = mcp_client(t.app.clone()).await;
    let skill = "from servers.time import get_current_time\n\n\ndef paris_zone():\n    return get_current_time(timezone='Europe/Paris')['timezone']\n";
    let (is_error, saved) = call_tool(
        &client,
        "save_skill",
        json!({"name": "paris_zone", "code": skill, "description": "the zone, from the time server"}),
    )
    .await;
    assert!(!is_error, "{saved}");
    let o = run_ok(&t, "from skills import paris_zone\nresult = paris_zone()").await;
    assert_eq!(o.outcome.result, "Europe/Paris");

    // get_execution_stats counts the calls per upstream.
    let (_, stats) = call_tool(&client, "get_execution_stats", json!({})).await;
    let calls = &stats["tool_calls"];
    assert_eq!(calls["time"]["calls"], 2, "{calls}");
    assert_eq!(calls["git"]["calls"], 3, "{calls}");
    assert_eq!(calls["sqlite"]["calls"], 3, "{calls}");
    assert_eq!(calls["time"]["failed"], 0, "{calls}");
    assert!(
        stats["capabilities"]
            .as_array()
            .unwrap()
            .contains(&json!("upstream_tools_as_code"))
    );
    drop(client);

    // A session carries what came from the `servers` package and from skills: a module, a
    // tool's function, a skill's function, each usable in the next call's fresh container.
    let session =
        |code: &str, handle: &str| code_execution_mcp::app::execution::request::ExecuteRequest {
            code: code.into(),
            timeout_seconds: Some(120.0),
            session: Some(handle.into()),
            ..Default::default()
        };
    let first = t
        .app
        .execute(
            session(
                "import servers.time as clock\nfrom servers.time import get_current_time\nfrom skills import paris_zone",
                "new",
            ),
            Default::default(),
        )
        .await
        .unwrap();
    let state = first.state.expect("a state report");
    assert!(state.not_carried.is_empty(), "{state:?}");
    let handle = first.session.expect("a handle");
    let second = t
        .app
        .execute(
            session(
                "result = [paris_zone(), get_current_time(timezone='UTC')['timezone'], clock.__name__]",
                &handle,
            ),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        second.outcome.result,
        json!(["Europe/Paris", "UTC", "servers.time"]),
        "{:?} {:?}",
        second.outcome.error,
        second.state
    );
    t.app.shutdown_all().await;
}
