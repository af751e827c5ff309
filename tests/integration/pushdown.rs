//! Randomized dim-range queries over multi-chunk N-d fixtures, compared with a brute-force
//! evaluation of the same predicate (geom-* arrays hold value = 2 * flat index + 1).
//! Each query also runs with pushdown defeated (`dim_k + 0`), which must agree. A second
//! test does the same for random value ranges with value pruning on.

use crate::listing::metric;
use crate::util::Rng;
use crate::util::explain;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::datasource::listing::ListingOptions;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::provider::Blosc2Format;
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
use std::sync::Arc;

/// A predicate as a Rust closure.
type Pred = Box<dyn Fn(u64) -> bool>;

/// One random predicate on a dim of extent `n` (may reach past the extent), as SQL over
/// `col` and as a Rust closure.
fn predicate(rng: &mut Rng, n: u64, col: &str) -> (String, Pred) {
    let a = rng.next(n + 4) as i64 - 2;
    let b = rng.next(n + 4) as i64 - 2;
    let (lo, hi) = (a.min(b), a.max(b));
    match rng.next(7) {
        0 => (format!("{col} = {a}"), Box::new(move |x| x as i64 == a)),
        1 => (format!("{col} < {a}"), Box::new(move |x| (x as i64) < a)),
        2 => (format!("{col} >= {a}"), Box::new(move |x| x as i64 >= a)),
        3 => (
            format!("{col} BETWEEN {lo} AND {hi}"),
            Box::new(move |x| (lo..=hi).contains(&(x as i64))),
        ),
        4 => (
            format!("{col} IN ({a}, {b}, {})", a + 1),
            Box::new(move |x| [a, b, a + 1].contains(&(x as i64))),
        ),
        5 => (
            format!("({col} < {lo} OR {col} > {hi})"),
            Box::new(move |x| (x as i64) < lo || x as i64 > hi),
        ),
        _ => (
            format!("({col} > {lo} AND {col} <= {hi})"),
            Box::new(move |x| x as i64 > lo && x as i64 <= hi),
        ),
    }
}

fn two_ints(batches: &[RecordBatch]) -> (i64, i64) {
    let b = &batches[0];
    let count = b.column(0).as_primitive::<Int64Type>().value(0);
    let sum = if b.column(1).is_null(0) {
        0
    } else {
        b.column(1).as_primitive::<Int64Type>().value(0)
    };
    (count, sum)
}

/// Registers fixture `rel` twice: as `name`, and as `{name}_plain` with value pruning and
/// zone maps off.
async fn register_pruned_and_plain(ctx: &SessionContext, name: &str, rel: &str) {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    ctx.register_blosc2(name, &path, Blosc2Options::default())
        .await
        .unwrap();
    let plain = Blosc2Options::default()
        .with_value_pruning(false)
        .with_zone_maps(false);
    ctx.register_blosc2(&format!("{name}_plain"), &path, plain)
        .await
        .unwrap();
}

/// `count(*)` and `sum(col)` under `where_` are the same over tables `pruned` and `plain`.
async fn same_count_and_sum(
    ctx: &SessionContext,
    col: &str,
    (pruned, plain): (&str, &str),
    where_: &str,
) {
    let run = |t: &str| format!("SELECT count(*), sum({col}) FROM {t} WHERE {where_}");
    let mut answers = Vec::new();
    for t in [pruned, plain] {
        answers.push(two_ints(
            &ctx.sql(&run(t)).await.unwrap().collect().await.unwrap(),
        ));
    }
    assert_eq!(answers[0], answers[1], "{}", run(pruned));
}

/// The multi-chunk `geom-*` arrays (value = 2 * flat index + 1) and their shapes,
/// registered as `geom_3d`, `geom_2d`, `geom_1d_big`, `geom_2d_rows`, `geom_3d_rows`,
/// `geom_2d_tiles`, `geom_3d_tiles` in a session of 3 partitions and 100-row batches (so
/// scans have many units and partitions).
async fn geom_session() -> (SessionContext, [(&'static str, Vec<u64>); 7]) {
    let ctx = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(3)
            .with_batch_size(100),
    );
    let base = env!("CARGO_MANIFEST_DIR");
    let fixtures: [(&str, Vec<u64>); 7] = [
        ("geom-3d", vec![10, 11, 12]),
        ("geom-2d", vec![50, 37]),
        ("geom-1d-big", vec![100_000]),
        ("geom-2d-rows", vec![37, 24]),
        ("geom-3d-rows", vec![9, 4, 5]),
        ("geom-2d-tiles", vec![37, 40]),
        ("geom-3d-tiles", vec![9, 8, 10]),
    ];
    for (name, _) in &fixtures {
        ctx.register_blosc2(
            &name.replace('-', "_"),
            &format!("{base}/tests/fixtures/b2nd/{name}.b2nd"),
            Blosc2Options::default(),
        )
        .await
        .unwrap();
    }
    (ctx, fixtures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_dim_ranges_match_brute_force() {
    let (ctx, fixtures) = geom_session().await;
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for q in 0..150 {
        let (name, shape) = &fixtures[q % fixtures.len()];
        let table = name.replace('-', "_");
        let ndim = shape.len();
        let mut sql_parts = Vec::new();
        let mut slow_parts = Vec::new();
        let mut preds = Vec::new();
        for _ in 0..1 + rng.next(3) {
            let d = rng.next(ndim as u64) as usize;
            let (sql, f) = predicate(&mut rng, shape[d], &format!("dim_{d}"));
            slow_parts.push(sql.replace(&format!("dim_{d}"), &format!("(dim_{d} + 0)")));
            sql_parts.push(sql);
            preds.push((d, f));
        }
        // Brute force.
        let total: u64 = shape.iter().product();
        let (mut count, mut sum) = (0i64, 0i64);
        for flat in 0..total {
            let mut rem = flat;
            let mut coord = vec![0u64; ndim];
            for d in (0..ndim).rev() {
                coord[d] = rem % shape[d];
                rem /= shape[d];
            }
            if preds.iter().all(|(d, f)| f(coord[*d])) {
                count += 1;
                sum += 2 * flat as i64 + 1;
            }
        }
        for parts in [&sql_parts, &slow_parts] {
            let sql = format!(
                "SELECT count(*), sum(value) FROM {table} WHERE {}",
                parts.join(" AND ")
            );
            let got = two_ints(&ctx.sql(&sql).await.unwrap().collect().await.unwrap());
            assert_eq!(got, (count, sum), "query {q}: {sql}");
        }
        // Rows, not just aggregates: the coordinates come back exactly once each.
        if count > 0 && count < 2000 {
            let sql = format!(
                "SELECT count(DISTINCT value) FROM {table} WHERE {}",
                sql_parts.join(" AND ")
            );
            let b = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            assert_eq!(
                b[0].column(0).as_primitive::<Int64Type>().value(0),
                count,
                "query {q}: duplicates"
            );
        }
    }
}

/// The units `value_pruning=pruned N/M` says an `EXPLAIN` plan pruned (0 when none).
fn units_pruned(plan: &str) -> usize {
    let at = plan.find("value_pruning=pruned ").map(|i| i + 21);
    at.and_then(|i| plan[i..].split('/').next()?.parse().ok())
        .unwrap_or(0)
}

/// Random value-range predicates (plus sometimes a dim range) with value pruning on:
/// arrays against brute force (value = 2 * flat + 1), the events CTable against the same
/// table opened with pruning off. Zone maps fill in as queries run, so later queries
/// prune with them; the test checks that pruning happened at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_value_ranges_match_brute_force() {
    let (ctx, fixtures) = geom_session().await;
    register_pruned_and_plain(&ctx, "ev", "ctable/events.b2d").await;
    let mut rng = Rng(0x5EED_7777_0000_0042);
    let mut pruned_queries = 0;
    for q in 0..100 {
        let (name, shape) = &fixtures[q % fixtures.len()];
        let table = name.replace('-', "_");
        let ndim = shape.len();
        let total: u64 = shape.iter().product();
        let (vsql, vf) = predicate(&mut rng, 2 * total + 2, "value");
        let mut sql_parts = vec![vsql];
        let mut dim_pred: Option<(usize, Pred)> = None;
        if rng.next(3) == 0 {
            let d = rng.next(ndim as u64) as usize;
            let (sql, f) = predicate(&mut rng, shape[d], &format!("dim_{d}"));
            sql_parts.push(sql);
            dim_pred = Some((d, f));
        }
        let (mut count, mut sum) = (0i64, 0i64);
        for flat in 0..total {
            let value = 2 * flat + 1;
            if !vf(value) {
                continue;
            }
            if let Some((d, f)) = &dim_pred {
                let inner: u64 = shape[d + 1..].iter().product();
                if !f((flat / inner) % shape[*d]) {
                    continue;
                }
            }
            count += 1;
            sum += value as i64;
        }
        let where_ = sql_parts.join(" AND ");
        let sql = format!("SELECT count(*), sum(value) FROM {table} WHERE {where_}");
        let got = two_ints(&ctx.sql(&sql).await.unwrap().collect().await.unwrap());
        assert_eq!(got, (count, sum), "query {q}: {sql}");
        let plan = explain(&ctx, &format!("SELECT value FROM {table} WHERE {where_}")).await;
        if plan.contains("value_pruning=pruned") && !plan.contains("value_pruning=pruned 0/") {
            pruned_queries += 1;
        }
    }
    // The CTable: SUMMARY sidecars (t, v, k) and zone maps (tag).
    for _ in 0..60 {
        let mut parts = Vec::new();
        for _ in 0..1 + rng.next(2) {
            parts.push(match rng.next(4) {
                0 => predicate(&mut rng, 60_000, "t").0,
                1 => predicate(&mut rng, 10, "k").0,
                2 => format!(
                    "v {} {}",
                    ["<", ">", "<=", ">="][rng.next(4) as usize],
                    rng.next(220) as i64 - 110
                ),
                _ => format!("tag = 'g{}'", rng.next(5)),
            });
        }
        let where_ = parts.join(if rng.next(4) == 0 { " OR " } else { " AND " });
        same_count_and_sum(&ctx, "t", ("ev", "ev_plain"), &where_).await;
    }
    // BatchArray-backed columns (vlstring zones are views): the same answers pruned or not.
    register_pruned_and_plain(&ctx, "vl", "ctable/varlen.b2d").await;
    for _ in 0..30 {
        let where_ = match rng.next(4) {
            0 => format!(
                "note {} '{}'",
                ["<", ">", "<=", ">="][rng.next(4) as usize],
                char::from_u32(32 + rng.next(0x3000) as u32)
                    .unwrap_or('a')
                    .to_string()
                    .replace('\'', "''")
            ),
            1 => format!("note = '' AND i > {}", rng.next(3000)),
            2 => format!(
                "cat = '{}'",
                ["north", "", "日本", "nowhere"][rng.next(4) as usize]
            ),
            _ => predicate(&mut rng, 3000, "i").0,
        };
        same_count_and_sum(&ctx, "i", ("vl", "vl_plain"), &where_).await;
    }
    assert!(
        pruned_queries >= 20,
        "only {pruned_queries} of 90 array queries pruned anything"
    );
    // geom-1d-big's chunks (10,000 rows) were read in units of 800 rows (batch size 100):
    // its zone maps come from units added up per chunk.
    let plan = explain(&ctx, "SELECT value FROM geom_1d_big WHERE value < 1000").await;
    assert!(
        plan.contains("chunks=1/10 (pruned 9)") && plan.contains("(zone_map)"),
        "{plan}"
    );
}

/// A full scan, and a `dim_0` range starting inside a block, decode every block they
/// touch exactly once and fetch each chunk about once, whatever the batch size: units never cut a block along dimension 0, and units thinner than a chunk
/// go chunk by chunk (rows spanning several chunks would thrash the recent-chunk cache).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_decode_each_block_once() {
    use datafusion::physical_plan::{ExecutionPlan, collect};
    use std::sync::Arc;
    fn scan_metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> Option<usize> {
        if plan.name() == "Blosc2Exec" {
            return plan.metrics()?.sum_by_name(name).map(|m| m.as_usize());
        }
        plan.children().iter().find_map(|c| scan_metric(c, name))
    }
    let base = env!("CARGO_MANIFEST_DIR");
    // (fixture, shape, chunks, blocks) as generate.py writes them.
    type Geometry<'a> = (&'a str, &'a [u64], &'a [u64], &'a [u64]);
    let arrays: [Geometry; 7] = [
        ("geom-2d", &[50, 37], &[20, 15], &[8, 4]),
        ("geom-3d", &[10, 11, 12], &[4, 5, 6], &[2, 3, 3]),
        ("geom-1d-big", &[100_000], &[10_000], &[1000]),
        ("geom-2d-rows", &[37, 24], &[10, 24], &[3, 24]),
        ("geom-3d-rows", &[9, 4, 5], &[4, 4, 5], &[3, 4, 5]),
        ("geom-2d-tiles", &[37, 40], &[10, 15], &[3, 15]),
        ("geom-3d-tiles", &[9, 8, 10], &[4, 4, 5], &[3, 4, 5]),
    ];
    for (name, shape, chunks, blocks) in arrays {
        let path = format!("{base}/tests/fixtures/b2nd/{name}.b2nd");
        let file_len = std::fs::metadata(&path).unwrap().len() as usize;
        // Blocks holding elements of `rows` x the other dimensions whole (blocks wholly in
        // an edge chunk's padding hold none and are skipped): per dimension, summed over
        // the chunks along it.
        let blocks_in = |rows: std::ops::Range<u64>| -> u64 {
            (0..shape.len())
                .map(|d| {
                    let r = if d == 0 { rows.clone() } else { 0..shape[d] };
                    (0..shape[d].div_ceil(chunks[d]))
                        .map(|k| {
                            let (cs, ce) = (k * chunks[d], ((k + 1) * chunks[d]).min(shape[d]));
                            let (x, y) = (r.start.max(cs), r.end.min(ce));
                            if x >= y {
                                0
                            } else {
                                (y - 1 - cs) / blocks[d] - (x - cs) / blocks[d] + 1
                            }
                        })
                        .sum::<u64>()
                })
                .product()
        };
        // The whole array, and dim_0 from the middle of its second block on.
        let inner: u64 = shape[1..].iter().product();
        let mid = blocks[0] + blocks[0] / 2;
        for rows in [0..shape[0], mid..shape[0] - 1] {
            for batch in [1, 7, 100, 8192] {
                let ctx = SessionContext::new_with_config(
                    SessionConfig::new()
                        .with_target_partitions(2)
                        .with_batch_size(batch),
                );
                ctx.register_blosc2("t", &path, Blosc2Options::default())
                    .await
                    .unwrap();
                let sql = format!(
                    "SELECT sum(value) FROM t WHERE dim_0 >= {} AND dim_0 < {}",
                    rows.start, rows.end
                );
                let plan = ctx
                    .sql(&sql)
                    .await
                    .unwrap()
                    .create_physical_plan()
                    .await
                    .unwrap();
                let out = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
                // The sum of 2 * i + 1 over flat indices a..b is b² - a².
                let (a, b) = (rows.start * inner, rows.end * inner);
                let want = (b * b - a * a) as i64;
                let got = out[0].column(0).as_primitive::<Int64Type>().value(0);
                assert_eq!(got, want, "{name}, {sql}, batch {batch}");
                let decoded = scan_metric(&plan, "blocks_decoded").unwrap() as u64;
                assert_eq!(
                    decoded,
                    blocks_in(rows.clone()),
                    "{name}, {sql}, batch {batch}: blocks"
                );
                // Each chunk once, but for the one a partition boundary may cut (fetched
                // by both partitions).
                let fetched = scan_metric(&plan, "bytes_fetched").unwrap();
                assert!(
                    fetched > 0 && fetched < file_len * 3 / 2,
                    "{name}, {sql}, batch {batch}: fetched {fetched} of a {file_len}-byte file"
                );
            }
        }
    }
}

/// The partitions of one execution share their units (DataFusion's
/// `enable_file_stream_work_stealing`): however they are polled, every row comes out
/// exactly once, and a partition polled alone takes its siblings' zones too. The same plan
/// executed again reads everything again. With sharing off each partition reads only its
/// own units.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_share_units_and_each_row_comes_once() {
    use datafusion::physical_plan::common::collect;
    let path = format!(
        "{}/tests/fixtures/b2nd/geom-1d-big.b2nd",
        env!("CARGO_MANIFEST_DIR")
    );
    let want: Vec<i64> = (0..100_000).map(|i| 2 * i + 1).collect();
    for share in [true, false] {
        let mut cfg = SessionConfig::new()
            .with_target_partitions(3)
            .with_batch_size(1000);
        cfg.options_mut().execution.enable_file_stream_work_stealing = share;
        let ctx = SessionContext::new_with_config(cfg);
        ctx.register_blosc2("t", &path, Blosc2Options::default())
            .await
            .unwrap();
        let plan = ctx
            .sql("SELECT value FROM t")
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        assert_eq!(plan.properties().partitioning.partition_count(), 3);
        for run in 0..2 {
            let (mut rows, mut got) = (Vec::new(), Vec::<i64>::new());
            // The last partition first, drained before the others are opened.
            for p in [2, 0, 1] {
                let batches = collect(plan.execute(p, ctx.task_ctx()).unwrap())
                    .await
                    .unwrap();
                rows.push(batches.iter().map(RecordBatch::num_rows).sum::<usize>());
                for b in &batches {
                    got.extend(b.column(0).as_primitive::<Int64Type>().values());
                }
            }
            got.sort_unstable();
            assert!(got == want, "sharing {share}, run {run}: rows {rows:?}");
            if share {
                // Everything: the siblings' zones whole, then, unit by unit, the zone
                // each sibling was left holding.
                assert!(rows == [100_000, 0, 0], "run {run}: {rows:?}");
            } else {
                assert!(rows.iter().all(|&r| r > 0 && r < 100_000), "{rows:?}");
            }
        }
    }
}

