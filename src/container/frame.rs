//! Blosc2 frames: contiguous (`.b2frame`, `.b2nd`, `.b2f`, or a window of a bigger file)
//! and sparse (a directory with `chunks.b2frame` and `%08X.chunk` files).
//!
//! Implements `spec/frame.md` §1 (header), §2 (metalayers), §3 (offsets index and special
//! offsets), §4 (trailer and vlmetalayers), §5 (sparse frames), §6 (frames at an offset).
//!
//! ```text
//! [header: msgpack, header_len][chunks … cbytes][index chunk][trailer: msgpack, trailer_len]
//! 0                            ^header_len      ^header_len+cbytes   ^frame_len-trailer_len
//! ```
//! Opening reads a prefix (64 KiB, so a small frame is one request) and, for larger frames,
//! the tail holding the trailer and the index; chunk reads then fetch exactly their bytes.

use super::RawChunk;
use crate::chunk::{Chunk, DecodeLimits, SpecialValue, compcode_name, filter_name};
use crate::error::{Error, Result};
use crate::io::Location;
use crate::msgpack::{self, MsgValue};
use bytes::Bytes;
use std::ops::Range;
use std::sync::Arc;

/// Bytes read up front when opening a frame.
pub const OPEN_HINT: u64 = 64 * 1024;
const FIXED_HEADER: usize = 87;
const MIN_TRAILER: u64 = 25;

/// The fixed part of a frame header (`spec/frame.md` §1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameHeader {
    /// Total header size including metalayers.
    pub header_len: u64,
    /// Total frame size.
    pub frame_len: u64,
    /// Version (bits 0–3), offset size, variable chunks, VL-blocks.
    pub general_flags: u8,
    /// 0 contiguous, 1 sparse.
    pub frame_type: u8,
    /// Low nibble default codec compcode, high nibble clevel.
    pub codec_flags: u8,
    /// Bits 0–1: splitmode − 1.
    pub other_flags: u8,
    /// Sum of uncompressed chunk sizes.
    pub nbytes: u64,
    /// Sum of stored chunk sizes.
    pub cbytes: u64,
    /// True element size.
    pub typesize: u32,
    /// Default block size (0 = automatic).
    pub blocksize: u32,
    /// Uncompressed size of every chunk but the last (0 = variable, or no chunk yet: a
    /// frame with no chunk that stores −1 here reads as 0).
    pub chunksize: u32,
    /// True when the trailer holds vlmetalayers.
    pub has_vlmetalayers: bool,
    /// Default filter pipeline.
    pub filters: [u8; 6],
    /// Default codec compcode.
    pub udcodec: u8,
    /// Default codec parameter, the byte as stored (ZFP_ACC reads it as an `i8` exponent;
    /// ZFP_PREC, ZFP_RATE and NDLZ as precision, rate and cell side).
    pub codec_meta: u8,
    /// Default filter parameters.
    pub filters_meta: [u8; 6],
    /// Bit 0: codec dictionaries in use.
    pub other_flags2: u8,
}

impl FrameHeader {
    /// Frame format version (`general_flags` bits 0–3).
    pub fn version(&self) -> u8 {
        self.general_flags & 0x0f
    }
    /// Default codec name.
    pub fn codec_name(&self) -> String {
        compcode_name(if self.codec_flags & 0x0f == 6 {
            self.udcodec
        } else {
            self.codec_flags & 0x0f
        })
    }
    /// Default compression level.
    pub fn clevel(&self) -> u8 {
        self.codec_flags >> 4
    }
    /// Names of the non-empty default filters, slot order.
    pub fn filter_names(&self) -> Vec<String> {
        self.filters
            .iter()
            .zip(self.filters_meta)
            .filter(|(f, _)| **f != 0)
            .map(|(f, m)| {
                if m == 0 {
                    filter_name(*f)
                } else {
                    format!("{}({m})", filter_name(*f))
                }
            })
            .collect()
    }
}

fn be(b: &[u8], at: usize, n: usize) -> u64 {
    b[at..at + n].iter().fold(0u64, |a, &x| (a << 8) | x as u64)
}

