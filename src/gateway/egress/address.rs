//! The addresses a request may reach, checked on the address the server is about to connect
//! to, after its own DNS resolution.
//!
//! Why at connect time: a name's answer can change between the check and the connection (DNS
//! rebinding), so the address is checked when it is used, for each address a name resolves
//! to. Why by address class: an allowlisted public name can resolve to `10.0.0.5` or
//! `127.0.0.1`, and then code in the sandbox reaches the host's network through this server.
//! So loopback, private, link-local and reserved addresses are refused unless the entry says
//! `"private": true`; addresses that carry IPv4 inside IPv6 (mapped, compatible, NAT64,
//! 6to4, Teredo) are judged by the IPv4 address they lead to.
//!
//! Some addresses are never reached, whatever the entry says: the cloud metadata services
//! (their answers are the machine's credentials), this server's own listeners and the
//! engine's API when it listens on TCP ([`Never`]). Unspecified, multicast and broadcast
//! addresses are refused always too, a stricter choice than `private`: a TCP connection to
//! them is never a remote API, and `0.0.0.0` reaches this host's own services on Linux.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::host::Host;
use super::refused::Refused;

/// Cloud metadata services' IPv4 addresses: AWS, GCP, Azure, Oracle, DigitalOcean
/// (169.254.169.254), AWS ECS task credentials (169.254.170.2), EKS pod identity
/// (169.254.170.23), Alibaba (100.100.100.200), Azure's WireServer (168.63.129.16, a public
/// address every Azure VM reaches, which serves its agent's configuration).
pub const METADATA_V4: [Ipv4Addr; 5] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(169, 254, 170, 23),
    Ipv4Addr::new(100, 100, 100, 200),
    Ipv4Addr::new(168, 63, 129, 16),
];

/// AWS's IPv6 metadata service and EKS pod identity, GCP's IPv6 metadata service.
pub const METADATA_V6: [Ipv6Addr; 3] = [
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),
    Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),
];

/// Names of metadata services, refused before any resolution: GCP's (and every name under
/// `metadata.google.internal`), and the single-label and EC2 names a cloud's resolver answers.
pub const METADATA_NAMES: [&str; 5] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// Addresses never reached whatever the entry says: cloud metadata (169.254.169.254,
/// fd00:ec2::254, 100.100.100.200, metadata.google.internal is a name: refuse it by name too),
/// the server's own listeners, the engine's API if TCP.
///
/// The metadata addresses are always refused ([`METADATA_V4`], [`METADATA_V6`]); `Never` holds
/// the socket addresses of this server. A listener on an unspecified address (`0.0.0.0:8080`,
/// `[::]:8080`) is matched on every loopback address with its port; this host's other
/// interface addresses are the caller's to add, with the port, when it listens on all.
#[derive(Debug, Clone, Default)]
pub struct Never {
    addrs: Vec<SocketAddr>,
}

impl Never {
    pub fn new(addrs: Vec<SocketAddr>) -> Self {
        let addrs = addrs
            .into_iter()
            .map(|a| SocketAddr::new(a.ip().to_canonical(), a.port()))
            .collect();
        Never { addrs }
    }

    /// Whether `addr` (canonical) reaches one of the sockets.
    fn holds(&self, addr: SocketAddr) -> bool {
        self.addrs.iter().any(|n| {
            n.port() == addr.port()
                && (n.ip() == addr.ip() || (n.ip().is_unspecified() && addr.ip().is_loopback()))
        })
    }
}

/// An address the server is about to connect to (after its own DNS resolution: called again at
/// connect time for each resolved address): loopback, private (RFC 1918, fc00::/7, 100.64/10
/// CGNAT), link-local, multicast, unspecified, broadcast, documentation, benchmarking,
/// reserved, 6to4/Teredo/NAT64 (64:ff9b::/96 and 64:ff9b:1::/48: check the embedded IPv4),
/// IPv4-mapped/compatible IPv6 (check the IPv4) are refused unless `private`; `never` always.
///
/// `key` is the entry's, for the message. Unspecified, multicast and broadcast addresses are
/// refused even with `private` (see the module docs).
pub fn check_address(
    addr: SocketAddr,
    private: bool,
    never: &Never,
    key: &str,
) -> Result<(), Refused> {
    let ip = addr.ip().to_canonical();
    let always = |what: &str| {
        Refused::new(
            "always",
            Some(key),
            format!(
                "egress: entry {key:?} leads to {ip}, {what}, which this server never connects to whatever the upstreams file says"
            ),
        )
    };
    if is_metadata(ip) {
        return Err(always("a cloud metadata address"));
    }
    if never.holds(SocketAddr::new(ip, addr.port())) {
        return Err(always(&format!(
            "port {}: this server's own listener or its engine's API",
            addr.port()
        )));
    }
    match class(ip) {
        Class::Public => Ok(()),
        Class::Never(what) => Err(always(what)),
        Class::Private(_) if private => Ok(()),
        Class::Private(what) => Err(Refused::new(
            "private",
            Some(key),
            private_message(key, ip, what),
        )),
    }
}

