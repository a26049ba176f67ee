//! Datasets generated, scanned and locked for real, in temporary directories.

use super::*;

fn bytes_of(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    scan(dir)
        .unwrap()
        .files
        .into_iter()
        .map(|(p, _)| {
            let b = std::fs::read(&p).unwrap();
            (p.strip_prefix(dir).unwrap().to_path_buf(), b)
        })
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    for (kind, size) in [
        (DatasetKind::Audio, 400_000),
        (DatasetKind::Text, 100_000),
        (DatasetKind::Image, 250_000),
    ] {
        let a = tmp.path().join(format!("{kind}-a"));
        let b = tmp.path().join(format!("{kind}-b"));
        let c = tmp.path().join(format!("{kind}-c"));
        let ma = generate(kind, &a, Bytes(size), 7, &Cancel::new()).unwrap();
        let mb = generate(kind, &b, Bytes(size), 7, &Cancel::new()).unwrap();
        generate(kind, &c, Bytes(size), 8, &Cancel::new()).unwrap();
        assert_eq!(ma, mb);
        assert_eq!(read_manifest(&a), Some(ma.clone()));
        assert!(ma.total_bytes.0 >= size);
        assert_eq!(bytes_of(&a), bytes_of(&b), "{kind}");
        assert_ne!(bytes_of(&a), bytes_of(&c), "{kind}");
    }
}

#[test]
fn images_average_about_110_kb() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("img");
    let m = generate(
        DatasetKind::Image,
        &dir,
        Bytes(2_500_000),
        1,
        &Cancel::new(),
    )
    .unwrap();
    assert!(m.files >= 15, "{m:?}");
    assert!(
        (90e3..130e3).contains(&m.mean_file_bytes),
        "mean {} bytes",
        m.mean_file_bytes
    );
    assert!(dir.join("n0000/img_00000.jpg").is_file());
    assert!(dir.join("n0009/img_00009.jpg").is_file());
}

#[test]
fn text_shards_are_4_mib_but_the_last() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("txt");
    let m = generate(DatasetKind::Text, &dir, Bytes(9 << 20), 1, &Cancel::new()).unwrap();
    let sizes: Vec<u64> = scan(&dir).unwrap().files.iter().map(|f| f.1).collect();
    assert_eq!(sizes, vec![4 << 20, 4 << 20, 1 << 20]);
    assert_eq!(m.total_bytes, Bytes(9 << 20));
    // Zipf: the most common token is far more frequent than a mid-rank one.
    let shard = std::fs::read(dir.join("shard_00002.bin")).unwrap();
    let count = |t: u16| {
        shard
            .chunks_exact(2)
            .filter(|p| u16::from_le_bytes([p[0], p[1]]) == t)
            .count()
    };
    assert!(count(0) > 20 * count(1000).max(1));
}

#[test]
fn scan_skips_the_manifest_and_hidden_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("txt");
    generate(DatasetKind::Text, &dir, Bytes(1000), 1, &Cancel::new()).unwrap();
    std::fs::write(dir.join(crate::format::rate::RATE_FILE), b"{}").unwrap();
    std::fs::write(dir.join(".tmpAb12Cd"), b"half a rate file").unwrap();
    std::fs::create_dir(dir.join(".git")).unwrap();
    std::fs::write(dir.join(".git/HEAD"), b"ref").unwrap();
    let files = scan(&dir).unwrap();
    let names: Vec<_> = files
        .paths()
        .map(|p| p.strip_prefix(&dir).unwrap().display().to_string())
        .collect();
    assert_eq!(names, vec!["shard_00000.bin"]);
    assert_eq!(files.total_bytes(), 1000);
}

#[test]
fn an_existing_directory_is_refused_and_nothing_is_left_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("taken");
    std::fs::create_dir(&dir).unwrap();
    let err = generate(DatasetKind::Text, &dir, Bytes(1000), 1, &Cancel::new()).unwrap_err();
    assert!(matches!(err, WorkloadError::Input(_)));
    assert!(err.to_string().contains("taken"), "{err}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1);
}

#[test]
fn two_generators_of_one_dataset_make_it_once_and_both_get_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("img");
    // What a killed generator left, which the lock holder removes.
    std::fs::create_dir_all(tmp.path().join(".img.tmp-999999999/n0000")).unwrap();
    let gen = || {
        let dir = dir.clone();
        std::thread::spawn(move || {
            generate(DatasetKind::Image, &dir, Bytes(800_000), 3, &Cancel::new())
        })
    };
    let (a, b) = (gen(), gen());
    let (a, b) = (a.join().unwrap().unwrap(), b.join().unwrap().unwrap());
    // The second read the first's manifest back (its mean may differ in the last digit).
    assert_eq!((a.files, a.total_bytes), (b.files, b.total_bytes));
    let on_disk = read_manifest(&dir).unwrap();
    assert_eq!(
        (on_disk.files, on_disk.total_bytes),
        (a.files, a.total_bytes)
    );
    let names: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["img"], "a temporary directory was left");
    // Another seed in the same place is not this dataset.
    let err = generate(DatasetKind::Image, &dir, Bytes(800_000), 4, &Cancel::new()).unwrap_err();
    assert!(err.to_string().contains("is not this dataset"), "{err}");
}
