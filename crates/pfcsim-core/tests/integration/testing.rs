//! The fixtures of every integration test, in one place:
//!
//! * the canonical tiny spec (`tests/data/tiny.toml` at the repository root, also read by the
//!   Python tests' `conftest.py`) and the specs derived from it by overriding keys: the
//!   line-rate leaf-spine of the end-to-end tests ([`leaf_spine_spec`]) and its Poisson
//!   traffic ([`poisson`]); the ring that deadlocks ([`ring_spec`]);
//! * runs of a spec text to its output ([`run_text`], [`spec_error`]);
//! * fabrics and runs of a `Simulation` built directly ([`leaf_spine`], [`drain`],
//!   [`run_until`], [`until_done`], [`line_rate`], [`with_lb`]) and their scripted flows
//!   ([`flow`]);
//! * what the tests read in a run's records ([`tx_packets`], [`tx_bytes`], [`port`],
//!   [`port_sum`], [`node_sum`], [`sum_flows`], [`retransmitted`]) and the checks several of them make
//!   ([`assert_lossless_and_conserved`], [`assert_complete`], [`assert_recovered`]).

use pfcsim_core::cc::CcConfig;
use pfcsim_core::lb::LbConfig;
use pfcsim_core::metrics::{FlowRecord, PortRecord};
use pfcsim_core::run::run_scenario;
use pfcsim_core::sim::{FabricConfig, RunOutput, Simulation, StopRule};
use pfcsim_core::spec::{Scenario, Spec};
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::units::{Rate, Time};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

// ---- The canonical tiny spec and the specs derived from it.

/// The canonical tiny spec, `tests/data/tiny.toml`: 2 leaves x 2 spines x 2 hosts, 100 Gbps
/// and 1 us links, web-search flows at 30% load for 1 ms, every other key at its default.
pub const TINY: &str = include_str!("../../../../tests/data/tiny.toml");

/// The folder of the canonical tiny spec: relative paths in a spec derived from it resolve
/// from there.
pub fn tiny_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// The canonical tiny spec as a TOML table, to derive a variant from by overriding keys.
pub fn tiny() -> toml::Table {
    TINY.parse().expect("tests/data/tiny.toml is TOML")
}

/// A spec table as spec text.
pub fn to_text(spec: &toml::Table) -> String {
    toml::to_string(spec).expect("a table always serializes")
}

/// The tiny spec's `[[traffic]]` entry (Poisson web-search flows) with `load` and `duration`
/// overridden, as spec text to append to a spec.
pub fn poisson(load: f64, duration: &str) -> String {
    let mut traffic = tiny()["traffic"][0]
        .as_table()
        .expect("the tiny spec's traffic is a table")
        .clone();
    traffic.insert("load".into(), load.into());
    traffic.insert("duration".into(), duration.into());
    let mut doc = toml::Table::new();
    doc.insert("traffic".into(), toml::Value::Array(vec![traffic.into()]));
    format!("\n{}", to_text(&doc))
}

/// The tiny spec made a leaf-spine fabric of `leaves` x `spines` x `hosts_per_leaf` (hosts
/// numbered first, then leaves, then spines), with its 100 Gbps and 1 us host and fabric
/// links, the default switch (PFC on) and no congestion control, so that senders send at
/// line rate; no name and no traffic. `run` is the body of the `[run]` table; `rest`
/// (traffic, faults, `[lb]`, more tables) follows it.
pub fn leaf_spine_spec(
    seed: u64,
    (leaves, spines, hosts_per_leaf): (u32, u32, u32),
    run: &str,
    rest: &str,
) -> String {
    let mut spec = tiny();
    spec.remove("name");
    spec.remove("traffic");
    spec.insert("seed".into(), (seed as i64).into());
    let topology = spec["topology"]
        .as_table_mut()
        .expect("the tiny spec has a [topology] table");
    for (key, n) in [
        ("leaves", leaves),
        ("spines", spines),
        ("hosts_per_leaf", hosts_per_leaf),
    ] {
        topology.insert(key.into(), i64::from(n).into());
    }
    let mut cc = toml::Table::new();
    cc.insert("kind".into(), "none".into());
    spec.insert("cc".into(), cc.into());
    format!("{}\n[run]\n{run}\n{rest}\n", to_text(&spec))
}

