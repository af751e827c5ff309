//! python-blosc2 frames that store a recipe instead of values: saved lazy expressions and
//! UDFs (metalayer `b2o`; `LazyArray` before python-blosc2 4) and proxies
//! (`proxy-source`). Their chunks hold no data, so opening one as an array is refused
//! with what it is.

use crate::container::frame::Frame;
use crate::msgpack::MsgValue;

/// What a python-blosc2 frame that stores a recipe instead of values is, for the error
/// that refuses it: a saved lazy expression or UDF (metalayer `b2o`, or `LazyArray`
/// before python-blosc2 4), or a proxy (`proxy-source`). `None` for other frames.
///
/// A saved lazy expression is not evaluated here: python-blosc2 4.14.1 evaluates it with
/// miniexpr (C's integer types: `/` of integers divides as integers, `%` takes the
/// dividend's sign) when its operands share their shape, chunks and blocks, and with
/// numexpr otherwise, so the same file has two sets of values there.
pub(crate) fn recipe(frame: &Frame) -> Option<String> {
    if frame.metalayer("b2o").is_some() {
        let payload = frame.vlmeta_value("b2o");
        let field = |k: &str| payload.as_ref()?.get(k)?.as_str().map(str::to_string);
        return Some(match field("kind").as_deref() {
            Some("lazyexpr") => {
                let operands = payload
                    .as_ref()
                    .and_then(|p| p.get("operands"))
                    .map(operand_list)
                    .unwrap_or_default();
                format!(
                    "a python-blosc2 lazy expression, {:?}{operands}: its values are not \
                     stored; query its operands",
                    field("expression").unwrap_or_default()
                )
            }
            Some("lazyudf") => format!(
                "a python-blosc2 lazy UDF (DSL kernel {:?}): its values are not stored",
                field("name").unwrap_or_default()
            ),
            kind => {
                format!("a python-blosc2 persisted object of kind {kind:?} (metalayer \"b2o\")")
            }
        });
    }
    if frame.metalayer("LazyArray").is_some() {
        return Some(
            "a python-blosc2 lazy expression (metalayer \"LazyArray\"): its values are not stored"
                .into(),
        );
    }
    frame.metalayer("proxy-source").is_some().then(|| {
        "a python-blosc2 proxy (metalayer \"proxy-source\"): open its source instead".into()
    })
}

/// ` over a = a.b2nd, b = b.b2nd` for a lazy expression's operand references.
fn operand_list(operands: &MsgValue) -> String {
    let MsgValue::Map(entries) = operands else {
        return String::new();
    };
    let named: Vec<String> = entries
        .iter()
        .take(8)
        .map(|(k, v)| {
            let target = v
                .get("urlpath")
                .or_else(|| v.get("path"))
                .and_then(|p| p.as_str())
                .unwrap_or("?");
            let key = v.get("key").and_then(|k| k.as_str());
            match key {
                Some(key) => format!("{} = {target}#{key}", k.as_str().unwrap_or("?")),
                None => format!("{} = {target}", k.as_str().unwrap_or("?")),
            }
        })
        .collect();
    if named.is_empty() {
        return String::new();
    }
    let more = if entries.len() > 8 { ", …" } else { "" };
    format!(" over {}{more}", named.join(", "))
}
