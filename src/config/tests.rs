use std::path::PathBuf;

use super::*;

/// Every flag of `serve` and its environment variable: grouping the configuration must not
/// change a name a user or a deployment relies on.
const FLAGS: &[(&str, &str)] = &[
    ("transport", "CEM_TRANSPORT"),
    ("listen", "CEM_LISTEN"),
    ("public-url", "CEM_PUBLIC_URL"),
    ("oauth-issuer", "CEM_OAUTH_ISSUER"),
    ("oauth-tenants", "CEM_OAUTH_TENANTS"),
    ("oauth-tenant-claim", "CEM_OAUTH_TENANT_CLAIM"),
    ("oauth-scopes", "CEM_OAUTH_SCOPES"),
    ("oauth-introspection", "CEM_OAUTH_INTROSPECTION"),
    (
        "oauth-introspection-credentials",
        "CEM_OAUTH_INTROSPECTION_CREDENTIALS",
    ),
    ("oauth-jwks-max-age-secs", "CEM_OAUTH_JWKS_MAX_AGE_SECS"),
    ("data-dir", "CEM_DATA_DIR"),
    ("shared-data", "CEM_SHARED_DATA"),
    ("node-name", "CEM_NODE_NAME"),
    ("workspace", "CEM_WORKSPACE"),
    ("workspace-quota-mb", "CEM_WORKSPACE_QUOTA_MB"),
    ("skills-dir", "CEM_SKILLS_DIR"),
    ("registry-dir", "CEM_REGISTRY_DIR"),
    ("discovery", "CEM_DISCOVERY"),
    ("discovery-model", "CEM_DISCOVERY_MODEL"),
    ("image", "CEM_IMAGE"),
    ("image-profile", "CEM_IMAGE_PROFILE"),
    ("preload", "CEM_PRELOAD"),
    ("base-image", "CEM_BASE_IMAGE"),
    ("image-tree", "CEM_IMAGE_TREE"),
    ("image-tree-dir", "CEM_IMAGE_TREE_DIR"),
    ("default-timeout-secs", "CEM_DEFAULT_TIMEOUT_SECS"),
    ("max-timeout-secs", "CEM_MAX_TIMEOUT_SECS"),
    ("start-timeout-secs", "CEM_START_TIMEOUT_SECS"),
    ("default-memory-mb", "CEM_DEFAULT_MEMORY_MB"),
    ("max-memory-mb", "CEM_MAX_MEMORY_MB"),
    ("allow-unenforced-limits", "CEM_ALLOW_UNENFORCED_LIMITS"),
    ("max-concurrency", "CEM_MAX_CONCURRENCY"),
    ("tenant-max-concurrency", "CEM_TENANT_MAX_CONCURRENCY"),
    ("tenant-uid-range", "CEM_TENANT_UID_RANGE"),
    ("pool-size", "CEM_POOL_SIZE"),
    ("pool-max", "CEM_POOL_MAX"),
    ("pool-idle-secs", "CEM_POOL_IDLE_SECS"),
    ("removal-backlog", "CEM_REMOVAL_BACKLOG"),
    ("session-max-mb", "CEM_SESSION_MAX_MB"),
    ("session-max-count", "CEM_SESSION_MAX_COUNT"),
    ("session-idle-secs", "CEM_SESSION_IDLE_SECS"),
    ("session-history", "CEM_SESSION_HISTORY"),
    ("packages", "CEM_PACKAGES"),
    ("packages-index", "CEM_PACKAGES_INDEX"),
    ("packages-ca-file", "CEM_PACKAGES_CA_FILE"),
    ("packages-wheelhouse", "CEM_PACKAGES_WHEELHOUSE"),
    ("packages-max-mb", "CEM_PACKAGES_MAX_MB"),
    ("packages-cache-mb", "CEM_PACKAGES_CACHE_MB"),
    ("packages-timeout-secs", "CEM_PACKAGES_TIMEOUT_SECS"),
    ("packages-policy", "CEM_PACKAGES_POLICY"),
    ("max-queue", "CEM_MAX_QUEUE"),
    ("max-code-bytes", "CEM_MAX_CODE_BYTES"),
    ("max-output-bytes", "CEM_MAX_OUTPUT_BYTES"),
    ("max-result-bytes", "CEM_MAX_RESULT_BYTES"),
    ("max-images", "CEM_MAX_IMAGES"),
    ("image-max-side", "CEM_IMAGE_MAX_SIDE"),
    ("image-max-kb", "CEM_IMAGE_MAX_KB"),
    ("pids-limit", "CEM_PIDS_LIMIT"),
    ("tmpfs-mb", "CEM_TMPFS_MB"),
    ("pii-output", "CEM_PII_OUTPUT"),
    ("pii-vault-size", "CEM_PII_VAULT_SIZE"),
    ("pii-key-file", "CEM_PII_KEY_FILE"),
    ("max-file-mb", "CEM_MAX_FILE_MB"),
    ("tokens-file", "CEM_TOKENS_FILE"),
    ("tokens", "CEM_TOKENS"),
    ("allowed-hosts", "CEM_ALLOWED_HOSTS"),
    ("allowed-origins", "CEM_ALLOWED_ORIGINS"),
    ("runtime", "CEM_RUNTIME"),
    ("upstreams", "CEM_UPSTREAMS"),
    ("max-tool-calls", "CEM_MAX_TOOL_CALLS"),
    ("tool-call-timeout-secs", "CEM_TOOL_CALL_TIMEOUT_SECS"),
    ("max-tool-result-mb", "CEM_MAX_TOOL_RESULT_MB"),
    ("max-concurrent-tool-calls", "CEM_MAX_CONCURRENT_TOOL_CALLS"),
    (
        "upstream-connect-timeout-secs",
        "CEM_UPSTREAM_CONNECT_TIMEOUT_SECS",
    ),
    ("confirm-wait-secs", "CEM_CONFIRM_WAIT_SECS"),
    ("plan-max-calls", "CEM_PLAN_MAX_CALLS"),
    ("plan-max-bytes", "CEM_PLAN_MAX_BYTES"),
    ("egress-ca-file", "CEM_EGRESS_CA_FILE"),
    ("egress-max-requests", "CEM_EGRESS_MAX_REQUESTS"),
    ("egress-max-bytes-in-mb", "CEM_EGRESS_MAX_BYTES_IN_MB"),
    ("egress-max-bytes-out-mb", "CEM_EGRESS_MAX_BYTES_OUT_MB"),
    ("egress-max-connections", "CEM_EGRESS_MAX_CONNECTIONS"),
    ("egress-max-response-mb", "CEM_EGRESS_MAX_RESPONSE_MB"),
    ("egress-max-scanned-mb", "CEM_EGRESS_MAX_SCANNED_MB"),
    ("egress-timeout-seconds", "CEM_EGRESS_TIMEOUT_SECONDS"),
    ("egress-socket-dir", "CEM_EGRESS_SOCKET_DIR"),
    ("upload-max-mb", "CEM_UPLOAD_MAX_MB"),
    ("link-ttl-secs", "CEM_LINK_TTL_SECS"),
    ("uploads-concurrent", "CEM_UPLOADS_CONCURRENT"),
    ("upload-mb-per-hour", "CEM_UPLOAD_MB_PER_HOUR"),
    ("links-listen", "CEM_LINKS_LISTEN"),
    ("links-key-file", "CEM_LINKS_KEY_FILE"),
    ("metrics-listen", "CEM_METRICS_LISTEN"),
    ("audit", "CEM_AUDIT"),
    ("audit-code", "CEM_AUDIT_CODE"),
    ("audit-required", "CEM_AUDIT_REQUIRED"),
    ("audit-max-mb", "CEM_AUDIT_MAX_MB"),
    ("audit-keep", "CEM_AUDIT_KEEP"),
];

