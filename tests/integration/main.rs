//! The one integration-test binary (STYLE.md §6): modules per area.

// Boxes are `&[Range<u64>]`, one range per dimension.
#![allow(clippy::single_range_in_vec_init)]

mod aggregate;
mod arrow_values;
mod chunk_compat;
mod chunk_fixtures;
mod cli;
mod containers;
mod corrupt;
mod differential;
mod io_bounds;
mod listing;
mod pushdown;
mod sql;
mod stores;
mod util;
