//! The integration tests of pfcsim-core, one test binary: one module per area, and the
//! fixtures they share in [`testing`].
//!
//! Run them with `cargo test --release -p pfcsim-core --test integration` (a module alone:
//! add its path as a filter, e.g. `-- conweave::`).

mod conweave;
mod fabric;
mod faults;
mod hermes;
mod host_schemes;
mod metrics;
mod rlb;
mod testing;
