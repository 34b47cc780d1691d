//! The fixture shared by the end-to-end tests: a leaf-spine spec with 100 Gbps, 1 us links and
//! line-rate senders, run to its output (faults, host-side schemes, Hermes, RLB), and the
//! scripted flow of the tests that build a `Simulation` directly (fabric, ConWeave, metrics).

// Each test file uses the part it needs.
#![allow(dead_code)]

use pfcsim_core::run::run_scenario;
use pfcsim_core::sim::RunOutput;
use pfcsim_core::spec::{Scenario, Spec};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::units::Time;
use std::ops::ControlFlow;
use std::path::Path;

/// A leaf-spine fabric of `leaves` x `spines` x `hosts_per_leaf` (hosts numbered first, then
/// leaves, then spines), 100 Gbps and 1 us host and fabric links, the default switch (PFC on)
/// and no congestion control, so that senders send at line rate. `run` is the body of the
/// `[run]` table; `rest` (traffic, faults, `[lb]`, more tables) follows it.
pub fn leaf_spine(
    seed: u64,
    (leaves, spines, hosts_per_leaf): (u32, u32, u32),
    run: &str,
    rest: &str,
) -> String {
    format!(
        r#"
        seed = {seed}
        [topology]
        kind = "leaf_spine"
        leaves = {leaves}
        spines = {spines}
        hosts_per_leaf = {hosts_per_leaf}
        host_link = {{ rate = "100Gbps", delay = "1us" }}
        fabric_link = {{ rate = "100Gbps", delay = "1us" }}
        [cc]
        kind = "none"
        [run]
        {run}
        {rest}
        "#
    )
}

/// Runs the spec `text` to the end; `name` is the file name its errors would show.
pub fn run_text(text: &str, name: &str) -> RunOutput {
    let spec = Spec::from_toml(text, name).unwrap_or_else(|e| panic!("{e}"));
    let scenario = Scenario::prepare(spec, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run_scenario(scenario, &mut |_| ControlFlow::Continue(())).unwrap()
}

/// The error the spec `text` is refused with (it must be refused).
pub fn spec_error(text: &str, name: &str) -> String {
    match Spec::from_toml(text, name) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

/// Bytes that go-back-N sent again, over every flow.
pub fn retransmitted(out: &RunOutput) -> u64 {
    out.flows.iter().map(|f| f.retransmitted_bytes).sum()
}

/// A scripted flow of `size` bytes from host `src` to host `dst` at `start`, priority 3, left
/// to the switches' scheme (no path tag).
pub fn flow(src: u32, dst: u32, size: u64, start: Time) -> FlowSpec {
    FlowSpec {
        src,
        dst,
        size,
        start,
        priority: 3,
        dport: 100,
        source: "scripted",
        path_tag: 0,
    }
}
