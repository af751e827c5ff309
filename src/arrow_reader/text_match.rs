//! Equality with given texts, tested on numpy `U<n>` records before they become Arrow
//! strings (and with byte strings, on `S<n>` records before they become `Binary`): a scan
//! filtered on `name = 'x'` or `name IN ('x', 'y')` keeps only the rows that can match and
//! converts only those (`reader::BatchReader::with_text_matches`).
//!
//! A record equals a text when the text's code units, padded with NUL units to the
//! record's `n`, are the record's bytes: exactly [`super::utf32`]'s rule (trailing NULs
//! dropped), so no row whose string equals a text is dropped. A text that ends in NUL
//! equals no converted value, and neither does one longer than `n` characters; a text
//! holding U+FFFD could equal records with invalid units (which convert to U+FFFD), so
//! [`TextMatch::texts`] declines it and the scan keeps every row.
//!
//! `LIKE` patterns are tested the same way on a text they imply: `'ab%'` on its prefix
//! (records starting with `ab`'s units), `'%ab%'` on a text every match contains (records
//! holding `ab`'s units at a unit boundary, found by one `memmem` search over a batch's
//! records). These keep a superset of the matching rows; the pattern itself is applied
//! above the scan. `ILIKE` is tested in either case on values that are all ASCII
//! (`any_case` in [`TextMatch::texts`]); a dictionary column's codes against a bit set
//! ([`TextMatch::codes`]).

use crate::array::batch_array::ItemFilter;
use arrow::buffer::BooleanBuffer;
use memchr::memmem;

/// How a record or item is compared with a [`TextMatch`]'s texts, in order from the
/// strictest to the loosest (a value that equals a text starts with it, and one that
/// starts with it holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Matching {
    /// It equals one of them.
    Equal,
    /// It starts with one of them.
    Prefix,
    /// It contains one of them (for records: at a code unit boundary).
    Substring,
}

/// The padded records that equal one of a filter's texts (or start with one, or hold
/// one: [`Matching`]), for one `U<n>` (or `S<n>`) column; or the variable-length items
/// (UTF-8 text or bytes of a BatchArray column, such as a CTable `vlstring`) that do
/// ([`TextMatch::items`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextMatch {
    /// Record size in bytes (`4 * n`); 0 for variable-length items.
    size: usize,
    /// The texts that some record can equal, each as the record it would be; or, for
    /// [`TextMatch::prefixes`] and [`TextMatch::substrings`], the code units a record
    /// must start with or hold.
    needles: Vec<Vec<u8>>,
    /// How the needles are compared.
    how: Matching,
    /// For [`TextMatch::codes`], the codes as a bit set (bit `c` of word `c / 64`):
    /// against several codes, a record is tested by one load, not hashed. (Against one,
    /// a comparison is faster: the compiler vectorizes it.)
    code_bits: Option<Vec<u64>>,
    /// For [`TextMatch::any_case`], the needles are ASCII in lower case, compared with
    /// the ASCII letters of values in either case; `Some(big)` for records (big-endian
    /// units when `big`). Values that are not all ASCII pass.
    any_case: Option<bool>,
}

impl TextMatch {
    /// A test of `needles` compared as `how`, on records of `size` bytes (0: items),
    /// with neither codes nor case-blind comparison.
    fn plain(size: usize, needles: Vec<Vec<u8>>, how: Matching) -> Self {
        TextMatch {
            size,
            needles,
            how,
            code_bits: None,
            any_case: None,
        }
    }

    /// The values that equal, start with or hold one of `texts` as `how` says: the
    /// records of a `U<n>` column when `records` gives its `n` and byte order (big-endian
    /// units when `true`), else variable-length text items ([`TextMatch::items`]). When `any_case` (`ILIKE`), the
    /// texts must be ASCII and `how` not [`Matching::Equal`]: a value's ASCII letters
    /// are compared with them in either case, and a value that is not all ASCII passes
    /// (Arrow's `ILIKE` folds case by Unicode's rules). `None` when the texts cannot be
    /// told apart on the records (one holds U+FFFD), or do not suit `any_case`.
    pub fn texts(
        texts: &[String],
        how: Matching,
        any_case: bool,
        records: Option<(usize, bool)>,
    ) -> Option<Self> {
        if any_case {
            return TextMatch::any_case(texts, how, records);
        }
        let Some((chars, big)) = records else {
            let values = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
            return Some(TextMatch::items(values, how));
        };
        match how {
            Matching::Equal => TextMatch::new(texts, chars, big),
            Matching::Prefix => TextMatch::prefixes(texts, chars, big),
            Matching::Substring => TextMatch::substrings(texts, chars, big),
        }
    }

    /// The records of a `U<chars>` column (big-endian units when `big`) whose strings
    /// equal one of `texts`; `None` when a text cannot be told apart on the records
    /// (it holds U+FFFD).
    fn new(texts: &[String], chars: usize, big: bool) -> Option<Self> {
        let needles = equal_records(texts, chars, big)?;
        Some(TextMatch::plain(chars * 4, needles, Matching::Equal))
    }

    /// The records of a `U<chars>` column whose strings start with one of `prefixes`
    /// (`LIKE 'x%'`), or `None` as for [`TextMatch::new`]. A record is kept when its first
    /// units are a prefix's: every string that starts with it, and a few that do not (a
    /// prefix ending in NUL also keeps records whose NULs are trailing, which numpy drops),
    /// which the filter above the scan removes.
    fn prefixes(prefixes: &[String], chars: usize, big: bool) -> Option<Self> {
        let needles = units(prefixes, chars, big, |_| true)?;
        Some(TextMatch::plain(chars * 4, needles, Matching::Prefix))
    }

    /// The records of a `U<chars>` column whose strings contain one of `texts`
    /// (`LIKE '%x%'`), or `None` as for [`TextMatch::new`]. A record is kept when a
    /// text's units are among its units (at a multiple of 4 bytes): every string that
    /// contains it, and a few that do not (a text ending in NUL also keeps records whose
    /// NULs are trailing), which the filter above the scan removes.
    fn substrings(texts: &[String], chars: usize, big: bool) -> Option<Self> {
        let needles = units(texts, chars, big, |_| true)?;
        Some(TextMatch::plain(chars * 4, needles, Matching::Substring))
    }

    /// The records of an `S<len>` column whose values (trailing NUL bytes dropped, as
    /// numpy reads them) equal one of `values`.
    pub fn bytes(values: &[Vec<u8>], len: usize) -> Self {
        let mut needles: Vec<Vec<u8>> = Vec::with_capacity(values.len());
        for v in values {
            if v.last() == Some(&0) || v.len() > len {
                continue; // No record reads as it.
            }
            let mut rec = v.clone();
            rec.resize(len, 0);
            if !needles.contains(&rec) {
                needles.push(rec);
            }
        }
        TextMatch::plain(len, needles, Matching::Equal)
    }

