//! Emails and phone numbers.

use super::*;

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

/// A value glued to the text before it is still a value: an email's local part ends at its
/// `@` and holds at most 64 bytes, so the token takes the domain and the last 64 characters
/// before the `@`, whatever the length of the glue (the rest of the glue stays as it is).
#[test]
fn values_glued_to_the_text_before_them() {
    let email = "margarethe.vonstrelitz@example-mail.org";
    let last64 = |glue: &str| format!("{}{email}", glue.repeat(42));
    let (q, x) = (last64("q"), last64("x"));
    for (text, value) in [
        (format!("id={}{email} end", "q".repeat(80)), q.as_str()),
        (format!("{}{email}", "x".repeat(60)), x.as_str()),
        (format!("{}{email} end", "x".repeat(128 * 1024)), x.as_str()),
        (format!("{}{email}", "x".repeat(42)), x.as_str()),
    ] {
        let tail = &text[text.len().saturating_sub(80)..];
        assert_eq!(found(&text), vec![(Email, value)], "in …{tail}");
    }
    // At most 64 bytes, on a character boundary (`é` takes two).
    let wide = format!("{}ann@example.com", "é".repeat(40));
    let value = format!("{}ann@example.com", "é".repeat(30));
    assert_eq!(found(&wide), vec![(Email, value.as_str())]);
    // Glue shorter than that is taken whole, as before; a `.` the 64 bytes start on is not.
    assert_single(&[
        (
            "notesfromann.lee@example.com",
            Email,
            "notesfromann.lee@example.com",
        ),
        (
            "Grüßeandrea.rossi@example.it",
            Email,
            "Grüßeandrea.rossi@example.it",
        ),
        (
            "ref:DE89370400440532013000.",
            Iban,
            "DE89370400440532013000",
        ),
        ("tel:+49301234567;", Phone, "+49301234567"),
    ]);
    let dotted = format!("{}.{}@example.com", "a".repeat(40), "b".repeat(63));
    assert_eq!(
        found(&dotted),
        vec![(Email, &dotted[41..])],
        "starts after the dot"
    );
}

/// What looks like a glued value and is none: an scp-style git remote, an asset at `@2x`, a
/// package at a version, a commit id, base64, long numbers (digits glued to digits are one
/// number, never split into a shorter value).
#[test]
fn look_alikes_of_glued_values_are_none() {
    assert_none(&[
        "git@github.com:org/repo.git",
        "remote: git@gitlab.example.com:team/app.git",
        "git@github.com:repo.git",
        "icon@2x.png",
        "pkg@1.2.3",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "attachment T2DSIoBKmy2C741ZAbxuhiOPyS7WHQ/vHiLS8e0HuzSOEd188EMswotWSfepeDRla2Puws7/LGflniOaBhLWlC1xFkK3JrBEAWJ8qfusMvXIUw+xkDzE2wIlhxeSGkiB",
        "order 48213059937716240551",
        "n=994111111111111111",
        "+4930123456789012345",
        "ref:DE893704004405320130001",
    ]);
    // A colon after an address that starts no path leaves it an address.
    assert_single(&[
        ("to ann@example.com: hello", Email, "ann@example.com"),
        ("ann@example.com:8080", Email, "ann@example.com"),
        ("mail:ann@example.com:", Email, "ann@example.com"),
    ]);
}