#[test]
fn flags_and_environment_variables_keep_their_names() {
    use clap::CommandFactory;
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        config: Config,
    }
    let command = Wrapper::command();
    let mut found: Vec<(String, String)> = command
        .get_arguments()
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_string();
            Some((a.get_long()?.to_string(), env))
        })
        .collect();
    found.sort();
    let mut expected: Vec<(String, String)> = FLAGS
        .iter()
        .map(|(f, e)| (f.to_string(), e.to_string()))
        .collect();
    expected.sort();
    assert_eq!(found, expected);
}

#[test]
fn defaults_are_valid_and_match_the_original_limits() {
    let c = Config::defaults();
    c.validate().unwrap();
    assert_eq!(c.limits.default_timeout_secs, 30);
    assert_eq!(c.limits.default_memory_mb, 500);
    assert_eq!(
        c.sandbox.start_timeout(),
        crate::sandbox::DEFAULT_START_LIMIT
    );
    assert_eq!(c.transport.transport, Transport::Stdio);
    assert_eq!(c.pii.pii_output, PiiOutput::Tokenize, "privacy by default");
    assert_eq!(c.storage.workspace_quota_bytes(), 1 << 30);
    assert!(
        c.operations.audit_settings().is_some(),
        "the audit trail is on"
    );
    assert_eq!(c.operations.metrics_listen, None, "metrics are off");
    assert_eq!(
        c.tenants.tenant_uid_range,
        crate::tenancy::uid::DEFAULT_RANGE
    );
    let c = Config::try_from_args(["--tenant-uid-range", "200000-265535"]).unwrap();
    assert_eq!(c.tenants.tenant_uid_range.to_string(), "200000-265535");
}

