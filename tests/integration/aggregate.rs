//! Aggregates fused into the scan (`Blosc2AggregateExec`) against DataFusion's own
//! aggregation of the same scan: every fixture dtype `sum`/`avg`/`count`/`min`/`max` apply
//! to, nulls, NaN, dim ranges the scan trims, several partition counts. Each
//! query's plan is checked to have taken the fused path (or, for shapes it must leave
//! alone, not to).

use crate::util::{compare_batches, explain};
use datafusion::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_blosc2::provider::session::open_provider;
use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};

/// A context whose tables were registered with the rule (`fused`) and one without it.
async fn contexts(partitions: usize, tables: &[(&str, &str)]) -> (SessionContext, SessionContext) {
    let cfg = || SessionConfig::new().with_target_partitions(partitions);
    let fused = SessionContext::new_with_config(cfg());
    let plain = SessionContext::new_with_config(cfg());
    for (name, path) in tables {
        let opts = Blosc2Options::default();
        fused
            .register_blosc2(name, path, opts.clone())
            .await
            .unwrap();
        let t = open_provider(&plain.runtime_env(), path, &opts)
            .await
            .unwrap();
        plain.register_table(*name, t).unwrap();
    }
    (fused, plain)
}

/// The plan of `sql` (before it runs: a run can map zones that change the next plan) and
/// its result.
async fn run(ctx: &SessionContext, sql: &str) -> (Vec<RecordBatch>, String) {
    let plan = explain(ctx, sql).await;
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    (batches, plan)
}

/// Compares results value by value: floats to 1e-12 relative (the fused sum adds in
/// another order), NaN and null as themselves, everything else exactly.
fn assert_same(sql: &str, a: &[RecordBatch], b: &[RecordBatch]) {
    if let Err(e) = compare_batches(a, b, 1e-12) {
        panic!("{sql}: {e}");
    }
}

/// Runs `sql` on both contexts, checks the results agree and whether the fused plan used
/// the fused node.
async fn check(fused: &SessionContext, plain: &SessionContext, sql: &str, expect_fused: bool) {
    let (a, plan_a) = run(fused, sql).await;
    let (b, plan_b) = run(plain, sql).await;
    assert_same(sql, &a, &b);
    assert_eq!(
        plan_a.contains("Blosc2AggregateExec"),
        expect_fused,
        "{sql}\n{plan_a}"
    );
    assert!(!plan_b.contains("Blosc2AggregateExec"), "{sql}\n{plan_b}");
}

/// [`check`], expecting the fused node unless the plan spreads the scan by a round-robin
/// repartition between scan and aggregation (a scan of fewer units than partitions, which
/// keeps DataFusion's plan: only with several partitions). The fused plan, and whether
/// it was spread.
async fn check_fused_unless_spread(
    fused: &SessionContext,
    plain: &SessionContext,
    sql: &str,
    partitions: usize,
) -> (String, bool) {
    let (_, plan) = run(fused, sql).await;
    let spread = plan.contains("RoundRobinBatch");
    assert!(!spread || partitions > 1, "{sql}\n{plan}");
    check(fused, plain, sql, !spread).await;
    (plan, spread)
}

