//! Chunk decode throughput (GB/s of decompressed bytes) for codec × filter × data, with one
//! thread and with all threads, side by side with C-Blosc2 timed on the same chunks.
//!
//! `cargo bench --bench decode --no-default-features` (no DataFusion needed). The chunks and
//! the C-Blosc2 reference come from `benches/reference.py`, run first by this bench with
//! `B2_PYTHON` (default `.venv/bin/python`, then `python3`); the table is printed at the end
//! and written to `target/bench-data/decode-table.md`.

use criterion::{Criterion, Throughput};
use datafusion_blosc2::chunk::Chunk;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data")
}

fn prepare() -> serde_json::Value {
    let dir = data_dir();
    let reference = dir.join("reference.json");
    // The C-Blosc2 reference is re-measured in every run (same run, same machine state)
    // unless B2_BENCH_REUSE=1 asks to reuse the last one.
    if !reference.exists() || std::env::var("B2_BENCH_REUSE").as_deref() != Ok("1") {
        let py = std::env::var("B2_PYTHON").unwrap_or_else(|_| {
            let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
            if std::path::Path::new(venv).exists() {
                venv.into()
            } else {
                "python3".into()
            }
        });
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/reference.py");
        let st = std::process::Command::new(&py)
            .args([script, dir.to_str().unwrap()])
            .status()
            .expect("run benches/reference.py");
        assert!(
            st.success(),
            "benches/reference.py failed (needs python-blosc2 4.14.1; set B2_PYTHON)"
        );
    }
    serde_json::from_str(&std::fs::read_to_string(reference).unwrap()).unwrap()
}

/// Median seconds of `f` over `reps` runs.
fn median(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[reps / 2]
}

fn main() {
    let reference = prepare();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10);
    let mut rows = Vec::new();
    let cases = reference["cases"].as_object().unwrap();
    for (name, info) in cases {
        let buf = std::fs::read(data_dir().join(format!("{name}.chunk"))).unwrap();
        let chunk = Chunk::parse(&buf).unwrap();
        let n = chunk.nbytes();
        let mut out = vec![0u8; n];
        let mut g = c.benchmark_group(name.as_str());
        g.throughput(Throughput::Bytes(n as u64));
        g.bench_function("ours-1t", |b| {
            b.iter(|| chunk.decode_into(&mut out).unwrap())
        });
        g.bench_function(format!("ours-{threads}t"), |b| {
            b.iter(|| chunk.decode_into_parallel(&mut out, threads).unwrap())
        });
        g.finish();
        let one = n as f64 / median(15, || chunk.decode_into(&mut out).unwrap()) / 1e9;
        let all = n as f64
            / median(15, || {
                chunk.decode_into_parallel(&mut out, threads).unwrap()
            })
            / 1e9;
        let c1 = info["c_1t_gbps"].as_f64().unwrap();
        let ca = info["c_all_gbps"].as_f64().unwrap();
        rows.push(format!(
            "| {name} | {:.1} | {one:.2} | {c1:.2} | {:.2}× | {all:.2} | {ca:.2} | {:.2}× |",
            info["nbytes"].as_f64().unwrap() / info["cbytes"].as_f64().unwrap(),
            one / c1,
            all / ca
        ));
    }
    let table = format!(
        "| chunk (4 MiB, clevel 5) | ratio | ours 1t GB/s | C 1t GB/s | ours/C 1t | ours {threads}t GB/s | C {threads}t GB/s | ours/C {threads}t |\n|---|---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("\n{table}");
    std::fs::write(data_dir().join("decode-table.md"), table).unwrap();
}
