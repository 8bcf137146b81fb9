//! What an execution returns besides text: images (`show_image`, matplotlib figures) and links
//! to workspace files (`resource_link`), as the harness sent them. Like every frame, these are
//! untrusted: the count, the size of each image and the number of links are bounded here, and
//! images are decoded and re-encoded later ([`crate::app::execution::pictures`]), never passed on as sent.

use base64::Engine as _;

/// Largest image the harness sends (its bytes before base64; the frame stays under 8 MiB).
pub const MAX_IMAGE_BYTES: usize = 6 * 1024 * 1024;
/// Links kept per execution; more are dropped (and counted).
pub const MAX_LINKS: usize = 32;
/// Sources of dropped images named in the result; more are only counted.
const MAX_DROPPED_NAMED: usize = 16;

/// An image as the code sent it: encoded bytes of some format, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentImage {
    /// What made it: "figure 1", a file name, or what the code passed as `source`.
    pub source: String,
    pub data: Vec<u8>,
}

/// A workspace file the code asked to return as a resource link (its path, unchecked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentLink {
    pub path: String,
    pub description: Option<String>,
}

/// The images and links of one execution, bounded.
#[derive(Debug, Clone, Default)]
pub struct Returned {
    pub images: Vec<SentImage>,
    /// Why images were not kept, one line each (at most [`MAX_DROPPED_NAMED`] lines).
    pub dropped: Vec<String>,
    /// Images dropped in all (named or not).
    pub dropped_count: usize,
    pub links: Vec<SentLink>,
    pub links_dropped: usize,
}

impl Returned {
    /// Takes an image frame: kept while fewer than `max_images` are and it decodes from base64
    /// to at most [`MAX_IMAGE_BYTES`]; otherwise counted as dropped, saying why.
    pub fn image(&mut self, source: String, data: Option<&str>, dropped: bool, max_images: usize) {
        let source = crate::text::cut_clean(&source, 200);
        let why = match data {
            _ if dropped || self.images.len() >= max_images => {
                format!("at most {max_images} images are returned per execution")
            }
            None => "the frame carried no image".to_string(),
            Some(text) if text.len() > MAX_IMAGE_BYTES.div_ceil(3) * 4 => {
                format!("over {MAX_IMAGE_BYTES} bytes")
            }
            Some(text) => match base64::engine::general_purpose::STANDARD.decode(text) {
                Ok(data) => {
                    self.images.push(SentImage { source, data });
                    return;
                }
                Err(_) => "its data is not base64".to_string(),
            },
        };
        self.drop_image(&source, &why);
    }

    /// Records an image that will not be returned, and why.
    pub fn drop_image(&mut self, source: &str, why: &str) {
        self.dropped_count += 1;
        if self.dropped.len() < MAX_DROPPED_NAMED {
            self.dropped.push(format!("{source}: not returned, {why}"));
        }
    }

    /// Takes a link frame, up to [`MAX_LINKS`].
    pub fn link(&mut self, path: String, description: Option<String>) {
        if self.links.len() >= MAX_LINKS {
            self.links_dropped += 1;
            return;
        }
        self.links.push(SentLink {
            path: crate::text::prefix_chars(&path, 4096).to_owned(),
            description: description.map(|d| crate::text::cut_clean(&d, 1000)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_images_up_to_the_limit_and_says_why_it_dropped_others() {
        let mut r = Returned::default();
        let b64 = base64::engine::general_purpose::STANDARD.encode(b"png");
        r.image("a".into(), Some(&b64), false, 1);
        r.image("b".into(), Some(&b64), false, 1);
        r.image("c".into(), None, true, 1);
        r.image("d".into(), Some("not base64!"), false, 5);
        assert_eq!(
            r.images,
            vec![SentImage {
                source: "a".into(),
                data: b"png".to_vec()
            }]
        );
        assert_eq!(r.dropped_count, 3);
        assert!(r.dropped[0].starts_with("b: not returned, at most 1 images"));
        assert!(r.dropped[2].contains("not base64"));
    }

    #[test]
    fn an_oversized_image_is_dropped_before_decoding() {
        let mut r = Returned::default();
        let big = "A".repeat(MAX_IMAGE_BYTES / 3 * 4 + 8);
        r.image("big".into(), Some(&big), false, 8);
        assert!(r.images.is_empty());
        assert!(r.dropped[0].contains("over"));
    }

    #[test]
    fn links_are_bounded() {
        let mut r = Returned::default();
        for i in 0..MAX_LINKS + 3 {
            r.link(format!("f{i}"), None);
        }
        assert_eq!(r.links.len(), MAX_LINKS);
        assert_eq!(r.links_dropped, 3);
    }
}
