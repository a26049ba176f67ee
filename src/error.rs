//! The error a user fixes by changing their input: it names the file or flag and the field at fault.

use std::fmt;

/// Bad input: a malformed or impossible spec, flag, dataset or budget. The CLI exits with code 2 for these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The file path or command-line flag the problem is in (`workloads/image.toml`, `--cpus`).
    pub origin: String,
    /// The field inside the file, when there is one (`dataset.path`).
    pub field: Option<String>,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl InputError {
    /// A problem with a whole file or flag.
    pub fn new(origin: impl Into<String>, message: impl Into<String>) -> Self {
        InputError {
            origin: origin.into(),
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
            origin: origin.into(),
            field: Some(field.into()),
            message: message.into(),
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
}
