//! `--semantics`: this project's scheduling rules or the reference simulator's, for the simulator as a
//! whole: the core's rules ([`Semantics`]: speed of capped jobs, placement, demotion scope) plus the two
//! that only the simulator knows, how a multi-GPU trace is drawn and when a job ends. Every difference is
//! listed, with what it costs in JCT, in docs/simulate.md ("Two semantics").

use crate::error::InputError;
use crate::error::Setting;
use crate::sched::Semantics;

/// Where a generated multi-GPU trace draws its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceStreams {
    /// Two streams, the job list's (durations, GPU counts) and the run's (arrivals), as the reference's
    /// single-GPU Philly-length mode keeps them: ours for both modes, so that `--seed` moves only the
    /// arrivals.
    Split,
    /// The reference's synthetic multi-GPU mode: each job draws its arrival, duration, GPU count and
    /// unused model id from the run's one stream, seeded by `--seed`. Single-GPU traces stay split, as
    /// the reference's single-GPU runs are.
    OneForMultiGpu,
}

/// When a job that needs less than a round's iterations finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundEnd {
    /// At the moment its last iteration ends (ours).
    MidRound,
    /// At the end of the round, when the reference's lease ends.
    Boundary,
}

/// The simulator's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimSemantics {
    /// The scheduling core's rules.
    pub core: Semantics,
    /// How a generated multi-GPU trace is drawn.
    pub streams: TraceStreams,
    /// When jobs finish.
    pub round_end: RoundEnd,
}

impl SimSemantics {
    /// This project's rules (the default).
    pub const SYNERGY: SimSemantics = SimSemantics {
        core: Semantics::SYNERGY,
        streams: TraceStreams::Split,
        round_end: RoundEnd::MidRound,
    };
    /// The reference simulator's rules.
    pub const REFERENCE: SimSemantics = SimSemantics {
        core: Semantics::REFERENCE,
        streams: TraceStreams::OneForMultiGpu,
        round_end: RoundEnd::Boundary,
    };

    /// The rules by their name on the command line; an unknown name is an error of the `semantics`
    /// setting that lists the choices.
    pub fn by_name(name: &str) -> Result<SimSemantics, InputError> {
        match name {
            "synergy" => Ok(SimSemantics::SYNERGY),
            "reference" => Ok(SimSemantics::REFERENCE),
            _ => Err(InputError::setting(
                Setting::Semantics,
                format!(
                    "unknown semantics `{name}` (choose from {})",
                    SEMANTICS.join(", ")
                ),
            )),
        }
    }

    /// Its name on the command line (`custom` for a mix built in code).
    pub fn name(&self) -> &'static str {
        match *self {
            SimSemantics::SYNERGY => "synergy",
            SimSemantics::REFERENCE => "reference",
            _ => "custom",
        }
    }
}

impl Default for SimSemantics {
    fn default() -> Self {
        SimSemantics::SYNERGY
    }
}

/// Names of the semantics, the default first.
pub const SEMANTICS: [&str; 2] = ["synergy", "reference"];