#[test]
fn audit_flags_parse_and_need_the_trail() {
    let c = Config::try_from_args(["--audit", "false"]).unwrap();
    assert_eq!(c.operations.audit_settings(), None);
    let c = Config::try_from_args(["--audit"]).unwrap();
    assert!(c.operations.audit_settings().is_some());
    let c =
        Config::try_from_args(["--audit-code", "--audit-required", "--audit-max-mb", "8"]).unwrap();
    let settings = c.operations.audit_settings().unwrap();
    assert!(settings.include_code && settings.required);
    assert_eq!(settings.max_file_bytes, 8 << 20);
    let c = Config::try_from_args(["--audit", "false", "--audit-required"]).unwrap();
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("--audit false")
    );
    assert!(Config::try_from_args(["--audit-max-mb", "0"]).is_err());
    let c = Config::try_from_args(["--metrics-listen", "127.0.0.1:9464"]).unwrap();
    assert_eq!(
        c.operations.metrics_listen,
        Some("127.0.0.1:9464".parse().unwrap())
    );
}

#[test]
fn preload_is_learned_unless_given_and_is_checked() {
    use crate::sandbox::pool::preload::Preload;
    let mut c = Config::defaults();
    c.sandbox.preload = None;
    assert_eq!(c.sandbox.preload(), Preload::Learned);
    c.sandbox.preload = Some(vec![String::new()]);
    assert_eq!(
        c.sandbox.preload(),
        Preload::Learned,
        "empty means the default"
    );
    c.sandbox.preload = Some(vec!["auto".into()]);
    assert_eq!(c.sandbox.preload(), Preload::Learned);
    c.sandbox.preload = Some(vec!["none".into()]);
    assert_eq!(c.sandbox.preload(), Preload::Fixed(Vec::new()));
    c.sandbox.preload = Some(vec![" matplotlib.pyplot ".into(), "scipy".into()]);
    assert_eq!(
        c.sandbox.preload(),
        Preload::Fixed(vec!["matplotlib.pyplot".into(), "scipy".into()])
    );
    c.validate().unwrap();
    for bad in ["os; rm -rf /", "1abc", "a..b", "a-b"] {
        c.sandbox.preload = Some(vec![bad.into()]);
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("--preload"), "{bad}: {err}");
    }
}