/// Parses the fixed 87 bytes of a frame header.
///
/// # Errors
/// `Corrupt` for a wrong magic or marker, `Unsupported` for the pre-2.0 layout or unknown
/// versions.
pub fn parse_header(b: &[u8], path: &str) -> Result<FrameHeader> {
    let bad = |what: String| Error::corrupt(path, "frame header", what);
    if b.len() < FIXED_HEADER {
        return Err(bad(format!(
            "{} bytes, a frame header needs at least 87",
            b.len()
        )));
    }
    if &b[1..10] != b"\xA8b2frame\0" {
        return Err(bad("no \"b2frame\" magic at offset 2".into()));
    }
    match b[0] {
        0x9E => {}
        0x9B | 0x9C => {
            return Err(Error::unsupported(
                path,
                format!(
                    "pre-2.0 frame layout ({}-item header, the obsolete draft of the seed \"Blosc2 Frame Format\"): \
                     it has no block size and a different flag layout; re-save the data with C-Blosc2 >= 2.0",
                    b[0] & 0x0f
                ),
            ));
        }
        m => {
            return Err(bad(format!(
                "header starts with {m:#04x}, expected 0x9e (14-item array)"
            )));
        }
    }
    let markers = [
        (0x0A, 0xD2, "header_len"),
        (0x0F, 0xCF, "frame_len"),
        (0x18, 0xA4, "flags"),
        (0x1D, 0xD3, "nbytes"),
        (0x26, 0xD3, "cbytes"),
        (0x2F, 0xD2, "typesize"),
        (0x34, 0xD2, "blocksize"),
        (0x39, 0xD2, "chunksize"),
        (0x45, 0xD8, "filters"),
    ];
    for (at, m, field) in markers {
        if b[at] != m {
            return Err(bad(format!(
                "field {field}: msgpack marker {:#04x} at {at:#x}, expected {m:#04x}",
                b[at]
            )));
        }
    }
    let mut h = FrameHeader {
        header_len: be(b, 0x0B, 4),
        frame_len: be(b, 0x10, 8),
        general_flags: b[0x19],
        frame_type: b[0x1A],
        codec_flags: b[0x1B],
        other_flags: b[0x1C],
        nbytes: be(b, 0x1E, 8),
        cbytes: be(b, 0x27, 8),
        typesize: be(b, 0x30, 4) as u32,
        blocksize: be(b, 0x35, 4) as u32,
        chunksize: be(b, 0x3A, 4) as u32,
        has_vlmetalayers: b[0x44] == 0xC3,
        filters: b[0x47..0x4D].try_into().expect("6 bytes"),
        udcodec: b[0x4D],
        codec_meta: b[0x4E],
        filters_meta: b[0x4F..0x55].try_into().expect("6 bytes"),
        other_flags2: b[0x55],
    };
    if !(1..=3).contains(&h.version()) {
        return Err(Error::unsupported(
            path,
            format!("frame format version {} (known: 1..=3)", h.version()),
        ));
    }
    if (h.general_flags >> 4) & 3 != 1 {
        return Err(Error::unsupported(
            path,
            format!(
                "frame offsets of size code {} (only 64-bit offsets exist)",
                (h.general_flags >> 4) & 3
            ),
        ));
    }
    if h.frame_type > 1 {
        return Err(bad(format!(
            "frame_type {} (0 contiguous, 1 sparse)",
            h.frame_type
        )));
    }
    if (h.nbytes as i64) < 0 || (h.cbytes as i64) < 0 {
        return Err(bad(format!(
            "negative nbytes {} or cbytes {}",
            h.nbytes as i64, h.cbytes as i64
        )));
    }
    if h.header_len < FIXED_HEADER as u64 || h.header_len > h.frame_len {
        return Err(bad(format!(
            "header_len {} outside 87..=frame_len {}",
            h.header_len, h.frame_len
        )));
    }
    // C-Blosc2 stores chunksize -1 until the first chunk fixes it (python-blosc2 writes
    // that for an empty SChunk, and for a CTable's variable-length column with no row yet).
    if h.nbytes == 0 && h.chunksize as i32 == -1 {
        h.chunksize = 0;
    }
    if h.typesize == 0
        || (h.typesize as i32) < 0
        || (h.chunksize as i32) < 0
        || (h.blocksize as i32) < 0
    {
        return Err(bad(format!(
            "typesize {} / chunksize {} / blocksize {} out of range",
            h.typesize as i32, h.chunksize as i32, h.blocksize as i32
        )));
    }
    Ok(h)
}

/// A named fixed metalayer (raw content bytes; by convention msgpack).
#[derive(Debug, Clone)]
pub struct Metalayer {
    /// Name (e.g. `b2nd`).
    pub name: String,
    /// Content bytes.
    pub content: Bytes,
}

