//! L4: Arrow. Maps dtypes to Arrow types and decoded bytes to arrays, and turns a dataset
//! plus a selection into record batches. No DataFusion.

pub mod convert;
pub mod ipc_items;
pub mod msgpack_arrow;
pub mod pool;
pub mod reader;
pub mod schema;
pub mod text_match;
pub mod utf32;
pub mod varlen;
pub mod zones;
