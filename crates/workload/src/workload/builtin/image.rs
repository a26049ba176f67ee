//! Image preprocessing as torchvision's ImageNet training transform does it: JPEG decode,
//! RandomResizedCrop to 224x224 (bilinear), random horizontal flip, and mean/std normalization into
//! f32 CHW, with crop, resize, flip and normalize fused into one pass over the output.

use image::codecs::jpeg::JpegDecoder;
use image::{ColorType, ImageDecoder};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Output side in pixels.
pub const SIDE: usize = 224;
/// f32 values per preprocessed image (3 x 224 x 224).
pub const FLOATS_PER_SAMPLE: usize = 3 * SIDE * SIDE;

/// Largest image decoded (64 megapixels): a corrupt header must not make a worker allocate gigabytes.
const MAX_PIXELS: u64 = 64 << 20;

const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// Per-worker state: the decode buffer and the column map are reused across images.
#[derive(Default)]
pub struct ImageWorker {
    pixels: Vec<u8>,
    columns: Vec<(usize, usize, f32)>,
}

/// A crop rectangle in source pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Crop {
    left: usize,
    top: usize,
    width: usize,
    height: usize,
}

impl ImageWorker {
    /// Decodes one JPEG and writes its augmented, normalized 3x224x224 tensor into `out`.
    pub fn process(
        &mut self,
        jpeg: &[u8],
        rng: &mut ChaCha8Rng,
        out: &mut [f32],
    ) -> Result<(), String> {
        let decoder = JpegDecoder::new(std::io::Cursor::new(jpeg)).map_err(|e| e.to_string())?;
        let (w, h) = decoder.dimensions();
        if u64::from(w) * u64::from(h) > MAX_PIXELS {
            return Err(format!("{w}x{h} pixels is more than this pipeline decodes"));
        }
        let channels = match decoder.color_type() {
            ColorType::Rgb8 => 3,
            ColorType::L8 => 1,
            other => return Err(format!("unsupported JPEG colour type {other:?}")),
        };
        let len = usize::try_from(decoder.total_bytes()).map_err(|e| e.to_string())?;
        self.pixels.resize(len, 0);
        decoder
            .read_image(&mut self.pixels)
            .map_err(|e| e.to_string())?;
        let (w, h) = (w as usize, h as usize);
        if w == 0 || h == 0 || len != w * h * channels {
            return Err(format!("decoded {len} bytes for a {w}x{h} image"));
        }
        let crop = random_resized_crop(w, h, rng);
        let flip = rng.random_bool(0.5);
        self.resample(w, channels, crop, flip, out);
        Ok(())
    }

    /// Bilinear resize of `crop` to 224x224 (half-pixel centres, as PyTorch's align_corners=False),
    /// mirrored when `flip`, normalized, written channel-major.
    fn resample(&mut self, width: usize, channels: usize, crop: Crop, flip: bool, out: &mut [f32]) {
        let taps = |dst: usize, src_len: usize| -> (usize, usize, f32) {
            let scale = src_len as f32 / SIDE as f32;
            let s = ((dst as f32 + 0.5) * scale - 0.5).clamp(0.0, (src_len - 1) as f32);
            let i0 = s as usize;
            (i0, (i0 + 1).min(src_len - 1), s - i0 as f32)
        };
        self.columns.clear();
        for x in 0..SIDE {
            let src_x = if flip { SIDE - 1 - x } else { x };
            let (a, b, f) = taps(src_x, crop.width);
            self.columns
                .push(((crop.left + a) * channels, (crop.left + b) * channels, f));
        }
        let mut gain = [0f32; 3];
        let mut bias = [0f32; 3];
        for c in 0..3 {
            gain[c] = 1.0 / (255.0 * STD[c]);
            bias[c] = -MEAN[c] / STD[c];
        }
        let stride = width * channels;
        let plane = SIDE * SIDE;
        let (out_r, rest) = out[..FLOATS_PER_SAMPLE].split_at_mut(plane);
        let (out_g, out_b) = rest.split_at_mut(plane);
        for y in 0..SIDE {
            let (a, b, fy) = taps(y, crop.height);
            let row0 = &self.pixels[(crop.top + a) * stride..(crop.top + a + 1) * stride];
            let row1 = &self.pixels[(crop.top + b) * stride..(crop.top + b + 1) * stride];
            let o = y * SIDE;
            for (x, &(x0, x1, fx)) in self.columns.iter().enumerate() {
                let mut v = [0f32; 3];
                for (c, vc) in v.iter_mut().enumerate().take(channels) {
                    let p00 = row0[x0 + c] as f32;
                    let p01 = row0[x1 + c] as f32;
                    let p10 = row1[x0 + c] as f32;
                    let p11 = row1[x1 + c] as f32;
                    let top = p00 + (p01 - p00) * fx;
                    let bottom = p10 + (p11 - p10) * fx;
                    *vc = top + (bottom - top) * fy;
                }
                if channels == 1 {
                    v = [v[0]; 3];
                }
                out_r[o + x] = v[0] * gain[0] + bias[0];
                out_g[o + x] = v[1] * gain[1] + bias[1];
                out_b[o + x] = v[2] * gain[2] + bias[2];
            }
        }
    }
}

