//! L3: what the bytes mean: NumPy dtypes, b2nd geometry, N-d arrays and tables built on
//! containers. No Arrow, no DataFusion.

pub mod batch_array;
pub mod chunk_local_index;
pub mod column_spec;
pub mod computed;
pub mod dtype;
pub mod expression;
pub mod full_index;
pub mod geometry;
pub(crate) mod index_sidecars;
pub mod item_type;
pub mod ndarray;
pub mod opsi_index;
pub mod pylit;
pub mod ranked_text_index;
mod recent;
mod recipe;
pub mod summary;
pub mod table;
