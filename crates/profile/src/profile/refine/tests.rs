//! Refinement on made-up observations and on a log a real run wrote.

use super::*;
use crate::format::observation::testing::observation;

fn image() -> Profile {
    Profile::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/image.json"
    )))
    .unwrap()
}

fn monotone(p: &Profile) {
    let m = &p.matrix;
    for j in 0..m.memory_gib.len() {
        for i in 1..m.cpus.len() {
            assert!(
                m.normalized[i][j] >= m.normalized[i - 1][j],
                "column {j} falls at row {i}"
            );
            let abs = m.samples_per_s.as_ref().unwrap();
            assert!(abs[i][j] >= abs[i - 1][j]);
        }
    }
}

#[test]
fn a_slower_host_moves_the_curve_and_the_prediction_meets_the_observation() {
    let p = image();
    let before = p.model.as_ref().unwrap().stall.cpu.at(1.0);
    let obs = vec![
        observation("image", 1.0, 10.0, 0.6 * before),
        observation("image", 1.0, 10.0, 0.62 * before),
        observation("audio", 1.0, 10.0, 5.0),
    ];
    let (r, summary) = refine(&p, "image.json", &obs, &["log".into()], false).unwrap();
    assert_eq!(summary.observations, 2);
    assert_eq!(summary.points.len(), 1);
    let pt = summary.points[0];
    assert!(pt.error_before() > 0.5, "{pt:?}");
    assert!(pt.error_after().abs() < 0.01, "{pt:?}");
    // Unobserved core counts moved by the same ratio.
    let m = r.model.as_ref().unwrap();
    let two = p.model.as_ref().unwrap().stall.cpu.at(2.0);
    assert!((m.stall.cpu.at(2.0) / two - 0.61).abs() < 0.02);
    monotone(&r);
    assert_eq!(r.schema, SCHEMA);
    assert!(r.trials.iter().any(|t| t.role == TrialRole::Observed));
    let src = r.matrix.source.as_ref().unwrap();
    let row = r.matrix.cpus.iter().position(|c| *c == 1.0).unwrap();
    assert_eq!(*src[row].last().unwrap(), CellSource::Observed);
    assert!(src.iter().flatten().any(|s| *s == CellSource::Measured));
    assert!(src.iter().flatten().any(|s| *s == CellSource::Modelled));
    // The refined profile is a valid profile file, and refining it again changes nothing much.
    let json = serde_json::to_string(&r).unwrap();
    let back = Profile::parse(&json, "r.json").unwrap();
    assert_eq!(back, r);
    let (again, _) = refine(&back, "r.json", &obs, &["log".into()], false).unwrap();
    let t = |p: &Profile| p.matrix.proportional.samples_per_s.unwrap();
    assert!((t(&again) / t(&r) - 1.0).abs() < 1e-6);
}

/// `o` with CPU readings: it used `got` of its cores.
fn used(mut o: Observation, got: f64) -> Observation {
    o.disturbance = Some(crate::format::trial::Disturbance {
        disturbed: false,
        reason: None,
        granted_cores: o.cpus,
        got_cores: got * o.cpus,
        other_cores: 0.0,
        steal_cores: 0.0,
        waited_cores: None,
        throttled_periods: None,
        enclosing_throttled_periods: None,
        host_pressure: None,
        domain_pressure: None,
        core_ops_per_cpu_s: None,
        core_best_ops_per_cpu_s: None,
        window_s: 10.0,
        slowed_alone: false,
    });
    o
}

#[test]
fn a_job_short_of_cores_where_its_profile_said_accelerator_bound_is_offered_more() {
    // The text profile is flat: at G from a quarter of a core. An image job given it runs far below
    // G at a quarter of a core, using all of it.
    let p = Profile::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/text.json"
    )))
    .unwrap();
    let g = p.model.as_ref().unwrap().stall.accelerator_samples_per_s;
    let slow = 0.2 * g;
    let at = |r: &Profile, c: f64| {
        r.model
            .as_ref()
            .unwrap()
            .predict(c, 8.0 * GIB, None)
            .samples_per_s
    };
    let short = [used(observation("text", 0.25, 8.0, slow), 0.98)];
    let (r, summary) = refine(&p, "text.json", &short, &["log".into()], false).unwrap();
    assert!((at(&r, 0.25) / slow - 1.0).abs() < 0.01);
    // More cores help, as c / CPU-seconds per sample, up to G.
    assert!(
        (at(&r, 0.5) / (2.0 * slow) - 1.0).abs() < 0.02,
        "{}",
        at(&r, 0.5)
    );
    assert!((at(&r, 2.0) / g - 1.0).abs() < 0.01, "{}", at(&r, 2.0));
    assert!(r.demand.per_gpu.cpus > 1.0, "{:?}", r.demand);
    assert!(summary
        .because
        .iter()
        .any(|b| b.contains("scales with cores")));
    monotone(&r);
    // The same rate from a job that left its cores idle is a slower accelerator: flat, as profiled.
    let idle = [used(observation("text", 0.25, 8.0, slow), 0.3)];
    let (r, _) = refine(&p, "text.json", &idle, &["log".into()], false).unwrap();
    assert!((at(&r, 2.0) / slow - 1.0).abs() < 0.01, "{}", at(&r, 2.0));
    assert!(r.demand.per_gpu.cpus <= 0.25 + 1e-9, "{:?}", r.demand);
    // So is one without readings.
    let unknown = [observation("text", 0.25, 8.0, slow)];
    let (r, _) = refine(&p, "text.json", &unknown, &["log".into()], false).unwrap();
    assert!((at(&r, 2.0) / slow - 1.0).abs() < 0.01);
    // Where the profile itself was short of cores there (image at 1 core), a slower host moves the
    // measured curve by the ratio, whatever the readings say.
    let img = image();
    let before = img.model.as_ref().unwrap().stall.cpu.at(2.0);
    let o = used(
        observation(
            "image",
            1.0,
            10.0,
            0.7 * img.model.as_ref().unwrap().stall.cpu.at(1.0),
        ),
        1.0,
    );
    let (r, _) = refine(&img, "image.json", &[o], &["log".into()], false).unwrap();
    assert!((r.model.as_ref().unwrap().stall.cpu.at(2.0) / before - 0.7).abs() < 0.02);
}

