//! Generated job traces: the Philly-derived generator of docs/architecture.md §5.2 (Poisson arrivals,
//! two-mode durations, class split, round-robin models), drawn as the reference simulator draws it. The
//! trace CSV a user brings is [`crate::format::trace`].

use crate::error::InputError;
use crate::error::Setting;
use crate::format::trace::TraceJob;
use crate::sched::catalog::Catalog;
use crate::sim::pyrandom::PyRandom;
use crate::sim::semantics::TraceStreams;

/// How many GPUs generated jobs ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuMode {
    /// Every job takes one GPU (the paper's default).
    Single,
    /// 1, 2, 4 or 8 GPUs with probabilities 0.70, 0.10, 0.15, 0.05.
    Multi,
}

/// Which seed draws the job list: each job's duration (and GPU count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobListSeed {
    /// A fixed list, whatever the run's seed: how the reference behaves, since it draws the list once and
    /// caches it (its default seed, 42, drew the list behind the published figures).
    Fixed(u64),
    /// The run's own seed, so every seed draws a new list as well as new arrivals.
    Run,
}

impl JobListSeed {
    /// The seed that draws the job list of a run with seed `run_seed`.
    pub fn for_run(self, run_seed: u64) -> u64 {
        match self {
            JobListSeed::Fixed(s) => s,
            JobListSeed::Run => run_seed,
        }
    }
}

/// Parameters of a generated (Philly-derived) trace.
#[derive(Debug, Clone, PartialEq)]
pub struct GenConfig {
    /// Seed of the run: arrivals and classes.
    pub seed: u64,
    /// Seed of the job list: durations and GPU counts.
    pub job_list_seed: JobListSeed,
    /// Mean arrivals per hour (Poisson).
    pub load_jobs_per_h: f64,
    /// Target shares of image, language and speech jobs.
    pub split: [f64; 3],
    /// GPU counts.
    pub gpu_mode: GpuMode,
    /// Stop after this many jobs (None: arrivals never stop; the run ends when its window has finished).
    pub jobs: Option<u64>,
}

/// The model rotation of each class (docs/architecture.md §5.2), in the order image, language, speech.
pub const CLASS_MODELS: [(&str, &[&str]); 3] = [
    (
        "image",
        &["alexnet", "res18", "res50", "mobilenet", "shufflenet"],
    ),
    ("language", &["gnmt", "transformer", "lstm"]),
    ("speech", &["m5", "deepspeech"]),
];

/// The generated traces' model choice: the class furthest below its share so far (ties to the earlier
/// class), then that class's models in turn (docs/architecture.md §5.2): the reference's order of
/// preference, computed as it computes it; imported traces that name no model use it too.
#[derive(Debug, Clone)]
pub struct ClassRotation {
    split: [f64; 3],
    classes: [Vec<usize>; 3],
    counts: [u64; 3],
    next: [usize; 3],
}

impl ClassRotation {
    /// A rotation with no class: for a rule that never asks it.
    pub fn empty() -> ClassRotation {
        ClassRotation {
            split: [0.0; 3],
            classes: Default::default(),
            counts: [0; 3],
            next: [0; 3],
        }
    }

    /// The rotation over the class models of `catalog` with target shares `split`; every model of a class
    /// with a positive share must be in the catalog.
    pub fn new(split: [f64; 3], catalog: &Catalog) -> Result<ClassRotation, InputError> {
        let total: f64 = split.iter().sum();
        if split.iter().any(|s| !(s.is_finite() && *s >= 0.0)) || total.is_nan() || total <= 0.0 {
            return Err(InputError::setting(
                Setting::Split,
                "needs three non-negative shares (image,language,speech) with a positive sum",
            ));
        }
        let mut classes: [Vec<usize>; 3] = Default::default();
        for (k, (class, names)) in CLASS_MODELS.iter().enumerate() {
            if split[k] <= 0.0 {
                continue;
            }
            for n in names.iter() {
                classes[k].push(catalog.index(n).ok_or_else(|| {
                    InputError::setting(
                        Setting::Profiles,
                        format!(
                            "the class split needs the {class} model `{n}`, which no profile names \
                             (the published zoo is in profiles/zoo)"
                        ),
                    )
                })?);
            }
        }
        Ok(ClassRotation {
            split: split.map(|s| s / total),
            classes,
            counts: [0; 3],
            next: [0; 3],
        })
    }

