//! Measuring one trial (docs/architecture.md §3.2), and the reaping of what a dead run left
//! ([`leftovers`]), over [`synergy_workload`].
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub use synergy_workload::*;

pub mod leftovers;
pub mod measure;
