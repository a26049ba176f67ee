//! `synergy plot` end to end: every kind renders to PNG and SVG at the requested size from the shipped
//! profiles and from a real simulation output, the SVG carries its axis labels and one series per input,
//! reruns give the same bytes, `profile --plot` and `simulate --plot` write their charts, and bad input is
//! refused with exit code 2.

use crate::common;

use crate::common::{assert_input_error, run};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The shipped profiles in `dir` (relative to the repository), sorted.
fn profiles_in(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(Path::new(ROOT).join(dir))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no profiles in {dir}");
    v
}

/// The workload name of a profile file.
fn workload_name(path: &str) -> String {
    let v = common::read_json(path);
    v["workload"]["name"].as_str().unwrap().to_string()
}

/// The text of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// Runs `synergy plot INPUTS --kind KIND -o OUT --width W --height H --json`, asserting success; returns
/// the printed JSON.
fn plot(inputs: &[String], kind: &str, out: &Path, size: (u32, u32)) -> serde_json::Value {
    let (w, h) = (size.0.to_string(), size.1.to_string());
    let out_s = out.display().to_string();
    let mut args: Vec<&str> = vec!["plot"];
    args.extend(inputs.iter().map(String::as_str));
    args.extend([
        "--kind", kind, "-o", &out_s, "--width", &w, "--height", &h, "--json",
    ]);
    let o = run(&args);
    assert!(
        o.status.success(),
        "synergy {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("plot --json prints JSON")
}

/// Checks a chart file: its size, and for SVG that each of `labels` and each of `series` is a text.
fn check_chart(path: &Path, size: (u32, u32), labels: &[&str], series: &[String]) {
    assert!(path.is_file(), "{} was not written", path.display());
    if path.extension().unwrap() == "png" {
        let dims = image::image_dimensions(path).expect("a PNG that decodes");
        assert_eq!(dims, size, "{}", path.display());
        return;
    }
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(
        svg.starts_with(&format!("<svg width=\"{}\" height=\"{}\"", size.0, size.1)),
        "{}: {}",
        path.display(),
        &svg[..svg.len().min(120)]
    );
    let texts = svg_texts(&svg);
    for l in labels {
        assert!(
            texts.iter().any(|t| t.contains(l)),
            "{}: no axis label `{l}` in {texts:?}",
            path.display()
        );
    }
    for s in series {
        let n = texts
            .iter()
            .filter(|t| *t == s || t.starts_with(&format!("{s} (")))
            .count();
        assert!(
            n >= 1,
            "{}: series `{s}` is not labelled in {texts:?}",
            path.display()
        );
    }
}

/// Axis labels each profile kind must carry.
fn profile_labels(kind: &str) -> &'static [&'static str] {
    match kind {
        "cpu" => &["CPU cores", "throughput ("],
        "mem" => &["memory (GiB)", "throughput ("],
        "heatmap" => &[
            "memory (GiB)",
            "CPU cores",
            "throughput (x GPU-proportional)",
        ],
        "fit" => &["measured throughput (", "predicted throughput (", "y = x"],
        _ => unreachable!(),
    }
}

#[test]
fn every_profile_kind_renders_the_measured_profiles_to_png_and_svg() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let inputs = profiles_in("profiles");
    let names: Vec<String> = inputs.iter().map(|p| workload_name(p)).collect();
    for kind in ["cpu", "mem", "heatmap", "fit"] {
        for (ext, size) in [("png", (900, 600)), ("svg", (1100, 700))] {
            let out = d.path().join(format!("all.{kind}.{ext}"));
            let j = plot(&inputs, kind, &out, size);
            assert_eq!(j["kind"], kind);
            assert_eq!(j["series"].as_array().unwrap().len(), inputs.len(), "{j}");
            check_chart(&out, size, profile_labels(kind), &names);
        }
        // One profile: absolute samples/s where the profile has them.
        let out = d.path().join(format!("one.{kind}.svg"));
        plot(&inputs[..1], kind, &out, (1024, 720));
        check_chart(&out, (1024, 720), profile_labels(kind), &[]);
        if kind != "heatmap" {
            let svg = std::fs::read_to_string(&out).unwrap();
            assert!(
                svg.contains("samples/s"),
                "{kind}: one measured profile in samples/s"
            );
        }
    }
}

