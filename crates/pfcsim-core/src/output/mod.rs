//! Results output: the per-flow and per-port records and the FCT summary as Parquet files, and
//! the summary itself (flow completion time and slowdown statistics per flow-size bucket).
//!
//! Every record field becomes a column of the same name and the matching Arrow type (`u64` ->
//! UInt64, `u32` -> UInt32, `u16` -> UInt16, `u8` -> UInt8, `bool` -> Boolean, `f64` ->
//! Float64, `&str` -> Utf8; an `Option` field becomes a nullable column). Times stay in
//! picoseconds as in the records; the flows file adds one derived column, `fct_us`. Files are
//! Snappy-compressed and written in row groups of at most 2^20 (about a million) rows, each
//! built from its own chunk of records, so memory stays bounded for millions of flows.
//!
//! `writers.rs` writes the Parquet files, `summary.rs` computes the summary.

pub mod summary;
pub mod writers;

/// Picoseconds as microseconds, the unit of the `_us` columns and of the summary.
fn ps_to_us(ps: u64) -> f64 {
    ps as f64 / 1e6
}
