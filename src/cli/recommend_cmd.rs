//! `synergy recommend`: a profile's demand as what a job asks for, in the format asked.

use super::args::{RecommendArgs, RecommendFormat};
use super::render;
use crate::format::profile::Profile;

/// Runs `recommend`.
pub(super) fn recommend_cmd(args: RecommendArgs) -> anyhow::Result<i32> {
    let p = Profile::read(&args.profile)?;
    let r = crate::recommend::recommend(&p, &args.profile, args.server, args.gpus)?;
    let format = if args.json {
        RecommendFormat::Json
    } else {
        args.format
    };
    let text = match format {
        RecommendFormat::Table => render::render_recommendation(&r),
        RecommendFormat::Json => render::json(&r)?,
        RecommendFormat::Sbatch => render::recommendation_sbatch(&r),
        RecommendFormat::Torchrun => render::recommendation_torchrun(&r),
        RecommendFormat::K8s => render::recommendation_k8s(&r),
    };
    out!("{text}")?;
    Ok(0)
}
