//! `ChunkHeader`: the Blosc1 16-byte and Blosc2 32-byte chunk headers, parsed and checked.
//!
//! Implements `spec/chunk.md` §1–3 and §8–9 (the header-only parts), and the Blosc1
//! flag-to-pipeline mapping of `spec/filters.md` §1.

use super::codec::zfp::ZfpMode;
use super::error::{ChunkError, ChunkResult};

/// Compressor of a chunk's streams, by its *format code* (`flags >> 5`), refined by `udcodec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// BloscLZ (format code 0).
    BloscLz,
    /// LZ4 or LZ4HC: the same raw block format (format code 1).
    Lz4,
    /// Snappy (format code 2, Blosc1 only): not decoded.
    Snappy,
    /// zlib stream (format code 3).
    Zlib,
    /// One Zstandard frame per stream (format code 4).
    Zstd,
    /// ZFP (Blosc2 codecs 33–35, lossy, float32/float64): one stream per block, a field
    /// whose shape only the b2nd array knows (`Chunk::with_block_shape`).
    Zfp(ZfpMode),
    /// NDLZ (Blosc2 codec 32, 2-D blocks of 1-byte items) with cells of this side (the
    /// codec's meta byte, 4 or 8).
    Ndlz(u8),
}

impl Codec {
    /// Name as used by Blosc.
    pub fn name(self) -> &'static str {
        match self {
            Codec::BloscLz => "blosclz",
            Codec::Lz4 => "lz4",
            Codec::Snappy => "snappy",
            Codec::Zlib => "zlib",
            Codec::Zstd => "zstd",
            Codec::Zfp(mode) => mode.name(),
            Codec::Ndlz(_) => "ndlz",
        }
    }
}

/// Name of a Blosc2 codec *compcode* (`spec/codecs.md` §1), for messages and `inspect`.
pub fn compcode_name(code: u8) -> String {
    match code {
        0 => "blosclz".into(),
        1 => "lz4".into(),
        2 => "lz4hc".into(),
        3 => "snappy".into(),
        4 => "zlib".into(),
        5 => "zstd".into(),
        32 => "ndlz (plugin 32)".into(),
        33 => "zfp_acc (plugin 33)".into(),
        34 => "zfp_prec (plugin 34)".into(),
        35 => "zfp_rate (plugin 35)".into(),
        36 => "openhtj2k (plugin 36)".into(),
        37 => "grok (plugin 37)".into(),
        38 => "openzl (plugin 38)".into(),
        39 => "j2k (plugin 39)".into(),
        40 => "htj2k (plugin 40)".into(),
        160..=255 => format!("user-defined codec {code}"),
        _ => format!("unknown codec {code}"),
    }
}

/// Name of a filter id (`spec/filters.md` §1), for messages and `inspect`.
pub fn filter_name(id: u8) -> String {
    match id {
        0 => "nofilter".into(),
        1 => "shuffle".into(),
        2 => "bitshuffle".into(),
        3 => "delta".into(),
        4 => "trunc_prec".into(),
        32 => "ndcell (plugin 32)".into(),
        33 => "ndmean (plugin 33)".into(),
        34 => "bytedelta_buggy (plugin 34)".into(),
        35 => "bytedelta (plugin 35)".into(),
        36 => "int_trunc (plugin 36)".into(),
        160..=255 => format!("user-defined filter {id}"),
        _ => format!("unknown filter {id}"),
    }
}

/// Whole-chunk special values (`blosc2_flags` bits 4–6, `spec/chunk.md` §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecialValue {
    /// Regular chunk.
    None,
    /// All bytes zero.
    Zeros,
    /// All elements NaN (typesize 4 or 8).
    NaN,
    /// One value repeated; the value follows the header.
    Value,
    /// Uninitialized: we produce zeros.
    Uninit,
}

/// Maximum blocksize accepted by C-Blosc2 (`spec/chunk.md` §1).
pub const MAX_BLOCKSIZE: i32 = 536_866_816;

