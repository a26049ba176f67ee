//! Turning a chart into PNG or SVG bytes: the embedded font, the two backends, the shared look (palette,
//! number format, titles).

use crate::error::InputError;
use crate::error::Setting;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;
use std::path::Path;

/// A file format, chosen by the output's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Portable Network Graphics (RGB).
    Png,
    /// Scalable Vector Graphics; text stays text.
    Svg,
}

impl Format {
    /// The format `path`'s extension names.
    pub fn of_path(path: &Path) -> Result<Format, InputError> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(|e| e.to_ascii_lowercase())
            .as_deref()
        {
            Some("png") => Ok(Format::Png),
            Some("svg") => Ok(Format::Svg),
            _ => Err(InputError::new(
                path.display().to_string(),
                "the chart's format comes from its extension: use .png or .svg",
            )),
        }
    }
}

/// A chart's size in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Size {
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
}

impl Size {
    /// The size `synergy plot` uses unless told otherwise.
    pub const DEFAULT: Size = Size {
        width: 1024,
        height: 720,
    };

    /// Refuses sizes too small to hold axes and labels, or too large to allocate sensibly.
    pub fn check(&self) -> Result<(), InputError> {
        for (setting, v) in [(Setting::Width, self.width), (Setting::Height, self.height)] {
            if !(200..=16_000).contains(&v) {
                return Err(InputError::setting(
                    setting,
                    format!("{v} pixels is outside 200-16000"),
                ));
            }
        }
        Ok(())
    }
}

/// A drawing failure inside plotters.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(pub String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        DrawError(e.to_string())
    }
}

/// Result of drawing.
pub type DrawResult = Result<(), DrawError>;

/// A chart that can draw itself on either backend.
pub trait Chart {
    /// One name per series or panel, in drawing order.
    fn series(&self) -> Vec<String>;
    /// Draws on an SVG canvas.
    fn draw_svg(&self, root: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult;
    /// Draws on a bitmap canvas.
    fn draw_png(&self, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult;
}

/// Implements [`Chart`] for a type with `fn series(&self) -> Vec<String>` and a generic
/// `fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult`.
macro_rules! impl_chart {
    ($t:ty) => {
        impl $crate::plot::render::Chart for $t {
            fn series(&self) -> Vec<String> {
                <$t>::series(self)
            }
            fn draw_svg(
                &self,
                root: &plotters::prelude::DrawingArea<
                    plotters::prelude::SVGBackend<'_>,
                    plotters::coord::Shift,
                >,
            ) -> $crate::plot::render::DrawResult {
                self.draw(root)
            }
            fn draw_png(
                &self,
                root: &plotters::prelude::DrawingArea<
                    plotters::prelude::BitMapBackend<'_>,
                    plotters::coord::Shift,
                >,
            ) -> $crate::plot::render::DrawResult {
                self.draw(root)
            }
        }
    };
}
pub(crate) use impl_chart;

/// The font family every chart uses; registered from the embedded DejaVu Sans.
pub const FONT: &str = "sans-serif";

/// Registers the embedded fonts under the names plotters asks for (once per process).
fn register_fonts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let fonts: [(&str, FontStyle, &'static [u8]); 4] = [
            ("sans-serif", FontStyle::Normal, dejavu::sans::regular()),
            ("sans-serif", FontStyle::Bold, dejavu::sans::bold()),
            ("serif", FontStyle::Normal, dejavu::serif::regular()),
            ("monospace", FontStyle::Normal, dejavu::sans_mono::regular()),
        ];
        for (name, style, bytes) in fonts {
            // The bytes are DejaVu's own TTF files, compiled in: parsing cannot fail at run time.
            let _ = plotters::style::register_font(name, style, bytes);
        }
    });
}

