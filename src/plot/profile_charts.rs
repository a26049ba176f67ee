//! Charts of profile files: CPU sensitivity, memory sensitivity with the limiting stage, the matrix as a
//! heatmap, and the model's predictions against the validation measurements.

use super::render::{
    impl_chart, label_font, num, panels, sequential_color, series_color, titled, DrawResult, FONT,
};
use super::{Input, Kind, PlotError};
use crate::error::InputError;
use crate::profile::file::TrialRole;
use crate::profile::Profile;
use crate::stall::{HitModel, Stage};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

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
                    "has no validation points, so there is nothing to compare predictions with \
                     (published profiles have none); setting `kind` fit needs a measured profile",
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

struct CpuChart {
    inputs: Vec<Input>,
    names: Vec<String>,
}

impl CpuChart {
    fn series(&self) -> Vec<String> {
        self.names.clone()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        if self.inputs.len() == 1 {
            self.draw_one(root)
        } else {
            self.draw_many(root)
        }
    }

    /// One profile: a line per memory allocation, and the measured points.
    fn draw_one<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let p = &self.inputs[0].profile;
        let m = &p.matrix;
        let scale = Scale::of(p, true);
        let vals = scale.matrix(p);
        let cached: Vec<Measured> = cached_trials(p)
            .into_iter()
            .filter_map(|(x, y, ci)| {
                Some(Measured {
                    x,
                    y: scale.samples(y)?,
                    ci: scale.samples(ci)?,
                })
            })
            .collect();
        let held_out = held_out(p, &scale, Axis::Cpus);
        let y_max = max_of(vals.iter().flatten()).max(max_of(
            cached
                .iter()
                .chain(held_out.iter().map(|h| &h.0))
                .map(|c| &c.y),
        ));
        let area = titled(
            root,
            &format!("{}: throughput against CPU cores", self.names[0]),
            &format!(
                "lines: predicted at each memory allocation; filled markers: measured ({})",
                p.source
            ),
        )?;
        let (_, h) = area.dim_in_pixel();
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .x_label_area_size(h / 10)
            .y_label_area_size(h / 8)
            .build_cartesian_2d(0.0..max_of(&m.cpus) * 1.05, up_to(y_max))?;
        chart
            .configure_mesh()
            .x_desc("CPU cores")
            .y_desc(scale.y_desc())
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(label_font(h))
            .axis_desc_style(label_font(h))
            .draw()?;
        for (j, mem) in m.memory_gib.iter().enumerate() {
            let color = series_color(j);
            let pts: Vec<(f64, f64)> = m.cpus.iter().zip(&vals).map(|(c, r)| (*c, r[j])).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(format!("predicted, {} GiB memory", num(*mem)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(
                pts.iter()
                    .map(|&pt| Circle::new(pt, 3, color.stroke_width(1))),
            )?;
        }
        if !cached.is_empty() {
            chart.draw_series(cached.iter().map(|c| error_bar(c.x, c.y, c.ci, BLACK)))?;
            chart
                .draw_series(
                    cached
                        .iter()
                        .map(|c| TriangleMarker::new((c.x, c.y), 7, BLACK.filled())),
                )?
                .label("measured, dataset cached")
                .legend(|(x, y)| TriangleMarker::new((x + 10, y), 7, BLACK.filled()));
        }
        let held_out: Vec<(Measured, RGBColor)> = held_out
            .into_iter()
            .map(|(c, j)| (c, series_color(j)))
            .collect();
        draw_validation(
            &mut chart,
            &held_out,
            "measured, held out at its memory (validation)",
        )?;
        legend_box(&mut chart, SeriesLabelPosition::LowerRight, h)
    }

    /// Several profiles: one normalized line each (per GPU, at the most memory), measured points marked.
    fn draw_many<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let area = titled(
            root,
            "CPU sensitivity: throughput against cores per GPU",
            "lines: predicted with the most memory of each profile (dataset cached); triangles: measured",
        )?;
        let (_, h) = area.dim_in_pixel();
        let mut lines = Vec::new();
        for input in &self.inputs {
            let p = &input.profile;
            let g = &p.per_gpu;
            let last = g.memory_gib.len() - 1;
            let line: Vec<(f64, f64)> = g
                .cpus
                .iter()
                .zip(&g.normalized)
                .map(|(c, r)| (*c, r[last]))
                .collect();
            let scale = Scale::of(p, false);
            let gpus = p.workload.gpus.max(1) as f64;
            let measured: Vec<Measured> = cached_trials(p)
                .into_iter()
                .filter_map(|(x, y, ci)| {
                    Some(Measured {
                        x: x / gpus,
                        y: scale.samples(y)?,
                        ci: scale.samples(ci)?,
                    })
                })
                .collect();
            lines.push((line, measured, g.memory_gib[last]));
        }
        let x_max = max_of(lines.iter().flat_map(|l| l.0.iter().map(|p| &p.0)));
        let y_max = max_of(lines.iter().flat_map(|l| l.0.iter().map(|p| &p.1)))
            .max(max_of(lines.iter().flat_map(|l| l.1.iter().map(|m| &m.y))));
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .x_label_area_size(h / 10)
            .y_label_area_size(h / 8)
            .build_cartesian_2d(0.0..x_max * 1.05, up_to(y_max))?;
        chart
            .configure_mesh()
            .x_desc("CPU cores per GPU")
            .y_desc("throughput (x GPU-proportional)")
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(label_font(h))
            .axis_desc_style(label_font(h))
            .draw()?;
        let mut any_measured = false;
        for (i, (line, measured, mem)) in lines.iter().enumerate() {
            let color = series_color(i);
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                .label(format!("{} ({} GiB/GPU)", self.names[i], num(*mem)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(
                line.iter()
                    .map(|&pt| Circle::new(pt, 3, color.stroke_width(1))),
            )?;
            chart.draw_series(measured.iter().map(|c| error_bar(c.x, c.y, c.ci, color)))?;
            chart.draw_series(
                measured
                    .iter()
                    .map(|c| TriangleMarker::new((c.x, c.y), 7, color.filled())),
            )?;
            any_measured |= !measured.is_empty();
        }
        if any_measured {
            // A legend entry for the marker alone; the series drawn is empty.
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())?
                .label("measured, dataset cached")
                .legend(|(x, y)| TriangleMarker::new((x + 10, y), 7, BLACK.filled()));
        }
        legend_box(&mut chart, SeriesLabelPosition::LowerRight, h)
    }
}
impl_chart!(CpuChart);

struct MemChart {
    inputs: Vec<Input>,
    names: Vec<String>,
}

impl MemChart {
    fn series(&self) -> Vec<String> {
        self.names.clone()
    }