/// torchvision's RandomResizedCrop sampling: scale U(0.08, 1) of the area, log-uniform aspect ratio in
/// [3/4, 4/3], ten tries, then a centre crop clamped to that ratio range.
fn random_resized_crop(w: usize, h: usize, rng: &mut ChaCha8Rng) -> Crop {
    let area = (w * h) as f64;
    let (log_lo, log_hi) = ((3.0f64 / 4.0).ln(), (4.0f64 / 3.0).ln());
    for _ in 0..10 {
        let target = area * rng.random_range(0.08..1.0);
        let ratio = rng.random_range(log_lo..log_hi).exp();
        let cw = (target * ratio).sqrt().round() as usize;
        let ch = (target / ratio).sqrt().round() as usize;
        if cw > 0 && ch > 0 && cw <= w && ch <= h {
            return Crop {
                left: rng.random_range(0..=w - cw),
                top: rng.random_range(0..=h - ch),
                width: cw,
                height: ch,
            };
        }
    }
    let in_ratio = w as f64 / h as f64;
    let (cw, ch) = if in_ratio < 3.0 / 4.0 {
        (w, ((w as f64 / (3.0 / 4.0)).round() as usize).clamp(1, h))
    } else if in_ratio > 4.0 / 3.0 {
        (((h as f64 * (4.0 / 3.0)).round() as usize).clamp(1, w), h)
    } else {
        (w, h)
    };
    Crop {
        left: (w - cw) / 2,
        top: (h - ch) / 2,
        width: cw,
        height: ch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn crops_stay_inside_the_image() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for &(w, h) in &[(500, 375), (375, 500), (1, 1), (2000, 10), (10, 2000)] {
            for _ in 0..200 {
                let c = random_resized_crop(w, h, &mut rng);
                assert!(c.width >= 1 && c.height >= 1);
                assert!(
                    c.left + c.width <= w && c.top + c.height <= h,
                    "{c:?} in {w}x{h}"
                );
            }
        }
    }

    #[test]
    fn a_flat_grey_image_normalizes_to_the_expected_constant() {
        let mut img = Vec::new();
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut img, 100)
            .encode(
                &[128u8; 40 * 30 * 3],
                40,
                30,
                image::ExtendedColorType::Rgb8,
            )
            .unwrap();
        let mut worker = ImageWorker::default();
        let mut out = vec![0f32; FLOATS_PER_SAMPLE];
        worker
            .process(&img, &mut ChaCha8Rng::seed_from_u64(1), &mut out)
            .unwrap();
        for c in 0..3 {
            let expect = (128.0 / 255.0 - MEAN[c]) / STD[c];
            let v = out[c * SIDE * SIDE + 1000];
            assert!((v - expect).abs() < 0.05, "channel {c}: {v} vs {expect}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut worker = ImageWorker::default();
        let mut out = vec![0f32; FLOATS_PER_SAMPLE];
        let r = worker.process(b"not a jpeg", &mut ChaCha8Rng::seed_from_u64(1), &mut out);
        assert!(r.is_err());
    }
}
