//! Names the commit this synergy was built from, for `--version` and for the records that say which
//! binary made them (docs/architecture.md §7). `SYNERGY_COMMIT` overrides it where there is no git
//! checkout (a build from a source archive); without either the version stands alone.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=SYNERGY_COMMIT");
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let commit = std::env::var("SYNERGY_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            // Built again when the checkout moves to another commit.
            let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
            watched.extend(git(&dir, &["symbolic-ref", "-q", "HEAD"]));
            for name in watched {
                // A path that does not exist would make cargo run this every build.
                let path = git(
                    &dir,
                    &["rev-parse", "--path-format=absolute", "--git-path", &name],
                );
                if let Some(path) = path.filter(|p| Path::new(p).exists()) {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
            git(&dir, &["rev-parse", "--short=12", "HEAD"])
        });
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets it");
    let build = match commit {
        Some(c) => format!("{version} (commit {c})"),
        None => version,
    };
    println!("cargo:rustc-env=SYNERGY_BUILD={build}");
}
