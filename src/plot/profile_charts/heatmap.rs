//! The sensitivity matrix as a heatmap, with its color bar.

use super::*;

pub(super) struct HeatmapChart {
    pub(super) inputs: Vec<Input>,
    pub(super) names: Vec<String>,
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
        let under = match self.inputs.as_slice() {
            [one] => one
                .profile
                .host
                .as_ref()
                .map(|h| {
                    format!(
                        "; measured under {}",
                        crate::format::profile::isolation_said(h)
                    )
                })
                .unwrap_or_default(),
            _ => String::new(),
        };
        let area = titled(
            root,
            &title,
            &format!(
                "throughput relative to the GPU-proportional allocation (1.0) at each CPU and memory \
                 allocation{under}"
            ),
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
