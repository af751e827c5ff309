//! The hot timer: the fastest of many back-to-back decodes of each chunk file, one thread
//! (`THREADS=n`: `Chunk::decode_into_parallel` on n threads instead).
//!
//! `cargo bench --bench hot --no-default-features -- CHUNK[,CHUNK…] [REPS]` (REPS 300 by
//! default; the chunks of `benches/decode.rs` are in `target/bench-data` once it ran).
//! Each chunk is copied to a page-aligned buffer and decoded REPS times into one
//! page-aligned output, as the decode bench does; the line printed per chunk gives the
//! best and the median GB/s of decompressed bytes and the first eight runs (the warm-up).
//! `SHIFT=n` allocates n bytes first, which moves the later heap allocations (the
//! decoder's scratch).
//!
//! `benches/README.md` compares decoder changes with it: two builds run in turns over
//! several rounds, best against best, since this VM's speed drifts by more than most
//! changes are worth. It times only our side; C-Blosc2 is timed by `benches/decode.rs`.

mod page_aligned;

use datafusion_blosc2::chunk::Chunk;
use page_aligned::PageAligned;
use std::time::Instant;

fn main() {
    // (`cargo bench` adds `--bench`.)
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(paths) = args.first() else {
        eprintln!("usage: hot CHUNK[,CHUNK…] [REPS]");
        std::process::exit(2);
    };
    let reps: usize = args
        .get(1)
        .map_or(300, |s| s.parse().expect("REPS a number"));
    let shift: usize = std::env::var("SHIFT").map_or(0, |s| s.parse().expect("SHIFT a number"));
    let threads: usize =
        std::env::var("THREADS").map_or(1, |s| s.parse().expect("THREADS a number"));
    std::mem::forget(vec![1u8; shift]);
    for path in paths.split(',') {
        let raw = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut input = PageAligned::zeroed(raw.len());
        input.bytes_mut().copy_from_slice(&raw);
        let chunk = Chunk::parse(input.bytes()).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut output = PageAligned::zeroed(chunk.nbytes());
        let out = output.bytes_mut();
        let mut times = Vec::with_capacity(reps);
        for _ in 0..reps.max(8) {
            let t = Instant::now();
            if threads > 1 {
                chunk.decode_into_parallel(out, threads)
            } else {
                chunk.decode_into(out)
            }
            .unwrap_or_else(|e| panic!("{path}: {e}"));
            times.push(t.elapsed().as_secs_f64());
        }
        let gbps = |t: f64| chunk.nbytes() as f64 / t / 1e9;
        let ramp: Vec<String> = times[..8]
            .iter()
            .map(|&t| format!("{:.1}", gbps(t)))
            .collect();
        times.sort_by(f64::total_cmp);
        println!(
            "{} best {:.2} med {:.2} ramp {}",
            path.rsplit('/').next().unwrap_or(path),
            gbps(times[0]),
            gbps(times[times.len() / 2]),
            ramp.join(" ")
        );
    }
}
