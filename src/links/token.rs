//! A link's token: `BASE64URL(JSON of the link) "." BASE64URL(HMAC-SHA256)`, the MAC over a
//! domain label and the first part, so that a token is only ever a link (never another
//! HMAC-keyed value of this server). Checked in constant time before the JSON is parsed.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{Link, LinkError, LinkKey};

/// What the MAC covers before the payload.
const LABEL: &[u8] = b"code-execution-mcp link v1.";

/// The longest token accepted (a link's path is at most the workspace's 1,024 bytes).
pub const MAX_LEN: usize = 2048;

/// The shortest a token can be (a link with nothing optional, and its MAC): what the
/// gateway looks for in text.
pub const MIN_LEN: usize = 80;

/// The token of `link`, signed with `key`.
pub fn seal(link: &Link, key: &LinkKey) -> String {
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(link).expect("a link serializes"));
    let tag = key.sign(&[LABEL, payload.as_bytes()]);
    format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// The link `token` carries, when `key` signed it (expiry is the caller's to check).
pub fn open(token: &str, key: &LinkKey) -> Result<Link, LinkError> {
    if token.len() > MAX_LEN {
        return Err(LinkError::Invalid);
    }
    let (payload, tag) = token.split_once('.').ok_or(LinkError::Invalid)?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| LinkError::Invalid)?;
    if !key.verify(&[LABEL, payload.as_bytes()], &tag) {
        return Err(LinkError::Invalid);
    }
    let json = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| LinkError::Invalid)?;
    let link: Link = serde_json::from_slice(&json).map_err(|_| LinkError::Invalid)?;
    if !link.id_is_valid() {
        return Err(LinkError::Invalid);
    }
    Ok(link)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::links::Kind;

    fn link() -> Link {
        let mut link = Link::new(Kind::Upload, Some("team-a".into()), Duration::from_secs(60));
        link.max_bytes = 1 << 20;
        link.path = Some("data/in.csv".into());
        link
    }

    #[test]
    fn a_sealed_link_opens_with_its_key_only() {
        let key = LinkKey::from_bytes(&[7; 32]).unwrap();
        let token = seal(&link(), &key);
        assert!(token.len() >= MIN_LEN, "{}", token.len());
        assert_eq!(open(&token, &key).unwrap(), link_with_id(&token, &key));
        let other = LinkKey::from_bytes(&[8; 32]).unwrap();
        assert_eq!(open(&token, &other), Err(LinkError::Invalid));
    }

    fn link_with_id(token: &str, key: &LinkKey) -> Link {
        open(token, key).unwrap()
    }

    #[test]
    fn an_edited_link_is_refused() {
        let key = LinkKey::from_bytes(&[7; 32]).unwrap();
        let token = seal(&link(), &key);
        let (payload, tag) = token.split_once('.').unwrap();
        // Another tenant, with the old signature.
        let json = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        let edited = json.replace("team-a", "team-b");
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(edited));
        assert_eq!(open(&forged, &key), Err(LinkError::Invalid));
        // Cut short, extended, no signature, garbage, too long.
        for bad in [
            &token[..token.len() - 1],
            &format!("{token}A"),
            payload,
            "not a token",
            &"A".repeat(MAX_LEN + 1),
        ] {
            assert_eq!(open(bad, &key), Err(LinkError::Invalid), "{bad}");
        }
    }
}
