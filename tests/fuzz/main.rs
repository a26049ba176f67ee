//! The fuzzed front door (docs/architecture.md §7): every parser of user input is fed
//! [`INPUTS`] random and mutated inputs derived from the shipped files (profiles, workload specs, the
//! example job list, the documented trace and cluster forms), and each input must either parse into
//! something every consumer can use, or be refused with an [`InputError`] that names the field, or the
//! line (and column) for a syntax error. No input may panic: each runs under `catch_unwind`, so one run
//! reports every panic it finds, not only the first.
//!
//! Mutations are byte-level (flip, insert, delete, duplicate, splice from another seed, truncate) and
//! structure-aware (a JSON value, a TOML value or a CSV field replaced with an extreme one: 1e308, -1, 0,
//! 2^64, NaN, an empty string, a value of the wrong type; rows and table entries dropped or repeated).
//! The driver is seeded, input `i` of a parser drawing from its own ChaCha stream, so a failure is
//! reproducible from the seed and index it prints. `SYNERGY_FUZZ_INPUTS` runs more (or fewer) inputs per
//! parser and `SYNERGY_FUZZ_SEED` another seed, for a deeper search by hand; the suite runs the defaults.
//! Inputs that once failed are kept in [`REGRESSIONS`] and run first.

use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;
use synergy::error::InputError;

mod files;
mod histories;
mod regressions;
mod strings;

use regressions::{PROFILE_REGRESSIONS, REGRESSIONS};

/// Inputs per parser in the suite.
const INPUTS: u64 = 100_000;

/// Which inputs, and from which seed, this run draws per parser: `SYNERGY_FUZZ_FROM=i` with
/// `SYNERGY_FUZZ_INPUTS=1` remakes input `i` alone.
fn budget(default_seed: u64) -> (std::ops::Range<u64>, u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let from = env("SYNERGY_FUZZ_FROM").unwrap_or(0);
    (
        from..from + env("SYNERGY_FUZZ_INPUTS").unwrap_or(INPUTS),
        env("SYNERGY_FUZZ_SEED").unwrap_or(default_seed),
    )
}

/// Runs `parser`'s regressions (its entries in [`REGRESSIONS`], then `derived`), then `count` inputs made by `make`, each through `check` under
/// `catch_unwind`; fails listing the first failures with the seed and index that remake them, and prints
/// how many inputs ran in how long.
fn drive(
    parser: &str,
    default_seed: u64,
    derived: &[(String, String)],
    make: impl Fn(&mut ChaCha8Rng) -> String,
    check: impl Fn(&str) -> Result<(), String>,
) {
    let (inputs, seed) = budget(default_seed);
    let count = inputs.end - inputs.start;
    let started = Instant::now();
    let cpu_started = synergy::clock::thread_cpu_s();
    let mut failures = Vec::new();
    let run = |failures: &mut Vec<String>, label: String, input: &str| {
        let outcome = catch_unwind(AssertUnwindSafe(|| check(input)));
        let why = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(why)) => why,
            Err(panic) => format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)")
            ),
        };
        failures.push(format!("{label}: {why}\n  input: {}", shown(input)));
    };
    let mut regressions = 0;
    let literal = REGRESSIONS
        .iter()
        .filter(|(p, _, _)| *p == parser)
        .map(|(_, what, input)| (what.to_string(), input.to_string()));
    for (what, input) in literal.chain(derived.iter().cloned()) {
        run(&mut failures, format!("regression ({what})"), &input);
        regressions += 1;
    }
    for i in inputs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let input = make(&mut rng);
        run(
            &mut failures,
            format!("SYNERGY_FUZZ_SEED={seed}, input {i}"),
            input.as_str(),
        );
        if failures.len() >= 20 {
            break;
        }
    }
    let took = started.elapsed().as_secs_f64();
    let cpu = synergy::clock::thread_cpu_s() - cpu_started;
    println!(
        "fuzz {parser}: {count} inputs and {regressions} regressions in {took:.2} s ({cpu:.2} s of CPU), {} failures",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "fuzz {parser}: {} failures (first shown):\n{}",
        failures.len(),
        failures[..failures.len().min(5)].join("\n")
    );
}

