//! A tiny parser for the Python literals NumPy writes for structured dtypes
//! (`[('a', '<i4'), ('b', '<f8', (2,))]`) and bcolz writes in `meta/storage`.

/// A Python literal: strings, ints, lists, tuples and dicts.
#[derive(Debug, Clone, PartialEq)]
pub enum PyLit {
    /// `'…'` or `"…"`
    Str(String),
    /// an integer
    Int(i64),
    /// `[…]`
    List(Vec<PyLit>),
    /// `(…)`
    Tuple(Vec<PyLit>),
    /// `{k: v, …}`
    Dict(Vec<(PyLit, PyLit)>),
    /// `None`, `True`, `False` and other bare words
    Word(String),
}

/// Parses one literal occupying the whole string.
///
/// # Errors
/// A message with the offset of the first unexpected character.
pub fn parse(s: &str) -> Result<PyLit, String> {
    let b = s.as_bytes();
    let mut pos = 0;
    let v = value(b, &mut pos, 0)?;
    skip_ws(b, &mut pos);
    if pos != b.len() {
        return Err(format!("unexpected {:?} at offset {pos}", &s[pos..]));
    }
    Ok(v)
}

fn skip_ws(b: &[u8], pos: &mut usize) {
    while *pos < b.len() && b[*pos].is_ascii_whitespace() {
        *pos += 1;
    }
}

fn value(b: &[u8], pos: &mut usize, depth: usize) -> Result<PyLit, String> {
    if depth > 32 {
        return Err("literal nested too deeply".into());
    }
    skip_ws(b, pos);
    let Some(&c) = b.get(*pos) else {
        return Err("unexpected end of literal".into());
    };
    match c {
        b'[' | b'(' => {
            let close = if c == b'[' { b']' } else { b')' };
            *pos += 1;
            let mut items = Vec::new();
            loop {
                skip_ws(b, pos);
                if b.get(*pos) == Some(&close) {
                    *pos += 1;
                    break;
                }
                items.push(value(b, pos, depth + 1)?);
                skip_ws(b, pos);
                match b.get(*pos) {
                    Some(b',') => *pos += 1,
                    Some(x) if *x == close => {}
                    _ => {
                        return Err(format!(
                            "expected ',' or '{}' at offset {}",
                            close as char, *pos
                        ));
                    }
                }
            }
            Ok(if c == b'[' {
                PyLit::List(items)
            } else {
                PyLit::Tuple(items)
            })
        }
        b'{' => {
            *pos += 1;
            let mut items = Vec::new();
            loop {
                skip_ws(b, pos);
                if b.get(*pos) == Some(&b'}') {
                    *pos += 1;
                    break;
                }
                let k = value(b, pos, depth + 1)?;
                skip_ws(b, pos);
                if b.get(*pos) != Some(&b':') {
                    return Err(format!("expected ':' at offset {}", *pos));
                }
                *pos += 1;
                let v = value(b, pos, depth + 1)?;
                items.push((k, v));
                skip_ws(b, pos);
                match b.get(*pos) {
                    Some(b',') => *pos += 1,
                    Some(b'}') => {}
                    _ => return Err(format!("expected ',' or '}}' at offset {}", *pos)),
                }
            }
            Ok(PyLit::Dict(items))
        }
        b'\'' | b'"' => {
            *pos += 1;
            let mut out = Vec::new();
            loop {
                let Some(&x) = b.get(*pos) else {
                    return Err("unterminated string".into());
                };
                *pos += 1;
                if x == c {
                    break;
                }
                if x == b'\\' {
                    let Some(&e) = b.get(*pos) else {
                        return Err("unterminated escape".into());
                    };
                    *pos += 1;
                    out.push(match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'0' => 0,
                        other => other,
                    });
                } else {
                    out.push(x);
                }
            }
            Ok(PyLit::Str(String::from_utf8_lossy(&out).into_owned()))
        }
        b'-' | b'0'..=b'9' => {
            let start = *pos;
            *pos += 1;
            while *pos < b.len() && b[*pos].is_ascii_digit() {
                *pos += 1;
            }
            let t = std::str::from_utf8(&b[start..*pos]).expect("ascii digits");
            t.parse()
                .map(PyLit::Int)
                .map_err(|e| format!("bad integer {t:?}: {e}"))
        }
        x if x.is_ascii_alphabetic() || x == b'_' => {
            let start = *pos;
            while *pos < b.len() && (b[*pos].is_ascii_alphanumeric() || b[*pos] == b'_') {
                *pos += 1;
            }
            Ok(PyLit::Word(
                String::from_utf8_lossy(&b[start..*pos]).into_owned(),
            ))
        }
        other => Err(format!("unexpected {:?} at offset {}", other as char, *pos)),
    }
}
