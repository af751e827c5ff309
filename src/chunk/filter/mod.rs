//! Filters undone after the codec: byte unshuffle, bit unshuffle, XOR delta, BYTEDELTA,
//! NDCELL and NDMEAN (`ndcell.rs`).
//!
//! `spec/filters.md` §2–4 and §6. Portable kernels live here; `crate::chunk::simd` holds the
//! vectorized twins and picks one at run time.

pub mod bitshuffle;
pub mod bytedelta;
pub mod delta;
pub mod ndcell;
pub mod shuffle;
