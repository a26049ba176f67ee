//! Starting a workload command under the launch contract, inside an isolation domain.
