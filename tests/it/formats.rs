//! Every versioned file synergy reads, read in every version the project has shipped (docs/architecture.md
//! §2, `format`): the files under `tests/data/formats/` are real ones, each as the version that wrote it
//! left it, and a reader of this version must take them all, and write back what it read.

use super::common::shared;
use std::path::{Path, PathBuf};
use synergy::format::{
    advisor_table, dataset, journal, observation, profile, rate, resume, run_state, trace, trial,
};

fn fixtures(format: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/formats")
        .join(format)
}

fn files_in(format: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures(format))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures of {format}");
    v
}

/// Profiles of `synergy-profile/1` (the published zoo) to this version's: each minor version the project
/// shipped a file of reads, round-trips through the writer, and carries trial results that read as this
/// version's `synergy-trial/1`. 1.2 and 1.3 were never shipped as files (the shipped profiles went from
/// 1.1 to 1.4 by a replay); every other readable version has its file here, and none is missing.
#[test]
fn a_profile_of_every_shipped_version_reads_and_round_trips() {
    let _host = shared();
    let d = tempfile::tempdir().unwrap();
    let mut versions = Vec::new();
    for path in files_in("profile") {
        let p = profile::Profile::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let version = path.file_stem().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            p.schema,
            format!("synergy-profile/{version}"),
            "{}",
            path.display()
        );
        let out = d.path().join(format!("{version}.json"));
        p.write(&out).unwrap();
        assert_eq!(profile::Profile::read(&out).unwrap(), p, "{version}");
        for t in &p.trials {
            assert_eq!(t.result.schema, trial::TRIAL_SCHEMA);
            let text = serde_json::to_string(&t.result).unwrap();
            let back: trial::TrialResult = serde_json::from_str(&text).unwrap();
            assert_eq!(back, t.result);
        }
        versions.push(p.schema);
    }
    let never_shipped = ["synergy-profile/1.2", "synergy-profile/1.3"];
    let mut expected: Vec<String> = profile::READABLE_SCHEMAS
        .iter()
        .filter(|s| !never_shipped.contains(s))
        .map(|s| s.to_string())
        .collect();
    expected.sort();
    versions.sort();
    assert_eq!(versions, expected, "a readable version without its fixture");
    assert!(versions.contains(&profile::SCHEMA.to_string()));
}

/// A profile of a major version this build does not know is refused by name, not half read.
#[test]
fn a_profile_of_another_major_version_is_refused_naming_the_schema() {
    let _host = shared();
    let text = std::fs::read_to_string(fixtures("profile").join("1.11.json"))
        .unwrap()
        .replacen("synergy-profile/1.11", "synergy-profile/2", 1);
    let e = profile::Profile::parse(&text, "p.json")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("schema") && e.contains("synergy-profile/2"),
        "{e}"
    );
}

/// The trial journal is the profile's trials one per line: a resumed profile reads what an older one
/// wrote, and a last line cut short by a kill is dropped, not refused, and never written onto.
#[test]
fn a_journal_of_shipped_trials_reads_back_and_a_torn_last_line_is_dropped() {
    let _host = shared();
    let d = tempfile::tempdir().unwrap();
    for path in files_in("profile") {
        let p = profile::Profile::read(&path).unwrap();
        if p.trials.is_empty() {
            continue;
        }
        let j = d.path().join(format!(
            "{}.trials.jsonl",
            path.file_stem().unwrap().to_string_lossy()
        ));
        for t in &p.trials {
            journal::append(&j, t).unwrap();
        }
        let read = journal::read(&j).unwrap();
        assert_eq!(read.trials().cloned().collect::<Vec<_>>(), p.trials);
        assert!(
            read.entries
                .iter()
                .all(|e| e.made_by == Some(journal::MadeBy::here())),
            "every line names this host and this synergy"
        );
        let mut text = std::fs::read_to_string(&j).unwrap();
        text.truncate(text.len() - 40);
        std::fs::write(&j, text).unwrap();
        let cut = journal::read(&j).unwrap();
        assert_eq!(
            cut.trials().cloned().collect::<Vec<_>>(),
            p.trials[..p.trials.len() - 1]
        );
        assert_eq!(cut.cut_line, Some(p.trials.len()));
        // The trial measured again is appended on a line of its own, not onto the cut one.
        journal::append(&j, p.trials.last().unwrap()).unwrap();
        let again = journal::read(&j).unwrap();
        assert_eq!(
            (again.trials().cloned().collect::<Vec<_>>(), again.cut_line),
            (p.trials.clone(), None)
        );
    }
}

/// `synergy-observation/1`: a log a real run wrote reads, and round-trips line by line.
#[test]
fn an_observation_log_reads_and_round_trips() {
    let _host = shared();
    let d = tempfile::tempdir().unwrap();
    for path in files_in("observation") {
        let log = observation::read_log(&path).unwrap();
        assert!(log.skipped.is_empty(), "{:?}", log.skipped);
        let obs = log.observations;
        assert!(!obs.is_empty());
        let out = d.path().join("x.observations.jsonl");
        let mut w = observation::LogWriter::open(&out, true).unwrap();
        for o in &obs {
            assert_eq!(o.schema, observation::SCHEMA);
            w.append(o).unwrap();
        }
        assert_eq!(observation::read_log(&out).unwrap().observations, obs);
    }
}

