//! The integration tests of pfcsim-core, one test binary: one module per area, the fixtures
//! they share in [`testing`], and the golden (snapshot) tests of whole runs in [`golden`].
//!
//! Run them with `cargo test --release -p pfcsim-core --test integration` (a module alone:
//! add its path as a filter, e.g. `-- conweave::`).

mod cc;
mod clb;
mod coflows;
mod conweave;
mod fabric;
mod faults;
mod flb;
mod golden;
mod hermes;
mod host_schemes;
mod lbodsn;
mod limits;
mod metrics;
mod monitors;
mod parsers;
mod pfc_models;
mod plb;
mod rlb;
mod stalls;
mod tcp;
mod testing;
