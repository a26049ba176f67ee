//! Slurm's GRES lists, as `sinfo`, `scontrol` and `sacct` print them: how many GPUs one names. One
//! reader for the executor's node records and the machine-list import, so the two never disagree.

/// The GPUs in a GRES list such as `gpu:2`, `gpu:a100:4(S:0-1)`, `gpu:a100:2,gpu:v100:2`,
/// `gpu:1(IDX:0),shard:8` or `gres:gpu:1`; `(null)` and an empty list name none. A bare `gpu` is one GPU,
/// as Slurm reads `--gres=gpu`; other resources (`shard`, `mps`) are not GPUs. `Err` names the item whose
/// count is not a number (`gpu:x`) or too large.
pub fn gpus_in_gres(gres: &str) -> Result<u32, String> {
    let gres = gres.trim();
    if gres.is_empty() || gres == "(null)" {
        return Ok(0);
    }
    let mut total: u32 = 0;
    for item in gres.split(',') {
        let name = item
            .trim()
            .trim_start_matches("gres:")
            .trim_start_matches("gres/");
        let name = name.split('(').next().unwrap_or_default();
        let mut parts = name.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        // The count is the last part (`gpu:N`, `gpu:TYPE:N`); `gpu` alone is one. Slurm prints a typed
        // GPU with its count, so `gpu:WORD` is a mistake, not one GPU.
        let count = match parts.next_back() {
            None => 1,
            Some(n) => n.parse().map_err(|_| {
                if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) {
                    format!("`{item}`: the count is out of range")
                } else {
                    format!("`{item}`: `{n}` is not a GPU count")
                }
            })?,
        };
        total = total
            .checked_add(count)
            .ok_or_else(|| format!("`{gres}`: too many GPUs"))?;
    }
    // Checked before anything is built for them (a node of 10^9 GPUs would be 10^9 slots).
    if u64::from(total) > crate::range::MAX_GPUS_PER_SERVER {
        return Err(format!(
            "`{gres}`: {total} GPUs on one node is more than any server has (at most {})",
            crate::range::MAX_GPUS_PER_SERVER
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_slurm_prints_counts_the_same() {
        for (gres, gpus) in [
            ("gpu:2", 2),
            ("gpu:4", 4),
            ("gpu:a100:4(S:0-1)", 4),
            ("gres:gpu:1", 1),
            ("gres/gpu:3", 3),
            ("gpu:1(IDX:0),shard:8", 1),
            ("gpu:a100:2,gpu:v100:2,mps:100", 4),
            ("gpu", 1),
            ("gpu:1024", 1024),
            ("(null)", 0),
            ("", 0),
            ("shard:8", 0),
        ] {
            assert_eq!(gpus_in_gres(gres), Ok(gpus), "{gres}");
        }
    }

    #[test]
    fn a_count_that_is_not_one_is_refused_by_item() {
        let e = gpus_in_gres("gpu:a100:x").unwrap_err();
        assert!(e.contains("gpu:a100:x") && e.contains("`x`"), "{e}");
        assert!(gpus_in_gres("gpu:x").is_err());
        assert!(gpus_in_gres("gpu:99999999999").is_err());
        assert!(gpus_in_gres("gpu:4294967295,gpu:1").is_err());
        let e = gpus_in_gres("gpu:1000000").unwrap_err();
        assert!(e.contains("more than any server has"), "{e}");
    }
}
