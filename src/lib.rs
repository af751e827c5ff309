//! placeholder
#![deny(unsafe_code)]
pub mod array;
pub mod chunk;
pub mod container;
pub mod error;
pub mod io;
pub mod msgpack;

pub use error::{Error, ErrorKind, Result};