    /// Whether any input records the limiting stage (published profiles do not).
    fn any_stages(&self) -> bool {
        self.inputs
            .iter()
            .any(|i| i.profile.matrix.limited_by.is_some())
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let title = if self.inputs.len() == 1 {
            format!("{}: throughput against memory", self.names[0])
        } else {
            "Throughput against memory".to_string()
        };
        let subtitle = if self.any_stages() {
            "one line per CPU allocation; marker shape: the stage that limits throughput"
        } else {
            "one line per CPU allocation (published profiles do not record the limiting stage)"
        };
        let area = titled(root, &title, subtitle)?;
        for (k, panel) in panels(&area, self.inputs.len()).iter().enumerate() {
            self.draw_panel(panel, k)?;
        }
        Ok(())
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        k: usize,
    ) -> DrawResult {
        let p = &self.inputs[k].profile;
        let m = &p.matrix;
        let scale = Scale::of(p, true);
        let vals = scale.matrix(p);
        let (_, h) = area.dim_in_pixel();
        let font = label_font(h.max(500));
        let lo = m.memory_gib.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = max_of(&m.memory_gib);
        let held_out = held_out(p, &scale, Axis::Memory);
        let y_max = max_of(vals.iter().flatten()).max(max_of(held_out.iter().map(|h| &h.0.y)));
        let caption = if self.inputs.len() == 1 {
            String::new()
        } else {
            self.names[k].clone()
        };
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(12)
            .x_label_area_size(h / 9)
            .y_label_area_size(h / 7);
        if !caption.is_empty() {
            builder.caption(&caption, font.clone().style(FontStyle::Bold));
        }
        let mut chart = builder.build_cartesian_2d(around(lo, hi, 0.22), up_to(y_max))?;
        chart
            .configure_mesh()
            .x_desc("memory (GiB)")
            .y_desc(scale.y_desc())
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(font.clone())
            .axis_desc_style(font.clone())
            .draw()?;
        let rows = m.cpus.len();
        let color_of = |i: usize| sequential_color(0.85 * i as f64 / (rows.max(2) - 1) as f64);
        let mut marked: Vec<(Stage, (f64, f64), RGBColor)> = Vec::new();
        let mut ends: Vec<((f64, f64), f64, RGBColor)> = Vec::new();
        for (i, c) in m.cpus.iter().enumerate() {
            let color = color_of(i);
            let pts: Vec<(f64, f64)> = m
                .memory_gib
                .iter()
                .zip(&vals[i])
                .map(|(g, v)| (*g, v * 1.0))
                .collect();
            chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?;
            if let Some(&end) = pts.last() {
                ends.push((end, *c, color));
            }
            if let Some(stages) = &m.limited_by {
                for (pt, stage) in pts.iter().zip(&stages[i]) {
                    marked.push((*stage, *pt, color));
                }
            }
        }
        // Label each line at its right end; lines ending together share one label.
        let y_span = up_to(y_max).end;
        let mut k = 0;
        while k < ends.len() {
            let mut group = vec![ends[k]];
            while k + group.len() < ends.len()
                && (ends[k + group.len()].0 .1 - group[group.len() - 1].0 .1).abs() < 0.03 * y_span
            {
                group.push(ends[k + group.len()]);
            }
            let cores: Vec<String> = match group.as_slice() {
                [a, .., b] if group.len() > 3 => vec![format!("{}-{}", num(a.1), num(b.1))],
                g => g.iter().map(|g| num(g.1)).collect(),
            };
            let (at, _, color) = group[group.len() - 1];
            chart.draw_series(std::iter::once(Text::new(
                format!(" {} cores", cores.join(", ")),
                at,
                font.clone()
                    .color(&color)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            )))?;
            k += group.len();
        }
        if m.limited_by.is_some() {
            // One series per stage, so each stage's marker has its legend entry.
            let of = |s: Stage| marked.iter().filter(move |m| m.0 == s);
            let name = |s: Stage| format!("limited by {s}");
            if of(Stage::Accelerator).next().is_some() {
                chart
                    .draw_series(of(Stage::Accelerator).map(|m| Circle::new(m.1, 5, m.2.filled())))?
                    .label(name(Stage::Accelerator))
                    .legend(|(x, y)| Circle::new((x + 10, y), 5, BLACK.filled()));
            }
            if of(Stage::Preprocess).next().is_some() {
                chart
                    .draw_series(
                        of(Stage::Preprocess).map(|m| TriangleMarker::new(m.1, 7, m.2.filled())),
                    )?
                    .label(name(Stage::Preprocess))
                    .legend(|(x, y)| TriangleMarker::new((x + 10, y), 7, BLACK.filled()));
            }
            if of(Stage::Fetch).next().is_some() {
                chart
                    .draw_series(of(Stage::Fetch).map(|m| Cross::new(m.1, 5, m.2.stroke_width(2))))?
                    .label(name(Stage::Fetch))
                    .legend(|(x, y)| Cross::new((x + 10, y), 5, BLACK.stroke_width(2)));
            }
        } else if self.any_stages() {
            chart
                .draw_series(std::iter::empty::<Circle<(f64, f64), u32>>())?
                .label("limiting stage not recorded (published profile)")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(150, 150, 150))
                });
        }
        let validation: Vec<(Measured, RGBColor)> =
            held_out.iter().map(|(c, i)| (*c, color_of(*i))).collect();
        draw_validation(&mut chart, &validation, "measured (validation)")?;
        if self.any_stages() || !held_out.is_empty() {
            legend_box(&mut chart, SeriesLabelPosition::LowerRight, h.max(500))?;
        }
        Ok(())
    }
}
impl_chart!(MemChart);

