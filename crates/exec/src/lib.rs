//! The executor (docs/run.md), over [`synergy_profile`] and [`synergy_sim`].
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub use synergy_profile::*;
pub use synergy_sim::*;

pub mod exec;
