//! Catalogue cases 36-39, information leaks: the server's environment, a canary left in `/tmp`,
//! host paths in mountinfo, and another instance's workspace, skills and PII tokens. One file per
//! family of the catalogue, so a case is found by its number (the map is in `main.rs`).

use std::time::Duration;

use code_execution_mcp::config::ImageProfile;
use serde_json::{Value, json};

use crate::common::host_watch::{HostWatch, spawned_dirs};
use crate::common::{self, assert_ok, call_tool, mcp_client};
use crate::harness::{gvisor, token, verdict, watched, watched_with};

/// 36. "The server's environment (tokens, secrets) → absent from the sandbox's environ and
///     /proc/1/environ."
///
/// The server binary is started with secrets in its environment (and a setting of its own);
/// sandbox code looks for them in its environment and in every /proc/PID/environ it can read.
#[tokio::test]
async fn case_36_the_servers_environment_never_reaches_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let watch = HostWatch::new(dir.path(), &spawned_dirs(dir.path()));
    let marker = format!("CEMLEAK{}", uuid::Uuid::new_v4().simple());
    let secrets = [
        ("CEM_TEST_API_TOKEN", format!("{marker}-token")),
        ("AWS_SECRET_ACCESS_KEY", format!("{marker}-aws")),
        ("GITHUB_TOKEN", format!("{marker}-github")),
        ("ANTHROPIC_API_KEY", format!("{marker}-anthropic")),
        ("CEM_MAX_QUEUE", "17".to_string()),
    ];
    let env: Vec<(&str, &str)> = secrets.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (mut child, client) =
        common::spawn_server_with(dir.path(), &env, &["--pool-size", "1"]).await;
    let pid = child.id().unwrap();
    let names: Vec<&str> = secrets.iter().map(|(k, _)| *k).collect();
    let code = include_str!("probes/case_36_environ.py");
    for _ in 0..2 {
        let (err, v) = call_tool(
            &client,
            "execute_code",
            json!({"code": code, "context_vars": {"marker": marker, "names": names}}),
        )
        .await;
        assert!(!err, "{v}");
        let r = &v["result"];
        assert_eq!(r["environ_values"], json!([]), "{r}");
        assert_eq!(r["environ_names"], json!([]), "{r}");
        assert_eq!(r["proc"], json!({}), "{r}");
        assert!(
            r["readable_environs"].as_u64().unwrap() >= 2,
            "PID 1 and self: {r}"
        );
        assert_eq!(
            r["has_path"], true,
            "the check reads a real environment: {r}"
        );
    }
    client.cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the server exits when its client goes")
        .unwrap();
    assert!(status.success(), "{status}");
    assert_eq!(common::containers_of(pid).await, Vec::<String>::new());
    watch.check();
}

/// 37. "A canary written to /tmp in one execution → absent in the next; invisible to concurrent
///     executions."
///
/// The canary goes to /tmp, /dev/shm and an abstract unix socket; a concurrent execution and
/// the next one look for all three.
#[tokio::test]
async fn case_37_a_canary_in_tmp_is_gone_next_time_and_invisible_to_concurrent_executions() {
    watched(async |t, _| {
        let ws = t.workspace();
        let canary = token("case37");
        let writer = include_str!("probes/case_37_tmp_canary_writer.py");
        let looker = include_str!("probes/case_37_tmp_canary_looker.py");
        let ctx = json!({ "canary": canary });
        let first = t
            .start_in_background(writer, ctx.clone(), "ready", "the writer")
            .await;
        let check = |v: &Value, when: &str| {
            // A fresh container's /tmp holds only what its own harness puts there at start:
            // matplotlib's config directory on the data image (the font cache, copied from
            // the image). Nothing of the writer's.
            let own: &[&str] = if t.app.config().sandbox.image_profile == ImageProfile::Data {
                &["matplotlib"]
            } else {
                &[]
            };
            assert_eq!(v["tmp"], json!(own), "{when}: {v}");
            assert_eq!(v["shm"], json!([]), "{when}: {v}");
            assert_eq!(v["in_unix_table"], false, "{when}: {v}");
            assert_eq!(v["socket"], "ECONNREFUSED", "{when}: {v}");
        };
        check(&verdict(t, looker, ctx.clone()).await, "concurrently");
        std::fs::write(ws.join("go"), "1").unwrap();
        let o = first.await.unwrap().unwrap().outcome;
        assert_ok(&o);
        assert_eq!(
            o.result,
            json!({"tmp": true, "shm": true}),
            "the canary existed"
        );
        check(&verdict(t, looker, ctx).await, "next");
    })
    .await;
}

