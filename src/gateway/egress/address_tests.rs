//! Addresses: what is refused unless `private`, what is refused always, and every way IPv4
//! hides inside IPv6.

use super::*;

fn at(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

fn check(ip: &str, private: bool) -> Result<(), Refused> {
    check_address(at(ip, 443), private, &Never::default(), "data.example.org")
}

#[test]
fn public_addresses_pass() {
    for ip in [
        "93.184.215.14",
        "8.8.8.8",
        "1.1.1.1",
        "172.32.0.1",
        "100.128.0.1",
        "192.0.1.1",
        "198.20.0.1",
        "223.255.255.255",
        "2606:4700::1111",
        "2a00:1450:4001::200e",
        "64:ff9b::808:808",
        "2002:808:808::1",
        "::ffff:8.8.8.8",
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
    ] {
        assert!(check(ip, false).is_ok(), "{ip}");
    }
}

#[test]
fn private_and_reserved_addresses_need_private() {
    for (ip, what) in [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("10.0.0.5", "RFC 1918"),
        ("172.16.0.1", "RFC 1918"),
        ("172.31.255.255", "RFC 1918"),
        ("192.168.1.1", "RFC 1918"),
        ("100.64.0.1", "CGNAT"),
        ("100.127.255.254", "CGNAT"),
        ("169.254.1.1", "link-local"),
        ("192.0.0.8", "IETF"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.1", "benchmarking"),
        ("192.88.99.1", "6to4 relay"),
        ("240.0.0.1", "240.0.0.0/4"),
        ("255.255.255.254", "240.0.0.0/4"),
        ("::1", "loopback"),
        ("fc00::1", "unique local"),
        ("fd12:3456::1", "unique local"),
        ("fe80::1", "link-local"),
        ("fec0::1", "site-local"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("2001:2::1", "benchmarking"),
        ("100::1", "discard-only"),
        ("2001:10::1", "IETF"),
        ("4000::1", "outside 2000::/3"),
        ("5f00::1", "outside 2000::/3"),
        // IPv4 inside IPv6, judged by the IPv4 address.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.1.2.3", "RFC 1918"),
        ("::127.0.0.1", "loopback"),
        ("::10.0.0.1", "RFC 1918"),
        ("64:ff9b::7f00:1", "loopback"),
        ("64:ff9b::a00:5", "RFC 1918"),
        ("64:ff9b:1::a00:5", "RFC 1918"),
        ("64:ff9b:1::808:808", "local-use NAT64"),
        ("2002:7f00:1::1", "loopback"),
        ("2002:c0a8:101::", "RFC 1918"),
        // Teredo: the client 10.0.0.1 is stored inverted (f5ff:fffe).
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "RFC 1918"),
    ] {
        let e = check(ip, false).unwrap_err();
        assert_eq!(e.rule, "private", "{ip}");
        assert_eq!(e.key.as_deref(), Some("data.example.org"));
        assert!(e.message.contains(what), "{ip}: {}", e.message);
        assert!(check(ip, true).is_ok(), "{ip} with private");
    }
    assert_eq!(
        check("10.0.0.5", false).unwrap_err().message,
        "egress: the host of entry \"data.example.org\" resolves to 10.0.0.5, a private address (RFC 1918): set \"private\": true on entry \"data.example.org\" if that is intended"
    );
    let any = check_address(at("10.0.0.5", 443), false, &Never::default(), "*").unwrap_err();
    assert!(
        any.message
            .contains("add an entry naming this host with \"private\": true")
            && !any.message.contains("on entry \"*\""),
        "{}",
        any.message
    );
}

#[test]
fn metadata_is_refused_always_in_every_form() {
    for ip in [
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "100.100.100.200",
        "168.63.129.16",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "fd20:ce::254",
        "::ffff:169.254.169.254",
        "::169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "2001:0:4136:e378:8000:63bf:5601:5601",
    ] {
        for private in [false, true] {
            let e = check(ip, private).unwrap_err();
            assert_eq!(e.rule, "always", "{ip} private={private}");
            assert!(e.message.contains("cloud metadata"), "{ip}: {}", e.message);
        }
    }
    for name in [
        "metadata.google.internal",
        "METADATA.google.internal.",
        "computeMetadata.metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "169.254.169.254",
        "2852039166",
        "[fd00:ec2::254]",
    ] {
        let e = check_host(&Host::parse(name).unwrap()).unwrap_err();
        assert_eq!(e.rule, "always", "{name}");
    }
    for fine in [
        "google.internal",
        "metadata.example.org",
        "api.github.com",
        "10.0.0.5",
    ] {
        assert!(check_host(&Host::parse(fine).unwrap()).is_ok(), "{fine}");
    }
}

#[test]
fn unspecified_multicast_and_broadcast_are_refused_even_with_private() {
    for ip in [
        "0.0.0.0",
        "0.1.2.3",
        "224.0.0.1",
        "239.255.255.250",
        "255.255.255.255",
        "::",
        "ff02::1",
        "::ffff:0.0.0.0",
        "64:ff9b::e000:1",
    ] {
        assert_eq!(check(ip, true).unwrap_err().rule, "always", "{ip}");
    }
}

#[test]
fn the_servers_own_listeners_are_never_reached() {
    let never = Never::new(vec![
        at("127.0.0.1", 8080),
        at("0.0.0.0", 9464),
        at("::", 9000),
        at("192.168.1.5", 2375),
        at("::ffff:10.0.0.9", 8443),
    ]);
    for (ip, port) in [
        ("127.0.0.1", 8080),
        ("::ffff:127.0.0.1", 8080),
        ("127.0.0.1", 9464),
        ("127.0.0.2", 9464),
        ("::1", 9464),
        ("127.0.0.1", 9000),
        ("192.168.1.5", 2375),
        ("10.0.0.9", 8443),
    ] {
        let e = check_address(at(ip, port), true, &never, "crm.internal").unwrap_err();
        assert_eq!(e.rule, "always", "{ip}:{port}");
        assert!(e.message.contains("own listener"), "{}", e.message);
    }
    for (ip, port) in [
        ("127.0.0.1", 8081),
        ("127.0.0.2", 8080),
        ("192.168.1.5", 2376),
    ] {
        assert!(
            check_address(at(ip, port), true, &never, "crm.internal").is_ok(),
            "{ip}:{port}"
        );
    }
}
