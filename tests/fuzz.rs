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

/// Inputs per parser in the suite.
const INPUTS: u64 = 100_000;

/// Inputs that once panicked or were refused without naming the field, per parser: they run before the
/// random ones, so a fix that regresses fails at once and by name.
const REGRESSIONS: &[(&str, &str, &str)] = &[
    // (parser, what it once did, input)
    (
        "machines",
        "a GPU machine with no memory was accepted, and made a cluster of machines of none",
        "2\nn1 4 0 gpu:2\n",
    ),
    (
        "run-state",
        "an allocation of the wrong shape said `data did not match any variant of untagged enum`",
        r#"{"schema": "synergy-run-state/1", "job_list": "j", "backend": "local", "policy": "fifo", "mechanism": "tune", "round_s": 1.0, "started_unix_s": 1.0, "executor_pid": 1, "jobs": [{"name": "a", "status": "running", "samples_done": 0, "retries": 0, "restarts": 0, "rounds_run": 0, "attained_s": 0.0, "allocation": 5}]}"#,
    ),
    (
        "size",
        "2^64 bytes was accepted as u64::MAX (saturated) instead of refused",
        "18446744073709551616",
    ),
    (
        "rate",
        "a rate with no number named the empty string, not the flag's value",
        "/s",
    ),
    (
        "server-shape",
        "0.5gpu was refused as if the GPUs were missing; 1.5gpu was taken as 1",
        "0.5gpu,24cpu,500gb",
    ),
    ("server-shape", "1.5gpu was taken as 1 GPU", "1.5gpu,24cpu,500gb"),
    (
        "server-shape",
        "more GPUs than a u32 holds were taken as 4294967295",
        "99999999999gpu,24cpu,500gb",
    ),
    (
        "spec",
        "a negative size said `data did not match any variant of untagged enum Raw`",
        "name = 'x'\ncommand = ['true']\nbatch_size = 1\nfootprint = -1\n",
    ),
    (
        "spec",
        "a size of the wrong type said `data did not match any variant of untagged enum Raw`",
        "name = 'x'\ncommand = ['true']\nbatch_size = 1\n[dataset]\npath = 'd'\ngenerate = { kind = 'image', size = 1.5 }\n",
    ),
    (
        "cluster",
        "4 billion servers were built one by one (minutes, then out of memory)",
        "[[servers]]\ncount = 4000000000\ngpus = 8\ncpus = 24\nmemory_gb = 500\n",
    ),
    (
        "cluster",
        "cores that overflow to infinity in total were accepted",
        "[[servers]]\ncount = 2\ngpus = 8\ncpus = 1e308\nmemory_gb = 500\n",
    ),
    (
        "profile",
        "a field missing at the top level was named as field `.`",
        "{\"schema\": \"synergy-profile/1.2\"}",
    ),
    (
        "profile",
        "an unknown empty key at the top level was named as field ``",
        "{\"\": 1, \"schema\": \"synergy-profile/1.2\"}",
    ),
    (
        "jobs",
        "a workload that is a directory said `Is a directory (os error 21)`, naming no job or field",
        "profiles = \"../profiles\"\n[[job]]\nname = \"a\"\nworkload = \"../profiles\"\nsamples = 5\n",
    ),
    (
        "spec",
        "a footprint of inf said `data did not match any variant of untagged enum Raw`",
        "name = 'x'\ncommand = ['true']\nbatch_size = 1\nfootprint = inf\n",
    ),
    (
        "jobs",
        "steps times the batch size overflowed u64 (a panic in a debug build, wrapped work in release)",
        "profiles = \"../profiles\"\n[[job]]\nname = \"a\"\nworkload = \"../workloads/image.toml\"\nsteps = 1000000000000000000\n",
    ),
];

/// Profile regressions, as edits of the shipped `profiles/image.json` (a JSON pointer and the value put
/// there): what each once did.
const PROFILE_REGRESSIONS: &[(&str, &str, &str)] = &[
    (
        "a CPU curve point of -0.5 samples/s was accepted, and predicted negative throughput",
        "/model/cpu/points/0/samples_per_s",
        "-0.5",
    ),
    (
        "a proportional rate of 5e-324 samples/s was accepted, and every normalized prediction was infinite",
        "/matrix/proportional/samples_per_s",
        "5e-324",
    ),
    (
        "465.66118446744076 read back as another number after writing (serde_json's default float parser)",
        "/server/memory_gib",
        "465.66118446744076",
    ),
];

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

