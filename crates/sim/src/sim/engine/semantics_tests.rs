//! One hand-made trace per behaviour where `--semantics synergy` and `--semantics reference`
//! part (docs/simulate.md, "Two semantics"): each is run with our rules, with our rules but that one
//! behaviour switched to the reference's, and with all of the reference's rules; every JCT below is
//! worked out by hand in its comment. Jobs take 1 s per iteration at the proportional share, rounds are
//! 300 s and every server gives 4 cores and 25 GiB per GPU at the proportional share.

use super::{run, SimConfig, TraceSource};
use crate::format::trace::TraceJob;
use crate::sched::catalog::{Catalog, JobModel};
use crate::sched::cluster::{ClusterConfig, ServerSpec};
use crate::sched::semantics::{CappedSpeed, DemotionScope, Fallback, Placement};
use crate::sched::{mechanism_by_name, policy_by_name};
use crate::sim::semantics::{RoundEnd, SimSemantics};

fn model(name: &str, best: (f64, f64), cpus: Vec<f64>, rows: Vec<Vec<f64>>) -> JobModel {
    JobModel {
        name: name.into(),
        class: "image".into(),
        iter_time_s: 1.0,
        cpus_axis: cpus,
        memory_gib_axis: vec![25.0, 50.0],
        normalized: rows,
        best_cpus_per_gpu: best.0,
        best_memory_gib_per_gpu: best.1,
        footprint_gib_per_gpu: None,
        path: format!("{name}.json").into(),
    }
}

/// `img` runs twice as fast with 8 cores a GPU as with 4 (its best case, 8 cores and 25 GiB); `lang`
/// runs at 1.0 anywhere and wants 1 core; `cap` wants 12 cores and 50 GiB a GPU and gets 1.5 at 8 cores,
/// 3.0 at its best.
fn catalog() -> Catalog {
    Catalog::new(vec![
        model(
            "cap",
            (12.0, 50.0),
            vec![4.0, 8.0, 12.0],
            vec![vec![1.0, 1.0], vec![1.5, 1.5], vec![2.5, 3.0]],
        ),
        model(
            "img",
            (8.0, 25.0),
            vec![4.0, 8.0],
            vec![vec![1.0, 1.0], vec![2.0, 2.0]],
        ),
        model(
            "lang",
            (1.0, 25.0),
            vec![1.0, 4.0],
            vec![vec![1.0, 1.0], vec![1.0, 1.0]],
        ),
    ])
    .unwrap()
}

fn server(gpus: u32) -> ServerSpec {
    ServerSpec {
        gpus,
        cpus: 4.0 * gpus as f64,
        memory_gib: 25.0 * gpus as f64,
    }
}

/// Jobs `(model, gpus, iters)`, all arriving at 0 in id order, under FIFO and tune; returns each
/// measured job's JCT by id and the demotions made.
fn run_with(
    sem: SimSemantics,
    servers: Vec<ServerSpec>,
    jobs: &[(&str, u32, u64)],
    window: Option<(u64, u64)>,
) -> (Vec<(u64, f64)>, u64) {
    let c = catalog();
    let trace = jobs
        .iter()
        .enumerate()
        .map(|(id, &(m, gpus, iters))| TraceJob {
            id: id as u64,
            model: c.index(m).unwrap() as u32,
            arrival_s: 0.0,
            iters,
            gpus,
        })
        .collect();
    let cfg = SimConfig {
        cluster: ClusterConfig { servers },
        round_s: 300.0,
        window,
        record_rounds: false,
        record_jobs: true,
        semantics: sem,
    };
    let mut tune = mechanism_by_name("tune").unwrap();
    let r = run(
        &c,
        &cfg,
        TraceSource::Jobs(trace),
        policy_by_name("fifo").unwrap().as_ref(),
        tune.as_mut(),
    )
    .unwrap();
    let mut jcts: Vec<(u64, f64)> = r
        .jobs
        .iter()
        .filter(|j| j.in_window)
        .map(|j| (j.id, j.jct_s))
        .collect();
    jcts.sort_by_key(|j| j.0);
    (jcts, r.summary.demotions)
}

/// Our rules with one behaviour switched.
fn ours_with(f: impl FnOnce(&mut SimSemantics)) -> SimSemantics {
    let mut s = SimSemantics::SYNERGY;
    f(&mut s);
    s
}

