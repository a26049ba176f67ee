//! Charts of profile files: CPU sensitivity, memory sensitivity with the limiting stage, the matrix as a
//! heatmap, and the model's predictions against the validation measurements; one module per chart, and here
//! the dispatch and what they share (series names, scales, legends, the held-out points).

use super::render::{
    impl_chart, label_font, num, panels, sequential_color, series_color, titled, DrawResult, FONT,
};
use super::{Input, Kind, PlotError};
use crate::error::InputError;
use crate::error::Setting;
use crate::format::profile::Profile;
use crate::format::profile::TrialRole;
use crate::format::profile::{HitModel, Stage};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

mod cpu;
mod fit;
mod heatmap;
mod mem;

use cpu::CpuChart;
use fit::FitChart;
use heatmap::HeatmapChart;
use mem::MemChart;

/// The chart of `kind` over `inputs` (profile kinds only).
pub(super) fn chart(
    kind: Kind,
    inputs: &[Input],
) -> Result<Box<dyn super::render::Chart>, PlotError> {
    let names = series_names(inputs);
    let inputs = inputs.to_vec();
    Ok(match kind {
        Kind::Cpu => Box::new(CpuChart { inputs, names }),
        Kind::Mem => Box::new(MemChart { inputs, names }),
        Kind::Heatmap => Box::new(HeatmapChart { inputs, names }),
        Kind::Fit => {
            if let Some(i) = inputs.iter().find(|i| i.profile.validation.is_empty()) {
                return Err(InputError::field(
                    &i.origin,
                    "validation",
                    format!(
                        "has no validation points, so there is nothing to compare predictions with \
                         (published profiles have none); {} fit needs a measured profile",
                        Setting::Kind
                    ),
                )
                .into());
            }
            Box::new(FitChart { inputs, names })
        }
        other => unreachable!("{} is not a profile chart", other.name()),
    })
}

/// Workload names, made unique with the file name where two inputs share one.
fn series_names(inputs: &[Input]) -> Vec<String> {
    inputs
        .iter()
        .map(|i| {
            let name = &i.profile.workload.name;
            let shared = inputs
                .iter()
                .filter(|o| &o.profile.workload.name == name)
                .count()
                > 1;
            if shared {
                format!("{name} ({})", i.origin)
            } else {
                name.clone()
            }
        })
        .collect()
}

/// A measured point: x, y and the 95% half-width of y.
#[derive(Debug, Clone, Copy)]
struct Measured {
    x: f64,
    y: f64,
    ci: f64,
}

/// The throughput the profile's numbers are shown in: samples/s where it has them, else normalized.
struct Scale {
    absolute: bool,
    proportional_samples_per_s: Option<f64>,
}

impl Scale {
    fn of(p: &Profile, prefer_absolute: bool) -> Scale {
        Scale {
            absolute: prefer_absolute && p.matrix.samples_per_s.is_some(),
            proportional_samples_per_s: p.matrix.proportional.samples_per_s.filter(|t| *t > 0.0),
        }
    }
    /// The matrix in this scale, `[row][column]`.
    fn matrix(&self, p: &Profile) -> Vec<Vec<f64>> {
        match (&p.matrix.samples_per_s, self.absolute) {
            (Some(s), true) => s.clone(),
            _ => p.matrix.normalized.clone(),
        }
    }
    /// A measured samples/s in this scale (None when it cannot be normalized).
    fn samples(&self, v: f64) -> Option<f64> {
        if self.absolute {
            Some(v)
        } else {
            self.proportional_samples_per_s.map(|t| v / t)
        }
    }
    fn y_desc(&self) -> &'static str {
        if self.absolute {
            "throughput (samples/s)"
        } else {
            "throughput (x GPU-proportional)"
        }
    }
}

/// Trials measured with the dataset cached: (cores, samples/s, half-width).
fn cached_trials(p: &Profile) -> Vec<(f64, f64, f64)> {
    p.trials
        .iter()
        .filter(|t| t.role == TrialRole::Cpu)
        .map(|t| {
            (
                t.result.allocation.cpus.0,
                t.result.throughput.samples_per_s,
                t.result.throughput.ci95_half_width,
            )
        })
        .collect()
}

/// Index of the axis value nearest `v`.
fn nearest(axis: &[f64], v: f64) -> usize {
    axis.iter()
        .enumerate()
        .min_by(|a, b| (a.1 - v).abs().total_cmp(&(b.1 - v).abs()))
        .map_or(0, |(i, _)| i)
}

/// 0 to a little above the largest value.
fn up_to(max: f64) -> Range<f64> {
    let m = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    0.0..m * 1.12
}

/// A padded range around the values.
fn around(lo: f64, hi: f64, right_room: f64) -> Range<f64> {
    let span = (hi - lo).max(hi.abs() * 0.1).max(1e-9);
    (lo - 0.05 * span).max(0.0)..hi + (0.05 + right_room) * span
}

fn max_of<I: IntoIterator>(v: I) -> f64
where
    I::Item: std::borrow::Borrow<f64>,
{
    use std::borrow::Borrow;
    v.into_iter().map(|x| *x.borrow()).fold(0.0, f64::max)
}

fn legend_box<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    pos: SeriesLabelPosition,
    h: u32,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(pos)
        .label_font(label_font(h))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// The x axis of a chart against one dimension of the matrix.
#[derive(Clone, Copy, PartialEq)]
enum Axis {
    Cpus,
    Memory,
}

/// The profile's validation points on an `x` axis, each with the index of the line (the other
/// dimension's nearest matrix value) it belongs to.
fn held_out(p: &Profile, scale: &Scale, x: Axis) -> Vec<(Measured, usize)> {
    let m = &p.matrix;
    p.validation
        .iter()
        .filter_map(|v| {
            let (at, line) = match x {
                Axis::Cpus => (v.cpus, nearest(&m.memory_gib, v.memory_gib)),
                Axis::Memory => (v.memory_gib, nearest(&m.cpus, v.cpus)),
            };
            Some((
                Measured {
                    x: at,
                    y: scale.samples(v.measured)?,
                    ci: scale.samples(v.measured_ci95)?,
                },
                line,
            ))
        })
        .collect()
}

/// Validation trials: filled squares in their series' colors with 95% error bars, one legend entry.
fn draw_validation<'a, DB: DrawingBackend + 'a>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    points: &[(Measured, RGBColor)],
    label: &str,
) -> DrawResult {
    if points.is_empty() {
        return Ok(());
    }
    let square = |at: (i32, i32), fill: RGBColor| {
        EmptyElement::at(at)
            + Rectangle::new([(-5, -5), (5, 5)], fill.filled())
            + Rectangle::new([(-5, -5), (5, 5)], BLACK.stroke_width(1))
    };
    chart.draw_series(
        points
            .iter()
            .map(|(c, color)| error_bar(c.x, c.y, c.ci, *color)),
    )?;
    chart
        .draw_series(points.iter().map(|(c, color)| {
            EmptyElement::at((c.x, c.y))
                + Rectangle::new([(-5, -5), (5, 5)], color.filled())
                + Rectangle::new([(-5, -5), (5, 5)], BLACK.stroke_width(1))
        }))?
        .label(label)
        .legend(move |(x, y)| square((x + 10, y), RGBColor(200, 200, 200)));
    Ok(())
}

/// A vertical error bar.
fn error_bar(x: f64, y: f64, half: f64, color: RGBColor) -> PathElement<(f64, f64)> {
    PathElement::new(vec![(x, y - half), (x, y + half)], color.stroke_width(1))
}
