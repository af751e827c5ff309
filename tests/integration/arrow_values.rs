//! Arrow conversion of every fixture against the writer's values: row counts, the first
//! values and sums of numeric arrays, every value of every table column.

use crate::containers::arrays;
use crate::util::fixture;
use datafusion_blosc2::arrow::array::{Array, AsArray, RecordBatch};
use datafusion_blosc2::arrow::datatypes::*;
use datafusion_blosc2::arrow_reader::reader::read_all;
use datafusion_blosc2::dataset::{Dataset, OpenOptions};
use datafusion_blosc2::io::Location;
use serde_json::{Value, json};
use std::sync::Arc;

pub async fn open(rel: &str) -> Arc<Dataset> {
    let loc = Location::local(fixture(rel)).unwrap();
    Arc::new(
        Dataset::open(&loc, &OpenOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}")),
    )
}

pub fn json_of(col: &dyn Array, i: usize) -> Value {
    if col.is_null(i) {
        return Value::Null;
    }
    match col.data_type() {
        DataType::Boolean => json!(col.as_boolean().value(i)),
        DataType::Int8 => json!(col.as_primitive::<Int8Type>().value(i)),
        DataType::Int16 => json!(col.as_primitive::<Int16Type>().value(i)),
        DataType::Int32 => json!(col.as_primitive::<Int32Type>().value(i)),
        DataType::Int64 => json!(col.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => json!(col.as_primitive::<UInt8Type>().value(i)),
        DataType::UInt16 => json!(col.as_primitive::<UInt16Type>().value(i)),
        DataType::UInt32 => json!(col.as_primitive::<UInt32Type>().value(i)),
        DataType::UInt64 => json!(col.as_primitive::<UInt64Type>().value(i)),
        DataType::Float16 => json!(col.as_primitive::<Float16Type>().value(i).to_f64()),
        DataType::Float32 => json!(col.as_primitive::<Float32Type>().value(i) as f64),
        DataType::Float64 => json!(col.as_primitive::<Float64Type>().value(i)),
        DataType::Utf8 => json!(col.as_string::<i32>().value(i)),
        DataType::Utf8View => json!(col.as_string_view().value(i)),
        // The generator writes bytes as Latin-1 text.
        DataType::Binary => json!(
            col.as_binary::<i32>()
                .value(i)
                .iter()
                .map(|&b| b as char)
                .collect::<String>()
        ),
        DataType::List(_) => {
            let l = col.as_list::<i32>();
            let (a, b) = (l.value_offsets()[i], l.value_offsets()[i + 1]);
            Value::Array(
                (a..b)
                    .map(|j| json_of(l.values().as_ref(), j as usize))
                    .collect(),
            )
        }
        DataType::Struct(fields) => {
            let st = col.as_struct();
            Value::Object(
                fields
                    .iter()
                    .zip(st.columns())
                    .map(|(f, c)| (f.name().clone(), json_of(c.as_ref(), i)))
                    .collect(),
            )
        }
        DataType::Dictionary(_, _) => {
            let d = col.as_dictionary::<Int32Type>();
            json_of(d.values().as_ref(), d.keys().value(i) as usize)
        }
        DataType::Timestamp(TimeUnit::Second, _) => {
            json!(col.as_primitive::<TimestampSecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            json!(col.as_primitive::<TimestampMillisecondType>().value(i))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            json!(col.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        other => panic!("no JSON for {other}"),
    }
}

/// Value `i` of a float column, widened to `f64` (`None` for null or another type).
fn float_at(col: &dyn Array, i: usize) -> Option<f64> {
    if col.is_null(i) {
        return None;
    }
    Some(match col.data_type() {
        DataType::Float16 => col.as_primitive::<Float16Type>().value(i).to_f64(),
        DataType::Float32 => col.as_primitive::<Float32Type>().value(i) as f64,
        DataType::Float64 => col.as_primitive::<Float64Type>().value(i),
        _ => return None,
    })
}

pub fn close(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-6 * x.abs().max(y.abs()).max(1.0),
        _ => a == b,
    }
}

#[tokio::test]
async fn numeric_arrays_match_head_and_sum() {
    for (rel, info) in arrays() {
        let ds = open(&rel).await;
        let (schema, batches) = read_all(ds, 1 << 20)
            .await
            .unwrap_or_else(|e| panic!("{rel}: {e}"));
        let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
        let nitems = info["nitems"].as_u64().unwrap() as usize;
        let expect_rows = if info["shape"].as_array().unwrap().is_empty() {
            1
        } else {
            nitems
        };
        if info["kind"] != "bcolz" || info["shape"].as_array().unwrap().len() == 1 {
            assert_eq!(rows, expect_rows, "{rel}: rows");
        }
        let Some(head) = info
            .get("head")
            .filter(|h| !h.as_array().unwrap().is_empty())
        else {
            continue;
        };
        if info["kind"] == "bcolz" && info["shape"].as_array().unwrap().len() > 1 {
            continue;
        }
        let vi = schema.index_of("value").unwrap();
        let first = batches.iter().find(|b| b.num_rows() > 0).unwrap();
        let col = first.column(vi);
        for (i, want) in head.as_array().unwrap().iter().enumerate() {
            assert!(
                close(&json_of(col.as_ref(), i), want),
                "{rel}: value {i}: {:?} vs {want}",
                json_of(col.as_ref(), i)
            );
        }
        if let Some(sum) = info.get("sum").and_then(Value::as_f64) {
            let mut got = 0f64;
            for b in &batches {
                let c = b.column(vi);
                for i in 0..c.len() {
                    got += json_of(c.as_ref(), i).as_f64().unwrap_or(0.0);
                }
            }
            assert!(
                (got - sum).abs() <= 1e-6 * sum.abs().max(1.0),
                "{rel}: sum {got} vs {sum}"
            );
        }
    }
}

#[tokio::test]
async fn tables_match_every_value() {
    let v: Value = crate::util::expected_json("tables.json");
    for (rel, t) in v.as_object().unwrap() {
        check_table_values(rel, open(rel).await, t).await;
    }
}

/// Text columns read as their stored records (the fused `GROUP BY`'s scan): `utf8` and
/// `vlstring` items as unchecked `LargeBinary`, with mask nulls and `nil` items as nulls
/// and the utf8 sentinel left as its text; in units that do not align with the
/// `vlstring` batches, and with a text match on the `vlstring` column (its items tested
/// as scanned): every value against the writer's.
#[tokio::test]
async fn text_columns_read_as_stored_items() {
    use datafusion_blosc2::array::ndarray::ReadStats;
    use datafusion_blosc2::arrow_reader::reader::{BatchReader, Selection, plan_units};
    use datafusion_blosc2::arrow_reader::text_match::{Matching, TextMatch};
    let rel = "ctable/text-keys.b2d";
    let want: Value = crate::util::expected_json("tables.json");
    let cols = &want[rel]["columns"];
    let ds = open(rel).await;
    // Raw records are read from open columns (as a scan's are).
    ds.open_all_columns().await.unwrap();
    let Dataset::Table(t) = &*ds else {
        panic!("{rel} is a table")
    };
    let units = |max_rows| plan_units(&ds, &Selection::all(&[t.physical_rows]), max_rows);
    // Each column's expected raw value per live row: the writer's text, its sentinel
    // for u's nulls, null for m's and v's.
    let expect = |col: &str, i: usize| -> Option<Vec<u8>> {
        match (col, cols[col][i].as_str()) {
            (_, Some(s)) => Some(s.as_bytes().to_vec()),
            ("u", None) => Some(b"__BLOSC2_NULL__".to_vec()),
            _ => None,
        }
    };
    let matched = ["", "a", "a\0", "k0001", "x", "😀", "日本"];
    for max_rows in [1000, 333] {
        for text_match in [false, true] {
            let mut reader = BatchReader::new(Arc::clone(&ds), Some(vec![0, 1, 2, 3]));
            if text_match {
                let values = matched.iter().map(|m| m.as_bytes().to_vec()).collect();
                reader = reader.with_text_matches(vec![(
                    3,
                    Arc::new(TextMatch::items(values, Matching::Equal)),
                )]);
            }
            let reader = reader.with_raw_records(&[1, 2, 3]);
            let schema = reader.schema();
            for f in &schema.fields()[1..] {
                assert_eq!(f.data_type(), &DataType::LargeBinary, "{}", f.name());
            }
            let mut stats = ReadStats::default();
            let mut got: Vec<Vec<Option<Vec<u8>>>> = vec![Vec::new(); 3];
            let mut ids: Vec<i64> = Vec::new();
            for u in units(max_rows) {
                let b = reader.read(&u, &mut stats).await.unwrap();
                ids.extend(b.column(0).as_primitive::<Int64Type>().values());
                for (c, g) in got.iter_mut().enumerate() {
                    let a = b.column(c + 1).as_binary::<i64>();
                    g.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_vec())));
                }
            }
            // The live rows the match keeps (all of them without one).
            let live: Vec<usize> = (0..cols["i"].as_array().unwrap().len())
                .filter(|&i| {
                    !text_match || cols["v"][i].as_str().is_some_and(|v| matched.contains(&v))
                })
                .collect();
            assert!(
                !text_match || (10..200).contains(&live.len()),
                "{}",
                live.len()
            );
            let want_ids: Vec<i64> = live
                .iter()
                .map(|&i| cols["i"][i].as_i64().unwrap())
                .collect();
            assert_eq!(ids, want_ids, "max_rows {max_rows} match {text_match}");
            for (c, col) in ["u", "m", "v"].iter().enumerate() {
                let want: Vec<Option<Vec<u8>>> = live.iter().map(|&i| expect(col, i)).collect();
                assert!(
                    got[c] == want,
                    "{col}: max_rows {max_rows} match {text_match}"
                );
            }
        }
    }
}

