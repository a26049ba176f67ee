//! The files a user writes or keeps: profiles, the trace CSV, cluster files, workload specs, job lists.

use super::*;

/// Profile files (`Profile::parse`, which validates): seeds are every shipped profile. An accepted
/// profile must serve every reader: its CSV, predictions at and beyond its grid, the scheduler's model
/// of it, and a write-read round trip.
#[test]
fn profile_files() {
    use synergy::format::profile::{Profile, ProfileError};
    use synergy::predict::predict;
    let mut full = Vec::new();
    let mut small = Vec::new();
    for dir in ["profiles", "profiles/h200", "profiles/zoo"] {
        for p in shipped(dir, "json") {
            let v: Value = serde_json::from_str(&read(&p)).unwrap();
            if dir != "profiles/zoo" {
                small.push(trimmed_profile(&v));
                full.push(v);
            } else {
                small.push(v);
            }
        }
    }
    let mut strings = Vec::new();
    for v in &full {
        json_strings(v, &mut strings);
    }
    let image: Value = serde_json::from_str(&read(&repo().join("profiles/image.json"))).unwrap();
    let derived: Vec<(String, String)> = PROFILE_REGRESSIONS
        .iter()
        .map(|(what, pointer, value)| {
            let mut v = image.clone();
            *v.pointer_mut(pointer).expect(pointer) = serde_json::from_str(value).unwrap();
            (what.to_string(), v.to_string())
        })
        .collect();
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
    let (full_texts, texts): (Vec<String>, Vec<String>) = (
        full.iter().map(pretty).collect(),
        small.iter().map(pretty).collect(),
    );
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..small.len());
        let whole = rng.random_bool(0.02) && k < full.len();
        if rng.random_bool(0.7) {
            let mut v = if whole { &full[k] } else { &small[k] }.clone();
            mutate_json(rng, &mut v, &strings);
            if rng.random_bool(0.5) {
                pretty(&v)
            } else {
                v.to_string()
            }
        } else {
            let text = if whole { &full_texts[k] } else { &texts[k] };
            mutate_bytes(rng, text, &texts)
        }
    };
    let check = |text: &str| {
        let p = match Profile::parse(text, "p.json") {
            Err(ProfileError::Invalid(e)) => {
                return names_the_place(&e, text, &["p.json"], &[]);
            }
            Err(other) => return fail(format!("not an input error: {other}")),
            Ok(p) => p,
        };
        let _ = p.to_csv();
        let m = &p.matrix;
        // The grid's corners and middle, and far beyond it on either side.
        let probe = |axis: &[f64]| {
            [
                0.0,
                axis[0],
                axis[axis.len() / 2],
                axis[axis.len() - 1],
                1e9,
            ]
        };
        for c in probe(&m.cpus) {
            for g in probe(&m.memory_gib) {
                let r = predict(&p, c, g);
                if !(r.normalized.is_finite() && r.normalized >= 0.0) {
                    return fail(format!(
                        "accepted, but predicts {r:?} at {c} cores, {g} GiB"
                    ));
                }
            }
        }
        if let Ok(model) = synergy::sched::catalog::JobModel::from_profile(&p, Path::new("p.json"))
        {
            let s = model.speed(model.best_cpus_per_gpu, model.best_memory_gib_per_gpu);
            if !(s.is_finite() && s >= 0.0) {
                return fail(format!("accepted, but the scheduler's speed is {s}"));
            }
        }
        let again = serde_json::to_string(&p).unwrap();
        match Profile::parse(&again, "p.json") {
            Ok(q) if q == p => Ok(()),
            Ok(q) => fail(format!(
                "accepted, but reads back different after writing, at {}",
                first_difference(
                    &serde_json::to_value(&p).unwrap(),
                    &serde_json::to_value(&q).unwrap()
                )
            )),
            Err(e) => fail(format!("accepted, but refused after writing: {e}")),
        }
    };
    drive("profile", 0x5e_1e_c7, &derived, make, check);
}