/// A ring of five switches (nodes 5..9, switch `5 + i` linked to `5 + (i + 1) % 5`), one
/// host on each (host `i` on switch `5 + i`), 100 Gbps and 1 us links
/// (`tests/data/ring5.topo`), without congestion control; host `i` sends 10 MB to host
/// `(i + 2) % 5` for each `i` of `senders`, along the ring's only two-hop path (clockwise).
/// With all five senders every link of the ring carries two flows, and the buffer
/// dependencies of the routes form a cycle: the classic PFC deadlock. `run` is the body of
/// the `[run]` table; `rest` follows it.
pub fn ring_spec(senders: &[u32], run: &str, rest: &str) -> String {
    let flows: Vec<String> = (senders.iter())
        .map(|i| format!("{{ src = {i}, dst = {}, size = \"10MB\" }}", (i + 2) % 5))
        .collect();
    format!(
        "[topology]\nkind = \"ns3_file\"\npath = \"ring5.topo\"\n\n[cc]\nkind = \"none\"\n\n\
         [[traffic]]\nkind = \"scripted\"\nflows = [{}]\n\n[run]\n{run}\n{rest}\n",
        flows.join(", ")
    )
}

/// Reads and prepares the spec `text` (relative paths from the canonical spec's folder);
/// `name` is the file name its errors would show.
pub fn scenario(text: &str, name: &str) -> Scenario {
    let spec = Spec::from_toml(text, name).unwrap_or_else(|e| panic!("{e}"));
    Scenario::prepare(spec, &tiny_dir()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs the spec `text` to the end; `name` is the file name its errors would show.
pub fn run_text(text: &str, name: &str) -> RunOutput {
    run_scenario(scenario(text, name), &mut |_| ControlFlow::Continue(())).unwrap()
}

/// The error the spec `text` is refused with (it must be refused).
pub fn spec_error(text: &str, name: &str) -> String {
    match Spec::from_toml(text, name) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

// ---- Simulations built directly.

/// A leaf-spine fabric of `leaves` x `spines` x `hosts_per_leaf` (hosts numbered first, then
/// leaves, then spines), every link 100 Gbps and 1 us.
pub fn leaf_spine(leaves: u32, spines: u32, hosts_per_leaf: u32) -> Topology {
    Topology::leaf_spine(&LeafSpine::uniform(
        leaves,
        spines,
        hosts_per_leaf,
        Rate::gbps(100),
        Time::from_us(1),
    ))
}

/// Runs until `stop` says so.
pub fn run_sim(
    topo: &Topology,
    cfg: FabricConfig,
    flows: Vec<FlowSpec>,
    seed: u64,
    stop: StopRule,
) -> RunOutput {
    Simulation::new(topo, cfg, flows, seed, stop)
        .unwrap()
        .run_to_end()
}

/// Runs until no event is left (the network drains).
pub fn drain(topo: &Topology, cfg: FabricConfig, flows: Vec<FlowSpec>, seed: u64) -> RunOutput {
    run_until(topo, cfg, flows, seed, Time::from_ms(1000))
}

/// Runs until no event is left or `at`, whichever comes first.
pub fn run_until(
    topo: &Topology,
    cfg: FabricConfig,
    flows: Vec<FlowSpec>,
    seed: u64,
    at: Time,
) -> RunOutput {
    let stop = StopRule {
        at,
        when_flows_done: false,
    };
    run_sim(topo, cfg, flows, seed, stop)
}

/// Runs until every flow has finished (schemes whose probes never stop, such as HULA, never
/// drain; the measured interval ends with the last finish), at most 100 ms.
pub fn until_done(
    topo: &Topology,
    cfg: FabricConfig,
    flows: Vec<FlowSpec>,
    seed: u64,
) -> RunOutput {
    let stop = StopRule {
        at: Time::from_ms(100),
        when_flows_done: true,
    };
    run_sim(topo, cfg, flows, seed, stop)
}

/// The default fabric with the scheme `lb` and no congestion control: senders at line rate.
pub fn line_rate(lb: LbConfig) -> FabricConfig {
    FabricConfig {
        cc: CcConfig::None,
        lb,
        ..Default::default()
    }
}

/// The default fabric (DCQCN) with the scheme `lb`.
pub fn with_lb(lb: LbConfig) -> FabricConfig {
    FabricConfig {
        lb,
        ..Default::default()
    }
}

/// A scripted flow of `size` bytes from host `src` to host `dst` at `start`, priority 3, left
/// to the switches' scheme (no path tag).
pub fn flow(src: u32, dst: u32, size: u64, start: Time) -> FlowSpec {
    FlowSpec::scripted(src, dst, size, start)
}

// ---- Reading a run's records.

/// `f` summed over the ports of `node` towards `peer`.
pub fn port_sum(out: &RunOutput, node: u32, peer: u32, f: fn(&PortRecord) -> u64) -> u64 {
    out.ports
        .iter()
        .filter(|p| p.node == node && p.peer == peer)
        .map(f)
        .sum()
}

/// `f` summed over the ports of `node`.
pub fn node_sum(out: &RunOutput, node: u32, f: fn(&PortRecord) -> u64) -> u64 {
    out.ports.iter().filter(|p| p.node == node).map(f).sum()
}

/// Data packets (and PFC frames, absent where the tests use it) sent by `node` to `peer`.
pub fn tx_packets(out: &RunOutput, node: u32, peer: u32) -> u64 {
    port_sum(out, node, peer, |p| p.tx_packets)
}

/// Bytes (data and control) that `node` sent to `peer`.
pub fn tx_bytes(out: &RunOutput, node: u32, peer: u32) -> u64 {
    port_sum(out, node, peer, |p| p.tx_bytes)
}

/// The port of `node` towards `peer`.
pub fn port(out: &RunOutput, node: u32, peer: u32) -> &PortRecord {
    out.ports
        .iter()
        .find(|p| p.node == node && p.peer == peer)
        .expect("port")
}

/// `f` summed over every flow.
pub fn sum_flows(out: &RunOutput, f: fn(&FlowRecord) -> u64) -> u64 {
    out.flows.iter().map(f).sum()
}

/// Bytes that go-back-N sent again, over every flow.
pub fn retransmitted(out: &RunOutput) -> u64 {
    sum_flows(out, |f| f.retransmitted_bytes)
}

// ---- Checks.

/// Every invariant that holds for any drained lossless run.
pub fn assert_lossless_and_conserved(out: &RunOutput) {
    let s = &out.stats;
    assert_eq!(s.packets_dropped, 0, "PFC on: nothing may be dropped");
    assert_eq!(s.flows_finished, s.flows_total, "every flow finishes");
    let total: u64 = out.flows.iter().map(|f| f.size_bytes).sum();
    assert_eq!(s.bytes_delivered, total, "every byte delivered once");
    assert_eq!(s.bytes_offered, total);
    assert_eq!(
        s.payload_sent,
        s.bytes_delivered + s.payload_dropped + s.payload_discarded,
        "payload sent = delivered + dropped + discarded"
    );
    assert_eq!(out.buffered_bytes, 0, "switch buffers are empty at the end");
    assert_eq!(out.live_packets, 0, "no packet is left anywhere");
}

/// Every flow finished and every byte offered was delivered.
pub fn assert_complete(out: &RunOutput) {
    let s = &out.stats;
    assert_eq!(s.flows_finished, s.flows_total, "every flow finishes");
    assert_eq!(s.bytes_delivered, s.bytes_offered);
}

/// [`assert_complete`], no buffer drop, and nothing is left in buffers.
pub fn assert_recovered(out: &RunOutput) {
    assert_complete(out);
    assert_eq!(out.buffered_bytes, 0, "buffers drain");
    assert_eq!(out.stats.drops_buffer, 0, "PFC on: no buffer drops");
}
