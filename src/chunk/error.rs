//! `ChunkError`: everything that can go wrong while decoding one chunk.
//!
//! Errors keep their numbers as fields; the message is built once, at the top of the crate
//! (`crate::Error`), which adds the path and chunk index (STYLE.md §3).

use thiserror::Error;

/// A chunk could not be decoded. Offsets are relative to the first byte of the chunk.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The buffer ends before a structure that must be there.
    #[error("truncated: {what} needs {need} bytes at offset {at}, only {have} available")]
    Truncated {
        /// The structure being read.
        what: &'static str,
        /// Offset inside the chunk.
        at: usize,
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A header field has a value the format does not allow.
    #[error("invalid header field {field} = {value}: {why}")]
    BadHeader {
        /// Field name as in the spec (`nbytes`, `blocksize`, …).
        field: &'static str,
        /// The value found.
        value: i64,
        /// Why it is wrong.
        why: &'static str,
    },
    /// A block's streams are inconsistent with the header.
    #[error("block {block}: {why} (at offset {at})")]
    BadBlock {
        /// Block index inside the chunk.
        block: usize,
        /// Offset inside the chunk.
        at: usize,
        /// What was wrong.
        why: String,
    },
    /// A codec stream failed to decompress to the expected size.
    #[error("block {block}: {codec} stream at offset {at} is corrupt: {why}")]
    Codec {
        /// Block index inside the chunk.
        block: usize,
        /// Offset of the stream inside the chunk.
        at: usize,
        /// Codec name.
        codec: &'static str,
        /// What the codec reported.
        why: String,
    },
    /// A real feature of the format that this crate does not decode.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The declared size exceeds the configured limit.
    #[error("chunk declares {declared} uncompressed bytes, above the limit of {limit}")]
    LimitExceeded {
        /// The declared `nbytes`.
        declared: u64,
        /// The limit in force.
        limit: u64,
    },
    /// The caller asked for something impossible (wrong output length, block out of range).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Result alias for chunk decoding.
pub type ChunkResult<T> = Result<T, ChunkError>;
