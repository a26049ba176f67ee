//! Charts of simulation outputs: JCT distributions, mean JCT against load, and cluster utilization over time.

use super::render::{impl_chart, label_font, num, panels, series_color, titled, DrawResult};
use super::sim_data::RunData;
use super::{Kind, PlotError};
use crate::error::InputError;
use crate::error::Setting;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// Most points drawn per series: enough to look exact, few enough to keep an SVG small.
const MAX_POINTS: usize = 600;

/// The chart of `kind` over `runs` (simulation kinds only); `origin` names the input in errors.
pub(super) fn chart(
    kind: Kind,
    runs: &[RunData],
    origin: &Path,
) -> Result<Box<dyn super::render::Chart>, PlotError> {
    let runs = runs.to_vec();
    Ok(match kind {
        Kind::JctCdf => {
            if let Some(r) = runs.iter().find(|r| r.jct_h.is_empty()) {
                return Err(InputError::new(&r.origin, "no finished jobs to plot").into());
            }
            Box::new(JctCdf { runs })
        }
        Kind::JctVsLoad => {
            if let Some(r) = runs.iter().find(|r| r.load_jobs_per_h.is_none()) {
                return Err(InputError::field(
                    &r.origin,
                    "load_jobs_per_h",
                    "this run has no generated load (a trace file?), so it has no place on a load axis",
                )
                .into());
            }
            Box::new(JctVsLoad::new(&runs))
        }
        Kind::Utilization => {
            for r in &runs {
                if r.rounds.is_empty() {
                    return Err(InputError::new(
                        format!("{}/rounds.csv", r.origin),
                        format!(
                            "has no rounds (simulate with {} records them)",
                            Setting::RecordRounds
                        ),
                    )
                    .into());
                }
                if r.capacity.is_none() {
                    return Err(InputError::field(
                        format!("{}/summary.json", r.origin),
                        "cluster",
                        "missing: the cluster's size is needed for utilization (rerun simulate with this \
                         synergy)",
                    )
                    .into());
                }
            }
            Box::new(Utilization { runs })
        }
        other => {
            return Err(InputError::new(
                origin.display().to_string(),
                format!(
                    "{} {} is not a simulation chart",
                    Setting::Kind,
                    other.name()
                ),
            )
            .into())
        }
    })
}

/// Evenly spaced samples of `v`, always keeping the last.
fn thin<T: Copy>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    let step = v.len() as f64 / max as f64;
    let mut out: Vec<T> = (0..max).map(|k| v[(k as f64 * step) as usize]).collect();
    out.push(v[v.len() - 1]);
    out
}

struct JctCdf {
    runs: Vec<RunData>,
}

