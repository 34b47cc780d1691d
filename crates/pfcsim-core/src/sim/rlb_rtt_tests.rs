//! RLB's path RTTs end to end: piggybacked on the packets of the run (no packet added), and
//! larger on a slower path.

use super::tests::{rlb_sim, rlb_spec};
use crate::units::Time;

/// `tests::rlb_spec` (3 leaves x 3 spines x 2 hosts: hosts 0-5, leaves 6-8, spines 9-11) with
/// RLB around RPS (which sprays every flow over the three spines) and `lb`; hosts 0 and 1
/// (leaf 6) send 2 MB each to hosts 2 and 3 (leaf 7) at line rate; then `extra`.
fn spec(lb: &str, extra: &str) -> String {
    let flows = r#"
        [[traffic]]
        kind = "scripted"
        flows = [
            { src = 0, dst = 2, size = "2MB" },
            { src = 1, dst = 3, size = "2MB" },
        ]
        "#;
    rlb_spec(
        &format!("{lb}\n[lb.inner]\nscheme = \"rps\""),
        &format!("{flows}{extra}"),
    )
}

/// Runs to the end; returns leaf 6's RLB counters, its (smoothed) RTT of each uplink (to
/// spines 9, 10, 11) towards leaf 7 (ToR 1) at 100 us (mid-transfer), and the output.
fn run(spec: &str) -> (crate::lb::RlbCounters, [Option<Time>; 3], super::RunOutput) {
    let mut sim = rlb_sim(spec);
    while sim.step().is_some_and(|t| t < Time::from_us(100)) {}
    let leaf = sim.switches.iter().find(|s| s.node == 6).unwrap();
    let first = leaf.ports.start;
    let mut rtts = [None; 3];
    for (i, spine) in (9..=11).enumerate() {
        let local = (leaf.ports.clone())
            .find(|&p| sim.ports[p as usize].peer_node == spine)
            .unwrap()
            - first;
        rtts[i] = sim
            .scheme_at::<crate::lb::Rlb>(6)
            .unwrap()
            .measured_rtt(1, local as u16);
    }
    while sim.step().is_some() {}
    let counters = sim.scheme_at::<crate::lb::Rlb>(6).unwrap().counters;

    (counters, rtts, sim.run_to_end())
}

fn lb_messages(out: &super::RunOutput) -> u64 {
    out.ports.iter().map(|p| p.lb_messages_sent).sum()
}

#[test]
fn piggybacked_rtts_cost_no_packet() {
    let (c, rtts, out) = run(&spec("", ""));
    assert!(c.stamps > 0 && c.stamp_returns > 0, "{c:?}");
    assert!(
        rtts.iter().all(|r| r.is_some()),
        "every path measured: {rtts:?}"
    );
    assert_eq!((c.probes, c.echoes), (0, 0));
    // The only scheme messages on the wire are the PFC warnings (CNMs).
    let s = &out.stats;
    assert_eq!(
        lb_messages(&out),
        s.counter("rlb.cnm_warnings") + s.counter("rlb.cnm_clears")
    );
    assert_eq!(s.flows_finished, s.flows_total);
    assert_eq!(s.bytes_delivered, s.bytes_offered);
    assert_eq!(out.live_packets, 0);
    // With probes, the same measurement puts a probe and an echo on the wire each time.
    let (p, _, probed) = run(&spec("rtt_measurement = \"probe\"", ""));
    assert!(p.probes > 0 && p.echoes > 0 && p.stamps == 0);
    let ps = &probed.stats;
    assert!(
        lb_messages(&probed)
            >= ps.counter("rlb.cnm_warnings") + ps.counter("rlb.cnm_clears") + p.probes + p.echoes
    );
    // Deterministic.
    let (c2, rtts2, out2) = run(&spec("", ""));
    assert_eq!((c2, rtts2), (c, rtts));
    assert_eq!(out2.stats.fingerprint, out.stats.fingerprint);
}

#[test]
fn a_slower_path_measures_a_larger_rtt() {
    // Spine 11's links to leaves 6 and 7 are 3 us long (1 us elsewhere): 4 us more on the way
    // out (the way back is whatever path the packet carrying the timestamp back takes, and
    // queues add noise on both ways: at least 2 us more is asked).
    let longer = r#"
        [[topology.overrides]]
        leaf = 0
        spine = 2
        delay = "3us"
        [[topology.overrides]]
        leaf = 1
        spine = 2
        delay = "3us"
    "#;
    let (_, rtts, _) = run(&spec("", longer));
    let [a, b, slow] = rtts.map(|r| r.expect("measured"));
    assert!(
        slow >= a.max(b) + Time::from_us(2),
        "spine 11: {slow}, spines 9, 10: {a}, {b}"
    );
    // Spine 11's link to leaf 7 at half rate: RPS at leaf 6 still sends it a third of the
    // traffic, which queues at spine 11: a larger RTT (about 27 us against 5 us with seeds 3
    // to 6).
    let half = r#"
        [[topology.overrides]]
        leaf = 1
        spine = 2
        rate = "50Gbps"
    "#;
    let (_, rtts, _) = run(&spec("", half));
    let [a, b, slow] = rtts.map(|r| r.expect("measured"));
    assert!(
        slow > Time(2 * a.max(b).ps()),
        "spine 11: {slow}, spines 9, 10: {a}, {b}"
    );
}
