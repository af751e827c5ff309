//! What python-blosc2's index sidecars share: the column descriptors of the
//! `index_catalog` vlmeta (current or not), the sidecar frames (1-D arrays inside the
//! table's store), the navigation records `{start, end}` of sorted values, and the
//! order the indexes sort values in ([`IndexKey`]).

use super::dtype::{DType, Endian};
use super::ndarray::NdArray;
use crate::container::store::StoreRoot;
use crate::error::Result;
use serde_json::Value as Json;
use std::cmp::Ordering;
use std::ops::Bound;

/// A lookup reads at most this many indexed values (more: the index is not used).
pub(crate) const MAX_VALUES_READ: u64 = 1 << 22;

/// When finding a range's rows stops being worth it: when they are more than
/// `max_rows`, or lie in more than `max_zones` of the `zones` zones of `zone_rows` rows
/// a table's scan skips whole (rows spread over most zones leave little to skip, and
/// reading and sorting their positions costs as much as scanning: a 14 % range of an
/// unsorted column lies in every zone). Rows past the last zone are not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupLimit {
    /// Most rows found.
    pub max_rows: u64,
    /// Rows per zone (at least 1).
    pub zone_rows: u64,
    /// Zones of the table.
    pub zones: u64,
    /// Most zones the rows found may lie in.
    pub max_zones: u64,
}

impl LookupLimit {
    /// At most `max_rows` rows, wherever they lie.
    pub fn rows(max_rows: u64) -> Self {
        LookupLimit {
            max_rows,
            zone_rows: 1,
            zones: 0,
            max_zones: u64::MAX,
        }
    }

    /// At most `max_rows` rows, in at most half of a table's zones: `rows` rows in
    /// zones of `zone_rows` rows.
    pub fn rows_in_half_the_zones(max_rows: u64, rows: u64, zone_rows: u64) -> Self {
        let zone_rows = zone_rows.max(1);
        let zones = rows.div_ceil(zone_rows);
        LookupLimit {
            max_rows,
            zone_rows,
            zones,
            max_zones: zones / 2,
        }
    }

    /// The same limit with at most `max_rows` rows.
    pub fn with_max_rows(self, max_rows: u64) -> Self {
        LookupLimit { max_rows, ..self }
    }

    /// A tally of the zones rows found lie in, against this limit.
    pub(crate) fn spread(&self) -> ZoneSpread {
        let tracked = self.max_zones < self.zones;
        ZoneSpread {
            seen: if tracked {
                vec![0; self.zones.div_ceil(64) as usize]
            } else {
                Vec::new()
            },
            touched: 0,
            last: u64::MAX,
            limit: *self,
        }
    }
}

/// The zones rows found so far lie in ([`LookupLimit::spread`]).
#[derive(Debug)]
pub(crate) struct ZoneSpread {
    /// One bit per zone (empty when the limit allows every zone).
    seen: Vec<u64>,
    touched: u64,
    /// The zone of the last row added (rows found in order repeat it).
    last: u64,
    limit: LookupLimit,
}

impl ZoneSpread {
    /// Adds `rows`; false once the rows added lie in more zones than the limit allows.
    pub(crate) fn add(&mut self, rows: &[u64]) -> bool {
        if self.seen.is_empty() {
            return true;
        }
        for &r in rows {
            let z = r / self.limit.zone_rows;
            if z == self.last || z >= self.limit.zones {
                continue;
            }
            self.last = z;
            let (w, bit) = ((z / 64) as usize, 1u64 << (z % 64));
            if self.seen[w] & bit == 0 {
                self.seen[w] |= bit;
                self.touched += 1;
                if self.touched > self.limit.max_zones {
                    return false;
                }
            }
        }
        true
    }
}

/// The element type of the sidecars holding rows (`positions`): int64, little-endian.
pub(crate) const POSITION: DType = DType::Int {
    bytes: 8,
    signed: true,
    endian: Endian::Little,
};

/// The row at element `i` of a block of positions read from such a sidecar.
pub(crate) fn position(b: &[u8], i: usize) -> u64 {
    i64::from_le_bytes(b[8 * i..8 * i + 8].try_into().expect("8 bytes")) as u64
}

