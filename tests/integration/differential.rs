//! Differential tests against references, on random inputs the pinned python-blosc2
//! 4.14.1 (C-Blosc2 3.3.5) writes:
//! - chunks: random data compressed with random codec / filters / typesize / blocksize /
//!   clevel / splitmode; our decoder must return the bytes C-Blosc2 returns
//!   (`B2_DIFF_SEED` replays a run, `B2_DIFF_CASES` sets how many cases, 400 by default);
//! - SQL: random arrays and CTables, random queries (predicates the scan pushes down,
//!   aggregates it may fuse, TopK, GROUP BY); every query's result over the container (run
//!   twice: the second run sees the zone maps the first one made), and over the same file
//!   as a listing table (`Blosc2Format`; a directory container through
//!   `STORED AS BLOSC2`), must equal DataFusion's result over a Parquet copy of the table,
//!   and the table must hold python-blosc2's values (`B2_SQL_DIFF_SEED`,
//!   `B2_SQL_DIFF_CASES`, 24 by default).
//!
//! Seeded; the seed is printed. Needs `B2_PYTHON` (set by `.ci/run`) or a `python3` with
//! blosc2; under CI a missing reference is a failure, elsewhere they print "skipped".

use crate::arrow_values::column_matches;
use crate::util::{compare_batches, sha256_hex};
use datafusion::dataframe::DataFrameWriteOptions;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_blosc2::chunk::{Chunk, DecodeLimits};
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
use std::process::Command;
use std::sync::Arc;

/// Cases per run unless `B2_DIFF_CASES` says otherwise.
const CASES: u32 = 400;

/// The Python with the pinned python-blosc2, or `None` (after saying the test is
/// skipped) when there is none; under CI a missing reference is a failure.
fn reference_python(test: &str) -> Option<String> {
    let python = std::env::var("B2_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = Command::new(&python)
        .args(["-c", "import blosc2; assert blosc2.__version__ == '4.14.1'"])
        .output();
    if probe.is_ok_and(|o| o.status.success()) {
        return Some(python);
    }
    assert!(
        std::env::var("CI").is_err(),
        "CI must provide python-blosc2 4.14.1 (B2_PYTHON={python})"
    );
    eprintln!("{test} skipped: no python-blosc2 4.14.1 at {python:?} (set B2_PYTHON)");
    None
}

/// `seed_var`'s value, else the clock's seconds.
fn seed(seed_var: &str) -> u64 {
    std::env::var(seed_var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(1)
        })
}