#[tokio::test]
async fn fused_aggregates_match_datafusion_on_every_numeric_dtype() {
    let dtypes = [
        "le_f2", "le_f4", "le_f8", "be_f8", "le_i2", "le_i4", "le_i8", "be_i4", "le_u2", "le_u4",
        "le_u8", "na_i1", "na_u1",
    ];
    let tables: Vec<(String, String)> = dtypes
        .iter()
        .map(|d| {
            (
                format!("t_{d}"),
                format!("tests/fixtures/b2nd/dtype-{d}.b2nd"),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = tables
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    for partitions in [2, 3] {
        let (fused, plain) = contexts(partitions, &refs).await;
        for (name, _) in &tables {
            let all = format!(
                "SELECT sum(value), avg(value), count(*), count(value), sum(dim_0), avg(dim_0), \
                 min(value), max(value) FROM {name}"
            );
            check(&fused, &plain, &all, true).await;
            let range = format!(
                "SELECT sum(value), count(*), max(value), min(value) FROM {name} \
                 WHERE dim_0 BETWEEN 3 AND 40"
            );
            check(&fused, &plain, &range, true).await;
            let grouped = format!(
                "SELECT dim_0, sum(value), avg(value), count(*), count(value), min(value), \
                 max(value) FROM {name} WHERE dim_0 BETWEEN 3 AND 40 GROUP BY dim_0 ORDER BY dim_0"
            );
            check(&fused, &plain, &grouped, true).await;
        }
    }
}

#[tokio::test]
async fn fused_aggregates_over_tables_with_nulls_nan_and_ranges() {
    let tables = [
        ("nulls", "tests/fixtures/ctable/nulls.b2d"),
        ("ev", "tests/fixtures/ctable/events.b2d"),
        ("geo", "tests/fixtures/b2nd/geom-3d-tiles.b2nd"),
        ("big", "tests/fixtures/b2nd/geom-1d-big.b2nd"),
        ("u8max", "tests/fixtures/b2nd/dtype-le_u8.b2nd"),
        ("specials", "tests/fixtures/b2nd/special-*.b2nd"),
        ("ts_ms", "tests/fixtures/b2nd/dtype-le_M8_ms.b2nd"),
        ("days", "tests/fixtures/b2nd/dtype-le_M8_D.b2nd"),
        ("dur", "tests/fixtures/b2nd/dtype-le_m8_ns.b2nd"),
        ("h", "tests/fixtures/b2nd/dtype-le_f2.b2nd"),
    ];
    let (fused, plain) = contexts(2, &tables).await;
    let yes = [
        "SELECT sum(a), avg(a), count(a), sum(f), avg(f), count(f), sum(g), avg(g), count(*) FROM nulls",
        "SELECT sum(t), avg(v), sum(v), count(k), sum(k) FROM ev",
        "SELECT sum(value), avg(value), sum(dim_1), count(*) FROM geo",
        "SELECT sum(value) FROM geo WHERE dim_0 IN (1, 3) AND dim_2 < 5",
        "SELECT sum(value), avg(value) FROM big WHERE dim_0 > 99990",
        // Empty selection: a sum over nothing is null, a count 0.
        "SELECT sum(value), avg(value), count(*) FROM big WHERE dim_0 < 0",
        // Unsigned values sum as UInt64 (wrapping is checked in the unit tests of `fold`).
        "SELECT sum(value), count(*) FROM u8max",
        // A LIMIT DataFusion pushed into the scan still bounds what is summed.
        "SELECT sum(value), count(*) FROM (SELECT value FROM big LIMIT 10)",
        // A multi-file table: one fused node per member.
        "SELECT sum(value), avg(value), count(*) FROM specials",
        "SELECT sum(value), count(value) FROM specials WHERE dim_0 < 10",
        // Grouped by one coordinate: dense states over the coordinate's range.
        "SELECT dim_0, sum(value), avg(value), count(*), count(value) FROM geo GROUP BY dim_0 ORDER BY dim_0",
        "SELECT dim_2, avg(value), sum(dim_1) FROM geo WHERE dim_0 IN (1, 3) AND dim_2 < 5 GROUP BY dim_2 ORDER BY dim_2",
        "SELECT dim_1, count(*) FROM geo GROUP BY dim_1 ORDER BY dim_1",
        "SELECT dim_0, sum(value), avg(value) FROM big WHERE dim_0 > 99990 GROUP BY dim_0 ORDER BY dim_0",
        "SELECT dim_0, sum(value), count(*) FROM specials GROUP BY dim_0 ORDER BY dim_0",
        "SELECT dim_0, sum(value) FROM u8max GROUP BY dim_0 ORDER BY dim_0",
        // min/max by total order: NaN (v), nulls (k, a, f, g, NaT), temporal types, an
        // unsigned column past i64 (u8max), special chunks (specials).
        "SELECT min(v), max(v), min(k), max(k), count(*) FROM ev",
        "SELECT min(value), max(value), count(value) FROM ts_ms",
        "SELECT min(value), max(value), count(*) FROM days WHERE dim_0 > 2",
        "SELECT dim_0, min(value), max(value) FROM dur GROUP BY dim_0 ORDER BY dim_0",
        "SELECT min(value), max(value), count(*) FROM h",
        "SELECT min(v), max(v), min(t), max(t), min(k), max(k), avg(v) FROM ev",
        // (`avg(a)`: the queries above mapped every zone, so the exact statistics would
        // answer min, max and count alone.)
        "SELECT min(a), max(a), min(f), max(f), min(g), max(g), avg(a) FROM nulls",
        "SELECT min(value), max(value), sum(value) FROM u8max",
        "SELECT min(value), max(value), avg(value) FROM specials",
        "SELECT dim_0, min(value), max(value) FROM geo GROUP BY dim_0 ORDER BY dim_0",
        "SELECT dim_2, max(value), min(dim_1) FROM geo WHERE dim_0 IN (1, 3) GROUP BY dim_2 ORDER BY dim_2",
        "SELECT dim_0, min(value), max(value) FROM specials GROUP BY dim_0 ORDER BY dim_0",
        "SELECT dim_0, max(value) FROM u8max GROUP BY dim_0 ORDER BY dim_0",
        // Ungrouped min/max alone where no zone is mapped (an N-d array scanned without a
        // value filter maps none; no scan converted the text column).
        "SELECT min(value), max(value) FROM geo",
        "SELECT max(tag) FROM ev",
        // A filter left above the scan: evaluated by the fused node.
        "SELECT sum(t) FROM ev WHERE v > 50",
        // An integer column: its values numbered as they come.
        "SELECT k, sum(t) FROM ev GROUP BY k ORDER BY k",
        // DISTINCT over an integer column: its inner grouping by the value.
        "SELECT sum(DISTINCT value) FROM geo",
    ];
    for sql in yes {
        check(&fused, &plain, sql, true).await;
    }
    // Shapes the fused node leaves to DataFusion.
    let no = [
        "SELECT dim_0, dim_1, sum(value) FROM geo GROUP BY dim_0, dim_1 ORDER BY dim_0, dim_1",
        "SELECT dim_0, sum(value) FROM big WHERE dim_0 < 0 GROUP BY dim_0",
        // DISTINCT over a float column (its inner grouping by the value).
        "SELECT sum(DISTINCT value) FROM h",
        // No rows selected: DataFusion answers min/max from the exact statistics.
        "SELECT min(value), max(value) FROM big WHERE dim_0 < 0",
        // Ungrouped min/max alone once earlier scans mapped zones (the queries above did):
        // DataFusion's dynamic filter prunes the scan instead, or the exact statistics
        // answer them.
        "SELECT max(value) FROM u8max",
        "SELECT sum(t) FILTER (WHERE k > 3) FROM ev",
        // A float key computed (only integer and temporal ones are numbered).
        "SELECT value / 2 AS v, count(*) FROM h GROUP BY value / 2 ORDER BY v",
    ];
    for sql in no {
        check(&fused, &plain, sql, false).await;
    }
}

/// Grouped by a CTable dictionary column (`cat`: nullable, with `''` and non-ASCII values;
/// `word`: 2,600 values spanning batches of its store), in one partition (the fused node
/// gives the final values) and several (partial states): the rows agree with DataFusion's
/// own grouping, and the counts per `cat` with python-blosc2's values of the column
/// (deleted rows absent, nulls a group of their own).
#[tokio::test]
async fn fused_grouping_by_dictionary_codes() {
    let want = crate::util::expected_json("tables.json");
    let mut counts: std::collections::BTreeMap<Option<String>, i64> = Default::default();
    for v in want["ctable/varlen.b2d"]["columns"]["cat"]
        .as_array()
        .unwrap()
    {
        *counts.entry(v.as_str().map(String::from)).or_default() += 1;
    }
    let tables = [
        ("vd", "tests/fixtures/ctable/varlen.b2d"),
        ("vz", "tests/fixtures/ctable/varlen.b2z"),
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for t in ["vd", "vz"] {
            let sql =
                format!("SELECT cat, count(*) FROM {t} GROUP BY cat ORDER BY cat NULLS FIRST");
            check(&fused, &plain, &sql, true).await;
            let got = text_counts(&run(&fused, &sql).await.0);
            assert_eq!(got, counts.clone().into_iter().collect::<Vec<_>>(), "{sql}");
            for sql in [
                "SELECT cat, count(*), count(cat), sum(i), avg(i), min(i), max(i) FROM {t} \
                 GROUP BY cat ORDER BY cat",
                "SELECT word, count(*), sum(i), max(i) FROM {t} GROUP BY word ORDER BY word",
            ] {
                check(&fused, &plain, &sql.replace("{t}", t), true).await;
            }
            // A LIMIT DataFusion pushed into a one-partition scan still bounds what is
            // grouped (over several, the limit is applied between scan and aggregation).
            let sql = format!(
                "SELECT cat, count(*) FROM (SELECT cat FROM {t} LIMIT 700) GROUP BY cat ORDER BY cat"
            );
            check(&fused, &plain, &sql, partitions == 1).await;
            // A filter DataFusion applies above the scan is evaluated by the fused node.
            let sql = format!(
                "SELECT cat, count(*) FROM {t} WHERE word = 'w0007' GROUP BY cat ORDER BY cat"
            );
            check(&fused, &plain, &sql, true).await;
        }
    }
}

/// Grouped by a table's `U<n>` column, whose stored UTF-32 records the scan hands over
/// as they are (`raw_records=[…]`): `word` (non-ASCII, astral, NUL and empty values, a
/// value filling its width, deleted rows), `opt` (a mask sidecar whose null rows store
/// `''` beside non-null `''`), `b` (a text sentinel for NULL), `s` (~900 values over
/// 4,000 rows). On 1–3 partitions, every row agrees with DataFusion's own grouping, and
/// the counts per key with python-blosc2's values of the column.
#[tokio::test]
async fn fused_grouping_by_utf32_records() {
    let tables = [
        ("td", "tests/fixtures/ctable/texts.b2d"),
        ("tz", "tests/fixtures/ctable/texts.b2z"),
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
        ("ik", "tests/fixtures/ctable/indexed-keys.b2d"),
    ];
    let cases = [
        ("td", "word", "ctable/texts.b2d"),
        ("td", "opt", "ctable/texts.b2d"),
        ("tz", "word", "ctable/texts.b2z"),
        ("tz", "opt", "ctable/texts.b2z"),
        ("nl", "b", "ctable/nulls.b2d"),
        ("ik", "s", "ctable/indexed-keys.b2d"),
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        check_text_counts(&fused, &plain, &cases).await;
        for sql in [
            "SELECT word, count(*), sum(i), avg(i), min(i), max(i), count(opt) FROM td \
             GROUP BY word ORDER BY word",
            "SELECT opt, count(*), sum(i) FROM tz GROUP BY opt ORDER BY opt",
            "SELECT b, count(*), count(a), sum(a), avg(f), min(g), max(f) FROM nl GROUP BY b ORDER BY b",
            "SELECT s, count(*), sum(ro), avg(qo), min(ro), max(ts) FROM ik GROUP BY s ORDER BY s",
        ] {
            check(&fused, &plain, sql, true).await;
        }
        // A TopK over the keys pushes a dynamic filter on the key column into the scan,
        // which reads it converted for the filter and raw for the batch.
        for sql in [
            "SELECT b, count(*), avg(f) FROM nl GROUP BY b ORDER BY b LIMIT 8",
            "SELECT word, count(*), sum(i) FROM td GROUP BY word ORDER BY word DESC LIMIT 3",
        ] {
            check(&fused, &plain, sql, true).await;
        }
        // The key column also aggregated: grouped by its converted text (the records
        // would not see the sentinel applied).
        let sql = "SELECT b, count(b) FROM nl GROUP BY b ORDER BY b";
        let (plan, spread) = check_fused_unless_spread(&fused, &plain, sql, partitions).await;
        assert!(spread || !plan.contains("raw_records"), "{sql}\n{plan}");
    }
}

/// `min`/`max` of a table's text columns folded over their stored values: `U<n>`
/// records with non-ASCII, astral and NUL letters and the empty string, mask nulls, a
/// sentinel (`__BLOSC2_NULL__`), deleted rows; `utf8` and `vlstring` items with long
/// items, `nil` items and the utf8 sentinel; dictionary columns with null codes; beside
/// other aggregates and under a filter
/// on another column; on 1, 2 and 3 partitions, against DataFusion's `min`/`max` of the
/// converted strings. Shapes where the values would be read otherwise keep DataFusion's
/// plan.
#[tokio::test]
async fn fused_text_min_max_over_stored_values() {
    let tables = [
        ("td", "tests/fixtures/ctable/texts.b2d"),
        ("tz", "tests/fixtures/ctable/texts.b2z"),
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
        ("ik", "tests/fixtures/ctable/indexed-keys.b2d"),
        ("tk", "tests/fixtures/ctable/text-keys.b2d"),
        ("vd", "tests/fixtures/ctable/varlen.b2d"),
        ("vz", "tests/fixtures/ctable/varlen.b2z"),
        ("sn", "tests/fixtures/ctable/sparse-nulls.b2d"),
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for sql in [
            "SELECT min(word), max(word) FROM td",
            "SELECT max(opt), min(opt), count(*), sum(i) FROM td",
            "SELECT min(word), max(opt) FROM tz",
            "SELECT min(b), max(b), avg(f) FROM nl",
            "SELECT min(word), max(word) FROM td WHERE i > 600",
            // No row passes (row 999 is deleted): NULL.
            "SELECT max(word), min(opt) FROM td WHERE i % 1000 = 999",
            // `utf8` and `vlstring` items.
            "SELECT min(u), max(u), min(m), max(m), min(v), max(v), count(*) FROM tk",
            "SELECT min(note), max(note) FROM vd",
            "SELECT max(note), sum(i) FROM vz WHERE i > 3",
            "SELECT min(name), max(name), avg(x) FROM sn",
            "SELECT min(s), max(s) FROM nl",
            // Dictionary columns (with null codes): the values their codes name.
            "SELECT min(cat), max(cat), min(word), max(word), count(cat) FROM vd",
            "SELECT max(cat), min(note) FROM vz WHERE i > 3",
        ] {
            check(&fused, &plain, sql, true).await;
        }
        for sql in [
            // The column counted too (the sentinel is applied to text, not records),
            // filtered on, or grouped over.
            "SELECT min(b), count(b) FROM nl",
            "SELECT max(word) FROM td WHERE word <> 'beta'",
            "SELECT opt, max(word) FROM td GROUP BY opt ORDER BY opt",
            // Answered from the column's FULL index, without a scan.
            "SELECT min(s), max(s) FROM ik",
        ] {
            check(&fused, &plain, sql, false).await;
        }
    }
}

/// `GROUP BY` a table's `utf8` or `vlstring` column inside the scan, over its UTF-8
/// items as stored: the counts per key against python-blosc2's values, every aggregate
/// against DataFusion's grouping, on 1, 2 and 3 partitions. The columns hold '', NUL,
/// non-ASCII and astral letters, prefixes of other values, long items (3,000 and 70,000
/// bytes), `nil` items, mask nulls and the utf8 sentinel `__BLOSC2_NULL__` (NULL), and
/// both `'a'` and `'a\0'`.
#[tokio::test]
async fn fused_grouping_by_utf8_items() {
    let tables = [
        ("tk", "tests/fixtures/ctable/text-keys.b2d"),
        ("vd", "tests/fixtures/ctable/varlen.b2d"),
        ("vz", "tests/fixtures/ctable/varlen.b2z"),
        ("sn", "tests/fixtures/ctable/sparse-nulls.b2d"),
        ("ik", "tests/fixtures/ctable/indexed-keys.b2d"),
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
    ];
    let cases = [
        ("tk", "u", "ctable/text-keys.b2d"),
        ("tk", "m", "ctable/text-keys.b2d"),
        ("tk", "v", "ctable/text-keys.b2d"),
        ("vd", "note", "ctable/varlen.b2d"),
        ("vz", "note", "ctable/varlen.b2z"),
        ("sn", "name", "ctable/sparse-nulls.b2d"),
        ("ik", "u", "ctable/indexed-keys.b2d"),
        ("nl", "s", "ctable/nulls.b2d"),
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        check_text_counts(&fused, &plain, &cases).await;
        for sql in [
            "SELECT v, count(*), sum(i), avg(i), min(i), max(i), count(u), count(m) FROM tk \
             GROUP BY v ORDER BY v",
            "SELECT u, count(*), sum(i), count(v) FROM tk GROUP BY u ORDER BY u",
            "SELECT note, count(*), sum(i), count(cat) FROM vd GROUP BY note ORDER BY note",
            "SELECT name, count(*), avg(x), min(z), max(y) FROM sn GROUP BY name ORDER BY name",
        ] {
            check(&fused, &plain, sql, true).await;
        }
        // A filter on the key (a text match the scan applies in part): grouped by its
        // converted text.
        for sql in [
            "SELECT v, count(*), sum(i) FROM tk WHERE v IN ('', 'a', 'k0001', 'k0002') \
             GROUP BY v ORDER BY v",
            "SELECT note, count(*) FROM vz WHERE note LIKE 'é%' GROUP BY note ORDER BY note",
        ] {
            let (plan, spread) = check_fused_unless_spread(&fused, &plain, sql, partitions).await;
            assert!(spread || !plan.contains("raw_records"), "{sql}\n{plan}");
        }
        // TopK over the keys: a dynamic filter on the key column, read converted for it
        // and raw for the batch.
        for sql in [
            "SELECT v, count(*) AS n FROM tk GROUP BY v ORDER BY n DESC, v LIMIT 3",
            "SELECT m, count(*), sum(i) FROM tk GROUP BY m ORDER BY m DESC LIMIT 4",
        ] {
            check(&fused, &plain, sql, true).await;
        }
        // The key column also aggregated: grouped by its converted text.
        let sql = "SELECT v, count(v) FROM tk GROUP BY v ORDER BY v";
        check_fused_unless_spread(&fused, &plain, sql, partitions).await;
    }
}

/// A filter DataFusion keeps above the scan (`FilterExec`, with or without a projection
/// of its own) is evaluated by the fused node on each batch: every grouping (dictionary
/// codes, a coordinate, `U<n>` records, UTF-8 items) and ungrouped aggregates, filters
/// whose value is NULL for some rows, a counted column the filter also reads (so read
/// whole, not for its nulls alone), on 1–3 partitions, each against DataFusion's plan. A
/// filter on a text key keeps DataFusion's plan (the key would arrive as records). A
/// multi-file table's members each evaluate the filter DataFusion pushed into them.
#[tokio::test]
async fn fused_aggregation_under_a_filter() {
    let tables = [
        ("vd", "tests/fixtures/ctable/varlen.b2d"),
        ("tk", "tests/fixtures/ctable/text-keys.b2d"),
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
        ("geo", "tests/fixtures/b2nd/geom-3d-tiles.b2nd"),
        ("pt", "tests/fixtures/partitioned/temps"),
    ];
    let fused_queries = [
        "SELECT cat, count(*), sum(i) FROM vd WHERE word = 'w0007' GROUP BY cat ORDER BY cat",
        "SELECT cat, count(*), avg(i), count(note) FROM vd WHERE i % 3 = 1 AND note IS NOT NULL \
         GROUP BY cat ORDER BY cat",
        "SELECT cat, count(*), max(i) FROM vd WHERE cat IN ('north', '') GROUP BY cat ORDER BY cat",
        // The first units keep no row: filtered to empty batches, whose dictionary is empty.
        "SELECT cat, count(*), sum(i) FROM vd WHERE abs(i - 2900) < 50 GROUP BY cat ORDER BY cat",
        "SELECT v, count(*), sum(i) FROM tk WHERE i > 2000 GROUP BY v ORDER BY v",
        "SELECT u, count(*), min(i) FROM tk WHERE m IS NULL GROUP BY u ORDER BY u",
        "SELECT count(*), count(a), sum(a), avg(f) FROM nl WHERE a > 40",
        "SELECT count(f), sum(g) FROM nl WHERE f IS NULL OR g < 0",
        // `f` only counted, but filtered on by value: read whole.
        "SELECT count(f), count(*) FROM nl WHERE f > 3",
        "SELECT b, count(*), min(g), max(f) FROM nl WHERE f > 3 GROUP BY b ORDER BY b",
        "SELECT dim_0, count(*), avg(value) FROM geo WHERE value % 3 = 0 GROUP BY dim_0 \
         ORDER BY dim_0",
        "SELECT sum(value), count(*) FROM geo WHERE dim_2 % 5 = 0 AND value % 2 = 1",
        // A multi-file table: DataFusion pushes the filter into each member of the union.
        "SELECT count(*), avg(value), min(value), count(value) FROM pt WHERE value > 20",
        "SELECT dim_0, count(*), max(value) FROM pt WHERE value > 12.5 GROUP BY dim_0 \
         ORDER BY dim_0",
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for sql in fused_queries {
            // A scan of fewer units than partitions (`nl`, or pruned to a few units) is
            // spread by a round-robin repartition between filter and aggregation, which
            // keeps DataFusion's plan; on one partition every query is fused.
            let (plan, spread) = check_fused_unless_spread(&fused, &plain, sql, partitions).await;
            assert!(spread || plan.contains(", filter="), "{sql}\n{plan}");
            assert!(spread || !plan.contains("FilterExec"), "{sql}\n{plan}");
        }
        let query = |start: &str| *fused_queries.iter().find(|q| q.starts_with(start)).unwrap();
        let (_, plan) = run(&fused, query("SELECT v, count(*), sum(i) FROM tk WHERE i")).await;
        assert!(plan.contains("raw_records=[v]"), "{plan}");
        // `a` is filtered on: read whole, not for its nulls alone.
        let (_, plan) = run(&fused, query("SELECT count(*), count(a)")).await;
        assert!(!plan.contains("nulls_only"), "{plan}");
        // A filter on a text key: grouped by its converted text.
        for sql in [
            "SELECT v, count(*) FROM tk WHERE v LIKE 'k00%' GROUP BY v ORDER BY v",
            "SELECT b, count(*) FROM nl WHERE b <> 'b7' GROUP BY b ORDER BY b",
        ] {
            check_fused_unless_spread(&fused, &plain, sql, partitions).await;
        }
    }
}

/// A directory partitioned by `year=`/`station=` (hive path columns, constant in each
/// member file) grouped by its path columns: each member's fused node folds its rows
/// ungrouped and outputs them under its keys, with filters over the member's projection
/// (reading path columns too) and members left with no row (no group); also grouped by
/// path columns and one coordinate. Grouping by a path column and a float column keeps
/// DataFusion's plan.
#[tokio::test]
async fn fused_grouping_by_path_columns() {
    let tables = [("pt", "tests/fixtures/partitioned/temps")];
    let fused_queries = [
        "SELECT station, count(*), avg(value), min(value), max(value) FROM pt GROUP BY station \
         ORDER BY station",
        "SELECT year, station, count(*), sum(value), count(value) FROM pt GROUP BY year, station \
         ORDER BY year, station",
        "SELECT filename, count(*), max(value) FROM pt GROUP BY filename ORDER BY filename",
        "SELECT station, count(*), sum(value) FROM pt WHERE value > 12.5 GROUP BY station \
         ORDER BY station",
        // Filters reading a path column the query does not group by.
        "SELECT station, count(*), min(value) FROM pt WHERE value > 14 OR year = 2023 \
         GROUP BY station ORDER BY station",
        "SELECT count(*), avg(value), max(value) FROM pt WHERE value > 14 OR station = 'north'",
        // Some members keep no row, then none does.
        "SELECT year, count(*), min(value) FROM pt WHERE value > 18 GROUP BY year ORDER BY year",
        "SELECT station, count(*) FROM pt WHERE value > 100 GROUP BY station ORDER BY station",
        // A coordinate read through the members' projections.
        "SELECT dim_0, count(*), sum(value) FROM pt WHERE year = 2024 OR value < 9 \
         GROUP BY dim_0 ORDER BY dim_0",
        // Path columns and a coordinate, in either order.
        "SELECT station, dim_0, count(*), avg(value) FROM pt GROUP BY station, dim_0 \
         ORDER BY station, dim_0",
        "SELECT dim_0, year, count(*), max(value) FROM pt WHERE value > 8 \
         GROUP BY dim_0, year ORDER BY dim_0, year",
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for sql in fused_queries {
            check(&fused, &plain, sql, true).await;
            let (_, plan) = run(&fused, sql).await;
            // Every member fused: DataFusion keeps no partial aggregation or filter.
            let partial = |l: &str| l.trim_start().starts_with("AggregateExec: mode=Partial");
            assert!(!plan.lines().any(partial), "{sql}\n{plan}");
            assert!(!plan.contains("FilterExec"), "{sql}\n{plan}");
        }
        let (got, plan) = run(&fused, fused_queries[1]).await;
        assert!(
            plan.contains("gby=[year=2023, station=south east]"),
            "{plan}"
        );
        let rows: usize = got.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 3);
        let (got, _) = run(&fused, fused_queries[7]).await;
        assert_eq!(got.iter().map(RecordBatch::num_rows).sum::<usize>(), 0);
        let (_, plan) = run(&fused, fused_queries[10]).await;
        assert!(plan.contains("gby=[dim_0, year=2024]"), "{plan}");
        check(
            &fused,
            &plain,
            "SELECT station, value, count(*) FROM pt GROUP BY station, value \
             ORDER BY station, value",
            false,
        )
        .await;
    }
}

/// Arguments and group keys that are expressions (`avg(length(note))`, `sum(price * qty)`,
/// `GROUP BY date_trunc('day', t)`), which the fused node evaluates on the rows it folds:
/// against DataFusion's own plan, on 1, 2 and 3 partitions, over nulls, text converted
/// from `U<n>` records and `vlstring` items, dictionary and coordinate keys, timestamps
/// and dates, filters, and a partitioned directory's members.
#[tokio::test]
async fn fused_aggregation_over_computed_arguments_and_keys() {
    let tables = [
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
        ("ev", "tests/fixtures/ctable/events.b2d"),
        ("vd", "tests/fixtures/ctable/varlen.b2d"),
        ("td", "tests/fixtures/ctable/texts.b2d"),
        ("geo", "tests/fixtures/b2nd/geom-3d-tiles.b2nd"),
        ("ts", "tests/fixtures/b2nd/dtype-le_M8_ms.b2nd"),
        ("days", "tests/fixtures/b2nd/dtype-le_M8_D.b2nd"),
        ("pt", "tests/fixtures/partitioned/temps"),
        ("tk", "tests/fixtures/ctable/text-keys.b2d"),
        ("u3", "tests/fixtures/b2nd/dtype-le_U3.b2nd"),
    ];
    let fused_queries = [
        // Arguments: arithmetic, functions over converted text, CASE, casts that narrow.
        "SELECT sum(a * 2 + g), avg(f * f), count(f + 1), min(a - g), max(abs(g)) FROM nl",
        "SELECT count(*), avg(length(s)), max(length(b)), sum(CASE WHEN a > 40 THEN 1 ELSE 0 END) \
         FROM nl",
        "SELECT cat, count(*), avg(length(note)), sum(i % 7), max(i * 2 - 1), \
         count(CASE WHEN i % 3 = 0 THEN 1 END) FROM vd GROUP BY cat ORDER BY cat",
        "SELECT word, sum(length(note)), min(CAST(i AS SMALLINT)) FROM vd WHERE i % 5 <> 2 \
         GROUP BY word ORDER BY word",
        "SELECT min(character_length(word)), max(length(opt)), avg(i / 3) FROM td",
        "SELECT sum(v * k), avg(CAST(t AS Double) / 1000), min(v - t), max(CAST(k AS SMALLINT)) \
         FROM ev WHERE k IS NOT NULL",
        "SELECT dim_0, sum(value * dim_1), max(value - dim_2) FROM geo GROUP BY dim_0 ORDER BY dim_0",
        // (`date_trunc` over the NaT rows, whose stored value is i64::MIN, overflows in a
        // debug build, in DataFusion's plan too: they are filtered out.)
        "SELECT max(value + INTERVAL '1' DAY), min(date_trunc('hour', value)) FROM ts \
         WHERE value IS NOT NULL",
        // Keys: integer expressions, truncated timestamps, dates, a text column's length.
        "SELECT dim_0 % 2 AS d, sum(value) FROM geo GROUP BY dim_0 % 2 ORDER BY d",
        "SELECT dim_1 / 3 AS b, count(*), max(value) FROM geo WHERE dim_2 < 5 GROUP BY b ORDER BY b",
        "SELECT i % 7 AS m, count(*), avg(length(note)), min(i) FROM vd GROUP BY m ORDER BY m",
        "SELECT length(word) AS l, count(*), sum(i) FROM td GROUP BY l ORDER BY l",
        "SELECT a % 3 AS m, count(*), sum(g), count(a) FROM nl GROUP BY m ORDER BY m NULLS FIRST",
        "SELECT k * 10 AS b, count(*), min(t), avg(v) FROM ev GROUP BY b ORDER BY b NULLS FIRST",
        "SELECT date_trunc('day', value) AS d, count(*), count(value) FROM ts \
         WHERE value IS NOT NULL GROUP BY d ORDER BY d",
        "SELECT CAST(value AS Date) AS d, count(*), min(dim_0) FROM ts GROUP BY d \
         ORDER BY d NULLS FIRST",
        // Text keys computed over `U<n>`, `utf8` with a sentinel, `vlstring` with nil
        // items, with null results.
        "SELECT substr(word, 1, 2) AS p, count(*), sum(i) FROM td GROUP BY p ORDER BY p",
        "SELECT lower(u) AS k, count(*), max(i), count(v) FROM tk GROUP BY k ORDER BY k NULLS FIRST",
        "SELECT upper(note) AS k, count(*), min(i) FROM vd WHERE i % 4 <> 1 GROUP BY k \
         ORDER BY k NULLS FIRST",
        "SELECT CASE WHEN i % 3 = 0 THEN word END AS k, count(*) FROM td GROUP BY k \
         ORDER BY k NULLS FIRST",
        // A partitioned directory: path columns beside a computed key, filters.
        "SELECT station, dim_0 % 4 AS q, count(*), avg(value * 2) FROM pt GROUP BY station, q \
         ORDER BY station, q",
        "SELECT dim_0 / 10 AS b, sum(value - 10) FROM pt WHERE value > 9 GROUP BY b ORDER BY b",
    ];
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for sql in fused_queries {
            let (plan, spread) = check_fused_unless_spread(&fused, &plain, sql, partitions).await;
            assert!(spread || plan.contains("arguments=["), "{sql}\n{plan}");
        }
        // Temporal columns as keys (numbered as the integers they hold), and a 1-D
        // `U<n>` array's values (no records to group: its text).
        for sql in [
            "SELECT value, count(*), max(dim_0) FROM u3 GROUP BY value ORDER BY value",
            "SELECT value, count(*), min(dim_0) FROM days WHERE dim_0 < 300 GROUP BY value \
             ORDER BY value NULLS FIRST",
            "SELECT value, count(*) FROM ts GROUP BY value ORDER BY value NULLS FIRST",
        ] {
            check_fused_unless_spread(&fused, &plain, sql, partitions).await;
        }
        // Two computed keys and a float key keep DataFusion's plan.
        for sql in [
            "SELECT i % 2 AS x, i % 3 AS y, count(*) FROM vd GROUP BY x, y ORDER BY x, y",
            "SELECT f / 2 AS h, count(*) FROM nl GROUP BY h ORDER BY h NULLS FIRST",
        ] {
            check(&fused, &plain, sql, false).await;
        }
    }
}

/// `length(t)` of a table's text column, as an argument, the key or in the filter the
/// fused node evaluates, read from its stored records (`U<n>` of both byte orders with
/// NULs inside, astral letters and the empty text; `utf8` with a sentinel and with a
/// mask; `vlstring` with nil items; a key grouped by its records whose length is also
/// taken): the plan says `as records`, and the values agree with DataFusion's plan. A
/// column also read as text (filtered on, aggregated, or in another expression) is
/// converted as before.
#[tokio::test]
async fn lengths_of_text_columns_from_their_records() {
    let tables = [
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
        ("td", "tests/fixtures/ctable/texts.b2d"),
        ("tk", "tests/fixtures/ctable/text-keys.b2d"),
        ("vd", "tests/fixtures/ctable/varlen.b2d"),
    ];
    let from_records = [
        "SELECT word, avg(length(word)), max(char_length(word)) FROM td GROUP BY word \
         ORDER BY word",
        "SELECT length(word) AS l, count(*), sum(length(opt)), count(length(opt)) FROM td \
         GROUP BY l ORDER BY l",
        "SELECT length(b) AS l, count(*), sum(length(s)), min(a) FROM nl GROUP BY l \
         ORDER BY l NULLS FIRST",
        "SELECT length(u) AS l, count(*), count(length(m)), max(length(v)), sum(length(v)) \
         FROM tk GROUP BY l ORDER BY l NULLS FIRST",
        "SELECT v, count(*), avg(length(v)) FROM tk WHERE i % 3 = 1 GROUP BY v \
         ORDER BY v NULLS FIRST",
        "SELECT cat, avg(length(note)), max(length(note) * 2) FROM vd GROUP BY cat ORDER BY cat",
        "SELECT sum(length(m) + length(u)), min(length(v)) FROM tk WHERE i > 100",
        // Lengths in the filter the node evaluates.
        "SELECT count(*), sum(i) FROM td WHERE length(word) > 3",
        "SELECT length(u) AS l, count(*) FROM tk WHERE length(m) > 2 GROUP BY l ORDER BY l",
        "SELECT count(*), sum(a) FROM nl WHERE length(b) >= 2 OR a IS NULL",
        "SELECT cat, count(*) FROM vd WHERE length(note) < 5 GROUP BY cat ORDER BY cat",
    ];
    // Each with the column read as text.
    let as_text = [
        (
            "SELECT avg(length(word)) FROM td WHERE word <> 'beta'",
            "word",
        ),
        (
            "SELECT max(length(word)), count(opt), avg(length(opt)) FROM td",
            "opt",
        ),
        ("SELECT sum(length(u) + length(upper(u))) FROM tk", "u"),
        ("SELECT count(u), avg(length(u)) FROM tk", "u"),
        (
            "SELECT count(*) FROM td WHERE length(word) > 3 AND word <> 'beta'",
            "word",
        ),
    ];
    for partitions in [1, 2] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for sql in from_records {
            let (plan, spread) = check_fused_unless_spread(&fused, &plain, sql, partitions).await;
            assert!(spread || plan.contains("as records)"), "{sql}\n{plan}");
        }
        for (sql, column) in as_text {
            let (plan, spread) = check_fused_unless_spread(&fused, &plain, sql, partitions).await;
            let raw = (plan.split("raw_records=[").nth(1))
                .and_then(|r| r.split(']').next())
                .unwrap_or("");
            assert!(
                spread || !raw.split(", ").any(|c| c == column),
                "{sql}\n{plan}"
            );
            assert!(
                spread || plan.contains("character_length("),
                "{sql}\n{plan}"
            );
        }
    }
}