/// An input as a failure shows it: escaped, and cut at 3000 characters (`SYNERGY_FUZZ_SHOW` to change).
fn shown(input: &str) -> String {
    let s = format!("{input:?}");
    let most = std::env::var("SYNERGY_FUZZ_SHOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    if s.len() > most {
        let cut = (0..=most)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        format!("{}... ({} characters in all)", &s[..cut], input.len())
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------------
// Mutations.

/// Text that parsers meet at their edges, spliced in by byte-level mutations.
const TOKENS: &[&str] = &[
    "0",
    "-1",
    "-0",
    "1e308",
    "-1e308",
    "1e309",
    "5e-324",
    "18446744073709551616",
    "18446744073709551615",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "\"\"",
    "''",
    "null",
    "true",
    "[]",
    "{}",
    "[[]]",
    "\u{feff}",
    "é",
    "\r\n",
    "\n",
    "\"",
    "\\",
    ",",
    "=",
    "#",
    "{",
    "}",
    "../../evil",
    "GiB",
    "MB/s",
    ".",
];

/// Replaces, inserts or removes bytes of `input` one to four times; `donors` are the other seeds, for
/// splices. The result is made text again (invalid UTF-8 becomes U+FFFD), since every parser takes text.
fn mutate_bytes(rng: &mut ChaCha8Rng, input: &str, donors: &[String]) -> String {
    let mut b = input.as_bytes().to_vec();
    let ops = 1 + rng.random_range(0..4);
    for _ in 0..ops {
        let at = |rng: &mut ChaCha8Rng, b: &[u8]| rng.random_range(0..=b.len());
        match rng.random_range(0..10) {
            0 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                b[i] ^= 1 << rng.random_range(0..8);
            }
            1 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                b[i] = *b" \"',.-+e0123456789[]{}=:\n\x00\xff".choose(rng).unwrap();
            }
            2 | 3 => {
                let i = at(rng, &b);
                let t = TOKENS.choose(rng).unwrap();
                b.splice(i..i, t.bytes());
            }
            4 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                let n = rng.random_range(1..=16).min(b.len() - i);
                b.drain(i..i + n);
            }
            5 if !b.is_empty() => {
                let i = rng.random_range(0..b.len());
                let n = rng.random_range(1..=64).min(b.len() - i);
                let piece = b[i..i + n].to_vec();
                let j = at(rng, &b);
                b.splice(j..j, piece);
            }
            6 => {
                let donor = donors.choose(rng).map(|d| d.as_bytes()).unwrap_or(b"");
                if !donor.is_empty() {
                    let i = rng.random_range(0..donor.len());
                    let n = rng.random_range(1..=64).min(donor.len() - i);
                    let j = at(rng, &b);
                    let k = (j + rng.random_range(0..=64)).min(b.len());
                    b.splice(j..k, donor[i..i + n].iter().copied());
                }
            }
            7 => {
                let i = at(rng, &b);
                b.truncate(i);
            }
            8 => {
                // A number replaced whole: find a digit, widen to the number around it.
                let digits: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_ascii_digit()).collect();
                if let Some(&i) = digits.choose(rng) {
                    let num = |c: u8| c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'e' | b'E');
                    let start = (0..=i).rev().take_while(|&k| num(b[k])).last().unwrap_or(i);
                    let end = (i..b.len()).take_while(|&k| num(b[k])).last().unwrap_or(i) + 1;
                    let t = TOKENS[..16].choose(rng).unwrap();
                    b.splice(start..end, t.bytes());
                }
            }
            _ => {
                let i = at(rng, &b);
                let c = rng.random_range(0x20..0x7f) as u8;
                b.insert(i, c);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// JSON values at the edges of every field's range and type.
fn extreme_json(rng: &mut ChaCha8Rng, near: &Value, strings: &[String]) -> Value {
    use serde_json::json;
    match rng.random_range(0..24) {
        0 => json!(0),
        1 => json!(-1),
        2 => json!(1e308),
        3 => json!(-1e308),
        4 => json!(5e-324),
        5 => json!(u64::MAX),
        6 => json!(i64::MIN),
        7 => json!(1e30),
        8 => json!(u32::MAX as u64 + 1),
        9 => json!(""),
        10 => json!("NaN"),
        11 => json!("inf"),
        12 => Value::Null,
        13 => json!(true),
        14 => json!([]),
        15 => json!({}),
        16 => json!([[1.0]]),
        17 => json!(0.0),
        18 => json!(-0.5),
        19 => json!("x".repeat(rng.random_range(1..300))),
        // A string the seeds hold elsewhere: an enum's other value, a name from another field.
        20 | 21 => strings.choose(rng).map(|s| json!(s)).unwrap_or(Value::Null),
        // The same number scaled, negated or nudged: in type, out of range.
        _ => match near.as_f64() {
            Some(x) => {
                let f = [-1.0, 0.0, 1e-9, 1e9, 1.0000001, 0.5][rng.random_range(0..6)];
                serde_json::Number::from_f64(x * f).map_or(Value::Null, Value::Number)
            }
            None => json!(1),
        },
    }
}

/// A node of `v` by its JSON pointer, found by a walk from the root into random children that stops at
/// each level with chance 1/5 (and at a leaf): whole tables get picked as well as single numbers.
fn random_pointer(rng: &mut ChaCha8Rng, v: &Value) -> String {
    let mut at = String::new();
    let mut node = v;
    loop {
        let n = match node {
            Value::Object(m) => m.len(),
            Value::Array(a) => a.len(),
            _ => 0,
        };
        if n == 0 || !at.is_empty() && rng.random_bool(0.2) {
            return at;
        }
        let i = rng.random_range(0..n);
        at.push('/');
        node = match node {
            Value::Object(m) => {
                let (k, c) = m.iter().nth(i).unwrap();
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                c
            }
            Value::Array(a) => {
                at.push_str(&i.to_string());
                &a[i]
            }
            _ => unreachable!("leaves return above"),
        };
    }
}

/// Every string in `v`, for mutations that put one field's value in another.
fn json_strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.len() < 80 => out.push(s.clone()),
        Value::Object(m) => m.values().for_each(|c| json_strings(c, out)),
        Value::Array(a) => a.iter().for_each(|c| json_strings(c, out)),
        _ => {}
    }
}

