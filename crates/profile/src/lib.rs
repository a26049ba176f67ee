//! Profiling (docs/architecture.md §3.4, §4), over [`synergy_measure`].
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub use synergy_measure::*;

pub mod profile;