/// `GROUP BY` an integer column of a table or array (`int8` to `uint32`, with nulls
/// stored as mask sidecars or sentinels, deleted rows, under filters, with the key also
/// aggregated): the fused node numbers the values as they come, and agrees with
/// DataFusion's grouping; each key counted as often as the writer's values hold it.
#[tokio::test]
async fn fused_grouping_by_integer_columns() {
    let tables = [
        ("nl", "tests/fixtures/ctable/nulls.b2d"),
        ("ev", "tests/fixtures/ctable/events.b2d"),
        ("i2", "tests/fixtures/b2nd/dtype-le_i2.b2nd"),
        ("u1", "tests/fixtures/b2nd/dtype-na_u1.b2nd"),
        ("u4", "tests/fixtures/b2nd/dtype-le_u4.b2nd"),
        ("ci4", "tests/fixtures/bcolz/carray-i4"),
        ("i8", "tests/fixtures/b2nd/dtype-le_i8.b2nd"),
        ("bi4", "tests/fixtures/b2nd/dtype-be_i4.b2nd"),
        ("u8", "tests/fixtures/b2nd/dtype-le_u8.b2nd"),
        ("ce", "tests/fixtures/ctable/computed-edges.b2d"),
    ];
    let queries = [
        "SELECT a, count(*), sum(f), min(g), max(g), avg(a) FROM nl GROUP BY a \
         ORDER BY a NULLS FIRST",
        "SELECT g, count(*), count(a), sum(g) FROM nl WHERE f > 3 GROUP BY g ORDER BY g NULLS FIRST",
        // `v` holds NaN, which DataFusion 55's grouped `min`/`max` mishandle.
        "SELECT k, count(*), min(t), count(v) FROM ev GROUP BY k ORDER BY k NULLS FIRST",
        "SELECT value, count(*), sum(dim_0) FROM i2 GROUP BY value ORDER BY value",
        "SELECT value, count(*), max(dim_0) FROM u1 WHERE dim_0 % 3 = 1 GROUP BY value \
         ORDER BY value",
        "SELECT value, count(*) FROM u4 GROUP BY value ORDER BY value",
        "SELECT value, count(*), min(dim_0) FROM ci4 GROUP BY value ORDER BY value",
        "SELECT value, count(*), avg(value) FROM i8 GROUP BY value ORDER BY value",
        "SELECT value, count(*) FROM bi4 WHERE value <> 0 GROUP BY value ORDER BY value",
        "SELECT value, count(*), max(dim_0) FROM u8 GROUP BY value ORDER BY value",
        // `uint64` values past `i64::MAX` (2^63 + 5, 2^64 - 1) beside small ones.
        "SELECT v, count(*), sum(i), min(u) FROM ce GROUP BY v ORDER BY v",
        "SELECT v, count(*) FROM ce WHERE i > 0 GROUP BY v ORDER BY v",
    ];
    let want = crate::util::expected_json("tables.json");
    for partitions in [1, 2, 3] {
        let (fused, plain) = contexts(partitions, &tables).await;
        for sql in queries {
            check_fused_unless_spread(&fused, &plain, sql, partitions).await;
        }
        for (t, col, fixture) in [
            ("nl", "a", "ctable/nulls.b2d"),
            ("nl", "g", "ctable/nulls.b2d"),
            ("ev", "k", "ctable/events.b2d"),
            ("ce", "v", "ctable/computed-edges.b2d"),
        ] {
            let sql = format!("SELECT {col}, count(*) FROM {t} GROUP BY {col}");
            let (got, plan) = run(&fused, &sql).await;
            assert!(plan.contains(&format!("gby=[{col}]")), "{sql}\n{plan}");
            let mut counts: std::collections::BTreeMap<Option<String>, i64> = Default::default();
            for v in want[fixture]["columns"][col].as_array().unwrap() {
                *counts
                    .entry((!v.is_null()).then(|| v.to_string()))
                    .or_default() += 1;
            }
            let mut got = text_counts(&got);
            got.sort();
            assert_eq!(got, counts.into_iter().collect::<Vec<_>>(), "{sql}");
        }
    }
}

