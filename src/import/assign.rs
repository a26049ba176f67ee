//! Models for imported jobs (docs/traces.md): real traces name no model, so each job gets one by a stated
//! rule. A model the trace itself names (Gavel's job types, Tiresias's model names, a sacct comment
//! `synergy:NAME`) is used when the catalog has it; otherwise a mapping file's first matching pattern, a
//! single profile, or the class split and rotation the generated traces use (docs/architecture.md §5.2).

use super::RawJob;
use crate::error::InputError;
use crate::error::Setting;
use crate::sched::catalog::Catalog;
use crate::sim::trace::ClassRotation;
use regex::Regex;
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// How jobs that name no model (or one the catalog lacks) get one.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelRule {
    /// The class split (image, language, speech shares) and each class's model rotation.
    Split([f64; 3]),
    /// Rules from a mapping file, tried in order; jobs no rule matches follow the split.
    Map(Vec<MapRule>, [f64; 3]),
    /// Every job gets this profile.
    Single(String),
}

/// One rule of a mapping file: jobs whose `field` matches `pattern` get `profile`.
#[derive(Debug, Clone)]
pub struct MapRule {
    /// Which of the job's words is matched.
    pub field: MapField,
    /// A regular expression.
    pub pattern: Regex,
    /// A profile's `workload.name`.
    pub profile: String,
}

impl PartialEq for MapRule {
    fn eq(&self, other: &Self) -> bool {
        self.field == other.field
            && self.pattern.as_str() == other.pattern.as_str()
            && self.profile == other.profile
    }
}

/// The words of a job a rule can match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MapField {
    /// Job name (Gavel's job type, Acme's type).
    Name,
    /// Queue, virtual cluster or partition.
    Queue,
    /// User.
    User,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    rule: Vec<RuleEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    field: MapField,
    pattern: String,
    profile: String,
}

/// Reads a mapping file (TOML, `[[rule]]` with `field`, `pattern`, `profile`); errors name the file and
/// the rule.
pub fn read_map(path: &Path) -> Result<Vec<MapRule>, InputError> {
    let origin = path.display().to_string();
    let text = match crate::input::read_text(path, crate::input::MAPPING) {
        Ok(t) => t,
        Err(crate::input::ReadError::Input(e)) => return Err(e),
        Err(crate::input::ReadError::Io(e)) => return Err(InputError::new(&origin, e.to_string())),
    };
    let file: MapFile = toml::from_str(&text).map_err(|e| {
        InputError::new(
            &origin,
            format!("is not a mapping file: {}", e.message().trim()),
        )
    })?;
    file.rule
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let pattern = Regex::new(&r.pattern).map_err(|e| {
                // The regex crate draws the pattern over several lines; its last says what is wrong.
                let why = e.to_string();
                let why = why.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
                InputError::field(
                    &origin,
                    format!("rule[{i}].pattern"),
                    format!(
                        "`{}` is not a regular expression ({})",
                        r.pattern,
                        why.trim()
                    ),
                )
            })?;
            Ok(MapRule {
                field: r.field,
                pattern,
                profile: r.profile,
            })
        })
        .collect()
}

/// Names traces give models, lower-cased with `-`, `_` and spaces removed, and the zoo's names for them.
const ALIASES: [(&str, &str); 12] = [
    ("resnet18", "res18"),
    ("resnet50", "res50"),
    ("res18", "res18"),
    ("res50", "res50"),
    ("lm", "lstm"),
    ("languagemodel", "lstm"),
    ("transformer", "transformer"),
    ("alexnet", "alexnet"),
    ("mobilenet", "mobilenet"),
    ("shufflenet", "shufflenet"),
    ("deepspeech", "deepspeech"),
    ("deepspeech2", "deepspeech"),
];

/// The catalog model a trace's model name means, if any: the name itself, or its alias. Gavel writes
/// `ResNet-18 (batch size 64)`: what follows ` (` is dropped.
fn named_model(name: &str, index: &HashMap<String, usize>) -> Option<usize> {
    let base = name.split(" (").next().unwrap_or(name).trim();
    if let Some(&i) = index.get(base) {
        return Some(i);
    }
    let key: String = base
        .chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    ALIASES
        .iter()
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| index.get(*v))
        .or_else(|| index.get(&key))
        .copied()
}

/// Gives jobs models by a [`ModelRule`].
#[derive(Debug)]
pub struct Assigner {
    rules: Vec<(MapRule, usize)>,
    single: Option<usize>,
    rotation: ClassRotation,
    /// Catalog index by model name.
    index: HashMap<String, usize>,
    /// What each name a trace used meant, looked up once.
    named: HashMap<String, Option<usize>>,
}

impl Assigner {
    /// Checks the rule against the catalog: every profile it names must be there.
    pub fn new(rule: &ModelRule, catalog: &Catalog) -> Result<Assigner, InputError> {
        let find = |name: &str, what: &str| {
            catalog.index(name).ok_or_else(|| {
                InputError::setting(
                    Setting::Models,
                    format!(
                        "{what} names profile `{name}`, which the profile directory lacks; known: {}",
                        catalog.names()
                    ),
                )
            })
        };
        let (rules, single, split) = match rule {
            ModelRule::Split(s) => (Vec::new(), None, *s),
            ModelRule::Single(name) => (Vec::new(), Some(find(name, "the rule")?), [1.0, 0.0, 0.0]),
            ModelRule::Map(rules, s) => {
                let mut out = Vec::new();
                for (i, r) in rules.iter().enumerate() {
                    out.push((r.clone(), find(&r.profile, &format!("mapping rule {i}"))?));
                }
                (out, None, *s)
            }
        };
        let rotation = if single.is_some() {
            ClassRotation::empty()
        } else {
            ClassRotation::new(split, catalog)?
        };
        Ok(Assigner {
            rules,
            single,
            rotation,
            index: catalog
                .models
                .iter()
                .enumerate()
                .map(|(i, m)| (m.name.clone(), i))
                .collect(),
            named: HashMap::new(),
        })
    }

    /// The catalog index of `job`'s model.
    pub fn model_for(&mut self, job: &RawJob) -> usize {
        if let Some(name) = &job.model {
            let index = &self.index;
            let hit = *self
                .named
                .entry(name.clone())
                .or_insert_with(|| named_model(name, index));
            if let Some(i) = hit {
                return i;
            }
        }
        if let Some(i) = self.single {
            return i;
        }
        for (r, i) in &self.rules {
            let word = match r.field {
                MapField::Name => job.name.as_deref().or(job.model.as_deref()),
                MapField::Queue => job.queue.as_deref(),
                MapField::User => job.user.as_deref(),
            };
            if word.is_some_and(|w| r.pattern.is_match(w)) {
                return *i;
            }
        }
        self.rotation.next_model()
    }
}
