//! SSNs, cards and IBANs, and the arithmetic that validates them.

use super::*;
use crate::pii::detect::finance::{iban_mod97_ok, luhn_ok, ssn_parts_ok};

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