/// For each `(table, text column, fixture)` of `cases`: `GROUP BY` the column is fused
/// over its raw records, agrees with DataFusion's grouping, and counts each key as often
/// as python-blosc2's values of the column in `tables.json` hold it.
async fn check_text_counts(
    fused: &SessionContext,
    plain: &SessionContext,
    cases: &[(&str, &str, &str)],
) {
    let want = crate::util::expected_json("tables.json");
    for &(t, col, fixture) in cases {
        let sql =
            format!("SELECT {col}, count(*) FROM {t} GROUP BY {col} ORDER BY {col} NULLS FIRST");
        check(fused, plain, &sql, true).await;
        let (got, plan) = run(fused, &sql).await;
        assert!(
            plan.contains(&format!("raw_records=[{col}]")),
            "{sql}\n{plan}"
        );
        let mut counts: std::collections::BTreeMap<Option<String>, i64> = Default::default();
        for v in want[fixture]["columns"][col].as_array().unwrap() {
            *counts.entry(v.as_str().map(String::from)).or_default() += 1;
        }
        assert_eq!(
            text_counts(&got),
            counts.into_iter().collect::<Vec<_>>(),
            "{sql}"
        );
    }
}

/// The rows of batches of `(text key, Int64 count)`, the key cast to `Utf8`.
fn text_counts(batches: &[RecordBatch]) -> Vec<(Option<String>, i64)> {
    use datafusion::arrow::datatypes::DataType;
    batches
        .iter()
        .flat_map(|b| {
            let key = datafusion::arrow::compute::cast(b.column(0), &DataType::Utf8).unwrap();
            let key = key.as_any().downcast_ref::<StringArray>().unwrap().clone();
            let n = (b.column(1).as_any().downcast_ref::<Int64Array>())
                .unwrap()
                .clone();
            (0..b.num_rows()).map(move |i| {
                (
                    key.is_valid(i).then(|| key.value(i).to_string()),
                    n.value(i),
                )
            })
        })
        .collect()
}

