//! Memory sensitivity: throughput against memory, one line per core count, marked with the limiting stage.

use super::*;

pub(super) struct MemChart {
    pub(super) inputs: Vec<Input>,
    pub(super) names: Vec<String>,
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
