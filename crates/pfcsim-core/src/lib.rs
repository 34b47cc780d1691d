//! pfcsim core: a deterministic packet-level simulator of lossless (PFC, RoCEv2) fabrics.
pub mod metrics;
pub mod units;
