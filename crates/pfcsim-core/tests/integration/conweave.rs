//! ConWeave behaviour: rerouting at the source ToR, in-order delivery restored at the
//! destination ToR in bounded, physical reorder queues.

use crate::testing::{
    self, assert_lossless_and_conserved, flow, node_sum, sum_flows as sum, with_lb,
};

use pfcsim_core::lb::{ConWeaveConfig, LbConfig, RpsConfig};
use pfcsim_core::sim::RunOutput;
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::units::{Rate, Time};

/// Two leaves of eight 100 Gbps hosts, four spines, 100 Gbps / 1 us links except leaf 16's
/// uplink to spine 18 (both directions) at `slow`: hosts 0..16, leaves 16, 17, spines 18..22.
fn degraded(slow: Rate) -> Topology {
    let mut p = LeafSpine::uniform(2, 4, 8, Rate::gbps(100), Time::from_us(1));
    p.overrides = vec![(0, 0, Some(slow), None)];
    Topology::leaf_spine(&p)
}

/// Runs with the scheme `lb` (and DCQCN) until the network drains.
fn drain(topo: &Topology, lb: LbConfig, flows: Vec<FlowSpec>, seed: u64) -> RunOutput {
    testing::drain(topo, with_lb(lb), flows, seed)
}

/// Eight 1 MB flows from leaf 16 to leaf 17, a few microseconds apart.
fn cross_flows() -> Vec<FlowSpec> {
    (0..8)
        .map(|i| flow(i, 8 + i, 1_000_000, Time::from_ns(1_300 * i as u64)))
        .collect()
}

fn report(name: &str, out: &RunOutput) {
    eprintln!(
        "{name}: ooo {} nacks {} retx {} paths {:?} changes {} rq_max {} msgs {} log {}",
        sum(out, |f| f.ooo_arrivals),
        sum(out, |f| f.nacks_received as u64),
        sum(out, |f| f.retransmitted_bytes),
        out.flows.iter().map(|f| f.paths_used).collect::<Vec<_>>(),
        sum(out, |f| f.path_changes as u64),
        out.ports
            .iter()
            .map(|p| p.reorder_queues_max)
            .max()
            .unwrap_or(0),
        out.ports.iter().map(|p| p.lb_messages_sent).sum::<u64>(),
        out.reorder_log.as_ref().map_or(0, |l| l.len()),
    );
}

/// Every invariant of a drained lossless run, plus empty reorder queues.
fn assert_drained(out: &RunOutput) {
    assert_lossless_and_conserved(out);
    assert_eq!(out.held_packets, 0, "no packet is left in a reorder queue");
}

fn conweave() -> LbConfig {
    LbConfig::ConWeave(ConWeaveConfig::default())
}

#[test]
fn conweave_delivers_in_order_where_rps_triggers_go_back_n() {
    // Leaf 16's uplink to spine 18 runs at 10 Gbps: a flow on it sees its RTT_REPLY miss the
    // deadline, sends a TAIL there and moves to another spine; the new path's packets overtake
    // the TAIL and must wait at leaf 17. Without the destination's reorder queues (holding
    // disabled in `on_ingress`) the NICs see them out of order and NACK.
    let topo = degraded(Rate::gbps(10));
    let cw = drain(&topo, conweave(), cross_flows(), 1);
    report("conweave", &cw);
    assert_drained(&cw);
    assert_eq!(sum(&cw, |f| f.ooo_arrivals), 0, "no out-of-order arrival");
    assert_eq!(sum(&cw, |f| f.nacks_received as u64), 0, "no NACK");
    assert_eq!(sum(&cw, |f| f.retransmitted_bytes), 0, "no go-back-N");
    assert!(
        cw.ports.iter().any(|p| p.reorder_queues_max > 0),
        "packets were actually held"
    );

    let rps = drain(&topo, LbConfig::Rps(RpsConfig {}), cross_flows(), 1);
    report("rps", &rps);
    assert_drained(&rps);
    assert!(sum(&rps, |f| f.ooo_arrivals) > 0, "spraying reorders");
    assert!(
        sum(&rps, |f| f.nacks_received as u64) > 0,
        "gaps cause NACKs"
    );
    assert!(sum(&rps, |f| f.retransmitted_bytes) > 0, "go-back-N");
}