/// Changes one to three nodes of `v`: a value replaced with an extreme one, a key or element removed,
/// an element repeated, an array cut short (a table smaller than its axes), an unknown key added.
fn mutate_json(rng: &mut ChaCha8Rng, v: &mut Value, strings: &[String]) {
    for _ in 0..1 + rng.random_range(0..3) {
        let p = random_pointer(rng, v);
        let (parent, last) = match p.rfind('/') {
            Some(i) => (p[..i].to_string(), p[i + 1..].to_string()),
            None => (String::new(), String::new()),
        };
        match rng.random_range(0..8) {
            0 => match v.pointer_mut(&parent) {
                Some(Value::Object(m)) => {
                    m.remove(&last.replace("~1", "/").replace("~0", "~"));
                }
                Some(Value::Array(a)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        if i < a.len() {
                            a.remove(i);
                        }
                    }
                }
                _ => {}
            },
            1 => match v.pointer_mut(&p) {
                Some(Value::Array(a)) if !a.is_empty() => {
                    let keep = rng.random_range(0..a.len());
                    a.truncate(keep);
                }
                Some(Value::Object(m)) => {
                    m.insert("colour".into(), Value::from("blue"));
                }
                _ => {}
            },
            2 => {
                if let Some(Value::Array(a)) = v.pointer_mut(&p) {
                    if let Some(x) = a.choose(rng).cloned() {
                        a.push(x);
                    }
                }
            }
            _ => {
                if let Some(node) = v.pointer_mut(&p) {
                    *node = extreme_json(rng, node, strings);
                }
            }
        }
    }
}

/// TOML values at the edges of every field's range and type (TOML, unlike JSON, writes nan and inf).
const TOML_VALUES: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-1e308",
    "5e-324",
    "nan",
    "inf",
    "-inf",
    "-0.0",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "4294967295",
    "1.5",
    "\"\"",
    "\" \"",
    "\"x\"",
    "'nan'",
    "\"-1MiB\"",
    "\"1e400GiB\"",
    "\"18446744073709551616\"",
    "\"0\"",
    "true",
    "[]",
    "['']",
    "{}",
    "1979-05-27",
    "\"../../evil\"",
    "\"{nope}\"",
    "\"(?P<rate>\"",
];