// ---------------------------------------------------------------------------------------------------
// The parsers.

/// Profile files (`Profile::parse`, which validates): seeds are every shipped profile. An accepted
/// profile must serve every reader: its CSV, predictions at and beyond its grid, the scheduler's model
/// of it, and a write-read round trip.
#[test]
fn profile_files() {
    use synergy::format::profile::{Profile, ProfileError};
    use synergy::predict::predict;
    let mut full = Vec::new();
    let mut small = Vec::new();
    for dir in ["profiles", "profiles/h200", "profiles/zoo"] {
        for p in shipped(dir, "json") {
            let v: Value = serde_json::from_str(&read(&p)).unwrap();
            if dir != "profiles/zoo" {
                small.push(trimmed_profile(&v));
                full.push(v);
            } else {
                small.push(v);
            }
        }
    }
    let mut strings = Vec::new();
    for v in &full {
        json_strings(v, &mut strings);
    }
    let image: Value = serde_json::from_str(&read(&repo().join("profiles/image.json"))).unwrap();
    let derived: Vec<(String, String)> = PROFILE_REGRESSIONS
        .iter()
        .map(|(what, pointer, value)| {
            let mut v = image.clone();
            *v.pointer_mut(pointer).expect(pointer) = serde_json::from_str(value).unwrap();
            (what.to_string(), v.to_string())
        })
        .collect();
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap();
    let (full_texts, texts): (Vec<String>, Vec<String>) = (
        full.iter().map(pretty).collect(),
        small.iter().map(pretty).collect(),
    );
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..small.len());
        let whole = rng.random_bool(0.02) && k < full.len();
        if rng.random_bool(0.7) {
            let mut v = if whole { &full[k] } else { &small[k] }.clone();
            mutate_json(rng, &mut v, &strings);
            if rng.random_bool(0.5) {
                pretty(&v)
            } else {
                v.to_string()
            }
        } else {
            let text = if whole { &full_texts[k] } else { &texts[k] };
            mutate_bytes(rng, text, &texts)
        }
    };
    let check = |text: &str| {
        let p = match Profile::parse(text, "p.json") {
            Err(ProfileError::Invalid(e)) => {
                return names_the_place(&e, text, &["p.json"], &[]);
            }
            Err(other) => return fail(format!("not an input error: {other}")),
            Ok(p) => p,
        };
        let _ = p.to_csv();
        let m = &p.matrix;
        // The grid's corners and middle, and far beyond it on either side.
        let probe = |axis: &[f64]| {
            [
                0.0,
                axis[0],
                axis[axis.len() / 2],
                axis[axis.len() - 1],
                1e9,
            ]
        };
        for c in probe(&m.cpus) {
            for g in probe(&m.memory_gib) {
                let r = predict(&p, c, g);
                if !(r.normalized.is_finite() && r.normalized >= 0.0) {
                    return fail(format!(
                        "accepted, but predicts {r:?} at {c} cores, {g} GiB"
                    ));
                }
            }
        }
        if let Ok(model) = synergy::sched::catalog::JobModel::from_profile(&p, Path::new("p.json"))
        {
            let s = model.speed(model.best_cpus_per_gpu, model.best_memory_gib_per_gpu);
            if !(s.is_finite() && s >= 0.0) {
                return fail(format!("accepted, but the scheduler's speed is {s}"));
            }
        }
        let again = serde_json::to_string(&p).unwrap();
        match Profile::parse(&again, "p.json") {
            Ok(q) if q == p => Ok(()),
            Ok(q) => fail(format!(
                "accepted, but reads back different after writing, at {}",
                first_difference(
                    &serde_json::to_value(&p).unwrap(),
                    &serde_json::to_value(&q).unwrap()
                )
            )),
            Err(e) => fail(format!("accepted, but refused after writing: {e}")),
        }
    };
    drive("profile", 0x5e_1e_c7, &derived, make, check);
}