    /// The int32 codes (little-endian records) of a dictionary column equal to one of
    /// `codes`: the codes of the dictionary's values a filter's texts equal.
    pub fn codes(codes: &[i32]) -> Self {
        // Sorted to drop repeats: a prefix may match most of a large dictionary.
        let mut codes = codes.to_vec();
        codes.sort_unstable();
        codes.dedup();
        let needles = codes.iter().map(|c| c.to_le_bytes().to_vec()).collect();
        let mut bits = Vec::new();
        for &c in codes.iter().filter(|&&c| c >= 0) {
            let c = c as usize;
            if bits.len() <= c / 64 {
                bits.resize(c / 64 + 1, 0u64);
            }
            bits[c / 64] |= 1 << (c % 64);
        }
        TextMatch {
            code_bits: Some(bits),
            ..TextMatch::plain(4, needles, Matching::Equal)
        }
    }

    /// The values that start with (hold, as `how` says) one of the ASCII `texts` in
    /// either case, their ASCII letters compared case-blind, and every value that is not
    /// all ASCII (`ILIKE`, which folds case by Unicode's rules: those are left to it).
    /// `records` gives a `U<n>` column's `n` and byte order; `None` tests
    /// variable-length items. `None` when a text is not ASCII or `how` is
    /// [`Matching::Equal`].
    fn any_case(texts: &[String], how: Matching, records: Option<(usize, bool)>) -> Option<Self> {
        if how == Matching::Equal || !texts.iter().all(|t| t.is_ascii()) {
            return None;
        }
        let mut needles: Vec<Vec<u8>> = Vec::with_capacity(texts.len());
        for t in texts {
            let lower = t.to_ascii_lowercase().into_bytes();
            if records.is_some_and(|(chars, _)| lower.len() > chars) {
                continue; // No record holds it.
            }
            if !needles.contains(&lower) {
                needles.push(lower);
            }
        }
        Some(TextMatch {
            any_case: Some(records.is_some_and(|(_, big)| big)),
            ..TextMatch::plain(records.map_or(0, |(chars, _)| chars * 4), needles, how)
        })
    }

    /// The variable-length items (a BatchArray column's texts as UTF-8, or its byte
    /// strings) equal to one of `values`, starting with one or containing one, as `how`
    /// says. Text items are valid UTF-8 (their conversion checks it), so equal bytes are
    /// equal strings, and a text's bytes inside an item's are a substring of it.
    pub fn items(values: Vec<Vec<u8>>, how: Matching) -> Self {
        let mut needles: Vec<Vec<u8>> = Vec::with_capacity(values.len());
        for v in values {
            if !needles.contains(&v) {
                needles.push(v);
            }
        }
        TextMatch::plain(0, needles, how)
    }

    /// True for a test on variable-length items ([`TextMatch::items`]).
    pub fn on_items(&self) -> bool {
        self.size == 0
    }

    /// The test of one item ([`TextMatch::items`]): whether it equals (starts with,
    /// contains) one of the values. Built once, then called on each item as it is
    /// scanned.
    pub fn item_test(&self) -> ItemTest<'_> {
        ItemTest(match self.needles.as_slice() {
            _ if self.any_case.is_some() && self.how == Matching::Substring => {
                Test::AnyCaseSubstrings(self.needles.iter().map(memmem::Finder::new).collect())
            }
            _ if self.any_case.is_some() => Test::AnyCase(self.how, &self.needles),
            _ if self.how == Matching::Prefix => Test::Prefixes(&self.needles),
            _ if self.how == Matching::Substring => {
                Test::Substrings(self.needles.iter().map(memmem::Finder::new).collect())
            }
            [] => Test::Nothing,
            [one] => Test::One(one, head(one)),
            many => Test::Table(NeedleTable::new(many)),
        })
    }

    /// True when no record can match (every text was too long or ended in NUL).
    pub fn matches_nothing(&self) -> bool {
        self.needles.is_empty()
    }

    /// For each of `n` records (record `i` at `data[i * stride + offset..]`, `size` bytes),
    /// whether it equals one of the texts (starts with one, holds one).
    ///
    /// # Panics
    /// When `data` is shorter than the `n` records (the caller sizes it from the same
    /// geometry).
    pub fn keep(&self, data: &[u8], n: usize, stride: usize, offset: usize) -> BooleanBuffer {
        let rec = |i: usize| &data[i * stride + offset..][..self.size];
        if let Some(big) = self.any_case {
            if self.how == Matching::Substring && stride == self.size && self.size > 0 {
                return self.keep_holding_any_case(&data[offset..][..n * self.size], big);
            }
            let mut ascii = vec![0u8; self.size / 4];
            return BooleanBuffer::collect_bool(n, |i| {
                match lower_ascii(rec(i), big, &mut ascii) {
                    Some(len) => any_case_passes(self.how, &self.needles, &ascii[..len]),
                    None => true, // Not all ASCII: left to the filter.
                }
            });
        }
        if let (Some(bits), 2..) = (&self.code_bits, self.needles.len()) {
            return BooleanBuffer::collect_bool(n, |i| {
                let code = i32::from_le_bytes(rec(i).try_into().expect("4-byte codes"));
                // A negative code (null) is no word's.
                let c = usize::try_from(code).unwrap_or(usize::MAX);
                bits.get(c / 64).is_some_and(|w| w >> (c % 64) & 1 == 1)
            });
        }
        match self.how {
            Matching::Prefix => {
                return BooleanBuffer::collect_bool(n, |i| {
                    self.needles.iter().any(|p| rec(i).starts_with(p))
                });
            }
            Matching::Substring => return self.keep_holding(data, n, stride, offset),
            Matching::Equal => {}
        }
        match self.needles.as_slice() {
            [] => BooleanBuffer::new_unset(n),
            // Most records differ from the text in their first 8 bytes.
            [one] => {
                let h = head(one);
                BooleanBuffer::collect_bool(n, |i| {
                    let r = rec(i);
                    head(r) == h && same(r, one)
                })
            }
            _ => {
                let table = NeedleTable::new(&self.needles);
                BooleanBuffer::collect_bool(n, |i| table.contains(rec(i)))
            }
        }
    }

    /// [`TextMatch::keep`] for substrings: where the records lie end to end, each
    /// needle is searched for once over all of them, and a find counts for the record
    /// it starts in when it starts at a unit boundary and ends inside that record;
    /// otherwise record by record.
    fn keep_holding(&self, data: &[u8], n: usize, stride: usize, offset: usize) -> BooleanBuffer {
        let size = self.size;
        if self.needles.iter().any(|x| x.is_empty()) {
            return BooleanBuffer::new_set(n);
        }
        let finders: Vec<memmem::Finder<'_>> =
            self.needles.iter().map(memmem::Finder::new).collect();
        if stride != size || size == 0 {
            let rec = |i: usize| &data[i * stride + offset..][..size];
            return BooleanBuffer::collect_bool(n, |i| {
                finders.iter().any(|f| holds_at_unit(f, rec(i)))
            });
        }
        holding_end_to_end(&finders, &data[offset..][..n * size], size)
    }
}