/// 38. "`/proc/self/mountinfo` → host paths in it reveal no user or tenant names beyond the
///     workspace itself."
///
/// Beyond the workspace and skills mounts' own host paths, mountinfo names neither this
/// server's other directories, nor another server's, nor a home directory or a host user.
#[tokio::test]
async fn case_38_mountinfo_reveals_no_host_paths_beyond_the_workspace() {
    watched_with(
        |c| c.pii.pii_output = code_execution_mcp::config::PiiOutput::Off,
        async |t, watch| {
            watched(async |_, other_watch| {
                let v = verdict(t, "result = open('/proc/self/mountinfo').read()", json!({})).await;
                let mut rest = v.as_str().unwrap().to_string();
                let ws = t.workspace().canonicalize().unwrap();
                let skills = t.app.skills_dir().canonicalize().unwrap();
                // The package cache's sets, beside the skills under the data directory: the
                // same directory the skills path shows already.
                let sets = (t.app.config().storage.data_dir().join("packages/sets"))
                    .canonicalize()
                    .unwrap();
                // The containers' own state directories, beside the sessions (each shows only
                // its own, empty until a session's state is linked into it).
                let states = (t.app.config().storage.data_dir().join("sessions/.mounts"))
                    .canonicalize()
                    .unwrap();
                if gvisor(t) {
                    // gVisor's kernel shows its own mounts, by their place in the sandbox only.
                    assert!(
                        rest.contains(" /workspace "),
                        "the workspace mount is listed"
                    );
                    assert!(!rest.contains(ws.to_str().unwrap()), "{rest}");
                } else {
                    assert!(
                        rest.contains(ws.to_str().unwrap()),
                        "the workspace mount is listed"
                    );
                }
                for own in [&ws, &skills, &sets, &states] {
                    rest = rest.replace(own.to_str().unwrap(), "<own>");
                }
                let mut forbidden: Vec<String> = vec![
                    watch.root().display().to_string(),
                    watch.canary_dir().display().to_string(),
                    other_watch.root().display().to_string(),
                    "/home/".into(),
                ];
                if let Some(home) = std::env::var_os("HOME") {
                    let home = home.to_string_lossy().into_owned();
                    if home.len() > 1 {
                        forbidden.push(format!("{home}/"));
                    }
                }
                let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
                // Login users' home directories (not `/<name>/`: a user named `dev` would
                // match every `/dev/` device path).
                for line in passwd.lines() {
                    let fields: Vec<&str> = line.split(':').collect();
                    if fields.len() > 5
                        && fields[2]
                            .parse::<u32>()
                            .is_ok_and(|uid| (1000..60000).contains(&uid))
                        && fields[5].len() > 1
                    {
                        forbidden.push(format!("{}/", fields[5]));
                    }
                }
                for needle in &forbidden {
                    assert!(
                        !rest.contains(needle.as_str()),
                        "mountinfo names {needle}:\n{rest}"
                    );
                }
            })
            .await;
        },
    )
    .await;
}

/// 39. "Another tenant's workspace, skills, PII tokens (HTTP mode) → unreachable and
///     unguessable."
///
/// Here between two server instances with their own directories and PII secrets: the sandbox
/// of one cannot see the other's workspace or skills (not mounted, the paths absent), and
/// restore_pii on one never resolves tokens the other minted. Tenants of one HTTP server (the
/// same separation, plus sessions and bearer tokens) are tested in `tests/tenants.rs`.
#[tokio::test]
async fn case_39_another_instances_workspace_skills_and_tokens_are_out_of_reach() {
    watched(async |a, _| {
        watched(async |b, b_watch| {
            let a_client = mcp_client(a.app.clone()).await;
            let b_client = mcp_client(b.app.clone()).await;
            let marker = token("case39");
            let (err, v) = call_tool(
                &b_client,
                "write_workspace_file",
                json!({"filename": format!("{marker}.txt"), "content": "tenant b"}),
            )
            .await;
            assert!(!err, "{v}");
            let (err, v) = call_tool(
                &b_client,
                "save_skill",
                json!({"name": "tenant_b_only", "code": "def tenant_b_only():\n    return 'b'\n"}),
            )
            .await;
            assert!(!err, "{v}");
            std::fs::write(a.workspace().join("mine.txt"), "tenant a").unwrap();

            let look = include_str!("probes/case_39_other_instance.py");
            let b_paths = [
                b.workspace().canonicalize().unwrap(),
                b.app.skills_dir().canonicalize().unwrap(),
                b_watch.root().to_path_buf(),
            ];
            let v = verdict(a, look, json!({"marker": marker, "paths": b_paths})).await;
            assert!(
                v["paths"].as_object().unwrap().values().all(|e| e == false),
                "{v}"
            );
            assert_eq!(
                v["found"],
                json!(["/workspace/mine.txt"]),
                "only its own file: {v}"
            );
            assert_eq!(v["skill_file"], false);
            assert!(
                !v["skills"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("tenant_b_only")),
                "{v}"
            );
            assert!(v["load"].as_str().unwrap().contains("not found"), "{v}");
            assert_eq!(v["mounts"], json!([]), "{v}");
            // The positive control: B's sandbox sees B's skill.
            let v = verdict(
                b,
                "result = __import__('os').path.exists('/skills/tenant_b_only.py')",
                json!({}),
            )
            .await;
            assert_eq!(v, true);

            // PII tokens: the same value gets different tokens on each server, and neither resolves the
            // other's.
            let value = "ann.lee@example.com";
            let mint = |client| async move {
                let (err, v) = call_tool(client, "sanitize_pii", json!({ "text": value })).await;
                assert!(!err, "{v}");
                v["sanitized_text"].as_str().unwrap().to_string()
            };
            let (a_token, b_token) = (mint(&a_client).await, mint(&b_client).await);
            assert!(a_token.starts_with("[EMAIL_") && b_token.starts_with("[EMAIL_"));
            assert_ne!(a_token, b_token, "tokens are keyed per server");
            for (client, own, foreign) in [
                (&a_client, &a_token, &b_token),
                (&b_client, &b_token, &a_token),
            ] {
                let (_, v) = call_tool(client, "restore_pii", json!({ "text": foreign })).await;
                assert_eq!(v["restored_text"], foreign.as_str(), "{v}");
                assert_eq!(v["restored"], 0);
                assert_eq!(v["unknown"], 1);
                let (_, v) = call_tool(client, "restore_pii", json!({ "text": own })).await;
                assert_eq!(v["restored_text"], value, "the positive control");
            }
            a_client.cancel().await.unwrap();
            b_client.cancel().await.unwrap();
        })
        .await;
    })
    .await;
}