#[test]
fn published_profiles_without_measurements_render_and_fit_says_why_not() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let zoo = profiles_in("profiles/zoo");
    let names: Vec<String> = zoo.iter().map(|p| workload_name(p)).collect();
    for kind in ["cpu", "mem", "heatmap"] {
        let out = d.path().join(format!("zoo.{kind}.svg"));
        let j = plot(&zoo, kind, &out, (1600, 1000));
        assert_eq!(j["series"].as_array().unwrap().len(), zoo.len());
        check_chart(&out, (1600, 1000), profile_labels(kind), &names);
    }
    let out = d.path().join("zoo.fit.svg");
    let out_s = out.display().to_string();
    assert_input_error(
        &["plot", &zoo[0], "--kind", "fit", "-o", &out_s],
        &[&zoo[0], "validation"],
    );
    assert!(!out.exists(), "no chart from refused input");
}

/// A small sweep simulated now: two mechanisms at two loads on a small cluster.
fn simulate_sweep(dir: &Path) -> PathBuf {
    let out = dir.join("sweep");
    let o = run(&[
        "simulate",
        "--profiles",
        &format!("{ROOT}/profiles/zoo"),
        "--servers",
        "2",
        "--jobs",
        "120",
        "--load",
        "2,4",
        "--mechanism",
        "proportional,tune",
        "--out",
        &out.display().to_string(),
    ]);
    assert!(
        o.status.success(),
        "simulate: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

fn sim_labels(kind: &str) -> &'static [&'static str] {
    match kind {
        "jct-cdf" => &["job completion time (hours", "fraction of jobs"],
        "jct-vs-load" => &["load (jobs per hour)", "mean JCT (hours)"],
        "utilization" => &[
            "time (hours)",
            "allocated (% of cluster)",
            "GPU",
            "CPU",
            "memory",
        ],
        _ => unreachable!(),
    }
}

#[test]
fn every_simulation_kind_renders_a_sweep_and_a_run() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let sweep = simulate_sweep(d.path());
    let sweep_s = vec![sweep.display().to_string()];
    let runs = [
        "fifo / proportional, 2 jobs/h, seed 42",
        "fifo / proportional, 4 jobs/h, seed 42",
        "fifo / tune, 2 jobs/h, seed 42",
        "fifo / tune, 4 jobs/h, seed 42",
    ]
    .map(String::from);
    for kind in ["jct-cdf", "jct-vs-load", "utilization"] {
        for (ext, size) in [("png", (800, 500)), ("svg", (1200, 900))] {
            let out = d.path().join(format!("{kind}.{ext}"));
            let j = plot(&sweep_s, kind, &out, size);
            let series: Vec<String> = if kind == "jct-vs-load" {
                vec!["fifo / proportional".into(), "fifo / tune".into()]
            } else {
                runs.to_vec()
            };
            let got: Vec<String> = j["series"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect();
            assert_eq!(
                got, series,
                "{kind}: one series per run, loads in numeric order"
            );
            check_chart(&out, size, sim_labels(kind), &series);
        }
    }
    // A single run directory.
    let one = vec![sweep.join("fifo-tune-load4-seed42").display().to_string()];
    for kind in ["jct-cdf", "utilization", "jct-vs-load"] {
        let out = d.path().join(format!("one-{kind}.svg"));
        let j = plot(&one, kind, &out, (1024, 720));
        assert_eq!(j["series"].as_array().unwrap().len(), 1);
        check_chart(&out, (1024, 720), sim_labels(kind), &[]);
    }
}

#[test]
fn the_same_input_gives_the_same_bytes() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let sweep = simulate_sweep(d.path());
    let cases = [
        (profiles_in("profiles"), "heatmap"),
        (profiles_in("profiles"), "cpu"),
        (vec![sweep.display().to_string()], "jct-cdf"),
        (vec![sweep.display().to_string()], "utilization"),
    ];
    for (inputs, kind) in &cases {
        for ext in ["png", "svg"] {
            let a = d.path().join(format!("a-{kind}.{ext}"));
            let b = d.path().join(format!("b-{kind}.{ext}"));
            plot(inputs, kind, &a, (1000, 700));
            plot(inputs, kind, &b, (1000, 700));
            let (x, y) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
            assert!(x.len() > 1000, "{kind}.{ext} is too small to be a chart");
            assert!(x == y, "{kind}.{ext} differs between two runs");
        }
    }
}

