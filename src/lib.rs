//! placeholder
#![deny(unsafe_code)]
pub mod array;
pub mod arrow_reader;
pub mod chunk;
pub mod container;
pub mod dataset;
pub mod describe;
pub mod error;
pub mod io;
pub mod msgpack;
pub mod provider;

pub use arrow;
pub use error::{Error, ErrorKind, Result};
