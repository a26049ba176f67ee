//! CPU sensitivity: throughput against cores, one line per memory budget, with the measured points.

use super::*;

pub(super) struct CpuChart {
    pub(super) inputs: Vec<Input>,
    pub(super) names: Vec<String>,
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
                "lines: predicted at each memory allocation; filled markers: measured ({}{})",
                p.source,
                p.host
                    .as_ref()
                    .map(|h| format!(" under {}", crate::format::profile::isolation_said(h)))
                    .unwrap_or_default()
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
