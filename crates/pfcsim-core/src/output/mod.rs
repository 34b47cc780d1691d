//! Results output: the per-flow and per-port records and the FCT summary as Parquet files, and
//! the summary itself (flow completion time and slowdown statistics per flow-size bucket).
//!
//! The columns of each file are those of its record's definition (`metrics::table`: every
//! field a column of the same name and matching Arrow type, an `Option` field a nullable one,
//! then derived columns such as the flows' `fct_us`). Times stay in picoseconds as in the
//! records. Files are Snappy-compressed and written in row groups of at most 2^20 (about a
//! million) rows, each built from its own chunk of records, so memory stays bounded for
//! millions of flows.
//!
//! `writers.rs` writes the Parquet files, `summary.rs` computes the summary.

#[cfg(test)]
mod metrics_doc_tests;
pub mod summary;
pub mod writers;