/// A host refused by its name or literal address before anything is resolved: the metadata
/// names (and names under `metadata.google.internal`), and the metadata addresses.
pub fn check_host(host: &Host) -> Result<(), Refused> {
    let refused = |what: &str| {
        Refused::new(
            "always",
            None,
            format!(
                "egress: {host} is {what}, which this server never connects to whatever the upstreams file says"
            ),
        )
    };
    match host {
        Host::Name(name) => {
            let metadata = METADATA_NAMES.contains(&name.as_str())
                || name.ends_with(".metadata.google.internal");
            if metadata {
                return Err(refused("a cloud metadata service"));
            }
        }
        Host::Ip(ip) if is_metadata(ip.to_canonical()) => {
            return Err(refused("a cloud metadata address"));
        }
        Host::Ip(_) => {}
    }
    Ok(())
}

fn private_message(key: &str, ip: IpAddr, what: &str) -> String {
    let change = if key == "*" {
        "add an entry naming this host with \"private\": true if that is intended (\"*\" never reaches private addresses)".to_string()
    } else {
        format!("set \"private\": true on entry {key:?} if that is intended")
    };
    format!("egress: the host of entry {key:?} resolves to {ip}, {what}: {change}")
}

/// What an address is, for the rules above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Public,
    /// Refused unless the entry says `private`; the words say which kind.
    Private(&'static str),
    /// Refused always.
    Never(&'static str),
}

fn is_metadata(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => METADATA_V4.contains(&v4),
        IpAddr::V6(v6) => {
            METADATA_V6.contains(&v6)
                || embedded_v4(v6).is_some_and(|(v4, _)| METADATA_V4.contains(&v4))
        }
    }
}

fn class(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(v4) => class_v4(v4),
        IpAddr::V6(v6) => class_v6(v6),
    }
}

fn class_v4(ip: Ipv4Addr) -> Class {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (0, ..) => Class::Never("an unspecified address (0.0.0.0/8)"),
        _ if ip.is_broadcast() => Class::Never("the broadcast address"),
        (224..=239, ..) => Class::Never("a multicast address"),
        (127, ..) => Class::Private("a loopback address"),
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => {
            Class::Private("a private address (RFC 1918)")
        }
        (100, 64..=127, _) => Class::Private("a shared address (CGNAT, 100.64.0.0/10)"),
        (169, 254, _) => Class::Private("a link-local address"),
        (192, 0, 0) => Class::Private("an address reserved for IETF protocols (192.0.0.0/24)"),
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Class::Private("a documentation address"),
        (198, 18..=19, _) => Class::Private("a benchmarking address (198.18.0.0/15)"),
        (192, 88, 99) => {
            Class::Private("a reserved address (the former 6to4 relay, 192.88.99.0/24)")
        }
        (240..=255, ..) => Class::Private("a reserved address (240.0.0.0/4)"),
        _ => Class::Public,
    }
}

fn class_v6(ip: Ipv6Addr) -> Class {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Class::Never("the unspecified address");
    }
    if s[0] >> 8 == 0xff {
        return Class::Never("a multicast address");
    }
    if ip.is_loopback() {
        return Class::Private("a loopback address");
    }
    if let Some((v4, kind)) = embedded_v4(ip) {
        return match (class_v4(v4), kind) {
            (Class::Public, Embedded::LocalNat64) => {
                Class::Private("a local-use NAT64 address (64:ff9b:1::/48)")
            }
            (inner, _) => inner,
        };
    }
    match s {
        [0xfc00..=0xfdff, ..] => Class::Private("a unique local address (fc00::/7)"),
        [0xfe80..=0xfebf, ..] => Class::Private("a link-local address"),
        [0xfec0..=0xfeff, ..] => Class::Private("a site-local address (deprecated, fec0::/10)"),
        [0x2001, 0xdb8, ..] | [0x3fff, 0..=0x0fff, ..] => Class::Private("a documentation address"),
        [0x2001, 0x2, 0, ..] => Class::Private("a benchmarking address (2001:2::/48)"),
        [0x100, 0, 0, 0, ..] => Class::Private("a discard-only address (100::/64)"),
        [0x2001, 0..=0x1ff, ..] => {
            Class::Private("an address reserved for IETF protocols (2001::/23)")
        }
        [0x2000..=0x3fff, ..] => Class::Public,
        _ => Class::Private("a reserved address (outside 2000::/3, the global unicast range)"),
    }
}

/// How an IPv6 address carries IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Embedded {
    Mapped,
    Compatible,
    Nat64,
    LocalNat64,
    SixToFour,
    Teredo,
}

/// The IPv4 address an IPv6 address leads to, if it carries one: IPv4-mapped (::ffff:0:0/96),
/// IPv4-compatible (::/96, deprecated), NAT64 (64:ff9b::/96; the local-use 64:ff9b:1::/48
/// read with the IPv4 address in its last 32 bits), 6to4 (2002::/16, bits 16-47) and Teredo
/// (2001::/32, the client's address inverted in the last 32 bits).
fn embedded_v4(ip: Ipv6Addr) -> Option<(Ipv4Addr, Embedded)> {
    let s = ip.segments();
    let last = Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]));
    let kind = match s {
        [0, 0, 0, 0, 0, 0xffff, ..] => Embedded::Mapped,
        [0, 0, 0, 0, 0, 0, ..] if u32::from(last) > 1 => Embedded::Compatible,
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Embedded::Nat64,
        [0x64, 0xff9b, 1, ..] => Embedded::LocalNat64,
        [0x2002, hi, lo, ..] => {
            let v4 = Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
            return Some((v4, Embedded::SixToFour));
        }
        [0x2001, 0, ..] => return Some((Ipv4Addr::from(!u32::from(last)), Embedded::Teredo)),
        _ => return None,
    };
    Some((last, kind))
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;