#[test]
fn validate_names_the_flag_to_change() {
    let mut c = Config::defaults();
    c.sandbox.runtime = Some("../runsc".into());
    assert!(c.validate().unwrap_err().to_string().contains("--runtime"));
    let mut c = Config::defaults();
    c.limits.default_timeout_secs = 900;
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("--default-timeout-secs"), "{err}");
    let mut c = Config::defaults();
    c.pool.pool_max = 2;
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("--pool-max 2 is below --pool-size 4"), "{err}");
}

#[test]
fn out_of_range_values_are_refused_while_parsing_naming_the_flag() {
    for (flag, bad) in [
        ("--max-concurrency", "0"),
        ("--tenant-max-concurrency", "0"),
        ("--start-timeout-secs", "0"),
        ("--start-timeout-secs", "601"),
        ("--max-timeout-secs", "86401"),
        ("--max-images", "65"),
        ("--image-max-side", "63"),
        ("--max-tool-result-mb", "7"),
        ("--pool-size", "65"),
        ("--pids-limit", "15"),
        ("--tmpfs-mb", "0"),
        ("--pii-vault-size", "0"),
        ("--max-code-bytes", "0"),
        ("--tenant-uid-range", "10001-70000"),
        ("--tenant-uid-range", "70000"),
        ("--egress-max-requests", "0"),
        ("--egress-max-connections", "1025"),
        ("--egress-max-response-mb", "0"),
        ("--egress-max-bytes-in-mb", "1048577"),
        ("--egress-max-bytes-out-mb", "0"),
        ("--egress-timeout-seconds", "86401"),
    ] {
        let err = Config::try_from_args([flag, bad]).unwrap_err().to_string();
        assert!(
            err.contains(flag) && err.contains(bad),
            "{flag} {bad}: {err}"
        );
    }
    let ok = Config::try_from_args(["--max-concurrency", "8", "--pool-max", "64"]).unwrap();
    assert_eq!((ok.pool.max_concurrency, ok.pool.pool_max), (8, 64));
}

#[test]
fn a_configuration_built_in_code_is_held_to_the_same_ranges() {
    let mut c = Config::defaults();
    c.pool.max_concurrency = 0;
    let err = c.validate().unwrap_err().to_string();
    assert_eq!(err, "--max-concurrency 0 must be at least 1");
    let mut c = Config::defaults();
    c.limits.max_images = 65;
    let err = c.validate().unwrap_err().to_string();
    assert_eq!(err, "--max-images 65 must be between 0 and 64");
    for adjust in [
        (|c: &mut Config| c.sandbox.pids_limit = 15) as fn(&mut Config),
        |c| c.sandbox.tmpfs_mb = 0,
        |c| c.pii.pii_vault_size = 0,
        |c| c.gateway.max_tool_result_mb = 7,
        |c| c.tenants.tenant_max_concurrency = Some(0),
        |c| c.pool.pool_size = 65,
        |c| c.egress.egress_max_connections = 0,
        |c| c.egress.egress_timeout_seconds = 0,
    ] {
        let mut c = Config::defaults();
        adjust(&mut c);
        assert!(matches!(c.validate(), Err(ConfigError::OutOfRange { .. })));
    }
}

#[test]
fn tokens_need_http_and_the_data_dir() {
    let tokens = Some(Secret("alice:".to_string() + &"a".repeat(40)));
    let mut c = Config::defaults();
    c.tenants.tokens = tokens.clone();
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("--transport http"), "{err}");
    c.transport.transport = Transport::Http;
    c.validate().unwrap();
    c.storage.workspace = Some("/srv/ws".into());
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("--data-dir"), "{err}");
    // The secret never shows in Debug output.
    assert!(!format!("{c:?}").contains(&"a".repeat(40)));
    let mut c = Config::defaults();
    c.storage.data_dir = Some("/srv/cem".into());
    assert_eq!(
        c.storage.workspace_dir(),
        PathBuf::from("/srv/cem/workspace")
    );
    assert_eq!(c.storage.skills_dir(), PathBuf::from("/srv/cem/skills"));
    assert!(!c.tenants.has_tokens());
}