/// In-order scans (`Blosc2Options::in_order`, as `b2sql export` opens tables): one
/// partition however many the session has, units read four at a time and handed out in
/// the container's order, so the rows come as stored: a 1-D array in small batches (many
/// units) and CTables with deleted rows and computed columns, against the crate's reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_order_scans_keep_the_stored_order() {
    use crate::arrow_values::open;
    use crate::listing::cells;
    use datafusion_blosc2::arrow_reader::reader::read_all;
    for rel in [
        "b2nd/geom-1d-big.b2nd",
        "ctable/events.b2d",
        "ctable/computed-functions.b2d",
    ] {
        let (schema, want) = read_all(open(rel).await, 1 << 20).await.unwrap();
        let cols: Vec<String> = schema
            .fields()
            .iter()
            .map(|f| format!("\"{}\"", f.name()))
            .collect();
        let ctx = SessionContext::new_with_config(
            SessionConfig::new()
                .with_target_partitions(4)
                .with_batch_size(100)
                .set_bool("datafusion.optimizer.enable_round_robin_repartition", false),
        );
        let path = crate::util::fixture(rel);
        ctx.register_blosc2(
            "t",
            path.to_str().unwrap(),
            Blosc2Options::default().with_in_order(true),
        )
        .await
        .unwrap();
        let sql = format!("SELECT {} FROM t", cols.join(", "));
        let df = ctx.sql(&sql).await.unwrap();
        let plan = df.clone().create_physical_plan().await.unwrap();
        assert_eq!(plan.properties().partitioning.partition_count(), 1, "{rel}");
        let got = df.collect().await.unwrap();
        let (got, want) = (cells(&got), cells(&want));
        assert!(got.len() > 10, "{rel}: {} rows", got.len());
        assert!(got == want, "{rel}: rows out of their stored order");
    }
}

/// A multi-file table scanned in order gives its members' rows file after file (in name
/// order), each file's as stored, in one partition: big and small members, an empty one
/// and a sparse frame directory, in batches of 100 on 4 partitions. Handing out the
/// members as their reads finish (DataFusion's union) interleaves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_order_multi_file_scans_go_file_after_file() {
    use crate::arrow_values::open;
    use crate::listing::cells;
    use datafusion_blosc2::arrow_reader::reader::read_all;
    let dir = tempfile::tempdir().unwrap();
    let members = [
        ("a-big.b2nd", "b2nd/geom-1d-big.b2nd"),
        ("b-small.b2nd", "b2nd/dtype-le_i8.b2nd"),
        ("c-empty.b2nd", "b2nd/geom-empty.b2nd"),
        ("d-big.b2nd", "b2nd/geom-1d-big.b2nd"),
        ("e-small.b2nd", "b2nd/dtype-le_i8.b2nd"),
    ];
    let mut want = Vec::new();
    for (name, rel) in members {
        std::fs::copy(crate::util::fixture(rel), dir.path().join(name)).unwrap();
        let (_, batches) = read_all(open(rel).await, 1 << 20).await.unwrap();
        for mut row in cells(&batches) {
            row.push(serde_json::Value::String(name.into()));
            want.push(row);
        }
    }
    let ctx = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(4)
            .with_batch_size(100)
            .set_bool("datafusion.optimizer.enable_round_robin_repartition", false),
    );
    ctx.register_blosc2(
        "t",
        &format!("{}/", dir.path().display()),
        Blosc2Options::default().with_in_order(true),
    )
    .await
    .unwrap();
    let df = ctx
        .sql("SELECT dim_0, value, CAST(filename AS VARCHAR) FROM t")
        .await
        .unwrap();
    let plan = df.clone().create_physical_plan().await.unwrap();
    assert_eq!(plan.properties().partitioning.partition_count(), 1);
    let got = cells(&df.collect().await.unwrap());
    assert_eq!(got.len(), 2 * 100_000 + 2 * 1000);
    assert!(got == want, "rows out of their files' order");
    // A LIMIT stops the members running ahead without an error.
    let first = ctx.sql("SELECT value FROM t LIMIT 3").await.unwrap();
    assert_eq!(cells(&first.collect().await.unwrap()).len(), 3);
}

