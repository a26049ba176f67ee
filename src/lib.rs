//! Synergy: profile how much CPU and memory a deep-learning training job needs per GPU, and schedule a
//! shared GPU cluster by it (Synergy, OSDI 2022; DS-Analyzer, VLDB 2021).
//!
//! The library is a workspace of crates, one per layer (docs/architecture.md §2), each re-exported here
//! as the modules it holds. The profiler side is built from [`workload`] (specs, datasets, built-in
//! workloads, launching), [`isolate`] (cgroup and affinity budgets, page-cache control) and [`measure`]
//! (progress, throughput estimation, telemetry, one trial), with the files they write in [`format`]. The
//! scheduler side is [`sched`] (policies and mechanisms) and [`sim`] (the cluster simulator that drives
//! them over traces); [`exec`] runs a job list for real with the same policies and mechanisms, locally or
//! on Slurm. This crate adds what faces the user: [`import`] of cluster traces, [`plot`] of profiles and
//! simulations, the Slurm [`advisor`], what a job should ask for ([`recommend`]), and [`cli`], the command line over them.

pub use synergy_exec::*;

pub mod advisor;
pub mod cli;
pub mod import;
pub mod plot;
pub mod recommend;
