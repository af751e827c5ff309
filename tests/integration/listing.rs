//! `Blosc2Format` under DataFusion's own `ListingTable`: every value of single-file
//! containers, byte-range splits, hive partition columns, pruning on static and dynamic
//! filters, and errors that name the file.

use crate::arrow_values::{check_table_values, json_of, open};
use crate::util::{explain, fixture};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::datasource::listing::ListingOptions;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::arrow_reader::reader::read_all;
use datafusion_blosc2::provider::{Blosc2Format, Blosc2SessionExt};
use serde_json::Value;
use std::sync::Arc;

/// A session with `partitions` target partitions; with `split`, files of any size are
/// cut into byte ranges.
fn session(partitions: usize, split: bool) -> SessionContext {
    let mut cfg = SessionConfig::new().with_target_partitions(partitions);
    if split {
        cfg.options_mut().optimizer.repartition_file_min_size = 0;
    }
    SessionContext::new_with_config(cfg)
}

/// Registers the listing table `t` over `path` (a file or a directory) with the files
/// ending in `ext` and the given partition columns.
async fn register(ctx: &SessionContext, path: &str, ext: &str, parts: Vec<(String, DataType)>) {
    let options = ListingOptions::new(Arc::new(Blosc2Format::default()))
        .with_file_extension(ext)
        .with_table_partition_cols(parts);
    ctx.register_listing_table("t", path, options, None, None)
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// Every cell of `batches`, row by row, as JSON.
pub fn cells(batches: &[RecordBatch]) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(b.columns().iter().map(|c| json_of(c.as_ref(), r)).collect());
        }
    }
    out
}

/// The rows of `sql`, as JSON cells.
async fn query(ctx: &SessionContext, sql: &str) -> Vec<Vec<Value>> {
    let batches = ctx
        .sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    cells(&batches)
}

/// `rows` sorted by their text, to compare scans whose partitions interleave.
fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<String> {
    let mut s: Vec<String> = rows
        .drain(..)
        .map(|r| Value::Array(r).to_string())
        .collect();
    s.sort();
    s
}

/// Every cell of `batches`, row by row, as Arrow displays it (exact for every type).
fn texts(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    use datafusion::arrow::util::display::array_value_to_string;
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            out.push(
                b.columns()
                    .iter()
                    .map(|c| array_value_to_string(c, r).unwrap())
                    .collect(),
            );
        }
    }
    out
}

