//! The layer table of docs/architecture.md §2 against the code: every crate of the workspace is a row,
//! holds the modules its row names (the `pub mod`s of its `lib.rs`) and depends on exactly the crates of
//! the workspace its row names (its `Cargo.toml`). The compiler keeps the layers; this keeps the document
//! that describes them true.

use super::common::shared;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One row: the modules a crate holds and the workspace crates it depends on.
#[derive(Debug, PartialEq)]
struct Layer {
    holds: Vec<String>,
    depends_on: Vec<String>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The names in backquotes in a table cell, sorted.
fn names(cell: &str) -> Vec<String> {
    let mut v: Vec<String> = cell
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn documented() -> BTreeMap<String, Layer> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap();
    let start = doc
        .find("| crate | holds | depends on |")
        .expect("docs/architecture.md has the layer table");
    doc[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                names(cells[1]).pop().expect("a crate name"),
                Layer {
                    holds: names(cells[2]),
                    depends_on: names(cells[3]),
                },
            )
        })
        .collect()
}

/// A crate's layer as its `Cargo.toml` and `lib.rs` have it.
fn built(dir: &Path) -> (String, Layer) {
    let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let name = manifest["package"]["name"].as_str().unwrap().to_string();
    let mut depends_on: Vec<String> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.get("path").is_some())
        .map(|(k, _)| k.clone())
        .collect();
    depends_on.sort();
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let mut holds: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect();
    holds.sort();
    (name, Layer { holds, depends_on })
}

#[test]
fn the_layer_table_is_the_workspace() {
    let _host = shared();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").exists())
        .collect();
    dirs.push(root().to_path_buf());
    let code: BTreeMap<String, Layer> = dirs.iter().map(|d| built(d)).collect();
    let doc = documented();
    assert_eq!(
        doc.keys().collect::<Vec<_>>(),
        code.keys().collect::<Vec<_>>(),
        "the crates of docs/architecture.md §2 and of the workspace differ"
    );
    for (name, layer) in &code {
        assert_eq!(
            &doc[name], layer,
            "{name}: docs/architecture.md §2 says otherwise"
        );
    }
}