/// Parses a metalayer section `[idx, {name: offset}, [bin…]]`; offsets count from `base`
/// (frame start for metalayers, trailer start for vlmetalayers) within `b`.
fn parse_layers(
    b: &[u8],
    section_at: usize,
    path: &str,
    structure: &'static str,
) -> Result<Vec<(String, Bytes)>> {
    let bad = |what: String| Error::corrupt(path, structure, what);
    let (v, _) = msgpack::parse(&b[section_at..]).map_err(bad)?;
    let items = v
        .as_array()
        .filter(|a| a.len() == 3)
        .ok_or_else(|| bad("expected a 3-item array".into()))?;
    let MsgValue::Map(names) = &items[1] else {
        return Err(bad("second item is not a map of names".into()));
    };
    let mut out = Vec::with_capacity(names.len());
    for (k, off) in names {
        let name = k
            .as_str()
            .ok_or_else(|| bad("a layer name is not a string".into()))?
            .to_string();
        let off = off
            .as_i64()
            .filter(|&o| o >= 0 && (o as usize) < b.len())
            .ok_or_else(|| {
                bad(format!(
                    "layer {name:?}: offset {off:?} outside the {} bytes of the section",
                    b.len()
                ))
            })? as usize;
        match msgpack::parse(&b[off..])
            .map_err(|e| bad(format!("layer {name:?}: {e}")))?
            .0
        {
            MsgValue::Bin(c) => out.push((name, Bytes::from(c))),
            _ => {
                return Err(bad(format!(
                    "layer {name:?}: content at {off} is not a bin item"
                )));
            }
        }
    }
    Ok(out)
}

/// Where a frame's chunks are.
#[derive(Debug, Clone)]
enum ChunkStore {
    /// Contiguous: chunk bytes at `base + header_len + offset` of `file`.
    Contiguous {
        file: Location,
        base: u64,
        cached: Option<Bytes>,
    },
    /// Sparse: `%08X.chunk` files in `dir`.
    Sparse { dir: Location },
}

/// An opened frame: header, metalayers, vlmetalayers and the decoded offsets index.
#[derive(Debug, Clone)]
pub struct Frame {
    header: FrameHeader,
    metalayers: Vec<Metalayer>,
    vlmeta: Vec<(String, Vec<u8>)>,
    /// Shared by clones (an opened frame is cloned per scan when cached).
    offsets: Arc<[i64]>,
    /// Stored (non-negative) offsets, sorted and unique: a chunk's extent ends at the next one.
    sorted_stored: Arc<[u64]>,
    store: ChunkStore,
    display: String,
    limits: DecodeLimits,
}

impl Frame {
    /// Opens a contiguous frame file, or a sparse frame directory (detected by a missing
    /// file with a `chunks.b2frame` inside, or named by that file).
    ///
    /// # Errors
    /// `NotFound`, `Corrupt`, `Unsupported` or IO errors, naming the path and structure.
    pub async fn open(loc: &Location) -> Result<Frame> {
        match loc.get_prefix(OPEN_HINT).await? {
            Some((prefix, size)) => {
                let mut f = Self::open_window(loc, 0, size, prefix).await?;
                if f.header.frame_type == 1 {
                    // A sparse frame's index named by its own path (as a listing names
                    // files): its chunks are the files beside it.
                    let dir = loc
                        .parent()
                        .filter(|_| loc.path().filename() == Some("chunks.b2frame"));
                    let Some(dir) = dir else {
                        return Err(Error::corrupt(
                            loc.display(),
                            "frame header",
                            "frame_type 1 (sparse) in a file not named chunks.b2frame: its \
                             chunks are not in it",
                        ));
                    };
                    f.store = ChunkStore::Sparse { dir: dir.clone() };
                    f.display = dir.display().to_string();
                }
                Ok(f)
            }
            None => {
                let index = loc.child("chunks.b2frame");
                match index.get_prefix(OPEN_HINT).await? {
                    Some((prefix, size)) => {
                        let mut f = Self::open_window(&index, 0, size, prefix).await?;
                        if f.header.frame_type != 1 {
                            return Err(Error::corrupt(
                                index.display(),
                                "frame header",
                                "frame_type 0 in a sparse frame directory",
                            ));
                        }
                        f.store = ChunkStore::Sparse { dir: loc.clone() };
                        f.display = loc.display().to_string();
                        Ok(f)
                    }
                    None => Err(Error::NotFound {
                        path: loc.display().to_string(),
                        what: "no frame file or chunks.b2frame".into(),
                    }),
                }
            }
        }
    }

