//! Converts the Synergy artifact's published model zoo (per-model sensitivity matrices, docs/architecture.md §5.5) into
//! `synergy-profile/1` files, so the simulator reads published and measured models the same way.

use crate::error::InputError;
use crate::format::profile::HitModel;
use crate::format::profile::{
    Demand, Matrix, PerGpuMatrix, Profile, ProfileError, RatedAllocation, ServerShape, WorkloadInfo,
};
use crate::units::gb_to_gib;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What the `source` field of every imported profile says.
pub const ZOO_SOURCE: &str = "published figures of the Synergy artifact (Mohan et al., \"Looking Beyond GPUs \
for DNN Scheduling on Multi-Tenant Clusters\", OSDI 2022), model zoo; memory converted from GB to GiB";

/// The zoo file as published.
#[derive(Debug, Deserialize)]
struct Zoo {
    cpus_per_gpu_rows: Vec<f64>,
    mem_gb_per_gpu_cols: Vec<f64>,
    normalized_to: NormalizedTo,
    models: BTreeMap<String, ZooModel>,
}

#[derive(Debug, Deserialize)]
struct NormalizedTo {
    cpus_per_gpu: f64,
    mem_gb_per_gpu: f64,
}

#[derive(Debug, Deserialize)]
struct ZooModel {
    task: String,
    best_cpus_per_gpu: f64,
    best_mem_gb_per_gpu: f64,
    batch_size: u32,
    iter_time_s_at_proportional: f64,
    speedup_at_best: f64,
    throughput_normalized: Vec<Vec<f64>>,
}

/// The server the zoo is normalized to: 8 GPUs, 24 cores, 500 GB (3 cores and 62.5 GB per GPU).
fn zoo_server(n: &NormalizedTo) -> ServerShape {
    ServerShape {
        gpus: 8,
        cpus: 8.0 * n.cpus_per_gpu,
        memory_gib: gb_to_gib(8.0 * n.mem_gb_per_gpu),
    }
}

/// Parses the published zoo JSON into one single-GPU profile per model, named after the model.
pub fn parse_zoo(text: &str, origin: &str) -> Result<Vec<Profile>, InputError> {
    let zoo: Zoo = serde_json::from_str(text).map_err(|e| {
        InputError::new(
            origin,
            format!(
                "not a model zoo (line {}, column {}): {e}",
                e.line(),
                e.column()
            ),
        )
    })?;
    let cpus = zoo.cpus_per_gpu_rows.clone();
    let memory_gib: Vec<f64> = zoo
        .mem_gb_per_gpu_cols
        .iter()
        .map(|g| gb_to_gib(*g))
        .collect();
    let server = zoo_server(&zoo.normalized_to);
    let prop_cpus = zoo.normalized_to.cpus_per_gpu;
    let prop_mem = gb_to_gib(zoo.normalized_to.mem_gb_per_gpu);
    let mut out = Vec::new();
    for (name, m) in &zoo.models {
        let field = |f: &str| format!("models.{name}.{f}");
        // The name becomes the profile's file name in the output directory.
        if !crate::fsutil::is_safe_file_stem(name) {
            return Err(InputError::field(
                origin,
                format!("models.{name}"),
                format!(
                    "`{name}` cannot name a profile file ({})",
                    crate::fsutil::SAFE_FILE_STEM
                ),
            ));
        }
        if m.iter_time_s_at_proportional <= 0.0 || !m.iter_time_s_at_proportional.is_finite() {
            return Err(InputError::field(
                origin,
                field("iter_time_s_at_proportional"),
                "must be positive",
            ));
        }
        let t = &m.throughput_normalized;
        if t.len() != cpus.len() || t.iter().any(|r| r.len() != memory_gib.len()) {
            return Err(InputError::field(
                origin,
                field("throughput_normalized"),
                format!(
                    "must be {} rows of {} values (cpus_per_gpu_rows x mem_gb_per_gpu_cols) (model {name})",
                    cpus.len(),
                    memory_gib.len()
                ),
            ));
        }
        let best_mem = gb_to_gib(m.best_mem_gb_per_gpu);
        let at_best = crate::predict::interpolate(
            &cpus,
            &memory_gib,
            &m.throughput_normalized,
            m.best_cpus_per_gpu,
            best_mem,
        );
        let best = RatedAllocation {
            cpus: m.best_cpus_per_gpu,
            memory_gib: best_mem,
            samples_per_s: None,
            normalized: at_best,
        };
        let p = Profile {
            schema: crate::format::profile::SCHEMA.to_string(),
            source: ZOO_SOURCE.to_string(),
            workload: WorkloadInfo {
                name: name.clone(),
                spec: None,
                description: format!(
                    "{name} ({}), published speedup at its best-case demand {}x",
                    m.task, m.speedup_at_best
                ),
                batch_size: m.batch_size,
                gpus: 1,
                hit_model: HitModel::Minio,
                iter_time_s: Some(m.iter_time_s_at_proportional),
                class: Some(m.task.clone()),
                dataset: None,
                no_memory_axis: None,
                probe: None,
            },
            host: None,
            created: None,
            trials: Vec::new(),
            model: None,
            server,
            matrix: Matrix {
                cpus: cpus.clone(),
                memory_gib: memory_gib.clone(),
                samples_per_s: None,
                normalized: m.throughput_normalized.clone(),
                limited_by: None,
                proportional: RatedAllocation {
                    cpus: prop_cpus,
                    memory_gib: prop_mem,
                    samples_per_s: None,
                    normalized: 1.0,
                },
                source: None,
            },
            per_gpu: PerGpuMatrix {
                cpus: cpus.clone(),
                memory_gib: memory_gib.clone(),
                normalized: m.throughput_normalized.clone(),
            },
            demand: Demand {
                job: best,
                per_gpu: best,
                tolerance: 0.0,
            },
            validation: Vec::new(),
            validation_summary: Vec::new(),
            warnings: Vec::new(),
            refinement: None,
        };
        // Round-trip through the validating parser so an odd zoo fails here, naming the model.
        let json = serde_json::to_string(&p).expect("profiles serialize");
        let p =
            Profile::parse(&json, &format!("{origin} (model {name})")).map_err(|e| match e {
                ProfileError::Invalid(i) => i,
                other => InputError::new(origin, other.to_string()),
            })?;
        out.push(p);
    }
    if out.is_empty() {
        return Err(InputError::field(origin, "models", "is empty"));
    }
    Ok(out)
}

