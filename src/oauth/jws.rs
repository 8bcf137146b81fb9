//! A JWT access token's signature (RFC 7515 compact form, RFC 7518 algorithms), checked with
//! ring against a key of the issuer's JWKS (RFC 7517).
//!
//! Only asymmetric algorithms are accepted (RS256/384/512, PS256/384/512, ES256, ES384, EdDSA):
//! never `none`, never an HMAC (whose key would be the issuer's *public* key, the classic
//! forgery). A key is used only for the algorithm family it is: an RSA key for RS and PS, a
//! P-256 key for ES256, P-384 for ES384, Ed25519 for EdDSA; a key that names its own `alg` or a
//! `use` other than `sig` is used for that only. Nothing here formats a token into a message.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::Refusal;

/// Longest access token accepted.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The algorithms accepted, as a refusal lists them.
pub const ACCEPTED: &str = "RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
    EdDsa,
}

impl Alg {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "RS256" => Self::Rs256,
            "RS384" => Self::Rs384,
            "RS512" => Self::Rs512,
            "PS256" => Self::Ps256,
            "PS384" => Self::Ps384,
            "PS512" => Self::Ps512,
            "ES256" => Self::Es256,
            "ES384" => Self::Es384,
            "EdDSA" => Self::EdDsa,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Rs384 => "RS384",
            Self::Rs512 => "RS512",
            Self::Ps256 => "PS256",
            Self::Ps384 => "PS384",
            Self::Ps512 => "PS512",
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
            Self::EdDsa => "EdDSA",
        }
    }
}

/// One key of a JWKS, as far as verification reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct Jwk {
    pub kty: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub alg: Option<String>,
    #[serde(default, rename = "use")]
    pub use_: Option<String>,
    #[serde(default)]
    n: Option<String>,
    #[serde(default)]
    e: Option<String>,
    #[serde(default)]
    crv: Option<String>,
    #[serde(default)]
    x: Option<String>,
    #[serde(default)]
    y: Option<String>,
}

impl Jwk {
    /// Whether this key may verify signatures of `alg`.
    pub fn fits(&self, alg: Alg) -> bool {
        let family = match alg {
            Alg::Rs256 | Alg::Rs384 | Alg::Rs512 | Alg::Ps256 | Alg::Ps384 | Alg::Ps512 => {
                self.kty == "RSA"
            }
            Alg::Es256 => self.kty == "EC" && self.crv.as_deref() == Some("P-256"),
            Alg::Es384 => self.kty == "EC" && self.crv.as_deref() == Some("P-384"),
            Alg::EdDsa => self.kty == "OKP" && self.crv.as_deref() == Some("Ed25519"),
        };
        family
            && self.alg.as_deref().is_none_or(|a| a == alg.name())
            && self.use_.as_deref().is_none_or(|u| u == "sig")
    }

    /// Whether `signature` signs `input` under this key with `alg` (which it [`Jwk::fits`]).
    fn verifies(&self, alg: Alg, input: &[u8], signature: &[u8]) -> bool {
        let b64 =
            |part: &Option<String>| part.as_deref().and_then(|p| URL_SAFE_NO_PAD.decode(p).ok());
        match alg {
            Alg::Rs256 | Alg::Rs384 | Alg::Rs512 | Alg::Ps256 | Alg::Ps384 | Alg::Ps512 => {
                let (Some(n), Some(e)) = (b64(&self.n), b64(&self.e)) else {
                    return false;
                };
                // Some key sets write the modulus with a leading zero byte, which ring reads as
                // a malformed key.
                let n = n
                    .iter()
                    .position(|b| *b != 0)
                    .map_or(n.clone(), |i| n[i..].to_vec());
                let params: &signature::RsaParameters = match alg {
                    Alg::Rs256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    Alg::Rs384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    Alg::Rs512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    Alg::Ps256 => &signature::RSA_PSS_2048_8192_SHA256,
                    Alg::Ps384 => &signature::RSA_PSS_2048_8192_SHA384,
                    _ => &signature::RSA_PSS_2048_8192_SHA512,
                };
                RsaPublicKeyComponents { n, e }
                    .verify(params, input, signature)
                    .is_ok()
            }
            Alg::Es256 | Alg::Es384 => {
                let (size, algorithm) = if alg == Alg::Es256 {
                    (32, &signature::ECDSA_P256_SHA256_FIXED)
                } else {
                    (48, &signature::ECDSA_P384_SHA384_FIXED)
                };
                let (Some(x), Some(y)) = (b64(&self.x), b64(&self.y)) else {
                    return false;
                };
                if x.len() != size || y.len() != size {
                    return false;
                }
                let point = [&[4u8][..], &x, &y].concat();
                UnparsedPublicKey::new(algorithm, point)
                    .verify(input, signature)
                    .is_ok()
            }
            Alg::EdDsa => b64(&self.x).is_some_and(|x| {
                UnparsedPublicKey::new(&signature::ED25519, x)
                    .verify(input, signature)
                    .is_ok()
            }),
        }
    }
}

