//! The model's predictions against the validation measurements, within the error bands of the targets.

use super::*;

pub(super) struct FitChart {
    pub(super) inputs: Vec<Input>,
    pub(super) names: Vec<String>,
}

/// The relative error bands drawn around y = x: the project's median and maximum error targets.
const BANDS: [f64; 2] = [0.05, 0.15];

impl FitChart {
    fn series(&self) -> Vec<String> {
        self.names.clone()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let absolute = self.inputs.len() == 1;
        // (measured, predicted, half-width) per profile, with its hit model and median error.
        let mut sets = Vec::new();
        for input in &self.inputs {
            let p = &input.profile;
            let scale = Scale::of(p, absolute);
            let model = p
                .model
                .as_ref()
                .map_or(p.workload.hit_model, |m| m.stall.hit_model);
            let pts: Vec<(f64, f64, f64)> = p
                .validation
                .iter()
                .filter_map(|v| {
                    let pred = match model {
                        HitModel::Minio => v.predicted_minio,
                        HitModel::PageCache => v.predicted_page_cache,
                    };
                    Some((
                        scale.samples(v.measured)?,
                        scale.samples(pred)?,
                        scale.samples(v.measured_ci95)?,
                    ))
                })
                .collect();
            let mut errors: Vec<f64> = p.validation.iter().map(|v| v.error(model)).collect();
            errors.sort_by(f64::total_cmp);
            let median = crate::sim::metrics::percentile(&errors, 0.5);
            sets.push((pts, model, median));
        }
        // A square range around the points, so y = x is the diagonal.
        let hi = max_of(
            sets.iter()
                .flat_map(|s| s.0.iter().flat_map(|p| [p.0 + p.2, p.1])),
        );
        let low = sets
            .iter()
            .flat_map(|s| s.0.iter().flat_map(|p| [p.0 - p.2, p.1]))
            .fold(f64::INFINITY, f64::min);
        let (lo, top) = if hi > 0.0 && low.is_finite() {
            let pad = 0.1 * (hi - low).max(0.1 * hi);
            ((low - pad).max(0.0), hi + pad)
        } else {
            (0.0, 1.0)
        };
        let area = titled(
            root,
            "Predicted against measured throughput",
            "held-out validation points under their real CPU and memory limits; bars: 95% confidence",
        )?;
        let (_, h) = area.dim_in_pixel();
        let unit = if absolute {
            "samples/s"
        } else {
            "x GPU-proportional"
        };
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .x_label_area_size(h / 10)
            .y_label_area_size(h / 8)
            .build_cartesian_2d(lo..top, lo..top)?;
        chart
            .configure_mesh()
            .x_desc(format!("measured throughput ({unit})"))
            .y_desc(format!("predicted throughput ({unit})"))
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(label_font(h))
            .axis_desc_style(label_font(h))
            .draw()?;
        for (b, shade) in BANDS.iter().rev().zip([235u8, 215]) {
            let fill = RGBColor(shade, shade, 250);
            let band = clip_to_square(
                vec![
                    (0.0, 0.0),
                    (2.0 * top, 2.0 * top * (1.0 + b)),
                    (2.0 * top, 2.0 * top * (1.0 - b)),
                ],
                lo,
                top,
            );
            chart
                .draw_series(std::iter::once(Polygon::new(band, fill.filled())))?
                .label(format!("within ±{:.0}%", 100.0 * b))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], fill.filled()));
        }
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(lo, lo), (top, top)],
                BLACK.stroke_width(1),
            )))?
            .label("y = x")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.stroke_width(1)));
        for (i, (pts, model, median)) in sets.iter().enumerate() {
            let color = series_color(i);
            chart.draw_series(pts.iter().map(|&(x, y, ci)| {
                PathElement::new(vec![(x - ci, y), (x + ci, y)], color.stroke_width(1))
            }))?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|&(x, y, _)| Circle::new((x, y), 5, color.filled())),
                )?
                .label(format!(
                    "{} ({model} model, median error {:.1}%)",
                    self.names[i],
                    100.0 * median
                ))
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, color.filled()));
        }
        legend_box(&mut chart, SeriesLabelPosition::UpperLeft, h)
    }
}
impl_chart!(FitChart);

/// The part of polygon `poly` inside the square [lo, hi]², clipped edge by edge (Sutherland-Hodgman).
fn clip_to_square(poly: Vec<(f64, f64)>, lo: f64, hi: f64) -> Vec<(f64, f64)> {
    // Each edge of the square: inside test and the crossing of a segment with it.
    type Inside = fn((f64, f64), f64) -> bool;
    let edges: [(Inside, f64, bool); 4] = [
        (|p, v| p.0 >= v, lo, true),
        (|p, v| p.0 <= v, hi, true),
        (|p, v| p.1 >= v, lo, false),
        (|p, v| p.1 <= v, hi, false),
    ];
    let mut out = poly;
    for (inside, v, vertical) in edges {
        let input = std::mem::take(&mut out);
        let Some(&last) = input.last() else {
            break;
        };
        let cross = |a: (f64, f64), b: (f64, f64)| {
            if vertical {
                let t = (v - a.0) / (b.0 - a.0);
                (v, a.1 + t * (b.1 - a.1))
            } else {
                let t = (v - a.1) / (b.1 - a.1);
                (a.0 + t * (b.0 - a.0), v)
            }
        };
        let mut prev = last;
        for p in input {
            match (inside(p, v), inside(prev, v)) {
                (true, true) => out.push(p),
                (true, false) => {
                    out.push(cross(prev, p));
                    out.push(p);
                }
                (false, true) => out.push(cross(prev, p)),
                (false, false) => {}
            }
            prev = p;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_band_is_clipped_to_the_square() {
        // The ±10% band from the origin, seen in [1, 2]²: its corners are where the band's edges leave.
        let band = clip_to_square(vec![(0.0, 0.0), (4.0, 4.4), (4.0, 3.6)], 1.0, 2.0);
        for p in &band {
            assert!((1.0 - 1e-9..=2.0 + 1e-9).contains(&p.0), "{band:?}");
            assert!((1.0 - 1e-9..=2.0 + 1e-9).contains(&p.1), "{band:?}");
        }
        assert!(
            band.iter()
                .any(|p| (p.0 - 2.0 / 1.1).abs() < 1e-9 && p.1 == 2.0),
            "{band:?}"
        );
        assert!(
            band.iter().any(|p| p.0 == 2.0 && (p.1 - 1.8).abs() < 1e-9),
            "{band:?}"
        );
    }
}
