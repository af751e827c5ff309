//! Chunk decode throughput (GB/s of decompressed bytes) for codec × filter × data, with one
//! thread and with all threads, side by side with C-Blosc2 timed on the same chunks.
//!
//! `cargo bench --bench decode --no-default-features` (no DataFusion needed). The chunks
//! come from `benches/reference.py` (python-blosc2 4.14.1 / C-Blosc2 3.3.5, run with
//! `B2_PYTHON`, default `.venv/bin/python`, then `python3`), which then stays up to time
//! C-Blosc2 on request. Each of several rounds visits every case and times C and Rust runs
//! of it in turn, both decoding a page-aligned chunk into a reused page-aligned buffer, so
//! the drift of a shared machine's speed hits both sides alike; each side's figure is its
//! fastest run over all rounds (interference only slows runs down). A third pair of
//! columns times one thread with the caches cold: each run right after both sides touch
//! every cache line of 384 MiB elsewhere (`B2_EVICT_MIB` changes it), so the chunk and the
//! output come from memory, as when a scan decodes a chunk it read long before. Stored-raw
//! chunks, one `memcpy` on both sides, are the column's control: with 96 MiB they read
//! 0.5–1.3× C on session 26's VM, whose caches kept more than that; with 384 MiB, 1.0–1.1×.
//! The table is printed at the end and written to `target/bench-data/decode-table.md`.

mod page_aligned;

