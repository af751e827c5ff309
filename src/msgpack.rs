//! A bounded msgpack reader into a plain value tree ([`MsgValue`]), and its JSON view.
//!
//! Used for frame metalayers, vlmetalayers and python-blosc2 attributes
//! (`spec/frame.md` §2, §4.1). Every length is checked against the remaining input before
//! anything is allocated; nesting is limited.

use serde_json::{Value as Json, json};

/// A decoded msgpack value.
#[derive(Debug, Clone, PartialEq)]
pub enum MsgValue {
    /// nil
    Nil,
    /// true / false
    Bool(bool),
    /// Any integer that fits i64.
    Int(i64),
    /// Integers above i64::MAX.
    UInt(u64),
    /// float32 / float64
    Float(f64),
    /// str
    Str(String),
    /// bin
    Bin(Vec<u8>),
    /// array
    Array(Vec<MsgValue>),
    /// map (in stored order)
    Map(Vec<(MsgValue, MsgValue)>),
    /// ext (type, payload)
    Ext(i8, Vec<u8>),
}

const MAX_DEPTH: usize = 64;

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() - self.pos {
            return Err(format!(
                "msgpack: {n} bytes needed at offset {}, {} left",
                self.pos,
                self.buf.len() - self.pos
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn be(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }
    fn value(&mut self, depth: usize) -> Result<MsgValue, String> {
        if depth > MAX_DEPTH {
            return Err("msgpack: nesting too deep".into());
        }
        let m = self.take(1)?[0];
        Ok(match m {
            0x00..=0x7f => MsgValue::Int(m as i64),
            0xe0..=0xff => MsgValue::Int(m as i8 as i64),
            0x80..=0x8f => self.map((m & 0x0f) as usize, depth)?,
            0x90..=0x9f => self.array((m & 0x0f) as usize, depth)?,
            0xa0..=0xbf => self.str((m & 0x1f) as usize)?,
            0xc0 => MsgValue::Nil,
            0xc2 => MsgValue::Bool(false),
            0xc3 => MsgValue::Bool(true),
            0xc4..=0xc6 => {
                let n = self.be(1 << (m - 0xc4))? as usize;
                MsgValue::Bin(self.take(n)?.to_vec())
            }
            0xc7..=0xc9 => {
                let n = self.be(1 << (m - 0xc7))? as usize;
                let t = self.take(1)?[0] as i8;
                MsgValue::Ext(t, self.take(n)?.to_vec())
            }
            0xca => MsgValue::Float(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => MsgValue::Float(f64::from_bits(self.be(8)?)),
            0xcc..=0xcf => {
                let v = self.be(1 << (m - 0xcc))?;
                if v <= i64::MAX as u64 {
                    MsgValue::Int(v as i64)
                } else {
                    MsgValue::UInt(v)
                }
            }
            0xd0 => MsgValue::Int(self.be(1)? as u8 as i8 as i64),
            0xd1 => MsgValue::Int(self.be(2)? as u16 as i16 as i64),
            0xd2 => MsgValue::Int(self.be(4)? as u32 as i32 as i64),
            0xd3 => MsgValue::Int(self.be(8)? as i64),
            0xd4..=0xd8 => {
                let t = self.take(1)?[0] as i8;
                MsgValue::Ext(t, self.take(1 << (m - 0xd4))?.to_vec())
            }
            0xd9..=0xdb => {
                let n = self.be(1 << (m - 0xd9))? as usize;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.be(if m == 0xdc { 2 } else { 4 })? as usize;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.be(if m == 0xde { 2 } else { 4 })? as usize;
                self.map(n, depth)?
            }
            0xc1 => {
                return Err(format!(
                    "msgpack: invalid marker 0xc1 at offset {}",
                    self.pos - 1
                ));
            }
        })
    }
    fn str(&mut self, n: usize) -> Result<MsgValue, String> {
        let b = self.take(n)?;
        Ok(MsgValue::Str(String::from_utf8_lossy(b).into_owned()))
    }
    fn array(&mut self, n: usize, depth: usize) -> Result<MsgValue, String> {
        // Every item takes at least one byte: bound the allocation by the input left.
        if n > self.buf.len() - self.pos {
            return Err(format!(
                "msgpack: array of {n} items in {} bytes",
                self.buf.len() - self.pos
            ));
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.value(depth + 1)?);
        }
        Ok(MsgValue::Array(v))
    }
    fn map(&mut self, n: usize, depth: usize) -> Result<MsgValue, String> {
        if n.saturating_mul(2) > self.buf.len() - self.pos {
            return Err(format!(
                "msgpack: map of {n} entries in {} bytes",
                self.buf.len() - self.pos
            ));
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            v.push((k, self.value(depth + 1)?));
        }
        Ok(MsgValue::Map(v))
    }
}

/// The number of bytes the value at the start of `buf` takes, found without building it
/// (iteratively: any nesting depth).
///
/// # Errors
/// Truncated input, invalid markers.
pub fn skip(buf: &[u8]) -> Result<usize, String> {
    let mut r = Reader { buf, pos: 0 };
    // Values still to skip; each takes at least one byte, so more than the bytes left
    // is truncated input.
    let mut pending: u64 = 1;
    while pending > 0 {
        pending -= 1;
        let m = r.take(1)?[0];
        let (values, bytes): (u64, u64) = match m {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (2 * (m & 0x0f) as u64, 0),
            0x90..=0x9f => ((m & 0x0f) as u64, 0),
            0xa0..=0xbf => (0, (m & 0x1f) as u64),
            0xc4..=0xc6 => (0, r.be(1 << (m - 0xc4))?),
            0xc7..=0xc9 => (0, r.be(1 << (m - 0xc7))? + 1),
            0xca => (0, 4),
            0xcb => (0, 8),
            0xcc..=0xcf => (0, 1 << (m - 0xcc)),
            0xd0..=0xd3 => (0, 1 << (m - 0xd0)),
            0xd4..=0xd8 => (0, 1 + (1 << (m - 0xd4))),
            0xd9..=0xdb => (0, r.be(1 << (m - 0xd9))?),
            0xdc => (r.be(2)?, 0),
            0xdd => (r.be(4)?, 0),
            0xde => (2 * r.be(2)?, 0),
            0xdf => (2 * r.be(4)?, 0),
            0xc1 => {
                return Err(format!(
                    "msgpack: invalid marker 0xc1 at offset {}",
                    r.pos - 1
                ));
            }
        };
        let left = (r.buf.len() - r.pos) as u64;
        if bytes > left {
            return Err(format!(
                "msgpack: {bytes} bytes needed at offset {}, {left} left",
                r.pos
            ));
        }
        r.pos += bytes as usize;
        pending += values;
        if pending > left {
            return Err(format!(
                "msgpack: {pending} values pending at offset {} with {left} bytes left",
                r.pos
            ));
        }
    }
    Ok(r.pos)
}

/// Parses one value at the start of `buf`; returns it and the number of bytes used.
///
/// # Errors
/// Truncated input, invalid markers, or nesting deeper than 64.
pub fn parse(buf: &[u8]) -> Result<(MsgValue, usize), String> {
    let mut r = Reader { buf, pos: 0 };
    let v = r.value(0)?;
    Ok((v, r.pos))
}

impl MsgValue {
    /// The integer value, if any.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            MsgValue::Int(i) => Some(*i),
            _ => None,
        }
    }
    /// The string value, if any.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MsgValue::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The items of an array.
    pub fn as_array(&self) -> Option<&[MsgValue]> {
        match self {
            MsgValue::Array(a) => Some(a),
            _ => None,
        }
    }
    /// Looks up a string key in a map.
    pub fn get(&self, key: &str) -> Option<&MsgValue> {
        match self {
            MsgValue::Map(m) => m
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// JSON view with python-blosc2's conventions (`spec/frame.md` §4.1): tuples become
    /// arrays, bytes `{"__bytes__": hex}`, complex `{"real", "imag"}`, other ext types
    /// `{"__ext__": type, "len": n}`.
    pub fn to_json(&self) -> Json {
        match self {
            MsgValue::Nil => Json::Null,
            MsgValue::Bool(b) => json!(b),
            MsgValue::Int(i) => json!(i),
            MsgValue::UInt(u) => json!(u),
            MsgValue::Float(f) => serde_json::Number::from_f64(*f)
                .map(Json::Number)
                .unwrap_or_else(|| json!(f.to_string())),
            MsgValue::Str(s) => json!(s),
            MsgValue::Bin(b) => {
                json!({ "__bytes__": b.iter().map(|x| format!("{x:02x}")).collect::<String>() })
            }
            MsgValue::Array(a) => {
                let items = match a.first() {
                    Some(MsgValue::Str(s)) if s == "__tuple__" => &a[1..],
                    _ => &a[..],
                };
                Json::Array(items.iter().map(MsgValue::to_json).collect())
            }
            MsgValue::Map(m) => {
                let mut o = serde_json::Map::new();
                for (k, v) in m {
                    let key = match k {
                        MsgValue::Str(s) => s.clone(),
                        other => other.to_json().to_string(),
                    };
                    o.insert(key, v.to_json());
                }
                Json::Object(o)
            }
            MsgValue::Ext(44, p) if p.len() == 16 => {
                let re = f64::from_be_bytes(p[..8].try_into().expect("16-byte payload"));
                let im = f64::from_be_bytes(p[8..].try_into().expect("16-byte payload"));
                json!({ "real": re, "imag": im })
            }
            MsgValue::Ext(t, p) => json!({ "__ext__": t, "len": p.len() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_examples() {
        // {"x": 1, "y": [1, 2, (3, 4)]} from spec/frame.md §4.1
        let mut b = vec![0x82, 0xA1, b'x', 1, 0xA1, b'y', 0x93, 1, 2, 0x93, 0xA9];
        b.extend_from_slice(b"__tuple__");
        b.extend_from_slice(&[3, 4]);
        let (v, n) = parse(&b).unwrap();
        assert_eq!(n, b.len());
        assert_eq!(v.to_json(), json!({"x": 1, "y": [1, 2, [3, 4]]}));
        let c = [
            0xD8, 0x2C, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            parse(&c).unwrap().0.to_json(),
            json!({"real": 1.0, "imag": 2.0})
        );
    }

    #[test]
    fn skip_takes_the_bytes_parse_takes() {
        // One value of every marker family, nested: map, array16, str8, bin8, ext8,
        // fixext, float32/64, uint/int of every width, nil, bools, negative fixint.
        let mut b = vec![0x83, 0xa1, b'k', 0xdc, 0, 12];
        b.extend([
            0xd9, 3, b'a', b'b', b'c', 0xc4, 2, 1, 2, 0xc7, 1, 5, 9, 0xd5, 1, 2, 3,
        ]);
        b.extend([0xca, 0, 0, 0x80, 0x3f, 0xcb, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]);
        b.extend([0xcd, 1, 0, 0xd3, 0, 0, 0, 0, 0, 0, 0, 1, 0xc0, 0xc3, 0xff]);
        b.extend([0x91, 0x80, 0xa0, 0xde, 0, 1, 0x01, 0x90, 0x02, 0xc2]);
        let (_, used) = parse(&b).unwrap();
        assert_eq!(used, b.len());
        assert_eq!(skip(&b), Ok(b.len()));
        // Followed by other bytes, it stops at the value's end.
        let mut more = b.clone();
        more.extend([0x01, 0x02]);
        assert_eq!(skip(&more), Ok(b.len()));
        // Cut anywhere, it is an error, as for parse.
        for cut in 0..b.len() {
            assert!(skip(&b[..cut]).is_err(), "cut at {cut}");
            assert!(parse(&b[..cut]).is_err(), "cut at {cut}");
        }
        assert!(skip(&[0xc1]).is_err());
        // Huge declared counts fail at once, whatever the nesting.
        assert!(skip(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0]).is_err());
        assert!(skip(&[0xdf, 0xff, 0xff, 0xff, 0xff]).is_err());
        let deep = vec![0x91; 10_000];
        assert!(skip(&deep).is_err());
    }

    #[test]
    fn huge_declared_lengths_are_refused() {
        assert!(parse(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(parse(&[0xc6, 0xff, 0xff, 0xff, 0xff, 1]).is_err());
    }
}
