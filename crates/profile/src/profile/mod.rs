//! Profiles: the plan that measures a workload cheaply (optimistic profiling), the sensitivity matrix
//! derived from the data-stall model, refinement from what real runs observed, and the published model
//! zoo. The profile file itself is [`crate::format::profile`].

pub mod matrix;
pub mod plan;
pub mod refine;
pub mod zoo;
