//! What a cluster and a run leave behind: imported traces, machine lists, the advisor's table,
//! observation logs and run state files.

use super::*;

/// Imported cluster traces (`import::import`, docs/traces.md), one format after another: seeds are the
/// small files in each format's published layout under tests/data/traces, written to a temporary file per
/// input. An accepted import gives jobs in arrival order with at least one GPU and one iteration.
#[test]
fn imported_traces() {
    use synergy::import::assign::ModelRule;
    use synergy::import::{import, Format, ImportOptions, JobOutcome, WideJobs};
    use synergy::sched::catalog::Catalog;
    let catalog = Catalog::load_dir(&repo().join("profiles/zoo")).unwrap();
    let data = repo().join("tests/data/traces");
    let formats = [
        (Format::Philly, "philly.json"),
        (Format::Helios, "helios.csv"),
        (Format::Acme, "acme.csv"),
        (Format::Sacct, "jobs.sacct"),
        (Format::Gavel, "gavel.trace"),
        (Format::Tiresias, "tiresias.csv"),
    ];
    let seeds: Vec<(Format, String)> = formats
        .iter()
        .map(|(f, name)| (*f, read(&data.join(name))))
        .collect();
    let texts: Vec<String> = seeds.iter().map(|(_, t)| t.clone()).collect();
    let names: Vec<String> = catalog.models.iter().map(|m| m.name.clone()).collect();
    let opts = ImportOptions {
        states: vec![
            JobOutcome::Completed,
            JobOutcome::Failed,
            JobOutcome::Cancelled,
        ],
        from_s: None,
        to_s: None,
        load_scale: 1.0,
        wide: WideJobs::Spread,
        widest_server_gpus: 8,
        cluster_gpus: 64,
        models: ModelRule::Split([20.0, 70.0, 10.0]),
    };
    let dir = tempfile::tempdir().unwrap();
    // The format travels in the input's first line, so a failure shows (and remakes) it.
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..seeds.len());
        let seed = &seeds[k].1;
        let body = match (seeds[k].0, rng.random_bool(0.6)) {
            (Format::Philly, true) => {
                let mut v: Value = serde_json::from_str(seed).unwrap();
                mutate_json(rng, &mut v, &names);
                v.to_string()
            }
            (_, true) => mutate_csv(rng, seed, &names),
            _ => mutate_bytes(rng, seed, &texts),
        };
        format!("{k}\n{body}")
    };
    let whole_file = [
        "keeps no job",
        "holds no job",
        "is empty",
        "is not UTF-8",
        "is not a delimited table",
    ];
    let check = |input: &str| {
        let (k, body) = input.split_once('\n').unwrap();
        let format = formats[k.parse::<usize>().unwrap()].0;
        let path = dir.path().join(format!(
            "t-{}",
            std::thread::current().name().unwrap_or("x").len()
        ));
        std::fs::write(&path, body).unwrap();
        let origin = path.display().to_string();
        match import(format, std::slice::from_ref(&path), &opts, &catalog) {
            Ok((jobs, summary)) => {
                let ordered = jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s);
                let sane = jobs.iter().all(|j| {
                    j.gpus >= 1
                        && j.gpus <= 64
                        && j.iters >= 1
                        && j.arrival_s >= 0.0
                        && j.arrival_s.is_finite()
                });
                if ordered
                    && sane
                    && summary.kept == jobs.len() as u64
                    && synergy::format::trace::to_csv(&jobs).is_ok()
                {
                    Ok(())
                } else {
                    fail(format!("accepted jobs out of order or range: {jobs:?}"))
                }
            }
            Err(e) => names_the_place(&e, body, &[&origin], &whole_file),
        }
    };
    drive("import", 0x1_b0a7, &[], make, check);
}

/// Machine lists (`import::machines::parse_machines`): Philly's, PAI's spec and `sinfo`, from the shipped
/// examples. An accepted list gives machine groups of at least one machine with positive cores and memory.
#[test]
fn machine_lists() {
    use synergy::import::machines::{parse_machines, MachineFormat, PerGpu};
    let data = repo().join("tests/data/traces");
    let formats = [
        (MachineFormat::Philly, "cluster_machine_list"),
        (MachineFormat::Pai, "pai_machine_spec.csv"),
        (MachineFormat::Sinfo, "nodes.sinfo"),
    ];
    let seeds: Vec<String> = formats.iter().map(|(_, n)| read(&data.join(n))).collect();
    let per_gpu = PerGpu {
        cpus: 3.0,
        memory_gb: 62.5,
    };
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..seeds.len());
        let body = if rng.random_bool(0.6) {
            mutate_csv(rng, &seeds[k], &[])
        } else {
            mutate_bytes(rng, &seeds[k], &seeds)
        };
        format!("{k}\n{body}")
    };
    let check = |input: &str| {
        let (k, body) = input.split_once('\n').unwrap();
        let format = formats[k.parse::<usize>().unwrap()].0;
        match parse_machines(format, "m.txt", body, per_gpu) {
            Ok(groups) => {
                if groups
                    .iter()
                    .all(|g| g.count >= 1 && g.cpus > 0.0 && g.memory_gb > 0.0)
                {
                    Ok(())
                } else {
                    fail(format!("accepted groups out of range: {groups:?}"))
                }
            }
            Err(e) => names_the_place(&e, body, &["m.txt"], &["holds no machine", "is empty"]),
        }
    };
    drive("machines", 0x3ac4, &[], make, check);
}

