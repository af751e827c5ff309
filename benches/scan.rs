//! SQL scans over Blosc2 containers vs DataFusion over Parquet of the same data, in one
//! run: full aggregates, a dim-range slice, value ranges (SUMMARY / zone-map pruning vs
//! Parquet row-group statistics and page index) and `count(*)`.
//!
//! `cargo bench --bench scan` (needs a release build of DataFusion). The data (10 M rows,
//! `benches/scan_data.py`, python-blosc2 4.14.1 via `B2_PYTHON`) goes to
//! `target/bench-data/scan/`; the Parquet copies are written by DataFusion (`COPY … TO`,
//! default writer settings) from the Blosc2 tables, so both sides hold the same values.
//! The table is printed at the end and written to `target/bench-data/scan-table.md`.

use criterion::Criterion;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/scan")
}

fn python() -> String {
    std::env::var("B2_PYTHON").unwrap_or_else(|_| {
        let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python");
        if std::path::Path::new(venv).exists() {
            venv.into()
        } else {
            "python3".into()
        }
    })
}

/// The queries: (name, SQL over `walk`/`ticks`; the Parquet side uses the same names).
const QUERIES: [(&str, &str); 7] = [
    ("walk: sum(value)", "SELECT sum(value) FROM walk"),
    (
        "walk: 100k-row dim range",
        "SELECT sum(value) FROM walk WHERE dim_0 BETWEEN 5000000 AND 5099999",
    ),
    (
        "walk: value > 2000 (rare)",
        "SELECT count(*) FROM walk WHERE value > 2000",
    ),
    (
        "ticks: sum(price), avg(qty)",
        "SELECT sum(price), avg(qty) FROM ticks",
    ),
    (
        "ticks: 100k-row range on sorted t",
        "SELECT sum(qty) FROM ticks WHERE t BETWEEN 1700005000000000 AND 1700005099999000",
    ),
    (
        "ticks: qty > 990",
        "SELECT count(*) FROM ticks WHERE qty > 990",
    ),
    ("ticks: count(*)", "SELECT count(*) FROM ticks"),
];

async fn contexts(rt_threads: usize) -> (SessionContext, SessionContext) {
    let dir = data_dir();
    let cfg = || SessionConfig::new().with_target_partitions(rt_threads);
    let b2 = SessionContext::new_with_config(cfg());
    for (name, file) in [("walk", "walk.b2nd"), ("ticks", "ticks.b2d")] {
        b2.register_blosc2(
            name,
            dir.join(file).to_str().unwrap(),
            Blosc2Options::default(),
        )
        .await
        .unwrap();
        let pq = dir.join(format!("{name}.parquet"));
        if !pq.exists() {
            b2.sql(&format!(
                "COPY (SELECT * FROM {name}) TO '{}' STORED AS PARQUET",
                pq.display()
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        }
    }
    let pq = SessionContext::new_with_config(cfg());
    for name in ["walk", "ticks"] {
        pq.register_parquet(
            name,
            dir.join(format!("{name}.parquet")).to_str().unwrap(),
            Default::default(),
        )
        .await
        .unwrap();
    }
    (b2, pq)
}

async fn run(ctx: &SessionContext, sql: &str) -> String {
    let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    datafusion::arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string()
}

/// The numbers in two printed results agree (floats to 1e-9 relative: the two sides sum
/// in different orders).
fn same_numbers(a: &str, b: &str) -> bool {
    let nums = |s: &str| -> Vec<f64> {
        s.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))
            .filter_map(|t| t.parse().ok())
            .collect()
    };
    let (x, y) = (nums(a), nums(b));
    x.len() == y.len()
        && x.iter()
            .zip(&y)
            .all(|(p, q)| (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0))
}

fn median_ms(rt: &tokio::runtime::Runtime, ctx: &SessionContext, sql: &str) -> f64 {
    let mut t: Vec<f64> = (0..7)
        .map(|_| {
            let s = Instant::now();
            rt.block_on(run(ctx, sql));
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[3]
}

fn main() {
    let dir = data_dir();
    let st = std::process::Command::new(python())
        .args([
            concat!(env!("CARGO_MANIFEST_DIR"), "/benches/scan_data.py"),
            dir.to_str().unwrap(),
        ])
        .status()
        .expect("run benches/scan_data.py");
    assert!(st.success(), "benches/scan_data.py failed (set B2_PYTHON)");
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .unwrap();
    let (b2, pq) = rt.block_on(contexts(threads));
    let mut c = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    let mut rows = Vec::new();
    for (name, sql) in QUERIES {
        // Same answer on both sides (also warms caches and, for Blosc2, the zone maps).
        let (a, b) = (rt.block_on(run(&b2, sql)), rt.block_on(run(&pq, sql)));
        assert!(
            same_numbers(&a, &b),
            "{name}: Blosc2 and Parquet disagree:\n{a}\n{b}"
        );
        let mut g = c.benchmark_group(name);
        g.bench_function("blosc2", |bch| bch.iter(|| rt.block_on(run(&b2, sql))));
        g.bench_function("parquet", |bch| bch.iter(|| rt.block_on(run(&pq, sql))));
        g.finish();
        let (tb, tp) = (median_ms(&rt, &b2, sql), median_ms(&rt, &pq, sql));
        rows.push(format!("| {name} | {tb:.1} | {tp:.1} | {:.2}× |", tp / tb));
    }
    let size = |p: &str| {
        std::process::Command::new("du")
            .args(["-sh", dir.join(p).to_str().unwrap()])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split('\t')
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default()
    };
    let table = format!(
        "On disk: walk.b2nd {}, walk.parquet {}, ticks.b2d {}, ticks.parquet {}.\n\n| query ({threads} partitions) | Blosc2 ms | Parquet ms | Parquet/Blosc2 |\n|---|---|---|---|\n{}\n",
        size("walk.b2nd"),
        size("walk.parquet"),
        size("ticks.b2d"),
        size("ticks.parquet"),
        rows.join("\n")
    );
    println!("\n{table}");
    std::fs::write(dir.join("../scan-table.md"), table).unwrap();
}