/// Text equalities on a CTable's `U<n>` columns, which the scan tests on the stored records
/// (`text_match`), give the rows DataFusion alone gives (the table opened with pruning
/// off, so no filter reaches the scan): values with non-ASCII, astral and NUL letters, one
/// filling its width, the empty string; a nullable column whose null rows store ''; deleted
/// rows; 64-row batches over 2 partitions, so many scan units.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_equalities_match_unpushed_filters() {
    // (filter, whether the scan tests it on the records, whether rows match)
    let cases = [
        ("word = 'alpha'", true, true),
        ("word = ''", true, true),
        ("'日本' = word", true, true),
        ("word = 'a' || chr(0) || 'b'", true, true),
        ("word = '😀x'", true, true),
        ("word = 'gamma6'", true, true),
        ("word = 'gamma'", true, false),
        ("word = 'toolongvalue'", true, false),
        ("word = 'alpha' || chr(0)", true, false),
        ("word = 'ñandú' OR word = 'gamma6'", true, true),
        ("word IN ('beta', 'ñandú', 'nothing')", true, true),
        (
            "word IN ('alpha', 'beta', '', 'ñandú', '日本', '😀x', 'gamma6', 'x', 'y', 'z')",
            true,
            true,
        ),
        ("opt = ''", true, true),
        ("opt = 'wxyz'", true, true),
        ("opt IN ('x', 'yz')", true, true),
        ("word = 'alpha' AND opt = 'x'", true, true),
        ("word = 'alpha' AND word IN ('alpha', 'beta')", true, true),
        ("word = 'beta' AND i > 300", true, true),
        ("word = 'alpha' OR i = 5", false, true),
        ("word = 'a\u{FFFD}'", false, false),
        ("word <> 'alpha'", false, true),
        ("word LIKE 'al%'", true, true),
        ("word LIKE 'ñan%'", true, true),
        ("word LIKE '日%'", true, true),
        ("word LIKE 'gamma6%'", true, true),
        ("word LIKE 'gamma67%'", true, false),
        ("word LIKE 'a' || chr(0) || '%'", true, true),
        ("word LIKE 'a%' OR word LIKE 'b%'", true, true),
        ("opt LIKE 'w%'", true, true),
        ("word LIKE 'a_b%'", true, true),
        ("word LIKE '%a'", true, true),
        ("word LIKE '%lph%'", true, true),
        ("word LIKE '%本'", true, true),
        ("word LIKE '%😀%'", true, true),
        ("word LIKE '%' || chr(0) || '%'", true, true),
        ("word LIKE '%amma%' AND word LIKE '%6'", true, true),
        ("word LIKE '%ñ%' OR word LIKE 'g%'", true, true),
        ("word LIKE '%zzz%'", true, false),
        ("contains(word, 'lph')", true, true),
        ("contains(word, '本') OR word = 'beta'", true, true),
        ("contains(word, '')", false, true),
        ("word LIKE '%l_h%'", true, true),
        ("opt LIKE '%y%'", true, true),
        ("word LIKE '%'", false, true),
        ("word NOT LIKE 'a%'", false, true),
        ("word ILIKE 'AL%'", true, true),
        ("word ILIKE '%LPH%'", true, true),
        ("word ILIKE '%ñ%'", false, true),
        ("word ILIKE '%AMMA6' OR word LIKE '日%'", false, true),
        ("word ILIKE '%AMMA6' OR word LIKE 'b%'", true, true),
        ("opt ILIKE '%XY%'", true, true),
        ("word ILIKE '%QQ%'", true, false),
    ];
    check_text_filters("ctable/texts.b2d", "i, word, opt", "i", &cases).await;
    check_text_filters("ctable/texts.b2z", "i, word, opt", "i", &cases).await;
}

/// The same for the `S4` column of a bcolz ctable (`Binary`: DataFusion compares it with
/// the literals coerced to bytes), whose values are 2–3 bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_equalities_match_unpushed_filters() {
    let cases = [
        ("name = 'n7'", true, true),
        ("name = 'n42' OR name = 'n0'", true, true),
        ("name IN ('n1', 'n99', 'zz')", true, true),
        ("name = 'n100'", true, false),
        ("name = 'n1000'", true, false),
        ("name = 'n'", true, false),
        ("name = 'n7' AND id < 1000", true, true),
        ("name <> 'n7'", false, true),
    ];
    check_text_filters("bcolz/ctable", "id, name", "id", &cases).await;
}

/// The same for the BatchArray-backed columns of a CTable: a nullable `vlstring` (`nil`
/// items, `''`, non-ASCII, one value of 70,000 letters) and a `vlbytes` column, whose
/// items the scan tests before converting them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_equalities_match_unpushed_filters() {
    let cases = [
        ("note = ''", true, true),
        ("note = 'ⓡⲤ⨬'", true, true),
        ("'ⶺ' = note", true, true),
        ("note IN ('ⓡⲤ⨬', 'ⶺ', 'nothing')", true, true),
        ("note = 'ⓡⲤ⨬' OR note = ''", true, true),
        ("note = 'nothing'", true, false),
        ("note = 'ⓡⲤ'", true, false),
        ("note = repeat('x', 70000)", true, true),
        ("note = repeat('x', 69999)", true, false),
        ("note LIKE 'é%'", true, true),
        ("note LIKE 'éééé%'", true, true),
        ("note LIKE 'ⓡⲤ%'", true, true),
        ("note LIKE 'zzz%'", true, false),
        ("note = 'ⶺ' AND i > 1200", true, true),
        ("note = 'ⶺ' AND blob = 'Bz'", true, false),
        ("note LIKE 'é%' AND note LIKE 'éééé%'", true, true),
        ("note = 'ⶺ' AND note LIKE 'ⓡ%'", true, false),
        ("note LIKE 'é%' AND i < 1500", true, true),
        ("blob = 'Bz'", true, true),
        ("blob = ''", true, true),
        ("blob IN ('~', 't', 'none')", true, true),
        ("note = 'ⶺ' OR i = 5", false, true),
        ("note <> ''", false, true),
        ("note LIKE '%é'", true, true),
        ("note LIKE '%Ⲥ%'", true, true),
        ("note LIKE '%xxxxxxxx%'", true, true),
        ("note LIKE '%Ⲥ%' OR note = ''", true, true),
        ("note LIKE '%nothing%'", true, false),
        ("contains(note, 'Ⲥ')", true, true),
        ("note ILIKE '%XXXXX%'", true, true),
        ("note ILIKE 'É%'", false, true),
    ];
    check_text_filters("ctable/varlen.b2d", "i, note, blob", "i", &cases).await;
    check_text_filters("ctable/varlen.b2z", "i, note, blob", "i", &cases).await;
}

/// The same for a CTable's `dictionary` columns (int32 codes into the distinct values):
/// the scan tests the codes of the values a filter's texts match. `cat` is nullable, with
/// `''` and non-ASCII values; `word` has 2,600 values, more than one batch of its store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dictionary_equalities_match_unpushed_filters() {
    let cases = [
        ("cat = 'north'", true, true),
        ("'日本' = cat", true, true),
        ("cat = ''", true, true),
        ("cat IN ('ñandú', '日本', 'nope')", true, true),
        ("cat = 'north' OR cat = 'east'", true, true),
        ("cat = 'nope'", true, false),
        ("cat = 'nort'", true, false),
        ("cat LIKE 'n%'", true, true),
        ("cat LIKE 'ñan%' OR cat LIKE '日%'", true, true),
        ("cat LIKE 'q%'", true, false),
        ("cat LIKE '%or%'", true, true),
        ("cat LIKE '%本'", true, true),
        ("cat LIKE '%or%' OR cat LIKE '%as%'", true, true),
        ("cat LIKE '%qq%'", true, false),
        ("contains(cat, 'or')", true, true),
        ("cat ILIKE '%OR%'", true, true),
        ("cat ILIKE 'NORTH'", true, true),
        ("word LIKE '%25%'", true, true),
        ("word = 'w0007'", true, true),
        ("word IN ('w2599', 'w0000', 'w2600')", true, true),
        ("word = 'w2600'", true, false),
        ("cat = 'west' AND word = 'w0007'", true, true),
        ("cat = 'nope' AND word = 'w0007'", true, false),
        ("cat = 'north' AND i < 500", true, true),
        ("cat = 'south' AND note = ''", true, true),
        ("cat = 'north' OR i = 5", false, true),
        ("cat <> 'north'", false, true),
        ("cat IS NULL", false, true),
    ];
    check_text_filters("ctable/varlen.b2d", "i, cat, word", "i", &cases).await;
    check_text_filters("ctable/varlen.b2z", "i, cat, word, note", "i", &cases).await;
}

/// The same for a CTable's `utf8` columns (int64 offsets + UTF-8 bytes), which the scan
/// does not test (their filters run in DataFusion, and their scans map zones, which a
/// tested scan would not): `u` is nullable, with `''`, `'a'`, `'a\0'`, non-ASCII and
/// astral values, and a FULL index, which looks the same filters up; `tag` spans units.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn utf8_equalities_match_unpushed_filters() {
    let cases = [
        ("u = 't0625'", false, true),
        ("u = ''", false, true),
        ("u = 'a'", false, true),
        ("u = concat('a', chr(0))", false, true),
        ("u IN ('é', '日本語', '😀', 'zz')", false, true),
        ("u = 't0625' OR u = ''", false, true),
        ("u LIKE 't06%'", false, true),
        ("u LIKE '日%'", false, true),
        ("u LIKE 'zz%'", false, false),
        ("u = 'nope'", false, false),
        ("u = 't0625' AND ro > 0", false, true),
        ("u = 't0625' OR ro = 5", false, true),
        ("u <> 'a'", false, true),
        ("u IS NULL", false, true),
    ];
    check_text_filters("ctable/indexed-keys.b2d", "ro, u", "ro", &cases).await;
    let cases = [
        ("tag = 'g1'", false, true),
        ("tag IN ('g0', 'g3')", false, true),
        ("tag = 'g9'", false, false),
        ("tag LIKE 'g%' AND t > 50000", false, true),
    ];
    check_text_filters("ctable/events.b2d", "t, tag", "t", &cases).await;
    // A file, read through a listing table too.
    let cases = [
        ("w = 'w0001'", false, true),
        ("w IN ('w0001', 'w3999', 'x')", false, true),
        ("w LIKE 'w00%'", false, true),
    ];
    check_text_filters("ctable/indexed.b2z", "r, w", "r", &cases).await;
}

