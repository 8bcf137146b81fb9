//! API keys, private keys and labelled secrets.

use super::*;

#[test]
fn provider_keys_are_found() {
    let ghp = format!("ghp_{}", "aB3".repeat(12));
    let pat = format!("github_pat_{}", "Zx9_".repeat(20) + "ab");
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----";
    let table: Vec<(String, PiiKind, String)> = vec![
        (
            "key AKIAIOSFODNN7EXAMPLE here".into(),
            ApiKey,
            "AKIAIOSFODNN7EXAMPLE".into(),
        ),
        (
            "ASIAY34FZKBOKMUTVV7A".into(),
            ApiKey,
            "ASIAY34FZKBOKMUTVV7A".into(),
        ),
        (format!("token {ghp}"), ApiKey, ghp.clone()),
        (format!("export GITHUB_TOKEN={ghp}"), ApiKey, ghp.clone()),
        (pat.clone(), ApiKey, pat.clone()),
        (
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".into(),
            ApiKey,
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".into(),
        ),
        (
            "OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z".into(),
            ApiKey,
            "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z".into(),
        ),
        (
            "Stripe('sk_live_4eC39HqLyjWDarjtT1zdp7dc')".into(),
            ApiKey,
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc".into(),
        ),
        (
            "rk_test_51H8b2cLkdIwHu7ix".into(),
            ApiKey,
            "rk_test_51H8b2cLkdIwHu7ix".into(),
        ),
        (
            "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q".into(),
            ApiKey,
            "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q".into(),
        ),
        (format!("Authorization: Bearer {jwt}"), ApiKey, jwt.into()),
        (format!("key:\n{pem}\n"), ApiKey, pem.into()),
    ];
    for (text, kind, value) in &table {
        assert_eq!(found(text), vec![(*kind, value.as_str())], "in {text:?}");
    }
}

#[test]
fn secrets_after_a_label_are_found() {
    let table: Vec<(String, PiiKind, String)> = vec![
        ("password=hunter2x".into(), ApiKey, "hunter2x".into()),
        (
            "api_key: 'a1b2c3d4e5f6a7b8c9d0'".into(),
            ApiKey,
            "a1b2c3d4e5f6a7b8c9d0".into(),
        ),
        ("DB_PASSWORD=S3cr3t!x".into(), ApiKey, "S3cr3t!x".into()),
        (
            "\"client_secret\": \"9f8e7d6c5b4a39281706f5e4d3c2b1a0\"".into(),
            ApiKey,
            "9f8e7d6c5b4a39281706f5e4d3c2b1a0".into(),
        ),
        (
            "Authorization: Bearer abcDEF123456ghiJKL789".into(),
            ApiKey,
            "abcDEF123456ghiJKL789".into(),
        ),
        (
            "db=postgres://app:pa55w0rdX@db.internal:5432/x".into(),
            ApiKey,
            "pa55w0rdX".into(),
        ),
        (
            "{\\\"password\\\":\\\"Xy7pq9Lm\\\"}".into(),
            ApiKey,
            "Xy7pq9Lm".into(),
        ),
        (
            "curl 'https://x.io/export?token=8f14e45fceea167a5a36dedd4bea2543&format=csv'".into(),
            ApiKey,
            "8f14e45fceea167a5a36dedd4bea2543".into(),
        ),
    ];
    for (text, kind, value) in &table {
        assert_eq!(found(text), vec![(*kind, value.as_str())], "in {text:?}");
    }
}

#[test]
fn placeholders_and_code_are_no_secrets() {
    assert_none(&[
        "api_key=${OPENAI_API_KEY}",
        "password: ********",
        "token: <your-token>",
        "api_key: your_api_key_here",
        "password = os.environ['DB_PASSWORD']",
        "token = tokenizer.encode(text)",
        "token_count=4096, max_tokens: 1024",
        "secret_santa: true",
        "password: secret",
        "password: CString",
        "password: format!(\"{user}:{pass}\")",
        "token_type=Bearer",
        "dot2_token: node.dot2_token,",
        "secret = proc_macro2::TokenStream::new()",
        "ty: _bindgen_ty_5",
        "token_expiry=2024-01-15T12:00:00Z",
        "password_changed_at: 1705312245",
        "auth_token_ttl=3600abc1234567",
        "secret_name: prod-db-1a2b3c4d5e",
        "pwd=/home/app/project",
        "password_reset_url=https://example.com/reset",
        "headers = {\"Authorization\": f\"Bearer {token}\"}",
        "pip install scikit-learn; see sk-learn-tutorial-notebooks-2024",
        "pk_live_51H8b2cLkdIwHu7ixYz3NqK9a",
        "AKIA1234",
    ]);
}