    /// The next job's model.
    pub fn next_model(&mut self) -> usize {
        let so_far: u64 = self.counts.iter().sum();
        let mut class = 0;
        let mut best = f64::NEG_INFINITY;
        for k in (0..3).filter(|&k| !self.classes[k].is_empty()) {
            let deficit = if so_far == 0 {
                0.0
            } else {
                self.split[k] - self.counts[k] as f64 / so_far as f64
            };
            if deficit > best {
                best = deficit;
                class = k;
            }
        }
        self.counts[class] += 1;
        let models = &self.classes[class];
        let m = models[self.next[class] % models.len()];
        self.next[class] += 1;
        m
    }
}

/// An endless (or `jobs`-long) stream of generated jobs in arrival order.
///
/// It draws exactly what the reference simulator draws, from the same CPython random streams, so a seed
/// replays the reference's trace: seed 42, its default, gives the published paper-default run. The
/// reference takes durations from a job list it drew once (each job drawing `random()` for the mode and
/// `uniform` for the exponent) and cached, and reseeds before each run to draw the arrivals; hence two
/// streams, the job list's and the run's.
#[derive(Debug, Clone)]
pub struct Generator {
    cfg: GenConfig,
    /// Durations (and, in multi-GPU mode, GPU counts) of the job list.
    job_list: PyRandom,
    /// Inter-arrival gaps and the reference's unused class draw; in one-stream mode everything.
    arrivals: PyRandom,
    /// Whether the job list is drawn from the arrivals' stream too ([`TraceStreams::OneForMultiGpu`]
    /// with multi-GPU jobs).
    one_stream: bool,
    rotation: ClassRotation,
    iter_time_s: Vec<f64>,
    next_id: u64,
    now_s: f64,
}

impl Generator {
    /// A generator over the class models of `catalog` with this project's split streams; every model
    /// of [`CLASS_MODELS`] whose class has a positive share must be in the catalog.
    pub fn new(cfg: GenConfig, catalog: &Catalog) -> Result<Generator, InputError> {
        Self::with_streams(cfg, catalog, TraceStreams::Split)
    }

    /// A generator drawing as `streams` says: under [`TraceStreams::OneForMultiGpu`] a multi-GPU trace
    /// takes every number from the run's seed, in the reference's synthetic mode's order (arrival,
    /// duration mode and exponent, GPU count, unused model id), and the job-list seed is not read.
    pub fn with_streams(
        cfg: GenConfig,
        catalog: &Catalog,
        streams: TraceStreams,
    ) -> Result<Generator, InputError> {
        if !(cfg.load_jobs_per_h.is_finite() && cfg.load_jobs_per_h > 0.0) {
            return Err(InputError::setting(
                Setting::LoadJobsPerH,
                "must be a positive number of jobs per hour",
            ));
        }
        let rotation = ClassRotation::new(cfg.split, catalog)?;
        Ok(Generator {
            job_list: PyRandom::new(cfg.job_list_seed.for_run(cfg.seed)),
            arrivals: PyRandom::new(cfg.seed),
            one_stream: streams == TraceStreams::OneForMultiGpu && cfg.gpu_mode == GpuMode::Multi,
            cfg,
            rotation,
            iter_time_s: catalog.models.iter().map(|m| m.iter_time_s).collect(),
            next_id: 0,
            now_s: 0.0,
        })
    }
}

/// The number of models the reference's zoo holds: it draws a model id in that range for every job (and
/// then ignores it), which advances the arrival stream.
const REFERENCE_ZOO_MODELS: u64 = 10;

impl Iterator for Generator {
    type Item = TraceJob;