#[test]
fn a_capped_job_runs_at_the_matrix_speed_here_and_linearly_in_cores_there() {
    // One server of 4 GPUs, 16 cores, 100 GiB; one 2-GPU `cap` job of 1200 iterations. Its best case,
    // 24 cores and 100 GiB, is capped to the server's 16 cores: 8 cores and 50 GiB a GPU.
    let jobs = [("cap", 2, 1200)];
    // Ours: the matrix at (8, 50) says 1.5, 450 iterations a round: 450 by 300 s, 900 by 600 s, the last
    // 300 take 300 / 1.5 = 200 s: JCT 800.
    let ours = run_with(SimSemantics::SYNERGY, vec![server(4)], &jobs, None);
    assert_eq!(ours, (vec![(0, 800.0)], 0));
    // The reference: S = 3.0 at the best case, c = 16 cores between the share's 8 and the best case's
    // 24: 1 + (3 - 1) x (16 - 8) / (24 - 8) = 2.0, 600 a round, done exactly at 600 s.
    let linear = ours_with(|s| s.core.capped_speed = CappedSpeed::LinearInCpus);
    assert_eq!(
        run_with(linear, vec![server(4)], &jobs, None),
        (vec![(0, 600.0)], 0)
    );
    assert_eq!(
        run_with(SimSemantics::REFERENCE, vec![server(4)], &jobs, None),
        (vec![(0, 600.0)], 0)
    );
}

#[test]
fn a_job_that_fits_one_server_goes_there_here_and_first_fit_per_gpu_there() {
    // Two servers of 4 GPUs, 16 cores. Job 0 (`img`, 1 GPU, 600 iterations) is measured; jobs 1-3 run
    // long beside it: 1 `img` x 2 GPUs, 2 `lang` x 2, 3 `img` x 2 (8 cores a GPU each for `img`).
    let jobs = [
        ("img", 1, 600),
        ("img", 2, 1_000_000),
        ("lang", 2, 1_000_000),
        ("img", 2, 1_000_000),
    ];
    let two = || vec![server(4), server(4)];
    // Ours: job 0 takes 8 cores on server 0 (3 GPUs and 8 cores left); job 1's 16 cores fit only server 1
    // whole; job 2 (2 cores) fits server 0. Job 3 fits nowhere, even at its share (server 0: 1 GPU, 6
    // cores; server 1: 2 GPUs, 0 cores), so job 1 on server 1 is demoted to 8 cores and job 3 takes them.
    // Job 0 keeps speed 2: 600 iterations in 300 s, JCT 300, one demotion.
    assert_eq!(
        run_with(SimSemantics::SYNERGY, two(), &jobs, Some((0, 0))),
        (vec![(0, 300.0)], 1)
    );
    // First fit per GPU: job 1 takes one GPU with 8 cores on server 0 (its last 8) and one on server 1,
    // leaving server 0 2 GPUs without a core; job 2 goes to server 1 (1 GPU, 6 cores left). Job 3 at its
    // share needs 8 cores on server 0, the first with 2 free GPUs: jobs 0 and 1 are both demoted there
    // (4 cores each). Job 0 runs at 1.0: 300 iterations a round, done at 600 s; two demotions a round.
    let first_fit = ours_with(|s| s.core.placement = Placement::FirstFitPerGpu);
    assert_eq!(
        run_with(first_fit, two(), &jobs, Some((0, 0))),
        (vec![(0, 600.0)], 4)
    );
    // The reference's one-server demotion picks the same server 0 and the same two jobs (single-server
    // job 0 first), and job 0 ends at the round's end, 600 s.
    assert_eq!(
        run_with(SimSemantics::REFERENCE, two(), &jobs, Some((0, 0))),
        (vec![(0, 600.0)], 4)
    );
}

#[test]
fn demotion_reaches_every_server_here_and_one_server_there() {
    // Server 0: 4 GPUs, 16 cores; server 1: 2 GPUs, 8 cores. Job 0 (`img`, 2 GPUs, 600 iterations) takes
    // all of server 0's cores (8 a GPU), job 1 (`img`, 1 GPU, 600) server 1's 8. Job 2 (`img`, 1 GPU, 300)
    // fits nowhere, even at its share of 4 cores.
    let jobs = [("img", 2, 600), ("img", 1, 600), ("img", 1, 300)];
    let servers = || vec![server(4), server(2)];
    // Ours: servers in index order, server 0 first: job 0 is demoted to 4 cores a GPU and job 2 takes
    // the 4 freed. Round 0: job 0 at 1.0 does 300 of 600, job 1 at 2.0 finishes at 300 s, job 2 at 1.0
    // finishes at 300 s. Round 1: job 0 alone at 2.0, its last 300 in 150 s: JCT 450.
    assert_eq!(
        run_with(SimSemantics::SYNERGY, servers(), &jobs, None),
        (vec![(0, 450.0), (1, 300.0), (2, 300.0)], 1)
    );
    // One server: a 1-GPU job looks at the servers with the fewest free GPUs first, server 1 (1 free):
    // job 1 is demoted there instead. Round 0: job 0 at 2.0 finishes at 300 s, job 1 does 300, job 2
    // finishes at 300 s; round 1: job 1 alone at 2.0 finishes at 450 s.
    let one_server = ours_with(|s| s.core.demotion = DemotionScope::OneServer);
    assert_eq!(
        run_with(one_server, servers(), &jobs, None),
        (vec![(0, 300.0), (1, 450.0), (2, 300.0)], 1)
    );
    // All of the reference's rules: the same demotion, and job 1 ends with its round, at 600 s.
    assert_eq!(
        run_with(SimSemantics::REFERENCE, servers(), &jobs, None),
        (vec![(0, 300.0), (1, 600.0), (2, 300.0)], 1)
    );
}

