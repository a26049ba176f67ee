//! Every command that writes outputs belonging together (a profile's JSON and CSV, a zoo, the advisor's
//! table and script), killed at points spread over its whole run: what is on disk afterwards is the whole
//! previous output or the whole new one, and a temporary a `kill -9` left is removed, and said, by the
//! next run. A `kill -9` between a group's renames leaves its commit record, and the next write in that
//! directory finishes the renames first, saying so.

use super::leftovers;
use crate::common::{self, synergy};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A writing command: the directory its outputs land in, and two invocations whose outputs differ, so
/// that a mix of the two shows.
struct Writer {
    name: &'static str,
    dir: PathBuf,
    old: Vec<OsString>,
    new: Vec<OsString>,
}

/// The outputs in `dir` by name, leftovers aside, without the advisor table's `generated` time (the
/// only part that differs between two runs of one invocation).
fn outputs(dir: &Path) -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    let left = leftovers(dir);
    entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !left.contains(n))
        .map(|n| {
            let text = std::fs::read_to_string(dir.join(&n)).unwrap();
            let kept: Vec<&str> = text
                .lines()
                .filter(|l| !l.starts_with("generated\t"))
                .collect();
            (n, kept.join("\n"))
        })
        .collect()
}

fn command(args: &[OsString]) -> Command {
    let mut c = synergy();
    c.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Runs `args` to the end, which must succeed; its stderr.
fn complete(w: &Writer, args: &[OsString]) -> String {
    let o = command(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{}: {stderr}", w.name);
    stderr
}

/// Kills `w`'s new invocation `kills` times, at points from its start to past its end, alternating
/// SIGKILL and SIGTERM, over the old output each time.
fn killed_anywhere(w: &Writer, kills: u32) {
    complete(w, &w.new);
    let new = outputs(&w.dir);
    let start = Instant::now();
    complete(w, &w.old);
    let took = start.elapsed().max(Duration::from_millis(5));
    let old = outputs(&w.dir);
    assert_ne!(old, new, "{}: the two invocations must differ", w.name);
    let mut seen = [0u32; 3];
    for i in 0..kills {
        let sig = [libc::SIGKILL, libc::SIGTERM][i as usize % 2];
        let child = command(&w.new).spawn().unwrap();
        std::thread::sleep(took.mul_f64(1.3 * f64::from(i) / f64::from(kills)));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::try_from(sig).unwrap(),
        );
        let status = child.wait_with_output().unwrap().status;
        let now = outputs(&w.dir);
        let whole_new = now == new;
        let left = leftovers(&w.dir);
        let half_renamed = !(now == old || whole_new);
        if half_renamed {
            assert!(
                sig == libc::SIGKILL && left.iter().any(|n| n.ends_with(".synergy-commit")),
                "{}: signal {sig} at {:.0}% left a mix and no commit record: {left:?}",
                w.name,
                130.0 * f64::from(i) / f64::from(kills),
            );
        }
        seen[if half_renamed {
            2
        } else {
            usize::from(whole_new)
        }] += 1;
        if sig == libc::SIGTERM {
            use std::os::unix::process::ExitStatusExt;
            assert!(
                status.code() == Some(128 + sig)
                    || status.success()
                    || status.signal() == Some(sig),
                "{}: {status:?}",
                w.name
            );
            assert!(left.is_empty(), "{}: SIGTERM left {left:?}", w.name);
        } else if !left.is_empty() {
            let said = complete(w, &w.new);
            // A kill after the record was written and before it was removed: its renames finished, or
            // the record removed.
            assert!(
                said.contains("finished writing") || (!half_renamed && said.contains("removed")),
                "{}: {said}",
                w.name
            );
            assert!(outputs(&w.dir) == new, "{}: the new output", w.name);
            assert!(leftovers(&w.dir).is_empty(), "{}", w.name);
        }
        complete(w, &w.old);
        assert!(outputs(&w.dir) == old, "{}: the old output again", w.name);
    }
    eprintln!(
        "{}: {kills} kills over {took:?}: {} left the old output, {} the new, {} a group half renamed",
        w.name, seen[0], seen[1], seen[2]
    );
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// A model zoo of `copies` times the shipped test zoo's models, renamed, each with its throughputs
/// scaled by `scale`: hundreds of files to write, so kills land in the write too.
fn zoo(path: &Path, copies: usize, scale: f64) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/synergy-model-zoo.json"
    ))
    .unwrap();
    let mut z: serde_json::Value = serde_json::from_str(&text).unwrap();
    let models = z["models"].as_object().unwrap().clone();
    let mut many = serde_json::Map::new();
    for c in 0..copies {
        for (name, m) in &models {
            let mut m = m.clone();
            for row in m["throughput_normalized"].as_array_mut().unwrap() {
                for v in row.as_array_mut().unwrap() {
                    *v = serde_json::json!(v.as_f64().unwrap() * scale);
                }
            }
            many.insert(format!("{name}-{c}"), m);
        }
    }
    z["models"] = serde_json::Value::Object(many);
    std::fs::write(path, serde_json::to_vec(&z).unwrap()).unwrap();
}

#[test]
fn every_writer_killed_anywhere_leaves_a_whole_output() {
    let _host = common::serial();
    let d = tempfile::tempdir().unwrap();
    let p = |name: &str| d.path().join(name).into_os_string();
    let root = env!("CARGO_MANIFEST_DIR");
    let (image, audio) = (
        format!("{root}/profiles/image.json"),
        format!("{root}/profiles/audio.json"),
    );
    zoo(&d.path().join("zoo-a.json"), 15, 1.0);
    zoo(&d.path().join("zoo-b.json"), 15, 0.9);
    let log = format!("{root}/tests/data/formats/observation/image-on-audio.observations.jsonl");
    let shipped = std::fs::read_to_string(&log).unwrap();
    let half: Vec<&str> = shipped.lines().take(shipped.lines().count() / 2).collect();
    std::fs::write(
        d.path().join("half.observations.jsonl"),
        half.join("\n") + "\n",
    )
    .unwrap();
    let refine = |from: OsString| {
        let mut a = os(&["profile", "refine", &audio, "--include-disturbed", "--from"]);
        a.extend([from, "--out".into(), p("refined/audio.json")]);
        a
    };
    let advisor = |profiles: &[&str]| {
        let mut a = os(&["slurm", "advisor"]);
        a.extend(profiles.iter().map(OsString::from));
        a.extend(os(&[
            "--sinfo",
            &format!("{root}/tests/data/traces/partitions.sinfo"),
        ]));
        a.extend(["--out".into(), p("advisor")]);
        a
    };
    std::fs::create_dir(d.path().join("refined")).unwrap();
    let writers = [
        Writer {
            name: "import-zoo",
            dir: d.path().join("zoo"),
            old: [
                os(&["import-zoo"]),
                vec![p("zoo-a.json"), "--out-dir".into(), p("zoo")],
            ]
            .concat(),
            new: [
                os(&["import-zoo"]),
                vec![p("zoo-b.json"), "--out-dir".into(), p("zoo")],
            ]
            .concat(),
        },
        Writer {
            name: "profile refine",
            dir: d.path().join("refined"),
            old: refine(p("half.observations.jsonl")),
            new: refine(log.clone().into()),
        },
        Writer {
            name: "slurm advisor",
            dir: d.path().join("advisor"),
            old: advisor(&[&image]),
            new: advisor(&[&image, &audio]),
        },
    ];
    for w in &writers {
        killed_anywhere(w, 16);
    }
}
