//! The claims of an access token, checked strictly: a claim of the wrong JSON type is refused,
//! never read as absent. `aud` must name this resource (RFC 8707: a token meant for another
//! service is refused), `exp` must be there and not past, `nbf` not ahead (a small leeway for
//! clocks apart), every required scope granted; the tenant claim must name exactly one tenant.

use serde_json::{Map, Value};

use super::Refusal;
use super::resource::Resource;
use crate::tenancy::claim_map::ClaimMap;

/// Clocks of the server and the authorization server may be this far apart.
pub const LEEWAY_SECS: f64 = 60.0;
/// Longest `sub` accepted.
const MAX_SUBJECT_CHARS: usize = 256;

/// What the claims must hold.
pub struct Expect<'a> {
    pub resource: &'a Resource,
    pub scopes: &'a [String],
    pub tenant_claim: &'a str,
    pub tenants: &'a ClaimMap,
    /// Seconds since the epoch.
    pub now: f64,
}

/// What a token's checked claims say about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub tenant: String,
    pub subject: String,
    pub client_id: Option<String>,
}

/// Checks `claims` of a token whose issuer and signature are already checked (or which its
/// authorization server said is active): audience, times, scopes, subject and tenant.
pub fn check(claims: &Map<String, Value>, expect: &Expect<'_>) -> Result<Holder, Refusal> {
    check_audience(claims, expect.resource)?;
    check_times(claims, expect.now)?;
    let subject = match claims.get("sub") {
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= MAX_SUBJECT_CHARS => {
            s.clone()
        }
        Some(_) => return Err(Refusal::Claim("sub is not a string of 1 to 256 characters")),
        None => return Err(Refusal::Claim("the token has no sub (subject) claim")),
    };
    check_scopes(claims, expect.scopes)?;
    let tenant = tenant_of(claims, expect.tenant_claim, expect.tenants)?;
    // RFC 9068's client_id, else OpenID's azp, Okta's cid or Entra's (v1) appid.
    let client_id = ["client_id", "azp", "cid", "appid"]
        .iter()
        .find_map(|k| claims.get(*k).and_then(Value::as_str))
        .map(|c| crate::text::prefix_chars(c, MAX_SUBJECT_CHARS).to_string());
    Ok(Holder {
        tenant,
        subject,
        client_id,
    })
}

fn check_audience(claims: &Map<String, Value>, resource: &Resource) -> Result<(), Refusal> {
    let named = match claims.get("aud") {
        Some(Value::String(aud)) => resource.is_named_by(aud),
        Some(Value::Array(auds)) => {
            if !auds.iter().all(Value::is_string) {
                return Err(Refusal::Claim("aud holds something other than strings"));
            }
            auds.iter()
                .filter_map(Value::as_str)
                .any(|a| resource.is_named_by(a))
        }
        Some(_) => {
            return Err(Refusal::Claim(
                "aud is neither a string nor a list of strings",
            ));
        }
        None => false,
    };
    if named {
        Ok(())
    } else {
        Err(Refusal::Audience(resource.resource.clone()))
    }
}

fn check_times(claims: &Map<String, Value>, now: f64) -> Result<(), Refusal> {
    let time = |name: &'static str| match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or(Refusal::Claim(name)),
        Some(_) => Err(Refusal::Claim(match name {
            "exp" => "exp is not a number of seconds",
            "nbf" => "nbf is not a number of seconds",
            _ => "iat is not a number of seconds",
        })),
    };
    let Some(exp) = time("exp")? else {
        return Err(Refusal::Claim("the token has no exp (expiry) claim"));
    };
    if exp + LEEWAY_SECS <= now {
        return Err(Refusal::Expired);
    }
    if let Some(nbf) = time("nbf")?
        && nbf - LEEWAY_SECS > now
    {
        return Err(Refusal::NotYetValid);
    }
    time("iat")?;
    Ok(())
}

/// Every scope of `required` must be granted: in `scope` (RFC 9068) or `scp` (as some
/// providers name it), each a space-separated string or a list of strings.
fn check_scopes(claims: &Map<String, Value>, required: &[String]) -> Result<(), Refusal> {
    if required.is_empty() {
        return Ok(());
    }
    let granted: Vec<&str> = match claims.get("scope").or_else(|| claims.get("scp")) {
        None => Vec::new(),
        Some(Value::String(s)) => s.split(' ').collect(),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
            list.iter().filter_map(Value::as_str).collect()
        }
        Some(_) => {
            return Err(Refusal::Claim(
                "scope is neither a space-separated string nor a list of strings",
            ));
        }
    };
    let missing: Vec<String> = (required.iter())
        .filter(|s| !granted.contains(&s.as_str()))
        .cloned()
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Scope(missing))
    }
}

/// The claim `claim` names: a top-level name, or a JSON pointer (RFC 6901) into the claims.
fn claim_at<'a>(claims: &'a Map<String, Value>, claim: &str) -> Option<&'a Value> {
    let Some(pointer) = claim.strip_prefix('/') else {
        return claims.get(claim);
    };
    let (first, rest) = match pointer.find('/') {
        Some(i) => (&pointer[..i], &pointer[i..]),
        None => (pointer, ""),
    };
    let first = first.replace("~1", "/").replace("~0", "~");
    claims.get(&first)?.pointer(rest)
}

