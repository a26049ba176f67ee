//! Charts: sensitivity curves, heatmaps and validation of profile files, and JCT and utilization charts of
//! simulation outputs, rendered to PNG or SVG with plotters and an embedded font (no system fonts needed).
//!
//! [`plot`] is the whole `synergy plot` command; [`profile_charts`] and [`simulation_charts`] write the
//! usual set of charts beside a profile or a simulation's output. The same input always gives the same bytes.

mod profile_charts;
mod render;
mod sim_charts;
pub mod sim_data;

use crate::error::Setting;
pub use render::{DrawError, Format, Size};
pub use sim_data::{Gather, RunData};

use crate::error::InputError;
use crate::format::profile::{Profile, ProfileError};
use render::Chart;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Profiles: throughput against CPU cores, one line per memory allocation (several profiles: one line
    /// each, normalized).
    Cpu,
    /// Profiles: throughput against memory, one line per core count, limiting stage marked.
    Mem,
    /// Profiles: the matrix as colored cells with values and a color bar.
    Heatmap,
    /// Profiles: predicted against measured throughput at the validation points, with y = x and error bands.
    Fit,
    /// Simulation outputs: the distribution of job completion times, one curve per run.
    JctCdf,
    /// Simulation sweep: mean JCT against load, one line per policy and mechanism.
    JctVsLoad,
    /// Simulation outputs: GPU, CPU and memory allocated over time, one panel per run.
    Utilization,
}

impl Kind {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Cpu => "cpu",
            Kind::Mem => "mem",
            Kind::Heatmap => "heatmap",
            Kind::Fit => "fit",
            Kind::JctCdf => "jct-cdf",
            Kind::JctVsLoad => "jct-vs-load",
            Kind::Utilization => "utilization",
        }
    }

    /// Whether this kind reads profile files (else simulation output directories).
    pub fn reads_profiles(self) -> bool {
        matches!(self, Kind::Cpu | Kind::Mem | Kind::Heatmap | Kind::Fit)
    }
}

/// Errors making a chart.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Bad input: not a profile or simulation output, an unknown extension.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A profile file failed to parse or validate.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The chart could not be written: a failure while running, as every command's writes are (exit 1).
    #[error("cannot write the chart {path}: {source}")]
    Write {
        /// The chart's path.
        path: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// plotters failed to draw.
    #[error("drawing {path}: {source}")]
    Draw {
        /// The chart being drawn.
        path: String,
        /// What failed.
        #[source]
        source: DrawError,
    },
}

impl PlotError {
    /// Whether the user fixes this by changing their input (exit code 2).
    pub fn is_input(&self) -> bool {
        match self {
            PlotError::Input(_) => true,
            PlotError::Profile(p) => matches!(p, ProfileError::Invalid(_)),
            PlotError::Draw { .. } | PlotError::Write { .. } => false,
        }
    }
}

/// One `synergy plot` invocation.
#[derive(Debug, Clone)]
pub struct PlotRequest {
    /// Profile files, or simulation output directories (a run or a sweep).
    pub inputs: Vec<PathBuf>,
    /// What to draw.
    pub kind: Kind,
    /// The chart file; `.png` or `.svg`.
    pub out: PathBuf,
    /// Pixels.
    pub size: Size,
}

/// What a chart file holds (printed by `synergy plot --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Written {
    /// The chart file.
    pub path: PathBuf,
    /// Its kind.
    pub kind: Kind,
    /// `png` or `svg`.
    pub format: Format,
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
    /// One name per series or panel (a profile's workload, a run's policy and mechanism).
    pub series: Vec<String>,
}

