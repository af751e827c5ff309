//! NumPy dtypes as b2nd metalayers and bcolz `meta/storage` spell them (`spec/b2nd.md` §4,
//! `spec/bcolz.md` §1.2), parsed into [`DType`].

use super::pylit::{self, PyLit};

/// Byte order of a multi-byte element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endian {
    /// `<`
    Little,
    /// `>`
    Big,
}

/// Units of datetime64 / timedelta64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    /// Y
    Year,
    /// M
    Month,
    /// W
    Week,
    /// D
    Day,
    /// h
    Hour,
    /// m
    Minute,
    /// s
    Second,
    /// ms
    Milli,
    /// us
    Micro,
    /// ns
    Nano,
    /// ps
    Pico,
    /// fs
    Femto,
    /// as
    Atto,
    /// no unit (generic)
    Generic,
}

impl TimeUnit {
    fn parse(s: &str) -> Option<TimeUnit> {
        Some(match s {
            "Y" => TimeUnit::Year,
            "M" => TimeUnit::Month,
            "W" => TimeUnit::Week,
            "D" => TimeUnit::Day,
            "h" => TimeUnit::Hour,
            "m" => TimeUnit::Minute,
            "s" => TimeUnit::Second,
            "ms" => TimeUnit::Milli,
            "us" | "μs" => TimeUnit::Micro,
            "ns" => TimeUnit::Nano,
            "ps" => TimeUnit::Pico,
            "fs" => TimeUnit::Femto,
            "as" => TimeUnit::Atto,
            _ => return None,
        })
    }
}

/// A field of a structured dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Field name.
    pub name: String,
    /// Element type (a subarray field has `shape` non-empty).
    pub dtype: DType,
    /// Subarray shape (empty for scalars).
    pub shape: Vec<usize>,
    /// Byte offset inside the record.
    pub offset: usize,
}

impl Field {
    /// Bytes the field occupies.
    pub fn size(&self) -> usize {
        self.dtype.itemsize() * self.shape.iter().product::<usize>()
    }
}

/// A NumPy dtype.
#[derive(Debug, Clone, PartialEq)]
pub enum DType {
    /// `|b1`
    Bool,
    /// `i`/`u` of 1, 2, 4, 8 bytes
    Int {
        /// 1, 2, 4 or 8
        bytes: u8,
        /// `i` vs `u`
        signed: bool,
        /// byte order
        endian: Endian,
    },
    /// `f2`, `f4`, `f8` (f16 = long double is refused)
    Float {
        /// 2, 4 or 8
        bytes: u8,
        /// byte order
        endian: Endian,
    },
    /// `c8`, `c16`: two floats
    Complex {
        /// total size: 8 or 16
        bytes: u8,
        /// byte order
        endian: Endian,
    },
    /// `M8[unit]`: int64 units since 1970
    DateTime {
        /// unit
        unit: TimeUnit,
        /// multiplier (`M8[10ms]`)
        mult: i64,
        /// byte order
        endian: Endian,
    },
    /// `m8[unit]`
    TimeDelta {
        /// unit
        unit: TimeUnit,
        /// multiplier
        mult: i64,
        /// byte order
        endian: Endian,
    },
    /// `S<n>`: NUL-padded bytes
    Bytes(usize),
    /// `U<n>`: UCS-4, `n` characters
    Unicode {
        /// characters
        chars: usize,
        /// byte order
        endian: Endian,
    },
    /// `V<n>`: raw bytes
    Void(usize),
    /// A record of fields, packed in order.
    Struct(Vec<Field>),
}

impl DType {
    /// Size of one element in bytes.
    pub fn itemsize(&self) -> usize {
        match self {
            DType::Bool => 1,
            DType::Int { bytes, .. }
            | DType::Float { bytes, .. }
            | DType::Complex { bytes, .. } => *bytes as usize,
            DType::DateTime { .. } | DType::TimeDelta { .. } => 8,
            DType::Bytes(n) | DType::Void(n) => *n,
            DType::Unicode { chars, .. } => 4 * chars,
            DType::Struct(fields) => fields.last().map_or(0, |f| f.offset + f.size()),
        }
    }

