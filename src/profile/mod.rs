//! Profiles: the plan that measures a workload cheaply (optimistic profiling), the sensitivity matrix
//! derived from the data-stall model, and the versioned profile file (`synergy-profile/1`) with its reader,
//! validator and CSV export.

pub use crate::format::profile as file;
pub mod matrix;
pub mod plan;
pub mod predict;
pub mod refine;
pub mod zoo;

pub use file::{Profile, ProfileError, SCHEMA};
