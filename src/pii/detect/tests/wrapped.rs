//! Values wrapped over lines, and lines that only look continued.

use super::*;

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
