//! RLB end to end: rerouting and recirculation on PFC warnings, pinned flows, conservation,
//! determinism, and the errors of a bad `[lb]` table. Each test fails if the mechanism it
//! names is removed (see `docs/schemes/rlb.md`).

use crate::testing::{self, assert_recovered, poisson};
use pfcsim_core::metrics::RunStats;
use pfcsim_core::sim::RunOutput;
use pfcsim_core::spec::Spec;

/// The loopback link of every switch.
pub const LOOPBACK: &str = r#"
    [switch.loopback]
    rate = "100Gbps"
    delay = "100ns"
"#;

/// 3 leaves x 3 spines x 2 hosts (hosts 0-5, leaves 6-8, spines 9-11), 100 Gbps and 1 us
/// links, line-rate senders, loopbacks of 100 Gbps and 100 ns; `lb` is the `[lb]` table's
/// body and `extra` the rest.
pub fn spec(lb: &str, extra: &str) -> String {
    let rest = format!("{extra}\n{LOOPBACK}\n[lb]\n{lb}\n");
    testing::leaf_spine_spec(5, (3, 3, 2), "stop_when_done = false", &rest)
}

fn run(text: &str) -> RunOutput {
    testing::run_text(text, "rlb.toml")
}

fn error(text: &str) -> String {
    testing::spec_error(text, "rlb.toml")
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
    assert_recovered(out);
    assert_eq!(out.live_packets, 0, "no packet left behind");
}

/// Spine 11's links to leaves 6 and 7 are 20 us long: its path's RTT is far above the others'.
pub const SLOW_SPINE: &str = r#"
    [[topology.overrides]]
    leaf = 0
    spine = 2
    delay = "20us"
    [[topology.overrides]]
    leaf = 1
    spine = 2
    delay = "20us"
"#;

/// Two flows pinned to spine 10 towards leaf 7 (from leaves 6 and 8) overload its link to
/// leaf 7; spine 10 warns both leaves. RLB's p is the pinned spine 10, and its p_s the next
/// uplink in port order, spine 11.
pub const PINNED: &str = r#"
    [[traffic]]
    kind = "scripted"
    flows = [
        { src = 0, dst = 3, size = "2MB", path = [1] },
        { src = 4, dst = 2, size = "2MB", path = [1] },
    ]
"#;