    /// Opens a frame stored at byte `base` of `file` (a `.b2z` member); `avail` = bytes of
    /// the file from `base` on.
    ///
    /// # Errors
    /// As [`Frame::open`].
    pub async fn open_at(file: &Location, base: u64, avail: u64) -> Result<Frame> {
        let prefix = file.get_range(base..base + OPEN_HINT.min(avail)).await?;
        let mut f = Self::open_window(file, base, avail + base, prefix).await?;
        f.display = format!("{} (frame at byte {base})", file.display());
        Ok(f)
    }

    /// `prefix` = the first bytes of the frame (at `base` of `file`, whose size is `size`).
    async fn open_window(file: &Location, base: u64, size: u64, prefix: Bytes) -> Result<Frame> {
        let path = file.display();
        if size == base {
            return Err(Error::corrupt(path, "frame", "empty file"));
        }
        let header = parse_header(&prefix, path)?;
        let avail = size - base;
        if header.frame_len > avail {
            return Err(Error::corrupt(
                path,
                "frame header",
                format!(
                    "frame_len {} but only {avail} bytes in the file",
                    header.frame_len
                ),
            ));
        }
        if header.frame_len < header.header_len + MIN_TRAILER {
            return Err(Error::corrupt(
                path,
                "frame header",
                format!(
                    "frame_len {} leaves no room for a trailer",
                    header.frame_len
                ),
            ));
        }
        let flen = header.frame_len;
        // Whole frame in the prefix, or the header now and the tail (trailer + index) next.
        let whole = if prefix.len() as u64 >= flen {
            Some(prefix.slice(..flen as usize))
        } else {
            None
        };
        let head_bytes = match &whole {
            Some(w) => w.slice(..header.header_len as usize),
            None if prefix.len() as u64 >= header.header_len => {
                prefix.slice(..header.header_len as usize)
            }
            None => file.get_range(base..base + header.header_len).await?,
        };
        let tail_start = match &whole {
            Some(_) => 0,
            None => flen.saturating_sub(OPEN_HINT).max(header.header_len),
        };
        let tail = match &whole {
            Some(w) => w.clone(),
            None => file.get_range(base + tail_start..base + flen).await?,
        };
        let window = |r: Range<u64>| -> Option<Bytes> {
            (r.start >= tail_start && r.end <= flen)
                .then(|| tail.slice((r.start - tail_start) as usize..(r.end - tail_start) as usize))
        };
        // Metalayers.
        let metalayers = parse_layers(&head_bytes, FIXED_HEADER, path, "metalayers")?
            .into_iter()
            .map(|(name, content)| Metalayer { name, content })
            .collect();
        // Trailer.
        let t = window(flen - 23..flen).expect("tail covers the last 23 bytes");
        if t[0] != 0xCE || t[5] != 0xD8 {
            return Err(Error::corrupt(
                path,
                "trailer",
                "no trailer_len/fingerprint markers at frame_len-23",
            ));
        }
        let trailer_len = be(&t, 1, 4);
        if trailer_len < MIN_TRAILER || trailer_len > flen - header.header_len {
            return Err(Error::corrupt(
                path,
                "trailer",
                format!(
                    "trailer_len {trailer_len} outside 25..={}",
                    flen - header.header_len
                ),
            ));
        }
        let tr_range = flen - trailer_len..flen;
        let trailer = match window(tr_range.clone()) {
            Some(b) => b,
            None => {
                file.get_range(base + tr_range.start..base + tr_range.end)
                    .await?
            }
        };
        if trailer[0] != 0x94 {
            return Err(Error::corrupt(
                path,
                "trailer",
                format!("starts with {:#04x}, expected a 4-item array", trailer[0]),
            ));
        }
        let mut vlmeta = Vec::new();
        let mut at = 1usize;
        // Skip the trailer version (positive fixint).
        if trailer.get(at).is_some_and(|v| *v < 0x80) {
            at += 1;
        }
        for (name, chunk) in parse_layers(&trailer, at, path, "vlmetalayers")? {
            let decoded = Chunk::parse(&chunk)
                .and_then(|c| {
                    c.decode(&DecodeLimits {
                        max_nbytes: 256 << 20,
                    })
                })
                .map_err(|e| {
                    Error::corrupt(path, "vlmetalayers", format!("value of {name:?}: {e}"))
                })?;
            vlmeta.push((name, decoded));
        }
        // Offsets index.
        let sparse = header.frame_type == 1;
        let mut offsets = Vec::new();
        if header.nbytes > 0 {
            let idx_start = header.header_len + if sparse { 0 } else { header.cbytes };
            let idx_end = flen - trailer_len;
            if idx_start > idx_end {
                return Err(Error::corrupt(
                    path,
                    "offsets index",
                    format!("starts at {idx_start}, after the trailer at {idx_end}"),
                ));
            }
            let idx = match window(idx_start..idx_end) {
                Some(b) => b,
                None => file.get_range(base + idx_start..base + idx_end).await?,
            };
            let chunk = Chunk::parse(&idx)
                .map_err(|e| Error::chunk(e, path, u64::MAX, base + idx_start))
                .map_err(|e| Error::corrupt(path, "offsets index", e.to_string()))?;
            let n = chunk.nbytes();
            // Bound the index before decoding it: its size follows from the header.
            let expect = if header.chunksize > 0 {
                Some(header.nbytes.div_ceil(header.chunksize as u64))
            } else {
                None
            };
            let ok = n % 8 == 0
                && match expect {
                    Some(e) => n as u64 == e * 8,
                    None => (n as u64 / 8) <= header.cbytes / 16 + 1,
                };
            if !ok {
                return Err(Error::corrupt(
                    path,
                    "offsets index",
                    format!(
                        "holds {n} bytes; nbytes {} / chunksize {} imply {} entries",
                        header.nbytes,
                        header.chunksize,
                        expect.map_or("?".into(), |e| e.to_string())
                    ),
                ));
            }
            let raw = chunk
                .decode(&DecodeLimits::default())
                .map_err(|e| Error::chunk(e, path, u64::MAX, base + idx_start))?;
            offsets = raw
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            if header.chunksize == 0 && offsets.iter().any(|&o| o < 0) {
                return Err(Error::corrupt(
                    path,
                    "offsets index",
                    "special offset in a frame with variable-size chunks",
                ));
            }
            if !sparse {
                for (i, &o) in offsets.iter().enumerate() {
                    if o >= 0 && o as u64 >= header.cbytes {
                        return Err(Error::corrupt(
                            path,
                            "offsets index",
                            format!(
                                "chunk {i} at offset {o}, past the {} bytes of chunks",
                                header.cbytes
                            ),
                        ));
                    }
                }
            }
        }
        // A copy: `whole` may be a slice of a bigger pooled read buffer, which a frame
        // kept open (or cached) would otherwise hold on to.
        let cached = whole.as_deref().map(Bytes::copy_from_slice);
        let mut sorted_stored: Vec<u64> = offsets
            .iter()
            .filter(|&&o| o >= 0)
            .map(|&o| o as u64)
            .collect();
        sorted_stored.sort_unstable();
        sorted_stored.dedup();
        Ok(Frame {
            header,
            metalayers,
            vlmeta,
            offsets: offsets.into(),
            sorted_stored: sorted_stored.into(),
            store: ChunkStore::Contiguous {
                file: file.clone(),
                base,
                cached,
            },
            display: path.to_string(),
            limits: DecodeLimits::default(),
        })
    }