/// Trace CSV (`parse_csv`: `read_csv`, then `parse_records`): seeds are the documented examples, a generated trace over
/// the shipped zoo, as a spreadsheet saves it (BOM, CRLF, quotes), and the shipped profiles' CSVs
/// (other headers, for the CSV reader). Every record `read_csv` returns starts on a line of the input, in
/// order (two on one line where a lone CR parts them); an accepted trace holds jobs in arrival order that fit the cluster.
#[test]
fn trace_csv() {
    use synergy::format::trace::parse_records;
    use synergy::format::trace::read_csv;
    use synergy::sched::catalog::Catalog;
    use synergy::sim::trace::{GenConfig, Generator, GpuMode, JobListSeed};
    let catalog = Catalog::load_dir(&repo().join("profiles/zoo")).unwrap();
    let generated = Generator::new(
        GenConfig {
            seed: 42,
            job_list_seed: JobListSeed::Fixed(42),
            load_jobs_per_h: 9.0,
            split: [20.0, 70.0, 10.0],
            gpu_mode: GpuMode::Multi,
            jobs: Some(12),
        },
        &catalog,
    )
    .unwrap();
    let mut trace = String::from("id,model,arrival_s,iters,gpus\n");
    for j in generated {
        let name = &catalog.get(j.model as usize).name;
        trace += &format!("{},{name},{},{},{}\n", j.id, j.arrival_s, j.iters, j.gpus);
    }
    let mut seeds = vec![
        "id,model,arrival_s,iters,gpus\n0,alexnet,.123,3349,4\n1,gnmt,.286,26435,1\n2,transformer,.317,13451,2\n"
            .to_string(),
        "gpus,iters,arrival_s,model,id\n1,10,0,gnmt,0\n2,20,5,lstm,1\n".to_string(),
        format!("\u{feff}{}", trace.replace('\n', "\r\n").replace(",res", ",\"res")),
        trace,
    ];
    for p in shipped("profiles", "csv") {
        seeds.push(read(&p));
    }
    let names: Vec<String> = catalog.models.iter().map(|m| m.name.clone()).collect();
    let make = |rng: &mut ChaCha8Rng| {
        let seed = seeds.choose(rng).unwrap();
        if rng.random_bool(0.6) {
            mutate_csv(rng, seed, &names)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let whole_file = ["the trace is empty", "has a header but no jobs"];
    let check = |text: &str| {
        let lines = text.split('\n').count() as u64;
        let records = match read_csv(text, "t.csv") {
            Ok(records) => {
                let at: Vec<u64> = records.iter().map(|r| r.line).collect();
                // Non-decreasing: a lone CR ends a record (as the csv crate reads it) but not a line.
                if at.iter().any(|&l| l == 0 || l > lines) || at.windows(2).any(|w| w[0] > w[1]) {
                    return fail(format!("records start on lines {at:?} of {lines}"));
                }
                records
            }
            Err(e) => return names_the_place(&e, text, &["t.csv"], &[]),
        };
        match parse_records(records, "t.csv", &catalog, 8) {
            Ok(jobs) => {
                let ordered = jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s);
                let sane = jobs
                    .iter()
                    .all(|j| j.gpus >= 1 && j.gpus <= 8 && j.iters >= 1 && j.arrival_s.is_finite());
                if ordered && sane && !jobs.is_empty() {
                    Ok(())
                } else {
                    fail(format!("accepted jobs out of order or range: {jobs:?}"))
                }
            }
            Err(e) => names_the_place(&e, text, &["t.csv"], &whole_file),
        }
    };
    drive("trace", 0x7_ace, &[], make, check);
}

/// Cluster files (`ClusterConfig::parse`): seeds are the documented forms. An accepted cluster has
/// servers, and totals a simulation can divide by.
#[test]
fn cluster_toml() {
    use synergy::sched::cluster::ClusterConfig;
    let seeds: Vec<String> = vec![
        "[[servers]]\ncount = 16\ngpus = 8\ncpus = 24\nmemory_gb = 500   # or memory_gib = 465.66\n".into(),
        "[[servers]]\ncount = 2\ngpus = 8\ncpus = 24\nmemory_gb = 500\n\n[[servers]]\ngpus = 4\ncpus = 16.5\nmemory_gib = 250\n".into(),
        "servers = [{ gpus = 1, cpus = 2, memory_gib = 8 }]\n".into(),
    ];
    let values = toml_values(&seeds);
    let make = |rng: &mut ChaCha8Rng| {
        let seed = seeds.choose(rng).unwrap();
        if rng.random_bool(0.6) {
            mutate_toml(rng, seed, &values)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let check = |text: &str| match ClusterConfig::parse(text, "c.toml") {
        Ok(c) => {
            let totals = [c.total_cpus(), c.total_memory_gib()];
            if c.servers.is_empty() || c.total_gpus() == 0 || totals.iter().any(|t| !t.is_finite())
            {
                return fail(format!(
                    "accepted {} servers with totals {totals:?}",
                    c.servers.len()
                ));
            }
            Ok(())
        }
        Err(e) => names_the_place(&e, text, &["c.toml"], &[]),
    };
    drive("cluster", 0xc1_05_7e, &[], make, check);
}

/// Workload specs (`WorkloadSpec::parse`): seeds are every shipped spec. An accepted spec expands its
/// dataset path.
#[test]
fn workload_specs() {
    use synergy::workload::WorkloadSpec;
    let seeds = shipped_texts("workloads", "toml");
    let values = toml_values(&seeds);
    let base = repo().join("workloads");
    let make = |rng: &mut ChaCha8Rng| {
        let seed = seeds.choose(rng).unwrap();
        if rng.random_bool(0.6) {
            mutate_toml(rng, seed, &values)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let check = |text: &str| match WorkloadSpec::parse(text, "w.toml", &base) {
        Ok(spec) => match spec.dataset_dir() {
            Ok(_) => Ok(()),
            Err(e) => fail(format!(
                "accepted, but its dataset path does not expand: {e}"
            )),
        },
        Err(e) => names_the_place(&e, text, &["w.toml"], &[]),
    };
    drive("spec", 0x5bec, &[], make, check);
}

/// Job lists (`JobList::parse`): the seed is the shipped example (and shorter forms of it), resolved in
/// a directory that holds its specs and small copies of its profiles. An accepted list's work fits its
/// counters and it makes a trace.
#[test]
fn job_lists() {
    use synergy::exec::jobs::JobList;
    use synergy::exec::ExecError;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for sub in ["examples", "workloads", "profiles"] {
        std::fs::create_dir(root.join(sub)).unwrap();
    }
    for name in ["image", "text"] {
        let spec = format!("workloads/{name}.toml");
        std::fs::copy(repo().join(&spec), root.join(&spec)).unwrap();
        let v: Value =
            serde_json::from_str(&read(&repo().join(format!("profiles/{name}.json")))).unwrap();
        // Only read here, never mutated: without its trials and validation, so that each list that
        // gets this far reads it quickly.
        let mut small = trimmed_profile(&v);
        for key in ["trials", "validation", "validation_summary", "host"] {
            small.as_object_mut().unwrap().remove(key);
        }
        let small = small.to_string();
        std::fs::write(root.join(format!("profiles/{name}.json")), small).unwrap();
    }
    let example = read(&repo().join("examples/jobs-mixed.toml"));
    let short: String = example
        .split("[[job]]")
        .take(3)
        .collect::<Vec<_>>()
        .join("[[job]]");
    let seeds = vec![
        example.clone(),
        short.clone(),
        short
            .replace("profiles = \"../profiles\"\n", "")
            .replace(
                "samples = 40000",
                "profile = \"../profiles/image.json\"\nsteps = 100",
            )
            .replace(
                "samples = 24000",
                "profile = \"../profiles/text.json\"\nsteps = 7\ngpus = 2",
            ),
        short.replace("../workloads/image.toml", "image"),
    ];
    let base = root.join("examples");
    let path = base.join("jobs.toml");
    // Errors about a spec or profile the list names carry that file's path.
    let files = root.display().to_string();
    assert!(
        JobList::parse(&example, "jobs.toml", &base, &path).is_ok(),
        "the example reads"
    );
    let values = toml_values(&seeds);
    let make = |rng: &mut ChaCha8Rng| {
        // The whole example (eight jobs, each loading its spec) one time in ten; its shorter forms
        // reach the same checks faster.
        let seed = if rng.random_bool(0.1) {
            &seeds[0]
        } else {
            &seeds[rng.random_range(1..seeds.len())]
        };
        if rng.random_bool(0.6) {
            mutate_toml(rng, seed, &values)
        } else {
            mutate_bytes(rng, seed, &seeds)
        }
    };
    let check = |text: &str| match JobList::parse(text, "jobs.toml", &base, &path) {
        Ok(list) => {
            for j in &list.jobs {
                let steps_fit = match j.work {
                    synergy::exec::Work::Steps(n) => n.checked_mul(j.batch_size as u64).is_some(),
                    synergy::exec::Work::Samples(_) => true,
                };
                if !steps_fit || j.work_iters() == 0 {
                    return fail(format!("accepted job `{}` with work {:?}", j.name, j.work));
                }
            }
            let _ = list.trace();
            Ok(())
        }
        Err(ExecError::Input(e)) => {
            names_the_place(&e, text, &["jobs.toml", &files], &["has no [[job]] tables"])
        }
        Err(other) => fail(format!("not an input error: {other}")),
    };
    drive("jobs", 0x10b5, &[], make, check);
}

/// Size, rate and shape strings (`--mem`, `--cache-bytes`, a spec's `footprint`; `--storage-bps`;
/// `--gpu-rate`; `--server`): seeds are the documented examples, and numbers with units drawn at random.
/// An error quotes what it could not read (the value, or the part of it at fault); an accepted size
/// reads back the same from its byte count.
#[test]
fn size_and_rate_strings() {
    use synergy::format::profile::ServerShape;
    use synergy::units::{parse_bytes, BytesPerSec};
    use synergy::workload::builtin::rate::GpuRate;
    let seeds: Vec<String> = [
        "4096",
        "256MiB",
        "256M",
        "20MB",
        "1.5G",
        "2 kB",
        "1.5GiB",
        "40MB/s",
        "20MB/s",
        "1GiB",
        "512MiB",
        "128MiB",
        "1.3x",
        "900",
        "8gpu,24cpu,500gb",
        "4gpus,16cores,1tb",
    ]
    .map(String::from)
    .to_vec();
    let units = [
        "", "B", "b", "k", "K", "KiB", "kiB", "M", "MiB", "G", "GiB", "T", "TiB", "kB", "KB", "MB",
        "GB", "TB", "PB", "/s", "ps", "x", "X", "gpu", "cpu", "gb", "tb", "iB",
    ];
    let make = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.5) {
            let seed = seeds.choose(rng).unwrap();
            mutate_bytes(rng, seed, &seeds)
        } else {
            let number = match rng.random_range(0..4) {
                0 => TOKENS[..16].choose(rng).unwrap().to_string(),
                1 => format!("{}", rng.random::<u64>() >> rng.random_range(0..64)),
                2 => format!(
                    "{:.3}",
                    rng.random::<f64>() * 10f64.powi(rng.random_range(0..25))
                ),
                _ => ".".repeat(rng.random_range(0..3)),
            };
            let space = if rng.random_bool(0.2) { " " } else { "" };
            let mut s = format!("{number}{space}{}", units.choose(rng).unwrap());
            if rng.random_bool(0.2) {
                s = format!("{s},{}gpu,24cpu", rng.random_range(0..10));
            }
            s
        }
    };
    // The text in the first pair of backticks of a message, which must be (part of) the input.
    let quotes = |input: &str, e: &str| -> Result<(), String> {
        let quoted = e.split('`').nth(1);
        match quoted {
            Some(q) if input.contains(q) || q.is_empty() && input.trim().is_empty() => Ok(()),
            _ => fail(format!("the error does not quote the input: {e}")),
        }
    };
    let check = |s: &str| {
        let bytes = parse_bytes(s);
        match &bytes {
            Ok(b) => {
                if parse_bytes(&format!("{b}B")) != Ok(*b) {
                    return fail(format!("{b} bytes does not read back"));
                }
            }
            Err(e) => quotes(s, e)?,
        }
        // A whole number of bytes reads exactly, as an integer does, or not at all.
        let t = s.trim();
        if !t.is_empty()
            && t.bytes().all(|c| c.is_ascii_digit())
            && bytes.clone().ok() != t.parse().ok()
        {
            return fail(format!(
                "reads as {bytes:?}, the integer is {:?}",
                t.parse::<u64>()
            ));
        }
        match s.parse::<BytesPerSec>() {
            Ok(r) if !(r.0.is_finite() && r.0 >= 0.0) => return fail(format!("a rate of {}", r.0)),
            Ok(_) => {}
            Err(e) => quotes(s, &e)?,
        }
        match s.parse::<GpuRate>() {
            Ok(GpuRate::SamplesPerS(v) | GpuRate::OneCoreMultiple(v))
                if !(v.is_finite() && v > 0.0) =>
            {
                return fail(format!("a GPU rate of {v}"))
            }
            Ok(_) => {}
            Err(e) => quotes(s, &e)?,
        }
        match s.parse::<ServerShape>() {
            Ok(sh) => {
                let ok = sh.gpus >= 1
                    && [sh.cpus, sh.memory_gib]
                        .iter()
                        .all(|v| v.is_finite() && *v > 0.0);
                if !ok {
                    return fail(format!("accepted the shape {sh:?}"));
                }
                Ok(())
            }
            Err(e) => quotes(s, &e),
        }
    };
    drive("size", 0x512e, &[], make, check);
}

/// The regressions of parsers that [`drive`] runs with another parser's name: rates and shapes share
/// the size strings' test, so their own entries are checked here with the same properties.
#[test]
fn regressions_of_rates_and_shapes() {
    use synergy::format::profile::ServerShape;
    use synergy::units::BytesPerSec;
    for (parser, what, input) in REGRESSIONS {
        match *parser {
            "rate" => {
                let e = input.parse::<BytesPerSec>().unwrap_err();
                assert!(e.contains(&format!("`{input}`")), "{what}: {e}");
            }
            "server-shape" => {
                let e = input.parse::<ServerShape>().unwrap_err();
                assert!(e.contains("gpu"), "{what}: {e}");
                assert!(!e.contains("needs all of"), "{what}: {e}");
            }
            _ => {}
        }
    }
}

/// Imported cluster traces (`import::import`, docs/traces.md), one format after another: seeds are the
/// small files in each format's published layout under tests/data/traces, written to a temporary file per
/// input. An accepted import gives jobs in arrival order with at least one GPU and one iteration.
#[test]
fn imported_traces() {
    use synergy::import::assign::ModelRule;
    use synergy::import::{import, Format, ImportOptions, JobOutcome, WideJobs};
    use synergy::sched::catalog::Catalog;
    let catalog = Catalog::load_dir(&repo().join("profiles/zoo")).unwrap();
    let data = repo().join("tests/data/traces");
    let formats = [
        (Format::Philly, "philly.json"),
        (Format::Helios, "helios.csv"),
        (Format::Acme, "acme.csv"),
        (Format::Sacct, "jobs.sacct"),
        (Format::Gavel, "gavel.trace"),
        (Format::Tiresias, "tiresias.csv"),
    ];
    let seeds: Vec<(Format, String)> = formats
        .iter()
        .map(|(f, name)| (*f, read(&data.join(name))))
        .collect();
    let texts: Vec<String> = seeds.iter().map(|(_, t)| t.clone()).collect();
    let names: Vec<String> = catalog.models.iter().map(|m| m.name.clone()).collect();
    let opts = ImportOptions {
        states: vec![
            JobOutcome::Completed,
            JobOutcome::Failed,
            JobOutcome::Cancelled,
        ],
        from_s: None,
        to_s: None,
        load_scale: 1.0,
        wide: WideJobs::Spread,
        widest_server_gpus: 8,
        cluster_gpus: 64,
        models: ModelRule::Split([20.0, 70.0, 10.0]),
    };
    let dir = tempfile::tempdir().unwrap();
    // The format travels in the input's first line, so a failure shows (and remakes) it.
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..seeds.len());
        let seed = &seeds[k].1;
        let body = match (seeds[k].0, rng.random_bool(0.6)) {
            (Format::Philly, true) => {
                let mut v: Value = serde_json::from_str(seed).unwrap();
                mutate_json(rng, &mut v, &names);
                v.to_string()
            }
            (_, true) => mutate_csv(rng, seed, &names),
            _ => mutate_bytes(rng, seed, &texts),
        };
        format!("{k}\n{body}")
    };
    let whole_file = [
        "keeps no job",
        "holds no job",
        "is empty",
        "is not UTF-8",
        "is not a delimited table",
    ];
    let check = |input: &str| {
        let (k, body) = input.split_once('\n').unwrap();
        let format = formats[k.parse::<usize>().unwrap()].0;
        let path = dir.path().join(format!(
            "t-{}",
            std::thread::current().name().unwrap_or("x").len()
        ));
        std::fs::write(&path, body).unwrap();
        let origin = path.display().to_string();
        match import(format, std::slice::from_ref(&path), &opts, &catalog) {
            Ok((jobs, summary)) => {
                let ordered = jobs.windows(2).all(|w| w[0].arrival_s <= w[1].arrival_s);
                let sane = jobs.iter().all(|j| {
                    j.gpus >= 1
                        && j.gpus <= 64
                        && j.iters >= 1
                        && j.arrival_s >= 0.0
                        && j.arrival_s.is_finite()
                });
                if ordered
                    && sane
                    && summary.kept == jobs.len() as u64
                    && synergy::import::to_csv(&jobs).is_ok()
                {
                    Ok(())
                } else {
                    fail(format!("accepted jobs out of order or range: {jobs:?}"))
                }
            }
            Err(e) => names_the_place(&e, body, &[&origin], &whole_file),
        }
    };
    drive("import", 0x1_b0a7, &[], make, check);
}

/// Machine lists (`import::machines::parse_machines`): Philly's, PAI's spec and `sinfo`, from the shipped
/// examples. An accepted list gives machine groups of at least one machine with positive cores and memory.
#[test]
fn machine_lists() {
    use synergy::import::machines::{parse_machines, MachineFormat, PerGpu};
    let data = repo().join("tests/data/traces");
    let formats = [
        (MachineFormat::Philly, "cluster_machine_list"),
        (MachineFormat::Pai, "pai_machine_spec.csv"),
        (MachineFormat::Sinfo, "nodes.sinfo"),
    ];
    let seeds: Vec<String> = formats.iter().map(|(_, n)| read(&data.join(n))).collect();
    let per_gpu = PerGpu {
        cpus: 3.0,
        memory_gb: 62.5,
    };
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..seeds.len());
        let body = if rng.random_bool(0.6) {
            mutate_csv(rng, &seeds[k], &[])
        } else {
            mutate_bytes(rng, &seeds[k], &seeds)
        };
        format!("{k}\n{body}")
    };
    let check = |input: &str| {
        let (k, body) = input.split_once('\n').unwrap();
        let format = formats[k.parse::<usize>().unwrap()].0;
        match parse_machines(format, "m.txt", body, per_gpu) {
            Ok(groups) => {
                if groups
                    .iter()
                    .all(|g| g.count >= 1 && g.cpus > 0.0 && g.memory_gb > 0.0)
                {
                    Ok(())
                } else {
                    fail(format!("accepted groups out of range: {groups:?}"))
                }
            }
            Err(e) => names_the_place(&e, body, &["m.txt"], &["holds no machine", "is empty"]),
        }
    };
    drive("machines", 0x3ac4, &[], make, check);
}