/// Algorithm 1's choice between rerouting and recirculating, on RTTs that RLB measures.
/// Checked to fail with each of these disabled in turn: PFC prediction (no CNM), the RTT gap
/// test (always reroute; always recirculate), the "check again" of a replaced p_s, the RTT
/// measurement (then with probes: no probe sent, every path keeps the same base RTT, the gap
/// is 0 and the pinned flows never recirculate; with piggybacked timestamps, returned
/// timestamps not read), echoes ignored, and the exemption of the loopback
/// from PFC pauses (the last two through the DRILL comparison only: it is statistical, the
/// pinned runs are the sharp check of the RTT gap).
#[test]
fn a_warned_path_is_rerouted_on_a_small_rtt_gap_and_recirculated_on_a_large_one() {
    // Symmetric paths, DRILL inside: the packets warned off spine 10 go elsewhere.
    let sym = run(&spec("scheme = \"rlb\"", CROSS));
    assert_conserved(&sym);
    assert!(sym.stats.counter("rlb.cnm_warnings") > 0, "spine 10 warns");
    assert!(
        sym.stats.counter("rlb.reroutes") > 0,
        "warned packets are rerouted"
    );
    // Spine 11 far slower.
    let slow = run(&spec("scheme = \"rlb\"", &format!("{SLOW_SPINE}{CROSS}")));
    assert_conserved(&slow);
    // Packets warned off spine 10 wait for it rather than take the slow spine: a larger
    // share of recirculations among the decisions than with symmetric paths, fewer reroutes.
    let share = |s: &RunStats| {
        s.counter("rlb.recirculations") as f64
            / (s.counter("rlb.recirculations") + s.counter("rlb.reroutes")) as f64
    };
    assert!(
        share(&slow.stats) > share(&sym.stats) + 0.05
            && slow.stats.counter("rlb.reroutes") < sym.stats.counter("rlb.reroutes"),
        "recirculations {} vs {}, reroutes {} vs {} (slow vs symmetric)",
        slow.stats.counter("rlb.recirculations"),
        sym.stats.counter("rlb.recirculations"),
        slow.stats.counter("rlb.reroutes"),
        sym.stats.counter("rlb.reroutes")
    );
    // Pinned to spine 10, symmetric paths: p_s (spine 11) is not slower than spine 10 by
    // more than t_rc, so warned packets move to it and none waits in the loopback.
    let sym = run(&spec("scheme = \"rlb\"", PINNED));
    assert_conserved(&sym);
    assert!(sym.stats.counter("rlb.cnm_warnings") > 0 && sym.stats.counter("rlb.reroutes") > 0);
    assert_eq!(
        sym.stats.counter("rlb.recirculations"),
        0,
        "a small gap never recirculates"
    );
    // Spine 11 far slower (as RLB measures it): waiting for spine 10 by recirculating
    // is worth it, and packets do.
    let slow = run(&spec("scheme = \"rlb\"", &format!("{SLOW_SPINE}{PINNED}")));
    assert_conserved(&slow);
    assert!(
        slow.stats.counter("rlb.recirculations") > 0,
        "a large gap recirculates"
    );
    // The loopback carried them: two ports per switch, the leaves' in use.
    let on_loopbacks: u64 = slow
        .ports
        .iter()
        .filter(|p| p.node == p.peer)
        .map(|p| p.tx_packets)
        .sum();
    assert!(on_loopbacks >= slow.stats.counter("rlb.recirculations"));
    // Reroute only (Fig. 17's baseline): the same warnings, no recirculation.
    for traffic in [PINNED, CROSS] {
        let reroute = run(&spec(
            "scheme = \"rlb\"\nrecirculation = false",
            &format!("{SLOW_SPINE}{traffic}"),
        ));
        assert_conserved(&reroute);
        assert_eq!(reroute.stats.counter("rlb.recirculations"), 0);
        assert!(reroute.stats.counter("rlb.reroutes") > 0);
    }
}

/// Pinned paths as RLB's input. Checked to fail without the `pinned` capability (the
/// switch then honours the pin before asking RLB) and with PFC prediction disabled.
#[test]
fn a_pinned_path_is_rlbs_input_and_is_overridden_only_on_a_warning() {
    let pinned = PINNED;
    let ecmp = run(&spec("scheme = \"ecmp\"", pinned));
    assert_conserved(&ecmp);
    assert!(
        ecmp.flows.iter().all(|f| f.paths_used == 1),
        "pins honoured"
    );
    let rlb = run(&spec("scheme = \"rlb\"\nrecirculation = false", pinned));
    assert_conserved(&rlb);
    assert!(rlb.stats.counter("rlb.reroutes") > 0);
    assert!(
        rlb.flows.iter().all(|f| f.paths_used > 1),
        "RLB moved warned packets of both pinned flows: {:?}",
        rlb.flows.iter().map(|f| f.paths_used).collect::<Vec<_>>()
    );
    // A lone pinned flow is never warned and keeps its path under RLB.
    let lone = r#"
        [[traffic]]
        kind = "scripted"
        flows = [{ src = 0, dst = 3, size = "1MB", path = [2] }]
    "#;
    let out = run(&spec("scheme = \"rlb\"", lone));
    assert_conserved(&out);
    assert_eq!(out.flows[0].paths_used, 1);
    assert_eq!(
        out.stats.counter("rlb.reroutes") + out.stats.counter("rlb.recirculations"),
        0
    );
}

