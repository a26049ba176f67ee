//! The error a user fixes by changing their input: it names the file, or the configuration setting, and
//! the field at fault.
//!
//! The library names settings by their configuration field (`round_s`), never by a command-line flag:
//! each front end names settings its own way, and the CLI rewrites [`Setting`]'s text form into flags
//! before it prints (docs/architecture.md §7).

use std::fmt;

/// A setting of a configuration the library takes, by its field name (`round_s`, `cpu_list`,
/// `estimator.max_total_s`); a value in the name (`cache_state=warm`) when one choice of it is at fault.
///
/// In a message it reads `` setting `round_s` ``, and advice to change it (`Setting::to`) reads
/// `` set `profiles` to DIR ``: [`name_settings`] finds both forms, so a front end can put its own names
/// in their place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Setting(pub &'static str);

impl Setting {
    /// The setting's name, as configurations spell it.
    pub fn name(self) -> &'static str {
        self.0
    }

    /// Advice to give the setting a value: `` set `profiles` to DIR ``.
    pub fn to(self, value: &'static str) -> SetTo {
        SetTo {
            setting: self,
            value,
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SETTING_MARK}{}`", self.0)
    }
}

/// Advice to give a setting a value (what to type in its place), from [`Setting::to`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetTo {
    /// The setting.
    pub setting: Setting,
    /// A placeholder for the value (`DIR`, `N`).
    pub value: &'static str,
}

impl fmt::Display for SetTo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SET_MARK}{}` to {}", self.setting.0, self.value)
    }
}

const SETTING_MARK: &str = "setting `";
const SET_MARK: &str = "set `";

/// `text` (a message, or a whole error chain) with every [`Setting`] and [`SetTo`] in it named as a front
/// end names them: a setting by `name` (a flag, `--round`), advice to set one by `advise` given that
/// name (`pass --profiles`), followed by the value. A setting `name` does not know keeps its neutral form.
pub fn name_settings<'a>(
    text: &str,
    name: impl Fn(&str) -> Option<&'a str>,
    advise: impl Fn(&str) -> String,
) -> String {
    let mut out = String::with_capacity(text.len());
    // `copied` is where the text not yet in `out` starts; `at` where the search for a mark goes on.
    let (mut copied, mut at) = (0, 0);
    while let Some((i, mark, advice)) = next_mark(text, at) {
        let start = i + mark.len();
        let Some(len) = text[start..].find('`') else {
            break;
        };
        let tail = start + len + 1;
        at = tail;
        let Some(named) = name(&text[start..start + len]) else {
            continue;
        };
        let replaced = if !advice {
            named.to_string()
        } else if text[tail..].starts_with(" to ") {
            at = tail + " to ".len();
            format!("{} ", advise(named))
        } else {
            continue;
        };
        out.push_str(&text[copied..i]);
        out.push_str(&replaced);
        copied = at;
    }
    out.push_str(&text[copied..]);
    out
}

/// The first mark of either kind at or after `from` that starts a word (so `dataset `x`` holds none), and
/// whether it is advice.
fn next_mark(text: &str, from: usize) -> Option<(usize, &'static str, bool)> {
    [(SETTING_MARK, false), (SET_MARK, true)]
        .into_iter()
        .filter_map(|(mark, advice)| {
            text[from..]
                .match_indices(mark)
                .map(|(i, _)| from + i)
                .find(|&i| {
                    !text[..i]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
                })
                .map(|i| (i, mark, advice))
        })
        .min_by_key(|&(i, _, _)| i)
}

/// What an [`InputError`] is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file or directory by its path, or another input by its name (`workloads/image.toml`, `image`).
    Input(String),
    /// A setting of a configuration the library was given.
    Setting(Setting),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Input(s) => f.write_str(s),
            Origin::Setting(s) => s.fmt(f),
        }
    }
}

impl PartialEq<&str> for Origin {
    fn eq(&self, other: &&str) -> bool {
        matches!(self, Origin::Input(s) if s == other)
    }
}

/// Bad input: a malformed or impossible spec, setting, dataset or budget. The CLI exits with code 2 for
/// these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file path or input (`workloads/image.toml`), or the setting (`cpus`), the problem is in.
    pub origin: Origin,
    /// The field inside the file, when there is one (`dataset.path`).
    pub field: Option<String>,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl InputError {
    /// A problem with a whole file or other named input.
    pub fn new(origin: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            origin: Origin::Input(origin.into()),
            field: None,
            message: message.into(),
        }
    }

    /// A problem with one field of a file.
    pub fn field(
        origin: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InputError {
            field: Some(field.into()),
            ..InputError::new(origin, message)
        }
    }

    /// A problem with the value of a configuration setting, by its field name (`round_s`).
    pub fn setting(setting: &'static str, message: impl Into<String>) -> Self {
        InputError {
            origin: Origin::Setting(Setting(setting)),
            field: None,
            message: message.into(),
        }
    }

    /// The same problem, narrowed to one field of what the origin holds (a trace's `gpus` column).
    pub fn in_field(self, field: impl Into<String>) -> Self {
        InputError {
            field: Some(field.into()),
            ..self
        }
    }
}

impl InputError {
    /// A TOML file that does not parse (or does not match its schema), with the line the parser points at.
    pub fn toml(origin: impl Into<String>, text: &str, e: &toml::de::Error) -> Self {
        let msg = e.message();
        match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                InputError::new(origin, format!("line {line}: {msg}"))
            }
            None => InputError::new(origin, msg),
        }
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{}: field `{}`: {}", self.origin, field, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

impl std::error::Error for InputError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_errors_name_the_line() {
        let text = "a = 1\nb = = 2\n";
        let e = toml::from_str::<toml::Table>(text).unwrap_err();
        let err = InputError::toml("f.toml", text, &e);
        assert_eq!(err.origin, "f.toml");
        assert!(err.message.starts_with("line 2: "), "{}", err.message);
    }

    #[test]
    fn settings_read_neutrally_and_front_ends_rename_them() {
        let err = InputError::setting(
            "round_s",
            format!(
                "{} is unset; {}",
                Setting("jobs"),
                Setting("profiles").to("DIR")
            ),
        );
        let text = err.to_string();
        assert_eq!(
            text,
            "setting `round_s`: setting `jobs` is unset; set `profiles` to DIR"
        );
        let flag = |s: &str| match s {
            "round_s" => Some("--round"),
            "profiles" => Some("--profiles"),
            _ => None,
        };
        let advise = |flag: &str| format!("pass {flag}");
        assert_eq!(
            name_settings(&text, flag, advise),
            "--round: setting `jobs` is unset; pass --profiles DIR"
        );
        // Text without marks, or with a mark left open, passes through.
        assert_eq!(name_settings("a `b` c", flag, advise), "a `b` c");
        assert_eq!(
            name_settings("setting `round_s", flag, advise),
            "setting `round_s"
        );
    }
}
