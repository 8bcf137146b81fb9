//! A request's host in one canonical form, so that no spelling of a host escapes its entry.
//!
//! Why: a host is matched against the `egress` keys and then resolved by this server; if the
//! two read a name differently, an allowlist can be walked around. Resolvers and URL parsers
//! accept many spellings of one IPv4 address (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`
//! are all 127.0.0.1, as `inet_aton` and the WHATWG URL standard read them), IPv6 can carry
//! IPv4 (`::ffff:127.0.0.1`), and names differ by case and a trailing dot. Every form is
//! brought to the one address or name it means before anything is compared, and a host that
//! is neither a DNS name of letters, digits and hyphens nor an IP address is refused: the
//! server never guesses what a resolver would make of it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::refused::Refused;

/// Longest DNS name (RFC 1035), without the trailing dot.
const MAX_NAME_CHARS: usize = 253;
/// Longest label of a name.
const MAX_LABEL_CHARS: usize = 63;

/// A host as this server compares and resolves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name: lowercase, no trailing dot.
    Name(String),
    /// An address; an IPv4-mapped IPv6 address is its IPv4 address.
    Ip(IpAddr),
}

impl Host {
    /// A request's host as the sandbox named it: lowercased, trailing dot dropped, brackets off
    /// IPv6; numeric IPv4 forms (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) and
    /// IPv4-mapped IPv6 (`::ffff:127.0.0.1`) normalised to the address they mean; anything not
    /// a valid DNS name (LDH labels, ≤253 chars) or IP refused.
    ///
    /// The host alone: a port (`example.org:443`) is not part of it.
    pub fn parse(s: &str) -> Result<Host, Refused> {
        parse(s).map_err(|why| Refused::name(s, why))
    }
}

impl fmt::Display for Host {
    /// The name, or the address (IPv6 without brackets).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// [`Host::parse`], with why a host is refused in a few words.
pub(super) fn parse(s: &str) -> Result<Host, &'static str> {
    if s.is_empty() {
        return Err("it is empty");
    }
    if s.len() > MAX_NAME_CHARS + 2 {
        return Err("it is longer than a DNS name may be (253 characters)");
    }
    if let Some(inner) = s.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("a '[' opens an IPv6 address that no ']' closes")?;
        return ipv6(inner);
    }
    if s.contains(':') {
        return ipv6(s);
    }
    let lower = s.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    if ends_in_number(name) {
        return ipv4(name)
            .map(|ip| Host::Ip(IpAddr::V4(ip)))
            .ok_or("it ends in a number but is not an IPv4 address");
    }
    check_name(name)?;
    Ok(Host::Name(name.to_owned()))
}

/// An IPv6 address (no zone), or the IPv4 address it maps.
fn ipv6(s: &str) -> Result<Host, &'static str> {
    let ip: Ipv6Addr = s
        .parse()
        .map_err(|_| "it holds ':' but is not an IPv6 address (a port is not part of a host; a zone such as %eth0 is not taken)")?;
    Ok(Host::Ip(match ip.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(ip),
    }))
}

/// Letters, digits and hyphens in labels of 1 to 63 characters, neither starting nor ending
/// with a hyphen; 253 characters at most.
fn check_name(name: &str) -> Result<(), &'static str> {
    const WHY: &str = "a host name is labels of letters, digits and '-' (1 to 63 each, 253 in all; a name in another script in its xn-- form)";
    if name.is_empty() || name.len() > MAX_NAME_CHARS {
        return Err(WHY);
    }
    let label_ok = |l: &str| {
        (1..=MAX_LABEL_CHARS).contains(&l.len())
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if name.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(WHY)
    }
}

/// Whether the last label is a number (decimal, or `0x` hex), as the WHATWG URL standard
/// decides that a host is meant as an IPv4 address.
fn ends_in_number(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    if let Some(hex) = last.strip_prefix("0x") {
        return hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit())
}

/// An IPv4 address in any form `inet_aton` reads: one to four parts, each decimal, octal
/// (a leading `0`) or hex (`0x`); the last part fills the bytes the others left.
fn ipv4(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() > 4 {
        return None;
    }
    let numbers: Vec<u64> = parts.iter().map(|p| number(p)).collect::<Option<_>>()?;
    let (last, first) = numbers.split_last()?;
    if first.iter().any(|&n| n > 255) {
        return None;
    }
    let room = 8 * (4 - first.len() as u32);
    if *last >= 1u64 << room {
        return None;
    }
    let high = first
        .iter()
        .enumerate()
        .fold(0u64, |acc, (i, &n)| acc | n << (24 - 8 * i as u32));
    Some(Ipv4Addr::from((high | last) as u32))
}