/// Two rounds of a 4-to-1 incast into host 2, beside the Poisson traffic of [`loaded`].
const INCAST: &str = r#"
    [[traffic]]
    kind = "incast"
    receiver = 2
    senders = 4
    total_size = "256KB"
    start = "50us"
    period = "70us"
    repeat = 2
"#;

/// The tiny spec's web-search traffic at 70% load for 200 us, then [`INCAST`].
fn loaded() -> String {
    format!("{}{INCAST}", poisson(0.7, "200us"))
}

/// Conservation and determinism. Checked to fail when warnings never end (no clearing CNM
/// sent, or clearing CNMs ignored) and without the refusal of a recirculation that would
/// fill the loopback's ingress up to its XOFF threshold.
#[test]
fn rlb_conserves_bytes_and_is_deterministic_over_every_inner_scheme() {
    let traffic = loaded();
    let base = run(&spec("scheme = \"drill\"", &traffic));
    assert_conserved(&base);
    for inner in [
        "ecmp", "rps", "drb", "letflow", "drill", "conga", "hula", "conweave", "presto", "hermes",
    ] {
        for adaptive in [false, true] {
            let lb = format!(
                "scheme = \"rlb\"\nadaptive = {adaptive}\n[lb.inner]\nscheme = \"{inner}\""
            );
            let a = run(&spec(&lb, &traffic));
            assert_conserved(&a);
            assert_eq!(a.stats.bytes_offered, base.stats.bytes_offered, "{inner}");
            let b = run(&spec(&lb, &traffic));
            assert_eq!(
                a.stats.fingerprint, b.stats.fingerprint,
                "{inner}: same seed, same run"
            );
            assert_eq!(
                a.stats,
                RunStats {
                    wall_seconds: a.stats.wall_seconds,
                    ..b.stats.clone()
                }
            );
        }
    }
}

/// Spec errors. Checked to fail without the check that recirculation has a loopback.
#[test]
fn bad_rlb_tables_are_refused_with_the_key() {
    let flows = "[[traffic]]\nkind = \"scripted\"\nflows = [{ src = 0, dst = 3, size = \"1KB\" }]";
    let no_loop = spec("scheme = \"rlb\"", flows).replace(LOOPBACK, "");
    let e = error(&no_loop);
    assert!(
        e.contains("switch.loopback: missing; scheme \"rlb\" recirculates"),
        "{e}"
    );
    // Without recirculation no loopback is needed.
    let ok = no_loop.replace(
        "scheme = \"rlb\"",
        "scheme = \"rlb\"\nrecirculation = false",
    );
    assert_conserved(&run(&ok));
    let e = error(&spec(
        "scheme = \"rlb\"\n[lb.inner]\nscheme = \"drill\"\nd = 0",
        flows,
    ));
    assert!(e.contains("lb.inner.d: 0 is out of range"), "{e}");
    let e = error(&spec(
        "scheme = \"rlb\"\n[lb.inner]\nscheme = \"drill\"\ndd = 1",
        flows,
    ));
    assert!(e.contains("lb.inner.dd: unknown field"), "{e}");
    let e = error(&spec(
        "scheme = \"rlb\"\n[lb.inner]\nscheme = \"rlb\"",
        flows,
    ));
    assert!(
        e.contains("lb.inner.scheme: \"rlb\" wraps a scheme itself and cannot be wrapped"),
        "{e}"
    );
    let e = error(&spec("scheme = \"rlb\"\nfault_threshold = 0.0", flows));
    assert!(e.contains("lb.fault_threshold: 0 is out of range"), "{e}");
    // The resolved spec writes the nested table back and reads it again.
    let spec = Spec::from_toml(
        &spec("scheme = \"rlb\"\n[lb.inner]\nscheme = \"letflow\"", flows),
        "s",
    )
    .unwrap();
    let again = Spec::from_toml(&spec.resolved_toml(), "again").unwrap();
    assert_eq!(spec.lb, again.lb);
}
