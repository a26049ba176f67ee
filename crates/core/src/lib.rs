//! The bottom layer of synergy: what every other layer shares and nothing here imports from above
//! (docs/architecture.md §2). Units, the input-error contract, bounded input files, atomic files, cancellation and clocks;
//! Slurm's GRES strings; [`format`], every versioned file synergy reads or writes; and [`stall`], the
//! data-stall model, with [`predict`], what a profile predicts at an allocation.
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub mod cancel;
pub mod clock;
pub mod error;
pub mod format;
pub mod fsutil;
pub mod gres;
pub mod input;
pub mod predict;
pub mod range;
pub mod stall;
pub mod units;

pub use error::InputError;

/// This synergy's version and the commit it was built from (`0.1.0 (commit 0123456789ab)`): what
/// `--version` says and what a record names as the binary that made it.
pub const BUILD: &str = env!("SYNERGY_BUILD");
