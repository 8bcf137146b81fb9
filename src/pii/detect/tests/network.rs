//! IP addresses, v4 and v6.

use super::*;

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