/// One part of a numeric IPv4 form; `None` if it is not a number or past 32 bits.
fn number(part: &str) -> Option<u64> {
    let (digits, radix) = if let Some(hex) = part.strip_prefix("0x") {
        (hex, 16)
    } else if part.len() > 1 && part.starts_with('0') {
        (&part[1..], 8)
    } else {
        (part, 10)
    };
    if part.is_empty() || digits.len() > 32 {
        return None;
    }
    if digits.is_empty() {
        return Some(0);
    }
    // from_str_radix would take a sign: `127.+0.0.1` is not an address.
    if !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix)
        .ok()
        .filter(|&n| n <= u64::from(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    #[test]
    fn names_are_lowercased_without_the_trailing_dot() {
        assert_eq!(
            Host::parse("API.GitHub.com.").unwrap(),
            Host::Name("api.github.com".into())
        );
        assert_eq!(
            Host::parse("xn--bcher-kva.example").unwrap().to_string(),
            "xn--bcher-kva.example"
        );
        assert_eq!(Host::parse("a-1.b2").unwrap(), Host::Name("a-1.b2".into()));
        assert_eq!(
            Host::parse(&format!("{}.org", "a".repeat(63))).unwrap(),
            Host::Name(format!("{}.org", "a".repeat(63)))
        );
    }

    #[test]
    fn every_numeric_ipv4_form_is_the_address_it_means() {
        for form in [
            "127.0.0.1",
            "2130706433",
            "0x7f000001",
            "0x7f.1",
            "0177.0.0.1",
            "0177.0.0.01",
            "127.1",
            "127.0.1",
            "0x7F.0.0.1",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "::ffff:127.0.0.1",
            "[::ffff:7f00:1]",
        ] {
            assert_eq!(Host::parse(form).unwrap(), ip("127.0.0.1"), "{form}");
        }
        assert_eq!(Host::parse("0").unwrap(), ip("0.0.0.0"));
        assert_eq!(Host::parse("0x").unwrap(), ip("0.0.0.0"));
        assert_eq!(Host::parse("1.2.3.0x").unwrap(), ip("1.2.3.0"));
        assert_eq!(Host::parse("1.2.3.").unwrap(), ip("1.2.0.3"));
        // A last label that is not a whole number makes a name, as for URL parsers.
        assert_eq!(Host::parse("0x1g").unwrap(), Host::Name("0x1g".into()));
        assert_eq!(Host::parse("169.254.43518").unwrap(), ip("169.254.169.254"));
        assert_eq!(Host::parse("10.1.65535").unwrap(), ip("10.1.255.255"));
        assert_eq!(Host::parse("4294967295").unwrap(), ip("255.255.255.255"));
    }

    #[test]
    fn ipv6_in_brackets_or_bare_keeps_what_is_not_mapped() {
        assert_eq!(Host::parse("[::1]").unwrap(), ip("::1"));
        assert_eq!(Host::parse("::1").unwrap(), ip("::1"));
        assert_eq!(Host::parse("[2001:DB8::1]").unwrap(), ip("2001:db8::1"));
        // IPv4-compatible and NAT64 forms stay IPv6: address.rs looks inside them.
        assert_eq!(Host::parse("::127.0.0.1").unwrap(), ip("::7f00:1"));
        assert_eq!(Host::parse("64:ff9b::a00:1").unwrap(), ip("64:ff9b::a00:1"));
        assert_eq!(Host::parse("[::1]").unwrap().to_string(), "::1");
    }

    #[test]
    fn what_is_neither_a_name_nor_an_address_is_refused() {
        for bad in [
            "",
            ".",
            "a..b",
            ".example.org",
            "-a.org",
            "a-.org",
            "a_b.org",
            "exa mple.org",
            "bücher.example",
            "example.org:443",
            "[::1]:443",
            "[::1",
            "[127.0.0.1]",
            "fe80::1%eth0",
            "1.2.3.4.5",
            "256.0.0.1",
            "1.2.3.256",
            "127.16777216",
            "4294967296",
            "08.0.0.1",
            "127.+0.0.1",
            "127.0.0.-1",
            "a.1",
            "user@example.org",
            "example.org/",
            "%31%32%37.0.0.1",
            "*.example.org",
        ] {
            let e = Host::parse(bad).unwrap_err();
            assert_eq!(e.rule, "name", "{bad}");
            assert!(e.message.starts_with("egress: "), "{bad}: {}", e.message);
        }
        let long = format!("{}.org", "a".repeat(64));
        assert!(Host::parse(&long).is_err(), "a label of 64");
        let name = vec!["a".repeat(49); 5].join(".");
        assert_eq!(name.len(), 249);
        assert!(Host::parse(&name).is_ok());
        assert!(
            Host::parse(&format!("{name}.abcd")).is_err(),
            "254 characters"
        );
        let e = Host::parse(&"x".repeat(1000)).unwrap_err();
        assert!(e.message.len() < 300, "the input is cut: {}", e.message);
    }
}