/// The tenant the claim names (`claim` a name, or a JSON pointer for a nested one): a string
/// that is one of a tenant's values, or a list holding values of exactly one tenant.
pub fn tenant_of(
    claims: &Map<String, Value>,
    claim: &str,
    tenants: &ClaimMap,
) -> Result<String, Refusal> {
    let named: Vec<&str> = match claim_at(claims, claim) {
        None => return Err(Refusal::NoTenantClaim(claim.to_string())),
        Some(Value::String(v)) => tenants.tenant_of(v).into_iter().collect(),
        Some(Value::Array(values)) if values.iter().all(Value::is_string) => {
            let mut named: Vec<&str> = values
                .iter()
                .filter_map(Value::as_str)
                .filter_map(|v| tenants.tenant_of(v))
                .collect();
            named.sort_unstable();
            named.dedup();
            named
        }
        Some(_) => return Err(Refusal::TenantClaimType(claim.to_string())),
    };
    match named.as_slice() {
        [tenant] => Ok((*tenant).to_string()),
        [] => Err(Refusal::UnknownTenant(claim.to_string())),
        several => Err(Refusal::SeveralTenants(
            claim.to_string(),
            several.iter().map(|t| t.to_string()).collect(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: f64 = 1_800_000_000.0;

    fn claims(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn valid() -> Value {
        json!({
            "iss": "https://idp.example.com", "sub": "user-1", "aud": "https://mcp.example.com/mcp",
            "exp": NOW + 300.0, "nbf": NOW - 10.0, "iat": NOW - 10.0, "client_id": "claude",
            "scope": "mcp:run profile", "tenant": "eng",
        })
    }

    fn checked(v: Value) -> Result<Holder, Refusal> {
        let resource = Resource::new("https://mcp.example.com").unwrap();
        let tenants = ClaimMap::parse("team-a = eng\nteam-b = ops").unwrap();
        let scopes = vec!["mcp:run".to_string()];
        check(
            &claims(v),
            &Expect {
                resource: &resource,
                scopes: &scopes,
                tenant_claim: "tenant",
                tenants: &tenants,
                now: NOW,
            },
        )
    }

    fn with(key: &str, value: Value) -> Value {
        let mut v = valid();
        v[key] = value;
        v
    }

    fn without(key: &str) -> Value {
        let mut v = valid();
        v.as_object_mut().unwrap().remove(key);
        v
    }

    #[test]
    fn a_valid_token_names_its_holder() {
        let holder = checked(valid()).unwrap();
        assert_eq!(holder.tenant, "team-a");
        assert_eq!(holder.subject, "user-1");
        assert_eq!(holder.client_id.as_deref(), Some("claude"));
        let listed = with("aud", json!(["other", "https://MCP.example.com:443/mcp"]));
        assert!(checked(listed).is_ok());
        assert!(
            checked(with("exp", json!(NOW - 30.0))).is_ok(),
            "within the leeway"
        );
    }

    #[test]
    fn every_claim_at_fault_is_refused_saying_which() {
        let cases = [
            (
                with("aud", json!("https://other.example.com/mcp")),
                "meant for another",
            ),
            (
                with("aud", json!(["https://other.example.com/mcp"])),
                "meant for another",
            ),
            (without("aud"), "meant for another"),
            (with("aud", json!([1])), "aud holds"),
            (with("exp", json!(NOW - 61.0)), "expired"),
            (with("exp", json!("99999999999")), "exp is not a number"),
            (without("exp"), "no exp"),
            (with("nbf", json!(NOW + 120.0)), "not valid yet"),
            (with("nbf", json!("99999999999")), "nbf is not a number"),
            (with("iat", json!(true)), "iat is not"),
            (without("sub"), "no sub"),
            (with("sub", json!(7)), "sub is not"),
            (with("scope", json!("profile")), "mcp:run"),
            (without("scope"), "mcp:run"),
            (with("scope", json!(["mcp:run", 1])), "scope is neither"),
            (with("scope", json!(7)), "scope is neither"),
            (without("tenant"), "no tenant claim"),
            (with("tenant", json!("nobody")), "names no tenant"),
            (with("tenant", json!({"a": 1})), "tenant claim is"),
            (with("tenant", json!(["eng", "ops"])), "team-a and team-b"),
            (with("tenant", json!(["eng", 7])), "tenant claim is"),
        ];
        for (v, expected) in cases {
            let err = checked(v.clone()).unwrap_err().to_string();
            assert!(err.contains(expected), "{v}: {err}");
        }
    }

    #[test]
    fn list_and_nested_tenant_claims() {
        let tenants = ClaimMap::parse("team-a = eng\nteam-b = ops").unwrap();
        let c = claims(json!({"groups": ["staff", "eng"], "realm_access": {"roles": ["ops"]}}));
        assert_eq!(tenant_of(&c, "groups", &tenants).unwrap(), "team-a");
        assert_eq!(
            tenant_of(&c, "/realm_access/roles", &tenants).unwrap(),
            "team-b"
        );
        let c2 = claims(json!({"a/b": {"~x": "ops"}}));
        assert_eq!(tenant_of(&c2, "/a~1b/~0x", &tenants).unwrap(), "team-b");
        let err = tenant_of(&c, "/realm_access/nothing", &tenants).unwrap_err();
        assert!(err.to_string().contains("/realm_access/nothing"), "{err}");
        let c = claims(json!({"groups": ["eng", "eng"]}));
        assert_eq!(tenant_of(&c, "groups", &tenants).unwrap(), "team-a");
    }

    #[test]
    fn scopes_may_come_as_a_list_or_as_scp() {
        assert!(checked(with("scope", json!(["profile", "mcp:run"]))).is_ok());
        assert!(
            checked(
                with("scp", json!(["mcp:run"]))
                    .as_object()
                    .map(|o| {
                        let mut o = o.clone();
                        o.remove("scope");
                        Value::Object(o)
                    })
                    .unwrap()
            )
            .is_ok()
        );
    }
}
