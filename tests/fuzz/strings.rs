//! Sizes, rates and server shapes as typed on the command line.

use super::*;

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
