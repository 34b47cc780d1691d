//! RLB end to end: rerouting and recirculation on PFC warnings, pinned flows, conservation,
//! determinism, and the errors of a bad `[lb]` table. Each test fails if the mechanism it
//! names is removed (see `docs/schemes/rlb.md`).

use pfcsim_core::run::run_scenario;
use pfcsim_core::sim::RunOutput;
use pfcsim_core::spec::{Scenario, Spec};
use std::ops::ControlFlow;
use std::path::Path;

/// 3 leaves x 3 spines x 2 hosts (hosts 0-5, leaves 6-8, spines 9-11), 100 Gbps and 1 us
/// links, line-rate senders, loopbacks of 100 Gbps and 100 ns; `lb` is the `[lb]` table's
/// body and `extra` the rest.
fn spec(lb: &str, extra: &str) -> String {
    format!(
        r#"
        seed = 5
        [topology]
        kind = "leaf_spine"
        leaves = 3
        spines = 3
        hosts_per_leaf = 2
        host_link = {{ rate = "100Gbps", delay = "1us" }}
        fabric_link = {{ rate = "100Gbps", delay = "1us" }}
        {extra}
        [switch.loopback]
        rate = "100Gbps"
        delay = "100ns"
        [cc]
        kind = "none"
        [run]
        stop_when_done = false
        [lb]
        {lb}
        "#
    )
}

fn run(text: &str) -> RunOutput {
    let spec = Spec::from_toml(text, "rlb.toml").unwrap_or_else(|e| panic!("{e}"));
    let scenario = Scenario::prepare(spec, Path::new(".")).unwrap_or_else(|e| panic!("{e}"));
    run_scenario(scenario, &mut |_| ControlFlow::Continue(())).unwrap()
}

fn error(text: &str) -> String {
    match Spec::from_toml(text, "rlb.toml") {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

/// Host 4 floods spine 10's link to leaf 7 on a pinned path while host 0 sprays 3 MB to
/// leaf 7 with the inner scheme: spine 10 warns leaf 6.
const CROSS: &str = r#"
    [[traffic]]
    kind = "scripted"
    flows = [
        { src = 4, dst = 2, size = "3MB", path = [1] },
        { src = 0, dst = 3, size = "3MB" },
        { src = 1, dst = 3, size = "1MB", start = "5us" },
    ]
"#;

/// Every flow finished, every byte offered delivered, no buffer drop, buffers empty.
fn assert_conserved(out: &RunOutput) {
    let s = &out.stats;
    assert_eq!(s.flows_finished, s.flows_total, "every flow finishes");
    assert_eq!(s.bytes_delivered, s.bytes_offered);
    assert_eq!(s.drops_buffer, 0, "PFC on: no buffer drops");
    assert_eq!(out.buffered_bytes, 0, "buffers drain");
    assert_eq!(out.live_packets, 0, "no packet left behind");
}

#[test]
fn show_numbers() {
    for (name, lb, extra) in [
        ("sym", "scheme = \"rlb\"", ""),
        ("slow", "scheme = \"rlb\"", "[[topology.overrides]]\nleaf = 0\nspine = 2\ndelay = \"20us\"\n[[topology.overrides]]\nleaf = 1\nspine = 2\ndelay = \"20us\"\n"),
        ("drill", "scheme = \"drill\"", ""),
    ] {
        let text = spec(lb, &format!("{extra}\n{CROSS}"));
        let out = run(&text);
        eprintln!("{name}: {:?}", out.stats);
    }
}
