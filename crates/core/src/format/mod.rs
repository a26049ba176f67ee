//! Every versioned file synergy reads or writes, as plain serde types with their schema name, reader and
//! writer (docs/architecture.md §3.4). The algorithms import these types; nothing here imports an
//! algorithm.
//!
//! The rule for versions: a minor version (`synergy-profile/1.12` after `1.11`) only adds fields, each
//! optional or defaulted, so a file of any older minor version reads as one without them and a reader
//! lists every minor version it accepts; anything else is a new major version, refused by name.

pub mod advisor_table;
pub mod dataset;
pub mod journal;
pub mod observation;
pub mod profile;
pub mod rate;
pub mod resume;
pub mod run_state;
pub mod trace;
pub mod trial;