/// Each filter of `cases` over the fixture `rel`, selecting `cols` ordered by `key`, gives
/// what the same query gives on the table opened with pruning off; `EXPLAIN` shows whether
/// the scan tested it on the records, and the rows are there or not as the case says. A
/// fixture that is a file gives the same through a listing table, whose scan tests the
/// records where the case says (`units_text_tested`).
async fn check_text_filters(rel: &str, cols: &str, key: &str, cases: &[(&str, bool, bool)]) {
    let ctx = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(2)
            .with_batch_size(64),
    );
    let path = crate::util::fixture(rel);
    let path = path.to_str().unwrap();
    ctx.register_blosc2("tx", path, Blosc2Options::default())
        .await
        .unwrap();
    ctx.register_blosc2(
        "tx_plain",
        path,
        Blosc2Options::default()
            .with_value_pruning(false)
            .with_zone_maps(false),
    )
    .await
    .unwrap();
    // A file is read through a listing table too, whose scans test the same filters
    // (zone maps off, so that no unit is skipped on what earlier cases learned).
    let listed = std::path::Path::new(path).is_file();
    if listed {
        let ext = format!(".{}", rel.rsplit('.').next().unwrap());
        let format = Blosc2Format::new().with_zone_maps(false);
        let options = ListingOptions::new(Arc::new(format)).with_file_extension(ext);
        ctx.register_listing_table("tx_listed", path, options, None, None)
            .await
            .unwrap();
    }
    let rows = |sql: String| {
        let ctx = ctx.clone();
        async move {
            let batches = ctx
                .sql(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .collect()
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            datafusion::arrow::util::pretty::pretty_format_batches(&batches)
                .unwrap()
                .to_string()
        }
    };
    let total: usize = rows("SELECT count(*) FROM tx_plain".into())
        .await
        .lines()
        .nth(3)
        .and_then(|l| l.trim_matches(|c| c == '|' || c == ' ').parse().ok())
        .unwrap();
    for &(filter, tested, some) in cases {
        let q = |t: &str| format!("SELECT {cols} FROM {t} WHERE {filter} ORDER BY {key}");
        let got = rows(q("tx")).await;
        let want = rows(q("tx_plain")).await;
        assert_eq!(got, want, "{rel}: {filter}");
        // pretty_format of no rows is a bare header (4 lines); any row makes it longer.
        assert_eq!(
            want.lines().count() > 4,
            some,
            "{rel}: {filter}: rows\n{want}"
        );
        let c = |t: &str| format!("SELECT count(*) AS n, sum({key}) AS s FROM {t} WHERE {filter}");
        assert_eq!(
            rows(c("tx")).await,
            rows(c("tx_plain")).await,
            "{rel}: {filter}"
        );
        let plan = explain(&ctx, &q("tx")).await;
        assert_eq!(
            plan.contains("text_match="),
            tested,
            "{rel}: {filter}:\n{plan}"
        );
        if listed {
            assert_eq!(rows(q("tx_listed")).await, want, "{rel} listed: {filter}");
            assert_eq!(
                rows(c("tx_listed")).await,
                rows(c("tx_plain")).await,
                "{rel} listed: {filter}"
            );
            let units = metric(&ctx, &q("tx_listed"), "units_text_tested").await;
            assert_eq!(units > 0, tested, "{rel} listed: {filter}: {units} units");
            // A tested scan yields only rows that can match: none when no row does
            // (`ILIKE` keeps the values that are not all ASCII for the filter above).
            let scanned = metric(&ctx, &q("tx_listed"), "output_rows").await;
            if tested && !some && !filter.contains("ILIKE") {
                assert_eq!(scanned, 0, "{rel} listed: {filter}");
            } else if tested {
                assert!(scanned < total, "{rel} listed: {filter}: {scanned} rows");
            }
        }
    }
}

/// The same for the `value` column of 1-D arrays of strings and bytes (b2nd `<U3` and
/// `|S5` arrays, a bcolz `S3` carray), with `dim_0` filters beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_value_equalities_match_unpushed_filters() {
    let cases = [
        ("value = 'ab'", true, true),
        ("value = ''", true, true),
        ("value IN ('héé', 'zzz')", true, true),
        ("value = 'abc'", true, false),
        ("value = 'ab' AND dim_0 < 500", true, true),
        ("value = 'zzz' OR value = 'ab'", true, true),
        ("value LIKE 'h%'", true, true),
        ("value <> 'ab'", false, true),
    ];
    check_text_filters("b2nd/dtype-le_U3.b2nd", "dim_0, value", "dim_0", &cases).await;
    let cases = [
        ("value = 'hello'", true, true),
        ("value = 'ab' OR value = ''", true, true),
        ("value = 'hell'", true, false),
        ("value = 'hello' AND dim_0 BETWEEN 100 AND 700", true, true),
    ];
    check_text_filters("b2nd/dtype-na_S5.b2nd", "dim_0, value", "dim_0", &cases).await;
    let cases = [
        ("value = 'abc'", true, true),
        ("value = 'de' OR value = 'f'", true, true),
        ("value = 'ab'", true, false),
    ];
    check_text_filters("bcolz/carray-S3", "dim_0, value", "dim_0", &cases).await;
}

/// The rows of `batches`, whose columns are all Int64 (NULL as `i64::MIN`).
fn int_rows(batches: &[RecordBatch]) -> Vec<Vec<i64>> {
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |r| {
                b.columns()
                    .iter()
                    .map(|c| match c.is_null(r) {
                        true => i64::MIN,
                        false => c.as_primitive::<Int64Type>().value(r),
                    })
                    .collect()
            })
        })
        .collect()
}

/// Sums metric `name` over every `Blosc2Exec` in `plan`.
fn scan_metric_sum(
    plan: &std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    name: &str,
) -> usize {
    let own = match plan.name() {
        "Blosc2Exec" => plan
            .metrics()
            .and_then(|m| m.sum_by_name(name))
            .map_or(0, |m| m.as_usize()),
        _ => 0,
    };
    own + plan
        .children()
        .iter()
        .map(|c| scan_metric_sum(c, name))
        .sum::<usize>()
}

/// Dynamic filters: a TopK's threshold (`ORDER BY dim_0 LIMIT k`, and on values once zone
/// maps know them) and a hash join's key bounds reach the scan, which skips the units
/// they rule out. Every answer is checked against the fixture's formula (value = 2 *
/// flat index + 1) and against the same query with DataFusion's dynamic filters off.
/// Skips are asserted where they do not depend on timing: TopKs in one partition
/// (reading in order, or last first when descending, the first unit sets a threshold the
/// later ones fail; over several partitions, what is skipped depends on which partition
/// gets ahead), and
/// joins (the probe side starts once the build side is known).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_filters_skip_units() {
    let (ctx, _) = geom_session().await;
    // The rows (all Int64 columns) and the units skipped.
    let run = |sql: String, dynamic: bool, partitions: usize| {
        let ctx = ctx.clone();
        async move {
            let (batches, pruned) = run_dynamic(&ctx, &sql, dynamic, partitions).await;
            (int_rows(&batches), pruned)
        }
    };
    let value = |i: &[i64], shape: &[i64]| {
        let flat = i.iter().zip(shape).fold(0, |acc, (x, n)| acc * n + x);
        2 * flat + 1
    };
    // TopK on a coordinate, both directions, over row chunks and tiles.
    for (table, shape) in [("geom_2d_tiles", [37i64, 40]), ("geom_2d_rows", [37, 24])] {
        for desc in [true, false] {
            let order = if desc { "DESC" } else { "ASC" };
            let sql = format!(
                "SELECT dim_0, dim_1, CAST(value AS BIGINT) FROM {table} \
                 ORDER BY dim_0 {order}, dim_1 {order} LIMIT 3"
            );
            let last = (shape[0] - 1, shape[1] - 1);
            let expect: Vec<Vec<i64>> = (0..3)
                .map(|k| {
                    let (i, j) = if desc { (last.0, last.1 - k) } else { (0, k) };
                    vec![i, j, value(&[i, j], &shape)]
                })
                .collect();
            for partitions in [1, 3] {
                let (rows, pruned) = run(sql.clone(), true, partitions).await;
                assert_eq!(rows, expect, "{sql}");
                // Descending, the units are read last first (the order pushed down).
                if partitions == 1 {
                    assert!(pruned > 0, "{sql}: no unit skipped");
                }
            }
            let (plain, none) = run(sql.clone(), false, 3).await;
            assert_eq!(plain, expect, "{sql}: without dynamic filters");
            assert_eq!(none, 0, "{sql}: skipped without dynamic filters");
        }
    }
    // TopK on values: the first run records zone maps, the next one prunes with them.
    let sql = "SELECT CAST(value AS BIGINT) AS v FROM geom_1d_big ORDER BY value LIMIT 2";
    let (first, _) = run(sql.into(), true, 1).await;
    let (second, pruned) = run(sql.into(), true, 1).await;
    let expect = vec![vec![1], vec![3]];
    assert_eq!((first, second), (expect.clone(), expect), "{sql}");
    assert!(pruned > 0, "{sql}: no unit skipped with zone maps");
    // A join's key bounds: one column of tiles is read.
    for (table, shape) in [
        ("geom_2d_tiles", &[37i64, 40][..]),
        ("geom_3d_tiles", &[9, 8, 10]),
    ] {
        let last = shape.len() - 1;
        let sql = format!(
            "SELECT count(*), sum(CAST(value AS BIGINT)) FROM {table} t \
             JOIN (VALUES (3), (4)) k(c) ON t.dim_{last} = k.c"
        );
        let (rows, pruned) = run(sql.clone(), true, 3).await;
        let (plain, _) = run(sql.clone(), false, 3).await;
        let (mut count, mut sum) = (0, 0);
        let n: i64 = shape.iter().product();
        for flat in 0..n {
            let c = flat % shape[last];
            if c == 3 || c == 4 {
                count += 1;
                sum += 2 * flat + 1;
            }
        }
        assert_eq!(rows, vec![vec![count, sum]], "{sql}");
        assert_eq!(plain, rows, "{sql}: without dynamic filters");
        assert!(pruned > 0, "{sql}: no unit skipped");
    }
}

/// Runs `sql` with DataFusion's dynamic filters on or off, in `partitions` partitions:
/// its batches, and the units the scans skipped on dynamic filters.
async fn run_dynamic(
    ctx: &SessionContext,
    sql: &str,
    dynamic: bool,
    partitions: usize,
) -> (Vec<RecordBatch>, usize) {
    let (batches, plan) = run_dynamic_plan(ctx, sql, dynamic, partitions).await;
    let pruned = scan_metric_sum(&plan, "units_pruned_by_dynamic_filters");
    (batches, pruned)
}

/// [`run_dynamic`]'s batches, and the plan it ran (with its metrics).
async fn run_dynamic_plan(
    ctx: &SessionContext,
    sql: &str,
    dynamic: bool,
    partitions: usize,
) -> (
    Vec<RecordBatch>,
    std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    run_dynamic_plan_joining(ctx, sql, dynamic, partitions, false).await
}

