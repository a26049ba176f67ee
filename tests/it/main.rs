//! The integration tests, one binary with a module per area (as ripgrep arranges its own): each test
//! binary links the whole library, so twelve of them made up a large part of a clean build.
//!
//! Tests of every area now run side by side in one process, where separate binaries ran one after
//! another; every test takes the host lock in [`common`] (`serial` when it measures throughput or holds
//! the local Slurm node, `shared` otherwise) so that a throughput trial still has the host to itself.
//! Run one area with a filter: `cargo test --release --test it simulate::`.

mod common;

mod architecture;
mod cgroup_v2;
mod cli_errors;
mod contract;
mod distributed;
mod faults;
mod formats;
mod hardening;
mod launch;
mod leftovers;
mod measure;
mod plot;
mod profile;
mod pytorch;
mod rate;
mod recommend;
mod run;
mod run_slurm;
mod signals;
mod simulate;
mod slurm_accounting;
mod slurm_advisor;
mod slurm_client;
mod slurm_nodes;
mod snapshots;
mod trace_import;