/// A token split and decoded, its signature not yet checked.
#[derive(Debug)]
pub struct Jws<'a> {
    pub alg: Alg,
    pub kid: Option<String>,
    pub claims: Map<String, Value>,
    signing_input: &'a str,
    signature: Vec<u8>,
}

#[derive(Deserialize)]
struct Header {
    alg: Value,
    #[serde(default)]
    kid: Option<Value>,
    #[serde(default)]
    crit: Option<Value>,
}

/// Whether `token` has the form of a compact JWS (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

/// Splits and decodes `token`: its algorithm must be one accepted, its claims a JSON object.
pub fn parse(token: &str) -> Result<Jws<'_>, Refusal> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Refusal::Malformed(format!(
            "the access token is over {} KiB",
            MAX_TOKEN_BYTES / 1024
        )));
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Refusal::Malformed(
            "the access token is not a JWT (three base64url parts separated by dots)".into(),
        ));
    };
    let decode = |part: &str, what: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| Refusal::Malformed(format!("the token's {what} is not base64url")))
    };
    let header: Header = serde_json::from_slice(&decode(header, "header")?)
        .map_err(|_| Refusal::Malformed("the token's header is not a JWS header".into()))?;
    let alg = match header.alg.as_str() {
        Some(name) => Alg::parse(name).ok_or_else(|| Refusal::Algorithm(printable(name)))?,
        None => return Err(Refusal::Malformed("the token's header has no alg".into())),
    };
    if header.crit.is_some() {
        return Err(Refusal::Malformed(
            "the token's header names critical extensions (crit), which this server does not understand".into(),
        ));
    }
    let kid = match header.kid {
        None => None,
        Some(Value::String(kid)) => Some(kid),
        Some(_) => return Err(Refusal::Malformed("the token's kid is not a string".into())),
    };
    let claims = match serde_json::from_slice(&decode(payload, "payload")?) {
        Ok(Value::Object(claims)) => claims,
        _ => {
            return Err(Refusal::Malformed(
                "the token's payload is not a JSON object of claims".into(),
            ));
        }
    };
    let signing_input = &token[..token.len() - signature.len() - 1];
    Ok(Jws {
        alg,
        kid,
        claims,
        signing_input,
        signature: decode(signature, "signature")?,
    })
}

impl Jws<'_> {
    /// Whether the signature verifies under `key`.
    pub fn verifies_with(&self, key: &Jwk) -> bool {
        key.fits(self.alg) && key.verifies(self.alg, self.signing_input.as_bytes(), &self.signature)
    }
}

/// `text` cut short and stripped of anything but printable ASCII, for a message that names
/// what a token claimed (an algorithm's name).
pub fn printable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_graphic() && *c != '"' && *c != '\\')
        .take(32)
        .collect()
}