/// [`run_dynamic_plan`], its hash joins partitioned when `partitioned` (else as
/// DataFusion chooses: a small build side is collected).
async fn run_dynamic_plan_joining(
    ctx: &SessionContext,
    sql: &str,
    dynamic: bool,
    partitions: usize,
    partitioned: bool,
) -> (
    Vec<RecordBatch>,
    std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    use datafusion::physical_plan::collect;
    let state = ctx.state();
    let mut config = state.config().clone();
    let opts = config.options_mut();
    opts.optimizer.enable_topk_dynamic_filter_pushdown = dynamic;
    opts.optimizer.enable_join_dynamic_filter_pushdown = dynamic;
    opts.execution.target_partitions = partitions;
    if partitioned {
        opts.optimizer.hash_join_single_partition_threshold = 0;
        opts.optimizer.hash_join_single_partition_threshold_rows = 0;
    }
    let state = datafusion::execution::SessionStateBuilder::new_from_existing(state)
        .with_config(config)
        .build();
    let plan = state
        .create_physical_plan(&state.create_logical_plan(sql).await.unwrap())
        .await
        .unwrap();
    let batches = collect(std::sync::Arc::clone(&plan), state.task_ctx())
        .await
        .unwrap();
    (batches, plan)
}

/// Tables read their dynamic filters' columns first and decode the others only for units
/// where some row passes (python-blosc2 CTable, bcolz ctable): the same rows as without
/// dynamic filters, every column, and units skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_filters_read_table_columns_in_two_steps() {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(100));
    let base = env!("CARGO_MANIFEST_DIR");
    for (name, rel) in [
        ("events", "ctable/events.b2d"),
        ("varlen", "ctable/varlen.b2d"),
        ("bc", "bcolz/ctable"),
    ] {
        ctx.register_blosc2(
            name,
            &format!("{base}/tests/fixtures/{rel}"),
            Blosc2Options::default(),
        )
        .await
        .unwrap();
    }
    // (query, partitions, whether units are skipped: the bcolz ctable is one unit).
    let cases = [
        // TopKs in one partition: the first units set the threshold.
        ("SELECT * FROM events ORDER BY t LIMIT 5", 1, true),
        // `word` has no SUMMARY sidecar: only reading it first can skip a unit.
        ("SELECT * FROM varlen ORDER BY word LIMIT 3", 1, true),
        (
            "SELECT tag, k, t FROM events ORDER BY t DESC LIMIT 5",
            1,
            false,
        ),
        ("SELECT * FROM bc ORDER BY id LIMIT 4", 1, false),
        (
            "SELECT name, id, x FROM bc ORDER BY x, id LIMIT 3",
            1,
            false,
        ),
        // Joins on a table column: the build side's keys are known before the scan.
        (
            "SELECT b.* FROM bc b JOIN (VALUES (7), (2400)) k(c) ON b.id = k.c ORDER BY b.id",
            2,
            false,
        ),
        (
            "SELECT count(*), sum(e.v), min(e.tag) FROM events e JOIN (VALUES (10), (11)) k(c) ON e.t = k.c",
            2,
            true,
        ),
    ];
    let text = |b: &[RecordBatch]| -> Vec<String> {
        let t = datafusion::arrow::util::pretty::pretty_format_batches(b).unwrap();
        t.to_string().lines().map(str::to_string).collect()
    };
    for (sql, partitions, skips) in cases {
        let (rows, pruned) = run_dynamic(&ctx, sql, true, partitions).await;
        let (plain, none) = run_dynamic(&ctx, sql, false, partitions).await;
        let (rows, plain) = (text(&rows), text(&plain));
        assert_eq!(rows, plain, "{sql}");
        assert!(rows.len() > 4, "{sql}: {rows:?}");
        if skips {
            assert!(pruned > 0, "{sql}: no unit skipped");
        }
        assert_eq!(none, 0, "{sql}");
    }
}

/// Random TopKs (on a coordinate or on the values, either direction, with and without a
/// dim filter, in 1–3 partitions) and random joins on a coordinate over the multi-chunk
/// `geom-*` arrays, with DataFusion's dynamic filters on, against a brute-force
/// evaluation (value = 2 * flat index + 1). Queries run twice, so the second may also
/// prune on the zone maps the first recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_dynamic_filters_match_brute_force() {
    let (ctx, fixtures) = geom_session().await;
    let seed = 0x5eed_d1a5_u64 ^ std::process::id() as u64;
    let mut rng = Rng(seed | 1);
    for case in 0..60 {
        let (name, shape) = &fixtures[rng.next(fixtures.len() as u64) as usize];
        let table = name.replace('-', "_");
        let ndim = shape.len();
        let n: u64 = shape.iter().product();
        let coords = |flat: u64| -> Vec<u64> {
            let mut c = vec![0; ndim];
            let mut f = flat;
            for d in (0..ndim).rev() {
                c[d] = f % shape[d];
                f /= shape[d];
            }
            c
        };
        let partitions = 1 + rng.next(3) as usize;
        let k = rng.next(ndim as u64) as usize;
        let (sql, expect): (String, Vec<Vec<i64>>) = if rng.next(3) < 2 {
            // TopK, ordered by dim_k (then the value, unique) or by the value alone.
            let desc = rng.next(2) == 1;
            let by_value = rng.next(4) == 0;
            let limit = 1 + rng.next(20);
            let (filter_sql, filter) = match rng.next(2) {
                0 => (String::new(), None),
                _ => {
                    let d = rng.next(ndim as u64) as usize;
                    let (sql, p) = predicate(&mut rng, shape[d], &format!("dim_{d}"));
                    (format!("WHERE {sql}"), Some((d, p)))
                }
            };
            let dir = if desc { "DESC" } else { "ASC" };
            let order = match by_value {
                true => format!("value {dir}"),
                false => format!("dim_{k} {dir}, value {dir}"),
            };
            let sql = format!(
                "SELECT CAST(value AS BIGINT) AS v FROM {table} {filter_sql} ORDER BY {order} LIMIT {limit}"
            );
            let mut rows: Vec<(u64, u64)> = (0..n)
                .filter(|&f| filter.as_ref().is_none_or(|(d, p)| p(coords(f)[*d])))
                .map(|f| (if by_value { 0 } else { coords(f)[k] }, f))
                .collect();
            rows.sort();
            if desc {
                rows.reverse();
            }
            let expect = rows
                .iter()
                .take(limit as usize)
                .map(|&(_, f)| vec![2 * f as i64 + 1])
                .collect();
            (sql, expect)
        } else {
            // A join on dim_k with 1-3 keys, some maybe outside the array.
            let keys: Vec<i64> = (0..1 + rng.next(3))
                .map(|_| rng.next(shape[k] + 3) as i64 - 1)
                .collect();
            let mut keys_sorted = keys.clone();
            keys_sorted.sort();
            keys_sorted.dedup();
            let values: Vec<String> = keys_sorted.iter().map(|c| format!("({c})")).collect();
            let sql = format!(
                "SELECT count(*), sum(CAST(t.value AS BIGINT)) FROM {table} t \
                 JOIN (VALUES {}) k(c) ON t.dim_{k} = k.c",
                values.join(", ")
            );
            let hits: Vec<u64> = (0..n)
                .filter(|&f| keys_sorted.contains(&(coords(f)[k] as i64)))
                .collect();
            let sum: i64 = hits.iter().map(|&f| 2 * f as i64 + 1).sum();
            let expect = match hits.is_empty() {
                true => vec![vec![0, i64::MIN]],
                false => vec![vec![hits.len() as i64, sum]],
            };
            (sql, expect)
        };
        for run in 0..2 {
            let (batches, _) = run_dynamic(&ctx, &sql, true, partitions).await;
            let got = int_rows(&batches);
            assert_eq!(
                got, expect,
                "case {case} run {run} (seed {seed:#x}, {partitions} partitions): {sql}"
            );
        }
    }
}

/// `ORDER BY <path column>, … LIMIT k OFFSET o` over a multi-file table, at 1 to 4
/// partitions: each result must be that slice of the same query without `LIMIT`. The
/// path columns (hive keys, `filename`) are constant in each member's partitions and
/// differ between members; DataFusion used to drop them from the partitioned TopK's keys
/// while sharing one dynamic-filter threshold between all partitions, which dropped rows
/// of one file on the threshold reached in another (see `provider::member_value`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_k_over_path_columns_of_a_multi_file_table() {
    let dir = crate::util::fixture("partitioned/temps/");
    let columns = "dim_0, value, year, station, filename";
    let orders = [
        "filename, dim_0",
        "filename DESC, dim_0",
        "year DESC, station, dim_0 DESC, filename",
        "station, value, filename, dim_0",
    ];
    for partitions in 1..=4 {
        let ctx = SessionContext::new_with_config(
            SessionConfig::new().with_target_partitions(partitions),
        );
        ctx.register_blosc2("t", dir.to_str().unwrap(), Blosc2Options::default())
            .await
            .unwrap();
        for order in orders {
            let run = |sql: String| {
                let ctx = ctx.clone();
                async move { ctx.sql(&sql).await.unwrap().collect().await.unwrap() }
            };
            let all = run(format!("SELECT {columns} FROM t ORDER BY {order}")).await;
            let all = datafusion::arrow::compute::concat_batches(&all[0].schema(), &all).unwrap();
            let n = all.num_rows();
            for (k, offset) in [(1, 0), (3, 5), (10, n / 3), (7, n / 2), (2, n - 1)] {
                let sql =
                    format!("SELECT {columns} FROM t ORDER BY {order} LIMIT {k} OFFSET {offset}");
                let got = run(sql.clone()).await;
                let want = all.slice(offset, k.min(n - offset));
                if let Err(e) = crate::util::compare_batches(&got, &[want], 0.0) {
                    panic!("{partitions} partitions: {sql}: {e}");
                }
            }
        }
    }
}

/// Zones the plan splits between partitions (`geom-1d-big`: 10 chunks of 10,000 values
/// read by 16 partitions) are pieced together within the execution: the next query takes
/// its exact extrema from the zone maps, and a value filter outside them reads nothing.
/// With or without work sharing between the partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_split_between_partitions_are_mapped() {
    for share in [true, false] {
        let mut config = SessionConfig::new()
            .with_target_partitions(16)
            .with_batch_size(1000);
        config
            .options_mut()
            .execution
            .enable_file_stream_work_stealing = share;
        let ctx = SessionContext::new_with_config(config);
        let base = env!("CARGO_MANIFEST_DIR");
        ctx.register_blosc2(
            "t",
            &format!("{base}/tests/fixtures/b2nd/geom-1d-big.b2nd"),
            Blosc2Options::default(),
        )
        .await
        .unwrap();
        let sql = "SELECT min(value) mn, max(value) mx FROM t";
        let plan = explain(&ctx, sql).await;
        // More partitions than chunks: some chunk (zone) is split.
        let partitions: usize = plan
            .split("Blosc2Exec: ")
            .nth(1)
            .and_then(|p| p.split(" partitions=").nth(1))
            .and_then(|p| p.split(',').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{plan}"));
        assert!(partitions > 10, "{plan}");
        // value = 2 * flat index + 1 over 100,000.
        let first = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        assert_eq!(two_ints(&first), (1, 199_999), "share={share}");
        let plan = explain(&ctx, sql).await;
        assert!(!plan.contains("Blosc2Exec"), "share={share}: {plan}");
        let second = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        assert_eq!(two_ints(&second), (1, 199_999), "share={share}");
        let plan = explain(&ctx, "SELECT dim_0 FROM t WHERE value > 199999").await;
        assert!(
            plan.contains("units=0") || !plan.contains("Blosc2Exec"),
            "share={share}: {plan}"
        );
    }
}