/// A JSON array of strings.
fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect()
}

/// Every live value of a table dataset against the writer's (`tables.json` layout).
pub async fn check_table_values(rel: &str, ds: Arc<Dataset>, t: &Value) {
    let (schema, batches) = read_all(ds, 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let order = strings(&t["order"]);
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, order, "{rel}: column order");
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert_eq!(
        rows as u64,
        t["nrows"].as_u64().unwrap(),
        "{rel}: live rows"
    );
    for name in order {
        let want = t["columns"][name].as_array().unwrap();
        if let Err(e) = column_matches(&batches, name, want) {
            panic!("{rel}: {e}");
        }
    }
}

/// Every value of column `name` in `batches`, in order, against the writer's `want` (as
/// [`json_of`] writes them): `Err` names the first that differs, or a missing column.
pub fn column_matches(batches: &[RecordBatch], name: &str, want: &[Value]) -> Result<(), String> {
    let mut k = 0;
    for b in batches {
        let col = b
            .column_by_name(name)
            .ok_or_else(|| format!("no column {name}"))?;
        for r in 0..b.num_rows() {
            let got = json_of(col.as_ref(), r);
            match want.get(k) {
                Some(w) if close(&got, w) => {}
                Some(w) => return Err(format!("{name}[{k}] = {got}, want {w}")),
                None => return Err(format!("{name}[{k}] = {got}, want no more rows")),
            }
            k += 1;
        }
    }
    Ok(())
}

