//! Validators for identity and payment numbers: SSN (area, group and serial rules), payment cards
//! (Luhn and issuer ranges) and IBAN (per-country lengths, mod-97). Each validator takes (hay,
//! start, end) of the regex match and returns the accepted span, or None.

use super::context::{at, is_word, numeric_left_ok, numeric_right_ok};

pub(super) fn ssn_parts_ok(d: &[u8]) -> bool {
    let num = |x: &[u8]| x.iter().fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'));
    let (area, group, serial) = (num(&d[0..3]), num(&d[3..5]), num(&d[5..9]));
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

pub(super) fn validate_ssn(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if !(numeric_left_ok(hay, s) && numeric_right_ok(hay, e)) {
        return None;
    }
    let digits: Vec<u8> = hay[s..e]
        .iter()
        .copied()
        .filter(u8::is_ascii_digit)
        .collect();
    (digits.len() == 9 && ssn_parts_ok(&digits)).then_some((s, e))
}

pub(super) fn luhn_ok(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, &d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Known issuer ranges (IIN) and their lengths.
fn card_issuer_ok(d: &[u8]) -> bool {
    let n = d.len();
    let p = |k: usize| {
        d[..k]
            .iter()
            .fold(0u32, |a, &b| a * 10 + u32::from(b - b'0'))
    };
    let (p2, p3, p4, p6) = (p(2), p(3), p(4), p(6));
    let visa = d[0] == b'4' && matches!(n, 13 | 16 | 19);
    let mastercard = ((51..=55).contains(&p2) || (2221..=2720).contains(&p4)) && n == 16;
    let amex = (p2 == 34 || p2 == 37) && n == 15;
    let discover =
        (p4 == 6011 || (644..=649).contains(&p3) || p2 == 65 || (622126..=622925).contains(&p6))
            && (16..=19).contains(&n);
    let diners =
        ((300..=305).contains(&p3) || p2 == 36 || p2 == 38 || p2 == 39) && (14..=19).contains(&n);
    let jcb = (3528..=3589).contains(&p4) && (16..=19).contains(&n);
    let unionpay = p2 == 62 && (16..=19).contains(&n);
    let maestro = matches!(
        p4,
        5018 | 5020 | 5038 | 5893 | 6304 | 6759 | 6761 | 6762 | 6763
    ) && (13..=19).contains(&n);
    let mir = (2200..=2204).contains(&p4) && (16..=19).contains(&n);
    visa || mastercard || amex || discover || diners || jcb || unionpay || maestro || mir
}

pub(super) fn validate_card(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if !numeric_left_ok(hay, s) {
        return None;
    }
    // Try the whole candidate, then without its last group (`4111 1111 1111 1111 12/25`).
    let mut e = e;
    loop {
        let m = &hay[s..e];
        let seps: Vec<u8> = m.iter().copied().filter(|b| !b.is_ascii_digit()).collect();
        let consistent = seps.windows(2).all(|w| w[0] == w[1]);
        let digits: Vec<u8> = m.iter().copied().filter(u8::is_ascii_digit).collect();
        if consistent
            && (13..=19).contains(&digits.len())
            && numeric_right_ok(hay, e)
            && card_issuer_ok(&digits)
            && luhn_ok(&digits)
        {
            return Some((s, e));
        }
        let cut = m.iter().rposition(|b| !b.is_ascii_digit())?;
        if m[..cut].iter().filter(|b| b.is_ascii_digit()).count() < 13 {
            return None;
        }
        e = s + cut;
    }
}

/// IBAN lengths per country (SWIFT IBAN registry).
// A table: one line per country of the registry.
#[allow(clippy::too_many_lines)]
fn iban_length(cc: &[u8]) -> Option<usize> {
    Some(match cc {
        b"AD" => 24,
        b"AE" => 23,
        b"AL" => 28,
        b"AT" => 20,
        b"AZ" => 28,
        b"BA" => 20,
        b"BE" => 16,
        b"BG" => 22,
        b"BH" => 22,
        b"BI" => 27,
        b"BR" => 29,
        b"BY" => 28,
        b"CH" => 21,
        b"CR" => 22,
        b"CY" => 28,
        b"CZ" => 24,
        b"DE" => 22,
        b"DJ" => 27,
        b"DK" => 18,
        b"DO" => 28,
        b"EE" => 20,
        b"EG" => 29,
        b"ES" => 24,
        b"FI" => 18,
        b"FK" => 18,
        b"FO" => 18,
        b"FR" => 27,
        b"GB" => 22,
        b"GE" => 22,
        b"GI" => 23,
        b"GL" => 18,
        b"GR" => 27,
        b"GT" => 28,
        b"HR" => 21,
        b"HU" => 28,
        b"IE" => 22,
        b"IL" => 23,
        b"IQ" => 23,
        b"IS" => 26,
        b"IT" => 27,
        b"JO" => 30,
        b"KW" => 30,
        b"KZ" => 20,
        b"LB" => 28,
        b"LC" => 32,
        b"LI" => 21,
        b"LT" => 20,
        b"LU" => 20,
        b"LV" => 21,
        b"LY" => 25,
        b"MC" => 27,
        b"MD" => 24,
        b"ME" => 22,
        b"MK" => 19,
        b"MN" => 20,
        b"MR" => 27,
        b"MT" => 31,
        b"MU" => 30,
        b"NI" => 28,
        b"NL" => 18,
        b"NO" => 15,
        b"OM" => 23,
        b"PK" => 24,
        b"PL" => 28,
        b"PS" => 29,
        b"PT" => 25,
        b"QA" => 29,
        b"RO" => 24,
        b"RS" => 22,
        b"RU" => 33,
        b"SA" => 24,
        b"SC" => 31,
        b"SD" => 18,
        b"SE" => 24,
        b"SI" => 19,
        b"SK" => 24,
        b"SM" => 27,
        b"SO" => 23,
        b"ST" => 25,
        b"SV" => 28,
        b"TL" => 23,
        b"TN" => 24,
        b"TR" => 26,
        b"UA" => 29,
        b"VA" => 22,
        b"VG" => 24,
        b"XK" => 20,
        b"YE" => 30,
        _ => return None,
    })
}

pub(super) fn iban_mod97_ok(compact: &[u8]) -> bool {
    let mut rem = 0u32;
    let rearranged = compact[4..].iter().chain(&compact[..4]);
    for &b in rearranged {
        if b.is_ascii_digit() {
            rem = (rem * 10 + u32::from(b - b'0')) % 97;
        } else if b.is_ascii_uppercase() {
            rem = (rem * 100 + u32::from(b - b'A' + 10)) % 97;
        } else {
            return false;
        }
    }
    rem == 1
}

pub(super) fn validate_iban(hay: &[u8], s: usize, e: usize) -> Option<(usize, usize)> {
    if !numeric_left_ok(hay, s) {
        return None;
    }
    let len = iban_length(&hay[s..s + 2])?;
    // Take exactly `len` characters: either no spaces, or one space after every group of four.
    let m = &hay[s..e];
    let spaced = m.get(4) == Some(&b' ');
    let mut compact = Vec::with_capacity(len);
    let mut i = 0;
    while compact.len() < len {
        let b = *m.get(i)?;
        if b == b' ' {
            if !(spaced && compact.len().is_multiple_of(4)) {
                return None;
            }
        } else {
            let group_start = !compact.is_empty() && compact.len().is_multiple_of(4);
            if spaced && group_start && m[i - 1] != b' ' {
                return None;
            }
            compact.push(b);
        }
        i += 1;
    }
    let end = s + i;
    if at(hay, end).is_some_and(is_word) {
        return None;
    }
    iban_mod97_ok(&compact).then_some((s, end))
}