/// Zone maps count each zone's nulls (ctable/sparse-nulls.b2d: `x` null in all of one
/// block and in two rows of two others, `y` nullable without a null, `name` a vlstring
/// null in all of one block). Once a scan mapped the zones, `x IS NULL` skips the zones
/// holding none, `x IS NOT NULL` the zone of nulls alone, a descending TopK on `y` (`y IS NULL OR
/// y > t`) the zones under its threshold, and `count(x)` is answered without a scan.
/// Every answer matches the table's values and the same query with pruning off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_maps_count_nulls() {
    use datafusion::arrow::array::Float64Array;
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(100));
    register_pruned_and_plain(&ctx, "sn", "ctable/sparse-nulls.b2d").await;
    let want = crate::util::expected_json("tables.json");
    let cols = &want["ctable/sparse-nulls.b2d"]["columns"];
    let ids: Vec<i64> = cols["id"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    let xs: Vec<Option<f64>> = cols["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64())
        .collect();
    let ys: Vec<i64> = cols["y"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    let names: Vec<Option<&str>> = cols["name"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str())
        .collect();
    let ints = |sql: String| {
        let ctx = ctx.clone();
        async move { int_rows(&ctx.sql(&sql).await.unwrap().collect().await.unwrap()) }
    };

    // Before any scan, only `x`'s SUMMARY sidecar knows of its nulls: it flags block 1
    // all null, which `x IS NOT NULL` skips; `x IS NULL` skips nothing yet.
    let plan = explain(&ctx, "SELECT id FROM sn WHERE x IS NULL").await;
    assert_eq!(units_pruned(&plan), 0, "{plan}");
    let plan = explain(&ctx, "SELECT id FROM sn WHERE x IS NOT NULL").await;
    assert_eq!(units_pruned(&plan), 1, "{plan}");
    assert!(plan.contains("(summary)"), "{plan}");
    // A full scan maps every zone of every column.
    let all = ctx
        .sql("SELECT * FROM sn")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(all.iter().map(|b| b.num_rows()).sum::<usize>(), ids.len());

    // `c IS NULL` reads only the zones holding nulls: `x`'s three of 12, `name`'s one.
    let xs_null: Vec<bool> = xs.iter().map(Option::is_none).collect();
    let names_null: Vec<bool> = names.iter().map(Option::is_none).collect();
    for (c, nulls, pruned) in [("x", xs_null, 9), ("name", names_null, 11)] {
        let expect: Vec<Vec<i64>> = ids
            .iter()
            .zip(&nulls)
            .filter(|(_, null)| **null)
            .map(|(&i, _)| vec![i])
            .collect();
        for t in ["sn", "sn_plain"] {
            let got = ints(format!("SELECT id FROM {t} WHERE {c} IS NULL ORDER BY id")).await;
            assert_eq!(got, expect, "{c}, {t}");
        }
        let plan = explain(&ctx, &format!("SELECT id FROM sn WHERE {c} IS NULL")).await;
        assert_eq!(units_pruned(&plan), pruned, "{plan}");
    }
    // `x IS NOT NULL` skips the zone of nulls alone.
    let plan = explain(&ctx, "SELECT id FROM sn WHERE x IS NOT NULL").await;
    assert_eq!(units_pruned(&plan), 1, "{plan}");

    // `count(x)`, `count(name)`: from the statistics, no scan.
    let sql = "SELECT count(x), count(name), count(y) FROM sn";
    let plan = explain(&ctx, sql).await;
    assert!(!plan.contains("Blosc2Exec"), "{plan}");
    let count = |v: usize| v as i64;
    let expect = vec![vec![
        count(xs.iter().flatten().count()),
        count(names.iter().flatten().count()),
        count(ys.len()),
    ]];
    assert_eq!(ints(sql.into()).await, expect);
    assert_eq!(
        ints("SELECT count(x), count(name), count(y) FROM sn_plain".into()).await,
        expect
    );
    // `min`/`max` of a column with nulls, from the zones holding values.
    let sql = "SELECT min(x), max(x) FROM sn";
    assert!(!explain(&ctx, sql).await.contains("Blosc2Exec"));
    let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let (lo, hi) = (
        b[0].column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap()
            .value(0),
        b[0].column(1)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap()
            .value(0),
    );
    let vals: Vec<f64> = xs.iter().flatten().copied().collect();
    assert_eq!(lo, vals.iter().copied().fold(f64::INFINITY, f64::min));
    assert_eq!(hi, vals.iter().copied().fold(f64::NEG_INFINITY, f64::max));

    // A descending TopK on `y` (nulls first, none stored): one partition reads the zones
    // in order, and skips those whose maximum is under the heap's threshold.
    let sql = "SELECT id, CAST(y AS BIGINT) AS y64 FROM sn ORDER BY y DESC, id LIMIT 4";
    let mut rows: Vec<(i64, i64)> = ids.iter().copied().zip(ys.iter().copied()).collect();
    rows.sort_by_key(|&(i, y)| (std::cmp::Reverse(y), i));
    let expect: Vec<Vec<i64>> = rows[..4].iter().map(|&(i, y)| vec![i, y]).collect();
    let (got, pruned) = run_dynamic(&ctx, sql, true, 1).await;
    assert_eq!(int_rows(&got), expect, "{sql}");
    assert!(pruned > 0, "{sql}: no unit skipped");
    let (plain, _) = run_dynamic(&ctx, &sql.replace("sn ", "sn_plain "), false, 2).await;
    assert_eq!(int_rows(&plain), expect, "{sql}: plain");
    // Descending on `x`, nulls first: the nulls, then the largest values.
    let sql = "SELECT id FROM sn ORDER BY x DESC, id LIMIT 260";
    let mut order: Vec<(Option<f64>, i64)> = xs.iter().copied().zip(ids.iter().copied()).collect();
    order.sort_by(|a, b| match (a.0, b.0) {
        (None, None) => a.1.cmp(&b.1),
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(p), Some(q)) => q.total_cmp(&p).then(a.1.cmp(&b.1)),
    });
    let expect: Vec<Vec<i64>> = order[..260].iter().map(|&(_, i)| vec![i]).collect();
    for t in ["sn", "sn_plain"] {
        let (got, _) = run_dynamic(&ctx, &sql.replace("sn ", &format!("{t} ")), true, 2).await;
        assert_eq!(int_rows(&got), expect, "{t}");
    }
}

/// A descending TopK on a nullable table column maps the zones of the column it orders by
/// in its first run (the two-step read decodes that column in every unit, rows passing or
/// not), so that its next run skips the units under its threshold without decoding them:
/// `z` of ctable/sparse-nulls.b2d, falling from 3000, null in the last row only. Both
/// runs read the first zone (the top values) and the last (the null, which sorts first);
/// the first run reads `z` alone in the 10 others, the second nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topk_first_run_maps_the_zones_it_probes() {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(100));
    register_pruned_and_plain(&ctx, "sn", "ctable/sparse-nulls.b2d").await;
    let sql = "SELECT id, coalesce(z, -1) FROM sn ORDER BY z DESC LIMIT 4";
    let expect = vec![vec![2999, -1], vec![0, 3000], vec![1, 2999], vec![2, 2998]];
    let (plain, _) = run_dynamic(&ctx, &sql.replace("sn ", "sn_plain "), false, 1).await;
    assert_eq!(int_rows(&plain), expect);
    let (first, plan1) = run_dynamic_plan(&ctx, sql, true, 1).await;
    let (second, plan2) = run_dynamic_plan(&ctx, sql, true, 1).await;
    assert_eq!(int_rows(&first), expect);
    assert_eq!(int_rows(&second), expect);
    let decoded = |p| scan_metric_sum(p, "blocks_decoded");
    let pruned = |p| scan_metric_sum(p, "units_pruned_by_dynamic_filters");
    assert_eq!((pruned(&plan1), pruned(&plan2)), (10, 10));
    assert!(
        decoded(&plan2) + 10 <= decoded(&plan1),
        "blocks decoded: {} then {}",
        decoded(&plan1),
        decoded(&plan2)
    );
}

/// A nullable column whose `.notnull` sidecar python-blosc2 never wrote (no null was
/// stored: `y` of ctable/sparse-nulls.b2d) holds no null: a descending TopK on it (nulls
/// first) prunes on its SUMMARY sidecar from the first query on the table, and `count(y)`
/// is answered from the statistics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_without_its_mask_sidecar_holds_no_null() {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_batch_size(100));
    register_pruned_and_plain(&ctx, "sn", "ctable/sparse-nulls.b2d").await;
    let want = crate::util::expected_json("tables.json");
    let ys = want["ctable/sparse-nulls.b2d"]["columns"]["y"]
        .as_array()
        .unwrap()
        .clone();
    assert!(ys.iter().all(|v| v.is_i64()));
    let sql = "SELECT id, CAST(y AS BIGINT) AS y64 FROM sn ORDER BY y DESC, id LIMIT 3";
    let (plain, _) = run_dynamic(&ctx, &sql.replace("sn ", "sn_plain "), false, 2).await;
    let (got, plan) = run_dynamic_plan(&ctx, sql, true, 1).await;
    assert_eq!(int_rows(&got), int_rows(&plain));
    assert!(
        scan_metric_sum(&plan, "units_pruned_by_dynamic_filters") > 0,
        "{sql}: no unit skipped"
    );
    let sql = "SELECT count(y) FROM sn";
    let plan = explain(&ctx, sql).await;
    assert!(!plan.contains("Blosc2Exec"), "{plan}");
    let got = int_rows(&ctx.sql(sql).await.unwrap().collect().await.unwrap());
    assert_eq!(got, vec![vec![ys.len() as i64]]);
    // `x`'s sidecar exists: its count is scanned.
    let plan = explain(&ctx, "SELECT count(x) FROM sn").await;
    assert!(plan.contains("Blosc2Exec"), "{plan}");
}