/// Draws `chart` at `size` and returns the file's bytes.
pub fn render(chart: &dyn Chart, format: Format, size: Size) -> Result<Vec<u8>, DrawError> {
    register_fonts();
    let dims = (size.width, size.height);
    match format {
        Format::Svg => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, dims).into_drawing_area();
                root.fill(&WHITE)?;
                chart.draw_svg(&root)?;
                root.present()?;
            }
            Ok(text.into_bytes())
        }
        Format::Png => {
            let mut rgb = vec![0u8; size.width as usize * size.height as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, dims).into_drawing_area();
                root.fill(&WHITE)?;
                chart.draw_png(&root)?;
                root.present()?;
            }
            let mut png = Vec::new();
            image::ImageEncoder::write_image(
                image::codecs::png::PngEncoder::new(&mut png),
                &rgb,
                size.width,
                size.height,
                image::ExtendedColorType::Rgb8,
            )
            .map_err(|e| DrawError(format!("encoding PNG: {e}")))?;
            Ok(png)
        }
    }
}

/// Distinct colors for series (Tableau 10), by index.
pub fn series_color(i: usize) -> RGBColor {
    const C: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = C[i % C.len()];
    RGBColor(r, g, b)
}

/// A sequential color (viridis) for `t` in [0, 1].
pub fn sequential_color(t: f64) -> RGBColor {
    const V: [(f64, f64, f64); 9] = [
        (68.0, 1.0, 84.0),
        (71.0, 44.0, 122.0),
        (59.0, 81.0, 139.0),
        (44.0, 113.0, 142.0),
        (33.0, 144.0, 141.0),
        (39.0, 173.0, 129.0),
        (92.0, 200.0, 99.0),
        (170.0, 220.0, 50.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (V.len() - 1) as f64;
    let i = (x.floor() as usize).min(V.len() - 2);
    let f = x - i as f64;
    let mix = |a: f64, b: f64| (a + f * (b - a)).round() as u8;
    RGBColor(
        mix(V[i].0, V[i + 1].0),
        mix(V[i].1, V[i + 1].1),
        mix(V[i].2, V[i + 1].2),
    )
}

/// A number for a tick or a label: at most 3 significant decimals, no trailing zeros.
pub fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Text styles shared by every chart.
pub fn title_style(size: Size) -> TextStyle<'static> {
    (FONT, (size.height as f64 / 32.0).clamp(14.0, 40.0))
        .into_font()
        .style(FontStyle::Bold)
        .color(&BLACK)
}

/// Axis and legend text.
pub fn label_font(area_height: u32) -> FontDesc<'static> {
    (FONT, (area_height as f64 / 45.0).clamp(10.0, 22.0)).into_font()
}

/// Draws the chart's title (and a smaller subtitle) at the top of `root`; returns the area below.
pub fn titled<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> Result<DrawingArea<DB, Shift>, DrawError> {
    let (w, h) = root.dim_in_pixel();
    let size = Size {
        width: w,
        height: h,
    };
    let ts = title_style(size);
    let th = ts.font.get_size() as u32;
    let sub_font = label_font(h);
    let sh = sub_font.get_size() as u32;
    root.draw(&Text::new(
        title.to_string(),
        (w as i32 / 2, 8),
        ts.pos(Pos::new(HPos::Center, VPos::Top)),
    ))?;
    let mut used = 8 + th + 8;
    if !subtitle.is_empty() {
        root.draw(&Text::new(
            subtitle.to_string(),
            (w as i32 / 2, used as i32),
            sub_font
                .color(&RGBColor(80, 80, 80))
                .pos(Pos::new(HPos::Center, VPos::Top)),
        ))?;
        used += sh + 8;
    }
    Ok(root.margin(used, 0, 0, 0))
}

/// `n` panels in a grid close to square, filling `area` row by row.
pub fn panels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    n: usize,
) -> Vec<DrawingArea<DB, Shift>> {
    let n = n.max(1);
    let cols = (n as f64).sqrt().ceil() as usize;
    let rows = n.div_ceil(cols);
    let mut v = area.split_evenly((rows, cols));
    v.truncate(n);
    v
}
