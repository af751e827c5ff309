//! The crate-wide [`enum@Error`]: a layer error plus where it happened (path, chunk, offset).
//!
//! Lower layers report what they know (`ChunkError` knows the block and the offset inside
//! the chunk); containers add the path and chunk index. [`Error::kind`] sorts failures by
//! who caused them, for tests and the CLI (STYLE.md §3).

use crate::chunk::ChunkError;
use thiserror::Error;

/// Who caused a failure, and so what the caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Reading the bytes failed (storage, network, permissions).
    Io,
    /// A file or directory that must exist does not.
    NotFound,
    /// The bytes contradict the format or the declared geometry.
    Corrupt,
    /// A real feature of the format that is not read (plugin codec, pickled objects…).
    Unsupported,
    /// A size read from the file exceeds the configured limit.
    LimitExceeded,
    /// The caller asked for something impossible.
    InvalidArgument,
    /// The location holds something that is not a Blosc2 / bcolz container at all.
    NotAContainer,
}

/// Any failure of this crate.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage error while reading `path`.
    #[error("{path}: {source}")]
    Io {
        /// What was being read.
        path: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// A required file is missing.
    #[error("{path}: not found{}", if what.is_empty() { String::new() } else { format!(" ({what})") })]
    NotFound {
        /// The missing path.
        path: String,
        /// What it should have held.
        what: String,
    },
    /// A chunk failed to decode.
    #[error("{path}: chunk {chunk} (byte {offset}): {source}")]
    Chunk {
        /// File holding the chunk.
        path: String,
        /// Logical chunk index (or `.blp` number).
        chunk: u64,
        /// Absolute byte offset of the chunk in the file.
        offset: u64,
        /// What the chunk decoder reported.
        #[source]
        source: ChunkError,
    },
    /// A container structure is inconsistent.
    #[error("{path}: {structure}: {what}")]
    Corrupt {
        /// The file or directory.
        path: String,
        /// The structure being parsed (`frame header`, `offsets index`, `meta/sizes`, …).
        structure: &'static str,
        /// What was wrong, with the field and values.
        what: String,
    },
    /// A real feature that is not supported.
    #[error("{path}: unsupported: {what}")]
    Unsupported {
        /// The file or directory.
        path: String,
        /// What is not supported, named.
        what: String,
    },
    /// The caller asked for something impossible.
    #[error("{0}")]
    InvalidArgument(String),
    /// Not a container this crate reads (wrong magic, unknown directory layout).
    #[error("{path}: not a Blosc2 or bcolz container: {what}")]
    NotAContainer {
        /// The location.
        path: String,
        /// What was looked for.
        what: String,
    },
}

impl Error {
    /// Classifies the error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NotAContainer { .. } => ErrorKind::NotAContainer,
            Error::Chunk { source, .. } => match source {
                ChunkError::Unsupported(_) => ErrorKind::Unsupported,
                ChunkError::LimitExceeded { .. } => ErrorKind::LimitExceeded,
                ChunkError::InvalidArgument(_) => ErrorKind::InvalidArgument,
                _ => ErrorKind::Corrupt,
            },
        }
    }

    /// Shorthand for [`Error::Corrupt`].
    pub fn corrupt(
        path: impl Into<String>,
        structure: &'static str,
        what: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            path: path.into(),
            structure,
            what: what.into(),
        }
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(path: impl Into<String>, what: impl Into<String>) -> Self {
        Error::Unsupported {
            path: path.into(),
            what: what.into(),
        }
    }

    /// The same error naming `path` instead (e.g. a zip member, `x.b2z:_cols/a.b2nd`,
    /// rather than the zip file).
    pub fn at_path(self, path: impl Into<String>) -> Self {
        let path = path.into();
        match self {
            Error::Io { source, .. } => Error::Io { path, source },
            Error::NotFound { what, .. } => Error::NotFound { path, what },
            Error::Chunk {
                chunk,
                offset,
                source,
                ..
            } => Error::Chunk {
                path,
                chunk,
                offset,
                source,
            },
            Error::Corrupt {
                structure, what, ..
            } => Error::Corrupt {
                path,
                structure,
                what,
            },
            Error::Unsupported { what, .. } => Error::Unsupported { path, what },
            Error::NotAContainer { what, .. } => Error::NotAContainer { path, what },
            e @ Error::InvalidArgument(_) => e,
        }
    }

    /// Wraps a chunk error with its location.
    pub fn chunk(source: ChunkError, path: impl Into<String>, chunk: u64, offset: u64) -> Self {
        Error::Chunk {
            path: path.into(),
            chunk,
            offset,
            source,
        }
    }
}

/// Result alias of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