/// The catalog's descriptor of column `name` when it is current: not stale, and built
/// at the table's `value_epoch` (when the table records one).
pub(crate) fn current_descriptor<'a>(
    catalog: &'a Json,
    value_epoch: Option<i64>,
    name: &str,
) -> Option<&'a Json> {
    let d = catalog.get(name)?;
    let built = d.get("built_value_epoch").and_then(Json::as_i64);
    let current = d.get("stale").and_then(Json::as_bool) == Some(false)
        && (value_epoch.is_none() || built == value_epoch);
    current.then_some(d)
}

/// The sidecar path under `key` of a descriptor's part (`None` when absent, or when it
/// would leave the table's store).
fn sidecar_path<'a>(part: &'a Json, key: &str) -> Option<&'a str> {
    part.get(key)
        .and_then(Json::as_str)
        .filter(|p| !p.contains(".."))
}

/// The sidecar frame at `rel` in `store` as a 1-D array; `None` when it is absent or
/// not 1-D.
///
/// # Errors
/// IO errors and unreadable frames.
async fn open_sidecar(store: &StoreRoot, rel: &str) -> Result<Option<NdArray>> {
    Ok(match store.open_frame(rel).await? {
        Some(f) => Some(NdArray::from_frame(f, None)?).filter(|a| a.geometry.ndim() == 1),
        None => None,
    })
}

/// The 1-D sidecar frames whose paths a descriptor's `part` names under `keys`, in
/// order; `None` when a path is missing, leaves the store, or names no 1-D frame.
///
/// # Errors
/// IO errors and unreadable frames.
pub(crate) async fn open_sidecars<const N: usize>(
    store: &StoreRoot,
    part: &Json,
    keys: [&str; N],
) -> Result<Option<[NdArray; N]>> {
    let mut out = Vec::with_capacity(N);
    for k in keys {
        let Some(rel) = sidecar_path(part, k) else {
            return Ok(None);
        };
        match open_sidecar(store, rel).await? {
            Some(a) => out.push(a),
            None => return Ok(None),
        }
    }
    Ok(out.try_into().ok())
}

/// The `{start, end}` records of navigation sidecar `nav`, whose fields are of the
/// column's type `elem` (read as `key`); `None` when its records are other.
///
/// # Errors
/// IO and decoding errors.
pub(crate) async fn nav_records(
    nav: &NdArray,
    elem: &DType,
    key: KeyType,
) -> Result<Option<Vec<(IndexKey, IndexKey)>>> {
    let DType::Struct(fields) = &nav.dtype else {
        return Ok(None);
    };
    let field = |n: &str| {
        fields
            .iter()
            .find(|f| f.name == n && f.shape.is_empty() && same_keys(&f.dtype, elem))
    };
    let (Some(start), Some(end)) = (field("start"), field("end")) else {
        return Ok(None);
    };
    let records = nav.read_all().await?;
    let at = |r: &[u8], off: usize| key.key(&r[off..off + key.size()]);
    Ok(Some(
        records
            .chunks_exact(nav.itemsize())
            .map(|r| (at(r, start.offset), at(r, end.offset)))
            .collect(),
    ))
}

/// The code points of a NumPy `<U` element (UCS-4, little-endian), trailing NULs left
/// out: their order is the order of the strings.
fn code_points(e: &[u8]) -> impl Iterator<Item = u32> + '_ {
    let units = e.len() / 4;
    let nul = |i: usize| e[4 * i..4 * i + 4] == [0; 4];
    let len = (0..units).rev().find(|&i| !nul(i)).map_or(0, |i| i + 1);
    e[..4 * len]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
}

/// Bounds on text values as they bound the values a NumPy `<U` sidecar stores: NumPy
/// drops a string's trailing NULs, so `'a\0'` is stored as `'a'`. Dropping them keeps
/// the order (never turns `x <= y` into the reverse), so every value within `lo..hi` is
/// stored within the bounds returned: the literals without their trailing NULs, the lower
/// bound made inclusive (`'a\0' > 'a'` is stored as `'a'`), the upper one too when its
/// literal lost a NUL. Bounds on numbers are returned as they are.
pub(crate) fn stored_text_bounds(
    lo: Bound<IndexKey>,
    hi: Bound<IndexKey>,
) -> (Bound<IndexKey>, Bound<IndexKey>) {
    let strip = |s: &String| IndexKey::Text(s.trim_end_matches('\0').to_string());
    let lo = match lo {
        Bound::Included(IndexKey::Text(s)) | Bound::Excluded(IndexKey::Text(s)) => {
            Bound::Included(strip(&s))
        }
        b => b,
    };
    let hi = match hi {
        Bound::Excluded(IndexKey::Text(s)) if !s.ends_with('\0') => {
            Bound::Excluded(IndexKey::Text(s))
        }
        Bound::Included(IndexKey::Text(s)) | Bound::Excluded(IndexKey::Text(s)) => {
            Bound::Included(strip(&s))
        }
        b => b,
    };
    (lo, hi)
}