/// The single-file arrays: every row through a listing table on one partition against
/// the crate's reader (whose values `arrow_values` checks against the writers'), in
/// order for 1-D arrays (N-d arrays come chunk by chunk); and the same rows when the
/// file is cut into byte ranges.
#[tokio::test]
async fn listing_tables_read_every_array_row() {
    let files = [
        "b2nd/geom-0d.b2nd",
        "b2nd/geom-1d-big.b2nd",
        "b2nd/geom-2d-tiles.b2nd",
        "b2nd/geom-3d.b2nd",
        "b2nd/geom-empty.b2nd",
        "b2nd/dtype-le_U3.b2nd",
        "b2nd/dtype-le_f2.b2nd",
        "b2nd/dtype-le_M8_ns.b2nd",
        "b2nd/dtype-na_S5.b2nd",
        "b2nd/dtype-na_b1.b2nd",
        "b2nd/codec-zstd-bytedelta.b2nd",
        "b2nd/zfp-prec-2d.b2nd",
        "b2nd/zfp-acc-4d.b2nd",
        "schunk/many-chunks.b2frame",
        "schunk/sparse-reordered.b2frame",
        "schunk/special-nan.b2frame",
    ];
    for rel in files {
        let (schema, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
        let mut want = texts(&batches);
        let path = fixture(rel);
        let ext = format!(".{}", rel.rsplit('.').next().unwrap());
        let run = |ctx: SessionContext| {
            let (path, ext) = (path.clone(), ext.clone());
            async move {
                register(&ctx, path.to_str().unwrap(), &ext, vec![]).await;
                let plan = explain(&ctx, "SELECT * FROM t").await;
                let batches = ctx.sql("SELECT * FROM t").await.unwrap().collect().await;
                (
                    plan,
                    texts(&batches.unwrap_or_else(|e| panic!("{rel}: {e}"))),
                )
            }
        };
        let (_, mut got) = run(session(1, false)).await;
        assert_eq!(got.len(), want.len(), "{rel}: rows");
        if schema.index_of("dim_1").is_ok() {
            got.sort();
            want.sort();
        }
        assert_eq!(got, want, "{rel}");
        let (plan, mut split) = run(session(4, true)).await;
        if want.len() > 100_000 {
            assert!(plan.contains(".."), "{rel}: not cut into ranges:\n{plan}");
        }
        split.sort();
        want.sort();
        assert_eq!(split, want, "{rel}: byte ranges");
    }
}

/// Single-file tables (`.b2z` CTables, BatchArrays, ObjectArrays): every live value
/// against the writer's, and the same rows over byte ranges; a CTable's computed columns
/// against python-blosc2's values.
#[tokio::test]
async fn listing_tables_read_every_table_value() {
    let v: Value = crate::util::expected_json("tables.json");
    let (mut checked, mut computed) = (0, 0);
    for (rel, t) in v.as_object().unwrap() {
        let path = fixture(rel);
        if !path.is_file() || rel.ends_with(".b2e") {
            continue;
        }
        let ext = format!(".{}", rel.rsplit('.').next().unwrap());
        // The reference: the crate's reader, checked here against the writer's values.
        check_table_values(rel, open(rel).await, t).await;
        let (_, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
        let want = cells(&batches);
        // The stored columns (a CTable's computed ones follow them).
        let stored: Vec<String> = t["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| format!("\"{}\"", c.as_str().unwrap()))
            .collect();
        let sql = format!("SELECT {} FROM t", stored.join(", "));
        let ctx = session(1, false);
        register(&ctx, path.to_str().unwrap(), &ext, vec![]).await;
        assert_eq!(query(&ctx, &sql).await, want, "{rel}");
        if t.get("computed").is_some() {
            computed += crate::arrow_values::check_computed(&ctx, rel, t).await;
        }
        let split = session(3, true);
        register(&split, path.to_str().unwrap(), &ext, vec![]).await;
        assert_eq!(
            sorted(query(&split, &sql).await),
            sorted(want),
            "{rel}: byte ranges"
        );
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} single-file tables");
    assert!(computed >= 50, "only {computed} computed columns");
}

/// Filters and aggregates over a listed CTable's computed columns, over byte ranges on
/// three partitions, with zone maps recorded by the first statements: the table
/// provider's answers (whose values `computed_columns_match_python_blosc2` checks).
#[tokio::test]
async fn listing_tables_filter_on_computed_columns() {
    use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
    let path = fixture("ctable/computed-functions.b2z");
    let path = path.to_str().unwrap();
    let listed = session(3, true);
    register(&listed, path, ".b2z", vec![]).await;
    let provider = session(3, false);
    provider
        .register_blosc2("t", path, Blosc2Options::default())
        .await
        .unwrap();
    for sql in [
        "SELECT count(*) FROM t WHERE mx > 0.5",
        "SELECT count(*) FROM t WHERE rj < 0 AND i > 0",
        "SELECT count(*), sum(cli), min(clsf) FROM t WHERE inf OR sgi = 1",
        "SELECT sum(rcs), max(mxis) FROM t WHERE j > 0",
        "SELECT count(*) FROM t WHERE mx > 0.5",
    ] {
        assert_eq!(
            query(&listed, sql).await,
            query(&provider, sql).await,
            "{sql}"
        );
    }
}

/// A hive-partitioned directory: the files' rows with the partition values DataFusion
/// takes from the paths, against the writer's (the sparse-frame member is a directory,
/// not a file, so a listing table does not see it); a filter mixing a partition column
/// with a file column; pruning on a partition column alone.
#[tokio::test]
async fn listing_tables_take_hive_partitions() {
    let v: Value = crate::util::expected_json("partitioned.json");
    let t = &v["partitioned/temps"];
    let sparse = "year=2024/station=north/part-0.b2nd";
    // (dim_0, value, year, station) of the file members.
    let want: Vec<Vec<Value>> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r[4] != sparse)
        .map(|r| {
            let year: i32 = r[2].as_str().unwrap().parse().unwrap();
            vec![r[0].clone(), r[1].clone(), year.into(), r[3].clone()]
        })
        .collect();
    assert!(!want.is_empty());
    let ctx = session(2, false);
    let parts = vec![
        ("year".to_string(), DataType::Int32),
        ("station".to_string(), DataType::Utf8),
    ];
    register(
        &ctx,
        &format!("{}/", fixture("partitioned/temps").display()),
        ".b2nd",
        parts,
    )
    .await;
    let got = sorted(query(&ctx, "SELECT dim_0, value, year, station FROM t").await);
    assert_eq!(got, sorted(want.clone()));

    let keep = |r: &Vec<Value>| r[2] == 2023 || r[1].as_f64().unwrap() > 20.0;
    let got = query(
        &ctx,
        "SELECT dim_0, value, year, station FROM t WHERE year = 2023 OR value > 20",
    )
    .await;
    let expect: Vec<Vec<Value>> = want.iter().filter(|r| keep(r)).cloned().collect();
    assert_eq!(sorted(got), sorted(expect));

    // No file column read: batches of row counts alone.
    let n2023 = want.iter().filter(|r| r[2] == 2023).count();
    let got = query(
        &ctx,
        "SELECT count(*) FROM t WHERE year = 2023 AND random() >= 0",
    )
    .await;
    assert_eq!(got, vec![vec![Value::from(n2023)]]);

    let plan = explain(&ctx, "SELECT value FROM t WHERE station = 'south east'").await;
    assert!(
        plan.contains("station=south%20east") && !plan.contains("station=north"),
        "{plan}"
    );
}