/// A quoted-path table is opened again by every statement that names it, so it records
/// no zone maps (they would serve no later statement); a registered one does.
#[tokio::test]
async fn quoted_path_tables_record_no_zone_maps() {
    use datafusion::common::TableReference;
    use datafusion_blosc2::provider::Blosc2Table;
    let path = crate::util::fixture("b2nd/geom-2d-1chunk.b2nd");
    let path = path.to_str().unwrap();
    let ctx = SessionContext::new().with_blosc2_url_tables();
    ctx.register_blosc2("named", path, Blosc2Options::default())
        .await
        .unwrap();
    let maps = |t: Arc<dyn datafusion::catalog::TableProvider>| {
        let t = t.downcast_ref::<Blosc2Table>().expect("a Blosc2Table");
        t.zone_maps().is_some()
    };
    assert!(maps(ctx.table_provider("named").await.unwrap()));
    let quoted = ctx
        .table_provider(TableReference::bare(path))
        .await
        .unwrap();
    assert!(!maps(quoted));
    // Each statement gets its own provider (which is why maps would be lost).
    let again = ctx
        .table_provider(TableReference::bare(path))
        .await
        .unwrap();
    let first = ctx
        .table_provider(TableReference::bare(path))
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&again, &first));
}

/// Every python-blosc2 index kind keeps per-block summaries like a SUMMARY index's, and
/// value pruning uses them from the first query on: FULL (`a`), BUCKET (`b`, with NaN),
/// PARTIAL (`c`, nullable, a block of nulls), OPSI (`d`). A text column's FULL index
/// summarises alphabetical ranks, not values, and is not used (`w`). Answers equal those
/// of the table with pruning off, and the extrema of the columns without NaN or nulls
/// (`a`, `d`: no row deleted) come from the summaries, those of `w` from its index, with
/// no scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_index_kind_prunes_with_its_block_summaries() {
    use datafusion::arrow::array::Float64Array;
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    register_pruned_and_plain(&ctx, "ix", "ctable/indexed.b2d").await;
    // 16 blocks of 250 rows; each range falls in a few blocks.
    let cases = [
        ("a", "a BETWEEN 990000 AND 1000100"),
        ("b", "b BETWEEN 499 AND 499.9"),
        ("c", "c = 7"),
        ("c", "c IS NOT NULL AND c < -40"),
        ("d", "d BETWEEN 100 AND 120"),
    ];
    // Before any scan (no zone map yet): the summaries alone.
    for (col, where_) in cases {
        let plan = explain(&ctx, &format!("SELECT {col} FROM ix WHERE {where_}")).await;
        let n = units_pruned(&plan);
        assert!(
            n >= 10 && plan.contains("units (summary"),
            "{where_}: {n} units pruned\n{plan}"
        );
    }
    for (col, where_) in cases {
        let sum = format!("SELECT count(*), sum(CAST({col} AS DOUBLE)) FROM");
        let mut answers = Vec::new();
        for t in ["ix", "ix_plain"] {
            let b = ctx
                .sql(&format!("{sum} {t} WHERE {where_}"))
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            let count = b[0].column(0).as_primitive::<Int64Type>().value(0);
            let s = b[0].column(1).as_any().downcast_ref::<Float64Array>();
            answers.push((count, s.map(|s| s.value(0))));
        }
        assert!(answers[0].0 > 0, "{where_}: no row");
        assert_eq!(answers[0], answers[1], "{where_}");
    }
    // w's FULL index orders ranks: its summaries say nothing of the values, and the
    // lookup by rank finds the one unit holding 'w0001'.
    let plan = explain(&ctx, "SELECT w FROM ix WHERE w = 'w0001'").await;
    assert_eq!(units_pruned(&plan), 15, "{plan}");
    assert!(plan.contains("(index)"), "{plan}");
    // `w`'s extrema are the values of the rows holding its first and last rank.
    for col in ["a", "d", "w"] {
        let sql = format!("SELECT min({col}), max({col}) FROM ix");
        let plan = explain(&ctx, &sql).await;
        assert!(!plan.contains("Blosc2Exec"), "{sql}\n{plan}");
        let got = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let want = ctx
            .sql(&sql.replace(" ix", " ix_plain"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_eq!(got[0].columns(), want[0].columns(), "{sql}");
    }
}

/// FULL, BUCKET and PARTIAL indexes find the blocks of columns in no order, where block
/// summaries prune nothing: FULL `r` (a permutation of 0, 3, 6, …) and `q` (floats with
/// NaN of both signs, ±0.0, ±inf and repeated values); BUCKET `rb`, `qb` (values stored
/// with their low bits cleared, rows found by buckets of 4); PARTIAL `rp` (int32), `qp`
/// (float32). A point lookup reads one unit of 16, a value that is not there none.
/// Random equalities, ranges and lists give the answers of the table with pruning off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_indexes_find_the_blocks_of_unsorted_columns() {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    register_pruned_and_plain(&ctx, "ix", "ctable/indexed.b2d").await;
    let mut cases: Vec<(String, usize)> = Vec::new();
    // (int column, float column, offset of the ints: r is 3k, rb and rp 3k - 6000)
    // A BUCKET index finds the values sharing a stored (cleared) form too: 16 / 3 of them.
    for (r, q, off, fuzz) in [
        ("r", "q", 0, 0),
        ("rb", "qb", -6000, 6),
        ("rp", "qp", -6000, 0),
    ] {
        let v = |k: i64| k * 3 + off;
        cases.extend([
            (format!("{r} = {}", v(1000)), 15 - fuzz),
            (format!("{r} = {}", v(1000) + 1), 16 - fuzz),
            (format!("{} = {r}", v(1000)), 15 - fuzz),
            (
                format!("{r} BETWEEN {} AND {}", v(1000) - 1, v(1001)),
                14 - fuzz,
            ),
            (format!("{r} IN ({}, {})", v(0), v(1000)), 14 - fuzz),
            (format!("{r} > {} AND {r} < 2000000", v(3998)), 15 - fuzz),
            // −0.0 and 0.0 sorted as equals (NumPy's order), NaN last. PARTIAL and
            // BUCKET indexes do not find NaN rows: the blocks holding one (most here)
            // are kept.
            (format!("{q} = 0.0"), usize::from(r == "r")),
            (format!("{q} > 124.0"), 0),
        ]);
    }
    cases.push(("q = 100.25 AND r >= 0".into(), 0));
    for (where_, pruned) in &cases {
        let plan = explain(&ctx, &format!("SELECT r FROM ix WHERE {where_}")).await;
        let n = units_pruned(&plan);
        // The rows over 124 (for FULL `q`, with every NaN row, which SQL may put above
        // every number; for BUCKET `qb`, every row of their buckets) may lie in more than
        // half of the 16 zones, where a lookup stops: it would prune too little.
        let looked_up = plan.contains("+index") || where_.ends_with("> 124.0");
        assert!(
            n >= *pruned && looked_up,
            "{where_}: {n} units pruned, want {pruned} or more\n{plan}"
        );
    }
    // Summaries alone prune none of these.
    let plan = explain(&ctx, "SELECT r FROM ix_plain WHERE r = 3000").await;
    assert!(!plan.contains("+index"), "{plan}");
    // 500 rows of the unsorted `r` lie in every zone: the lookup stops (reading and
    // sorting their positions would prune nothing). About 630 rows of the slowly
    // wandering `a`, in three runs, are looked up.
    for (where_, looked_up) in [("r < 1500", false), ("a BETWEEN 0 AND 500000", true)] {
        let plan = explain(&ctx, &format!("SELECT r FROM ix WHERE {where_}")).await;
        assert_eq!(plan.contains("index)"), looked_up, "{where_}\n{plan}");
        same_count_and_sum(&ctx, "r", ("ix", "ix_plain"), where_).await;
    }
    let mut rng = Rng(0x1DE7_0000_0000_0FAB);
    let q_values = [
        "0.0", "-0.0", "12.25", "-125.0", "124.75", "-187.5", "'NaN'", "'-NaN'", "'inf'", "'-inf'",
    ];
    for (r, q, off) in [("r", "q", 0), ("rb", "qb", -6000), ("rp", "qp", -6000)] {
        for _ in 0..60 {
            let k = rng.next(4000) as i64 * 3 + rng.next(2) as i64 + off;
            let x = q_values[rng.next(q_values.len() as u64) as usize];
            let t = if q == "qp" { "REAL" } else { "DOUBLE" };
            let where_ = match rng.next(7) {
                0 => format!("{r} = {k}"),
                1 => format!("{r} BETWEEN {k} AND {}", k + rng.next(100) as i64),
                2 => format!("{r} IN ({k}, {}, 7)", k / 2),
                3 => format!("{q} = CAST({x} AS {t})"),
                4 => format!(
                    "{q} {} CAST({x} AS {t})",
                    ["<", "<=", ">", ">="][rng.next(4) as usize]
                ),
                5 => format!("{q} IN (CAST({x} AS {t}), 3.5) AND {r} < {k}"),
                _ => format!(
                    "{r} < {} AND {q} >= CAST({x} AS {t})",
                    rng.next(1000) as i64 + off
                ),
            };
            same_count_and_sum(&ctx, r, ("ix", "ix_plain"), &where_).await;
        }
    }
}