/// Computed columns (virtual, an expression over stored columns) through SQL, every value
/// against python-blosc2's: exact, but for columns of transcendental functions
/// (`computed_approx`), which may differ from NumPy's libm in the last bits. Floats
/// written as Python's repr (`"-0.0"`, `"nan"`) are compared bit for bit. Columns
/// whose definitions cannot be evaluated (`computed_omitted`) are left out of the schema,
/// and its metadata says why.
#[tokio::test]
async fn computed_columns_match_python_blosc2() {
    use datafusion::prelude::{SessionConfig, SessionContext};
    use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
    let v: Value = crate::util::expected_json("tables.json");
    let mut checked = 0;
    for (rel, t) in v.as_object().unwrap() {
        if t.get("computed").is_none() {
            continue;
        }
        // One partition: rows in table order.
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(1));
        ctx.register_blosc2(
            "t",
            fixture(rel).to_str().unwrap(),
            Blosc2Options::default(),
        )
        .await
        .unwrap();
        checked += check_computed(&ctx, rel, t).await;
    }
    assert!(checked >= 15, "{checked} computed columns checked");
}

/// The computed columns of table `t` in `ctx` (one partition: rows in order) against
/// the writer's values in `want` (`tables.json`); how many were compared.
pub async fn check_computed(
    ctx: &datafusion::prelude::SessionContext,
    rel: &str,
    want_table: &Value,
) -> usize {
    use datafusion_blosc2::provider::computed::OMITTED_KEY;
    let computed = want_table["computed"].as_object().unwrap();
    let schema = ctx.table("t").await.unwrap().schema().as_arrow().clone();
    let note = schema
        .metadata()
        .get(OMITTED_KEY)
        .cloned()
        .unwrap_or_default();
    for name in want_table["computed_omitted"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        assert!(schema.index_of(name).is_err(), "{rel}: {name} is left out");
        assert!(
            note.contains(&format!("{name}: ")),
            "{rel}: {note:?} names {name}"
        );
    }
    let approx = strings(&want_table["computed_approx"]);
    let close_enough = |x: f64, y: f64| (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs());
    for (name, want) in computed {
        let is_approx = approx.contains(&name.as_str());
        let batches = ctx
            .sql(&format!("SELECT \"{name}\" FROM t"))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{rel}: {name}: {e}"));
        let want = want.as_array().unwrap();
        let mut k = 0;
        for b in &batches {
            let c = b.column(0);
            for i in 0..c.len() {
                let got = json_of(c.as_ref(), i);
                if let Some(w) = want[k].as_str().and_then(|w| w.parse::<f64>().ok()) {
                    // A float as Python's repr: NaN, ±inf and the sign of zero count.
                    let x = float_at(c.as_ref(), i);
                    let same = match x {
                        Some(x) if x.is_nan() || w.is_nan() => x.is_nan() && w.is_nan(),
                        Some(x) if is_approx && x != w => close_enough(x, w),
                        Some(x) => x.to_bits() == w.to_bits(),
                        None => false,
                    };
                    assert!(same, "{rel}: {name}[{k}] = {x:?}, want {w:?}");
                    k += 1;
                    continue;
                }
                let same = match (got.as_f64(), want[k].as_f64()) {
                    (Some(x), Some(y)) if is_approx => close_enough(x, y),
                    // A declared float dtype over integer results (`f32`): the same number.
                    (Some(x), Some(y)) => x == y,
                    _ => got == want[k],
                };
                assert!(same, "{rel}: {name}[{k}] = {got}, want {}", want[k]);
                k += 1;
            }
        }
        assert_eq!(k, want.len(), "{rel}: {name}: rows");
    }
    computed.len()
}