/// A parsed and validated chunk header.
///
/// ```text
///  0        1          2      3          4..8    8..12      12..16   16..32 (Blosc2 only)
/// version versionlz flags typesize nbytes blocksize cbytes filters,udcodec,meta,flags2,flags
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Chunk format version (2 = Blosc1, 3–5 = Blosc2, 6 = VL-blocks).
    pub version: u8,
    /// Codec stream version (informational).
    pub versionlz: u8,
    /// The flags byte at offset 2.
    pub flags: u8,
    /// Element size used for splitting and shuffling.
    pub typesize: u8,
    /// Uncompressed size of the chunk.
    pub nbytes: usize,
    /// Block size (already clamped to `nbytes`); for VL-block chunks, the number of blocks.
    pub blocksize: usize,
    /// Total chunk size including the header.
    pub cbytes: usize,
    /// Filter pipeline, slot 0 applied first by the writer.
    pub filters: [u8; 6],
    /// One parameter byte per filter slot.
    pub filters_meta: [u8; 6],
    /// Codec compcode byte (Blosc2 only; 0 for Blosc1).
    pub udcodec: u8,
    /// The codec's parameter byte (`compcode_meta`, Blosc2 only): ZFP's accuracy,
    /// precision or rate.
    pub codec_meta: u8,
    /// `blosc2_flags2` (bit 0: VL-blocks).
    pub blosc2_flags2: u8,
    /// `blosc2_flags` (dictionary, special values, …).
    pub blosc2_flags: u8,
    /// 16 or 32.
    pub header_len: usize,
}

fn i32_at(buf: &[u8], at: usize) -> i32 {
    // Callers check `buf.len() >= at + 4` (the header length check in `parse`).
    i32::from_le_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]])
}

fn bad(field: &'static str, value: i64, why: &'static str) -> ChunkError {
    ChunkError::BadHeader { field, value, why }
}

impl ChunkHeader {
    /// Parses the header at the start of `buf` and checks it against `buf.len()`.
    ///
    /// # Errors
    /// `Truncated` when `buf` is shorter than the header or than `cbytes`; `BadHeader` for
    /// values the format forbids; `Unsupported` for lazy or instrumented chunks.
    pub fn parse(buf: &[u8]) -> ChunkResult<Self> {
        let h = Self::parse_prefix(buf)?;
        if h.cbytes > buf.len() {
            return Err(ChunkError::Truncated {
                what: "chunk (cbytes)",
                at: 0,
                need: h.cbytes,
                have: buf.len(),
            });
        }
        Ok(h)
    }

