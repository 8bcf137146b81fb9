//! Tests of the detectors: per kind, the values found and the hard negatives, then the overlap
//! priority, the span invariants and the validators' arithmetic. Apart from the detectors so
//! those read on their own.

use std::sync::OnceLock;

use super::finance::{iban_mod97_ok, luhn_ok, ssn_parts_ok};
use super::*;
use PiiKind::*;

fn detectors() -> &'static Detectors {
    static D: OnceLock<Detectors> = OnceLock::new();
    D.get_or_init(Detectors::new)
}

fn found(text: &str) -> Vec<(PiiKind, &str)> {
    detectors()
        .detect(text)
        .into_iter()
        .map(|d| (d.kind, &text[d.start..d.end]))
        .collect()
}

/// Each text holds exactly one value: `value`, of `kind`.
fn assert_single(table: &[(&str, PiiKind, &str)]) {
    for &(text, kind, value) in table {
        assert_eq!(found(text), vec![(kind, value)], "in {text:?}");
    }
}

fn assert_none(table: &[&str]) {
    for text in table {
        assert_eq!(found(text), vec![], "in {text:?}");
    }
}

#[test]
fn emails() {
    assert_single(&[
        (
            "contact ann.lee@example.com now",
            Email,
            "ann.lee@example.com",
        ),
        (
            "<bob+news@mail.example.co.uk>",
            Email,
            "bob+news@mail.example.co.uk",
        ),
        ("write to ANN@EXAMPLE.ORG.", Email, "ANN@EXAMPLE.ORG"),
        (
            "mailto:x_y-z@sub-domain.example.io",
            Email,
            "x_y-z@sub-domain.example.io",
        ),
        (
            "E-Mail: jörg.müller@beispiel.de",
            Email,
            "jörg.müller@beispiel.de",
        ),
        ("邮箱ann@example.cn。", Email, "ann@example.cn"),
        ("（联系：li.wei@example.com）", Email, "li.wei@example.com"),
        (
            "GET /u?email=ann%40example.com&x=1",
            Email,
            "ann%40example.com",
        ),
        ("weird..dots@example.com", Email, "dots@example.com"),
        ("{\"email\":\"a.b@c.io\"}", Email, "a.b@c.io"),
    ]);
    assert_none(&[
        "logo@2x.png",
        "icon@3x.jpg is retina",
        "user@localhost",
        "lodash@4.17.21",
        "@mention in chat",
        "a@b",
    ]);
}

#[test]
fn phones() {
    assert_single(&[
        ("call 415-555-0132 today", Phone, "415-555-0132"),
        ("(415) 555-0132", Phone, "(415) 555-0132"),
        ("at 415.555.0132.", Phone, "415.555.0132"),
        ("415 555 0132", Phone, "415 555 0132"),
        ("+1 415 555 0132", Phone, "+1 415 555 0132"),
        ("+1-415-555-0132", Phone, "+1-415-555-0132"),
        ("1-800-555-0199", Phone, "1-800-555-0199"),
        ("tel:+14155550132", Phone, "+14155550132"),
        ("+1 (415) 555-0132 ext. 12", Phone, "+1 (415) 555-0132"),
        ("phone: 4155550132", Phone, "4155550132"),
        ("\"phone_number\": \"4155550132\"", Phone, "4155550132"),
        ("Contact john at 555-123-4567", Phone, "555-123-4567"),
        ("+44 20 7946 0958", Phone, "+44 20 7946 0958"),
        ("+33 (0)1 42 68 53 00", Phone, "+33 (0)1 42 68 53 00"),
        ("+55 (11) 91234-5678", Phone, "+55 (11) 91234-5678"),
        ("+4915112345678", Phone, "+4915112345678"),
        ("+81-3-1234-5678", Phone, "+81-3-1234-5678"),
        ("电话 +86 138 0013 8000，", Phone, "+86 138 0013 8000"),
        (
            "call +44 20 7946 0958 after 3:15",
            Phone,
            "+44 20 7946 0958",
        ),
    ]);
    assert_eq!(
        found("+44 20 7946 0958 415-555-0132"),
        vec![(Phone, "+44 20 7946 0958"), (Phone, "415-555-0132")]
    );
    // A `)` that closes nothing ends the number before it; the digits after it are another.
    assert_eq!(
        found("tel: +86 138 015) 555 138 0013 8000"),
        vec![(Phone, "+86 138 015"), (Phone, "555 138 0013")]
    );
    assert_none(&[
        "order 4829104823", // ten bare digits without a phone word
        "ts=1705312245",    // epoch seconds
        "VRING_CALL: u32 = 2148052769",
        "123-456-7890", // area codes never start with 0 or 1
        "+15% growth, +100 points",
        "+9999-12-31", // expanded-year date
        "+262142-12-31",
        "1-800-FLOWERS",
        "SKU 555-1234",
        "ZIP 94107-1234",
        "2024-555-0132-9",
        "ref 3002 415114 0911", // separators after area and exchange: both or none
        "415-5550132",
    ]);
}