/// Whether elements of types `a` and `b` read as the same keys (a timestamp column's
/// sidecars hold int64).
pub(crate) fn same_keys(a: &DType, b: &DType) -> bool {
    a == b || KeyType::of(a).is_some_and(|k| KeyType::of(b) == Some(k))
}

/// Whether a range may hold NaN in SQL's order, which puts a NaN with the sign bit set
/// below every number and one without above (indexes keep both last): when it is open
/// on either side, or bounded by a NaN.
pub(crate) fn wants_nan(lo: &Bound<IndexKey>, hi: &Bound<IndexKey>) -> bool {
    let nan_or_open = |b: &Bound<IndexKey>| match b {
        Bound::Included(k) | Bound::Excluded(k) => k.is_nan(),
        Bound::Unbounded => true,
    };
    nan_or_open(lo) || nan_or_open(hi)
}

/// A lower bound as the index's order takes it: SQL puts a NaN with the sign bit set
/// below every number, the index every NaN above, so such a bound bounds nothing.
pub(crate) fn index_lower_bound(lo: Bound<IndexKey>) -> Bound<IndexKey> {
    match lo {
        Bound::Included(IndexKey::Float(f)) | Bound::Excluded(IndexKey::Float(f))
            if f.is_nan() && f.is_sign_negative() =>
        {
            Bound::Unbounded
        }
        b => b,
    }
}

/// Whether `k` lies below the lower bound `lo` in the index's order.
pub(crate) fn below(k: &IndexKey, lo: &Bound<IndexKey>) -> bool {
    match lo {
        Bound::Included(b) => k.order(b) == Ordering::Less,
        Bound::Excluded(b) => k.order(b) != Ordering::Greater,
        Bound::Unbounded => false,
    }
}

/// Whether `k` lies above the upper bound `hi` in the index's order.
pub(crate) fn above(k: &IndexKey, hi: &Bound<IndexKey>) -> bool {
    match hi {
        Bound::Included(b) => k.order(b) == Ordering::Greater,
        Bound::Excluded(b) => k.order(b) != Ordering::Less,
        Bound::Unbounded => false,
    }
}

/// A value of an indexed column, as the index orders it.
#[derive(Debug, Clone, PartialEq)]
pub enum IndexKey {
    /// Any integer column (timestamps too: their integer counts).
    Int(i128),
    /// A float column: NaN orders after every number, −0.0 equals 0.0.
    Float(f64),
    /// A text column, ordered by code points (as NumPy orders `<U` strings and Rust and
    /// Arrow order UTF-8).
    Text(String),
}

impl IndexKey {
    /// The index's order (keys of one column are of one kind; an integer against a float
    /// compares as floats).
    pub fn order(&self, other: &IndexKey) -> Ordering {
        let float = |k: &IndexKey| match *k {
            IndexKey::Int(i) => i as f64,
            IndexKey::Float(f) if f.is_nan() => f64::NAN,
            // Matches −0.0 too (float patterns compare with `==`).
            IndexKey::Float(0.0) => 0.0,
            IndexKey::Float(f) => f,
            IndexKey::Text(_) => f64::INFINITY,
        };
        match (self, other) {
            (IndexKey::Int(a), IndexKey::Int(b)) => a.cmp(b),
            (IndexKey::Text(a), IndexKey::Text(b)) => a.cmp(b),
            // Text against a number does not happen (keys of one column are of one
            // kind); text orders after numbers.
            (IndexKey::Text(_), _) => Ordering::Greater,
            (_, IndexKey::Text(_)) => Ordering::Less,
            _ => float(self).total_cmp(&float(other)),
        }
    }

    /// True for a float NaN.
    pub fn is_nan(&self) -> bool {
        matches!(self, IndexKey::Float(f) if f.is_nan())
    }
}