/// The value of the metric `name` of the Blosc2 scan in `EXPLAIN ANALYZE <sql>` (summed
/// over partitions).
pub(crate) async fn metric(ctx: &SessionContext, sql: &str, name: &str) -> usize {
    let plan = query(ctx, &format!("EXPLAIN ANALYZE {sql}")).await;
    let text: String = plan
        .iter()
        .map(|r| r[1].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let scan = text
        .lines()
        .find(|l| l.contains("file_type=blosc2"))
        .unwrap_or_else(|| panic!("no scan in\n{text}"));
    let key = format!("{name}=");
    let at = scan
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {scan}"));
    scan[at + key.len()..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// Files opened once are kept in the session's file metadata cache (schema inference
/// opens them): every later open, by any byte range of any query, takes them from it, and
/// the rows are those of a session whose cache keeps nothing.
#[tokio::test]
async fn listing_tables_keep_opened_files_in_the_session_cache() {
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    let cases = [
        (
            "b2nd/geom-1d-big.b2nd",
            "SELECT sum(dim_0 * 2), count(value) FROM t",
        ),
        (
            "b2nd/geom-2d-tiles.b2nd",
            "SELECT * FROM t WHERE dim_0 BETWEEN 3 AND 9",
        ),
        ("ctable/people.b2z", "SELECT * FROM t WHERE id > 1"),
    ];
    for (rel, sql) in cases {
        let path = fixture(rel);
        let ext = format!(".{}", rel.rsplit('.').next().unwrap());
        let cached = session(3, true);
        register(&cached, path.to_str().unwrap(), &ext, vec![]).await;
        let mut cfg = SessionConfig::new().with_target_partitions(3);
        cfg.options_mut().optimizer.repartition_file_min_size = 0;
        let runtime = RuntimeEnvBuilder::new()
            .with_metadata_cache_limit(0)
            .build_arc()
            .unwrap();
        let uncached = SessionContext::new_with_config_rt(cfg, runtime);
        register(&uncached, path.to_str().unwrap(), &ext, vec![]).await;
        for _ in 0..2 {
            let opened = metric(&cached, sql, "files_opened").await;
            assert!(opened >= 1, "{rel}");
            assert_eq!(
                metric(&cached, sql, "files_from_cache").await,
                opened,
                "{rel}"
            );
        }
        assert_eq!(metric(&uncached, sql, "files_from_cache").await, 0, "{rel}");
        let want = sorted(query(&uncached, sql).await);
        assert!(!want.is_empty(), "{rel}");
        assert_eq!(sorted(query(&cached, sql).await), want, "{rel}");
    }
}

/// Filters prune the units their statistics rule out: a coordinate range (static), a
/// TopK's threshold (dynamic), with the same rows as the crate's reader gives.
#[tokio::test]
async fn listing_tables_prune_units() {
    let rel = "b2nd/geom-1d-big.b2nd";
    let (_, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
    let all = cells(&batches);
    let ctx = session(2, false);
    register(&ctx, fixture(rel).to_str().unwrap(), ".b2nd", vec![]).await;
    let sql = "SELECT dim_0, value FROM t WHERE dim_0 >= 99000";
    let want: Vec<Vec<Value>> = all
        .iter()
        .filter(|r| r[0].as_i64().unwrap() >= 99000)
        .cloned()
        .collect();
    assert_eq!(sorted(query(&ctx, sql).await), sorted(want));
    // Units are planned over the range's chunks only.
    let total = metric(&ctx, sql, "chunks_total").await;
    let pruned = metric(&ctx, sql, "chunks_pruned").await;
    assert!(pruned > 0 && pruned < total, "{pruned} of {total} pruned");
    assert_eq!(metric(&ctx, sql, "units_total").await, total - pruned);

    // Coordinate ranges cut the units' boxes: the scan reads exactly the rectangle, and
    // a join reads exactly the coordinates its build side holds.
    let rel2 = "b2nd/geom-2d-tiles.b2nd";
    let (_, batches) = read_all(open(rel2).await, 1 << 20).await.unwrap();
    let tiles = texts(&batches);
    let coord = |r: &Vec<String>, d: usize| r[d].parse::<i64>().unwrap();
    let ctx = session(2, false);
    register(&ctx, fixture(rel2).to_str().unwrap(), ".b2nd", vec![]).await;
    let sql = "SELECT * FROM t WHERE dim_0 BETWEEN 5 AND 20 AND dim_1 > 6 AND dim_1 < 31";
    let mut want: Vec<Vec<String>> = tiles
        .iter()
        .filter(|r| (5..=20).contains(&coord(r, 0)) && (7..31).contains(&coord(r, 1)))
        .cloned()
        .collect();
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut got = texts(&batches);
    got.sort();
    want.sort();
    assert_eq!(got, want, "{sql}");
    assert_eq!(metric(&ctx, sql, "output_rows").await, 16 * 24, "{sql}");
    let sql = "SELECT t.* FROM t JOIN (VALUES (3), (4)) k(c) ON t.dim_1 = k.c";
    let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let mut got = texts(&batches);
    let mut want: Vec<Vec<String>> = tiles
        .iter()
        .filter(|r| (3..=4).contains(&coord(r, 1)))
        .cloned()
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{sql}");
    assert_eq!(metric(&ctx, sql, "output_rows").await, 37 * 2, "{sql}");

    // Zone maps: the first scan records each chunk's min/max of `value`, the next one
    // through the same format prunes on them; a format without them prunes nothing.
    let values: Vec<f64> = all.iter().map(|r| r[1].as_f64().unwrap()).collect();
    let mut sorted_values = values.clone();
    sorted_values.sort_by(f64::total_cmp);
    let threshold = sorted_values[sorted_values.len() - 10];
    let sql = format!("SELECT count(*) FROM t WHERE value >= {threshold:?}");
    let want = values.iter().filter(|&&v| v >= threshold).count();
    for zone_maps in [true, false] {
        let ctx = session(2, false);
        let options = ListingOptions::new(Arc::new(Blosc2Format::new().with_zone_maps(zone_maps)));
        ctx.register_listing_table("t", fixture(rel).to_str().unwrap(), options, None, None)
            .await
            .unwrap();
        assert_eq!(query(&ctx, &sql).await, vec![vec![Value::from(want)]]);
        assert_eq!(
            metric(&ctx, &sql, "units_pruned_by_stats").await > 0,
            zone_maps
        );
        assert_eq!(query(&ctx, &sql).await, vec![vec![Value::from(want)]]);
    }

    // One partition reads the chunk grid in order: after the first chunk the TopK's
    // threshold on dim_1 rules out every chunk to its right.
    let rel = "b2nd/geom-2d-tiles.b2nd";
    let (_, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
    let mut want: Vec<Vec<Value>> = cells(&batches);
    want.sort_by_key(|r| (r[1].as_i64().unwrap(), r[0].as_i64().unwrap()));
    want.truncate(5);
    let ctx = session(1, false);
    register(&ctx, fixture(rel).to_str().unwrap(), ".b2nd", vec![]).await;
    let sql = "SELECT * FROM t ORDER BY dim_1, dim_0 LIMIT 5";
    assert_eq!(query(&ctx, sql).await, want);
    let dynamic = metric(&ctx, sql, "units_pruned_by_dynamic_filters").await;
    assert!(dynamic > 0, "no unit pruned by the TopK's filter");

    // `dim_k DESC`: the units are read last first, so the first units set the TopK's
    // threshold and rule out the others (3-D: the last unit's box starts mid-chunk).
    for (rel, ndim) in [("b2nd/geom-1d-big.b2nd", 1), ("b2nd/geom-3d.b2nd", 3)] {
        let (_, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
        let mut want = texts(&batches);
        let key = |r: &Vec<String>| -> Vec<i64> {
            r[..ndim]
                .iter()
                .map(|c| -c.parse::<i64>().unwrap())
                .collect()
        };
        want.sort_by_key(key);
        want.truncate(7);
        let ctx = session(1, false);
        register(&ctx, fixture(rel).to_str().unwrap(), ".b2nd", vec![]).await;
        let order: Vec<String> = (0..ndim).map(|d| format!("dim_{d} DESC")).collect();
        let sql = format!("SELECT * FROM t ORDER BY {} LIMIT 7", order.join(", "));
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        assert_eq!(texts(&batches), want, "{rel}");
        assert!(explain(&ctx, &sql).await.contains("reverse_units=true"));
        let total = metric(&ctx, &sql, "units_total").await;
        let dynamic = metric(&ctx, &sql, "units_pruned_by_dynamic_filters").await;
        assert!(
            total > 8 && total - dynamic <= 2,
            "{rel}: {dynamic} of {total} pruned"
        );
    }
}

/// Comparisons of coordinates with integers are applied by the scan exactly (no
/// `FilterExec` left for them) and give the rows the filter allows, whatever the ranges
/// (past the shape, negative, empty, reversed operands), the partitions and byte-range
/// splits; other conjuncts stay in a `FilterExec`.
#[tokio::test]
async fn listing_tables_apply_coordinate_ranges_exactly() {
    type Keep = fn(&[i64]) -> bool;
    let cases: [(&str, &str, bool, Keep); 9] = [
        (
            "b2nd/geom-2d-tiles.b2nd",
            "dim_0 BETWEEN 5 AND 20 AND dim_1 > 6 AND dim_1 < 31",
            true,
            |c| (5..=20).contains(&c[0]) && (7..31).contains(&c[1]),
        ),
        ("b2nd/geom-2d-tiles.b2nd", "dim_0 = 7", true, |c| c[0] == 7),
        (
            "b2nd/geom-2d-tiles.b2nd",
            "3 <= dim_1 AND 30 > dim_0",
            true,
            |c| c[1] >= 3 && c[0] < 30,
        ),
        (
            "b2nd/geom-2d-tiles.b2nd",
            "dim_0 >= -5 AND dim_0 < 1000000",
            true,
            |_| true,
        ),
        (
            "b2nd/geom-2d-tiles.b2nd",
            "dim_0 > 20 AND dim_0 < 10",
            true,
            |_| false,
        ),
        ("b2nd/geom-2d-tiles.b2nd", "dim_1 < 0", true, |_| false),
        (
            "b2nd/geom-2d-tiles.b2nd",
            "dim_0 < 4 OR dim_1 = 2",
            false,
            |c| c[0] < 4 || c[1] == 2,
        ),
        (
            "b2nd/geom-3d.b2nd",
            "dim_2 >= 2 AND dim_0 <= 1 AND value > 10",
            false,
            |c| c[2] >= 2 && c[0] <= 1,
        ),
        (
            "b2nd/geom-1d-big.b2nd",
            "dim_0 BETWEEN 12345 AND 45678",
            true,
            |c| (12345..=45678).contains(&c[0]),
        ),
    ];
    for (rel, filter, exact, keep) in cases {
        let (schema, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
        let ndim = schema
            .fields()
            .iter()
            .filter(|f| f.name().starts_with("dim_"))
            .count();
        let value_at = schema.index_of("value").unwrap();
        let mut want: Vec<Vec<String>> = texts(&batches)
            .into_iter()
            .filter(|r| {
                let c: Vec<i64> = r[..ndim].iter().map(|x| x.parse().unwrap()).collect();
                keep(&c)
                    && (!filter.contains("value") || r[value_at].parse::<f64>().unwrap() > 10.0)
            })
            .collect();
        want.sort();
        for (partitions, split) in [(1, false), (2, false), (3, true)] {
            let ctx = session(partitions, split);
            register(&ctx, fixture(rel).to_str().unwrap(), ".b2nd", vec![]).await;
            let sql = format!("SELECT * FROM t WHERE {filter}");
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let mut got = texts(&batches);
            got.sort();
            assert_eq!(got, want, "{rel}: {sql}, {partitions} partitions");
            let plan = explain(&ctx, &sql).await;
            assert_eq!(!plan.contains("FilterExec"), exact, "{rel}: {sql}\n{plan}");
            let sql = format!("SELECT count(*) FROM t WHERE {filter}");
            let count = query(&ctx, &sql).await;
            assert_eq!(count, vec![vec![Value::from(want.len())]], "{rel}: {sql}");
        }
    }
}

/// A listing table's file with FULL indexes prunes on them when it is opened: a point
/// lookup in a column in no order reads one unit of 16, a value that is not there none,
/// and the answers are the table provider's.
#[tokio::test]
async fn listing_tables_prune_on_full_indexes() {
    let rel = "ctable/indexed.b2z";
    let ctx = session(2, false);
    register(&ctx, fixture(rel).to_str().unwrap(), ".b2z", vec![]).await;
    let provider = SessionContext::new();
    provider
        .register_blosc2("p", fixture(rel).to_str().unwrap(), Default::default())
        .await
        .unwrap();
    for (where_, pruned) in [
        ("r = 3000", 15),
        ("r = 3001", 16),
        ("r IN (0, 3000) AND q >= -200", 14),
    ] {
        let sql = format!("SELECT r, q, w FROM t WHERE {where_} ORDER BY r");
        assert_eq!(
            query(&ctx, &sql).await,
            query(&provider, &sql.replace("FROM t", "FROM p")).await,
            "{where_}"
        );
        let n = metric(&ctx, &sql, "units_pruned_by_stats").await;
        assert!(n >= pruned, "{where_}: {n} units pruned");
    }
}

/// `count(*)` of whole files comes from their statistics: no scan.
#[tokio::test]
async fn listing_tables_count_from_statistics() {
    let ctx = session(2, false);
    register(
        &ctx,
        fixture("b2nd/geom-3d.b2nd").to_str().unwrap(),
        ".b2nd",
        vec![],
    )
    .await;
    assert_eq!(
        query(&ctx, "SELECT count(*), min(dim_2), max(dim_0) FROM t").await,
        vec![vec![Value::from(1320), Value::from(0), Value::from(9)]]
    );
    let plan = explain(&ctx, "SELECT count(*) FROM t").await;
    assert!(!plan.contains("DataSourceExec"), "{plan}");

    // A CTable with no deleted row: exact extrema from its SUMMARY sidecars, against the
    // writer's values (`k` holds nulls, so its extrema need a scan).
    let rel = "ctable/events-whole.b2z";
    let v: Value = crate::util::expected_json("tables.json");
    let t: Vec<i64> = v[rel]["columns"]["t"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect();
    let ctx = session(2, false);
    register(&ctx, fixture(rel).to_str().unwrap(), ".b2z", vec![]).await;
    // The columns the statistics open for their SUMMARY extrema stay open in the file
    // the session caches (`columns_open` in its cache entry).
    let cache = ctx.runtime_env().cache_manager.get_file_metadata_cache();
    let key = object_store::path::Path::from_filesystem_path(fixture(rel)).unwrap();
    let columns_open = || {
        let entry = cache.get(&key).expect("cached by schema inference");
        entry.file_metadata.extra_info()["columns_open"]
            .parse::<usize>()
            .unwrap()
    };
    let before = columns_open();
    let sql = "SELECT count(*), min(t), max(t) FROM t";
    let want = vec![vec![
        Value::from(t.len()),
        Value::from(*t.iter().min().unwrap()),
        Value::from(*t.iter().max().unwrap()),
    ]];
    assert_eq!(query(&ctx, sql).await, want);
    assert!(columns_open() > before, "{before}");
    let plan = explain(&ctx, sql).await;
    assert!(!plan.contains("DataSourceExec"), "{plan}");
    let plan = explain(&ctx, "SELECT min(k) FROM t").await;
    assert!(plan.contains("DataSourceExec"), "{plan}");

    // Nullable columns: `y` holds no null (python-blosc2 never wrote its mask sidecar),
    // so its count is a statistic; `x`'s sidecar exists, so its count is scanned.
    let rel = "ctable/sparse-nulls.b2z";
    let cols = &v[rel]["columns"];
    let count = |c: &str| {
        cols[c]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| !x.is_null())
            .count()
    };
    let ctx = session(2, false);
    register(&ctx, fixture(rel).to_str().unwrap(), ".b2z", vec![]).await;
    let sql = "SELECT count(y), count(*) FROM t";
    let plan = explain(&ctx, sql).await;
    assert!(!plan.contains("DataSourceExec"), "{plan}");
    let n = cols["id"].as_array().unwrap().len();
    assert_eq!(
        query(&ctx, sql).await,
        vec![vec![Value::from(count("y")), Value::from(n)]]
    );
    let sql = "SELECT count(x) FROM t";
    assert!(explain(&ctx, sql).await.contains("DataSourceExec"));
    assert_eq!(query(&ctx, sql).await, vec![vec![Value::from(count("x"))]]);
}

/// A file that is not a container, and files whose columns disagree: errors that name
/// the file.
#[tokio::test]
async fn listing_table_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.b2nd"), b"not a frame at all").unwrap();
    let ctx = session(1, false);
    let options = ListingOptions::new(Arc::new(Blosc2Format::default()));
    let path = format!("{}/", dir.path().display());
    let err = ctx
        .register_listing_table("t", &path, options.clone(), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("notes.b2nd"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    for (src, dst) in [
        ("b2nd/dtype-le_f8.b2nd", "a.b2nd"),
        ("b2nd/dtype-le_U3.b2nd", "b.b2nd"),
    ] {
        std::fs::copy(fixture(src), dir.path().join(dst)).unwrap();
    }
    let path = format!("{}/", dir.path().display());
    let err = ctx
        .register_listing_table("u", &path, options, None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("b.b2nd") || err.contains("a.b2nd"), "{err}");
}

/// Files in a store other than the local file system (here in memory, as a remote store
/// would be reached): the same rows, byte ranges included.
#[tokio::test]
async fn listing_tables_read_through_any_object_store() {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload, path::Path};
    let store = Arc::new(InMemory::new());
    for rel in ["b2nd/geom-1d-big.b2nd", "ctable/people.b2z"] {
        let bytes = std::fs::read(fixture(rel)).unwrap();
        store
            .put(&Path::from(rel), PutPayload::from(bytes))
            .await
            .unwrap();
    }
    let url = url::Url::parse("memory://").unwrap();
    for rel in ["b2nd/geom-1d-big.b2nd", "ctable/people.b2z"] {
        let (_, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
        let ctx = session(3, true);
        ctx.register_object_store(&url, store.clone());
        let ext = format!(".{}", rel.rsplit('.').next().unwrap());
        register(&ctx, &format!("memory:///{rel}"), &ext, vec![]).await;
        let got = ctx.sql("SELECT * FROM t").await.unwrap().collect().await;
        let mut got = texts(&got.unwrap_or_else(|e| panic!("{rel}: {e}")));
        let mut want = texts(&batches);
        got.sort();
        want.sort();
        assert_eq!(got, want, "{rel}");
    }
}