    /// Parses the header at the start of `buf`, which may hold only the start of the
    /// chunk (a partial read): as [`ChunkHeader::parse`] without the check that `buf`
    /// holds `cbytes`.
    ///
    /// # Errors
    /// As [`ChunkHeader::parse`], except that a short chunk is not one.
    pub fn parse_prefix(buf: &[u8]) -> ChunkResult<Self> {
        if buf.len() < 16 {
            return Err(ChunkError::Truncated {
                what: "chunk header",
                at: 0,
                need: 16,
                have: buf.len(),
            });
        }
        let version = buf[0];
        let flags = buf[2];
        let extended = flags & 0x05 == 0x05;
        let header_len = if extended { 32 } else { 16 };
        if buf.len() < header_len {
            return Err(ChunkError::Truncated {
                what: "extended chunk header",
                at: 0,
                need: 32,
                have: buf.len(),
            });
        }
        if version == 0 || version > 6 {
            return Err(bad("version", version.into(), "known versions are 1..=6"));
        }
        let nbytes = i32_at(buf, 4);
        let blocksize = i32_at(buf, 8);
        let cbytes = i32_at(buf, 12);
        if nbytes < 0 {
            return Err(bad("nbytes", nbytes.into(), "negative"));
        }
        if cbytes < header_len as i32 {
            return Err(bad("cbytes", cbytes.into(), "smaller than the header"));
        }
        let typesize = buf[3];
        let mut h = ChunkHeader {
            version,
            versionlz: buf[1],
            flags,
            typesize,
            nbytes: nbytes as usize,
            blocksize: 0,
            cbytes: cbytes as usize,
            filters: [0; 6],
            filters_meta: [0; 6],
            udcodec: 0,
            codec_meta: 0,
            blosc2_flags2: 0,
            blosc2_flags: 0,
            header_len,
        };
        if extended {
            h.filters.copy_from_slice(&buf[16..22]);
            h.udcodec = buf[22];
            h.codec_meta = buf[23];
            h.filters_meta.copy_from_slice(&buf[24..30]);
            h.blosc2_flags2 = buf[30];
            h.blosc2_flags = buf[31];
            if version == 3 {
                // Alpha writers left garbage in the last slot (chunk.md §1).
                h.filters[5] = 0;
                h.filters_meta[5] = 0;
            }
            if h.blosc2_flags2 & !1 != 0 {
                return Err(bad(
                    "blosc2_flags2",
                    h.blosc2_flags2.into(),
                    "reserved bits set",
                ));
            }
            if h.blosc2_flags & 0x08 != 0 {
                return Err(ChunkError::Unsupported(
                    "lazy chunk (blosc2_flags bit 3): not self-contained".into(),
                ));
            }
            if h.blosc2_flags & 0x80 != 0 {
                return Err(ChunkError::Unsupported(
                    "instrumented chunk (blosc2_flags bit 7)".into(),
                ));
            }
            if (h.blosc2_flags >> 4) & 7 > 4 {
                return Err(bad(
                    "blosc2_flags",
                    h.blosc2_flags.into(),
                    "special-value kind 5..7 is invalid",
                ));
            }
        } else {
            // Blosc1 pipeline implied by the flags (filters.md §1).
            if flags & 0x01 != 0 {
                h.filters[5] = 1;
            }
            if flags & 0x04 != 0 {
                h.filters[5] = 2;
            }
            if flags & 0x08 != 0 {
                h.filters[4] = 3;
            }
        }
        if h.is_vl_blocks() {
            if blocksize <= 0 {
                return Err(bad(
                    "blocksize",
                    blocksize.into(),
                    "VL-block chunks need at least one block",
                ));
            }
            h.blocksize = blocksize as usize;
        } else if h.special() == SpecialValue::None && !h.is_memcpyed() && nbytes > 0 {
            if blocksize <= 0 || blocksize > MAX_BLOCKSIZE {
                return Err(bad(
                    "blocksize",
                    blocksize.into(),
                    "must be in 1..=536866816",
                ));
            }
            h.blocksize = (blocksize as usize).min(h.nbytes);
        } else {
            h.blocksize = (blocksize.max(0) as usize).min(h.nbytes);
        }
        if typesize == 0 {
            return Err(bad("typesize", 0, "must be at least 1"));
        }
        Ok(h)
    }

    /// True for the 32-byte Blosc2 header.
    pub fn is_extended(&self) -> bool {
        self.header_len == 32
    }

    /// True when the data are stored raw after the header.
    pub fn is_memcpyed(&self) -> bool {
        self.flags & 0x02 != 0 && self.special() == SpecialValue::None
    }

    /// True for chunks with variable-length blocks.
    pub fn is_vl_blocks(&self) -> bool {
        self.blosc2_flags2 & 1 != 0
    }

    /// True when DELTA is in the filter pipeline (every block is then stored as its XOR
    /// with block 0, which decoding any block needs first).
    pub fn has_delta(&self) -> bool {
        self.filters.contains(&3)
    }

    /// The stream count of the BYTEDELTA in filter slot `slot`: its meta byte, 0 meaning
    /// the typesize (C-Blosc2 reads the super-chunk's, which a chunk's header repeats;
    /// python-blosc2 writes the typesize into the meta byte).
    pub fn bytedelta_streams(&self, slot: usize) -> usize {
        match self.filters_meta[slot] {
            0 => self.typesize as usize,
            m => m as usize,
        }
    }

    /// True when a codec dictionary follows the bstarts table.
    pub fn has_dict(&self) -> bool {
        self.blosc2_flags & 0x01 != 0
    }

    /// True when blocks are never split into `typesize` streams by the flag.
    pub fn dont_split(&self) -> bool {
        self.flags & 0x10 != 0
    }

