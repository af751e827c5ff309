//! CTable computed columns: virtual columns python-blosc2 defines by an expression over
//! stored columns (`add_computed_column("total", "price * qty")`) and records in the
//! schema's `computed_columns` list, with the operands `o0`, `o1`, … bound to `col_deps`
//! and the result's NumPy dtype. Their values are never stored; what evaluates them is
//! the caller's business (DataFusion, in `provider::computed`).

use super::dtype::DType;
use super::expression::{self, Expression};
use serde_json::Value as Json;

/// One computed column as the schema declares it.
#[derive(Debug, Clone)]
pub struct ComputedColumn {
    /// Column name.
    pub name: String,
    /// The stored columns the operands `o0`, `o1`, … stand for.
    pub deps: Vec<String>,
    /// The definition, or why it cannot be evaluated here.
    pub definition: Result<Definition, String>,
}

/// An evaluable definition.
#[derive(Debug, Clone)]
pub struct Definition {
    /// The expression as stored.
    pub text: String,
    /// The expression parsed.
    pub tree: Expression,
    /// The declared result type.
    pub dtype: DType,
}

impl ComputedColumn {
    /// The computed columns of a CTable schema (`computed_columns`; none when absent).
    /// Entries without a name are skipped; any other defect (a Python DSL kernel, an
    /// expression that does not parse, an unknown dtype) is kept as the column's reason
    /// for not being evaluable.
    pub fn from_schema(schema: &Json) -> Vec<ComputedColumn> {
        let Some(list) = schema.get("computed_columns").and_then(Json::as_array) else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|entry| {
                let name = entry.get("name")?.as_str()?.to_string();
                let deps: Vec<String> = entry
                    .get("col_deps")
                    .and_then(Json::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|d| d.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                Some(ComputedColumn {
                    name,
                    deps,
                    definition: definition(entry),
                })
            })
            .collect()
    }
}

fn definition(entry: &Json) -> Result<Definition, String> {
    match entry.get("kind").and_then(Json::as_str) {
        Some("expression") => {}
        Some("dsl") => return Err("a Python DSL kernel".into()),
        k => return Err(format!("kind {k:?}")),
    }
    let text = entry
        .get("expression")
        .and_then(Json::as_str)
        .ok_or("no expression")?
        .to_string();
    let tree = expression::parse(&text).map_err(|e| format!("expression {text:?}: {e}"))?;
    let dtype_text = entry.get("dtype").and_then(Json::as_str).unwrap_or("");
    let dtype = result_dtype(dtype_text).map_err(|e| format!("dtype {dtype_text:?}: {e}"))?;
    Ok(Definition { text, tree, dtype })
}

/// A NumPy dtype as `str(np.dtype(...))` spells it (`float64`, `bool`, `<U5`, …), or
/// as python-blosc2 4.14.1 records the type of an integer division,
/// `<class 'blosc2.schema.float64'>` (which it then cannot reopen itself).
fn result_dtype(s: &str) -> Result<DType, String> {
    let s = s
        .strip_prefix("<class 'blosc2.schema.")
        .and_then(|rest| rest.strip_suffix("'>"))
        .unwrap_or(s);
    let spelled = match s {
        "bool" => "|b1",
        "int8" => "|i1",
        "uint8" => "|u1",
        "int16" => "<i2",
        "uint16" => "<u2",
        "int32" => "<i4",
        "uint32" => "<u4",
        "int64" => "<i8",
        "uint64" => "<u8",
        "float32" => "<f4",
        "float64" => "<f8",
        s => s,
    };
    DType::parse(spelled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_entries() {
        let schema: Json = serde_json::json!({"computed_columns": [
            {"name": "total", "kind": "expression", "expression": "(o0 * o1)",
             "col_deps": ["price", "qty"], "dtype": "float64"},
            {"name": "k", "kind": "dsl", "dsl_source": "def k(a): ...", "col_deps": ["a"],
             "dtype": "int32"},
            {"name": "bad", "kind": "expression", "expression": "(o0 +", "col_deps": ["a"],
             "dtype": "int32"},
            {"name": "odd", "kind": "expression", "expression": "o0", "col_deps": ["a"],
             "dtype": "object"},
            {"kind": "expression", "expression": "o0"},
            {"name": "ratio", "kind": "expression", "expression": "(o0 / o1)",
             "col_deps": ["i", "j"], "dtype": "<class 'blosc2.schema.float64'>"},
        ]});
        let cols = ComputedColumn::from_schema(&schema);
        assert_eq!(cols.len(), 5);
        let ratio = cols[4].definition.as_ref().unwrap();
        assert_eq!(ratio.dtype, DType::parse("<f8").unwrap());
        let d = cols[0].definition.as_ref().unwrap();
        assert_eq!(
            (cols[0].name.as_str(), d.text.as_str()),
            ("total", "(o0 * o1)")
        );
        assert_eq!(cols[0].deps, ["price", "qty"]);
        assert_eq!(d.dtype, DType::parse("<f8").unwrap());
        assert_eq!(
            cols[1].definition.as_ref().unwrap_err(),
            "a Python DSL kernel"
        );
        assert!(cols[2].definition.as_ref().unwrap_err().contains("(o0 +"));
        assert!(cols[3].definition.as_ref().unwrap_err().contains("object"));
        assert!(ComputedColumn::from_schema(&serde_json::json!({})).is_empty());
    }
}