/// Reads the inputs, draws the chart and writes it atomically.
pub fn plot(req: &PlotRequest) -> Result<Written, PlotError> {
    let format = Format::of_path(&req.out)?;
    req.size.check()?;
    if req.inputs.is_empty() {
        return Err(InputError::new("plot", "give at least one input").into());
    }
    if req.kind.reads_profiles() {
        let profiles = req
            .inputs
            .iter()
            .map(|p| read_profile(p, req.kind))
            .collect::<Result<Vec<_>, _>>()?;
        let chart = profile_charts::chart(req.kind, &profiles)?;
        write_chart(chart.as_ref(), req.kind, format, req.size, &req.out)
    } else {
        let mut runs = Vec::new();
        for p in &req.inputs {
            runs.extend(sim_data::load(p, req.kind)?);
        }
        let chart = sim_charts::chart(req.kind, &runs, &req.inputs[0])?;
        write_chart(chart.as_ref(), req.kind, format, req.size, &req.out)
    }
}

/// Draws `chart` and writes it to `out` atomically.
fn write_chart(
    chart: &dyn Chart,
    kind: Kind,
    format: Format,
    size: Size,
    out: &Path,
) -> Result<Written, PlotError> {
    let bytes = render::render(chart, format, size).map_err(|source| PlotError::Draw {
        path: out.display().to_string(),
        source,
    })?;
    crate::fsutil::write_atomic(out, &bytes).map_err(|source| PlotError::Write {
        path: out.display().to_string(),
        source,
    })?;
    Ok(Written {
        path: out.to_path_buf(),
        kind,
        format,
        width: size.width,
        height: size.height,
        series: chart.series(),
    })
}

/// A profile read for plotting, with the name its series carry.
#[derive(Debug, Clone)]
pub struct Input {
    /// The file, as given.
    pub origin: String,
    /// The profile.
    pub profile: Profile,
}

fn read_profile(path: &Path, kind: Kind) -> Result<Input, PlotError> {
    let origin = path.display().to_string();
    if path.is_dir() {
        return Err(InputError::new(
            origin,
            format!(
                "is a directory; {} {} takes profile files (jct-cdf, jct-vs-load and utilization take \
                 simulation output directories)",
                Setting::Kind,
                kind.name()
            ),
        )
        .into());
    }
    match Profile::read(path) {
        Ok(profile) => Ok(Input { origin, profile }),
        // A missing or unreadable input is the user's to fix, like a malformed one.
        Err(ProfileError::Io { context, source }) => {
            Err(InputError::new(origin, format!("{context}: {source}")).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// Writes the usual charts of a profile beside its file (`NAME.cpu.svg`, `.mem.svg`, `.heatmap.svg`, and
/// `.fit.svg` when it has validation points); returns the paths.
pub fn profile_charts(
    profile: &Profile,
    json_path: &Path,
    size: Size,
) -> Result<Vec<PathBuf>, PlotError> {
    let input = [Input {
        origin: json_path.display().to_string(),
        profile: profile.clone(),
    }];
    let mut kinds = vec![Kind::Cpu, Kind::Mem, Kind::Heatmap];
    if !profile.validation.is_empty() {
        kinds.push(Kind::Fit);
    }
    let mut out = Vec::new();
    for kind in kinds {
        let path = json_path.with_extension(format!("{}.svg", kind.name()));
        let chart = profile_charts::chart(kind, &input)?;
        write_chart(chart.as_ref(), kind, Format::Svg, size, &path)?;
        out.push(path);
    }
    Ok(out)
}

/// Writes the usual charts of simulation runs into `dir` (`jct-cdf.svg`, `utilization.svg`, and
/// `jct-vs-load.svg` when the runs span more than one load); returns the paths.
pub fn simulation_charts(
    runs: &[RunData],
    dir: &Path,
    size: Size,
) -> Result<Vec<PathBuf>, PlotError> {
    let mut kinds = vec![Kind::JctCdf, Kind::Utilization];
    let mut loads: Vec<f64> = runs.iter().filter_map(|r| r.load_jobs_per_h).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    if loads.len() > 1 {
        kinds.push(Kind::JctVsLoad);
    }
    let mut out = Vec::new();
    for kind in kinds {
        let path = dir.join(format!("{}.svg", kind.name()));
        let chart = sim_charts::chart(kind, runs, dir)?;
        write_chart(chart.as_ref(), kind, Format::Svg, size, &path)?;
        out.push(path);
    }
    Ok(out)
}