/// The advisor's table (`Table::parse`, which `--check` runs): the seed is a table `slurm advisor` wrote.
/// Parsing never fails outright; each problem it reports names a line (or the table as a whole) and a
/// field, and a table it reads without a problem writes back the same rows.
#[test]
fn advisor_tables() {
    use synergy::format::advisor_table::Table;
    let seed = read(&repo().join("tests/data/formats/advisor-table/1.tsv"));
    let seeds = vec![seed.clone()];
    let make = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.6) {
            mutate_csv(rng, &seed.replace('\t', ","), &[]).replace(',', "\t")
        } else {
            mutate_bytes(rng, &seed, &seeds)
        }
    };
    let check = |text: &str| {
        let (t, _lines, problems) = Table::parse(text);
        let lines = text.lines().count().max(1);
        for p in &problems {
            if p.field.is_empty() || p.line.is_some_and(|l| l == 0 || l > lines) {
                return fail(format!("a problem that names no place: {p}"));
            }
        }
        if problems.is_empty() {
            let (again, _, more) = Table::parse(&t.to_tsv());
            if !more.is_empty() || again != t {
                return fail(format!("read clean but does not write back: {more:?}"));
            }
        }
        Ok(())
    };
    drive("advisor-table", 0xad71, &[], make, check);
}