#[test]
fn conweave_reroutes_flows_off_a_slow_path() {
    // Without the reply-deadline reroute (or with path sampling that keeps the current path)
    // every flow stays on its first path.
    let topo = degraded(Rate::gbps(10));
    let cw = drain(&topo, conweave(), cross_flows(), 1);
    assert!(
        cw.flows.iter().filter(|f| f.paths_used > 1).count() >= 2,
        "flows move: {:?}",
        cw.flows.iter().map(|f| f.paths_used).collect::<Vec<_>>()
    );
    assert!(sum(&cw, |f| f.path_changes as u64) > 0);
    // RTT requests, replies and clears are real messages: leaf 17 sends them to leaf 16.
    let from_leaf17 = node_sum(&cw, 17, |p| p.lb_messages_sent);
    assert!(
        from_leaf17 > 0,
        "the destination ToR answers over the fabric"
    );
    let from_spines: u64 = cw
        .ports
        .iter()
        .filter(|p| p.node >= 18)
        .map(|p| p.lb_messages_sent)
        .sum();
    assert_eq!(from_spines, 0, "spines only forward them");
}

#[test]
fn conweave_reorder_queues_are_used_and_released() {
    let topo = degraded(Rate::gbps(10));
    let cw = drain(&topo, conweave(), cross_flows(), 1);
    assert_drained(&cw);
    let log = cw
        .reorder_log
        .as_ref()
        .expect("ConWeave logs its reorder queues");
    assert!(!log.is_empty());
    // Every change is in time order, every port ends with no queue in use, and the log agrees
    // with the per-port maximum.
    assert!(log.windows(2).all(|w| w[0].time_ps <= w[1].time_ps));
    for (id, port) in cw.ports.iter().enumerate() {
        let changes: Vec<u32> = log
            .iter()
            .filter(|c| c.port_id as usize == id)
            .map(|c| c.in_use)
            .collect();
        assert_eq!(
            changes.iter().copied().max().unwrap_or(0),
            port.reorder_queues_max
        );
        assert_eq!(
            changes.last().copied().unwrap_or(0),
            0,
            "port {id} ends with none"
        );
        if port.reorder_queues_max > 0 {
            assert_eq!(port.node, 17, "only the destination leaf holds packets");
            assert!(!cw.ports.iter().any(|q| q.node == port.peer && q.is_switch));
            assert!(port.reorder_queues_mean > 0.0);
            assert!(port.reorder_queues_mean < port.reorder_queues_max as f64);
        }
    }
    // Other schemes keep no reorder records.
    let ecmp = drain(&topo, LbConfig::default(), cross_flows(), 1);
    assert!(ecmp.reorder_log.is_none());
    assert!(ecmp.ports.iter().all(|p| p.reorder_queues_max == 0));
}

#[test]
fn conweave_respects_the_reorder_queue_bound() {
    // Eight flows into two hosts: several reorder at once at each host port. With 24 queues
    // per port nothing reaches a NIC out of order; with one, the others pass out of order
    // (and the NICs NACK), and no port ever has more than one queue in use.
    let topo = degraded(Rate::gbps(10));
    let flows: Vec<FlowSpec> = (0..8)
        .map(|i| flow(i, 8 + (i % 2), 300_000, Time::from_ns(700 * i as u64)))
        .collect();
    let run = |queues: u32| {
        let cfg = ConWeaveConfig {
            reorder_queues: queues,
            queue_choices: queues.min(3),
            ..Default::default()
        };
        let out = drain(&topo, LbConfig::ConWeave(cfg), flows.clone(), 1);
        report(&format!("{queues} queues"), &out);
        assert_drained(&out);
        out
    };
    let wide = run(24);
    let max = |out: &RunOutput| out.ports.iter().map(|p| p.reorder_queues_max).max();
    assert!(max(&wide) > Some(1), "several flows reorder at once");
    assert_eq!(sum(&wide, |f| f.ooo_arrivals), 0);
    let narrow = run(1);
    assert_eq!(max(&narrow), Some(1), "the bound holds");
    assert!(
        sum(&narrow, |f| f.ooo_arrivals) > 0,
        "the overflow passes unordered"
    );
}

#[test]
fn conweave_is_deterministic() {
    let topo = degraded(Rate::gbps(10));
    let a = drain(&topo, conweave(), cross_flows(), 5);
    let b = drain(&topo, conweave(), cross_flows(), 5);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(a.reorder_log, b.reorder_log);
}
