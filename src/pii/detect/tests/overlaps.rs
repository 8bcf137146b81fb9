//! Overlapping candidates, the span invariants, and text with nothing to find.

use super::*;

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
}

#[test]
fn adjacent_values_are_all_found_in_order() {
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
}

#[test]
fn passwords_in_urls_are_secrets_and_their_users_emails() {
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
}

#[test]
fn tokens_are_not_found_again() {
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
fn nothing_found_allocates_nothing() {
    let v = detectors().detect("plain words, 2024-01-15, v1.2.3 and nothing else");
    assert!(v.is_empty());
    assert_eq!(v.capacity(), 0);
}
