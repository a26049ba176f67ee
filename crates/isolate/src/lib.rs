//! Isolation domains (docs/architecture.md §3.3), over [`synergy_core`].
//!
//! The layers below are re-exported at this crate's root, so a module here names them as it names its
//! own (`crate::units`); a module of a higher layer is not there to name.

pub use synergy_core::*;

pub mod isolate;
