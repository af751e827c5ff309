//! L2: where chunks live. Maps a chunk index to bytes (or a special value) and exposes the
//! container's metadata, for frames (contiguous and sparse), bcolz directories and
//! python-blosc2 stores. No Arrow, no DataFusion.

pub mod bcolz;
pub mod embed;
pub mod frame;
pub mod store;

use crate::chunk::SpecialValue;
use bytes::Bytes;

/// A chunk as fetched from a container: its bytes, or a special value the container encodes
/// without storing bytes (frame offsets with bit 63 set, `spec/frame.md` §3.1).
#[derive(Debug, Clone)]
pub enum RawChunk {
    /// A complete Blosc chunk (header included).
    Stored(Bytes),
    /// Not stored: every byte is given by `kind` (zeros, NaN, uninitialized).
    Special {
        /// Zeros, NaN or Uninit.
        kind: SpecialValue,
        /// Uncompressed size.
        nbytes: usize,
        /// Element size (for NaN).
        typesize: usize,
    },
}

impl RawChunk {
    /// Compressed bytes held (0 for specials).
    pub fn stored_len(&self) -> usize {
        match self {
            RawChunk::Stored(b) => b.len(),
            RawChunk::Special { .. } => 0,
        }
    }

    /// For a [`RawChunk::Special`], fills `out` with bytes `at..at + out.len()` of its
    /// data (zeros; NaN of `typesize` bytes; uninitialized as zeros). `None` for a stored
    /// chunk, a range outside the chunk, or one not on whole NaN values.
    pub fn fill_unstored(&self, at: usize, out: &mut [u8]) -> Option<()> {
        let RawChunk::Special {
            kind,
            nbytes,
            typesize,
        } = self
        else {
            return None;
        };
        if at.checked_add(out.len())? > *nbytes {
            return None;
        }
        match kind {
            SpecialValue::NaN => {
                if !at.is_multiple_of((*typesize).max(1)) {
                    return None;
                }
                crate::chunk::fill_nan(*typesize, out).ok()
            }
            _ => {
                out.fill(0);
                Some(())
            }
        }
    }
}

/// An estimate of the heap memory a parsed JSON value holds (its text, plus a few words
/// per node), for the heap estimates of opened containers.
pub(crate) fn json_heap_bytes(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    const NODE: usize = 32;
    NODE + match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(json_heap_bytes).sum(),
        Value::Object(o) => o.iter().map(|(k, v)| k.len() + json_heap_bytes(v)).sum(),
        _ => 0,
    }
}