#[cfg(test)]
mod tests {
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair};

    use super::*;

    fn b64(bytes: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    fn jwk(value: Value) -> Jwk {
        serde_json::from_value(value).unwrap()
    }

    /// A P-256 key pair and its JWK.
    fn p256() -> (EcdsaKeyPair, Jwk) {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        let point = pair.public_key().as_ref();
        let key = jwk(serde_json::json!({
            "kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig",
            "x": b64(&point[1..33]), "y": b64(&point[33..]),
        }));
        (pair, key)
    }

    fn signed(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = sign(input.as_bytes());
        format!("{input}.{}", b64(&signature))
    }

    #[test]
    fn an_es256_token_verifies_with_its_key_only() {
        let (pair, key) = p256();
        let (_, other) = p256();
        let rng = SystemRandom::new();
        let header = serde_json::json!({"alg": "ES256", "kid": "k1", "typ": "at+jwt"});
        let claims = serde_json::json!({"sub": "u1"});
        let token = signed(&header, &claims, |m| {
            pair.sign(&rng, m).unwrap().as_ref().to_vec()
        });
        let jws = parse(&token).unwrap();
        assert_eq!(jws.kid.as_deref(), Some("k1"));
        assert_eq!(jws.claims["sub"], "u1");
        assert!(jws.verifies_with(&key));
        assert!(!jws.verifies_with(&other));
        // The same signature over other claims.
        let forged = signed(&header, &serde_json::json!({"sub": "admin"}), |_| {
            URL_SAFE_NO_PAD
                .decode(token.rsplit('.').next().unwrap())
                .unwrap()
        });
        assert!(!parse(&forged).unwrap().verifies_with(&key));
    }

    #[test]
    fn an_ed25519_token_verifies() {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let key = jwk(serde_json::json!({
            "kty": "OKP", "crv": "Ed25519", "x": b64(pair.public_key().as_ref()),
        }));
        let token = signed(
            &serde_json::json!({"alg": "EdDSA"}),
            &serde_json::json!({"sub": "u1"}),
            |m| pair.sign(m).as_ref().to_vec(),
        );
        assert!(parse(&token).unwrap().verifies_with(&key));
    }

    #[test]
    fn none_and_hmac_are_refused_before_any_key() {
        for alg in ["none", "HS256", "HS512", "nOnE"] {
            let token = signed(
                &serde_json::json!({"alg": alg}),
                &serde_json::json!({"sub": "u"}),
                |_| Vec::new(),
            );
            assert!(matches!(parse(&token), Err(Refusal::Algorithm(_))), "{alg}");
        }
    }

    #[test]
    fn a_key_verifies_only_its_own_family_and_alg() {
        let (pair, mut key) = p256();
        let rng = SystemRandom::new();
        let token = signed(
            &serde_json::json!({"alg": "ES256"}),
            &serde_json::json!({}),
            |m| pair.sign(&rng, m).unwrap().as_ref().to_vec(),
        );
        let jws = parse(&token).unwrap();
        key.alg = Some("ES384".into());
        assert!(!jws.verifies_with(&key));
        key.alg = None;
        key.use_ = Some("enc".into());
        assert!(!jws.verifies_with(&key));
        let rsa = jwk(serde_json::json!({"kty": "RSA", "n": "AQAB", "e": "AQAB"}));
        assert!(!jws.verifies_with(&rsa));
    }

    #[test]
    fn malformed_tokens_are_refused_saying_why() {
        let cases = [
            ("abc".to_string(), "not a JWT"),
            ("a.b.c.d".to_string(), "not a JWT"),
            ("!!.e30.".to_string(), "base64url"),
            (format!("{}.e30.", b64(b"[]")), "not a JWS header"),
            (
                format!("{}.e30.", b64(br#"{"typ":"JWT"}"#)),
                "not a JWS header",
            ),
            (
                format!("{}.{}.", b64(br#"{"alg":"ES256"}"#), b64(b"[1]")),
                "not a JSON object",
            ),
            (
                format!("{}.e30.", b64(br#"{"alg":"ES256","crit":["x"]}"#)),
                "critical",
            ),
            (
                format!("{}.e30.", b64(br#"{"alg":"ES256","kid":7}"#)),
                "kid",
            ),
            ("a".repeat(MAX_TOKEN_BYTES + 1), "over 16 KiB"),
        ];
        for (token, expected) in cases {
            let err = parse(&token).unwrap_err().to_string();
            assert!(err.contains(expected), "{token:.40}: {err}");
        }
    }
}