/// Whether each record of `size` bytes of `all` (records end to end) holds one of the
/// finders' needles: each needle is searched for once over all of them, and a find
/// counts for the record it starts in when it starts at a unit boundary and ends inside
/// that record.
fn holding_end_to_end(finders: &[memmem::Finder<'_>], all: &[u8], size: usize) -> BooleanBuffer {
    let n = all.len() / size;
    let mut kept = arrow::array::BooleanBufferBuilder::new(n);
    kept.append_n(n, false);
    for f in finders {
        let len = f.needle().len();
        let mut from = 0;
        while let Some(p) = f.find(&all[from..]) {
            let at = from + p;
            let (i, within) = (at / size, at % size);
            if within % 4 == 0 && within + len <= size {
                kept.set_bit(i, true);
                from = (i + 1) * size; // The record is kept: on to the next.
            } else {
                from = at + 1;
            }
            if from >= all.len() {
                break;
            }
        }
    }
    kept.finish()
}

impl TextMatch {
    /// [`TextMatch::keep`] of `ILIKE '%ab%'` over records lying end to end (`all`, units
    /// big-endian when `big`): piece by piece, a copy with its ASCII capital letters in
    /// lower case is searched as `LIKE` searches the records, for the needles as units,
    /// and records with a unit that is not ASCII are kept for `ILIKE` (a
    /// record converted to ASCII bytes and compared window by window took 320 ms over
    /// 10 M `<U12` records, where `LIKE` took 100).
    fn keep_holding_any_case(&self, all: &[u8], big: bool) -> BooleanBuffer {
        let size = self.size;
        let n = all.len() / size;
        let unit = |c: u8| -> [u8; 4] {
            match big {
                true => u32::from(c).to_be_bytes(),
                false => u32::from(c).to_le_bytes(),
            }
        };
        if self.needles.iter().any(Vec::is_empty) {
            return BooleanBuffer::new_set(n);
        }
        let needles: Vec<Vec<u8>> = (self.needles.iter())
            .map(|x| x.iter().flat_map(|&c| unit(c)).collect())
            .collect();
        // Built once, for every piece.
        let finders: Vec<memmem::Finder<'_>> = needles.iter().map(memmem::Finder::new).collect();
        let mut kept = arrow::array::BooleanBufferBuilder::new(n);
        // Pieces of records the cache holds, copied and searched one at a time.
        let piece_records = (64 * 1024 / size).max(1);
        let mut lowered = Vec::with_capacity(piece_records * size);
        for piece in all.chunks(piece_records * size) {
            // Every byte that is an ASCII capital letter, lowered: in a record of ASCII
            // units that is their letters; a record with another unit is kept whatever
            // its copy holds. (Byte by byte, the loop vectorizes.)
            lowered.clear();
            lowered.extend(piece.iter().map(u8::to_ascii_lowercase));
            let found = holding_end_to_end(&finders, &lowered, size);
            // Records with a unit that is not ASCII (in either byte order, a unit
            // above 0x7f has a bit set outside 0x7f's byte): kept.
            let ascii = |rec: &[u8]| {
                let bits = rec.chunks_exact(4).fold(0u32, |acc, u| {
                    acc | u32::from_le_bytes(u.try_into().expect("4-byte units"))
                });
                bits & !(if big { 0x7f00_0000 } else { 0x7f }) == 0
            };
            for (i, rec) in piece.chunks_exact(size).enumerate() {
                kept.append(found.value(i) || !ascii(rec));
            }
        }
        kept.finish()
    }
}

/// Whether `rec` holds the finder's needle at a multiple of 4 bytes. (Finds are
/// tried at every byte: one that is not at a boundary may overlap one that is.)
fn holds_at_unit(f: &memmem::Finder<'_>, rec: &[u8]) -> bool {
    let mut from = 0;
    while let Some(p) = rec.get(from..).and_then(|r| f.find(r)) {
        if (from + p) % 4 == 0 {
            return true;
        }
        from += p + 1;
    }
    false
}

/// The units of a `U<n>` record (big-endian when `big`) as ASCII bytes in lower case,
/// in `out`, trailing NULs dropped: their count; `None` when a unit is not ASCII.
fn lower_ascii(rec: &[u8], big: bool, out: &mut [u8]) -> Option<usize> {
    let mut len = 0;
    for (k, u) in rec.chunks_exact(4).enumerate() {
        let u: [u8; 4] = u.try_into().expect("4-byte units");
        let u = if big {
            u32::from_be_bytes(u)
        } else {
            u32::from_le_bytes(u)
        };
        let b = u8::try_from(u).ok().filter(u8::is_ascii)?;
        out[k] = b.to_ascii_lowercase();
        if b != 0 {
            len = k + 1;
        }
    }
    Some(len)
}

/// Whether ASCII `value` starts with (holds) one of the lower-case `needles` in either
/// case.
#[inline]
fn any_case_passes(how: Matching, needles: &[Vec<u8>], value: &[u8]) -> bool {
    needles.iter().any(|x| match how {
        Matching::Prefix => value
            .get(..x.len())
            .is_some_and(|v| v.eq_ignore_ascii_case(x)),
        _ => holds_any_case(x, value),
    })
}

/// The `U<chars>` records (big-endian units when `big`) whose strings are `texts`,
/// without repeats, leaving out the texts no record converts to (one ending in NUL, one
/// longer than `chars`); `None` when a text holds U+FFFD, which records with invalid
/// units also convert to.
pub(crate) fn equal_records(texts: &[String], chars: usize, big: bool) -> Option<Vec<Vec<u8>>> {
    // Distinct texts that do not end in NUL stay distinct once padded.
    let mut records = units(texts, chars, big, |t| !t.ends_with('\0'))?;
    for rec in &mut records {
        rec.resize(chars * 4, 0);
    }
    Some(records)
}

/// The code units (big-endian when `big`) of each of `texts` that `usable` accepts and a
/// `U<chars>` record can hold, without repeats; `None` when a text holds U+FFFD, which
/// records with invalid units also convert to.
fn units(
    texts: &[String],
    chars: usize,
    big: bool,
    usable: impl Fn(&str) -> bool,
) -> Option<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(texts.len());
    for t in texts {
        if t.contains(char::REPLACEMENT_CHARACTER) {
            return None;
        }
        if !usable(t) || t.chars().count() > chars {
            continue; // No record converts to it, or is that long.
        }
        let u: Vec<u8> = t
            .chars()
            .flat_map(|c| {
                let u = c as u32;
                if big {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                }
            })
            .collect();
        if !out.contains(&u) {
            out.push(u);
        }
    }
    Some(out)
}