    fn next(&mut self) -> Option<TraceJob> {
        if self.cfg.jobs.is_some_and(|n| self.next_id >= n) {
            return None;
        }
        // Poisson arrivals, gaps rounded up to whole seconds as the reference does.
        let u = self.arrivals.random();
        let gap_h = -(1.0 - u).ln() / self.cfg.load_jobs_per_h;
        self.now_s += (gap_h * 60.0 * 60.0).ceil();
        if !self.one_stream {
            self.arrivals.randint(0, REFERENCE_ZOO_MODELS - 1);
        }

        let model = self.rotation.next_model() as u32;

        let list = if self.one_stream {
            &mut self.arrivals
        } else {
            &mut self.job_list
        };
        let duration_s = if list.random() >= 0.8 {
            60.0 * 10f64.powf(list.uniform(3.0, 4.0))
        } else {
            60.0 * 10f64.powf(list.uniform(1.5, 3.0))
        };
        let gpus = match self.cfg.gpu_mode {
            GpuMode::Single => 1,
            GpuMode::Multi => match list.uniform(0.0, 1.0) {
                r if r >= 0.95 => 8,
                r if r >= 0.8 => 4,
                r if r >= 0.7 => 2,
                _ => 1,
            },
        };
        if self.one_stream {
            // The reference draws its (unused) model id after the job's numbers in this mode.
            self.arrivals.randint(0, REFERENCE_ZOO_MODELS - 1);
        }
        // Whole iterations, truncated as the reference does.
        let iters = (duration_s / self.iter_time_s[model as usize])
            .trunc()
            .max(1.0) as u64;
        let job = TraceJob {
            id: self.next_id,
            model,
            arrival_s: self.now_s,
            iters,
            gpus,
        };
        self.next_id += 1;
        Some(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::trace::parse_csv;
    use crate::sched::catalog::JobModel;

    pub(crate) fn toy_catalog() -> Catalog {
        let names = [
            "alexnet",
            "res18",
            "res50",
            "mobilenet",
            "shufflenet",
            "gnmt",
            "transformer",
            "lstm",
            "m5",
            "deepspeech",
        ];
        Catalog::new(
            names
                .iter()
                .map(|n| JobModel {
                    name: n.to_string(),
                    class: "x".into(),
                    iter_time_s: 0.5,
                    cpus_axis: vec![1.0, 3.0],
                    memory_gib_axis: vec![10.0, 60.0],
                    normalized: vec![vec![0.5, 0.5], vec![1.0, 1.0]],
                    best_cpus_per_gpu: 3.0,
                    best_memory_gib_per_gpu: 10.0,
                    footprint_gib_per_gpu: None,
                    path: "x.json".into(),
                })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn csv_errors_name_line_and_field() {
        let c = toy_catalog();
        let ok = "id,model,arrival_s,iters,gpus\n0,gnmt,.5,10,1\n";
        assert_eq!(parse_csv(ok, "t.csv", &c, 8).unwrap().len(), 1);
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\n0,bert,0,10,1\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("t.csv, line 2: field `model`"),
            "{e}"
        );
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\n0,gnmt,-1,10,1\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert!(e.to_string().contains("arrival_s"), "{e}");
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\n0,gnmt,0,ten,1\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert!(e.to_string().contains("iters"), "{e}");
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\n0,gnmt,0,10,9\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert!(e.to_string().contains("wider than the cluster"), "{e}");
        assert!(parse_csv("", "t.csv", &c, 8).is_err());
        assert!(parse_csv("id,model,arrival_s,iters,gpus\n", "t.csv", &c, 8).is_err());
    }

    #[test]
    fn csv_takes_quoted_fields() {
        let c = toy_catalog();
        let t = "id,model,arrival_s,iters,gpus\n\"0\",\"gnmt\",\"1.5\", 10 ,1\n";
        let jobs = parse_csv(t, "t.csv", &c, 8).unwrap();
        assert_eq!(jobs[0].model, c.index("gnmt").unwrap() as u32);
        assert_eq!(jobs[0].arrival_s, 1.5);
        // A quoted comma is part of the field, not a sixth one: the error is about the model.
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\n0,\"gnmt,lstm\",0,10,1\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("t.csv, line 2: field `model`: unknown model `gnmt,lstm`"),
            "{e}"
        );
    }

    #[test]
    fn csv_takes_crlf_line_ends() {
        let c = toy_catalog();
        let t = "id,model,arrival_s,iters,gpus\r\n0,gnmt,0,10,1\r\n\r\n1,lstm,2,20,2\r\n";
        let jobs = parse_csv(t, "t.csv", &c, 8).unwrap();
        assert_eq!((jobs[1].iters, jobs[1].gpus), (20, 2));
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\r\n0,gnmt,0,10,1\r\n\r\n1,lstm,2,20,x\r\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        // Line 4 of the file (the blank line counts), and no carriage return in the quoted value.
        assert_eq!(
            e.to_string(),
            "t.csv, line 4: field `gpus`: `x` is not an integer of at least 1"
        );
    }

    #[test]
    fn csv_takes_a_byte_order_mark_before_the_header() {
        let c = toy_catalog();
        let t = "\u{feff}id,model,arrival_s,iters,gpus\n0,gnmt,0,10,1\n";
        assert_eq!(parse_csv(t, "t.csv", &c, 8).unwrap()[0].id, 0);
        let e = parse_csv(
            "\u{feff}id,model,arrival_s,iters,gpus\n0,gnmt,0,10,1\n1,gnmt,soon,10,1\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv, line 3: field `arrival_s`: `soon` is not a number of seconds from 0 to 1e9 (about 31.7 years)"
        );
    }

    #[test]
    fn csv_errors_name_the_header_and_short_lines() {
        let c = toy_catalog();
        let e = parse_csv(
            "id,model,arrival,iters,gpus\n0,gnmt,0,10,1\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv, line 1: the header lacks column `arrival_s` (expected id,model,arrival_s,iters,gpus)"
        );
        let e = parse_csv(
            "id,model,arrival_s,iters,gpus\n0,gnmt,0,10\n",
            "t.csv",
            &c,
            8,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.csv, line 2: has 4 fields, the header has 5"
        );
    }

    #[test]
    fn generated_classes_follow_the_split() {
        let c = toy_catalog();
        let g = Generator::new(
            GenConfig {
                seed: 1,
                job_list_seed: JobListSeed::Run,
                load_jobs_per_h: 9.0,
                split: [20.0, 70.0, 10.0],
                gpu_mode: GpuMode::Multi,
                jobs: Some(1000),
            },
            &c,
        )
        .unwrap();
        let jobs: Vec<_> = g.collect();
        assert_eq!(jobs.len(), 1000);
        let image = jobs
            .iter()
            .filter(|j| {
                j.model == c.index("alexnet").unwrap() as u32
                    || ["res18", "res50", "mobilenet", "shufflenet"]
                        .iter()
                        .any(|n| c.index(n).unwrap() as u32 == j.model)
            })
            .count();
        assert!((195..=205).contains(&image), "{image}");
        let span_h = jobs.last().unwrap().arrival_s / 3600.0;
        assert!((span_h - 1000.0 / 9.0).abs() < 15.0, "{span_h}");
        assert!(jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s));
    }

    #[test]
    fn a_fixed_job_list_keeps_durations_across_seeds() {
        let c = toy_catalog();
        let jobs = |seed: u64, job_list_seed: JobListSeed| -> Vec<TraceJob> {
            let cfg = GenConfig {
                seed,
                job_list_seed,
                load_jobs_per_h: 9.0,
                split: [20.0, 70.0, 10.0],
                gpu_mode: GpuMode::Multi,
                jobs: Some(200),
            };
            Generator::new(cfg, &c).unwrap().collect()
        };
        let work = |js: &[TraceJob]| js.iter().map(|j| (j.iters, j.gpus)).collect::<Vec<_>>();
        let arrivals = |js: &[TraceJob]| js.iter().map(|j| j.arrival_s).collect::<Vec<_>>();
        let (a, b) = (
            jobs(1, JobListSeed::Fixed(42)),
            jobs(2, JobListSeed::Fixed(42)),
        );
        assert_eq!(work(&a), work(&b));
        assert_ne!(arrivals(&a), arrivals(&b));
        assert_eq!(work(&jobs(42, JobListSeed::Run)), work(&a));
        assert_ne!(work(&jobs(2, JobListSeed::Run)), work(&a));
        assert!(a.iter().all(|j| j.arrival_s.fract() == 0.0));
    }

    /// The zoo's profiles, whose iteration times are the reference's.
    fn zoo() -> Catalog {
        Catalog::load_dir(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../profiles/zoo"
        )))
        .unwrap()
    }

    fn reference_multi(seed: u64, load: f64, jobs: u64) -> Vec<TraceJob> {
        let cfg = GenConfig {
            seed,
            job_list_seed: JobListSeed::Fixed(42),
            load_jobs_per_h: load,
            split: [20.0, 70.0, 10.0],
            gpu_mode: GpuMode::Multi,
            jobs: Some(jobs),
        };
        Generator::with_streams(cfg, &zoo(), TraceStreams::OneForMultiGpu)
            .unwrap()
            .collect()
    }

    #[test]
    fn one_stream_multi_gpu_traces_replay_the_reference_generator() {
        let c = zoo();
        // Printed by the reference's own `Workload` in its synthetic mode (cluster_job_log None,
        // split (20,70,10), 8 GPUs / 24 cores / 500 GB servers) after `random.seed(42)`, at 9 jobs/h:
        // job id, model, arrival (s), iterations, GPUs.
        let want: [(u64, &str, f64, u64, u32); 16] = [
            (0, "alexnet", 409.0, 8176, 1),
            (1, "gnmt", 861.0, 610813, 1),
            (2, "transformer", 901.0, 22651, 1),
            (3, "m5", 1119.0, 8265, 4),
            (4, "lstm", 1599.0, 295105, 8),
            (5, "gnmt", 1643.0, 54630, 1),
            (6, "res18", 2302.0, 18893, 8),
            (7, "transformer", 2335.0, 24833, 4),
            (8, "lstm", 2680.0, 202066, 1),
            (9, "gnmt", 4366.0, 3676661, 1),
            (10, "res50", 4770.0, 8736, 1),
            (11, "transformer", 5255.0, 3623, 1),
            (4000, "alexnet", 1636080.0, 4368, 1),
            (4001, "transformer", 1636415.0, 14487, 1),
            (4002, "lstm", 1636689.0, 188012, 4),
            (4999, "transformer", 2042730.0, 348631, 1),
        ];
        let jobs = reference_multi(42, 9.0, 5000);
        for (id, model, arrival_s, iters, gpus) in want {
            let j = jobs[id as usize];
            assert_eq!(
                (
                    j.id,
                    c.get(j.model as usize).name.as_str(),
                    j.arrival_s,
                    j.iters,
                    j.gpus
                ),
                (id, model, arrival_s, iters, gpus),
                "job {id}"
            );
        }
        // Its GPU counts over jobs 0-4999: 3530 x 1, 486 x 2, 761 x 4, 223 x 8.
        let count = |g: u32| jobs.iter().filter(|j| j.gpus == g).count();
        assert_eq!(
            [count(1), count(2), count(4), count(8)],
            [3530, 486, 761, 223]
        );
        // Seed 7 at 4.5 jobs/h: the seed moves everything, durations too.
        let seven: Vec<(f64, u64)> = reference_multi(7, 4.5, 3)
            .iter()
            .map(|j| (j.arrival_s, j.iters))
            .collect();
        assert_eq!(seven, vec![(314.0, 29950), (394.0, 366037), (849.0, 3873)]);
        // Our split streams draw another trace from the same seed (arrivals agree, durations do not).
        let split: Vec<TraceJob> = Generator::new(
            GenConfig {
                seed: 42,
                job_list_seed: JobListSeed::Fixed(42),
                load_jobs_per_h: 9.0,
                split: [20.0, 70.0, 10.0],
                gpu_mode: GpuMode::Multi,
                jobs: Some(12),
            },
            &c,
        )
        .unwrap()
        .collect();
        assert_eq!(split[0].arrival_s, 409.0);
        assert_ne!(
            split.iter().map(|j| (j.iters, j.gpus)).collect::<Vec<_>>(),
            jobs[..12]
                .iter()
                .map(|j| (j.iters, j.gpus))
                .collect::<Vec<_>>()
        );
    }
}
