//! Text preprocessing as language-model loaders do it: one fixed-length run of u16 tokens becomes an
//! i64 input sequence and the same sequence shifted by one as its targets.

/// Writes the inputs (`tokens[..n]`) then the targets (`tokens[1..]`) of one sequence of `n + 1`
/// little-endian u16 tokens into `out` (2n values).
pub fn process(bytes: &[u8], seq_len: usize, out: &mut [i64]) -> Result<(), String> {
    if bytes.len() != (seq_len + 1) * 2 || out.len() < 2 * seq_len {
        return Err(format!(
            "expected {} bytes of tokens, read {}",
            (seq_len + 1) * 2,
            bytes.len()
        ));
    }
    let (inputs, targets) = out.split_at_mut(seq_len);
    for (i, pair) in bytes.chunks_exact(2).enumerate() {
        let t = u16::from_le_bytes([pair[0], pair[1]]) as i64;
        if i < seq_len {
            inputs[i] = t;
        }
        if i > 0 {
            targets[i - 1] = t;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn targets_are_inputs_shifted_by_one() {
        let bytes: Vec<u8> = [1u16, 2, 3, 4]
            .iter()
            .flat_map(|t| t.to_le_bytes())
            .collect();
        let mut out = vec![0i64; 6];
        super::process(&bytes, 3, &mut out).unwrap();
        assert_eq!(out, vec![1, 2, 3, 2, 3, 4]);
        assert!(super::process(&bytes[..6], 3, &mut out).is_err());
    }
}
