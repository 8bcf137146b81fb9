//! The protected resource this server is (RFC 9728): `--public-url` with `/mcp`, compared
//! exactly, and the metadata document clients read to find the authorization servers.
//!
//! A URL is compared in one form: scheme and host lowercased, the scheme's default port
//! dropped, no trailing slash, no query, fragment or user information. HTTPS unless the host is
//! a loopback address or `localhost` (tests, a server on the user's own machine).

use reqwest::Url;
use serde_json::{Value, json};

/// Where the MCP endpoint is served below the public URL.
pub const MCP_PATH: &str = "/mcp";
/// RFC 9728's well-known path, to which the resource's path is appended.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// `url` in the one form it is compared in, or what is wrong with it. `what` names the flag or
/// field it came from, for the message.
pub fn normalize(url: &str, what: &str) -> Result<String, String> {
    let parsed = Url::parse(url.trim()).map_err(|e| format!("{what} {url:?} is not a URL: {e}"))?;
    let loopback = is_loopback(&parsed);
    match parsed.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(format!(
                "{what} {url} must use https (plain http only on a loopback address)"
            ));
        }
        other => return Err(format!("{what} {url}: scheme {other} is not http(s)")),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "{what} {url} must not hold a user name or password"
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!("{what} {url} must not have a query or fragment"));
    }
    // `Url` lowercases the scheme and host and drops a default port.
    let text = parsed.as_str();
    Ok(text.strip_suffix('/').unwrap_or(text).to_string())
}

/// `url` if the server may fetch from it: HTTPS, or plain HTTP on a loopback address. A
/// query is kept (some providers name a policy in their keys' URL).
pub fn fetchable(url: &str, what: &str) -> Result<String, String> {
    let parsed = Url::parse(url.trim()).map_err(|e| format!("{what} {url:?} is not a URL: {e}"))?;
    match parsed.scheme() {
        "https" => Ok(parsed.into()),
        "http" if is_loopback(&parsed) => Ok(parsed.into()),
        _ => Err(format!(
            "{what} {url} must use https (plain http only on a loopback address)"
        )),
    }
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// The resource (`PUBLIC_URL/mcp`) and what clients are told about it.
#[derive(Debug, Clone)]
pub struct Resource {
    /// `--public-url`, normalized.
    pub public_url: String,
    /// `PUBLIC_URL/mcp`: what a token's `aud` must contain.
    pub resource: String,
}

impl Resource {
    /// The resource of `--public-url`.
    pub fn new(public_url: &str) -> Result<Self, String> {
        let public_url = normalize(public_url, "--public-url")?;
        let resource = format!("{public_url}{MCP_PATH}");
        Ok(Self {
            public_url,
            resource,
        })
    }

    /// The public URL's host (and port, when not the default), for the allowed Host headers.
    pub fn host(&self) -> String {
        let url = Url::parse(&self.public_url).expect("normalized URLs parse");
        let host = url.host_str().unwrap_or_default().to_string();
        match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host,
        }
    }

    /// The public URL's path ("" at the root, else `/prefix` without a trailing slash): the
    /// prefix a reverse proxy serves the server under.
    pub fn prefix(&self) -> String {
        let url = Url::parse(&self.public_url).expect("normalized URLs parse");
        url.path().trim_end_matches('/').to_string()
    }

    /// The metadata document's URL as RFC 9728 forms it: the well-known path inserted between
    /// the host and the resource's path.
    pub fn metadata_url(&self) -> String {
        let url = Url::parse(&self.public_url).expect("normalized URLs parse");
        let origin = url.origin().ascii_serialization();
        format!("{origin}{METADATA_PATH}{}{MCP_PATH}", self.prefix())
    }

    /// Whether an `aud` value names this resource (compared in the normalized form).
    pub fn is_named_by(&self, audience: &str) -> bool {
        audience == self.resource || normalize(audience, "aud").is_ok_and(|a| a == self.resource)
    }

    /// The RFC 9728 metadata document.
    pub fn metadata(&self, issuers: &[String], scopes: &[String]) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": issuers,
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "code-execution-mcp",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_compared_in_one_form() {
        let r = Resource::new("HTTPS://MCP.Example.com:443/").unwrap();
        assert_eq!(r.resource, "https://mcp.example.com/mcp");
        assert!(r.is_named_by("https://mcp.example.com/mcp"));
        assert!(r.is_named_by("https://MCP.example.com:443/mcp/"));
        assert!(!r.is_named_by("https://mcp.example.com/mcp/other"));
        assert!(!r.is_named_by("https://mcp.example.com"));
        assert!(!r.is_named_by("http://mcp.example.com/mcp"));
        assert!(!r.is_named_by("cem"));
        assert_eq!(r.host(), "mcp.example.com");
        assert_eq!(
            r.metadata_url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn a_path_prefix_goes_after_the_well_known_path() {
        let r = Resource::new("https://tools.example.com:8443/team/cem/").unwrap();
        assert_eq!(r.resource, "https://tools.example.com:8443/team/cem/mcp");
        assert_eq!(r.prefix(), "/team/cem");
        assert_eq!(r.host(), "tools.example.com:8443");
        assert_eq!(
            r.metadata_url(),
            "https://tools.example.com:8443/.well-known/oauth-protected-resource/team/cem/mcp"
        );
    }

    #[test]
    fn plain_http_only_on_loopback() {
        assert!(Resource::new("http://127.0.0.1:8080").is_ok());
        assert!(Resource::new("http://localhost:8080").is_ok());
        assert!(Resource::new("http://[::1]:8080").is_ok());
        assert!(fetchable("https://idp.example.com/keys?p=signin", "jwks_uri").is_ok());
        assert!(fetchable("http://127.0.0.1:9/keys", "jwks_uri").is_ok());
        let err = fetchable("http://idp.example.com/keys", "jwks_uri").unwrap_err();
        assert!(err.contains("jwks_uri") && err.contains("https"), "{err}");
        for bad in [
            "http://mcp.example.com",
            "ftp://mcp.example.com",
            "https://user:pw@mcp.example.com",
            "https://mcp.example.com/?x=1",
            "https://mcp.example.com/#f",
            "mcp.example.com",
        ] {
            let err = Resource::new(bad).unwrap_err();
            assert!(err.contains("--public-url"), "{bad}: {err}");
        }
    }
}
