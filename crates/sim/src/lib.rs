//! The cluster simulator (docs/architecture.md §5.2), over [`synergy_sched`].
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub use synergy_sched::*;

pub mod sim;
