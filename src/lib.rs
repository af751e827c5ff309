//! placeholder
#![deny(unsafe_code)]
pub mod chunk;
