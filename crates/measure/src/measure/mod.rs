//! Measuring one trial: read a workload's progress, estimate its throughput with a confidence interval,
//! stop as soon as it is known precisely enough, and collect telemetry; and calibrate how fast this host's
//! CPU is.

pub mod contention;
pub mod estimate;
pub mod event;
pub mod hostspeed;
pub mod progress;
pub mod ranks;
pub mod telemetry;
pub mod trial;

pub use estimate::EstimatorConfig;
pub use hostspeed::cpu_calibration;
pub use trial::{run_trial, TrialError, TrialRequest};
