//! Chunk decode throughput (GB/s of decompressed bytes) for codec × filter × data, with one
//! thread and with all threads, side by side with C-Blosc2 timed on the same chunks.
//!
//! `cargo bench --bench decode --no-default-features` (no DataFusion needed). The chunks
//! come from `benches/reference.py` (python-blosc2 4.14.1 / C-Blosc2 3.3.5, run with
//! `B2_PYTHON`, default `.venv/bin/python`, then `python3`), which then stays up to time
//! C-Blosc2 on request: each case alternates C and Rust runs over several rounds, both
//! decoding into a reused buffer, so the drift of a shared machine's speed hits both sides
//! alike, and each side's figure is its fastest run (interference only slows runs down).
//! The table is printed at the end and written to `target/bench-data/decode-table.md`.

use criterion::{Criterion, Throughput};
use datafusion_blosc2::chunk::Chunk;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data")
}

/// `benches/reference.py --serve`: writes the chunks, then times C-Blosc2 on request.
struct CReference {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CReference {
    /// Starts the reference; returns it and `reference.json` (the cases and their sizes).
    fn start() -> (Self, serde_json::Value) {
        let py = std::env::var("B2_PYTHON").unwrap_or_else(|_| {
            let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
            if std::path::Path::new(venv).exists() {
                venv.into()
            } else {
                "python3".into()
            }
        });
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/reference.py");
        let mut child = Command::new(&py)
            .args([script, data_dir().to_str().unwrap(), "--serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run benches/reference.py");
        let stdin = child.stdin.take().unwrap();
        let mut r = CReference {
            stdin,
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        };
        assert_eq!(
            r.line(),
            "ready",
            "benches/reference.py failed (needs python-blosc2 4.14.1; set B2_PYTHON)"
        );
        let reference = std::fs::read_to_string(data_dir().join("reference.json")).unwrap();
        (r, serde_json::from_str(&reference).unwrap())
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.stdout.read_line(&mut l).unwrap();
        l.trim().to_string()
    }

    /// C-Blosc2's fastest of `reps` decompressions of `case` on `threads` threads (s).
    fn best_s(&mut self, case: &str, threads: usize, reps: usize) -> f64 {
        writeln!(self.stdin, "{case} {threads} {reps}").unwrap();
        self.stdin.flush().unwrap();
        self.line().parse().expect("reference.py answers seconds")
    }
}

impl Drop for CReference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fastest of `reps` runs of `f` in seconds (after one warm-up run).
fn best_s(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..reps)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Rounds of C and Rust runs per case, and runs per round.
const ROUNDS: usize = 7;
const REPS: usize = 5;

fn main() {
    let (mut c_ref, reference) = CReference::start();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10);
    let mut rows = Vec::new();
    let cases = reference["cases"].as_object().unwrap();
    // `B2_DECODE_ONLY=lz4hc` runs the cases whose name contains it.
    let only = std::env::var("B2_DECODE_ONLY").unwrap_or_default();
    for (name, info) in cases.iter().filter(|(n, _)| n.contains(only.as_str())) {
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
        // [C 1t, ours 1t, C all, ours all], the fastest run of each round.
        let mut t: [Vec<f64>; 4] = Default::default();
        for _ in 0..ROUNDS {
            t[0].push(c_ref.best_s(name, 1, REPS));
            t[1].push(best_s(REPS, || chunk.decode_into(&mut out).unwrap()));
            t[2].push(c_ref.best_s(name, threads, REPS));
            t[3].push(best_s(REPS, || {
                chunk.decode_into_parallel(&mut out, threads).unwrap()
            }));
        }
        // Other tenants of a shared VM only ever slow a run down: each side's fastest run
        // is its least disturbed one.
        let [c1, one, ca, all] =
            t.map(|v| n as f64 / v.into_iter().fold(f64::INFINITY, f64::min) / 1e9);
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