#[test]
fn ssns() {
    assert_single(&[
        ("ssn=123-45-6789;", Ssn, "123-45-6789"),
        ("SSN 123 45 6789", Ssn, "123 45 6789"),
        ("SSN: 123456789", Ssn, "123456789"),
        ("social security number 078051120", Ssn, "078051120"),
        ("{'ssn': '899-99-9999'}", Ssn, "899-99-9999"),
    ]);
    assert_none(&[
        "000-12-3456",
        "666-12-3456",
        "900-12-3456",
        "123-00-4567",
        "123-45-0000",
        "123456789", // bare, no label
        "routing 021000021",
        "1123-45-6789",
        "123-45-67890",
        "2024-01-15",
    ]);
}

#[test]
fn credit_cards() {
    assert_single(&[
        (
            "card 4111 1111 1111 1111 ok",
            CreditCard,
            "4111 1111 1111 1111",
        ),
        ("4111-1111-1111-1111", CreditCard, "4111-1111-1111-1111"),
        ("4111111111111111", CreditCard, "4111111111111111"),
        ("5500 0000 0000 0004", CreditCard, "5500 0000 0000 0004"),
        ("5500-0000-0000-0004", CreditCard, "5500-0000-0000-0004"),
        ("378282246310005", CreditCard, "378282246310005"),
        ("3782 822463 10005", CreditCard, "3782 822463 10005"),
        ("6011111111111117", CreditCard, "6011111111111117"),
        ("30569309025904", CreditCard, "30569309025904"),
        ("3530111333300000", CreditCard, "3530111333300000"),
        ("2221000000000009", CreditCard, "2221000000000009"),
        ("4222222222222", CreditCard, "4222222222222"),
        (
            "4111 1111 1111 1111 12/25",
            CreditCard,
            "4111 1111 1111 1111",
        ),
    ]);
    assert_none(&[
        "4111 1111 1111 1112", // Luhn
        "4111111111111112",
        "1234 5678 9012 3456",
        "0000 0000 0000 0000",  // Luhn-valid, no issuer
        "4111 1111-1111 1111",  // mixed separators
        "41111111111111110000", // 20 digits
        "card ending 4242",
        "ts_ms=1705312245123",
        "a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    ]);
}

#[test]
fn ip_addresses() {
    assert_single(&[
        ("from 10.0.0.1 port 22", IpAddress, "10.0.0.1"),
        ("192.168.1.254:8080", IpAddress, "192.168.1.254"),
        ("http://203.0.113.7/path", IpAddress, "203.0.113.7"),
        ("route 10.0.0.0/8", IpAddress, "10.0.0.0"),
        ("ping 8.8.8.8.", IpAddress, "8.8.8.8"),
        ("x 2001:db8::1 y", IpAddress, "2001:db8::1"),
        (
            "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
            IpAddress,
            "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        ),
        (
            "fe80::1ff:fe23:4567:890a",
            IpAddress,
            "fe80::1ff:fe23:4567:890a",
        ),
        ("::ffff:192.0.2.128", IpAddress, "::ffff:192.0.2.128"),
        ("[2001:db8::1]:443", IpAddress, "2001:db8::1"),
        ("fe80::1%eth0", IpAddress, "fe80::1"),
        (
            "from 2606:4700:4700::1111: icmp_seq=1",
            IpAddress,
            "2606:4700:4700::1111",
        ),
    ]);
    assert_none(&[
        "version 1.2.3",
        "v10.0.1.2",
        "1.2.3.4.5",
        "OID 1.3.6.1.4.1.311",
        "Version 4.2.0.1 released",
        "Chrome/120.0.0.0 Safari/537.36",
        "256.1.1.1",
        "192.168.1.300",
        "01.02.03.04",
        "12:30:45",
        "2024-01-15T12:30:45.123Z",
        "00:1A:2B:3C:4D:5E",
        "std::collections::HashMap",
        "x[1::2]",
        "a::b",
        "port 8080, localhost:5432",
    ]);
}

#[test]
fn api_keys_and_secrets() {
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

#[test]
fn ibans() {
    assert_single(&[
        (
            "IBAN DE89 3704 0044 0532 0130 00.",
            Iban,
            "DE89 3704 0044 0532 0130 00",
        ),
        ("DE89370400440532013000", Iban, "DE89370400440532013000"),
        (
            "to GB82 WEST 1234 5698 7654 32 EUR",
            Iban,
            "GB82 WEST 1234 5698 7654 32",
        ),
        ("GB82WEST12345698765432", Iban, "GB82WEST12345698765432"),
        (
            "FR14 2004 1010 0505 0001 3M02 606",
            Iban,
            "FR14 2004 1010 0505 0001 3M02 606",
        ),
        ("NL91ABNA0417164300,", Iban, "NL91ABNA0417164300"),
        (
            "CH93 0076 2011 6238 5295 7",
            Iban,
            "CH93 0076 2011 6238 5295 7",
        ),
        ("NO9386011117947", Iban, "NO9386011117947"),
    ]);
    assert_none(&[
        "DE00 3704 0044 0532 0130 00", // checksum
        "DE89 3704 0044 0532 0130",    // too short
        "XX89370400440532013000",      // no such country
        "DE893704 0044 0532 0130 00",  // irregular grouping
    ]);
    // Two IBANs in a row: the first does not swallow the second.
    assert_eq!(
        found("DE89 3704 0044 0532 0130 00 GB82 WEST 1234 5698 7654 32"),
        vec![
            (Iban, "DE89 3704 0044 0532 0130 00"),
            (Iban, "GB82 WEST 1234 5698 7654 32")
        ]
    );
}

#[test]
fn other_hard_negatives() {
    assert_none(&[
        "550e8400-e29b-41d4-a716-446655440000",
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "ORD-2024-004821, order #48213377, PO-7734120, INV-000482",
        "1Z999AA10123456784",
        "color #ff5733 and #FFF",
        "ISBN 978-0-306-40615-7, ISBN 0-306-40615-2",
        "on 2024-01-15, 01/15/2024, 15.01.2024 at 12:30",
        "ts=1705312245 ts_ms=1705312245123",
        "amount $12,345.67, 64 GiB, build 4521",
        "Python 3.11.7, node v20.11.1, nginx/1.25.3, Ubuntu 22.04.3 LTS",
        "rgba(255, 255, 255, 0.5)",
    ]);
}

#[test]
fn overlaps_resolve_to_the_most_specific_or_covering_match() {
    // An email's digits are not a phone.
    assert_eq!(
        found("ann.4155550132@example.com"),
        vec![(Email, "ann.4155550132@example.com")]
    );
    assert_eq!(
        found("4155550132@example.com"),
        vec![(Email, "4155550132@example.com")]
    );
    // A secret whose value is exactly a card number is a card.
    assert_eq!(
        found("card_token=4111111111111111"),
        vec![(CreditCard, "4111111111111111")]
    );
    // …and a value that is exactly an email is an email.
    assert_eq!(
        found("secret: ann.lee99@example.com"),
        vec![(Email, "ann.lee99@example.com")]
    );
    // A provider key as a key=value value: one API_KEY, the value.
    assert_eq!(
        found("\"api_key\": \"sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z\""),
        vec![(ApiKey, "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z")]
    );
    // A card number inside a longer secret value: the covering secret.
    assert_eq!(
        found("password=Visa4111111111111111x"),
        vec![(ApiKey, "Visa4111111111111111x")]
    );
    // An IPv4 tail belongs to its IPv6 address.
    assert_eq!(
        found("::ffff:10.0.0.1"),
        vec![(IpAddress, "::ffff:10.0.0.1")]
    );
    // An IBAN's digit groups are not a card or a phone.
    assert_eq!(
        found("BE68 5390 0754 7034"),
        vec![(Iban, "BE68 5390 0754 7034")]
    );
    // Adjacent values of different kinds are all found, in order.
    assert_eq!(
        found("SSN 123-45-6789, phone 415-555-0132, ip 10.1.2.3, ann@example.com"),
        vec![
            (Ssn, "123-45-6789"),
            (Phone, "415-555-0132"),
            (IpAddress, "10.1.2.3"),
            (Email, "ann@example.com"),
        ]
    );
    // The URL password is a secret and the part after `@` is not an email.
    assert_eq!(
        found("postgres://u:pw12345678@db.example.com/x"),
        vec![(ApiKey, "pw12345678")]
    );
    // What an email's candidate skipped before its local part is still scanned (found by
    // fuzzing: the phone and the card leaked).
    assert_eq!(
        found("电话415-555-0132邮箱ann@example.com"),
        vec![(Phone, "415-555-0132"), (Email, "ann@example.com")]
    );
    assert_eq!(
        found("卡4111-1111-1111-1111邮箱ann@example.com"),
        vec![
            (CreditCard, "4111-1111-1111-1111"),
            (Email, "ann@example.com")
        ]
    );
    assert_eq!(
        found("x 123-45-6789..bob@example.org"),
        vec![(Ssn, "123-45-6789"), (Email, "bob@example.org")]
    );
    // A password after an email as the user is a secret too, and the user an email (found
    // by fuzzing: with the user tokenized, a second pass found the password).
    assert_eq!(
        found("ftp://ann@example.com:s3cretPassw0rd@ftp.example.org/x"),
        vec![(Email, "ann@example.com"), (ApiKey, "s3cretPassw0rd")]
    );
    assert_eq!(
        found("https://ann@example.com:8080/x, bob@example.org").len(),
        2
    );
    // A scheme that begins with a key word is still a URL (found by fuzzing).
    assert_eq!(
        found("SECRETq8tp1s://admin:s3cretPassw0rd@db.example.com/x"),
        vec![(ApiKey, "s3cretPassw0rd")]
    );
    assert_eq!(
        found("secret: x1Yz9Qw7Lm3Kp"),
        vec![(ApiKey, "x1Yz9Qw7Lm3Kp")]
    );
    // A token's kind name is no label: the number after it is not a phone or an SSN (found
    // by fuzzing: sanitizing sanitized text tokenized it).
    assert_eq!(found("[PHONE_a8c0320c]~7777777777"), vec![]);
    assert_eq!(found("[SSN_abcdefab] 078051120"), vec![]);
    assert_eq!(found("phone~7777777777").len(), 1);
    assert_eq!(found("SSN 078051120").len(), 1);
    // A token standing for a URL password is not a password again (found by fuzzing:
    // sanitizing sanitized text wrapped the token in a second one).
    assert_eq!(
        found("https://admin:[API_KEY_868ee805]@db.example.com:5432/prod"),
        vec![]
    );
    // A token that took the scheme's colon (an IPv6 value ending in `::`) still marks a URL:
    // the password after it is no email (found by fuzzing: sanitized, the `://` was gone).
    let original = "fe80::1 ff:fe24:://ann@examplce.om3cP:rtseassw0rd@ftp.example.orG/x";
    assert_eq!(
        found(original),
        vec![(IpAddress, "fe80::1"), (IpAddress, "ff:fe24::")]
    );
    assert_eq!(
        found(
            "[IP_ADDRESS_adc280ad] [IP_ADDRESS_d6d6be8f]//ann@examplce.om3cP:rtseassw0rd@ftp.example.orG/x"
        ),
        vec![]
    );
}

#[test]
fn spans_are_sorted_disjoint_and_on_char_boundaries() {
    let text = "Zoë ann@example.com 电话 +86 138 0013 8000 ключ AKIAIOSFODNN7EXAMPLE 🙂 10.0.0.1 é";
    let ds = detectors().detect(text);
    assert_eq!(ds.len(), 4);
    for w in ds.windows(2) {
        assert!(w[0].end <= w[1].start);
    }
    for d in ds {
        assert!(text.is_char_boundary(d.start) && text.is_char_boundary(d.end));
    }
}

#[test]
fn validators() {
    assert!(luhn_ok(b"4111111111111111"));
    assert!(!luhn_ok(b"4111111111111112"));
    assert!(iban_mod97_ok(b"DE89370400440532013000"));
    assert!(!iban_mod97_ok(b"DE00370400440532013000"));
    assert!(ssn_parts_ok(b"123456789"));
    for bad in [
        &b"000456789"[..],
        b"666456789",
        b"900456789",
        b"123006789",
        b"123450000",
    ] {
        assert!(!ssn_parts_ok(bad));
    }
}

#[test]
fn nothing_found_allocates_nothing() {
    let v = detectors().detect("plain words, 2024-01-15, v1.2.3 and nothing else");
    assert!(v.is_empty());
    assert_eq!(v.capacity(), 0);
}

#[test]
fn values_wrapped_over_lines_are_found_whole() {
    assert_eq!(
        found("card on file: 4111 1111\n1111 1111, exp 12/29"),
        vec![(CreditCard, "4111 1111\n1111 1111")]
    );
    assert_eq!(
        found("IBAN: DE89 3704 0044\r\n   0532 0130 00 (main account)"),
        vec![(Iban, "DE89 3704 0044\r\n   0532 0130 00")]
    );
    assert_eq!(
        found("call me on +1 (415)\n555-0134 tonight"),
        vec![(Phone, "+1 (415)\n555-0134")]
    );
    // Three lines, and an unspaced number wrapped at a fixed width.
    assert_eq!(
        found("card\n4111 1111\n1111\n1111 ok"),
        vec![(CreditCard, "4111 1111\n1111\n1111")]
    );
    assert_eq!(
        found("pan=41111111\n11111111;"),
        vec![(CreditCard, "41111111\n11111111")]
    );
    // A value whole on one line stays as it was; the line after it is not pulled in.
    assert_eq!(
        found("4111 1111 1111 1111\n2024 totals"),
        vec![(CreditCard, "4111 1111 1111 1111")]
    );
}

#[test]
fn lines_that_only_look_continued_are_left_alone() {
    assert_none(&[
        // Table rows, counters, versions and dates at line ends and starts.
        "  0  4532  1234\n  1  5678  9012\n  2  3456  7890",
        "id 4111 1111\n1111 1112 (Luhn fails)",
        "build 2024 1105\n2231 ok",
        "v1.2.3 1234\n5678 released",
        "total 1234 5678\n9012 3456 7890 rows",
        "phone 415 555\nbusy",
        "DE89 3704 0044\n0532 0130 01",
    ]);
}