    /// Parses a dtype as python-blosc2 (`dtype.str` / `str(dtype)`) or bcolz (`str(dtype)`,
    /// NumPy names) write it.
    ///
    /// # Errors
    /// A message naming what could not be understood.
    pub fn parse(s: &str) -> Result<DType, String> {
        let t = s.trim();
        if t.starts_with('[') || t.starts_with('(') || t.starts_with('{') {
            let lit = pylit::parse(t)?;
            return Self::from_lit(&lit).map(|(d, shape)| {
                if shape.is_empty() {
                    d
                } else {
                    DType::Struct(vec![Field {
                        name: "f0".into(),
                        dtype: d,
                        shape,
                        offset: 0,
                    }])
                }
            });
        }
        Self::parse_simple(t)
    }

    /// Parses a subarray literal `('<i2', (3,))` into its base type and shape.
    ///
    /// # Errors
    /// As [`DType::parse`].
    pub fn parse_with_shape(s: &str) -> Result<(DType, Vec<usize>), String> {
        let t = s.trim();
        if t.starts_with('(') {
            return Self::from_lit(&pylit::parse(t)?);
        }
        Ok((Self::parse(t)?, Vec::new()))
    }

    fn from_lit(lit: &PyLit) -> Result<(DType, Vec<usize>), String> {
        match lit {
            PyLit::Str(s) => Ok((Self::parse_simple(s)?, Vec::new())),
            PyLit::Tuple(items) if items.len() == 2 => {
                let (base, inner) = Self::from_lit(&items[0])?;
                let mut shape = shape_of(&items[1])?;
                shape.extend(inner);
                Ok((base, shape))
            }
            PyLit::List(fields) => {
                let mut out = Vec::with_capacity(fields.len());
                let mut offset = 0;
                for f in fields {
                    let PyLit::Tuple(parts) = f else {
                        return Err(format!("field {f:?} is not a tuple"));
                    };
                    let name = match parts.first() {
                        Some(PyLit::Str(n)) => n.clone(),
                        Some(PyLit::Tuple(t)) => match t.get(1) {
                            Some(PyLit::Str(n)) => n.clone(),
                            _ => return Err("field (title, name) without a name".into()),
                        },
                        _ => return Err(format!("field {f:?} has no name")),
                    };
                    let (dtype, mut shape) = match parts.get(1) {
                        Some(fmt) => Self::from_lit(fmt)?,
                        None => return Err(format!("field {name:?} has no format")),
                    };
                    if let Some(sh) = parts.get(2) {
                        let mut s = shape_of(sh)?;
                        s.extend(shape);
                        shape = s;
                    }
                    let field = Field {
                        name,
                        dtype,
                        shape,
                        offset,
                    };
                    offset += field.size();
                    out.push(field);
                }
                Ok((DType::Struct(out), Vec::new()))
            }
            other => Err(format!("unsupported dtype literal {other:?}")),
        }
    }

