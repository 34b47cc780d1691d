//! pfcsim core: a deterministic packet-level simulator of lossless (PFC, RoCEv2) fabrics.
//!
//! The pieces, from the bottom up:
//! * [`units`]: integer time (ps), rates (bit/s) and sizes (bytes), parsed from "2us" etc.;
//! * [`engine`]: the event queue, RNG streams and run fingerprint (no network words);
//! * [`packet`]: packets and their arena;
//! * [`topology`]: leaf-spine, fat-tree and ns-3 file topologies, shortest-path routing;
//! * [`mmu`], [`dcqcn`], [`lb`]: the switch buffer/PFC model, congestion control, and the
//!   load-balancing schemes;
//! * [`sim`]: the fabric simulation that ties them together;
//! * [`cdf`], [`traffic`], [`ns3`]: workloads and traffic generation;
//! * [`spec`]: the validated TOML scenario format; [`run`]: spec in, results out;
//! * [`metrics`], [`output`]: what a run measures and how it is written (Parquet).
pub mod cdf;
pub mod dcqcn;
pub mod engine;
pub mod faults;
pub mod lb;
pub mod metrics;
pub mod mmu;
pub mod ns3;
pub mod output;
pub mod packet;
pub mod run;
pub mod sim;
pub mod spec;
mod tagged;
pub mod topology;
pub mod traffic;
pub mod units;
