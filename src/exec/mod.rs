//! Running real jobs: the executor's backends (so far the Slurm client).

pub mod slurm;