/// The rows of `SELECT * … WHERE where_ ORDER BY ts` over tables `pruned` and `plain`,
/// as text: the same.
async fn same_rows(ctx: &SessionContext, (pruned, plain): (&str, &str), where_: &str) {
    let run = |t: &str| format!("SELECT * FROM {t} WHERE {where_} ORDER BY ts");
    let mut answers = Vec::new();
    for t in [pruned, plain] {
        let b = ctx.sql(&run(t)).await.unwrap().collect().await.unwrap();
        answers.push(
            datafusion::arrow::util::pretty::pretty_format_batches(&b)
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(answers[0], answers[1], "{}", run(pruned));
}

/// `ctable/indexed-keys.b2d` (4000 rows in 16 units, every column in no order): indexes
/// over timestamps (`ts` ms UTC FULL, `tb` µs BUCKET, `tp` s PARTIAL), NumPy strings (`s`
/// FULL, `sb` BUCKET, `sp` PARTIAL) and a nullable utf8 column (`u`, FULL: ranks and a
/// vocabulary that stores `'a\0'` as `'a'`), and OPSI indexes (`ro` int64, `qo` float64
/// with NaN of both signs and ±0.0, `so` string). An equality keeps exactly the units holding
/// the value; random equalities, ranges, lists and `LIKE` prefixes give the answers of the
/// table with pruning off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_on_timestamps_and_text_find_their_rows() {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    register_pruned_and_plain(&ctx, "kx", "ctable/indexed-keys.b2d").await;
    // The values in row order (one partition).
    let one = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
    register_pruned_and_plain(&one, "kx", "ctable/indexed-keys.b2d").await;
    let b = one
        .sql(
            "SELECT CAST(ts AS BIGINT), CAST(tb AS BIGINT), CAST(tp AS BIGINT), s, sb, sp, u, \
             ro, so FROM kx_plain",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let (mut ints, mut texts): (Vec<[i64; 4]>, Vec<[Option<String>; 5]>) = (vec![], vec![]);
    for b in &b {
        for i in 0..b.num_rows() {
            let int = |c: usize| b.column(c).as_primitive::<Int64Type>().value(i);
            let text = |c: usize| {
                let a = b.column(c).as_string::<i32>();
                a.is_valid(i).then(|| a.value(i).to_string())
            };
            ints.push([int(0), int(1), int(2), int(7)]);
            texts.push([text(3), text(4), text(5), text(6), text(8)]);
        }
    }
    assert_eq!(ints.len(), 4000);
    assert!(texts.iter().any(|t| t[3].as_deref() == Some("a\0")));
    let quote = |s: &str| {
        let parts: Vec<String> = s
            .split('\0')
            .map(|p| format!("'{}'", p.replace('\'', "''")))
            .collect();
        format!("concat({})", parts.join(", chr(0), "))
    };
    let ts_sql = [
        "to_timestamp_millis",
        "to_timestamp_micros",
        "to_timestamp_seconds",
    ];
    // The units holding a row found (BUCKET: a row's bucket of 4 rows, which may reach
    // into the next unit).
    let units_holding = |hit: &dyn Fn(usize) -> bool, bucket: usize| {
        let mut u: Vec<usize> = (0..4000)
            .filter(|&i| hit(i))
            .flat_map(|i| {
                [
                    i / bucket * bucket / 250,
                    (i / bucket * bucket + bucket - 1) / 250,
                ]
            })
            .collect();
        u.sort_unstable();
        u.dedup();
        u.len()
    };
    // A lookup whose rows lie in more than half of the 16 zones (one unit each) stops:
    // it would prune too little to pay for itself.
    let pruned_by_finds = |holding: usize| if holding > 8 { 0 } else { 16 - holding };
    let mut rng = Rng(0x7E57_0000_0000_0C75);
    for _ in 0..8 {
        let row = rng.next(4000) as usize;
        for (c, name) in ["ts", "tb", "tp", "ro"].into_iter().enumerate() {
            let v = ints[row][c];
            let where_ = match name {
                "ro" => format!("ro = {v}"),
                _ => format!("{name} = {}({v})", ts_sql[c]),
            };
            let plan = explain(&ctx, &format!("SELECT * FROM kx WHERE {where_}")).await;
            let holding = units_holding(&|i| ints[i][c] == v, [1, 4, 1, 1][c]);
            assert_eq!(
                units_pruned(&plan),
                pruned_by_finds(holding),
                "{where_}\n{plan}"
            );
            assert_eq!(plan.contains("index)"), holding <= 8, "{where_}\n{plan}");
        }
        for (c, name) in ["s", "sb", "sp", "u", "so"].into_iter().enumerate() {
            let Some(v) = texts[row][c].clone() else {
                continue;
            };
            let where_ = format!("{name} = {}", quote(&v));
            let plan = explain(&ctx, &format!("SELECT * FROM kx WHERE {where_}")).await;
            let holding =
                units_holding(&|i| texts[i][c].as_deref() == Some(&v), [1, 4, 1, 1, 1][c]);
            assert_eq!(
                units_pruned(&plan),
                pruned_by_finds(holding),
                "{where_}\n{plan}"
            );
        }
    }
    // 'a' and 'a\0' are two values stored alike: each finds its own rows and no fewer.
    for v in ["a", "a\0", "a\0\0", "ab", "😀", "zzz", ""] {
        for (op, other) in [("=", ""), (">", "AND u < 'ab'"), ("<=", "AND u > ''")] {
            let where_ = format!("u {op} {} {other}", quote(v));
            same_rows(&ctx, ("kx", "kx_plain"), &where_).await;
        }
    }
    for where_ in [
        "u > 'a' AND u < 'ab'",
        "u >= concat('a', chr(0)) AND u < 'ab'",
        "u > '' AND u < concat('a', chr(0))",
        "u > '' AND u <= concat('a', chr(0), chr(0))",
    ] {
        let plan = explain(&ctx, &format!("SELECT * FROM kx WHERE {where_}")).await;
        assert!(plan.contains("index)"), "{where_}\n{plan}");
        same_rows(&ctx, ("kx", "kx_plain"), where_).await;
    }
    let prefixes = [
        "w1", "w12", "t00", "Z", "日", "a", "%", "w_3", "w1%2", "t\\%",
    ];
    for _ in 0..90 {
        let row = rng.next(4000) as usize;
        let other = rng.next(4000) as usize;
        let c = rng.next(5) as usize;
        let name = ["s", "sb", "sp", "u", "so"][c];
        let text = |r: usize| quote(texts[r][c].as_deref().unwrap_or("t0100"));
        let t = rng.next(3) as usize;
        let (tname, tf) = (["ts", "tb", "tp"][t], ts_sql[t]);
        let (v, w) = (ints[row][t], ints[other][t]);
        let q = [
            "0.0", "-0.0", "12.25", "-125.0", "'NaN'", "'-NaN'", "'inf'", "'-inf'",
        ][rng.next(8) as usize];
        let (r, r2) = (ints[row][3], ints[other][3]);
        let where_ = match rng.next(12) {
            8 => format!("ro BETWEEN {} AND {}", r.min(r2), r.min(r2) + 30),
            9 => format!("ro IN ({r}, {r2}, 7)"),
            10 => format!(
                "qo {} CAST({q} AS DOUBLE)",
                ["=", "<", "<=", ">", ">="][rng.next(5) as usize]
            ),
            11 => format!("qo BETWEEN CAST({q} AS DOUBLE) AND 3.5"),
            0 => format!("{tname} BETWEEN {tf}({}) AND {tf}({})", v.min(w), v.max(w)),
            1 => format!("{tname} IN ({tf}({v}), {tf}({w}), {tf}({}))", v + 1),
            2 => format!("{tname} > {tf}({v}) AND {tname} < {tf}({})", v + 40_000_000),
            3 => format!("{name} IN ({}, {}, 'nope')", text(row), text(other)),
            4 => format!("{name} BETWEEN {} AND {}", text(row), text(other)),
            5 => format!("{name} > {} AND {name} < {}", text(row), text(other)),
            6 => format!(
                "{name} LIKE '{}'",
                prefixes[rng.next(prefixes.len() as u64) as usize]
            ),
            _ => format!("({name} = {} OR {name} = {})", text(row), text(other)),
        };
        same_rows(&ctx, ("kx", "kx_plain"), &where_).await;
    }
    // Exact extrema from the block summaries, which hold int64 for timestamps.
    for col in ["ts", "tb", "tp", "s", "sb", "sp"] {
        let sql = format!("SELECT min({col}) AS lo, max({col}) AS hi FROM kx");
        let plan = explain(&ctx, &sql).await;
        assert!(!plan.contains("Blosc2Exec"), "{sql}\n{plan}");
        let mut answers = Vec::new();
        for sql in [sql.clone(), sql.replace(" kx", " kx_plain")] {
            let b = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            answers.push(
                datafusion::arrow::util::pretty::pretty_format_batches(&b)
                    .unwrap()
                    .to_string(),
            );
        }
        assert_eq!(answers[0], answers[1], "{sql}");
    }
    // A prefix pruned by the lookups: the units holding no value starting with it.
    let plan = explain(&ctx, "SELECT * FROM kx WHERE s LIKE 'w12%'").await;
    let want = 16
        - units_holding(
            &|i| texts[i][0].as_deref().is_some_and(|s| s.starts_with("w12")),
            1,
        );
    assert_eq!(units_pruned(&plan), want, "{plan}");
}

/// Dynamic filters looked up in a CTable's indexes (`ctable/indexed.b2d`, 16 units): a
/// join's keys (`r IN (…)` once the build side is read) find the units holding them, and
/// only those units' blocks are decoded, the key column's included. The rows (of joins
/// and of TopKs, whose thresholds are looked up too) are those of the same query without
/// dynamic filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_filters_look_up_indexes() {
    let ctx = SessionContext::new();
    register_pruned_and_plain(&ctx, "ix", "ctable/indexed.b2d").await;
    // (query, most blocks decoded: 2 columns of the units holding the keys)
    let cases = [
        // FULL: 3 keys in 3 units.
        (
            "SELECT ix.r, ix.a FROM ix JOIN (VALUES (3000), (9), (11997)) k(c) ON ix.r = k.c \
             ORDER BY ix.r",
            6,
        ),
        // BUCKET (its stored values cleared: the units of values sharing a key's
        // cleared form too, yet fewer blocks than the key column alone), PARTIAL.
        (
            "SELECT ix.rb, ix.a FROM ix JOIN (VALUES (-3000), (9)) k(c) ON ix.rb = k.c \
             ORDER BY ix.rb",
            15,
        ),
        (
            "SELECT ix.rp, ix.a FROM ix JOIN (VALUES (-5997), (0), (3)) k(c) ON ix.rp = k.c \
             ORDER BY ix.rp",
            6,
        ),
        // utf8 by rank (a unit of text decodes a block of offsets and one of bytes).
        (
            "SELECT ix.w, ix.a FROM ix JOIN (VALUES ('w0001'), ('w3999')) k(c) ON ix.w = k.c \
             ORDER BY ix.w",
            6,
        ),
    ];
    // Collected build sides, then partitioned ones: each partition's keys in a branch
    // of `CASE hash(c) % 2 WHEN 0 THEN … END`, looked up as their union.
    for partitioned in [false, true] {
        for (sql, most) in cases {
            let (rows, plan) = run_dynamic_plan_joining(&ctx, sql, true, 2, partitioned).await;
            let (plain, _) = run_dynamic_plan(&ctx, sql, false, 2).await;
            let text = |b: &[RecordBatch]| {
                datafusion::arrow::util::pretty::pretty_format_batches(b)
                    .unwrap()
                    .to_string()
            };
            assert_eq!(text(&rows), text(&plain), "{sql}");
            assert!(
                rows.iter().map(|b| b.num_rows()).sum::<usize>() > 0,
                "{sql}"
            );
            let shown = datafusion::physical_plan::displayable(plan.as_ref())
                .indent(true)
                .to_string();
            assert_eq!(shown.contains("Partitioned"), partitioned, "{shown}");
            let decoded = scan_metric_sum(&plan, "blocks_decoded");
            assert!(decoded <= most, "{sql}: {decoded} blocks decoded");
        }
    }
    // A TopK over r (in no order): its threshold is looked up as it narrows (here the
    // values past it lie in most units; the rows are what matters).
    for sql in [
        "SELECT r, a FROM ix ORDER BY r DESC LIMIT 3",
        "SELECT q, a FROM ix ORDER BY q LIMIT 3",
        "SELECT rb, a FROM ix ORDER BY rb DESC LIMIT 3",
    ] {
        let (rows, _) = run_dynamic_plan(&ctx, sql, true, 1).await;
        let (plain, _) = run_dynamic_plan(&ctx, sql, false, 1).await;
        assert_eq!(rows, plain, "{sql}");
    }
}