#[test]
fn the_tenant_limit_defaults_to_and_never_exceeds_the_server_limit() {
    let mut c = Config::defaults();
    assert_eq!(c.tenant_max_concurrency(), c.pool.max_concurrency);
    c.tenants.tokens = Some(Secret("alice:".to_string() + &"a".repeat(40)));
    assert_eq!(c.tenant_max_concurrency(), c.pool.max_concurrency / 2);
    c.tenants.tenant_max_concurrency = Some(2);
    assert_eq!(c.tenant_max_concurrency(), 2);
    c.tenants.tenant_max_concurrency = Some(64);
    assert_eq!(c.tenant_max_concurrency(), c.pool.max_concurrency);
}

#[test]
fn allowed_hosts_are_names_or_a_lone_star() {
    let mut c = Config::defaults();
    c.transport.allowed_hosts = vec!["mcp.example.com".into(), "10.0.0.5:8080".into()];
    c.validate().unwrap();
    c.transport.allowed_hosts = vec!["*".into()];
    c.validate().unwrap();
    for bad in ["mcp.example.com:*", "", "http://x"] {
        c.transport.allowed_hosts = vec![bad.into()];
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("--allowed-hosts"), "{bad}: {err}");
    }
}

#[test]
fn packages_flags_are_checked_and_the_index_flag_wins() {
    let parse = |args: &[&str]| Config::try_from_args(args.iter().copied()).unwrap();
    let c = parse(&["--packages-max-mb", "100", "--packages-cache-mb", "50"]);
    assert!(matches!(c.validate(), Err(ConfigError::Conflict(_))));
    let c = parse(&["--packages-index", "ftp://example.com/simple"]);
    assert!(matches!(
        c.validate(),
        Err(ConfigError::Invalid {
            flag: "--packages-index",
            ..
        })
    ));
    let c = parse(&["--packages-index", "https://index.example/simple"]);
    c.validate().unwrap();
    let env = c.packages.installer_env();
    assert!(
        env.contains(&"PIP_INDEX_URL=https://index.example/simple".to_string()),
        "{env:?}"
    );
    assert!(c.packages.source().contains("https://index.example/simple"));
    assert_eq!(c.packages.index_urls()[0], "https://index.example/simple");
    assert!(
        !env.iter().any(|v| v.to_ascii_uppercase().contains("PROXY")),
        "{env:?}"
    );
    // An empty value (compose's unset variable) is no index.
    let c = parse(&["--packages-index", ""]);
    c.validate().unwrap();
    assert!(!c.packages.source().contains("PIP_INDEX_URL=\n"));
    let wheels = tempfile::tempdir().unwrap();
    let c = parse(&["--packages-wheelhouse", wheels.path().to_str().unwrap()]);
    c.validate().unwrap();
    assert!(
        c.packages.installer_env().is_empty(),
        "no network settings offline"
    );
    assert_eq!(c.packages.ca_file(), None);
    assert!(c.packages.index_urls().is_empty(), "no way out offline");
    assert!(!parse(&["--packages", "off"]).packages.enabled());
}

