//! pfcsim core: a deterministic packet-level simulator of lossless (PFC, RoCEv2) fabrics.
//!
//! The pieces, from the bottom up (a module uses only modules of lower layers; the layers are
//! listed in `layers.rs` and `docs/reference/architecture.md`, and a test checks them):
//! * [`units`]: integer time (ps), rates (bit/s) and sizes (bytes), parsed from "2us" etc.;
//!   [`check`]: the range checks of spec values; [`metrics`]: what a run measures;
//! * [`engine`]: the event queue, RNG streams and run fingerprint (no network words);
//!   [`cc`]: the congestion controls (DCQCN, DCTCP), one file each;
//! * [`packet`]: packets and their arena; [`port`]: a link end's egress queues and PFC state;
//! * [`topology`]: the `[topology]` table; leaf-spine, fat-tree and ns-3 file topologies,
//!   shortest-path routing; [`faults`]: the `[[faults]]` plan resolved against a topology;
//!   [`monitor`]: the `[[monitor]]` entries (time series and event logs) resolved likewise;
//! * [`cdf`], [`traffic`], [`ns3`]: workloads and traffic generation (the flows to simulate);
//! * [`mmu`], [`lb`]: the switch buffer/PFC model and the load-balancing schemes;
//! * [`transport`]: the transports the NICs run (RoCE with go-back-N, TCP), one folder each,
//!   and the `[transport]` table;
//! * [`sim`]: the fabric simulation that ties them together;
//! * [`budget`]: the memory a run may plan for (`run.max_memory`), checked against estimates
//!   of the fabric and the flows before they are built;
//! * [`spec`]: the validated TOML scenario format; [`run`]: spec in, results out;
//! * [`output`]: how a run is written (Parquet) and summarized.
pub mod budget;
pub mod cc;
pub mod cdf;
pub mod check;
pub mod engine;
pub mod faults;
#[cfg(test)]
mod layers;
pub mod lb;
pub mod metrics;
pub mod mmu;
pub mod monitor;
pub mod ns3;
pub mod output;
pub mod packet;
pub mod port;
pub mod run;
pub mod sim;
pub mod spec;
mod tagged;
pub mod topology;
pub mod traffic;
pub mod transport;
pub mod units;