/// How the elements of an indexed column read as keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum KeyType {
    Int {
        bytes: usize,
        signed: bool,
    },
    Float {
        bytes: usize,
    },
    /// NumPy `<U{chars}`: UCS-4 code points, little-endian, trailing NULs not part of
    /// the value.
    Text {
        chars: usize,
    },
}

impl KeyType {
    pub(crate) fn of(d: &DType) -> Option<KeyType> {
        match *d {
            DType::Int {
                bytes,
                signed,
                endian: Endian::Little,
            } => Some(KeyType::Int {
                bytes: bytes as usize,
                signed,
            }),
            DType::Float {
                bytes: bytes @ (4 | 8),
                endian: Endian::Little,
            } => Some(KeyType::Float {
                bytes: bytes as usize,
            }),
            DType::Unicode {
                chars,
                endian: Endian::Little,
            } if chars > 0 => Some(KeyType::Text { chars }),
            // Counts of their unit (python-blosc2 keeps the sidecars of a timestamp
            // column as int64 and sorts NaT, the least int64, first).
            DType::DateTime {
                mult: 1,
                endian: Endian::Little,
                ..
            }
            | DType::TimeDelta {
                mult: 1,
                endian: Endian::Little,
                ..
            } => Some(KeyType::Int {
                bytes: 8,
                signed: true,
            }),
            _ => None,
        }
    }

    /// Whether `k` is a key of this type's kind (numbers compare with numbers, text
    /// with text).
    pub(crate) fn accepts(&self, k: &IndexKey) -> bool {
        matches!(self, KeyType::Text { .. }) == matches!(k, IndexKey::Text(_))
    }

    pub(crate) fn size(&self) -> usize {
        match *self {
            KeyType::Int { bytes, .. } | KeyType::Float { bytes } => bytes,
            KeyType::Text { chars } => 4 * chars,
        }
    }

    /// The key of the element in `b` (exactly [`Self::size`] bytes).
    pub(crate) fn key(&self, b: &[u8]) -> IndexKey {
        match *self {
            KeyType::Int { bytes, signed } => {
                let mut le = [0u8; 16];
                le[..bytes].copy_from_slice(&b[..bytes]);
                if signed && b[bytes - 1] & 0x80 != 0 {
                    le[bytes..].fill(0xff);
                }
                IndexKey::Int(i128::from_le_bytes(le))
            }
            KeyType::Float { bytes: 4 } => {
                IndexKey::Float(f32::from_le_bytes(b[..4].try_into().expect("4 bytes")) as f64)
            }
            KeyType::Float { .. } => {
                IndexKey::Float(f64::from_le_bytes(b[..8].try_into().expect("8 bytes")))
            }
            KeyType::Text { chars } => {
                let units = b[..4 * chars]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")));
                let mut s: String = units
                    .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
                    .collect();
                s.truncate(s.trim_end_matches('\0').len());
                IndexKey::Text(s)
            }
        }
    }

    /// Whether the elements in `b` are sorted, compared as `map` makes their keys (text:
    /// by their code points, without building a string per element; `map` is not
    /// applied).
    pub(crate) fn is_sorted(&self, b: &[u8], map: impl Fn(IndexKey) -> IndexKey) -> bool {
        let size = self.size();
        let mut elems = b.chunks_exact(size);
        if let KeyType::Text { .. } = self {
            return elems
                .clone()
                .zip(elems.skip(1))
                .all(|(x, y)| code_points(x).cmp(code_points(y)).is_le());
        }
        let Some(first) = elems.next() else {
            return true;
        };
        let mut prev = map(self.key(first));
        for e in elems {
            let k = map(self.key(e));
            if prev.order(&k).is_gt() {
                return false;
            }
            prev = k;
        }
        true
    }