/// `var`'s value, else `default`.
fn cases(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `tests/fixtures/<script> SEED N DIR`, failing with its stderr.
fn generate(python: &str, script: &str, seed: u64, cases: u32, dir: &std::path::Path) {
    let script = format!("{}/tests/fixtures/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(python)
        .args([
            &script,
            &seed.to_string(),
            &cases.to_string(),
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "seed {seed}: generator failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn random_chunks_match_c_blosc2() {
    let Some(python) = reference_python("differential test") else {
        return;
    };
    let seed = seed("B2_DIFF_SEED");
    let cases = cases("B2_DIFF_CASES", CASES);
    eprintln!(
        "differential test: seed {seed} ({cases} cases; replay with B2_DIFF_SEED={seed} B2_DIFF_CASES={cases})"
    );
    let dir = tempfile::tempdir().unwrap();
    generate(&python, "differential.py", seed, cases, dir.path());
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

/// One generated container and its queries (`{T}` stands for the table).
struct SqlCase {
    path: String,
    desc: String,
    queries: Vec<String>,
    /// python-blosc2's values: `columns` (name → every live value, in `order_by` order).
    expect: serde_json::Value,
    /// Whether to compare with the same location as a listing table.
    listing: bool,
}

impl SqlCase {
    fn from_json(v: &serde_json::Value) -> SqlCase {
        let text = |k: &str| v[k].as_str().unwrap().to_string();
        let queries = v["queries"].as_array().unwrap();
        SqlCase {
            path: text("path"),
            desc: text("desc"),
            queries: queries.iter().map(|q| q.as_str().unwrap().into()).collect(),
            expect: v["expect"].clone(),
            listing: v["listing"].as_bool().unwrap(),
        }
    }
}

/// Every value of `table` in `ctx` against the writer's (`expect`: `order_by`, and
/// `columns`, name → values as `json_of` writes them).
async fn check_values(
    ctx: &SessionContext,
    table: &str,
    expect: &serde_json::Value,
) -> Result<(), String> {
    let order = expect["order_by"].as_str().unwrap();
    let batches = collect(ctx, &format!("SELECT * FROM {table} ORDER BY {order}")).await?;
    let columns = expect["columns"].as_object().unwrap();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    for (name, want) in columns {
        let want = want.as_array().unwrap();
        if rows != want.len() {
            return Err(format!("{rows} rows, the writer's {}", want.len()));
        }
        column_matches(&batches, name, want)?;
    }
    Ok(())
}

/// Runs `sql`, or says why it failed.
async fn collect(
    ctx: &SessionContext,
    sql: &str,
) -> Result<Vec<datafusion::arrow::array::RecordBatch>, String> {
    let df = ctx.sql(sql).await.map_err(|e| e.to_string())?;
    df.collect().await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sql_matches_datafusion_over_parquet() {
    let Some(python) = reference_python("SQL differential test") else {
        return;
    };
    let seed = seed("B2_SQL_DIFF_SEED");
    let cases = cases("B2_SQL_DIFF_CASES", 24);
    eprintln!(
        "SQL differential test: seed {seed} ({cases} tables; replay with B2_SQL_DIFF_SEED={seed} B2_SQL_DIFF_CASES={cases})"
    );
    let dir = tempfile::tempdir().unwrap();
    generate(&python, "sql_differential.py", seed, cases, dir.path());
    let manifest = std::fs::read_to_string(dir.path().join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let manifest: Vec<SqlCase> = manifest
        .as_array()
        .unwrap()
        .iter()
        .map(SqlCase::from_json)
        .collect();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (i, case) in manifest.iter().enumerate() {
        let path = dir.path().join(&case.path);
        let location = path.to_str().unwrap();
        // 1 to 4 partitions: units split between partitions in every way. Batches of 37
        // or 100 rows for some tables: smaller units, so that N-d scans go chunk by
        // chunk (zoned) and zones split between partitions.
        let batch = [8192, 100, 8192, 37, 8192][i % 5];
        let config = || {
            SessionConfig::new()
                .with_target_partitions(1 + i % 4)
                .with_batch_size(batch)
        };
        let ctx = SessionContext::new_with_config(config());
        ctx.enable_blosc2();
        ctx.register_blosc2("t", location, Blosc2Options::default())
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.desc));
        // The same file as DataFusion's listing table over `Blosc2Format`; a directory
        // container (or a store leaf) through `CREATE EXTERNAL TABLE … STORED AS BLOSC2`.
        // Not for a directory of members, which a listing table reads without `filename`
        // and with hive keys its own way.
        let listed = case.listing;
        if listed && path.is_file() {
            let ext = format!(".{}", case.path.rsplit('.').next().unwrap());
            let options = datafusion::datasource::listing::ListingOptions::new(Arc::new(
                datafusion_blosc2::provider::Blosc2Format::default(),
            ))
            .with_file_extension(ext);
            ctx.register_listing_table("l", location, options, None, None)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", case.desc));
        } else if listed {
            ctx.sql(&format!(
                "CREATE EXTERNAL TABLE l STORED AS BLOSC2 LOCATION '{location}'"
            ))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.desc));
        }
        // The reference: DataFusion over a Parquet copy, without Parquet statistics:
        // they leave NaN out, and DataFusion 55 answers max() from them and prunes row
        // groups and pages with them (`x >= 70000` then misses the NaN rows).
        let parquet = dir.path().join(format!("copy{i}.parquet"));
        ctx.table("t")
            .await
            .unwrap()
            .write_parquet(
                parquet.to_str().unwrap(),
                DataFrameWriteOptions::new().with_single_file_output(true),
                None,
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.desc));
        let reference = SessionContext::new_with_config(
            config()
                .set_bool("datafusion.execution.collect_statistics", false)
                .set_bool("datafusion.execution.parquet.pruning", false)
                .set_bool("datafusion.execution.parquet.enable_page_index", false),
        );
        reference
            .register_parquet(
                "p",
                parquet.to_str().unwrap(),
                ParquetReadOptions::default(),
            )
            .await
            .unwrap();
        if let Err(e) = check_values(&ctx, "t", &case.expect).await {
            failures.push(format!("{} ({}), values: {e}", case.path, case.desc));
        }
        for q in &case.queries {
            let want = collect(&reference, &q.replace("{T}", "p")).await;
            let want = match want {
                Ok(w) => w,
                Err(e) => panic!("{} ({}): over Parquet: {q}: {e}", case.path, case.desc),
            };
            let runs = [("t", "first run"), ("t", "second run"), ("l", "listing")];
            for (table, run) in runs.into_iter().filter(|r| listed || r.0 != "l") {
                compared += 1;
                let got = collect(&ctx, &q.replace("{T}", table)).await;
                if let Err(e) = got.and_then(|got| compare_batches(&got, &want, 1e-9)) {
                    failures.push(format!(
                        "{} ({}), {run}: {q}\n    {e}",
                        case.path, case.desc
                    ));
                }
            }
        }
    }
    eprintln!("SQL differential test: {compared} results compared");
    assert!(
        failures.is_empty(),
        "seed {seed}: {} of {compared} results differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