/// `min`/`max` (and `count` of the column) alone: the first query scans (fused, no zone
/// mapped yet) and maps the zones; once every zone of the whole array or table is mapped,
/// the table's exact statistics (extrema, and null counts) answer them with no scan.
/// Zones holding NaN have no extrema, so those columns keep scanning; a selection of part of the array keeps scanning too
/// (through DataFusion's dynamic filter, which skips units on the zone maps). Every
/// answer is checked against a table without zone maps or value pruning.
#[tokio::test]
async fn min_max_alone_are_answered_from_zone_maps_once_every_zone_is_mapped() {
    let dtypes = [
        "le_f2", "le_f4", "le_f8", "be_f8", "le_i2", "le_i4", "le_i8", "be_i4", "le_u2", "le_u4",
        "le_u8", "na_i1", "na_u1", "le_M8_ms", "le_M8_D", "le_m8_ns",
    ];
    let mut tables: Vec<(String, String)> = dtypes
        .iter()
        .map(|d| {
            (
                format!("t_{d}"),
                format!("tests/fixtures/b2nd/dtype-{d}.b2nd"),
            )
        })
        .collect();
    for (name, path) in [
        ("big", "tests/fixtures/b2nd/geom-1d-big.b2nd"),
        ("geo", "tests/fixtures/b2nd/geom-3d-tiles.b2nd"),
        ("ev", "tests/fixtures/ctable/events.b2d"),
        ("nulls", "tests/fixtures/ctable/nulls.b2d"),
    ] {
        tables.push((name.into(), path.into()));
    }
    let refs: Vec<(&str, &str)> = tables
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (fused, _) = contexts(2, &refs).await;
    let reference = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    let no_statistics = Blosc2Options {
        value_pruning: false,
        zone_maps: false,
        ..Default::default()
    };
    for (name, path) in &refs {
        let t = open_provider(&reference.runtime_env(), path, &no_statistics)
            .await
            .unwrap();
        reference.register_table(*name, t).unwrap();
    }
    // (table, column, answered without a scan once mapped)
    let mut cases: Vec<(&str, &str, bool)> = tables
        .iter()
        .filter(|(n, _)| n.starts_with("t_"))
        .map(|(n, _)| (n.as_str(), "value", true))
        .collect();
    cases.extend([
        ("big", "value", true),
        // Three dimensions: scanned in whole chunk rows, which map no zones.
        ("geo", "value", false),
        ("ev", "t", true),
        // NaN in every zone.
        ("ev", "v", false),
        ("ev", "k", true),
        ("nulls", "a", true),
        ("nulls", "f", true),
        ("nulls", "g", true),
    ]);
    let scans = |plan: &str| plan.contains("Blosc2Exec");
    for (table, col, from_statistics) in cases {
        let sql = format!("SELECT min({col}), max({col}), count({col}) FROM {table}");
        let (want, _) = run(&reference, &sql).await;
        let (first, plan) = run(&fused, &sql).await;
        assert_same(&sql, &first, &want);
        if scans(&plan) {
            assert!(plan.contains("Blosc2AggregateExec"), "{sql}: first\n{plan}");
        }
        let (second, plan) = run(&fused, &sql).await;
        assert_same(&sql, &second, &want);
        assert_eq!(!scans(&plan), from_statistics, "{sql}: second\n{plan}");
        if table != "ev" && table != "nulls" {
            // Part of the array: scanned, pruned on the zone maps, not fused.
            let part = format!("SELECT min({col}), max({col}) FROM {table} WHERE dim_0 >= 1");
            let (want, _) = run(&reference, &part).await;
            let (got, plan) = run(&fused, &part).await;
            assert_same(&part, &got, &want);
            assert!(scans(&plan), "{part}\n{plan}");
            assert_eq!(
                plan.contains("Blosc2AggregateExec"),
                !from_statistics,
                "{part}\n{plan}"
            );
        }
    }
}