use criterion::{Criterion, Throughput};
use datafusion_blosc2::chunk::Chunk;
use page_aligned::PageAligned;
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

    /// C-Blosc2's fastest of `reps` decompressions of `case` on `threads` threads (s);
    /// when `cold`, each right after evicting the caches, with no warm-up run.
    fn best_s(&mut self, case: &str, threads: usize, reps: usize, cold: bool) -> f64 {
        let mode = if cold { " cold" } else { "" };
        writeln!(self.stdin, "{case} {threads} {reps}{mode}").unwrap();
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

/// The fastest of `reps` runs of `f` in seconds: after one warm-up run, or with `evict`
/// ("cold"), each run right after a byte of every cache line of `evict` is read and
/// written, with no warm-up run, as `CReference::best_s` asks of the C side.
/// (Not `fill`: glibc's `memset` writes that much with non-temporal stores, which pass the
/// caches by and leave the chunk in them.)
fn best_s(reps: usize, mut evict: Option<&mut [u8]>, mut f: impl FnMut()) -> f64 {
    if evict.is_none() {
        f();
    }
    (0..reps)
        .map(|_| {
            if let Some(evict) = evict.as_deref_mut() {
                for b in evict.iter_mut().step_by(64) {
                    *b = b.wrapping_add(1);
                }
            }
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// Rounds over every case, and runs of each side per case and round.
const ROUNDS: usize = 12;
const REPS: usize = 5;
/// Every `COLD_EVERY`th round also times `COLD_REPS` cold runs of each side.
const COLD_EVERY: usize = 2;
const COLD_REPS: usize = 4;
/// Bytes touched before a cold run (`B2_EVICT_MIB` overrides it, for both sides), as
/// `reference.py`'s `EVICT_BYTES`: 96 MiB, three times the L3 this VM reports, left data
/// in its caches.
const EVICT_BYTES: usize = 384 << 20;

fn main() {
    let (mut c_ref, reference) = CReference::start();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10);
    // `B2_DECODE_ONLY=lz4hc` runs the cases whose name contains it.
    let only = std::env::var("B2_DECODE_ONLY").unwrap_or_default();
    let cases: Vec<(&String, &serde_json::Value)> = reference["cases"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(n, _)| n.contains(only.as_str()))
        .collect();
    let bufs: Vec<PageAligned> = cases
        .iter()
        .map(|(name, _)| {
            let raw = std::fs::read(data_dir().join(format!("{name}.chunk"))).unwrap();
            let mut b = PageAligned::zeroed(raw.len());
            b.bytes_mut().copy_from_slice(&raw);
            b
        })
        .collect();
    // Chunks of b2nd arrays carry their array's block shape beside them (ZFP needs it).
    let chunks: Vec<Chunk> = bufs
        .iter()
        .zip(&cases)
        .map(|(b, (_, info))| {
            let chunk = Chunk::parse(b.bytes()).unwrap();
            match info.get("blockshape") {
                Some(shape) => {
                    let shape: Vec<u64> = serde_json::from_value(shape.clone()).unwrap();
                    chunk.with_block_shape(&shape).unwrap()
                }
                None => chunk,
            }
        })
        .collect();
    let mut outs: Vec<PageAligned> = chunks
        .iter()
        .map(|c| PageAligned::zeroed(c.nbytes()))
        .collect();
    for (((name, _), chunk), out) in cases.iter().zip(&chunks).zip(&mut outs) {
        let out = out.bytes_mut();
        let mut g = c.benchmark_group(name.as_str());
        g.throughput(Throughput::Bytes(chunk.nbytes() as u64));
        g.bench_function("ours-1t", |b| b.iter(|| chunk.decode_into(out).unwrap()));
        g.bench_function(format!("ours-{threads}t"), |b| {
            b.iter(|| chunk.decode_into_parallel(out, threads).unwrap())
        });
        g.finish();
    }
    // Per case, [C 1t, ours 1t, C all, ours all, C 1t cold, ours 1t cold]: the fastest run
    // of each side. Every round visits every case, so a case's runs are spread over the
    // whole bench and a burst of load from other tenants, minutes long on this VM, cannot
    // cover all of them.
    let mut best = vec![[f64::INFINITY; 6]; cases.len()];
    let evict_bytes = std::env::var("B2_EVICT_MIB").map_or(EVICT_BYTES, |m| {
        m.parse::<usize>().expect("B2_EVICT_MIB in MiB") << 20
    });
    let mut evict = vec![0u8; evict_bytes];
    for round in 0..ROUNDS {
        eprintln!("round {} of {ROUNDS}", round + 1);
        for (((name, _), chunk), (out, b)) in cases
            .iter()
            .zip(&chunks)
            .zip(outs.iter_mut().zip(&mut best))
        {
            let out = out.bytes_mut();
            let mut t = [
                c_ref.best_s(name, 1, REPS, false),
                best_s(REPS, None, || chunk.decode_into(out).unwrap()),
                c_ref.best_s(name, threads, REPS, false),
                best_s(REPS, None, || {
                    chunk.decode_into_parallel(out, threads).unwrap()
                }),
                f64::INFINITY,
                f64::INFINITY,
            ];
            if round % COLD_EVERY == 0 {
                t[4] = c_ref.best_s(name, 1, COLD_REPS, true);
                t[5] = best_s(COLD_REPS, Some(&mut evict), || {
                    chunk.decode_into(out).unwrap()
                });
            }
            for (b, t) in b.iter_mut().zip(t) {
                *b = b.min(t);
            }
        }
    }
    let rows: Vec<String> = cases
        .iter()
        .zip(&chunks)
        .zip(&best)
        .map(|(((name, info), chunk), b)| {
            let [c1, one, ca, all, cc, cold] = b.map(|t| chunk.nbytes() as f64 / t / 1e9);
            format!(
                "| {name} | {:.1} | {one:.2} | {c1:.2} | {:.2}× | {all:.2} | {ca:.2} | {:.2}× \
                 | {cold:.2} | {cc:.2} | {:.2}× |",
                info["nbytes"].as_f64().unwrap() / info["cbytes"].as_f64().unwrap(),
                one / c1,
                all / ca,
                cold / cc
            )
        })
        .collect();
    let table = format!(
        "| chunk (4 MiB, clevel 5) | ratio | ours 1t GB/s | C 1t GB/s | ours/C 1t | ours {threads}t GB/s | C {threads}t GB/s | ours/C {threads}t | ours 1t cold GB/s | C 1t cold GB/s | ours/C cold |\n|---|---|---|---|---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    );
    println!("\n{table}");
    std::fs::write(data_dir().join("decode-table.md"), table).unwrap();
}
