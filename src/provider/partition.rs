//! Hive-style partition directories, as Spark, pyarrow and DataFusion's
//! `COPY … PARTITIONED BY` write them: `year=2024/station=north/part-0.b2nd`. A member's
//! path below the table's root names its partition values; this module reads them: which
//! keys a table's members share, and each member's typed value of every partition column.

use arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result};
use percent_encoding::percent_decode_str;
use std::borrow::Cow;

/// The type of a partition column nobody declared a type for: dictionary-encoded text,
/// as DataFusion's listing tables make them.
pub fn inferred_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8))
}

/// `text` as a value of [`inferred_type`].
pub fn inferred_value(text: &str) -> ScalarValue {
    ScalarValue::Dictionary(
        Box::new(DataType::UInt16),
        Box::new(ScalarValue::Utf8(Some(text.to_string()))),
    )
}

/// The `key=value` directories of `rel` (a member's path below the table's root, `/`
/// separated), in order: the key, and the value percent-decoded (kept as written when
/// the decoded bytes are not UTF-8). Directories without `=` are skipped.
pub fn path_partitions(rel: &str) -> Vec<(&str, Cow<'_, str>)> {
    let mut dirs: Vec<&str> = rel.split('/').collect();
    dirs.pop();
    dirs.into_iter()
        .filter_map(|d| d.split_once('='))
        .map(|(k, v)| {
            let decoded = percent_decode_str(v)
                .decode_utf8()
                .unwrap_or(Cow::Borrowed(v));
            (k, decoded)
        })
        .collect()
}

/// The partition keys every member path in `rels` has (the same keys in the same order),
/// or none when the members lie in no `key=value` directory.
///
/// # Errors
/// Two members with different keys: no partitioning describes both.
pub fn infer_keys(root: &str, rels: &[String]) -> Result<Vec<String>> {
    let keys = |rel: &str| -> Vec<String> {
        path_partitions(rel)
            .into_iter()
            .map(|(k, _)| k.to_string())
            .collect()
    };
    let Some(first) = rels.first() else {
        return Ok(Vec::new());
    };
    let want = keys(first);
    for rel in &rels[1..] {
        let got = keys(rel);
        if got != want {
            return Err(DataFusionError::Plan(format!(
                "{root}: {first} is partitioned by {want:?} but {rel} by {got:?}: \
                 one table needs one partitioning"
            )));
        }
    }
    Ok(want)
}

/// The value of each of `columns` for the member at `rel`: its `key=value` directories,
/// the first of them in the columns' order (deeper ones may stay unnamed), each value
/// parsed as its column's type.
///
/// # Errors
/// A missing or differently named directory; a value that does not parse as the type
/// declared for its column.
pub fn partition_values(
    root: &str,
    rel: &str,
    columns: &[(String, DataType)],
) -> Result<Vec<ScalarValue>> {
    let found = path_partitions(rel);
    columns
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            let Some((key, value)) = found.get(i) else {
                return Err(DataFusionError::Plan(format!(
                    "{root}/{rel}: no directory {name}=… for partition column {name} \
                     (the path has {:?})",
                    found.iter().map(|(k, _)| *k).collect::<Vec<_>>()
                )));
            };
            if key != name {
                return Err(DataFusionError::Plan(format!(
                    "{root}/{rel}: partition column {i} is {name}, but the path's directory \
                     {i} is {key}=…"
                )));
            }
            typed_value(value, ty).map_err(|e| {
                DataFusionError::Plan(format!(
                    "{root}/{rel}: partition {name}={value:?} is not a {ty}: {e}"
                ))
            })
        })
        .collect()
}

/// `text` as a value of `ty` (dictionary types hold the value text).
fn typed_value(text: &str, ty: &DataType) -> Result<ScalarValue> {
    match ty {
        DataType::Dictionary(key, inner) => Ok(ScalarValue::Dictionary(
            key.clone(),
            Box::new(typed_value(text, inner)?),
        )),
        _ => ScalarValue::try_from_string(text.to_string(), ty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_name_keys_and_decoded_values() {
        let got = path_partitions("year=2024/raw/station=south%20east/part-0.b2nd");
        let got: Vec<(&str, &str)> = got.iter().map(|(k, v)| (*k, v.as_ref())).collect();
        assert_eq!(got, [("year", "2024"), ("station", "south east")]);
        // The member's own name is not a directory, even with an `=` in it.
        assert!(path_partitions("a=1.b2nd").is_empty());
        // `=` inside a value stays; bytes that are not UTF-8 stay as written.
        let got = path_partitions("k=a=b/x%FF=%FF/f.b2nd");
        assert_eq!(got[0].1, "a=b");
        assert_eq!(got[1], ("x%FF", Cow::Borrowed("%FF")));
    }

    #[test]
    fn members_must_share_their_keys() {
        let rels = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            infer_keys("d", &rels(&["y=1/m=2/a.b2nd", "y=2/m=1/b.b2nd"])).unwrap(),
            ["y", "m"]
        );
        assert!(
            infer_keys("d", &rels(&["a.b2nd", "b.b2nd"]))
                .unwrap()
                .is_empty()
        );
        let e = infer_keys("d", &rels(&["a.b2nd", "y=1/b.b2nd"])).unwrap_err();
        assert!(
            e.to_string().contains("one table needs one partitioning"),
            "{e}"
        );
        let e = infer_keys("d", &rels(&["y=1/m=2/a.b2nd", "m=1/y=2/b.b2nd"])).unwrap_err();
        assert!(e.to_string().contains("y=1/m=2/a.b2nd"), "{e}");
    }

    #[test]
    fn values_take_their_columns_types() {
        let cols = [
            ("year".to_string(), DataType::Int32),
            ("station".to_string(), inferred_type()),
        ];
        let got = partition_values("d", "year=2024/station=b%20c/m=3/x.b2nd", &cols).unwrap();
        assert_eq!(got[0], ScalarValue::Int32(Some(2024)));
        assert_eq!(
            got[1],
            ScalarValue::Dictionary(
                Box::new(DataType::UInt16),
                Box::new(ScalarValue::Utf8(Some("b c".into())))
            )
        );
        for (rel, says) in [
            ("year=20x4/station=a/x.b2nd", "is not a Int32"),
            ("station=a/year=2024/x.b2nd", "directory 0 is station=…"),
            ("year=2024/x.b2nd", "no directory station=…"),
        ] {
            let e = partition_values("d", rel, &cols).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains(rel), "{rel}: {e}");
        }
    }
}