    /// The number of elements in `b` (sorted) before the first whose key fails `pred`
    /// (which holds for a prefix), by a binary search decoding one element per step.
    pub(crate) fn partition_point(&self, b: &[u8], pred: impl Fn(IndexKey) -> bool) -> usize {
        let size = self.size();
        let (mut lo, mut hi) = (0, b.len() / size);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.key(&b[mid * size..(mid + 1) * size])) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_stop_when_rows_spread_over_half_the_zones() {
        // 1000 rows in zones of 100: 10 zones, at most 5 of them.
        let limit = LookupLimit::rows_in_half_the_zones(400, 1000, 100);
        assert_eq!((limit.zones, limit.max_zones), (10, 5));
        let mut s = limit.spread();
        // Rows in order, repeating zones, and rows past the last zone count once or not.
        assert!(s.add(&[0, 1, 99, 100, 150, 199]));
        assert!(s.add(&[420, 0, 1000, u64::MAX, 250, 301]));
        assert_eq!(s.touched, 5);
        // A sixth zone is one too many, wherever it comes.
        assert!(!s.add(&[350, 960]));
        // Rows found in order lie in few zones, however many they are.
        let mut s = limit.spread();
        assert!(s.add(&(200..700).collect::<Vec<_>>()));
        assert!(!s.add(&[999]));
        // A limit on rows alone tracks no zone.
        let mut s = LookupLimit::rows(5).spread();
        assert!(s.add(&(0..1000).step_by(7).collect::<Vec<_>>()));
        assert!(s.seen.is_empty());
        // A table of one zone: half of it is none, so a lookup that finds a row stops.
        let one = LookupLimit::rows_in_half_the_zones(10, 50, 100);
        assert_eq!((one.zones, one.max_zones), (1, 0));
        assert!(one.spread().add(&[]));
        assert!(!one.spread().add(&[3]));
        assert_eq!(one.with_max_rows(3).max_rows, 3);
    }

    #[test]
    fn keys_order_as_numpy_sorts() {
        let f = IndexKey::Float;
        let mut v = [
            f(f64::NAN),
            f(1.0),
            f(-0.0),
            f(f64::NEG_INFINITY),
            f(0.0),
            f(-f64::NAN),
        ];
        v.sort_by(IndexKey::order);
        assert_eq!(v[0], f(f64::NEG_INFINITY));
        assert_eq!(v[1].order(&f(0.0)), Ordering::Equal);
        assert_eq!(v[2].order(&f(-0.0)), Ordering::Equal);
        assert_eq!(v[3], f(1.0));
        assert!(v[4].is_nan() && v[5].is_nan());
        let t = KeyType::Int {
            bytes: 2,
            signed: true,
        };
        assert_eq!(t.key(&(-5i16).to_le_bytes()), IndexKey::Int(-5));
        let u = KeyType::Int {
            bytes: 8,
            signed: false,
        };
        assert_eq!(
            u.key(&u64::MAX.to_le_bytes()),
            IndexKey::Int(u64::MAX as i128)
        );
        assert_eq!(IndexKey::Int(3).order(&f(2.5)), Ordering::Greater);
    }

    /// NumPy `<U3` elements: sorted by code points with trailing NULs left out, as the
    /// strings they read as; searched one element per step.
    #[test]
    fn text_elements_sort_and_search_as_strings() {
        let ucs4 = |s: &[u32]| -> Vec<u8> {
            let mut e: Vec<u8> = s.iter().flat_map(|c| c.to_le_bytes()).collect();
            e.resize(12, 0);
            e
        };
        let t = KeyType::Text { chars: 3 };
        // "", "a", "a" (stored from "a\0"), "a\0b", "ab", "é", "😀"
        let elems: Vec<&[u32]> = vec![
            &[],
            &[97],
            &[97, 0],
            &[97, 0, 98],
            &[97, 98],
            &[233],
            &[0x1F600],
        ];
        let b: Vec<u8> = elems.iter().flat_map(|e| ucs4(e)).collect();
        assert!(t.is_sorted(&b, |k| k));
        let keys: Vec<IndexKey> = b.chunks_exact(12).map(|e| t.key(e)).collect();
        assert!(keys.windows(2).all(|w| w[0].order(&w[1]).is_le()));
        assert_eq!(keys[2], IndexKey::Text("a".into()));
        assert_eq!(keys[3], IndexKey::Text("a\0b".into()));
        let text = |s: &str| IndexKey::Text(s.into());
        assert_eq!(t.partition_point(&b, |k| k.order(&text("a")).is_lt()), 1);
        assert_eq!(t.partition_point(&b, |k| k.order(&text("a")).is_le()), 3);
        assert_eq!(t.partition_point(&b, |k| k.order(&text("é")).is_le()), 6);
        let mut swapped = b.clone();
        swapped[..24].rotate_left(12);
        assert!(!t.is_sorted(&swapped, |k| k));
    }
}