/// Trace CSV (`parse_csv`: `read_csv`, then `parse_records`): seeds are the documented examples, a generated trace over
/// the shipped zoo, as a spreadsheet saves it (BOM, CRLF, quotes), and the shipped profiles' CSVs
/// (other headers, for the CSV reader). Every record `read_csv` returns starts on a line of the input, in
/// order (two on one line where a lone CR parts them); an accepted trace holds jobs in arrival order that fit the cluster.
#[test]
fn trace_csv() {
    use synergy::format::trace::parse_records;
    use synergy::format::trace::read_csv;
    use synergy::sched::catalog::Catalog;
    use synergy::sim::trace::{GenConfig, Generator, GpuMode, JobListSeed};
    let catalog = Catalog::load_dir(&repo().join("profiles/zoo")).unwrap();
    let generated = Generator::new(
        GenConfig {
            seed: 42,
            job_list_seed: JobListSeed::Fixed(42),
            load_jobs_per_h: 9.0,
            split: [20.0, 70.0, 10.0],
            gpu_mode: GpuMode::Multi,
            jobs: Some(12),
        },
        &catalog,
    )
    .unwrap();
    let mut trace = String::from("id,model,arrival_s,iters,gpus\n");
    for j in generated {
        let name = &catalog.get(j.model as usize).name;
        trace += &format!("{},{name},{},{},{}\n", j.id, j.arrival_s, j.iters, j.gpus);
    }
    let mut seeds = vec![
        "id,model,arrival_s,iters,gpus\n0,alexnet,.123,3349,4\n1,gnmt,.286,26435,1\n2,transformer,.317,13451,2\n"
            .to_string(),
        "gpus,iters,arrival_s,model,id\n1,10,0,gnmt,0\n2,20,5,lstm,1\n".to_string(),
        format!("\u{feff}{}", trace.replace('\n', "\r\n").replace(",res", ",\"res")),
        trace,
    ];
    for p in shipped("profiles", "csv") {
        seeds.push(read(&p));
    }
    let names: Vec<String> = catalog.models.iter().map(|m| m.name.clone()).collect();
    let make = |rng: &mut ChaCha8Rng| {
        let seed = seeds.choose(rng).unwrap();
        if rng.random_bool(0.6) {
            mutate_csv(rng, seed, &names)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let whole_file = ["the trace is empty", "has a header but no jobs"];
    let check = |text: &str| {
        let lines = text.split('\n').count() as u64;
        let records = match read_csv(text, "t.csv") {
            Ok(records) => {
                let at: Vec<u64> = records.iter().map(|r| r.line).collect();
                // Non-decreasing: a lone CR ends a record (as the csv crate reads it) but not a line.
                if at.iter().any(|&l| l == 0 || l > lines) || at.windows(2).any(|w| w[0] > w[1]) {
                    return fail(format!("records start on lines {at:?} of {lines}"));
                }
                records
            }
            Err(e) => return names_the_place(&e, text, &["t.csv"], &[]),
        };
        match parse_records(records, "t.csv", &catalog, 8) {
            Ok(jobs) => {
                let ordered = jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s);
                let sane = jobs
                    .iter()
                    .all(|j| j.gpus >= 1 && j.gpus <= 8 && j.iters >= 1 && j.arrival_s.is_finite());
                if ordered && sane && !jobs.is_empty() {
                    Ok(())
                } else {
                    fail(format!("accepted jobs out of order or range: {jobs:?}"))
                }
            }
            Err(e) => names_the_place(&e, text, &["t.csv"], &whole_file),
        }
    };
    drive("trace", 0x7_ace, &[], make, check);
}

/// Cluster files (`ClusterConfig::parse`): seeds are the documented forms. An accepted cluster has
/// servers, and totals a simulation can divide by.
#[test]
fn cluster_toml() {
    use synergy::sched::cluster::ClusterConfig;
    let seeds: Vec<String> = vec![
        "[[servers]]\ncount = 16\ngpus = 8\ncpus = 24\nmemory_gb = 500   # or memory_gib = 465.66\n".into(),
        "[[servers]]\ncount = 2\ngpus = 8\ncpus = 24\nmemory_gb = 500\n\n[[servers]]\ngpus = 4\ncpus = 16.5\nmemory_gib = 250\n".into(),
        "servers = [{ gpus = 1, cpus = 2, memory_gib = 8 }]\n".into(),
    ];
    let values = toml_values(&seeds);
    let make = |rng: &mut ChaCha8Rng| {
        let seed = seeds.choose(rng).unwrap();
        if rng.random_bool(0.6) {
            mutate_toml(rng, seed, &values)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let check = |text: &str| match ClusterConfig::parse(text, "c.toml") {
        Ok(c) => {
            let totals = [c.total_cpus(), c.total_memory_gib()];
            if c.servers.is_empty() || c.total_gpus() == 0 || totals.iter().any(|t| !t.is_finite())
            {
                return fail(format!(
                    "accepted {} servers with totals {totals:?}",
                    c.servers.len()
                ));
            }
            Ok(())
        }
        Err(e) => names_the_place(&e, text, &["c.toml"], &[]),
    };
    drive("cluster", 0xc1_05_7e, &[], make, check);
}

/// Workload specs (`WorkloadSpec::parse`): seeds are every shipped spec. An accepted spec expands its
/// dataset path.
#[test]
fn workload_specs() {
    use synergy::workload::WorkloadSpec;
    let seeds = shipped_texts("workloads", "toml");
    let values = toml_values(&seeds);
    let base = repo().join("workloads");
    let make = |rng: &mut ChaCha8Rng| {
        let seed = seeds.choose(rng).unwrap();
        if rng.random_bool(0.6) {
            mutate_toml(rng, seed, &values)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let check = |text: &str| match WorkloadSpec::parse(text, "w.toml", &base) {
        Ok(spec) => match spec.dataset_dir() {
            Ok(_) => Ok(()),
            Err(e) => fail(format!(
                "accepted, but its dataset path does not expand: {e}"
            )),
        },
        Err(e) => names_the_place(&e, text, &["w.toml"], &[]),
    };
    drive("spec", 0x5bec, &[], make, check);
}

/// Job lists (`JobList::parse`): the seed is the shipped example (and shorter forms of it), resolved in
/// a directory that holds its specs and small copies of its profiles. An accepted list's work fits its
/// counters and it makes a trace.
#[test]
fn job_lists() {
    use synergy::exec::jobs::JobList;
    use synergy::exec::ExecError;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for sub in ["examples", "workloads", "profiles"] {
        std::fs::create_dir(root.join(sub)).unwrap();
    }
    for name in ["image", "text"] {
        let spec = format!("workloads/{name}.toml");
        std::fs::copy(repo().join(&spec), root.join(&spec)).unwrap();
        let v: Value =
            serde_json::from_str(&read(&repo().join(format!("profiles/{name}.json")))).unwrap();
        // Only read here, never mutated: without its trials and validation, so that each list that
        // gets this far reads it quickly.
        let mut small = trimmed_profile(&v);
        for key in ["trials", "validation", "validation_summary", "host"] {
            small.as_object_mut().unwrap().remove(key);
        }
        let small = small.to_string();
        std::fs::write(root.join(format!("profiles/{name}.json")), small).unwrap();
    }
    let example = read(&repo().join("examples/jobs-mixed.toml"));
    let short: String = example
        .split("[[job]]")
        .take(3)
        .collect::<Vec<_>>()
        .join("[[job]]");
    let seeds = vec![
        example.clone(),
        short.clone(),
        short
            .replace("profiles = \"../profiles\"\n", "")
            .replace(
                "samples = 40000",
                "profile = \"../profiles/image.json\"\nsteps = 100",
            )
            .replace(
                "samples = 24000",
                "profile = \"../profiles/text.json\"\nsteps = 7\ngpus = 2",
            ),
        short.replace("../workloads/image.toml", "image"),
    ];
    let base = root.join("examples");
    let path = base.join("jobs.toml");
    // Errors about a spec or profile the list names carry that file's path.
    let files = root.display().to_string();
    assert!(
        JobList::parse(&example, "jobs.toml", &base, &path).is_ok(),
        "the example reads"
    );
    let values = toml_values(&seeds);
    let make = |rng: &mut ChaCha8Rng| {
        // The whole example (eight jobs, each loading its spec) one time in ten; its shorter forms
        // reach the same checks faster.
        let seed = if rng.random_bool(0.1) {
            &seeds[0]
        } else {
            &seeds[rng.random_range(1..seeds.len())]
        };
        if rng.random_bool(0.6) {
            mutate_toml(rng, seed, &values)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let check = |text: &str| match JobList::parse(text, "jobs.toml", &base, &path) {
        Ok(list) => {
            for j in &list.jobs {
                let steps_fit = match j.work {
                    synergy::exec::Work::Steps(n) => n.checked_mul(j.batch_size as u64).is_some(),
                    synergy::exec::Work::Samples(_) => true,
                };
                if !steps_fit || j.work_iters() == 0 {
                    return fail(format!("accepted job `{}` with work {:?}", j.name, j.work));
                }
            }
            let _ = list.trace();
            Ok(())
        }
        Err(ExecError::Input(e)) => {
            names_the_place(&e, text, &["jobs.toml", &files], &["has no [[job]] tables"])
        }
        Err(other) => fail(format!("not an input error: {other}")),
    };
    drive("jobs", 0x10b5, &[], make, check);
}
