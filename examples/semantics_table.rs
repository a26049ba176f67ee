//! The table of docs/simulate.md, "Two semantics": FIFO on the paper's cluster with `--multi-gpu` jobs,
//! under this project's rules, the reference's, and ours with one behaviour at a time switched to the
//! reference's. `cargo run --release --example semantics_table [LOAD...]` (default loads 9 and 4.5).

use synergy::sched::semantics::{CappedSpeed, DemotionScope, Fallback, Placement};
use synergy::sched::{mechanism_by_name, policy_by_name, Catalog};
use synergy::sim::semantics::{RoundEnd, SimSemantics, TraceStreams};
use synergy::sim::trace::{GenConfig, GpuMode, JobListSeed};
use synergy::sim::{run, SimConfig, TraceSource};

fn main() -> anyhow::Result<()> {
    let loads: Vec<f64> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let loads = if loads.is_empty() {
        vec![9.0, 4.5]
    } else {
        loads
    };
    let catalog = Catalog::load_dir(std::path::Path::new("profiles/zoo"))?;
    let ours = SimSemantics::SYNERGY;
    let variants: Vec<(&str, SimSemantics)> = vec![
        ("synergy", ours),
        (
            "+ one trace stream",
            SimSemantics {
                streams: TraceStreams::OneForMultiGpu,
                ..ours
            },
        ),
        ("+ linear capped speed", {
            let mut s = ours;
            s.core.capped_speed = CappedSpeed::LinearInCpus;
            s
        }),
        ("+ first fit per GPU", {
            let mut s = ours;
            s.core.placement = Placement::FirstFitPerGpu;
            s
        }),
        ("+ one-server demotion", {
            let mut s = ours;
            s.core.demotion = DemotionScope::OneServer;
            s
        }),
        ("+ own demand below share", {
            let mut s = ours;
            s.core.fallback = Fallback::OwnBelowShare;
            s
        }),
        (
            "+ round-boundary ends",
            SimSemantics {
                round_end: RoundEnd::Boundary,
                ..ours
            },
        ),
        ("reference", SimSemantics::REFERENCE),
        (
            "reference, split streams",
            SimSemantics {
                streams: TraceStreams::Split,
                ..SimSemantics::REFERENCE
            },
        ),
    ];
    println!("| load/h | rules | mechanism | mean JCT h | median h | p99 h | demotions |");
    println!("| ---: | --- | --- | ---: | ---: | ---: | ---: |");
    for &load in &loads {
        for (name, sem) in &variants {
            for mech in ["proportional", "tune"] {
                let cfg = SimConfig {
                    record_rounds: false,
                    semantics: *sem,
                    ..SimConfig::paper_default()
                };
                let source = TraceSource::Generated(GenConfig {
                    seed: 42,
                    job_list_seed: JobListSeed::Fixed(42),
                    load_jobs_per_h: load,
                    split: [20.0, 70.0, 10.0],
                    gpu_mode: GpuMode::Multi,
                    jobs: None,
                });
                let mut m = mechanism_by_name(mech)?;
                let r = run(
                    &catalog,
                    &cfg,
                    source,
                    policy_by_name("fifo")?.as_ref(),
                    m.as_mut(),
                )?;
                let j = &r.summary.jct;
                println!(
                    "| {load} | {name} | {mech} | {:.2} | {:.2} | {:.1} | {} |",
                    j.mean_h, j.median_h, j.p99_h, r.summary.demotions
                );
            }
        }
    }
    Ok(())
}