    /// The whole-chunk special value, if any.
    pub fn special(&self) -> SpecialValue {
        match (self.blosc2_flags >> 4) & 7 {
            1 => SpecialValue::Zeros,
            2 => SpecialValue::NaN,
            3 => SpecialValue::Value,
            4 => SpecialValue::Uninit,
            _ => SpecialValue::None,
        }
    }

    /// The stream codec.
    ///
    /// # Errors
    /// `Unsupported` for plugin/user codecs (named) and reserved format codes.
    pub fn codec(&self) -> ChunkResult<Codec> {
        match self.flags >> 5 {
            0 => Ok(Codec::BloscLz),
            1 => Ok(Codec::Lz4),
            2 => Ok(Codec::Snappy),
            3 => Ok(Codec::Zlib),
            4 => Ok(Codec::Zstd),
            6 => match self.udcodec {
                0 => Ok(Codec::BloscLz),
                1 | 2 => Ok(Codec::Lz4),
                4 => Ok(Codec::Zlib),
                5 => Ok(Codec::Zstd),
                32 => Ok(Codec::Ndlz(self.codec_meta)),
                other => match ZfpMode::of(other, self.codec_meta) {
                    Some(mode) => Ok(Codec::Zfp(mode)),
                    None => Err(ChunkError::Unsupported(format!(
                        "codec {} needs a Blosc2 plugin",
                        compcode_name(other)
                    ))),
                },
            },
            other => Err(ChunkError::Unsupported(format!(
                "codec format code {other} (reserved)"
            ))),
        }
    }

    /// Number of blocks (0 for special, memcpyed and empty chunks).
    pub fn nblocks(&self) -> usize {
        if self.nbytes == 0 || self.special() != SpecialValue::None || self.is_memcpyed() {
            0
        } else if self.is_vl_blocks() {
            self.blocksize
        } else {
            self.nbytes.div_ceil(self.blocksize)
        }
    }

    /// Uncompressed byte range `(start, len)` of block `j` in a regular chunk.
    pub fn block_span(&self, j: usize) -> (usize, usize) {
        let start = j * self.blocksize;
        (start, self.blocksize.min(self.nbytes - start))
    }

    /// Whether block `j` is the chunk's short last block (`nbytes` not a multiple of
    /// `blocksize`), which is never split into streams.
    pub fn is_leftover(&self, j: usize) -> bool {
        j + 1 == self.nblocks() && !self.nbytes.is_multiple_of(self.blocksize)
    }

    /// Number of streams block `j` (of `bsize` bytes) is split into (`spec/chunk.md` §5).
    pub fn nstreams(&self, bsize: usize, is_leftover: bool) -> usize {
        let ts = self.typesize as usize;
        if self.dont_split() || is_leftover || self.is_vl_blocks() {
            return 1;
        }
        if self.version <= 2 {
            if ts <= 16 && bsize / ts >= 128 { ts } else { 1 }
        } else {
            ts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spec_blosclz_example() {
        // spec/chunk.md §12.1, header only (cbytes patched to the header + bstarts length).
        let mut b = vec![
            0x05, 0x01, 0x15, 0x01, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 36, 0, 0, 0,
        ];
        b.extend_from_slice(&[0; 16]);
        b.extend_from_slice(&[36, 0, 0, 0]);
        let h = ChunkHeader::parse(&b).unwrap();
        assert_eq!(
            (h.header_len, h.nbytes, h.blocksize, h.cbytes),
            (32, 128, 128, 36)
        );
        assert_eq!(h.codec().unwrap(), Codec::BloscLz);
        assert!(h.dont_split());
        assert_eq!(h.nblocks(), 1);
    }

    #[test]
    fn rejects_cbytes_past_buffer() {
        let b = [2u8, 1, 0x21, 4, 100, 0, 0, 0, 100, 0, 0, 0, 200, 0, 0, 0];
        assert!(matches!(
            ChunkHeader::parse(&b),
            Err(ChunkError::Truncated { .. })
        ));
    }
}