impl JctCdf {
    fn series(&self) -> Vec<String> {
        self.runs.iter().map(RunData::label).collect()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let area = titled(
            root,
            "Job completion time distribution",
            "fraction of measured jobs finished within a given JCT, per policy and mechanism",
        )?;
        let (_, h) = area.dim_in_pixel();
        let curves: Vec<Vec<(f64, f64)>> = self
            .runs
            .iter()
            .map(|r| {
                let mut v: Vec<f64> = r.jct_h.iter().copied().filter(|x| *x > 0.0).collect();
                v.sort_by(f64::total_cmp);
                let n = v.len() as f64;
                let pts: Vec<(f64, f64)> = v
                    .iter()
                    .enumerate()
                    .map(|(k, x)| (*x, (k + 1) as f64 / n))
                    .collect();
                thin(&pts, MAX_POINTS)
            })
            .collect();
        let lo = curves
            .iter()
            .flatten()
            .map(|p| p.0)
            .fold(f64::INFINITY, f64::min);
        let hi = curves.iter().flatten().map(|p| p.0).fold(0.0, f64::max);
        let (lo, hi) = if lo.is_finite() && hi > lo {
            (lo / 1.3, hi * 1.3)
        } else {
            (0.01, 100.0)
        };
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .x_label_area_size(h / 10)
            .y_label_area_size(h / 8)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.02)?;
        chart
            .configure_mesh()
            .x_desc("job completion time (hours, log scale)")
            .y_desc("fraction of jobs")
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(label_font(h))
            .axis_desc_style(label_font(h))
            .draw()?;
        for (i, (run, pts)) in self.runs.iter().zip(&curves).enumerate() {
            let color = series_color(i);
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(format!("{} (mean {} h)", run.label(), num(run.mean_jct_h)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font(label_font(h))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}
impl_chart!(JctCdf);

/// One point of a load line: load (jobs/h), mean JCT over seeds, lowest and highest (hours).
type LoadPoint = (f64, f64, f64, f64);

struct JctVsLoad {
    /// Per policy and mechanism, its points in load order.
    lines: Vec<(String, Vec<LoadPoint>)>,
}

impl JctVsLoad {
    fn new(runs: &[RunData]) -> JctVsLoad {
        // Loads as thousandths, so equal loads group exactly and in order.
        let mut groups: BTreeMap<(String, String), BTreeMap<i64, Vec<f64>>> = BTreeMap::new();
        for r in runs {
            let load = r.load_jobs_per_h.unwrap_or(0.0);
            groups
                .entry((r.policy.clone(), r.mechanism.clone()))
                .or_default()
                .entry((load * 1000.0).round() as i64)
                .or_default()
                .push(r.mean_jct_h);
        }
        let lines = groups
            .into_iter()
            .map(|((p, m), by_load)| {
                let pts = by_load
                    .into_iter()
                    .map(|(l, v)| {
                        let mean = v.iter().sum::<f64>() / v.len() as f64;
                        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                        let hi = v.iter().copied().fold(0.0, f64::max);
                        (l as f64 / 1000.0, mean, lo, hi)
                    })
                    .collect();
                (format!("{p} / {m}"), pts)
            })
            .collect();
        JctVsLoad { lines }
    }

    fn series(&self) -> Vec<String> {
        self.lines.iter().map(|l| l.0.clone()).collect()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let area = titled(
            root,
            "Mean job completion time against load",
            "one line per policy and mechanism; mean over seeds, bars: lowest to highest seed",
        )?;
        let (_, h) = area.dim_in_pixel();
        let pts = || self.lines.iter().flat_map(|l| l.1.iter());
        let x_lo = pts().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let x_hi = pts().map(|p| p.0).fold(0.0, f64::max);
        let y_hi = pts().map(|p| p.3).fold(0.0, f64::max);
        let pad = ((x_hi - x_lo) * 0.05).max(0.5);
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .x_label_area_size(h / 10)
            .y_label_area_size(h / 8)
            .build_cartesian_2d(
                (x_lo - pad).max(0.0)..x_hi + pad,
                0.0..(y_hi * 1.12).max(1e-3),
            )?;
        chart
            .configure_mesh()
            .x_desc("load (jobs per hour)")
            .y_desc("mean JCT (hours)")
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(label_font(h))
            .axis_desc_style(label_font(h))
            .draw()?;
        for (i, (name, pts)) in self.lines.iter().enumerate() {
            let color = series_color(i);
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    color.stroke_width(2),
                ))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
            chart.draw_series(
                pts.iter()
                    .map(|p| Circle::new((p.0, p.1), 4, color.filled())),
            )?;
            chart.draw_series(
                pts.iter()
                    .filter(|p| p.3 > p.2)
                    .map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], color.stroke_width(1))),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(label_font(h))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}
impl_chart!(JctVsLoad);

struct Utilization {
    runs: Vec<RunData>,
}

impl Utilization {
    fn series(&self) -> Vec<String> {
        self.runs.iter().map(RunData::label).collect()
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let title = if self.runs.len() == 1 {
            format!("Cluster utilization: {}", self.runs[0].label())
        } else {
            "Cluster utilization".to_string()
        };
        let area = titled(
            root,
            &title,
            "share of the cluster's GPUs, CPU cores and memory allocated, each round",
        )?;
        for (k, panel) in panels(&area, self.runs.len()).iter().enumerate() {
            self.draw_panel(panel, k)?;
        }
        Ok(())
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        k: usize,
    ) -> DrawResult {
        let run = &self.runs[k];
        let cap = run.capacity.unwrap_or([1.0; 3]);
        let (_, h) = area.dim_in_pixel();
        let font = label_font(h.max(500));
        let t_hi = run
            .rounds
            .iter()
            .map(|r| r[0])
            .fold(0.0, f64::max)
            .max(1e-3);
        let mut builder = ChartBuilder::on(area);
        builder
            .margin(12)
            .x_label_area_size(h / 9)
            .y_label_area_size(h / 7);
        if self.runs.len() > 1 {
            builder.caption(run.label(), font.clone().style(FontStyle::Bold));
        }
        let mut chart = builder.build_cartesian_2d(0.0..t_hi * 1.02, 0.0..105.0)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .y_labels(6)
            .x_desc("time (hours)")
            .y_desc("allocated (% of cluster)")
            .x_label_formatter(&|v| num(*v))
            .y_label_formatter(&|v| num(*v))
            .label_style(font.clone())
            .axis_desc_style(font.clone())
            .draw()?;
        let resources = [
            ("GPU", 1, cap[0], 0),
            ("CPU", 2, cap[1], 1),
            ("memory", 3, cap[2], 2),
        ];
        for (name, col, total, c) in resources {
            let color = series_color(c);
            let pts: Vec<(f64, f64)> = run
                .rounds
                .iter()
                .map(|r| (r[0], 100.0 * r[col] / total))
                .collect();
            let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len().max(1) as f64;
            chart
                .draw_series(LineSeries::new(
                    thin(&pts, MAX_POINTS),
                    color.stroke_width(1),
                ))?
                .label(format!("{name} (mean {mean:.0}%)"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font(font)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}
impl_chart!(Utilization);