/// Reads the zoo file and writes `DIR/NAME.json` (and `.csv`) per model; returns the paths written.
pub fn import_zoo(zoo_path: &Path, out_dir: &Path) -> Result<Vec<PathBuf>, ProfileError> {
    let origin = zoo_path.display().to_string();
    let text = crate::input::read_text(zoo_path, crate::input::ZOO)
        .map_err(|e| ProfileError::reading(e, "reading the model zoo"))?;
    let profiles = parse_zoo(&text, &origin)?;
    // Every model's files written as one: a zoo cut short (a kill, a full disk) would be used as a whole
    // one by `simulate --profiles`.
    let files: Vec<(PathBuf, String)> = profiles
        .iter()
        .flat_map(|p| {
            let path = out_dir.join(format!("{}.json", p.workload.name));
            [
                (path.with_extension("csv"), p.to_csv()),
                (path, p.to_json()),
            ]
        })
        .collect();
    let refs: Vec<(&Path, &[u8])> = files
        .iter()
        .map(|(p, t)| (p.as_path(), t.as_bytes()))
        .collect();
    crate::fsutil::write_atomic_all(&refs).map_err(|source| ProfileError::Io {
        context: "saving the zoo's profiles".to_string(),
        source,
    })?;
    Ok(files
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZOO: &str = r#"{"cpus_per_gpu_rows":[1,3,6],"mem_gb_per_gpu_cols":[20.83,62.5],
      "normalized_to":{"cpus_per_gpu":3,"mem_gb_per_gpu":62.5},
      "models":{"m":{"task":"image","best_cpus_per_gpu":6,"best_mem_gb_per_gpu":62.5,"batch_size":8,
        "iter_time_s_at_proportional":0.5,"speedup_at_best":2,"throughput_normalized":[[0.1,0.4],[0.1,1.0],[0.1,2.0]]}}}"#;

    #[test]
    fn zoo_models_become_profiles_normalized_at_three_cores_and_62_5_gb() {
        let ps = parse_zoo(ZOO, "zoo.json").unwrap();
        assert_eq!(ps.len(), 1);
        let p = &ps[0];
        assert!(p.source.contains("OSDI 2022"));
        assert_eq!(p.workload.class.as_deref(), Some("image"));
        assert!((p.matrix.proportional.memory_gib - 58.2077).abs() < 1e-3);
        assert!((p.server.memory_gib - 465.661).abs() < 1e-2);
        assert_eq!(p.demand.per_gpu.normalized, 2.0);
        let at_prop = crate::predict::predict(p, 3.0, gb_to_gib(62.5));
        assert!((at_prop.normalized - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_ragged_zoo_names_the_model() {
        let bad = ZOO.replace("[0.1,2.0]", "[0.1]");
        let e = parse_zoo(&bad, "zoo.json").unwrap_err();
        assert!(e.to_string().contains("model m"), "{e}");
    }

    #[test]
    fn a_model_name_that_would_leave_the_output_directory_is_refused() {
        for name in ["../../evil", "a/b", ".hidden", ""] {
            let bad = ZOO.replace(r#""models":{"m":"#, &format!(r#""models":{{"{name}":"#));
            let e = parse_zoo(&bad, "zoo.json").unwrap_err();
            assert_eq!(
                e.field.as_deref(),
                Some(format!("models.{name}").as_str()),
                "{e}"
            );
        }
    }
}
