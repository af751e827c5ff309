//! Differential test against the reference: python-blosc2 4.14.1 (C-Blosc2 3.3.5) compresses
//! random data with random codec / filters / typesize / blocksize / clevel / splitmode, and
//! our decoder must return the bytes C-Blosc2 returns. Seeded; the seed is printed, and
//! `B2_DIFF_SEED` replays a run and `B2_DIFF_CASES` sets how many cases it draws (400 by
//! default). Needs `B2_PYTHON` (set by `.ci/run`) or a `python3` with blosc2; under CI a
//! missing reference is a failure, elsewhere it prints "skipped".

use crate::util::sha256_hex;
use datafusion_blosc2::chunk::{Chunk, DecodeLimits};
use std::process::Command;

/// Cases per run unless `B2_DIFF_CASES` says otherwise.
const CASES: u32 = 400;

#[test]
fn random_chunks_match_c_blosc2() {
    let python = std::env::var("B2_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import blosc2; assert blosc2.__version__ == '4.14.1'"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("CI").is_err(),
            "CI must provide python-blosc2 4.14.1 (B2_PYTHON={python})"
        );
        eprintln!(
            "differential test skipped: no python-blosc2 4.14.1 at {python:?} (set B2_PYTHON)"
        );
        return;
    }
    let seed: u64 = std::env::var("B2_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        });
    let cases: u32 = std::env::var("B2_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CASES);
    eprintln!(
        "differential test: seed {seed} ({cases} cases; replay with B2_DIFF_SEED={seed} B2_DIFF_CASES={cases})"
    );
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/differential.py"
    );
    let out = Command::new(&python)
        .args([
            script,
            &seed.to_string(),
            &cases.to_string(),
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "seed {seed}: generator failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = std::fs::read_to_string(dir.path().join("manifest.tsv")).unwrap();
    let mut failures = Vec::new();
    let mut n = 0;
    let mut refused = 0;
    for line in manifest.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let buf = std::fs::read(dir.path().join(f[0])).unwrap();
        n += 1;
        let mut ours = Chunk::parse(&buf).and_then(|c| c.decode(&DecodeLimits::default()));
        // Zero the tails whose C output is undefined (column 5), as the generator did.
        if let (Ok(out), Some(mask)) = (ours.as_mut(), f.get(4).filter(|m| **m != "-")) {
            for r in mask.split(',') {
                let (a, n) = r.split_once(':').unwrap();
                let (a, n): (usize, usize) = (a.parse().unwrap(), n.parse().unwrap());
                out[a..a + n].fill(0);
            }
        }
        if f[1] == "-1" {
            refused += 1;
            continue;
        }
        match ours {
            Ok(got) if got.len().to_string() == f[1] && sha256_hex(&got) == f[2] => {}
            Ok(got) => failures.push(format!(
                "{} ({}): {} bytes, sha differs",
                f[0],
                f[3],
                got.len()
            )),
            Err(e) => failures.push(format!("{} ({}): {e}", f[0], f[3])),
        }
    }
    assert_eq!(n, cases as usize);
    eprintln!(
        "differential test: {} cases compared (undefined C tails masked), {refused} that C-Blosc2 itself refuses to decode",
        n - refused
    );
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {n} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
