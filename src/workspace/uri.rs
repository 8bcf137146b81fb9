//! The workspace as MCP resources: each regular file is `workspace:///<path>` (every path
//! component percent-encoded), so a client can fetch a file the code produced without its
//! bytes passing through the model as base64. Listing and reading go through
//! [`crate::workspace`] like the workspace tools do (no symlink followed, names validated, size
//! capped); this module only maps URIs to paths and pages the listing.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::workspace::Listing;

/// The URI scheme (with an empty authority) of workspace files.
pub const URI_PREFIX: &str = "workspace:///";
/// The RFC 6570 template of a workspace file's URI.
pub const URI_TEMPLATE: &str = "workspace:///{+path}";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 500;

/// Characters left as they are in a URI's path component (RFC 3986 unreserved).
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResourceError {
    #[error(
        "{uri:?} is not a workspace resource: URIs look like workspace:///reports/q3.csv (resources/list shows them)"
    )]
    NotWorkspace { uri: String },
    #[error("{uri:?} is not a valid URI path: {why}")]
    BadPath { uri: String, why: &'static str },
    #[error("invalid cursor {0:?}: pass the nextCursor of the previous resources/list page")]
    BadCursor(String),
}

/// The URI of a workspace file (a path relative to the workspace root).
pub fn uri_for(path: &str) -> String {
    let mut uri = String::from(URI_PREFIX);
    for (i, component) in path.split('/').enumerate() {
        if i > 0 {
            uri.push('/');
        }
        uri.extend(utf8_percent_encode(component, COMPONENT));
    }
    uri
}

/// The workspace path a URI names. The path still goes through the workspace's own
/// validation (no `..`, no absolute paths, no control characters) when it is used.
pub fn path_of(uri: &str) -> Result<String, ResourceError> {
    let rest = uri
        .strip_prefix(URI_PREFIX)
        .ok_or_else(|| ResourceError::NotWorkspace { uri: uri.into() })?;
    if rest.contains(['?', '#']) {
        return Err(ResourceError::BadPath {
            uri: uri.into(),
            why: "a workspace URI has no query or fragment",
        });
    }
    let mut path = String::with_capacity(rest.len());
    for (i, component) in rest.split('/').enumerate() {
        if i > 0 {
            path.push('/');
        }
        let decoded =
            percent_decode_str(component)
                .decode_utf8()
                .map_err(|_| ResourceError::BadPath {
                    uri: uri.into(),
                    why: "its percent-encoding is not UTF-8",
                })?;
        // An encoded '/' would join two components the URI kept apart.
        if decoded.contains('/') {
            return Err(ResourceError::BadPath {
                uri: uri.into(),
                why: "a path component holds an encoded '/'",
            });
        }
        path.push_str(&decoded);
    }
    Ok(path)
}

/// The MIME type a file's name suggests (application/octet-stream when it suggests none).
pub fn mime_for(path: &str) -> String {
    mime_guess::from_path(path)
        .first_raw()
        .unwrap_or("application/octet-stream")
        .to_string()
}

/// Whether a client should get the file as text (else as a base64 blob): its bytes are UTF-8
/// and its type is not an image, audio, video or archive.
pub fn is_text(mime: &str, bytes: &[u8]) -> bool {
    let binary_kind = ["image/", "audio/", "video/", "font/"]
        .iter()
        .any(|p| mime.starts_with(p) && mime != "image/svg+xml");
    !binary_kind && std::str::from_utf8(bytes).is_ok()
}

/// One page of a listing: the files from `cursor` (an offset, as the previous page's
/// `next`), and the cursor of the next page when there is one.
pub fn page<'a>(
    listing: &'a Listing,
    cursor: Option<&str>,
) -> Result<(&'a [String], Option<String>), ResourceError> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= listing.files.len())
            .ok_or_else(|| ResourceError::BadCursor(c.into()))?,
    };
    let end = (start + PAGE_SIZE).min(listing.files.len());
    let next = (end < listing.files.len()).then(|| end.to_string());
    Ok((&listing.files[start..end], next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_and_encode_each_component() {
        for path in ["a.csv", "reports/q 3/ü.xlsx", "x/%41/y#z?.txt"] {
            let uri = uri_for(path);
            assert!(uri.starts_with(URI_PREFIX));
            assert_eq!(path_of(&uri).unwrap(), path, "{uri}");
        }
        assert_eq!(uri_for("out/chart 1.png"), "workspace:///out/chart%201.png");
    }

    #[test]
    fn refuses_other_schemes_encoded_slashes_and_queries() {
        assert!(matches!(
            path_of("file:///etc/passwd"),
            Err(ResourceError::NotWorkspace { .. })
        ));
        assert!(matches!(
            path_of("workspace://host/a"),
            Err(ResourceError::NotWorkspace { .. })
        ));
        assert!(path_of("workspace:///a%2F..%2F..%2Fetc").is_err());
        assert!(path_of("workspace:///a?x=1").is_err());
        assert!(path_of("workspace:///%FF").is_err());
        // `..` decodes fine here; the workspace refuses it when the path is used.
        assert_eq!(path_of("workspace:///%2E%2E/secret").unwrap(), "../secret");
    }

    #[test]
    fn pages_follow_the_cursor() {
        let listing = Listing {
            files: (0..PAGE_SIZE + 3).map(|i| format!("f{i}")).collect(),
            ..Listing::default()
        };
        let (first, next) = page(&listing, None).unwrap();
        assert_eq!(first.len(), PAGE_SIZE);
        let (rest, last) = page(&listing, next.as_deref()).unwrap();
        assert_eq!((rest.len(), last), (3, None));
        assert!(page(&listing, Some("nope")).is_err());
        assert!(page(&listing, Some("99999")).is_err());
    }

    #[test]
    fn text_or_blob() {
        assert!(is_text("text/csv", b"a,b\n1,2"));
        assert!(!is_text("image/png", b"abc"));
        assert!(is_text("image/svg+xml", b"<svg/>"));
        assert!(!is_text("application/octet-stream", b"\xff\xfe"));
    }
}