/// The test of variable-length items a [`TextMatch`] makes ([`TextMatch::item_test`]).
pub struct ItemTest<'a>(Test<'a>);

/// How an [`ItemTest`] tests an item.
enum Test<'a> {
    /// Equal to none.
    Nothing,
    /// Equal to this value, whose [`head`] is given.
    One(&'a [u8], u64),
    /// Equal to one of these values.
    Table(NeedleTable<'a>),
    /// Starting with one of these.
    Prefixes(&'a [Vec<u8>]),
    /// Holding one of these.
    Substrings(Vec<memmem::Finder<'a>>),
    /// Starting with (holding) one of these lower-case ASCII texts in either case, or
    /// not all ASCII.
    AnyCase(Matching, &'a [Vec<u8>]),
    /// Holding one of these lower-case ASCII texts in either case, or not all ASCII:
    /// searched for in a copy of the batch with its ASCII letters in lower case.
    AnyCaseSubstrings(Vec<memmem::Finder<'a>>),
}

impl ItemFilter for ItemTest<'_> {
    type Cursor = Finds;

    /// Whether item `r` passes. Inlined into the scan of the items: most fail on
    /// their length, then on their first 8 bytes, without a call.
    #[inline(always)]
    fn passes(&self, r: &[u8]) -> bool {
        match &self.0 {
            Test::One(one, h) => r.len() == one.len() && head(r) == *h && same(r, one),
            Test::Table(t) => t.contains(r),
            Test::Prefixes(ps) => ps.iter().any(|p| r.starts_with(p)),
            Test::Substrings(fs) => fs.iter().any(|f| f.find(r).is_some()),
            Test::AnyCase(how, ns) => !r.is_ascii() || any_case_passes(*how, ns, r),
            Test::AnyCaseSubstrings(fs) => {
                !r.is_ascii() || fs.iter().any(|f| holds_any_case(f.needle(), r))
            }
            Test::Nothing => false,
        }
    }

    /// Substrings are searched for in the rest of the batch, not item by item: the
    /// first find at or after an item's start is kept in `finds` and serves every item
    /// before it (a call to `find` costs more than a short item's bytes).
    #[inline(always)]
    fn passes_at(&self, finds: &mut Finds, tail: &[u8], len: usize) -> bool {
        match &self.0 {
            Test::Substrings(fs) => substrings_at(fs, finds, tail, len),
            Test::AnyCaseSubstrings(fs) => {
                !ascii_item(tail, len) || lowered_substrings_at(fs, finds, tail, len)
            }
            _ => self.passes(&tail[..len]),
        }
    }
}

/// [`ItemTest::passes_at`] for substrings. A call, not inlined: inlined, it slowed the
/// scan loop of the other tests (an equality's by a fifth).
#[inline(never)]
fn substrings_at(fs: &[memmem::Finder<'_>], finds: &mut Finds, tail: &[u8], len: usize) -> bool {
    // Positions are addresses: every item of a batch ends its tail at the batch's end,
    // and the batches of one scan are alive (so apart) together.
    let start = tail.as_ptr() as usize;
    finds.batch(start, tail.len(), fs.len());
    holds_from(fs, &mut finds.next, start, tail, len)
}

/// [`substrings_at`] for lower-case ASCII substrings in either case (`ILIKE '%ab%'`):
/// searched for in a copy of the rest of the batch with its ASCII letters in lower case,
/// made at the batch's first item (a search per item compared each item's windows
/// case-blind: 250 ms for 10 M short items, where `LIKE` took 100).
#[inline(never)]
fn lowered_substrings_at(
    fs: &[memmem::Finder<'_>],
    finds: &mut Finds,
    tail: &[u8],
    len: usize,
) -> bool {
    let start = tail.as_ptr() as usize;
    if finds.batch(start, tail.len(), fs.len()) || start < finds.base {
        finds.base = start;
        finds.lowered.clear();
        finds
            .lowered
            .extend(tail.iter().map(u8::to_ascii_lowercase));
    }
    let lowered = &finds.lowered[start - finds.base..];
    holds_from(fs, &mut finds.next, start, lowered, len)
}

/// Whether the item at address `start`, `len` bytes long, holds one of the finders'
/// needles, searching `hay` (the bytes from the item's start to its batch's end, or a
/// copy of them) at most once per needle for all the items before its next find.
#[inline(always)]
fn holds_from(
    fs: &[memmem::Finder<'_>],
    next: &mut [(usize, usize)],
    start: usize,
    hay: &[u8],
    len: usize,
) -> bool {
    fs.iter().zip(next).any(|(f, (from, at))| {
        if *from > start || *at < start {
            *from = start;
            *at = f.find(hay).map_or(usize::MAX, |p| start + p);
        }
        *at != usize::MAX && *at + f.needle().len() <= start + len
    })
}

/// Whether the item that is the first `len` bytes of `tail` is all ASCII: one masked
/// 16-byte load when the tail has 16 bytes and the item at most as many (most items;
/// `is_ascii` on a short slice was a fifth of an `ILIKE` scan's item loop).
#[inline(always)]
fn ascii_item(tail: &[u8], len: usize) -> bool {
    match tail.get(..16) {
        Some(w) if len <= 16 => {
            let w = u128::from_le_bytes(w.try_into().expect("16 bytes"));
            let item = match len {
                16 => u128::MAX,
                _ => (1u128 << (8 * len)) - 1,
            };
            w & item & u128::from_le_bytes([0x80; 16]) == 0
        }
        _ => tail[..len].is_ascii(),
    }
}

/// Whether `value` holds lower-case ASCII `needle` in either case.
fn holds_any_case(needle: &[u8], value: &[u8]) -> bool {
    needle.is_empty()
        || value
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// Where an [`ItemTest`]'s substrings next occur in the batch being scanned.
#[derive(Debug, Default)]
pub struct Finds {
    /// The address just past the batch.
    end: usize,
    /// Per substring: the address its last search started at, and that of its first
    /// occurrence from there (`usize::MAX`: none before the batch's end).
    next: Vec<(usize, usize)>,
    /// For substrings in either case: the address `lowered` starts at, and a copy of the
    /// batch from there with its ASCII letters in lower case.
    base: usize,
    lowered: Vec<u8>,
}

impl Finds {
    /// Readies the cursor for the item at address `start` whose tail is `tail_len` bytes,
    /// searching `needles` substrings: forgets the finds of another batch. Whether the
    /// batch is new.
    #[inline(always)]
    fn batch(&mut self, start: usize, tail_len: usize, needles: usize) -> bool {
        let end = start + tail_len;
        if self.end == end && self.next.len() == needles {
            return false;
        }
        self.end = end;
        self.next.clear();
        self.next.resize(needles, (usize::MAX, 0));
        true
    }
}

/// Items pass all of several tests (filters on one column).
impl ItemFilter for &[ItemTest<'_>] {
    type Cursor = Vec<Finds>;

    #[inline(always)]
    fn passes(&self, r: &[u8]) -> bool {
        self.iter().all(|t| t.passes(r))
    }

    #[inline(always)]
    fn passes_at(&self, finds: &mut Vec<Finds>, tail: &[u8], len: usize) -> bool {
        if finds.len() != self.len() {
            finds.resize_with(self.len(), Finds::default);
        }
        self.iter()
            .zip(finds.iter_mut())
            .all(|(t, f)| t.passes_at(f, tail, len))
    }
}

/// The needles in a small open-addressed table of their hashes: a record (or item) is
/// hashed in one pass over its words whatever the number of needles, and compared whole
/// only where a hash matches. Items whose length no needle has are told apart first.
struct NeedleTable<'a> {
    slots: Vec<Option<(u64, &'a [u8])>>,
    bits: u32,
    lengths: Lengths,
}

impl<'a> NeedleTable<'a> {
    fn new(needles: &'a [Vec<u8>]) -> Self {
        let bits = (needles.len() * 8)
            .next_power_of_two()
            .trailing_zeros()
            .max(1);
        let mut t = NeedleTable {
            slots: vec![None; 1 << bits],
            bits,
            lengths: Lengths::of(needles),
        };
        for x in needles {
            let h = hash(x);
            let mut j = t.slot(h);
            while t.slots[j].is_some() {
                j = (j + 1) & (t.slots.len() - 1);
            }
            t.slots[j] = Some((h, x.as_slice()));
        }
        t
    }

    #[inline(always)]
    fn slot(&self, h: u64) -> usize {
        (h >> (64 - self.bits)) as usize
    }

    #[inline(always)]
    fn contains(&self, r: &[u8]) -> bool {
        if !self.lengths.may_hold(r.len()) {
            return false;
        }
        let h = hash(r);
        let mut j = self.slot(h);
        while let Some((th, x)) = self.slots[j] {
            if th == h && same(r, x) {
                return true;
            }
            j = (j + 1) & (self.slots.len() - 1);
        }
        false
    }
}

/// The lengths of a set of needles: a bit per length under 64, and whether any is
/// longer. (Fixed-width records all have one length, which every needle has.)
struct Lengths {
    short: u64,
    long: bool,
}

impl Lengths {
    fn of(needles: &[Vec<u8>]) -> Self {
        let mut l = Lengths {
            short: 0,
            long: false,
        };
        for x in needles {
            match x.len() {
                n @ 0..64 => l.short |= 1 << n,
                _ => l.long = true,
            }
        }
        l
    }

    #[inline(always)]
    fn may_hold(&self, len: usize) -> bool {
        match len {
            0..64 => self.short >> len & 1 == 1,
            _ => self.long,
        }
    }
}

/// The bytes of `r` (at most 8) as the low bytes of a word, the rest zero: a load
/// without a `memcpy` call for the short tails of records and items.
#[inline(always)]
fn tail_word(r: &[u8]) -> u64 {
    r.iter()
        .take(8)
        .enumerate()
        .fold(0u64, |w, (k, &b)| w | (b as u64) << (8 * k))
}

/// Whether two records are equal. (`==` on slices, one `bcmp` call: about 3 ns for 48
/// bytes; a word loop in Rust took twice that.)
#[inline(always)]
fn same(a: &[u8], b: &[u8]) -> bool {
    a == b
}

/// The first 8 bytes of a record (all of a shorter one, zero-extended) as a word.
#[inline(always)]
fn head(r: &[u8]) -> u64 {
    match r.get(..8) {
        Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
        None => tail_word(r),
    }
}

/// A hash of a record: its 8-byte words (the last bytes zero-extended) folded by rotate
/// and XOR, then mixed by one multiplication; its top bits pick a table slot.
#[inline(always)]
fn hash(r: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = 0u64;
    let mut chunks = r.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = h.rotate_left(23) ^ w;
    }
    let rem = chunks.remainder();
    if !rem.is_empty() {
        h = h.rotate_left(23) ^ tail_word(rem);
    }
    (h ^ (h >> 29)).wrapping_mul(K)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrow_reader::utf32::utf32_to_arrow;
    use arrow::array::AsArray;

    /// Seeded draws below a bound (xorshift).
    fn draws(mut x: u64) -> impl FnMut(u64) -> u64 {
        move |m| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        }
    }

    /// `U<chars>` records of the texts' code points.
    fn text_records<'a>(texts: impl Iterator<Item = &'a str>, chars: usize, big: bool) -> Vec<u8> {
        let units: Vec<Vec<u32>> = texts
            .map(|t| t.chars().map(|c| c as u32).collect())
            .collect();
        let refs: Vec<&[u32]> = units.iter().map(Vec::as_slice).collect();
        records(&refs, chars, big)
    }

    fn records(values: &[&[u32]], chars: usize, big: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for v in values {
            for k in 0..chars {
                let u = v.get(k).copied().unwrap_or(0);
                out.extend_from_slice(&if big {
                    u.to_be_bytes()
                } else {
                    u.to_le_bytes()
                });
            }
        }
        out
    }

    /// Every record and text pairing: `keep` agrees with comparing the converted strings.
    #[test]
    fn keep_equals_comparing_converted_strings() {
        const A: u32 = 'a' as u32;
        const B: u32 = 'b' as u32;
        let values: Vec<&[u32]> = vec![
            &[],
            &[A],
            &[A, B],
            &[A, 0, B],
            &[A, B, 0x65E5, 0x1F600],
            &[0xD800, A],
            &[0x11_0000],
            &[A, A, A, A],
            &[0x65E5],
        ];
        let texts: Vec<String> = vec![
            "".into(),
            "a".into(),
            "ab".into(),
            "a\0b".into(),
            "ab日😀".into(),
            "aaaa".into(),
            "aaaaa".into(),
            "a\0".into(),
            "日".into(),
            "b".into(),
        ];
        for big in [false, true] {
            for chars in [4, 5] {
                let data = records(&values, chars, big);
                let strings = utf32_to_arrow(&data, values.len(), chars * 4, 0, chars, big);
                let strings = strings.as_string::<i32>();
                // Each text alone (its first word, then the record), all of them and a few
                // (the hash table).
                let mut sets: Vec<Vec<String>> = texts.iter().map(|t| vec![t.clone()]).collect();
                sets.push(texts.clone());
                sets.push(texts[1..4].to_vec());
                for set in sets {
                    let m = TextMatch::new(&set, chars, big).expect("no U+FFFD");
                    let kept = m.keep(&data, values.len(), chars * 4, 0);
                    for (i, s) in strings.iter().enumerate() {
                        let want = set.iter().any(|t| Some(t.as_str()) == s);
                        assert_eq!(kept.value(i), want, "record {i} {s:?}, texts {set:?}");
                    }
                }
            }
        }
    }

    /// Prefixes keep every record whose string starts with one, and only those unless
    /// the prefix ends in NUL.
    #[test]
    fn prefixes_keep_every_string_that_starts_with_them() {
        const A: u32 = 'a' as u32;
        let values: Vec<&[u32]> = vec![&[], &[A], &[A, A], &[A, 0, A], &[0x65E5, A], &[0xD800]];
        let prefixes = ["", "a", "aa", "a\0", "日", "aaaaaa", "b"];
        for big in [false, true] {
            let data = records(&values, 3, big);
            let strings = utf32_to_arrow(&data, values.len(), 12, 0, 3, big);
            let strings = strings.as_string::<i32>();
            for p in prefixes {
                let m = TextMatch::prefixes(&[p.to_string()], 3, big).expect("no U+FFFD");
                let kept = m.keep(&data, values.len(), 12, 0);
                for (i, s) in strings.iter().enumerate() {
                    let starts = s.is_some_and(|s| s.starts_with(p));
                    if p.ends_with('\0') {
                        assert!(kept.value(i) || !starts, "record {i} {s:?}, prefix {p:?}");
                    } else {
                        assert_eq!(kept.value(i), starts, "record {i} {s:?}, prefix {p:?}");
                    }
                }
            }
        }
        assert_eq!(TextMatch::prefixes(&["\u{FFFD}".into()], 3, false), None);
    }

    /// Substrings keep every record whose string holds one, and only those unless the
    /// text ends in NUL: random records of letters, NULs, a unit whose bytes hold `a`'s
    /// unit off a boundary (U+6100, `愀`), an invalid unit (U+FFFD once converted) and an
    /// astral one, searched end to end (`keep`'s one search) and inside wider rows.
    #[test]
    fn substrings_keep_every_string_that_holds_them() {
        let alphabet = [0x61, 0x62, 0, 0x6100, 0x61_0000, 0x1F600, 0x6161];
        let mut next = draws(0x9E37_79B9_7F4A_7C15u64);
        let values: Vec<Vec<u32>> = (0..3000)
            .map(|_| {
                let len = next(5) as usize;
                (0..len).map(|_| alphabet[next(7) as usize]).collect()
            })
            .collect();
        let refs: Vec<&[u32]> = values.iter().map(Vec::as_slice).collect();
        let texts = [
            "a", "ab", "ba", "aa", "b\0a", "愀", "😀a", "a\0", "\0", "abab",
        ];
        let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
        let mut sets: Vec<Vec<String>> = texts.iter().map(|t| vec![t.clone()]).collect();
        sets.push(vec!["ab".into(), "ba".into()]);
        for big in [false, true] {
            let data = records(&refs, 4, big);
            let strings = utf32_to_arrow(&data, refs.len(), 16, 0, 4, big);
            let strings = strings.as_string::<i32>();
            // The same records at offset 4 of 24-byte rows.
            let mut wide = vec![0x61u8; refs.len() * 24];
            for i in 0..refs.len() {
                wide[i * 24 + 4..][..16].copy_from_slice(&data[i * 16..][..16]);
            }
            for set in &sets {
                let m = TextMatch::substrings(set, 4, big).expect("no U+FFFD");
                let end_to_end = m.keep(&data, refs.len(), 16, 0);
                let in_rows = m.keep(&wide, refs.len(), 24, 4);
                assert_eq!(end_to_end, in_rows, "{set:?}");
                let mut kept_more = 0;
                for (i, s) in strings.iter().enumerate() {
                    let holds = set
                        .iter()
                        .any(|t| s.is_some_and(|s| s.contains(t.as_str())));
                    if set.iter().any(|t| t.ends_with('\0')) {
                        assert!(end_to_end.value(i) || !holds, "record {i} {s:?}, {set:?}");
                        kept_more += usize::from(end_to_end.value(i) && !holds);
                    } else {
                        assert_eq!(end_to_end.value(i), holds, "record {i} {s:?}, {set:?}");
                    }
                }
                if set == &["\0".to_string()] {
                    assert!(kept_more > 0, "trailing NULs hold a NUL text");
                }
            }
        }
        assert_eq!(TextMatch::substrings(&["\u{FFFD}".into()], 3, false), None);
        // A text longer than the records keeps none; an empty one keeps all.
        let data = records(&[&[0x61], &[]], 2, false);
        let long = TextMatch::substrings(&["aaa".into()], 2, false).expect("plain");
        assert_eq!(long.keep(&data, 2, 8, 0).count_set_bits(), 0);
        let empty = TextMatch::substrings(&["".into()], 2, false).expect("plain");
        assert_eq!(empty.keep(&data, 2, 8, 0).count_set_bits(), 2);
    }

    /// `ILIKE`'s tests: every value Arrow's `ILIKE` matches is kept, and an ASCII value
    /// exactly when it matches; values with the Kelvin sign and the long s (which fold
    /// to `k` and `s`), other letters and NULs; as `U<n>` records of both byte orders
    /// and as items.
    #[test]
    fn any_case_keeps_every_ilike_match() {
        let values = [
            "",
            "abc",
            "ABC",
            "aBc",
            "xyzABCq",
            "ab",
            "b",
            "\u{212A}elvin",
            "Kelvin",
            "kelvin",
            "maſs",
            "MASS",
            "é",
            "ÉA",
            "a\0bc",
            "ab\0",
            "zzzzzz",
        ];
        let strings = arrow::array::StringArray::from(values.to_vec());
        let patterns = [
            "abc%", "%abc%", "%BC", "kel%", "%KEL%", "%ss%", "%s%", "a%", "%a_c%", "%\0b%",
            "zzzzzzz%", "%z%",
        ];
        for pattern in patterns {
            use crate::provider::pushdown::Needles;
            let like = Needles::of_like(
                Needles::text(vec![pattern.into()], Matching::Equal),
                '\\',
                true,
            );
            let Some(Needles::Text {
                texts,
                how,
                any_case: true,
            }) = like
            else {
                panic!("{pattern}: {like:?}");
            };
            let scalar = arrow::array::StringArray::new_scalar(pattern);
            let want = arrow::compute::ilike(&strings, &scalar).expect("ilike");
            // `'x%'` and `'%x%'` are tested exactly on ASCII values; the others (a
            // suffix, more pieces) keep a superset.
            let inner = pattern.trim_start_matches('%').trim_end_matches('%');
            let exact = !inner.contains(['%', '_']) && pattern.ends_with('%');
            let check = |kept: &dyn Fn(usize) -> bool, what: &str| {
                for (i, v) in values.iter().enumerate() {
                    if v.is_ascii() && exact {
                        assert_eq!(kept(i), want.value(i), "{what} {v:?} ILIKE {pattern:?}");
                    } else {
                        assert!(kept(i) || !want.value(i), "{what} {v:?} ILIKE {pattern:?}");
                    }
                }
            };
            let items = TextMatch::texts(&texts, how, true, None).expect("ASCII");
            let test = items.item_test();
            check(&|i| test.passes(values[i].as_bytes()), "item");
            // Laid out in a batch, as a scan hands them over (with items past 16 bytes,
            // ASCII or not, and the last one's tail shorter than 16), after headers that
            // may hold a needle's letters in either case: a find running from a header
            // into an item, or from an item into the next, must not count.
            let long = [
                "xxxxxxxxxxxxxxxxxxxABC",
                "XYZXYZXYZXYZXYZXYZ\u{212A}",
                "zzzzzzzzzzzzzzzzzzzzzB",
            ];
            let all: Vec<&str> = values.iter().chain(&long).copied().collect();
            let all_strings = arrow::array::StringArray::from(all.clone());
            let all_want = arrow::compute::ilike(&all_strings, &scalar).expect("ilike");
            for junk in [&b"\xa5"[..], b"AB", b"c", b"Z"] {
                let (mut batch, mut at) = (Vec::new(), Vec::new());
                for v in &all {
                    batch.extend_from_slice(junk);
                    at.push(batch.len());
                    batch.extend_from_slice(v.as_bytes());
                }
                let mut cursor = Finds::default();
                for (i, (&a, v)) in at.iter().zip(&all).enumerate() {
                    let got = test.passes_at(&mut cursor, &batch[a..], v.len());
                    assert_eq!(
                        got,
                        test.passes(v.as_bytes()),
                        "{v:?} ILIKE {pattern:?} after {junk:?}"
                    );
                    assert!(
                        got || !all_want.value(i),
                        "{v:?} ILIKE {pattern:?} after {junk:?}"
                    );
                    if v.is_ascii() && exact {
                        assert_eq!(
                            got,
                            all_want.value(i),
                            "{v:?} ILIKE {pattern:?} after {junk:?}"
                        );
                    }
                }
            }
            for big in [false, true] {
                let data = text_records(values.iter().copied(), 6, big);
                let m = TextMatch::texts(&texts, how, true, Some((6, big))).expect("ASCII");
                let kept = m.keep(&data, values.len(), 24, 0);
                check(&|i| kept.value(i), "record");
            }
        }
        assert_eq!(
            TextMatch::texts(&["é".into()], Matching::Substring, true, None),
            None
        );
        assert_eq!(
            TextMatch::texts(&["a".into()], Matching::Equal, true, None),
            None
        );
    }

    /// `ILIKE '%..%'` over records end to end (searched piece by piece in a lower-cased
    /// copy) keeps exactly what the record-by-record test keeps (records laid out with a
    /// gap between them): 9,000 random `U5` records of letters in either case, `K`, the
    /// Kelvin sign, `é`, U+4100 and U+0141 (whose low byte is `A`), NUL and U+0000_5A00,
    /// in both byte orders, over several pieces.
    #[test]
    fn any_case_substrings_over_pieces_keep_as_record_by_record() {
        let alphabet = [
            0x61, 0x62, 0x41, 0x42, 0x4b, 0x6b, 0x212a, 0xe9, 0x4100, 0x141, 0, 0x5a00,
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut draw = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let values: Vec<Vec<u32>> = (0..9000)
            .map(|_| {
                (0..draw(6))
                    .map(|_| alphabet[draw(alphabet.len())])
                    .collect()
            })
            .collect();
        let refs: Vec<&[u32]> = values.iter().map(Vec::as_slice).collect();
        for big in [false, true] {
            let data = records(&refs, 5, big);
            let gapped: Vec<u8> = data
                .chunks(20)
                .flat_map(|r| [r, &[7; 4]].concat())
                .collect();
            for texts in [&["ab"][..], &["kA", "b"], &["a"], &["bbb"]] {
                let texts: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
                let m = TextMatch::texts(&texts, Matching::Substring, true, Some((5, big)))
                    .expect("ASCII");
                let whole = m.keep(&data, values.len(), 20, 0);
                let apart = m.keep(&gapped, values.len(), 24, 0);
                assert_eq!(whole, apart, "{texts:?} big={big}");
                assert!(whole.count_set_bits() > 0, "{texts:?}");
            }
        }
    }

    /// Dictionary codes: one code, and several (the bit set), against null (−1) and
    /// codes past the largest.
    #[test]
    fn codes_keep_exactly_theirs() {
        let recs: [i32; 8] = [-1, 3, 70, 4, 200, 0, 3, i32::MAX];
        let data: Vec<u8> = recs.iter().flat_map(|c| c.to_le_bytes()).collect();
        for codes in [&[3][..], &[3, 70, 3], &[0, 64, 70], &[]] {
            let m = TextMatch::codes(codes);
            let kept = m.keep(&data, recs.len(), 4, 0);
            for (i, c) in recs.iter().enumerate() {
                assert_eq!(kept.value(i), codes.contains(c), "code {c}, {codes:?}");
            }
        }
    }

    /// `S<n>` records: a value matches exactly the records that read as it.
    #[test]
    fn bytes_match_records_read_without_trailing_nuls() {
        let recs: [&[u8]; 5] = [b"ab\0\0", b"ab\0c", b"\0\0\0\0", b"abcd", b"a\0\0\0"];
        let data: Vec<u8> = recs.concat();
        let read = |r: &[u8]| r[..r.iter().rposition(|&c| c != 0).map_or(0, |p| p + 1)].to_vec();
        let values: [&[u8]; 7] = [b"ab", b"ab\0c", b"", b"abcd", b"a", b"ab\0", b"abcde"];
        for v in values {
            let m = TextMatch::bytes(&[v.to_vec()], 4);
            let kept = m.keep(&data, recs.len(), 4, 0);
            for (i, r) in recs.iter().enumerate() {
                assert_eq!(kept.value(i), read(r) == v, "record {r:?}, value {v:?}");
            }
        }
    }

    /// Many texts (the table probing past collisions): records drawn from twice as many
    /// strings, kept exactly when their string is one of the texts.
    #[test]
    fn many_texts_keep_exactly_theirs() {
        let mut next = draws(0x2545_F491_4F6C_DD1Du64);
        let pool: Vec<String> = (0..600)
            .map(|_| {
                let len = 1 + next(6) as usize;
                (0..len).map(|_| (b'a' + next(3) as u8) as char).collect()
            })
            .collect();
        let texts: Vec<String> = pool[..300].to_vec();
        let want: std::collections::HashSet<&str> = texts.iter().map(String::as_str).collect();
        let picks: Vec<&String> = (0..5000).map(|_| &pool[next(600) as usize]).collect();
        let data = text_records(picks.iter().map(|s| s.as_str()), 6, false);
        let m = TextMatch::new(&texts, 6, false).expect("plain");
        let kept = m.keep(&data, picks.len(), 24, 0);
        for (i, s) in picks.iter().enumerate() {
            assert_eq!(kept.value(i), want.contains(s.as_str()), "record {i} {s:?}");
        }
    }

    #[test]
    fn replacement_character_is_declined_and_strides_are_honoured() {
        assert_eq!(TextMatch::new(&["a\u{FFFD}".into()], 4, false), None);
        // Records of 12 bytes inside 20-byte rows, at offset 4.
        let mut data = vec![0xEEu8; 3 * 20];
        for (i, s) in ["ab", "b", "ab"].iter().enumerate() {
            let rec = records(
                &[&s.chars().map(|c| c as u32).collect::<Vec<_>>()],
                3,
                false,
            );
            data[i * 20 + 4..i * 20 + 16].copy_from_slice(&rec);
        }
        let m = TextMatch::new(&["ab".into()], 3, false).expect("plain");
        let kept = m.keep(&data, 3, 20, 4);
        assert_eq!(kept.iter().collect::<Vec<_>>(), [true, false, true]);
        let none = TextMatch::new(&["abcd".into(), "x\0".into()], 3, false).expect("plain");
        assert!(none.matches_nothing());
        assert_eq!(none.keep(&data, 3, 20, 4).count_set_bits(), 0);
    }

    /// Variable-length items: `item_test` passes exactly the items equal to (starting
    /// with, holding) a value, for one value and for many (the hashed path), with items
    /// shorter, longer and of the same head as the values (`nil` ones are
    /// never tested: the scan drops them).
    #[test]
    fn item_test_equals_comparing_items() {
        let items: [Option<&str>; 9] = [
            Some(""),
            Some("a"),
            Some("ab"),
            None,
            Some("abcdefghij"),
            Some("abcdefghi"),
            Some("日本"),
            Some("ab\0"),
            Some("b"),
        ];
        let sets: [&[&str]; 5] = [
            &[""],
            &["ab"],
            &["abcdefghij", "日本", "zz"],
            &["a", "b", "", "abcdefghi", "x", "y", "z", "w", "v"],
            &["nothing"],
        ];
        for set in sets {
            for how in [Matching::Equal, Matching::Prefix, Matching::Substring] {
                let m = TextMatch::items(set.iter().map(|s| s.as_bytes().to_vec()).collect(), how);
                assert!(m.on_items());
                let test = m.item_test();
                let got: Vec<bool> = items
                    .iter()
                    .map(|it| it.is_some_and(|s| test.passes(s.as_bytes())))
                    .collect();
                let want: Vec<bool> = items
                    .iter()
                    .map(|it| {
                        it.is_some_and(|s| {
                            set.iter().any(|t| match how {
                                Matching::Equal => s == *t,
                                Matching::Prefix => s.starts_with(t),
                                Matching::Substring => s.contains(t),
                            })
                        })
                    })
                    .collect();
                assert_eq!(got, want, "{set:?} {how:?}");
                // The same items laid out in batches, as a scan hands them over: each
                // after a header that may hold a needle's bytes (a find running from
                // it into the item, or from an item into the next, must not count),
                // one cursor for every batch and for both of its tests.
                for junk in [&b"\xa2"[..], b"ab", b"b", b"j"] {
                    let mut cursor = Finds::default();
                    let mut both: Vec<Finds> = Vec::new();
                    let pair = [m.item_test(), m.item_test()];
                    for _ in 0..2 {
                        let mut batch = Vec::new();
                        let mut at = Vec::new();
                        for it in items.iter().flatten() {
                            batch.extend_from_slice(junk);
                            at.push(batch.len());
                            batch.extend_from_slice(it.as_bytes());
                        }
                        let got: Vec<bool> = at
                            .iter()
                            .zip(items.iter().flatten())
                            .map(|(&a, it)| {
                                let one = test.passes_at(&mut cursor, &batch[a..], it.len());
                                let two =
                                    pair.as_slice().passes_at(&mut both, &batch[a..], it.len());
                                assert_eq!(one, two, "{set:?} {how:?}");
                                one
                            })
                            .collect();
                        let want: Vec<bool> = want
                            .iter()
                            .zip(&items)
                            .filter(|(_, it)| it.is_some())
                            .map(|(w, _)| *w)
                            .collect();
                        assert_eq!(got, want, "{set:?} {how:?} in a batch after {junk:?}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    /// Per-record cost of `keep` (`cargo test --release --lib text_match_timing -- --ignored
    /// --nocapture`): `<U12` records of 2,000 names, 1, 3, 8 and 20 texts.
    #[test]
    #[ignore]
    fn text_match_timing() {
        let chars = 12;
        let names: Vec<String> = (0..2000)
            .map(|i| format!("nm{:x}{}", i * 7919 % 65536, &"abcdefgh"[..i % 8]))
            .collect();
        let n = 1_000_000;
        let mut x = 88172645463325252u64;
        let mut data = Vec::with_capacity(n * chars * 4);
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s = &names[(x % 2000) as usize];
            let mut units: Vec<u8> = s.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
            units.resize(chars * 4, 0);
            data.extend_from_slice(&units);
        }
        for k in [1usize, 3, 8, 20] {
            let texts: Vec<String> = names[..k].to_vec();
            let m = TextMatch::new(&texts, chars, false).expect("plain");
            let mut best = f64::MAX;
            for _ in 0..9 {
                let t = std::time::Instant::now();
                std::hint::black_box(m.keep(&data, n, chars * 4, 0));
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!("{k} texts: {:.2} ns/record", best * 1e9 / n as f64);
        }
    }
}