#[test]
fn simulate_plot_writes_its_charts() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let charts = d.path().join("charts");
    let o = run(&[
        "simulate",
        "--profiles",
        &format!("{ROOT}/profiles/zoo"),
        "--servers",
        "2",
        "--jobs",
        "80",
        "--load",
        "2,4",
        "--mechanism",
        "proportional,tune",
        "--plot",
        &charts.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for kind in ["jct-cdf", "jct-vs-load", "utilization"] {
        check_chart(
            &charts.join(format!("{kind}.svg")),
            (1024, 720),
            sim_labels(kind),
            &[],
        );
    }
}

#[test]
fn profile_plot_writes_charts_beside_the_profile() {
    if common::skip_without_cgroups() {
        return;
    }
    let _g = common::serial();
    let d = tempfile::tempdir().unwrap();
    let spec = common::small_text_spec(d.path());
    let out = d.path().join("text.json");
    let o = run(&[
        "profile",
        &spec,
        "--out",
        &out.display().to_string(),
        "--cpus",
        "1,2",
        "--mem",
        "0.2,0.5",
        "--validate",
        "1",
        "--plot",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let name = workload_name(&out.display().to_string());
    for kind in ["cpu", "mem", "heatmap", "fit"] {
        let chart = d.path().join(format!("text.{kind}.svg"));
        check_chart(&chart, (1024, 720), profile_labels(kind), &[]);
        let svg = std::fs::read_to_string(&chart).unwrap();
        assert!(svg.contains(&name), "{kind}: names the workload `{name}`");
    }
}

#[test]
fn bad_input_is_refused_with_exit_code_2() {
    let _host = common::shared();
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("x.svg");
    let out_s = out.display().to_string();
    let image = format!("{ROOT}/profiles/image.json");
    // A file that is not a profile: not JSON, and JSON of something else.
    let cargo = format!("{ROOT}/Cargo.toml");
    assert_input_error(
        &["plot", &cargo, "--kind", "cpu", "-o", &out_s],
        &[&cargo, "not JSON"],
    );
    let other = d.path().join("other.json");
    std::fs::write(&other, r#"{"policy": "fifo"}"#).unwrap();
    let other_s = other.display().to_string();
    assert_input_error(
        &["plot", &other_s, "--kind", "heatmap", "-o", &out_s],
        &[&other_s, "schema"],
    );
    let missing = d.path().join("missing.json").display().to_string();
    assert_input_error(
        &["plot", &missing, "--kind", "cpu", "-o", &out_s],
        &[&missing],
    );
    // An unknown kind.
    assert_input_error(
        &["plot", &image, "--kind", "pie", "-o", &out_s],
        &["pie", "--kind"],
    );
    // An unwritable path fails the write, exit 1 as every command's failed write does
    // (docs/architecture.md §7, "Conventions").
    let blocker = d.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let unwritable = blocker.join("x.png").display().to_string();
    let o = run(&["plot", &image, "--kind", "cpu", "-o", &unwritable]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&unwritable) && stderr.contains("cannot write"),
        "{stderr}"
    );
    // A format nobody asked for.
    let jpg = d.path().join("x.jpg").display().to_string();
    assert_input_error(
        &["plot", &image, "--kind", "cpu", "-o", &jpg],
        &[&jpg, ".png or .svg"],
    );
    assert_input_error(
        &[
            "plot", &image, "--kind", "cpu", "-o", &out_s, "--width", "10",
        ],
        &["--width"],
    );
    // Inputs of the wrong sort for the kind.
    let profiles_dir = format!("{ROOT}/profiles");
    assert_input_error(
        &["plot", &profiles_dir, "--kind", "mem", "-o", &out_s],
        &[&profiles_dir, "is a directory"],
    );
    assert_input_error(
        &["plot", &image, "--kind", "jct-cdf", "-o", &out_s],
        &[&image, "not a directory"],
    );
    assert_input_error(
        &["plot", &profiles_dir, "--kind", "utilization", "-o", &out_s],
        &[&profiles_dir, "summary.json"],
    );
    assert!(!out.exists(), "nothing written for refused input");
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        2,
        "no temporary files left behind"
    );
}