    fn parse_simple(s: &str) -> Result<DType, String> {
        let named = match s {
            "bool" => Some(DType::Bool),
            "int8" | "uint8" | "int16" | "uint16" | "int32" | "uint32" | "int64" | "uint64" => {
                let signed = !s.starts_with('u');
                let bits: u8 = s
                    .trim_start_matches("uint")
                    .trim_start_matches("int")
                    .parse()
                    .map_err(|_| s.to_string())?;
                Some(DType::Int {
                    bytes: bits / 8,
                    signed,
                    endian: Endian::Little,
                })
            }
            "float16" => Some(DType::Float {
                bytes: 2,
                endian: Endian::Little,
            }),
            "float32" => Some(DType::Float {
                bytes: 4,
                endian: Endian::Little,
            }),
            "float64" => Some(DType::Float {
                bytes: 8,
                endian: Endian::Little,
            }),
            "complex64" => Some(DType::Complex {
                bytes: 8,
                endian: Endian::Little,
            }),
            "complex128" => Some(DType::Complex {
                bytes: 16,
                endian: Endian::Little,
            }),
            "object" | "O" | "|O" => {
                return Err("object dtype (pickled Python objects) is not supported".into());
            }
            _ => None,
        };
        if let Some(d) = named {
            return Ok(d);
        }
        for (prefix, dt) in [("datetime64", true), ("timedelta64", false)] {
            if let Some(rest) = s.strip_prefix(prefix) {
                return Self::parse_simple(&format!("<{}8{rest}", if dt { 'M' } else { 'm' }));
            }
        }
        let mut chars = s.chars().peekable();
        let endian = match chars.peek() {
            Some('<') | Some('=') | Some('|') => {
                chars.next();
                Endian::Little
            }
            Some('>') => {
                chars.next();
                Endian::Big
            }
            _ => Endian::Little,
        };
        let kind = chars.next().ok_or_else(|| format!("empty dtype {s:?}"))?;
        let rest: String = chars.collect();
        let (size_str, unit) = match rest.find('[') {
            Some(i) => (&rest[..i], Some(rest[i + 1..].trim_end_matches(']'))),
            None => (rest.as_str(), None),
        };
        let size: usize = if size_str.is_empty() {
            0
        } else {
            size_str
                .parse()
                .map_err(|_| format!("bad size in dtype {s:?}"))?
        };
        let bad = || format!("unsupported dtype {s:?}");
        Ok(match kind {
            'b' if size == 1 => DType::Bool,
            '?' => DType::Bool,
            'i' | 'u' if matches!(size, 1 | 2 | 4 | 8) => DType::Int {
                bytes: size as u8,
                signed: kind == 'i',
                endian,
            },
            'f' if matches!(size, 2 | 4 | 8) => DType::Float {
                bytes: size as u8,
                endian,
            },
            'f' => {
                return Err(format!(
                    "float of {size} bytes (long double) in {s:?} is not supported"
                ));
            }
            'c' if matches!(size, 8 | 16) => DType::Complex {
                bytes: size as u8,
                endian,
            },
            'M' | 'm' if size == 8 => {
                let (mult, unit) = match unit {
                    None | Some("") => (1, TimeUnit::Generic),
                    Some(u) => {
                        let digits: String = u.chars().take_while(|c| c.is_ascii_digit()).collect();
                        let mult = if digits.is_empty() {
                            1
                        } else {
                            digits.parse().map_err(|_| bad())?
                        };
                        (mult, TimeUnit::parse(&u[digits.len()..]).ok_or_else(bad)?)
                    }
                };
                if kind == 'M' {
                    DType::DateTime { unit, mult, endian }
                } else {
                    DType::TimeDelta { unit, mult, endian }
                }
            }
            'S' | 'a' => DType::Bytes(size),
            'U' => DType::Unicode {
                chars: size,
                endian,
            },
            'V' => DType::Void(size),
            _ => return Err(bad()),
        })
    }
}

fn shape_of(lit: &PyLit) -> Result<Vec<usize>, String> {
    match lit {
        PyLit::Int(n) if *n >= 0 => Ok(vec![*n as usize]),
        PyLit::Tuple(items) => items
            .iter()
            .map(|i| match i {
                PyLit::Int(n) if *n >= 0 => Ok(*n as usize),
                other => Err(format!("bad shape item {other:?}")),
            })
            .collect(),
        other => Err(format!("bad shape {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_and_structured() {
        assert_eq!(
            DType::parse("<i4").unwrap(),
            DType::Int {
                bytes: 4,
                signed: true,
                endian: Endian::Little
            }
        );
        assert_eq!(
            DType::parse(">c8").unwrap(),
            DType::Complex {
                bytes: 8,
                endian: Endian::Big
            }
        );
        assert_eq!(
            DType::parse("<M8[10ms]").unwrap(),
            DType::DateTime {
                unit: TimeUnit::Milli,
                mult: 10,
                endian: Endian::Little
            }
        );
        assert_eq!(DType::parse("datetime64[ns]").unwrap().itemsize(), 8);
        let d =
            DType::parse("[('a', [('x', '<i2'), ('y', '>f4')]), ('b', '<U2', (2, 2))]").unwrap();
        assert_eq!(d.itemsize(), 38);
        let d = DType::parse("[('a', '<i4'), ('b', '<f8', (2,)), ('c', 'S3')]").unwrap();
        assert_eq!(d.itemsize(), 23);
        assert!(DType::parse("object").is_err());
    }
}
