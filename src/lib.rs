//! SQL over compressed Blosc2 and bcolz data with Apache DataFusion, and export to Parquet,
//! without converting anything first. The decoder is pure Rust and byte-exact with C-Blosc2.
//!
//! # The formats, outside in
//!
//! ```text
//! file / directory
//!  ├─ bcolz rootdir ─► meta/{sizes,storage} (JSON) + data/__N.blp (one Blosc1 chunk each)
//!  ├─ CTable .b2d directory / .b2z zip (members STORED) ─► _meta.b2f, _valid_rows.b2nd, _cols/*.b2nd
//!  └─ frame (contiguous file, or sparse directory with chunks.b2frame + %08X.chunk)
//!       ├─ header (msgpack): sizes, default codec/filters, metalayers (e.g. "b2nd")
//!       ├─ chunks, located through the offsets index chunk (special values encoded in offsets)
//!       └─ trailer (msgpack): vlmetalayers (user attributes, each a compressed chunk)
//! chunk = header (16 or 32 bytes) + bstarts + [dictionary] + blocks
//!   block = 1 or typesize streams (codec payload, raw copy, zeros or a byte run)
//!   then the filters undone slot 5 → 0: shuffle, bitshuffle, delta (trunc_prec: nothing)
//! b2nd array = frame + "b2nd" metalayer: shape, chunkshape, blockshape, NumPy dtype;
//!   chunks in C order over the chunk grid, blocks in C order inside each (padded) chunk
//! ```
//!
//! # Layers (each uses only those above it in this list)
//!
//! - [`chunk`] — L1: one chunk, bytes in, bytes out; codecs, filters, SIMD kernels; no IO.
//! - [`io`], [`container`], [`msgpack`] — L2: where chunks live, read through `object_store`.
//! - [`mod@array`], [`dataset`], [`describe`] — L3: dtypes, b2nd geometry, N-d arrays, tables.
//! - `arrow_reader` — L4 (feature `arrow`): dtypes → Arrow types, bytes → record batches.
//! - `provider` — L5 (feature `datafusion`): `Blosc2Table`, `Blosc2Exec`, pushdown,
//!   `STORED AS BLOSC2`, the `SessionContext` extension.
//!
//! # Quick start
//!
//! SQL (with `b2sql` or any session where [`provider::Blosc2SessionExt::enable_blosc2`] was called):
//!
//! ```sql
//! CREATE EXTERNAL TABLE temps STORED AS BLOSC2 LOCATION 'examples/data/temps.b2nd';
//! SELECT dim_1 AS station, avg(value) FROM temps WHERE dim_0 BETWEEN 152 AND 243 GROUP BY 1;
//! ```
//!
//! Rust: see `examples/sql_over_b2nd.rs`; the decoder alone:
//!
//! ```
//! # fn main() -> Result<(), datafusion_blosc2::chunk::ChunkError> {
//! // A memcpyed Blosc2 chunk holding "hello" (header + raw bytes).
//! let mut chunk = vec![5, 1, 0x07, 1, 5, 0, 0, 0, 5, 0, 0, 0, 37, 0, 0, 0];
//! chunk.extend([0u8; 16]);
//! chunk.extend(b"hello");
//! assert_eq!(datafusion_blosc2::chunk::decode_chunk(&chunk)?, b"hello");
//! # Ok(()) }
//! ```
//!
//! # Features
//!
//! `cli` (default: the `b2sql` binary) ⊃ `datafusion` (the provider) ⊃ `arrow` (record
//! batches). `--no-default-features` builds the decoder and containers alone.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Boxes are `&[Range<u64>]`, one range per dimension: a 1-D box is a one-element slice.
#![allow(clippy::single_range_in_vec_init)]

pub mod array;
#[cfg(feature = "arrow")]
pub mod arrow_reader;
pub mod chunk;
pub mod container;
pub mod dataset;
pub mod describe;
pub mod error;
pub mod io;
pub mod msgpack;
#[cfg(feature = "datafusion")]
pub mod provider;

/// The Arrow version this crate builds batches with (the one DataFusion 55 uses).
#[cfg(feature = "arrow")]
pub use arrow;
pub use error::{Error, ErrorKind, Result};