    /// The fixed header fields.
    pub fn header(&self) -> &FrameHeader {
        &self.header
    }
    /// How errors name this frame.
    pub fn display(&self) -> &str {
        &self.display
    }
    /// Renames the frame in error messages.
    pub fn set_display(&mut self, display: String) {
        self.display = display;
    }
    /// True for a sparse (directory) frame.
    pub fn is_sparse(&self) -> bool {
        matches!(self.store, ChunkStore::Sparse { .. })
    }
    /// Fixed metalayers in stored order.
    pub fn metalayers(&self) -> &[Metalayer] {
        &self.metalayers
    }
    /// A metalayer by name.
    pub fn metalayer(&self, name: &str) -> Option<&Metalayer> {
        self.metalayers.iter().find(|m| m.name == name)
    }
    /// Decompressed vlmetalayer values (msgpack by python-blosc2's convention).
    pub fn vlmeta(&self) -> &[(String, Vec<u8>)] {
        &self.vlmeta
    }
    /// A vlmetalayer value parsed as msgpack.
    pub fn vlmeta_value(&self, name: &str) -> Option<MsgValue> {
        self.vlmeta
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| msgpack::parse(v).ok().map(|p| p.0))
    }
    /// User attributes as JSON (`{name: value}`), msgpack values decoded.
    pub fn attributes_json(&self) -> serde_json::Value {
        let mut o = serde_json::Map::new();
        for (name, v) in &self.vlmeta {
            let val = msgpack::parse(v)
                .map(|p| p.0.to_json())
                .unwrap_or_else(|_| serde_json::json!({"__raw_len__": v.len()}));
            o.insert(name.clone(), val);
        }
        serde_json::Value::Object(o)
    }
    /// An estimate of the heap memory this frame holds: its offsets index, layers and
    /// the bytes kept from opening it (for caches that bound what they keep).
    pub fn heap_bytes(&self) -> usize {
        let kept = match &self.store {
            ChunkStore::Contiguous { cached, .. } => cached.as_ref().map_or(0, Bytes::len),
            ChunkStore::Sparse { .. } => 0,
        };
        let layers: usize = self
            .metalayers
            .iter()
            .map(|m| m.name.len() + m.content.len())
            .sum();
        let vlmeta: usize = self.vlmeta.iter().map(|(k, v)| k.len() + v.len()).sum();
        (self.offsets.len() + self.sorted_stored.len()) * 8
            + layers
            + vlmeta
            + kept
            + self.display.len()
    }

    /// Number of chunks.
    pub fn nchunks(&self) -> u64 {
        self.offsets.len() as u64
    }
    /// The raw offsets index.
    pub fn offsets(&self) -> &[i64] {
        &self.offsets
    }
    /// Number of chunks not stored (offset-encoded specials).
    pub fn nspecial_offsets(&self) -> usize {
        self.offsets.iter().filter(|&&o| o < 0).count()
    }
    /// Uncompressed size of chunk `i`, when the frame has a fixed chunk size.
    pub fn chunk_nbytes(&self, i: u64) -> Option<u64> {
        let cs = self.header.chunksize as u64;
        if cs == 0 || i >= self.nchunks() {
            return None;
        }
        Some(
            if i + 1 == self.nchunks() && !self.header.nbytes.is_multiple_of(cs) {
                self.header.nbytes % cs
            } else {
                cs
            },
        )
    }
    /// The special value an offset encodes, if any.
    pub fn special_of(&self, i: u64) -> Option<SpecialValue> {
        let o = *self.offsets.get(i as usize)?;
        if o >= 0 {
            return None;
        }
        let kind = ((o as u64) >> 56) as u8;
        Some(if kind & 0x01 != 0 {
            SpecialValue::Zeros
        } else if kind & 0x04 != 0 {
            SpecialValue::Uninit
        } else if kind & 0x02 != 0 {
            SpecialValue::NaN
        } else {
            SpecialValue::Value // invalid marker; reported by fetch_chunks
        })
    }

    /// Stored (compressed) size of chunk `i`: 0 for special chunks, the extent for a
    /// contiguous frame, `None` when unknown without a request (sparse frames).
    pub fn stored_len(&self, i: u64) -> Option<u64> {
        if i >= self.nchunks() {
            return None;
        }
        if self.special_of(i).is_some() {
            return Some(0);
        }
        match self.store {
            ChunkStore::Sparse { .. } => None,
            _ => {
                let r = self.contiguous_extent(i, 0);
                Some(r.end.saturating_sub(r.start))
            }
        }
    }

    /// Byte range in the file of stored chunk `i` of a contiguous frame: from its offset to
    /// the next stored offset (or the end of the chunks section).
    fn contiguous_extent(&self, i: u64, base: u64) -> Range<u64> {
        let o = self.offsets[i as usize] as u64;
        let next = match self.sorted_stored.binary_search(&o) {
            Ok(k) => self.sorted_stored.get(k + 1).copied(),
            Err(_) => None,
        }
        .unwrap_or(self.header.cbytes);
        let start = base + self.header.header_len + o;
        start..base + self.header.header_len + next
    }

    /// Fetches chunks `indices` (neighbours coalesced into few requests).
    ///
    /// # Errors
    /// IO errors, missing `.chunk` files, invalid special offsets, chunk headers that do not
    /// fit their extent.
    pub async fn fetch_chunks(&self, indices: &[u64]) -> Result<Vec<RawChunk>> {
        let mut out: Vec<Option<RawChunk>> = vec![None; indices.len()];
        let mut wanted = Vec::new();
        for (k, &i) in indices.iter().enumerate() {
            if i >= self.nchunks() {
                return Err(Error::InvalidArgument(format!(
                    "{}: chunk {i} out of 0..{}",
                    self.display,
                    self.nchunks()
                )));
            }
            match self.special_of(i) {
                Some(SpecialValue::Value) | Some(SpecialValue::None) => {
                    return Err(Error::corrupt(
                        &self.display,
                        "offsets index",
                        format!(
                            "chunk {i}: invalid special offset {:#x}",
                            self.offsets[i as usize]
                        ),
                    ));
                }
                Some(kind) => {
                    let nbytes = self
                        .chunk_nbytes(i)
                        .expect("specials only exist with a fixed chunksize")
                        as usize;
                    out[k] = Some(RawChunk::Special {
                        kind,
                        nbytes,
                        typesize: self.header.typesize as usize,
                    });
                }
                None => wanted.push((k, i)),
            }
        }
        match &self.store {
            ChunkStore::Contiguous { file, base, cached } => {
                let ranges: Vec<Range<u64>> = wanted
                    .iter()
                    .map(|&(_, i)| self.contiguous_extent(i, *base))
                    .collect();
                let bytes = match cached {
                    Some(c) => ranges
                        .iter()
                        .map(|r| c.slice((r.start - base) as usize..(r.end - base) as usize))
                        .collect(),
                    None => file.get_ranges(&ranges).await?,
                };
                for (((k, i), b), r) in wanted.iter().zip(bytes).zip(&ranges) {
                    out[*k] = Some(RawChunk::Stored(self.trim_chunk(b, *i, r.start)?));
                }
            }
            ChunkStore::Sparse { dir } => {
                for &(k, i) in &wanted {
                    let name = format!("{:08X}.chunk", self.offsets[i as usize]);
                    let loc = dir.child(&name);
                    let b = loc.get_all().await.map_err(|e| match e {
                        Error::NotFound { path, .. } => Error::NotFound {
                            path,
                            what: format!("chunk file of chunk {i}"),
                        },
                        e => e,
                    })?;
                    out[k] = Some(RawChunk::Stored(self.trim_chunk(b, i, 0)?));
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|c| c.expect("every index was filled"))
            .collect())
    }

    /// Fetches only blocks `blocks` of stored chunk `i` of a contiguous frame on a store
    /// (not one read whole into memory): first its header and block-start table (sized
    /// for `nblocks` blocks, as the array's geometry says), then those blocks' streams.
    /// Returns a compact chunk: the header (with `cbytes` of the compact chunk), the
    /// block-start table, and the fetched blocks' streams, with the entries of the other
    /// blocks pointing at a last stream whose size runs past the chunk, so that decoding
    /// a block that was not fetched is an error, never wrong values. Block 0 is fetched
    /// too when DELTA needs it as reference.
    ///
    /// `Ok(None)` when the chunk cannot be read in parts: a special-value, memcpyed,
    /// VL-block or dictionary chunk, a sparse or in-memory frame, a block index past the
    /// chunk's, or a table the reader would reject (the whole chunk is then fetched, and
    /// parsing it reports what is wrong).
    ///
    /// # Errors
    /// IO errors.
    pub async fn fetch_chunk_blocks(
        &self,
        i: u64,
        blocks: &[usize],
        nblocks: usize,
    ) -> Result<Option<Bytes>> {
        let ChunkStore::Contiguous {
            file,
            base,
            cached: None,
        } = &self.store
        else {
            return Ok(None);
        };
        if i >= self.nchunks() || self.special_of(i).is_some() {
            return Ok(None);
        }
        let extent = self.contiguous_extent(i, *base);
        let table_end = 32 + 4 * nblocks as u64;
        if table_end > extent.end.saturating_sub(extent.start) {
            return Ok(None);
        }
        let prefix = file
            .get_range(extent.start..extent.start + table_end)
            .await?;
        if prefix.len() as u64 != table_end {
            return Ok(None);
        }
        let Ok(h) = crate::chunk::ChunkHeader::parse_prefix(&prefix) else {
            return Ok(None);
        };
        if h.header_len != 32
            || h.nblocks() != nblocks
            || h.is_memcpyed()
            || h.is_vl_blocks()
            || h.has_dict()
            || h.special() != SpecialValue::None
            || h.cbytes as u64 > extent.end - extent.start
        {
            return Ok(None);
        }
        let starts: Vec<usize> = (0..nblocks)
            .map(|j| {
                let at = 32 + 4 * j;
                i32::from_le_bytes(prefix[at..at + 4].try_into().expect("4 bytes")) as usize
            })
            .collect();
        let mut want: Vec<usize> = blocks.to_vec();
        if h.has_delta() {
            want.push(0);
        }
        want.sort_unstable();
        want.dedup();
        // A block's streams run from its start to the next block's (or the chunk's end).
        let mut sorted = starts.clone();
        sorted.sort_unstable();
        let mut spans = Vec::with_capacity(want.len());
        for &j in &want {
            let Some(&s) = starts.get(j) else {
                return Ok(None);
            };
            let e = sorted
                .get(sorted.partition_point(|&x| x <= s))
                .copied()
                .unwrap_or(h.cbytes);
            if s < table_end as usize || e > h.cbytes || s >= e {
                return Ok(None);
            }
            spans.push(s..e);
        }
        let ranges: Vec<Range<u64>> = spans
            .iter()
            .map(|r| extent.start + r.start as u64..extent.start + r.end as u64)
            .collect();
        let parts = file.get_ranges(&ranges).await?;
        let size = table_end as usize + spans.iter().map(|r| r.len()).sum::<usize>() + 4;
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&prefix);
        let mut moved = vec![None; nblocks];
        for (&j, part) in want.iter().zip(&parts) {
            moved[j] = Some(out.len() as u32);
            out.extend_from_slice(part);
        }
        let poison = out.len() as u32;
        out.extend_from_slice(&i32::MAX.to_le_bytes());
        for (j, m) in moved.iter().enumerate() {
            out[32 + 4 * j..36 + 4 * j].copy_from_slice(&m.unwrap_or(poison).to_le_bytes());
        }
        let cbytes = out.len() as u32;
        out[12..16].copy_from_slice(&cbytes.to_le_bytes());
        Ok(Some(Bytes::from(out)))
    }

    /// Checks a fetched extent holds a whole chunk and cuts it to its `cbytes`.
    fn trim_chunk(&self, b: Bytes, i: u64, at: u64) -> Result<Bytes> {
        if b.len() < 16 {
            return Err(Error::chunk(
                crate::chunk::ChunkError::Truncated {
                    what: "chunk header",
                    at: 0,
                    need: 16,
                    have: b.len(),
                },
                &self.display,
                i,
                at,
            ));
        }
        let cbytes = i32::from_le_bytes(b[12..16].try_into().expect("4 bytes"));
        if cbytes < 16 || cbytes as usize > b.len() {
            return Err(Error::chunk(
                crate::chunk::ChunkError::BadHeader {
                    field: "cbytes",
                    value: cbytes.into(),
                    why: "does not fit the chunk's extent in the frame",
                },
                &self.display,
                i,
                at,
            ));
        }
        Ok(b.slice(..cbytes as usize))
    }

    /// Decodes a fetched chunk `i` into a new buffer.
    ///
    /// # Errors
    /// Decoding errors, located.
    pub fn decode(&self, i: u64, raw: &RawChunk) -> Result<Vec<u8>> {
        decode_raw(raw, &self.display, i, &self.limits)
    }
}

/// Decodes a [`RawChunk`] (stored or special) into a new buffer.
///
/// # Errors
/// Decoding errors, located at `path` / chunk `i`.
pub fn decode_raw(raw: &RawChunk, path: &str, i: u64, limits: &DecodeLimits) -> Result<Vec<u8>> {
    match raw {
        RawChunk::Stored(b) => Chunk::parse(b)
            .and_then(|c| c.decode(limits))
            .map_err(|e| Error::chunk(e, path, i, 0)),
        RawChunk::Special {
            kind,
            nbytes,
            typesize,
        } => {
            if *nbytes as u64 > limits.max_nbytes {
                return Err(Error::chunk(
                    crate::chunk::ChunkError::LimitExceeded {
                        declared: *nbytes as u64,
                        limit: limits.max_nbytes,
                    },
                    path,
                    i,
                    0,
                ));
            }
            let mut v = vec![0u8; *nbytes];
            if *kind == SpecialValue::NaN {
                crate::chunk::fill_nan(*typesize, &mut v)
                    .map_err(|e| Error::chunk(e, path, i, 0))?;
            }
            Ok(v)
        }
    }
}
