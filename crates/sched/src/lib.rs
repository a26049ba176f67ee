//! The scheduling core (docs/architecture.md §5), over [`synergy_core`] only: the simulator and the
//! executor use it, and it uses neither.
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub use synergy_core::*;

pub mod sched;