/// `count(x)` alone of a numeric column whose nulls live in a `.notnull` mask reads the
/// mask, not the values (`nulls_only=[x]`), and records no zone of `x` (its values are
/// zeros there): ctable/sparse-nulls.b2d, whose `x` has nulls in three blocks and two
/// deleted rows. A filter on `x` afterwards still sees every value.
#[tokio::test]
async fn counts_alone_read_the_null_mask() {
    let tables = [("sn", "tests/fixtures/ctable/sparse-nulls.b2d")];
    let (fused, plain) = contexts(2, &tables).await;
    let want = crate::util::expected_json("tables.json");
    let xs: Vec<Option<f64>> = want["ctable/sparse-nulls.b2d"]["columns"]["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64())
        .collect();
    let count = xs.iter().flatten().count() as i64;
    let above = xs.iter().flatten().filter(|&&x| x > 10.0).count() as i64;
    for (sql, nulls_only) in [
        ("SELECT count(x), count(*) FROM sn", true),
        ("SELECT count(x), avg(id) FROM sn", true),
        // Other aggregates of `x` need its values.
        ("SELECT count(x), sum(x) FROM sn", false),
    ] {
        let (a, plan) = run(&fused, sql).await;
        let (b, _) = run(&plain, sql).await;
        assert_same(sql, &a, &b);
        assert!(plan.contains("Blosc2AggregateExec"), "{sql}\n{plan}");
        assert_eq!(plan.contains("nulls_only=[x]"), nulls_only, "{sql}\n{plan}");
        assert_eq!(first_int(&a), count, "{sql}");
        if nulls_only {
            // The zones of `x` hold its values, not the zeros the counts read: its
            // extrema (exact statistics once every zone is mapped) and a filter on it.
            let sql = "SELECT min(x), max(x) FROM sn";
            assert_same(sql, &run(&fused, sql).await.0, &run(&plain, sql).await.0);
            let sql = "SELECT count(*) FROM sn WHERE x > 10";
            assert_eq!(first_int(&run(&fused, sql).await.0), above, "{sql}");
        }
    }
}

fn first_int(batches: &[RecordBatch]) -> i64 {
    batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<datafusion::arrow::array::Int64Array>()
        .unwrap()
        .value(0)
}
