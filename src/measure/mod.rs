//! Measuring one trial: read a workload's progress, estimate its throughput with a confidence interval,
//! stop as soon as it is known precisely enough, and collect telemetry.
