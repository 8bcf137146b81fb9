//! Real HTTPS servers for the egress and OAuth tests: a CA the test makes, and a recording API
//! (`tests/python/recording_https.py`) whose own record says what reached it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// A CA made for the test and a certificate it signed for 127.0.0.1 and localhost.
pub struct TestCa {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn test_ca(dir: &Path) -> TestCa {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let paths = TestCa {
        ca: dir.join("ca.pem"),
        cert: dir.join("api.pem"),
        key: dir.join("api.key"),
    };
    std::fs::write(&paths.ca, ca_cert.pem()).unwrap();
    std::fs::write(&paths.cert, cert.pem()).unwrap();
    std::fs::write(&paths.key, key.serialize_pem()).unwrap();
    paths
}

/// A recording HTTPS API (`tests/python/recording_https.py`).
pub struct Api {
    child: std::process::Child,
    pub port: u16,
    /// Where it records the requests, one JSON line each.
    pub log: PathBuf,
}

impl Api {
    pub fn start(ca: &TestCa, dir: &Path, name: &str) -> Self {
        let log = dir.join(format!("{name}.jsonl"));
        let port_file = dir.join(format!("{name}.port"));
        let mut child = std::process::Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/python/recording_https.py"
            ))
            .args([&ca.cert, &ca.key, &log, &port_file])
            .spawn()
            .expect("python3 runs the recording API");
        for _ in 0..100 {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                return Self {
                    child,
                    port: port.trim().parse().unwrap(),
                    log,
                };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("the recording API did not start");
    }

    /// Every request the API received, in order.
    pub fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn paths(&self) -> Vec<String> {
        (self.requests().iter())
            .map(|r| {
                format!(
                    "{} {}",
                    r["method"].as_str().unwrap(),
                    r["path"].as_str().unwrap()
                )
            })
            .collect()
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
