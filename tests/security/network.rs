//! Catalogue cases 12-17, network: DNS, public and private addresses, the engine's bridge
//! gateway and the metadata service, IPv6, raw and packet sockets, engine sockets and netlink
//! changes. One file per family of the catalogue, so a case is found by its number (the map is in
//! `main.rs`).

use serde_json::json;

use crate::harness::{verdict, watched};

/// The errno names that mean "no route from here": what every outside address must get.
const UNREACHABLE: [&str; 2] = ["ENETUNREACH", "EHOSTUNREACH"];

/// Python: `probe(targets)` tries TCP connect and UDP send to each `label: [address, port]` and
/// returns `{label: errno name | "connected" | "sent" | "timeout"}` (labels get `_tcp`/`_udp`).
const PROBE: &str = include_str!("probes/net_probe.py");

/// 12. "DNS lookup → fails."
#[tokio::test]
async fn case_12_dns_lookups_fail() {
    watched(async |t, _| {
        let code = format!("{PROBE}{}", include_str!("probes/case_12_dns.py"));
        let v = verdict(
            t,
            &code,
            json!({"public_resolvers": {"google_dns": ["8.8.8.8", 53], "cloudflare_dns": ["1.1.1.1", 53]}}),
        )
        .await;
        for name in ["public", "google", "metadata"] {
            assert_eq!(v[name], "gaierror", "{name}: {v}");
        }
        let resolvers = v["resolvers"].as_object().unwrap();
        assert!(resolvers.len() >= 4, "{v}");
        for (label, outcome) in resolvers {
            assert!(
                UNREACHABLE.contains(&outcome.as_str().unwrap()),
                "{label}: {outcome}"
            );
        }
    })
    .await;
}

/// The engine's default bridge gateway: the IPAM gateway of the `bridge` network, or the first
/// address of its subnet (what Docker assigns when it names none).
async fn bridge_gateway() -> String {
    let engine = code_execution_mcp::sandbox::Engine::connect()
        .await
        .unwrap();
    let network = engine.client().inspect_network("bridge", None).await;
    let config = network
        .ok()
        .and_then(|n| n.ipam)
        .and_then(|i| i.config)
        .and_then(|c| c.into_iter().next());
    if let Some(gateway) = config.as_ref().and_then(|c| c.gateway.clone()) {
        return gateway;
    }
    let subnet = config.and_then(|c| c.subnet);
    let base: Option<std::net::Ipv4Addr> = subnet
        .as_deref()
        .and_then(|s| s.split('/').next())
        .and_then(|s| s.parse().ok());
    base.map_or_else(
        || "172.17.0.1".into(),
        |b| std::net::Ipv4Addr::from(u32::from(b) + 1).to_string(),
    )
}

/// The host's primary IPv4 address (the source of its default route), if it has one.
fn host_address() -> Option<String> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("1.1.1.1:53").ok()?;
    Some(socket.local_addr().ok()?.ip().to_string())
}

/// 13. "TCP to a public address, to the engine's bridge gateway (172.17.0.1) and to
///     169.254.169.254 → unreachable."
#[tokio::test]
async fn case_13_public_addresses_the_bridge_gateway_and_the_metadata_service_are_unreachable() {
    watched(async |t, _| {
        let gateway = bridge_gateway().await;
        let mut targets = json!({
            "public_web": ["1.1.1.1", 443],
            "public_dns": ["8.8.8.8", 53],
            "gateway_engine_api": [gateway, 2375],
            "gateway_ssh": [gateway, 22],
            "metadata": ["169.254.169.254", 80],
            "private_net": ["10.0.0.1", 80],
        });
        if let Some(host) = host_address() {
            targets["host_ssh"] = json!([host, 22]);
            targets["host_engine_api"] = json!([host, 2375]);
        }
        let code = format!(
            "{PROBE}{}",
            r#"
out = {"targets": probe(targets)}
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
out["routes"] = open("/proc/net/route").read().splitlines()[1:]
result = out
"#
        );
        let v = verdict(t, &code, json!({ "targets": targets })).await;
        let outcomes = v["targets"].as_object().unwrap();
        assert_eq!(outcomes.len(), 2 * targets.as_object().unwrap().len());
        for (label, outcome) in outcomes {
            assert!(
                UNREACHABLE.contains(&outcome.as_str().unwrap()),
                "{label} ({gateway} is the gateway): {outcome}"
            );
        }
        assert_eq!(v["interfaces"], json!(["lo"]));
        assert_eq!(v["routes"], json!([]), "no route leaves the container");
    })
    .await;
}

