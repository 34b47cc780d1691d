//! The plug-in interface end to end, with the test-only `probe` scheme: recirculation through
//! a loopback port, timers, and scheme messages that cross links.

use super::*;
use crate::lb::probe::ProbeConfig;
use crate::topology::LeafSpine;

#[test]
fn recirculation_timers_and_messages_work_end_to_end() {
    let link = (Rate::gbps(100), Time::from_us(1));
    let loopback = (Rate::gbps(100), Time::from_ns(100));
    // Hosts 0..4, leaves 4 and 5, spines 6 and 7; every switch gets a loopback link.
    let topo = Topology::leaf_spine(&LeafSpine::uniform(2, 2, 2, link.0, link.1))
        .with_loopbacks(loopback.0, loopback.1);
    let cfg = FabricConfig {
        cc: CcConfig::None,
        lb: LbConfig::Probe(ProbeConfig {}),
        ..Default::default()
    };
    let flow = FlowSpec {
        src: 0,
        dst: 2,
        size: 10_000,
        start: Time::ZERO,
        priority: 3,
        dport: 100,
        source: "scripted",
        path_tag: 0,
    };
    let stop = StopRule {
        at: Time::from_ms(100),
        when_flows_done: false,
    };
    let out = Simulation::new(&topo, cfg.clone(), vec![flow], 1, stop)
        .unwrap()
        .run_to_end();
    let s = &out.stats;
    assert_eq!(
        (s.flows_finished, s.bytes_delivered, s.packets_dropped),
        (1, 10_000, 0)
    );
    assert_eq!((out.buffered_bytes, out.live_packets), (0, 0));

    // Only the source leaf has a choice to make, so only its loopback carries the 10 packets.
    let port = |node: u32, peer: u32| out.ports.iter().find(|p| p.node == node && p.peer == peer);
    let leaf_loop: Vec<_> = out
        .ports
        .iter()
        .filter(|p| p.node == 4 && p.peer == 4)
        .collect();
    assert_eq!(
        leaf_loop.len(),
        2,
        "a loopback link is two ports of the switch"
    );
    assert_eq!(leaf_loop.iter().map(|p| p.tx_packets).sum::<u64>(), 10);
    for other in [5, 6, 7] {
        let used: u64 = out
            .ports
            .iter()
            .filter(|p| p.node == other && p.peer == other)
            .map(|p| p.tx_packets)
            .sum();
        assert_eq!(used, 0, "switch {other} had no choice to make");
    }

    // The recirculation is one more store-and-forward hop in the data path; the ACK, which
    // no scheme handles, comes back over the four links only.
    let path = [link, link, loopback, link, link];
    let ack_on_loopback = loopback.0.tx_time(64).ps() + loopback.1.ps();
    let expected = ideal_fct(10_000, &path, &cfg.nic).ps() - ack_on_loopback;
    let fct = out.flows[0].fct_ps.unwrap();
    assert!(fct.abs_diff(expected) <= 1_000, "fct {fct} vs {expected}");
    assert_eq!(out.flows[0].paths_used, 1);

    // The timer fired and sent one message to spine 6 (the first candidate), which answered.
    assert_eq!(port(4, 6).unwrap().lb_messages_sent, 1);
    assert_eq!(port(6, 4).unwrap().lb_messages_sent, 1);
    let total: u64 = out.ports.iter().map(|p| p.lb_messages_sent).sum();
    assert_eq!(total, 2);
}

#[test]
fn the_hot_fields_of_a_port_fit_its_first_three_cache_lines() {
    assert_eq!(std::mem::offset_of!(PortState, in_flight), 64);
    assert_eq!(std::mem::offset_of!(PortState, queue_integral), 128);
    assert!(std::mem::offset_of!(PortState, ecn_kmin) + 8 <= 192);
}
