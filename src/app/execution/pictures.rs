//! Images an execution returns, made safe to hand to a client: decoded (PNG, JPEG, GIF or
//! WebP only, with a bound on the memory a decode may take, so a small file that claims huge
//! dimensions is refused), scaled down to the longest side allowed, and re-encoded as PNG until
//! it fits the byte bound. Re-encoding also drops whatever else the file carried (text chunks,
//! EXIF), so only pixels leave the sandbox.

use std::io::Cursor;

use crate::config::LimitsConfig;
use image::codecs::png::PngEncoder;
use image::imageops::FilterType;
use image::{DynamicImage, ImageFormat, ImageReader, Limits};

/// Most memory one decode may allocate (a 5,000 x 5,000 RGBA image takes 100 MB).
const MAX_DECODE_BYTES: u64 = 128 * 1024 * 1024;
/// Attempts at shrinking an image whose PNG is still over the byte bound.
const SHRINK_ATTEMPTS: usize = 8;

/// The bounds of a returned image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PictureBounds {
    /// Longest side, in pixels.
    pub max_side: u32,
    /// Largest PNG, in bytes.
    pub max_bytes: usize,
}

impl PictureBounds {
    /// The bounds of `--image-max-side` and `--image-max-kb`.
    pub fn of(limits: &LimitsConfig) -> Self {
        Self {
            max_side: limits.image_max_side,
            max_bytes: limits.image_max_kb as usize * 1024,
        }
    }
}

/// A returned image, ready for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Png {
    pub bytes: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// The size the code made it, when it was scaled down.
    pub scaled_from: Option<(u32, u32)>,
}

/// Decodes `data`, bounds it and encodes it as PNG. The error says why the image cannot be
/// returned, for the model to read.
pub fn prepare(data: &[u8], bounds: PictureBounds) -> Result<Png, String> {
    let mut reader = ImageReader::new(Cursor::new(data))
        .with_guessed_format()
        .map_err(|e| format!("cannot read the image: {e}"))?;
    match reader.format() {
        Some(ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::WebP) => {}
        _ => return Err("not a PNG, JPEG, GIF or WebP image".into()),
    }
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_DECODE_BYTES);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => format!(
            "the image is too large to decode (at most {} MB of pixels)",
            MAX_DECODE_BYTES >> 20
        ),
        other => format!("cannot decode the image: {other}"),
    })?;
    let original = (decoded.width(), decoded.height());
    let mut image = plain(decoded);
    let longest = original.0.max(original.1);
    if longest > bounds.max_side {
        let scale = f64::from(bounds.max_side) / f64::from(longest);
        image = shrink(&image, scale);
    }
    for _ in 0..SHRINK_ATTEMPTS {
        let bytes = encode(&image)?;
        if bytes.len() <= bounds.max_bytes {
            let (width, height) = (image.width(), image.height());
            return Ok(Png {
                bytes,
                width,
                height,
                scaled_from: ((width, height) != original).then_some(original),
            });
        }
        // PNG size grows about with the pixel count: aim a little under the bound.
        let scale = (bounds.max_bytes as f64 / bytes.len() as f64).sqrt() * 0.9;
        image = shrink(&image, scale);
    }
    Err(format!(
        "its PNG stays over {} KiB even scaled down; return a simpler image",
        bounds.max_bytes / 1024
    ))
}

/// 8-bit RGB or RGBA (PNG cannot hold every colour type a decoder gives).
fn plain(image: DynamicImage) -> DynamicImage {
    match image {
        DynamicImage::ImageRgb8(_) | DynamicImage::ImageRgba8(_) => image,
        other if other.color().has_alpha() => DynamicImage::ImageRgba8(other.to_rgba8()),
        other => DynamicImage::ImageRgb8(other.to_rgb8()),
    }
}

fn shrink(image: &DynamicImage, scale: f64) -> DynamicImage {
    let side = |n: u32| ((f64::from(n) * scale).round() as u32).max(1);
    image.resize_exact(
        side(image.width()),
        side(image.height()),
        FilterType::Triangle,
    )
}

fn encode(image: &DynamicImage) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    image
        .write_with_encoder(PngEncoder::new(&mut bytes))
        .map_err(|e| format!("cannot encode the image as PNG: {e}"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgb, RgbImage};

    const BOUNDS: PictureBounds = PictureBounds {
        max_side: 100,
        max_bytes: 1 << 20,
    };

    fn png_of(width: u32, height: u32, noisy: bool) -> Vec<u8> {
        let image = RgbImage::from_fn(width, height, |x, y| {
            if noisy {
                let v = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) as u8;
                Rgb([v, v.wrapping_mul(7), v.wrapping_add(y as u8)])
            } else {
                Rgb([200, 10, 10])
            }
        });
        encode(&DynamicImage::ImageRgb8(image)).unwrap()
    }

    #[test]
    fn a_small_image_keeps_its_size() {
        let png = prepare(&png_of(40, 30, false), BOUNDS).unwrap();
        assert_eq!((png.width, png.height, png.scaled_from), (40, 30, None));
        assert!(png.bytes.starts_with(b"\x89PNG"));
    }

    #[test]
    fn a_large_image_is_scaled_to_the_longest_side() {
        let png = prepare(&png_of(400, 200, false), BOUNDS).unwrap();
        assert_eq!((png.width, png.height), (100, 50));
        assert_eq!(png.scaled_from, Some((400, 200)));
    }

    #[test]
    fn an_image_over_the_byte_bound_is_shrunk_until_it_fits() {
        let bounds = PictureBounds {
            max_side: 1000,
            max_bytes: 20_000,
        };
        let png = prepare(&png_of(300, 300, true), bounds).unwrap();
        assert!(png.bytes.len() <= 20_000, "{}", png.bytes.len());
        assert!(png.width < 300);
    }

    #[test]
    fn refuses_what_is_no_image_and_images_too_large_to_decode() {
        assert!(prepare(b"hello", BOUNDS).unwrap_err().contains("not a PNG"));
        // A valid PNG header claiming 60000 x 60000 pixels: refused before any allocation.
        let mut bomb = png_of(1, 1, false);
        bomb[16..20].copy_from_slice(&60_000u32.to_be_bytes());
        bomb[20..24].copy_from_slice(&60_000u32.to_be_bytes());
        let err = prepare(&bomb, BOUNDS).unwrap_err();
        assert!(
            err.contains("too large") || err.contains("cannot decode"),
            "{err}"
        );
    }
}