/// Observation logs (`observation::read_log`): the seed is a log a real run wrote. A log is read whole or
/// refused naming the file, the line and the field.
#[test]
fn observation_logs() {
    use synergy::format::observation::read_log;
    let seed =
        read(&repo().join("tests/data/formats/observation/image-on-audio.observations.jsonl"));
    let lines: Vec<Value> = seed
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut strings = Vec::new();
    json_strings(&lines[0], &mut strings);
    let seeds = vec![seed.clone()];
    let dir = tempfile::tempdir().unwrap();
    let make = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.6) {
            let mut v = lines.clone();
            let k = rng.random_range(0..v.len());
            mutate_json(rng, &mut v[k], &strings);
            v.iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            mutate_bytes(rng, &seed, &seeds)
        }
    };
    let check = |text: &str| {
        let path = dir.path().join(format!(
            "o-{:?}.observations.jsonl",
            std::thread::current().id()
        ));
        std::fs::write(&path, text).unwrap();
        let origin = path.display().to_string();
        match read_log(&path) {
            Ok(obs) => {
                if obs
                    .iter()
                    .all(|o| o.cpus > 0.0 && o.memory_gib > 0.0 && o.end_s >= o.start_s)
                {
                    Ok(())
                } else {
                    fail("accepted an observation out of range")
                }
            }
            Err(e) => names_the_place(&e, text, &[&origin], &["cannot read"]),
        }
    };
    drive("observations", 0x0b5e, &[], make, check);
}