struct HeatmapChart {
    inputs: Vec<Input>,
    names: Vec<String>,
}

impl HeatmapChart {
    fn series(&self) -> Vec<String> {
        self.names.clone()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let title = if self.inputs.len() == 1 {
            format!("{}: sensitivity matrix", self.names[0])
        } else {
            "Sensitivity matrices".to_string()
        };
        let area = titled(
            root,
            &title,
            "throughput relative to the GPU-proportional allocation (1.0) at each CPU and memory allocation",
        )?;
        let all: Vec<f64> = self
            .inputs
            .iter()
            .flat_map(|i| i.profile.matrix.normalized.iter().flatten().copied())
            .collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = max_of(&all);
        let (lo, hi) = if hi - lo < 1e-9 {
            (lo - 0.5, hi + 0.5)
        } else {
            (lo, hi)
        };
        let (w, _) = area.dim_in_pixel();
        let bar_w = (w / 9).clamp(90, 160);
        let (cells, bar) = area.split_horizontally(w - bar_w);
        for (k, panel) in panels(&cells, self.inputs.len()).iter().enumerate() {
            self.draw_panel(panel, k, lo, hi)?;
        }
        color_bar(&bar, lo, hi, "throughput (x GPU-proportional)")
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        k: usize,
        lo: f64,
        hi: f64,
    ) -> DrawResult {
        let m = &self.inputs[k].profile.matrix;
        let (rows, cols) = (m.cpus.len(), m.memory_gib.len());
        let (w, h) = area.dim_in_pixel();
        let font = label_font(h.max(500));
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(12)
            .x_label_area_size(h / 9)
            .y_label_area_size(w / 8);
        if self.inputs.len() > 1 {
            builder.caption(&self.names[k], font.clone().style(FontStyle::Bold));
        }
        let mut chart = builder.build_cartesian_2d(
            // Segmented ranges include their end: one segment per cell.
            (0..cols as i32 - 1).into_segmented(),
            (0..rows as i32 - 1).into_segmented(),
        )?;
        let mem = m.memory_gib.clone();
        let cpus = m.cpus.clone();
        let label = |axis: &[f64], v: &SegmentValue<i32>| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                axis.get(*i as usize).map(|x| num(*x)).unwrap_or_default()
            }
            SegmentValue::Last => String::new(),
        };
        let x_fmt = move |v: &SegmentValue<i32>| label(&mem, v);
        let y_fmt = move |v: &SegmentValue<i32>| label(&cpus, v);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(cols)
            .y_labels(rows)
            .x_desc("memory (GiB)")
            .y_desc("CPU cores")
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .label_style(font.clone())
            .axis_desc_style(font.clone())
            .draw()?;
        let t = |v: f64| (v - lo) / (hi - lo);
        let at =
            |j: usize, i: usize| (SegmentValue::Exact(j as i32), SegmentValue::Exact(i as i32));
        chart.draw_series((0..rows).flat_map(|i| {
            (0..cols).map(move |j| {
                Rectangle::new(
                    [at(j, i), at(j + 1, i + 1)],
                    sequential_color(t(m.normalized[i][j])).filled(),
                )
            })
        }))?;
        // Values in the cells, in a size that fits the cell and a color that reads on it.
        let plot_w = w.saturating_sub(w / 8 + 24) as f64 / cols as f64;
        let plot_h = h.saturating_sub(h / 9 + 24) as f64 / rows as f64;
        let size = (plot_w / 4.0).min(plot_h / 2.0).clamp(7.0, 18.0);
        chart.draw_series((0..rows).flat_map(|i| {
            (0..cols).map(move |j| {
                let v = m.normalized[i][j];
                let ink = if t(v) > 0.6 { BLACK } else { WHITE };
                Text::new(
                    format!("{v:.2}"),
                    (
                        SegmentValue::CenterOf(j as i32),
                        SegmentValue::CenterOf(i as i32),
                    ),
                    (FONT, size)
                        .into_font()
                        .color(&ink)
                        .pos(Pos::new(HPos::Center, VPos::Center)),
                )
            })
        }))?;
        Ok(())
    }
}
impl_chart!(HeatmapChart);

/// A vertical color bar from `lo` to `hi`, labelled.
fn color_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    lo: f64,
    hi: f64,
    desc: &str,
) -> DrawResult {
    let (_, h) = area.dim_in_pixel();
    let font = label_font(h.max(500));
    let mut chart = ChartBuilder::on(area)
        .margin_top(24)
        .margin_bottom(h / 9 + 12)
        .margin_right(8)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..1.0, lo..hi)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc(desc)
        .y_label_formatter(&|v| num(*v))
        .label_style(font.clone())
        .axis_desc_style(font)
        .draw()?;
    let steps = 100;
    chart.draw_series((0..steps).map(|s| {
        let a = lo + (hi - lo) * s as f64 / steps as f64;
        let b = lo + (hi - lo) * (s + 1) as f64 / steps as f64;
        Rectangle::new(
            [(0.0, a), (1.0, b)],
            sequential_color(s as f64 / (steps - 1) as f64).filled(),
        )
    }))?;
    Ok(())
}

struct FitChart {
    inputs: Vec<Input>,
    names: Vec<String>,
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
