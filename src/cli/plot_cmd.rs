//! `synergy plot`: charts of profiles or of simulation outputs.

use super::args::PlotArgs;
use super::render;

/// Runs `plot`.
pub(super) fn plot_cmd(args: PlotArgs) -> anyhow::Result<i32> {
    let written = crate::plot::plot(&crate::plot::PlotRequest {
        inputs: args.inputs,
        kind: args.kind,
        out: args.out,
        size: crate::plot::Size {
            width: args.width,
            height: args.height,
        },
    })?;
    if args.json {
        out!("{}", render::json(&written)?)?;
    } else {
        out!("{}", render::render_written(&written))?;
    }
    Ok(0)
}