/// A CA certificate (self-signed, P-256, valid until 2126) for `--egress-ca-file`.
const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBkTCCATegAwIBAgIUHy9hR2x/D9iFJp4cxpIAb7UDoGcwCgYIKoZIzj0EAwIw
HTEbMBkGA1UEAwwSY2VtIGVncmVzcyB0ZXN0IENBMCAXDTI2MTIwMTIzMTgyMVoY
DzIxMjYxMTA3MjMxODIxWjAdMRswGQYDVQQDDBJjZW0gZWdyZXNzIHRlc3QgQ0Ew
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARp8WAQuk4UCSLB9YYx3lIPeUH67sZ/
FAH0umzzkCSNBuwH5qIAfiPCQsTLzj/6ulJM0aA/CydS104yeM4Y+9S2o1MwUTAd
BgNVHQ4EFgQUi/pBavXro24DezN8T+sBdRnlbOswHwYDVR0jBBgwFoAUi/pBavXr
o24DezN8T+sBdRnlbOswDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBF
AiAIS45YIBiGHYBgFh8MOPdWxMC7ybchV7LqD6aoPKtvZAIhAKR5maARAB+rXLTT
xv6H9dUcuIOHgMzn+P4n2wUv7+Au
-----END CERTIFICATE-----
";

#[test]
fn egress_flags_default_convert_and_allow_responses_past_a_gibibyte() {
    let c = Config::defaults();
    let limits = c.egress.limits();
    assert_eq!(limits.max_requests, 256);
    assert_eq!(limits.max_bytes_in, 4096 << 20);
    assert_eq!(limits.max_bytes_out, 64 << 20);
    assert_eq!(limits.max_connections, 16);
    assert_eq!(limits.max_response_bytes, 2048 << 20);
    assert!(limits.max_response_bytes > 1 << 30);
    assert_eq!(limits.timeout, std::time::Duration::from_secs(300));
    assert!(c.egress.extra_roots().unwrap().is_empty());
    assert!(c.egress.socket_dir().is_absolute());
    let c = Config::try_from_args([
        "--egress-max-response-mb",
        "16384",
        "--egress-max-bytes-in-mb",
        "16384",
        "--egress-timeout-seconds",
        "3600",
        "--egress-socket-dir",
        "/run/cem-egress",
    ])
    .unwrap();
    c.validate().unwrap();
    assert_eq!(c.egress.limits().max_response_bytes, 16 << 30);
    assert_eq!(c.egress.socket_dir(), PathBuf::from("/run/cem-egress"));
    // An empty value (compose's unset variable) is the default.
    let mut c = Config::defaults();
    c.egress.egress_socket_dir = Some(PathBuf::new());
    c.egress.egress_ca_file = Some(PathBuf::new());
    c.validate().unwrap();
    assert_eq!(
        c.egress.socket_dir(),
        Config::defaults().egress.socket_dir()
    );
}

#[test]
fn egress_flags_that_do_not_fit_say_which_to_change() {
    let parse = |args: &[&str]| Config::try_from_args(args.iter().copied()).unwrap();
    let err = |c: Config| c.validate().unwrap_err().to_string();
    let e = err(parse(&["--egress-max-response-mb", "8192"]));
    assert!(
        e.contains("--egress-max-response-mb 8192") && e.contains("--egress-max-bytes-in-mb 4096"),
        "{e}"
    );
    let e = err(parse(&["--egress-socket-dir", "run/cem"]));
    assert!(
        e.contains("--egress-socket-dir") && e.contains("absolute"),
        "{e}"
    );
    let long = format!("/{}", "d".repeat(70));
    let e = err(parse(&["--egress-socket-dir", &long]));
    assert!(e.contains("longer than 64 bytes"), "{e}");
    let data = tempfile::tempdir().unwrap();
    let inside = data.path().join("egress");
    let args = [
        "--data-dir",
        data.path().to_str().unwrap(),
        "--egress-socket-dir",
        inside.to_str().unwrap(),
    ];
    parse(&args).validate().unwrap();
    let mut shared = parse(&args);
    shared.storage.shared_data = true;
    let e = err(shared);
    assert!(e.contains("inside the shared data directory"), "{e}");
}

