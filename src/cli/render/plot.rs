//! What `synergy plot` prints: the charts it wrote.

/// What `plot` wrote, on one line.
pub(in crate::cli) fn render_written(w: &crate::plot::Written) -> String {
    format!(
        "{}: {} chart, {}x{} pixels, {} series ({})\n",
        w.path.display(),
        w.kind.name(),
        w.width,
        w.height,
        w.series.len(),
        w.series.join("; ")
    )
}