/// 14. "IPv6 to anything but ::1 → unreachable."
#[tokio::test]
async fn case_14_ipv6_reaches_nothing_but_loopback() {
    watched(async |t, _| {
        let gateway = bridge_gateway().await;
        let code = format!(
            "{PROBE}{}",
            r#"
out = {"targets": probe(targets, socket.AF_INET6)}
out["addresses"] = sorted(l.split()[0] for l in open("/proc/net/if_inet6").read().splitlines())
result = out
"#
        );
        let v = verdict(
            t,
            &code,
            json!({"targets": {
                "public_cloudflare": ["2606:4700:4700::1111", 53],
                "public_google": ["2001:4860:4860::8888", 443],
                "mapped_gateway": [format!("::ffff:{gateway}"), 2375],
                "mapped_metadata": ["::ffff:169.254.169.254", 80],
                "metadata_v6": ["fd00:ec2::254", 80],
                "unique_local": ["fd00::1", 80],
                "link_local": ["fe80::1%lo", 80],
                "multicast": ["ff02::1", 80],
            }}),
        )
        .await;
        let outcomes = v["targets"].as_object().unwrap();
        assert_eq!(outcomes.len(), 16);
        for (label, outcome) in outcomes {
            assert!(
                ["ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL", "EINVAL"]
                    .contains(&outcome.as_str().unwrap()),
                "{label}: {outcome}"
            );
        }
        // The only IPv6 address the sandbox may hold is ::1 (none, when the engine disables IPv6).
        for address in v["addresses"].as_array().unwrap() {
            assert_eq!(address, "00000000000000000000000000000001", "{v}");
        }
    })
    .await;
}

/// 15. "raw / AF_PACKET sockets → EPERM."
#[tokio::test]
async fn case_15_raw_and_packet_sockets_are_refused() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_15_raw_sockets.py"), json!({})).await;
        let outcomes = v.as_object().unwrap();
        assert_eq!(outcomes.len(), 8);
        for (label, outcome) in outcomes {
            assert!(
                ["EPERM", "EACCES", "EAFNOSUPPORT"].contains(&outcome.as_str().unwrap()),
                "{label}: {outcome}"
            );
        }
        assert_eq!(v["packet_raw"], "EPERM", "{v}");
    })
    .await;
}

/// 16. "`/var/run/docker.sock`, containerd's socket → absent."
///
/// Beyond the well-known paths: no socket file anywhere in the container's tree, and no
/// engine socket among the unix sockets its network namespace can see.
#[tokio::test]
async fn case_16_engine_sockets_are_absent() {
    watched(async |t, _| {
        let v = verdict(
            t,
            include_str!("probes/case_16_engine_sockets.py"),
            json!({}),
        )
        .await;
        assert_eq!(v["present"], json!([]), "{v}");
        assert_eq!(v["socket_files"], json!([]), "{v}");
        assert_eq!(v["engine_unix_sockets"], json!([]), "{v}");
    })
    .await;
}

/// 17. "Netlink changes to links or routes → EPERM."
///
/// Each change is refused, and afterwards `lo` is still the only link, up (as `SIOCGIFFLAGS`
/// answers, and sysfs where it has the file), with no route. Under gVisor the changes reach its
/// own network stack, never the host's, and its netlink answers the missing `CAP_NET_ADMIN` with
/// `EACCES`; its sysfs has no `/sys/class/net/lo/flags`.
#[tokio::test]
async fn case_17_netlink_changes_to_links_addresses_and_routes_are_refused() {
    watched(async |t, _| {
        let v = verdict(t, include_str!("probes/case_17_netlink.py"), json!({})).await;
        let gvisor = crate::harness::gvisor(t);
        let refusals: &[&str] = if gvisor {
            &["EPERM", "EACCES"]
        } else {
            &["EPERM"]
        };
        for change in [
            "set_lo_down",
            "new_dummy_link",
            "new_veth_link",
            "new_address",
            "new_default_route",
            "delete_lo_address",
        ] {
            assert!(
                refusals.contains(&v[change].as_str().unwrap_or("")),
                "{change}: {v}"
            );
        }
        assert_eq!(v["interfaces"], json!(["lo"]));
        assert_eq!(v["lo_up"], true, "{v}");
        assert!(
            v["lo_up_sysfs"] == true || (gvisor && v["lo_up_sysfs"] == "absent"),
            "{v}"
        );
        assert_eq!(v["routes"], json!([]));
    })
    .await;
}