/// The advisor's table (`Table::parse`, which `--check` runs): the seed is a table `slurm advisor` wrote.
/// Parsing never fails outright; each problem it reports names a line (or the table as a whole) and a
/// field, and a table it reads without a problem writes back the same rows.
#[test]
fn advisor_tables() {
    use synergy::format::advisor_table::Table;
    let seed = read(&repo().join("tests/data/formats/advisor-table/1.tsv"));
    let seeds = vec![seed.clone()];
    let make = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.6) {
            mutate_csv(rng, &seed.replace('\t', ","), &[]).replace(',', "\t")
        } else {
            mutate_bytes(rng, &seed, &seeds)
        }
    };
    let check = |text: &str| {
        let (t, _lines, problems) = Table::parse(text);
        let lines = text.lines().count().max(1);
        for p in &problems {
            if p.field.is_empty() || p.line.is_some_and(|l| l == 0 || l > lines) {
                return fail(format!("a problem that names no place: {p}"));
            }
        }
        if problems.is_empty() {
            let (again, _, more) = Table::parse(&t.to_tsv());
            if !more.is_empty() || again != t {
                return fail(format!("read clean but does not write back: {more:?}"));
            }
        }
        Ok(())
    };
    drive("advisor-table", 0xad71, &[], make, check);
}

/// Observation logs (`observation::read_log`): the seed is a log a real run wrote. A log is read whole or
/// refused naming the file, the line and the field.
#[test]
fn observation_logs() {
    use synergy::format::observation::read_log;
    let seed =
        read(&repo().join("tests/data/formats/observation/image-on-audio.observations.jsonl"));
    let lines: Vec<Value> = seed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut strings = Vec::new();
    json_strings(&lines[0], &mut strings);
    let seeds = vec![seed.clone()];
    let dir = tempfile::tempdir().unwrap();
    let make = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.6) {
            let mut v = lines.clone();
            let k = rng.random_range(0..v.len());
            mutate_json(rng, &mut v[k], &strings);
            v.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            mutate_bytes(rng, &seed, &seeds)
        }
    };
    let check = |text: &str| {
        let path = dir.path().join(format!(
            "o-{:?}.observations.jsonl",
            std::thread::current().id()
        ));
        std::fs::write(&path, text).unwrap();
        let origin = path.display().to_string();
        match read_log(&path) {
            Ok(log) => {
                if log.observations.iter().all(|o| {
                    o.cpus > 0.0
                        && o.memory_gib > 0.0
                        && o.end_s >= o.start_s
                        && o.throughput.samples_per_s <= synergy::range::MAX_SAMPLES_PER_S
                }) {
                    Ok(())
                } else {
                    fail("accepted an observation out of range")
                }
            }
            Err(e) => names_the_place(&e, text, &[&origin], &["cannot read"]),
        }
    };
    drive("observations", 0x0b5e, &[], make, check);
}

/// Run state files (`RunState::read`, which `run --resume` starts from): the seeds are both forms the
/// project has written. A state is read whole or refused naming the file.
#[test]
fn run_states() {
    use synergy::format::run_state::RunState;
    let seeds = shipped_texts("tests/data/formats/run-state", "json");
    let values: Vec<Value> = seeds
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
    let mut strings = Vec::new();
    for v in &values {
        json_strings(v, &mut strings);
    }
    let dir = tempfile::tempdir().unwrap();
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..seeds.len());
        if rng.random_bool(0.6) {
            let mut v = values[k].clone();
            mutate_json(rng, &mut v, &strings);
            v.to_string()
        } else {
            mutate_bytes(rng, &seeds[k], &seeds)
        }
    };
    let check = |text: &str| {
        let path = dir
            .path()
            .join(format!("s-{:?}.state.json", std::thread::current().id()));
        std::fs::write(&path, text).unwrap();
        let origin = path.display().to_string();
        match RunState::read(&path) {
            Ok(st) => {
                let back = dir
                    .path()
                    .join(format!("b-{:?}.state.json", std::thread::current().id()));
                st.write(&back).unwrap();
                match RunState::read(&back) {
                    Ok(again) if again == st => Ok(()),
                    _ => fail("read, but does not read back as written"),
                }
            }
            Err(e) => names_the_place(
                &e,
                text,
                &[&origin],
                &["not a run state file", "cannot read"],
            ),
        }
    };
    drive("run-state", 0x57a7, &[], make, check);
}
