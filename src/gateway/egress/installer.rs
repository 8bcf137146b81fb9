//! The package installer's way out: the hosts of the configured index (and extra indexes), and
//! for PyPI its files host, reached through the same proxy as sandboxes' egress. The installer
//! has no network of its own; what it may reach comes from the packages configuration alone,
//! never from a tenant's `egress` entries. An index the operator configured may be on a private
//! address (a mirror on the LAN, a test's index on loopback), so these entries allow it.

use http::Method;

use super::rules::{EgressEntry, EgressRules};

/// PyPI's simple index, and the host its links point to.
const PYPI: &str = "pypi.org";
const PYPI_FILES: &str = "files.pythonhosted.org";

/// The entries that let pip reach `urls` (index URLs, `http://` or `https://`) and nothing
/// else: GET and HEAD on each URL's host and port; PyPI's files host beside PyPI.
pub fn installer_rules(urls: &[String]) -> Result<EgressRules, String> {
    let mut entries: Vec<EgressEntry> = Vec::new();
    for url in urls {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| format!("the package index {url:?} is not a URL: {e}"))?;
        let host = parsed
            .host_str()
            .ok_or_else(|| format!("the package index {url:?} names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let http = match parsed.scheme() {
            "http" => true,
            "https" => false,
            _ => {
                return Err(format!(
                    "the package index {url:?} is neither http:// nor https://"
                ));
            }
        };
        let port = parsed
            .port_or_known_default()
            .unwrap_or(if http { 80 } else { 443 });
        add(&mut entries, &host, port, http);
        if host == PYPI {
            add(&mut entries, PYPI_FILES, 443, false);
        }
    }
    EgressRules::new(entries)
        .map_err(|bad| format!("the package index {}: {}", bad.key, bad.problem))
}

/// Adds `host:port` to the entry for `host` (made when missing).
fn add(entries: &mut Vec<EgressEntry>, host: &str, port: u16, http: bool) {
    if let Some(entry) = entries.iter_mut().find(|e| e.key == host) {
        if !entry.ports.contains(&port) {
            entry.ports.push(port);
        }
        entry.http |= http;
        return;
    }
    entries.push(EgressEntry {
        ports: vec![port],
        http,
        methods: vec![Method::GET, Method::HEAD],
        private: true,
        ..EgressEntry::new(host)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::egress::host::Host;

    #[test]
    fn pypi_brings_its_files_host_and_nothing_else() {
        let rules = installer_rules(&["https://pypi.org/simple".into()]).unwrap();
        let keys: Vec<&str> = rules.entries().iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["pypi.org", "files.pythonhosted.org"]);
        let other = Host::parse("example.org").unwrap();
        assert!(rules.entry_for(&other).is_none());
    }

    #[test]
    fn a_private_index_on_its_port_over_plain_http() {
        let rules = installer_rules(&[
            "http://127.0.0.1:8999/simple".into(),
            "https://mirror.lan/root/pypi/+simple/".into(),
        ])
        .unwrap();
        let local = rules.entry_for(&Host::parse("127.0.0.1").unwrap()).unwrap();
        assert_eq!(
            (local.ports.as_slice(), local.http, local.private),
            (&[8999][..], true, true)
        );
        assert!(local.check_port(8999, false).is_ok());
        assert!(local.check_port(443, true).is_err());
        assert!(local.decide(&Method::POST, "/simple/").is_err());
        assert!(installer_rules(&["ftp://x/simple".into()]).is_err());
    }
}