/// A hive-partitioned directory through the session extension: every row (member
/// columns, partition values from the paths, file column) against the writer's, with
/// the partition keys inferred, and with only `year` named, as Int32 (the `station=…`
/// directories are then unnamed).
#[tokio::test]
async fn partitioned_directories_match_every_row() {
    use datafusion::prelude::SessionContext;
    use datafusion_blosc2::provider::{Blosc2Options, Blosc2SessionExt};
    let v: Value = crate::util::expected_json("partitioned.json");
    let mut checked = 0;
    for (rel, t) in v.as_object().unwrap() {
        let order = strings(&t["order"]);
        let want = t["rows"].as_array().unwrap();
        let year_only = vec![("year".to_string(), DataType::Int32)];
        for opts in [
            Blosc2Options::default(),
            Blosc2Options::default().with_partition_cols(year_only),
        ] {
            let typed = opts.partition_cols.is_some();
            // The columns this table has, as indexes into `order`.
            let present: Vec<usize> = (0..order.len())
                .filter(|&i| !(typed && order[i] == "station"))
                .collect();
            let ctx = SessionContext::new();
            let df = ctx
                .read_blosc2(fixture(rel).to_str().unwrap(), opts)
                .await
                .unwrap_or_else(|e| panic!("{rel}: {e}"));
            let names: Vec<&str> = df
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            let expect_names: Vec<&str> = present.iter().map(|&i| order[i]).collect();
            assert_eq!(names, expect_names, "{rel}: columns");
            // Text path columns are dictionaries: read them as plain text.
            let cols: Vec<String> = present
                .iter()
                .map(|&i| {
                    match df
                        .schema()
                        .field(names.iter().position(|n| *n == order[i]).unwrap())
                        .data_type()
                    {
                        DataType::Dictionary(..) => {
                            format!("arrow_cast(\"{0}\", 'Utf8') AS \"{0}\"", order[i])
                        }
                        _ => format!("\"{}\"", order[i]),
                    }
                })
                .collect();
            ctx.register_table("t", df.into_view()).unwrap();
            let sql = format!("SELECT {} FROM t ORDER BY filename, dim_0", cols.join(", "));
            let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
            let mut k = 0;
            for b in &batches {
                for row in 0..b.num_rows() {
                    for (ci, &i) in present.iter().enumerate() {
                        let got = json_of(b.column(ci).as_ref(), row);
                        let expect = match (typed, order[i]) {
                            (true, "year") => {
                                json!(want[k][i].as_str().unwrap().parse::<i32>().unwrap())
                            }
                            _ => want[k][i].clone(),
                        };
                        assert_eq!(got, expect, "{rel}: row {k} {}", order[i]);
                    }
                    k += 1;
                }
            }
            assert_eq!(k, want.len(), "{rel}: rows");
            checked += 1;
        }
    }
    assert_eq!(checked, 2);
}
