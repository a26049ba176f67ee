//! Synergy: profile how much CPU and memory a deep-learning training job needs per GPU, and schedule a
//! shared GPU cluster by it (Synergy, OSDI 2022; DS-Analyzer, VLDB 2021).
//!
//! The profiler side is built from [`workload`] (specs, datasets, built-in workloads, launching),
//! [`isolate`] (cgroup and affinity budgets, page-cache control) and [`measure`] (progress, throughput
//! estimation, telemetry, one trial). The scheduler side is [`sched`] (policies and mechanisms) and
//! [`sim`] (the cluster simulator that drives them over traces); [`exec`] runs a job list for real with
//! the same policies and mechanisms, locally or on Slurm; [`plot`] draws charts of profiles and
//! simulations; [`advisor`] writes the table and script of the Slurm submit-time plugin. [`cli`] is the
//! command line over them.

pub mod advisor;
pub mod cancel;
pub mod cli;
pub mod clock;
pub mod error;
pub mod exec;
pub mod format;
pub mod fsutil;
pub mod gres;
pub mod import;
pub mod isolate;
pub mod leftovers;
pub mod measure;
pub mod plot;
pub mod predict;
pub mod profile;
pub mod sched;
pub mod sim;
pub mod stall;
pub mod units;
pub mod workload;

pub use error::InputError;