/// What a run of an image job given the text profile saw (a CI run): a quarter of a core at the
/// job's footprint (memory-limited), then a core with memory to spare, above the profile's G. The
/// quarter core keeps its own rate; before, the one-core ratio stood for it and the curve was flat.
#[test]
fn a_memory_limited_pool_keeps_its_cores_rate_beside_one_with_memory_to_spare() {
    let p = Profile::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/text.json"
    )))
    .unwrap();
    let g = p.model.as_ref().unwrap().stall.accelerator_samples_per_s;
    let tight = 0.09375;
    assert!(limited(p.model.as_ref().unwrap(), 0.25, tight));
    let obs = [
        used(observation("text", 0.25, tight, 0.3 * g), 0.98),
        used(observation("text", 1.0, 4.0, 1.24 * g), 0.9),
    ];
    let (r, summary) = refine(&p, "text.json", &obs, &["log".into()], false).unwrap();
    let at = |c: f64, m: f64| {
        r.model
            .as_ref()
            .unwrap()
            .predict(c, m * GIB, None)
            .samples_per_s
    };
    assert!(
        (at(0.25, tight) / (0.3 * g) - 1.0).abs() < 0.02,
        "{}",
        at(0.25, tight)
    );
    assert!(
        (at(1.0, 4.0) / (1.24 * g) - 1.0).abs() < 0.01,
        "{}",
        at(1.0, 4.0)
    );
    assert!(at(1.0, 4.0) > 2.0 * at(0.25, 4.0), "{summary:?}");
    // Nothing to part the miss cost from the CPU's speed: no core count ran both ways.
    assert!(summary.miss_cost.is_none());
    assert!(summary
        .because
        .iter()
        .any(|b| b.contains("at 0.25 cores no observation had memory to spare")));
    monotone(&r);
}

#[test]
fn disturbed_foreign_or_published_inputs_are_refused() {
    let p = image();
    let mut o = observation("image", 1.0, 10.0, 100.0);
    o.disturbed = true;
    let e = refine(&p, "image.json", &[o], &["run/".into()], false).unwrap_err();
    assert!(e.to_string().contains("1 disturbed"), "{e}");
    let zoo = Profile::read(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../profiles/zoo/res18.json"
    )))
    .unwrap();
    let e = refine(&zoo, "res18.json", &[], &[], false).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("model"));
}

#[test]
fn refinement_is_deterministic_and_monotone_whatever_the_observations() {
    let p = image();
    // Observed points that would make a naive curve fall: fast at few cores, slow at many.
    let obs = vec![
        observation("image", 0.5, 10.0, 420.0),
        observation("image", 2.0, 10.0, 150.0),
        observation("image", 1.0, 0.2, 90.0),
        observation("image", 1.5, 0.15, 60.0),
    ];
    let a = refine(&p, "image.json", &obs, &["log".into()], false).unwrap();
    let b = refine(&p, "image.json", &obs, &["log".into()], false).unwrap();
    assert_eq!(a, b);
    monotone(&a.0);
}

/// The log recorded from a real run (tests/data): an image job given the audio profile beside one
/// given its own, on a host so busy that every round was disturbed.
#[test]
fn a_recorded_log_refines_deterministically_and_monotonically() {
    let log = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/formats/observation/image-on-audio.observations.jsonl"
    ));
    let obs = crate::format::observation::read_log(log)
        .unwrap()
        .observations;
    assert!(obs.len() >= 10, "{}", obs.len());
    let from = vec![log.display().to_string()];
    for name in ["audio", "image"] {
        let p = Profile::read(
            &std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles"))
                .join(format!("{name}.json")),
        )
        .unwrap();
        // Every line was disturbed: left out, nothing is left to refine from.
        let e = refine(&p, name, &obs, &from, false).unwrap_err();
        assert!(e.message.contains("disturbed"), "{e}");
        let a = refine(&p, name, &obs, &from, true).unwrap();
        let b = refine(&p, name, &obs, &from, true).unwrap();
        assert_eq!(a, b);
        monotone(&a.0);
        let json = serde_json::to_string(&a.0).unwrap();
        assert_eq!(Profile::parse(&json, "r.json").unwrap(), a.0);
        for pt in &a.1.points {
            assert!(pt.error_after().abs() < pt.error_before().abs(), "{pt:?}");
        }
    }
}