#[test]
fn a_job_ends_mid_round_here_and_at_the_round_boundary_there() {
    // One server of 4 GPUs; one 2-GPU `img` job of 900 iterations at its best case, speed 2.0: 600 a
    // round. Ours: 600 by 300 s, the last 300 in 150 s: JCT 450. The reference: at the round's end, 600.
    let jobs = [("img", 2, 900)];
    assert_eq!(
        run_with(SimSemantics::SYNERGY, vec![server(4)], &jobs, None),
        (vec![(0, 450.0)], 0)
    );
    let boundary = ours_with(|s| s.round_end = RoundEnd::Boundary);
    assert_eq!(
        run_with(boundary, vec![server(4)], &jobs, None),
        (vec![(0, 600.0)], 0)
    );
    assert_eq!(
        run_with(SimSemantics::REFERENCE, vec![server(4)], &jobs, None),
        (vec![(0, 600.0)], 0)
    );
}

#[test]
fn a_job_below_its_share_falls_back_to_the_share_here_and_to_its_own_demand_there() {
    // One server of 4 GPUs, 16 cores, 100 GiB, all 1-GPU jobs. Jobs 0 and 1 (`img`) take their best
    // case, 8 cores each: no core is left. Job 2 and 3 (`lang`, best case 1 core and 25 GiB, at or below
    // the share of 4 cores and 25 GiB, speed 1.0 everywhere) then find no core. Job 1 (600 iterations)
    // is measured; the others run long.
    let jobs = [
        ("img", 1, 1_000_000),
        ("img", 1, 600),
        ("lang", 1, 1_000_000),
        ("lang", 1, 1_000_000),
    ];
    // Ours: job 2 falls back to the share, 4 cores, and job 0 is demoted to 4 to make room; job 3 too,
    // and job 1 is demoted for it. Job 1 runs at 1.0, 300 iterations a round: JCT 600, two demotions
    // in each of the two rounds.
    assert_eq!(
        run_with(SimSemantics::SYNERGY, vec![server(4)], &jobs, Some((1, 1))),
        (vec![(1, 600.0)], 4)
    );
    // Its own demand: job 2 asks 1 core, job 0's demotion frees 4 and 3 are left, where job 3 fits at
    // its best case without a demotion. Job 1 keeps 8 cores, speed 2.0: 600 iterations in 300 s, one
    // demotion.
    let own = ours_with(|s| s.core.fallback = Fallback::OwnBelowShare);
    assert_eq!(
        run_with(own, vec![server(4)], &jobs, Some((1, 1))),
        (vec![(1, 300.0)], 1)
    );
    // The reference (one-server demotion picks the same server and job 0, the first placed of two
    // alike): the same, and job 1's round ends at 300 s as well.
    assert_eq!(
        run_with(
            SimSemantics::REFERENCE,
            vec![server(4)],
            &jobs,
            Some((1, 1))
        ),
        (vec![(1, 300.0)], 1)
    );
}

#[test]
fn a_run_of_single_gpu_jobs_follows_the_rules_asked_for_too() {
    // One 1-GPU `img` job of 900 iterations at speed 2.0: 450 s under our rules; under the reference's
    // it ends with its round, at 600 s. (The published seed-42 figures are reproduced with our rules,
    // docs/simulate.md.)
    let jobs = [("img", 1, 900)];
    assert_eq!(
        run_with(SimSemantics::SYNERGY, vec![server(4)], &jobs, None),
        (vec![(0, 450.0)], 0)
    );
    assert_eq!(
        run_with(SimSemantics::REFERENCE, vec![server(4)], &jobs, None),
        (vec![(0, 600.0)], 0)
    );
}
