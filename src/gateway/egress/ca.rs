//! The certificate authority sandboxes trust, and the certificates the egress proxy shows them.
//!
//! The proxy terminates the TLS a sandbox opens (that is what lets it add an entry's secret
//! headers, check each request, and refuse with an answer the code can read), so the sandbox
//! must trust whoever signs the proxy's certificates. That signer is made at each start and
//! lives in this process's memory only: no file holds its key, a sandbox gets its certificate
//! alone (`/mnt/egress/ca.pem`), and no other program on the host trusts it. Each host a
//! sandbox connects to gets a leaf certificate for its name (or address), signed on first use
//! and kept in a bounded cache; all leaves share one key, which is as secret as the CA's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::host::Host;

/// Leaf configurations kept at once: more distinct hosts than this in one server's life are
/// signed again when they come back.
const MAX_LEAVES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error(
        "cannot make the egress proxy's certificate authority: {0}. This is a bug or a broken random source; run without \"egress\" in the upstreams file meanwhile"
    )]
    Make(rcgen::Error),
    #[error("cannot sign a certificate for {host}: {error}")]
    Leaf { host: String, error: String },
}

/// The proxy's signer: its certificate (for sandboxes) and the leaves it has signed.
pub struct EgressCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    cert_der: CertificateDer<'static>,
    leaf_key: KeyPair,
    leaves: Mutex<HashMap<Host, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for EgressCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressCa").finish_non_exhaustive()
    }
}

impl EgressCa {
    /// A new authority, valid from yesterday for ten years (its key dies with the process);
    /// leaves are signed for the same span.
    pub fn new() -> Result<Self, CaError> {
        let key = KeyPair::generate().map_err(CaError::Make)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = name("code-execution-mcp egress CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params);
        let cert = params.self_signed(&key).map_err(CaError::Make)?;
        let leaf_key = KeyPair::generate().map_err(CaError::Make)?;
        Ok(Self {
            cert_pem: cert.pem(),
            cert_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
            leaf_key,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The authority's certificate in PEM, what a sandbox's bundle holds.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The authority's certificate, for tests and clients that trust it directly.
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// The TLS configuration that shows `host` its own certificate (HTTP/1.1 only).
    pub fn server_config(&self, host: &Host) -> Result<Arc<rustls::ServerConfig>, CaError> {
        let mut leaves = self
            .leaves
            .lock()
            .expect("the leaf cache is never poisoned");
        if let Some(config) = leaves.get(host) {
            return Ok(config.clone());
        }
        let config = Arc::new(self.sign(host)?);
        if leaves.len() >= MAX_LEAVES {
            leaves.clear();
        }
        leaves.insert(host.clone(), config.clone());
        Ok(config)
    }

    fn sign(&self, host: &Host) -> Result<rustls::ServerConfig, CaError> {
        let leaf_error = |error: String| CaError::Leaf {
            host: host.to_string(),
            error,
        };
        let mut params = CertificateParams::new(vec![host.to_string()])
            .map_err(|e| leaf_error(e.to_string()))?;
        params.distinguished_name = name(&host.to_string());
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params);
        let leaf = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| leaf_error(e.to_string()))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| leaf_error(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.cert_der.clone()], key)
            .map_err(|e| leaf_error(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

fn name(common: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common);
    dn
}

/// From yesterday (clocks of sandboxes and host agree, but a day's slack costs nothing) for
/// ten years (the key dies with the process).
fn validity(params: &mut CertificateParams) {
    use chrono::Datelike;
    let day = |d: chrono::DateTime<chrono::Utc>| {
        rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8)
    };
    let now = chrono::Utc::now();
    params.not_before = day(now - chrono::Duration::days(1));
    params.not_after = day(now + chrono::Duration::days(3650));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_is_signed_once_per_host_and_names_it() {
        let ca = EgressCa::new().unwrap();
        let host = Host::Name("api.example.org".into());
        let a = ca.server_config(&host).unwrap();
        let b = ca.server_config(&host).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "cached");
        let ip = Host::Ip("127.0.0.1".parse().unwrap());
        let c = ca.server_config(&ip).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
    }
}