/// `synergy-run-state/1`, as written before jobs could spread over servers (one server's fields) and
/// since (parts): both read, and the reader writes the newer form.
#[test]
fn a_run_state_of_both_shipped_forms_reads() {
    let _host = shared();
    let d = tempfile::tempdir().unwrap();
    for path in files_in("run-state") {
        let st = run_state::RunState::read(&path).unwrap();
        assert_eq!(st.schema, run_state::SCHEMA);
        assert!(st.jobs.iter().any(|j| j.allocation.is_some()));
        let out = d.path().join("state.json");
        st.write(&out).unwrap();
        assert_eq!(run_state::RunState::read(&out).unwrap(), st);
    }
}

/// The trace CSV: the reference artifact's five columns, and the nine `trace import` writes, read by the
/// simulator's reader against the shipped model zoo.
#[test]
fn traces_of_the_artifact_and_of_an_import_read() {
    let _host = shared();
    let zoo = synergy::sched::Catalog::load_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles/zoo"),
    )
    .unwrap();
    for path in files_in("trace") {
        let text = std::fs::read_to_string(&path).unwrap();
        let jobs = trace::parse_csv(&text, &path.display().to_string(), &zoo, 1 << 20)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!jobs.is_empty());
    }
}

/// The advisor's table, version 1, as `synergy slurm advisor` wrote it: it parses with no problem, and
/// writes back the same bytes.
#[test]
fn an_advisor_table_reads_and_writes_back_the_same() {
    let _host = shared();
    for path in files_in("advisor-table") {
        let text = std::fs::read_to_string(&path).unwrap();
        let (t, _lines, problems) = advisor_table::Table::parse(&text);
        assert!(problems.is_empty(), "{}: {problems:?}", path.display());
        assert_eq!(t.version, advisor_table::TABLE_VERSION);
        assert_eq!(t.to_tsv(), text);
    }
}

/// A dataset's rate file of `synergy-rate/1`, as `synergy dataset rate` wrote it: its entry is the rate
/// stored for its key, and storing it again (as a new measurement would) writes a file that reads the
/// same. A file of another format holds nothing, so the rate is measured again.
#[test]
fn a_rate_file_reads_its_entries_and_stores_them_back() {
    let _host = shared();
    for path in files_in("rate") {
        let file = rate::read_rate_file(&path);
        assert_eq!(file.format, rate::RATE_FORMAT, "{}", path.display());
        assert!(!file.rates.is_empty(), "{}", path.display());
        let d = tempfile::tempdir().unwrap();
        std::fs::copy(&path, d.path().join(rate::RATE_FILE)).unwrap();
        for e in &file.rates {
            assert_eq!(rate::stored_rate(d.path(), &e.key), Some(e.measurement));
            rate::store_rate(d.path(), &e.key, e.measurement).unwrap();
        }
        let back = rate::read_rate_file(&d.path().join(rate::RATE_FILE));
        assert_eq!(back.rates, file.rates);
        let other = std::fs::read_to_string(&path)
            .unwrap()
            .replace(rate::RATE_FORMAT, "synergy-rate/2");
        std::fs::write(d.path().join(rate::RATE_FILE), other).unwrap();
        assert_eq!(rate::stored_rate(d.path(), &file.rates[0].key), None);
    }
}

/// A generated dataset's manifest, as `synergy dataset gen` wrote it, reads and writes back the same.
#[test]
fn a_dataset_manifest_reads_and_round_trips() {
    let _host = shared();
    let dir = fixtures("dataset");
    let m = dataset::read_manifest(&dir).expect("the manifest reads");
    assert_eq!(m.kind, dataset::DatasetKind::Text);
    assert_eq!(m.total_bytes.0, 65536);
    let text = std::fs::read_to_string(dir.join(dataset::MANIFEST)).unwrap();
    assert_eq!(serde_json::to_string_pretty(&m).unwrap(), text.trim_end());
}

/// A workload's resume state, as a built-in workload left it, reads; a missing one is a fresh start,
/// and a malformed one is refused naming the file.
#[test]
fn a_resume_state_reads_and_a_malformed_one_is_refused() {
    let _host = shared();
    for path in files_in("resume") {
        let st = resume::ResumeState::read(&path).unwrap();
        assert_eq!((st.samples_done, st.steps_done), (20, 5));
        let d = tempfile::tempdir().unwrap();
        let copy = d.path().join("state.json");
        st.write(&copy).unwrap();
        assert_eq!(resume::ResumeState::read(&copy).unwrap(), st);
        let fresh = resume::ResumeState::read(&d.path().join("none.json")).unwrap();
        assert_eq!(fresh, resume::ResumeState::default());
        std::fs::write(&copy, "{\"samples\": 1}").unwrap();
        let e = resume::ResumeState::read(&copy).unwrap_err();
        assert_eq!(e.origin, copy.display().to_string().as_str());
    }
}