/// Changes one to three `key = value` pairs or lines of TOML text: a value replaced with an extreme one
/// (or a value from elsewhere in the seeds), a line dropped, repeated or swapped, a `[[table]]` repeated,
/// an unknown key added. Text-level, so it reaches inline tables and arrays too.
fn mutate_toml(rng: &mut ChaCha8Rng, text: &str, values: &[String]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for _ in 0..1 + rng.random_range(0..3) {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let i = rng.random_range(0..lines.len());
        match rng.random_range(0..10) {
            0 => {
                lines.remove(i);
            }
            1 => {
                let l = lines[i].clone();
                lines.insert(rng.random_range(0..=lines.len()), l);
            }
            2 => {
                let j = rng.random_range(0..lines.len());
                lines.swap(i, j);
            }
            3 => {
                // A [[table]] and what follows it up to the next table, repeated at the end.
                let starts: Vec<usize> = (0..lines.len())
                    .filter(|&k| lines[k].trim_start().starts_with('['))
                    .collect();
                if let Some(&s) = starts.choose(rng) {
                    let e = starts
                        .iter()
                        .copied()
                        .find(|&k| k > s)
                        .unwrap_or(lines.len());
                    let block = lines[s..e].to_vec();
                    lines.extend(block);
                }
            }
            4 => lines.insert(i, "colour = \"blue\"".into()),
            _ => {
                // Replace the value after one `=` on a line, up to `,`, `}` or the line's end (a
                // bracketed value whole).
                let l = &lines[i];
                let eqs: Vec<usize> = l.match_indices('=').map(|(k, _)| k).collect();
                let Some(&eq) = eqs.choose(rng) else { continue };
                let start = eq + 1;
                let rest = &l[start..];
                let trimmed = rest.len() - rest.trim_start().len();
                let body = &rest[trimmed..];
                let len = if body.starts_with('[') {
                    let mut depth = 0i32;
                    body.char_indices()
                        .find(|&(_, c)| {
                            depth += match c {
                                '[' => 1,
                                ']' => -1,
                                _ => 0,
                            };
                            depth == 0
                        })
                        .map_or(body.len(), |(k, _)| k + 1)
                } else {
                    body.find([',', '}']).unwrap_or(body.len())
                };
                let v = if rng.random_bool(0.75) {
                    TOML_VALUES.choose(rng).unwrap().to_string()
                } else {
                    values.choose(rng).cloned().unwrap_or_default()
                };
                let end = start + trimmed + len;
                lines[i] = format!("{} {v}{}", &l[..start], &l[end..]);
            }
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// The values written after `=` in TOML seeds (quoted strings, numbers, arrays), as text.
fn toml_values(seeds: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for s in seeds {
        for l in s.lines() {
            if let Some((_, v)) = l.split_once('=') {
                let v = v.trim();
                if !v.is_empty() && v.len() < 120 && !v.starts_with('{') {
                    out.push(v.to_string());
                }
            }
        }
    }
    out
}

/// CSV fields at the edges of every column's range and type.
const CSV_FIELDS: &[&str] = &[
    "0",
    "-1",
    "1e308",
    "-1e308",
    "1e309",
    "NaN",
    "inf",
    "-0",
    "18446744073709551616",
    "18446744073709551615",
    "4294967296",
    "4294967295",
    "\"\"",
    "",
    " ",
    "\"a,b\"",
    "\"x\"\"y\"",
    "\"line\nbreak\"",
    "\"unclosed",
    "x\"y",
    "é",
    "\u{feff}",
    " 7 ",
    "1.5",
    ".5",
];

/// Changes a CSV text one to three times: a field replaced (an extreme value, a model name, an id from
/// another row), a row dropped or repeated, a column dropped or two swapped, CRLF line ends, a
/// byte-order mark, blank lines.
fn mutate_csv(rng: &mut ChaCha8Rng, text: &str, names: &[String]) -> String {
    let mut rows: Vec<Vec<String>> = text
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let (mut crlf, mut bom) = (false, false);
    for _ in 0..1 + rng.random_range(0..3) {
        if rows.is_empty() {
            rows.push(vec![String::new()]);
        }
        let r = rng.random_range(0..rows.len());
        match rng.random_range(0..12) {
            0 => {
                rows.remove(r);
            }
            1 => {
                let row = rows[r].clone();
                rows.insert(rng.random_range(0..=rows.len()), row);
            }
            2 => {
                let c = rng.random_range(0..rows[r].len().max(1));
                for row in &mut rows {
                    if c < row.len() {
                        row.remove(c);
                    }
                }
            }
            3 if !rows[0].is_empty() => {
                let n = rows[0].len();
                let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
                rows[0].swap(a, b);
            }
            4 => crlf = true,
            5 => bom = true,
            6 => rows.insert(r, vec![String::new()]),
            7 => rows[r].push(CSV_FIELDS.choose(rng).unwrap().to_string()),
            _ if !rows[r].is_empty() => {
                let c = rng.random_range(0..rows[r].len());
                rows[r][c] = match rng.random_range(0..4) {
                    0 => names.choose(rng).cloned().unwrap_or_default(),
                    1 => {
                        let other = rng.random_range(0..rows.len());
                        rows[other].get(c).cloned().unwrap_or_default()
                    }
                    _ => CSV_FIELDS.choose(rng).unwrap().to_string(),
                };
            }
            _ => {}
        }
    }
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut out = if bom {
        "\u{feff}".to_string()
    } else {
        String::new()
    };
    for row in rows {
        out.push_str(&row.join(","));
        out.push_str(eol);
    }
    out
}

// ---------------------------------------------------------------------------------------------------
// What every rejection must say.

/// The line numbers `text` names (`line 3`), which must exist in `input`.
fn named_lines(text: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("line ") {
        rest = &rest[i + 5..];
        let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = n.parse() {
            out.push(n);
        }
    }
    out
}

/// An error that names its file (one of `origins`, or a path under one), and the field (`field` set, or a message naming it as serde does, `` field `x` ``) or
/// the line; `whole_file` are the messages allowed to name neither, because the file as a whole is at
/// fault (empty, no jobs). A line it names must be one of `input`'s.
fn names_the_place(
    e: &InputError,
    input: &str,
    origins: &[&str],
    whole_file: &[&str],
) -> Result<(), String> {
    let text = e.to_string();
    if !origins.iter().any(|o| e.origin.to_string().starts_with(o)) {
        return Err(format!("names none of the files {origins:?}: {text}"));
    }
    if text.contains("untagged enum") || text.contains("Raw") {
        return Err(format!("serde's internals leak into the message: {text}"));
    }
    let lines = input.lines().count().max(1) + 1;
    if let Some(n) = named_lines(&text)
        .into_iter()
        .find(|&n| n == 0 || n > lines)
    {
        return Err(format!("names line {n}, but the input has {lines}: {text}"));
    }
    if e.field.as_deref().is_some_and(|f| f.is_empty() || f == ".") {
        return Err(format!("names an empty field: {text}"));
    }
    let field = e.field.is_some();
    let named = field
        || e.message.contains("field `")
        || !named_lines(&text).is_empty()
        || whole_file.iter().any(|w| e.message.contains(w));
    if named {
        Ok(())
    } else {
        Err(format!("names neither a field nor a line: {text}"))
    }
}

/// Where two JSON values first differ, as a pointer and both values.
fn first_difference(a: &Value, b: &Value) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    Some(w) if w == v => {}
                    Some(w) => return format!("/{k}{}", first_difference(v, w)),
                    None => return format!("/{k} (only before)"),
                }
            }
            " (keys only after)".into()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            let i = (0..x.len()).find(|&i| x[i] != y[i]).unwrap_or(0);
            format!("/{i}{}", first_difference(&x[i], &y[i]))
        }
        _ => format!(": {a} then {b}"),
    }
}

/// A failure of the property, as text.
fn fail(what: impl std::fmt::Display) -> Result<(), String> {
    Err(what.to_string())
}

// ---------------------------------------------------------------------------------------------------
// Seeds.

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file in `dir` ending in `ext`, sorted.
fn shipped(dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    v
}

/// The text of every shipped file [`shipped`] lists.
fn shipped_texts(dir: &str, ext: &str) -> Vec<String> {
    shipped(dir, ext).iter().map(|p| read(p)).collect()
}

/// A measured profile made small: its first two trials and every eighth hit-ratio row, so that 100,000
/// inputs parse in seconds (the full files run too, as one seed in fifty).
fn trimmed_profile(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(Value::Array(t)) = v.get_mut("trials") {
        t.truncate(2);
    }
    if let Some(Value::Array(rows)) = v.pointer_mut("/model/hit_ratios") {
        *rows = rows.iter().step_by(8).cloned().collect();
    }
    v
}