/// Run state files (`RunState::read`, which `run --resume` starts from): the seeds are both forms the
/// project has written. A state is read whole or refused naming the file.
#[test]
fn run_states() {
    use synergy::format::run_state::RunState;
    let seeds = shipped_texts("tests/data/formats/run-state", "json");
    let values: Vec<Value> = seeds
        .iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect();
    let mut strings = Vec::new();
    for v in &values {
        json_strings(v, &mut strings);
    }
    let dir = tempfile::tempdir().unwrap();
    let make = |rng: &mut ChaCha8Rng| {
        let k = rng.random_range(0..seeds.len());
        if rng.random_bool(0.6) {
            let mut v = values[k].clone();
            mutate_json(rng, &mut v, &strings);
            v.to_string()
        } else {
            mutate_bytes(rng, &seeds[k], &seeds)
        }
    };
    let check = |text: &str| {
        let path = dir
            .path()
            .join(format!("s-{:?}.state.json", std::thread::current().id()));
        std::fs::write(&path, text).unwrap();
        let origin = path.display().to_string();
        match RunState::read(&path) {
            Ok(st) => {
                let back = dir
                    .path()
                    .join(format!("b-{:?}.state.json", std::thread::current().id()));
                st.write(&back).unwrap();
                match RunState::read(&back) {
                    Ok(again) if again == st => Ok(()),
                    _ => fail("read, but does not read back as written"),
                }
            }
            Err(e) => names_the_place(
                &e,
                text,
                &[&origin],
                &["not a run state file", "cannot read"],
            ),
        }
    };
    drive("run-state", 0x57a7, &[], make, check);
}