#[test]
fn the_egress_ca_file_must_be_pem_with_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let with = |path: &std::path::Path| {
        Config::try_from_args(["--egress-ca-file", path.to_str().unwrap()]).unwrap()
    };
    let good = write("ca.pem", &format!("# a comment\n{TEST_CA}{TEST_CA}"));
    let c = with(&good);
    c.validate().unwrap();
    assert_eq!(c.egress.extra_roots().unwrap().len(), 2);
    for (path, words) in [
        (dir.path().join("missing.pem"), "cannot be read"),
        (write("empty.pem", ""), "holds no certificate"),
        (
            write(
                "key.pem",
                "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
            ),
            "holds no certificate",
        ),
        (write("cut.pem", &TEST_CA[..200]), "is not PEM"),
        (
            write(
                "junk.pem",
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            ),
            "certificate 1 is not usable",
        ),
    ] {
        let e = with(&path).validate().unwrap_err().to_string();
        assert!(
            e.starts_with("--egress-ca-file ")
                && e.contains(words)
                && e.contains("PEM file of CA certificates"),
            "{}: {e}",
            path.display()
        );
    }
}

#[test]
fn oauth_flags_parse_and_name_what_they_need() {
    let c = Config::try_from_args([
        "--transport=http",
        "--public-url=https://MCP.example.com/",
        "--oauth-issuer=https://idp.example.com/realms/team,https://login.example.org/",
        "--oauth-tenants=/etc/cem/oauth-tenants",
        "--oauth-tenant-claim=/realm_access/roles",
        "--oauth-scopes=mcp:run, mcp:read",
    ])
    .unwrap();
    c.validate().unwrap();
    assert!(c.has_tenants() && c.oauth.enabled());
    assert_eq!(c.oauth.oauth_issuers.len(), 2);
    let resource = c.oauth.resource().unwrap();
    assert_eq!(resource.resource, "https://mcp.example.com/mcp");
    assert_eq!(resource.host(), "mcp.example.com");
    assert_eq!(c.oauth.oauth_jwks_max_age_secs, 3600);
    // Each flag OAuth needs is named when it is missing or wrong.
    type Change = dyn Fn(&mut Config);
    let cases: [(&Change, &str); 8] = [
        (&|c| c.oauth.public_url = None, "--public-url"),
        (&|c| c.oauth.oauth_tenants = None, "--oauth-tenants"),
        (
            &|c| c.transport.transport = Transport::Stdio,
            "--oauth-issuer",
        ),
        (
            &|c| c.oauth.oauth_issuers = vec!["http://idp.example.com".into()],
            "https",
        ),
        (
            &|c| c.oauth.oauth_introspection = Some("https://idp.example.com/introspect".into()),
            "--oauth-introspection-credentials",
        ),
        (
            &|c| {
                c.oauth.oauth_issuers.clear();
                c.oauth.oauth_introspection = Some("https://idp.example.com/introspect".into());
            },
            "--oauth-issuer with --oauth-introspection",
        ),
        (
            &|c| c.oauth.oauth_tenant_claim = " ".into(),
            "--oauth-tenant-claim",
        ),
        (
            &|c| c.oauth.oauth_scopes = vec!["a b".into()],
            "--oauth-scopes",
        ),
    ];
    for (change, expected) in cases {
        let mut changed = c.clone();
        change(&mut changed);
        let err = changed.validate().unwrap_err().to_string();
        assert!(err.contains(expected), "{expected}: {err}");
    }
    let err = Config::try_from_args(["--oauth-jwks-max-age-secs=0"]).unwrap_err();
    assert!(err.to_string().contains("oauth-jwks-max-age-secs"), "{err}");
    // Without OAuth, --public-url alone is checked and serves nobody as tenants.
    let c = Config::try_from_args(["--public-url=http://mcp.example.com"]).unwrap();
    assert!(!c.has_tenants());
    let err = c.validate().unwrap_err().to_string();
    assert!(
        err.contains("--public-url") && err.contains("https"),
        "{err}"
    );
}
