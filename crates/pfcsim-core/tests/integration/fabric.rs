//! Behaviour of the fabric model: each test fails if the mechanism it names breaks.

use crate::testing::{
    assert_lossless_and_conserved, drain, flow, leaf_spine, line_rate, node_sum, run_until,
    tx_bytes, tx_packets, until_done, with_lb,
};

use pfcsim_core::cc::{CcConfig, DcqcnConfig};
use pfcsim_core::lb::{
    CongaConfig, DrbConfig, DrillConfig, HulaConfig, LbConfig, LetFlowConfig, LetFlowDecision,
    RpsConfig,
};
use pfcsim_core::metrics::FlowRecord;
use pfcsim_core::sim::{FabricConfig, RunOutput};
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::transport::{ideal_fct, NicConfig};
use pfcsim_core::units::{Rate, Time};

/// Sixteen flows of 300 KB among the 16 hosts of a 2 x 4 x 8 leaf-spine, host i to i + 5,
/// 50 ns apart: the traffic of the determinism tests.
fn shifted_flows() -> Vec<FlowSpec> {
    (0..16)
        .map(|i| flow(i, (i + 5) % 16, 300_000, Time::from_ns(50 * i as u64)))
        .collect()
}

#[test]
fn lone_flow_fct_is_serialization_plus_propagation_plus_store_and_forward() {
    let topo = leaf_spine(2, 2, 2);
    // Host 0 (leaf 0) to host 2 (leaf 1): 4 links of 100 Gbps and 1 us.
    let size = 100_000;
    let out = drain(
        &topo,
        FabricConfig::default(),
        vec![flow(0, 2, size, Time::ZERO)],
        1,
    );
    let f = &out.flows[0];
    // 100 packets of 1000 B payload + 48 B header = 1048 B = 83.84 ns at 100 Gbps.
    let pkt = 83_840u64;
    let expected = 99 * pkt   // the first 99 packets leave the sender back to back
        + 4 * pkt             // the last packet is stored and forwarded on 4 links
        + 4 * 1_000_000       // propagation of the data
        + 4 * (5_120 + 1_000_000); // the 64 B ACK comes back over 4 links
    let fct = f.fct_ps.unwrap();
    assert!(
        fct.abs_diff(expected) <= pkt,
        "fct {fct} ps, expected {expected} ps"
    );
    assert_eq!(f.ideal_fct_ps, expected);
    assert!((f.slowdown.unwrap() - 1.0).abs() < 0.01);
    assert_eq!(f.retransmitted_bytes, 0);
    assert_eq!(f.ooo_arrivals, 0);
    assert_eq!(f.paths_used, 1);
    assert!(!f.stalled);
    assert_lossless_and_conserved(&out);
}

#[test]
fn ideal_fct_handles_a_short_last_packet_and_a_slow_middle_link() {
    let nic = NicConfig::default();
    let fast = (Rate::gbps(100), Time::from_us(1));
    let slow = (Rate::gbps(10), Time::from_us(1));
    // One packet of 500 B payload: pure store-and-forward.
    let one = ideal_fct(500, &[fast, slow, fast], &nic.wire());
    let t = |r: Rate, b: u64| r.tx_time(b).ps();
    let ack: u64 = 2 * t(fast.0, 64) + t(slow.0, 64) + 3 * 1_000_000;
    assert_eq!(
        one.ps(),
        2 * t(fast.0, 548) + t(slow.0, 548) + 3 * 1_000_000 + ack
    );
    // Ten packets through a 10 G bottleneck: the bottleneck paces them.
    let ten = ideal_fct(9_500, &[fast, slow, fast], &nic.wire());
    let expected = t(fast.0, 1048)
        + 9 * t(slow.0, 1048)
        + t(slow.0, 548)
        + t(fast.0, 548)
        + 3 * 1_000_000
        + ack;
    assert_eq!(ten.ps(), expected);
}

/// 16 hosts on two other leaves send 1.5 MB each to one host.
fn incast_flows() -> Vec<FlowSpec> {
    (8..24)
        .map(|src| flow(src, 0, 1_500_000, Time::ZERO))
        .collect()
}

#[test]
fn incast_with_pfc_drops_nothing_and_pauses_upstream() {
    let topo = leaf_spine(3, 2, 8);
    let out = drain(&topo, line_rate(LbConfig::default()), incast_flows(), 1);
    assert_lossless_and_conserved(&out);
    // The receiver's leaf (node 24) paused the spines, and the spines paused the senders'
    // leaves (nodes 25, 26), which paused the senders.
    let sent_by = |node: u32| node_sum(&out, node, |p| p.pfc_pauses_sent);
    assert!(sent_by(24) > 0, "receiver's leaf pauses the spines");
    assert!(
        sent_by(27) + sent_by(28) > 0,
        "spines pause the senders' leaves"
    );
    assert!(
        sent_by(25) + sent_by(26) > 0,
        "senders' leaves pause the senders"
    );
    let host_pauses: u64 = out
        .ports
        .iter()
        .filter(|p| !p.is_switch)
        .map(|p| p.pfc_pauses_received)
        .sum();
    assert!(host_pauses > 0);
    let paused_time: u64 = out.ports.iter().map(|p| p.paused_time_ps).sum();
    assert!(paused_time > 0);
    assert!(out.flows.iter().any(|f| f.stalled));
    // Every PAUSE is answered by a RESUME once the incast is over.
    for p in &out.ports {
        assert_eq!(p.pfc_pauses_sent, p.pfc_resumes_sent, "{p:?}");
    }
    // 24 MB of payload through one 100 Gbps link takes at least 1.92 ms.
    let last = out
        .flows
        .iter()
        .map(|f| f.finish_ps.unwrap())
        .max()
        .unwrap();
    assert!(last > 1_920_000_000);
}

#[test]
fn incast_without_pfc_drops_and_recovers_by_retransmission() {
    let topo = leaf_spine(3, 2, 8);
    // DCQCN (cutting the rate on the CNP every NACK carries) keeps lossy go-back-N out of
    // congestion collapse; without congestion control 16 line-rate senders would livelock.
    let mut cfg = FabricConfig::default();
    cfg.switch.pfc.enabled = false;
    let out = drain(&topo, cfg, incast_flows(), 1);
    let s = &out.stats;
    assert!(s.packets_dropped > 0, "lossy mode drops under incast");
    assert_eq!(
        s.flows_finished, s.flows_total,
        "go-back-N recovers every flow"
    );
    let total: u64 = out.flows.iter().map(|f| f.size_bytes).sum();
    assert_eq!(s.bytes_delivered, total);
    assert_eq!(
        s.payload_sent,
        s.bytes_delivered + s.payload_dropped + s.payload_discarded
    );
    assert!(out.flows.iter().map(|f| f.retransmitted_bytes).sum::<u64>() > 0);
    assert!(out.ports.iter().all(|p| p.pfc_pauses_sent == 0));
    assert_eq!(out.buffered_bytes, 0);
}

#[test]
fn spraying_reorders_and_go_back_n_retransmits_while_ecmp_does_not() {
    let topo = leaf_spine(2, 4, 8);
    // Eight cross-leaf flows and some same-time traffic to make the spine queues differ.
    let flows: Vec<FlowSpec> = (0..8)
        .map(|i| flow(i, 8 + i, 2_000_000, Time::from_ns(137 * i as u64)))
        .collect();
    let cfg = with_lb(LbConfig::Rps(RpsConfig {}));
    let sprayed = drain(&topo, cfg, flows.clone(), 3);
    assert_lossless_and_conserved(&sprayed);
    let sum = |out: &RunOutput, f: fn(&pfcsim_core::metrics::FlowRecord) -> u64| -> u64 {
        out.flows.iter().map(f).sum()
    };
    assert!(sum(&sprayed, |f| f.ooo_arrivals) > 0, "spraying reorders");
    assert!(
        sum(&sprayed, |f| f.nacks_received as u64) > 0,
        "gaps cause NACKs"
    );
    assert!(
        sum(&sprayed, |f| f.retransmitted_bytes) > 0,
        "NACKs cause go-back-N"
    );
    assert!(sprayed.flows.iter().all(|f| f.paths_used > 1));

    let hashed = drain(&topo, FabricConfig::default(), flows, 3);
    assert_lossless_and_conserved(&hashed);
    assert_eq!(sum(&hashed, |f| f.ooo_arrivals), 0);
    assert_eq!(sum(&hashed, |f| f.retransmitted_bytes), 0);
    assert!(hashed.flows.iter().all(|f| f.paths_used == 1));
}

#[test]
fn dcqcn_shares_a_bottleneck_fairly_and_holds_the_queue_near_the_ecn_band() {
    // Hosts 0, 1, 2 on leaves 3, 4, 5; one spine (node 6). Two long flows into host 2: the
    // bottleneck is the spine's port towards leaf 5.
    let topo = leaf_spine(3, 1, 1);
    let flows = vec![
        flow(0, 2, 200_000_000, Time::ZERO),
        flow(1, 2, 200_000_000, Time::ZERO),
    ];
    let dcqcn = FabricConfig {
        cc: CcConfig::Dcqcn(DcqcnConfig::default()),
        ..Default::default()
    };
    let until = |cfg: &FabricConfig, t: Time| run_until(&topo, cfg.clone(), flows.clone(), 1, t);
    // Runs are deterministic, so the difference of two runs measures the window between.
    let (t1, t2) = (Time::from_ms(5), Time::from_ms(10));
    let a = until(&dcqcn, t1);
    let b = until(&dcqcn, t2);
    let window = (t2 - t1).as_secs_f64();
    let rate = |i: usize| {
        let acked = |o: &RunOutput| o.flows[i].packets_sent as f64 * 1000.0;
        (acked(&b) - acked(&a)) * 8.0 / window
    };
    let (r0, r1) = (rate(0), rate(1));
    let fair = 100e9 * 1000.0 / 1048.0 / 2.0;
    for r in [r0, r1] {
        assert!(
            (r - fair).abs() < 0.1 * fair,
            "rates {r0:.3e} {r1:.3e}, fair {fair:.3e}"
        );
    }
    let port = |o: &RunOutput| {
        o.ports
            .iter()
            .find(|p| p.node == 6 && p.peer == 5)
            .unwrap()
            .clone()
    };
    let window_mean_queue = |a: &RunOutput, b: &RunOutput| {
        (port(b).mean_queue_bytes * t2.ps() as f64 - port(a).mean_queue_bytes * t1.ps() as f64)
            / (t2 - t1).ps() as f64
    };
    let mean_queue = window_mean_queue(&a, &b);
    assert!(
        (20_000.0..400_000.0).contains(&mean_queue),
        "mean queue {mean_queue:.0} B, ECN band 100-400 KB"
    );
    assert!(b.flows.iter().all(|f| f.cnps_received > 0));
    // Without the reaction point the same flows keep the queue at the PFC threshold, far
    // above the ECN band, and pause the senders.
    let uncontrolled_cfg = line_rate(LbConfig::default());
    let (a, b) = (until(&uncontrolled_cfg, t1), until(&uncontrolled_cfg, t2));
    let uncontrolled = window_mean_queue(&a, &b);
    assert!(
        uncontrolled > 400_000.0,
        "without DCQCN the queue is {uncontrolled:.0} B"
    );
    assert!(b.ports.iter().map(|p| p.pfc_pauses_sent).sum::<u64>() > 0);
}

#[test]
fn same_seed_same_fingerprint_other_seed_other_fingerprint() {
    let topo = leaf_spine(2, 4, 8);
    let flows = shifted_flows();
    let cfg = with_lb(LbConfig::Rps(RpsConfig {}));
    let run = |seed| drain(&topo, cfg.clone(), flows.clone(), seed);
    let (a, b, c) = (run(7), run(7), run(8));
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(a.flows, b.flows);
    assert_eq!(a.stats.events, b.stats.events);
    assert_ne!(a.stats.fingerprint, c.stats.fingerprint);
}

#[test]
fn two_simulations_in_one_process_do_not_interfere() {
    let topo = leaf_spine(2, 4, 8);
    let flows: Vec<FlowSpec> = (0..16)
        .map(|i| flow(i, (i + 8) % 16, 200_000, Time::ZERO))
        .collect();
    let cfg = with_lb(LbConfig::Rps(RpsConfig {}));
    let alone = drain(&topo, cfg.clone(), flows.clone(), 5)
        .stats
        .fingerprint;
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (topo, cfg, flows) = (topo.clone(), cfg.clone(), flows.clone());
            std::thread::spawn(move || drain(&topo, cfg, flows, 5).stats.fingerprint)
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), alone);
    }
}

#[test]
fn switches_honour_a_pinned_path() {
    // Two leaves, two spines: hosts 0, 1 under leaf 4; hosts 2, 3 under leaf 5.
    let topo = leaf_spine(2, 2, 2);
    let pinned = |src, dst, spine: u32| FlowSpec {
        // At the first switch hop (the source leaf), take uplink `spine`.
        path_tag: spine + 1,
        ..flow(src, dst, 2_000_000, Time::ZERO)
    };
    let fct_of = |flows: Vec<FlowSpec>| {
        let out = drain(&topo, line_rate(LbConfig::default()), flows, 1);
        assert_lossless_and_conserved(&out);
        let spine_tx = |spine_node: u32| tx_bytes(&out, spine_node, 5);
        let fct: Vec<u64> = out.flows.iter().map(|f| f.fct_ps.unwrap()).collect();
        (fct, spine_tx(6), spine_tx(7))
    };
    // Both flows pinned to spine 0: they share one 100 Gbps uplink.
    let (shared, via0, via1) = fct_of(vec![pinned(0, 2, 0), pinned(1, 3, 0)]);
    assert!(via0 > 4_000_000 && via1 == 0, "{via0} {via1}");
    // Pinned apart: each has its own uplink and finishes in about half the time.
    let (apart, via0, via1) = fct_of(vec![pinned(0, 2, 0), pinned(1, 3, 1)]);
    assert!(via0 > 2_000_000 && via1 > 2_000_000, "{via0} {via1}");
    for (s, a) in shared.iter().zip(&apart) {
        assert!(*s as f64 > 1.8 * *a as f64, "shared {s} ps vs apart {a} ps");
    }
}

// ---- Load-balancing schemes: each test fails if the scheme's mechanism is removed or
// replaced by another scheme (ECMP, RPS, DRB), as noted in each.

#[test]
fn rps_sprays_every_packet_independently_and_uniformly() {
    // Host 0 (leaf 2) to host 1 (leaf 3) over spines 4..8; one line-rate flow meets no queue,
    // so nothing is reordered and every packet is sent once.
    let topo = leaf_spine(2, 4, 1);
    let n = 4_000u64;
    let out = drain(
        &topo,
        line_rate(LbConfig::Rps(RpsConfig {})),
        vec![flow(0, 1, n * 1000, Time::ZERO)],
        11,
    );
    assert_lossless_and_conserved(&out);
    let f = &out.flows[0];
    assert_eq!(f.packets_sent, n);
    // Uniform: each spine carries n/4 within 5 standard deviations (27 packets); ECMP would
    // put everything on one spine.
    for spine in 4..8 {
        let c = tx_packets(&out, spine, 3);
        assert!((865..1135).contains(&c), "spine {spine}: {c} packets");
    }
    // Independent: the next packet takes another path with probability 3/4 (round robin:
    // always; ECMP: never).
    let changes = f.path_changes as u64;
    assert!(
        (2_850..3_150).contains(&changes),
        "{changes} path changes in {n} packets"
    );
    assert_eq!(f.paths_used, 4);
}

#[test]
fn drb_round_robins_exactly_per_destination() {
    // Hosts 0, 1 (leaf 4) send to hosts 2, 3 (leaf 5) at line rate at the same time, so the
    // leaf interleaves the two flows packet by packet. A counter per destination walks all
    // four spines for each flow; one shared counter would give each flow every other spine.
    let topo = leaf_spine(2, 4, 2);
    let n = 4_000u64;
    let drb = |flows| {
        let out = drain(
            &topo,
            line_rate(LbConfig::Drb(DrbConfig::default())),
            flows,
            11,
        );
        assert_lossless_and_conserved(&out);
        out
    };
    let out = drb(vec![
        flow(0, 2, n * 1000, Time::ZERO),
        flow(1, 3, n * 1000, Time::ZERO),
    ]);
    assert!(out.ports.iter().all(|p| p.pfc_pauses_sent == 0));
    for f in &out.flows {
        assert_eq!(f.packets_sent, n);
        assert_eq!(f.retransmitted_bytes, 0);
        assert_eq!(f.paths_used, 4);
        // Round robin: every packet takes another spine than the one before (RPS: 3/4).
        assert_eq!(f.path_changes as u64, n - 1);
    }
    // Exact balance: each destination's counter puts n/4 on every spine (RPS: +-27).
    for spine in 6..10 {
        assert_eq!(tx_packets(&out, spine, 5), 2 * n / 4, "spine {spine}");
    }

    // The counter is per destination, not per flow: two flows from host 0 to host 2, whose
    // packets the NIC alternates, share one walk, so each flow sees every other spine, as two
    // queue pairs to one destination do under the reference's per-destination counter (one
    // counter per flow would give each flow all four).
    let out = drb(vec![
        flow(0, 2, n * 1000, Time::ZERO),
        flow(0, 2, n * 1000, Time::ZERO),
    ]);
    for f in &out.flows {
        assert_eq!((f.packets_sent, f.paths_used), (n, 2));
        assert_eq!(f.path_changes as u64, n - 1);
    }
    for spine in 6..10 {
        assert_eq!(tx_packets(&out, spine, 5), 2 * n / 4, "spine {spine}");
    }
}

#[test]
fn drb_in_a_fat_tree_changes_the_first_tier_fastest_and_balances_the_cores_exactly() {
    // k = 4: hosts 0..16, edge 16..24, aggregation 24..32, core 32..36. Host 0 (pod 0) to
    // host 4 (pod 1): two aggregation switches, each with two cores. Per-destination round
    // robin at the edge and at each aggregation switch gives the paper's digit-reversal
    // order: consecutive packets alternate aggregation switches, and every core (bouncing
    // switch) carries exactly a quarter.
    let link = (Rate::gbps(100), Time::from_us(1));
    let topo = Topology::fat_tree(4, link, link);
    let n = 4_000u64;
    let out = drain(
        &topo,
        line_rate(LbConfig::Drb(DrbConfig::default())),
        vec![flow(0, 4, n * 1000, Time::ZERO)],
        5,
    );
    assert_lossless_and_conserved(&out);
    let f = &out.flows[0];
    assert_eq!((f.packets_sent, f.paths_used), (n, 4));
    assert_eq!(f.path_changes as u64, n - 1);
    for core in 32..36 {
        let down: u64 = (26..28).map(|agg| tx_packets(&out, core, agg)).sum();
        assert_eq!(down, n / 4, "core {core}");
    }
}

/// Two leaves, four spines, `hosts_per_leaf` hosts per leaf on 25 Gbps links, 100 Gbps
/// fabric links. A line-rate flow's packets reach the source leaf 335.36 ns apart.
fn slow_hosts(hosts_per_leaf: u32) -> LeafSpine {
    LeafSpine {
        host_rate: Rate::gbps(25),
        ..LeafSpine::uniform(2, 4, hosts_per_leaf, Rate::gbps(100), Time::from_us(1))
    }
}

/// One line-rate flow of `packets` packets from host 0 to host `dst` under LetFlow with a
/// flowlet timeout of `timeout_ns` and `decision`, drained (seed 3).
fn one_letflow_flow(
    topo: &Topology,
    dst: u32,
    packets: u64,
    timeout_ns: u64,
    decision: LetFlowDecision,
) -> RunOutput {
    let lb = LbConfig::LetFlow(LetFlowConfig {
        flowlet_timeout: Time::from_ns(timeout_ns),
        decision,
        ..Default::default()
    });
    let out = drain(
        topo,
        line_rate(lb),
        vec![flow(0, dst, packets * 1000, Time::ZERO)],
        3,
    );
    assert_lossless_and_conserved(&out);
    out
}

#[test]
fn letflow_keeps_a_flowlet_on_one_path_and_redraws_after_a_longer_gap() {
    let topo = Topology::leaf_spine(&slow_hosts(1));
    let n = 2_000u64;
    let run = |timeout_ns| one_letflow_flow(&topo, 1, n, timeout_ns, LetFlowDecision::EverySwitch);
    // Timeout above the 335 ns gap: the whole flow is one flowlet (every packet refreshes the
    // entry; measured from the flowlet's first packet, the third would already start a new
    // one). RPS or DRB would change path here.
    let one = run(400);
    assert_eq!(one.flows[0].path_changes, 0);
    assert_eq!(one.flows[0].paths_used, 1);
    // Timeout below the gap: every packet starts a flowlet on a uniformly random spine, so
    // the path changes with probability 3/4. ECMP would never change.
    let many = run(300);
    let f = &many.flows[0];
    assert_eq!(f.paths_used, 4);
    assert!(
        (1_400..1_600).contains(&(f.path_changes as u64)),
        "{} path changes",
        f.path_changes
    );
    for spine in 4..8 {
        let c = tx_packets(&many, spine, 3);
        assert!((400..600).contains(&c), "spine {spine}: {c}");
    }
}

#[test]
fn letflow_flows_at_line_rate_stay_on_one_path_each_with_the_default_timeout() {
    // Sixteen senders under leaf 32, each to its own receiver under leaf 33: without gaps no
    // flow leaves its first path, and the random first choices spread the flows over spines.
    let topo = Topology::leaf_spine(&slow_hosts(16));
    let flows: Vec<FlowSpec> = (0..16)
        .map(|i| flow(i, 16 + i, 1_000_000, Time::from_ns(10 * i as u64)))
        .collect();
    let lb = LbConfig::LetFlow(LetFlowConfig::default());
    let out = drain(&topo, line_rate(lb), flows, 2);
    assert_lossless_and_conserved(&out);
    assert!(out
        .flows
        .iter()
        .all(|f| f.paths_used == 1 && f.path_changes == 0));
    let used = (34..38).filter(|&s| tx_packets(&out, s, 33) > 0).count();
    assert!(used >= 3, "flows on {used} spines");
}

#[test]
fn letflow_at_the_source_tor_tags_whole_paths_in_a_fat_tree() {
    // k = 4 with 25 Gbps hosts: host 0 (edge 16) to host 4 (pod 1) over two aggregation
    // switches (24, 25) and four cores (32..36). With `source_tor` the edge switch draws the
    // aggregation switch's choice with each flowlet and writes it into the path tag.
    let topo = Topology::fat_tree(
        4,
        (Rate::gbps(25), Time::from_us(1)),
        (Rate::gbps(100), Time::from_us(1)),
    );
    let n = 2_000u64;
    let run = |timeout_ns| one_letflow_flow(&topo, 4, n, timeout_ns, LetFlowDecision::SourceTor);
    let one = run(400);
    assert_eq!((one.flows[0].paths_used, one.flows[0].path_changes), (1, 0));
    let many = run(300);
    let f = &many.flows[0];
    assert_eq!(f.paths_used, 4);
    assert!(
        (1_400..1_600).contains(&(f.path_changes as u64)),
        "{}",
        f.path_changes
    );
    for core in 32..36 {
        let down: u64 = (26..28).map(|agg| tx_packets(&many, core, agg)).sum();
        assert!((400..600).contains(&down), "core {core}: {down}");
    }

    // The aggregation switches follow the tag instead of deciding. With one-entry tables and
    // a timeout that never expires, an aggregation switch deciding for itself would send every
    // flow that reaches it to one core (they all share its single entry). Flows from host 0
    // (edge 16) and host 2 (edge 17) carry the tags their own edge drew, so when they meet at
    // one aggregation switch they take different cores half the time; over 20 seeds that must
    // happen at least once.
    let shared = LbConfig::LetFlow(LetFlowConfig {
        flowlet_timeout: Time::from_ms(1_000),
        table_size: 1,
        decision: LetFlowDecision::SourceTor,
    });
    let split_at_a_shared_agg = (1..=20).any(|seed| {
        let flows = vec![
            flow(0, 4, 100_000, Time::ZERO),
            flow(2, 6, 100_000, Time::ZERO),
        ];
        let out = drain(&topo, line_rate(shared.clone()), flows, seed);
        assert_lossless_and_conserved(&out);
        (24..26).any(|agg| {
            let both_in = tx_packets(&out, 16, agg) > 0 && tx_packets(&out, 17, agg) > 0;
            let cores_used = (32..36).filter(|&c| tx_packets(&out, agg, c) > 0).count();
            both_in && cores_used == 2
        })
    });
    assert!(split_at_a_shared_agg);
}

#[test]
fn drill_keeps_the_local_queues_short_and_even_where_ecmp_and_rps_do_not() {
    // Twelve 25 Gbps flows from leaf 24 to leaf 25 over four uplinks, one of them slowed to
    // 25 Gbps: 300 Gbps offered to 325 Gbps. Oblivious schemes (ECMP per flow, RPS per packet)
    // send about a quarter of the traffic, 75 Gbps, to the slow uplink, whose queue grows to
    // the PFC threshold; DRILL sends each packet to the shorter of two sampled queues and the
    // remembered one, so the slow uplink only gets what it can drain.
    let mut p = slow_hosts(12);
    p.overrides = vec![(0, 0, Some(Rate::gbps(25)), None)];
    let topo = Topology::leaf_spine(&p);
    let flows: Vec<FlowSpec> = (0..12)
        .map(|i| flow(i, 12 + i, 2_000_000, Time::from_ns(7 * i as u64)))
        .collect();
    let uplinks = |lb: LbConfig| {
        let out = drain(&topo, line_rate(lb), flows.clone(), 4);
        assert_lossless_and_conserved(&out);
        let q: Vec<(u64, f64)> = (26..30)
            .map(|s| {
                let port = out
                    .ports
                    .iter()
                    .find(|p| p.node == 24 && p.peer == s)
                    .unwrap();
                (port.peak_queue_bytes, port.mean_queue_bytes)
            })
            .collect();
        let peak = q.iter().map(|x| x.0).max().unwrap();
        let means: Vec<f64> = q.iter().map(|x| x.1).collect();
        let spread = means.iter().cloned().fold(f64::MIN, f64::max)
            - means.iter().cloned().fold(f64::MAX, f64::min);
        (peak, spread)
    };
    let (drill_peak, drill_spread) = uplinks(LbConfig::Drill(DrillConfig::default()));
    let (ecmp_peak, ecmp_spread) = uplinks(LbConfig::default());
    let (rps_peak, rps_spread) = uplinks(LbConfig::Rps(RpsConfig {}));
    eprintln!(
        "peak/spread: drill {drill_peak} {drill_spread:.0}, ecmp {ecmp_peak} {ecmp_spread:.0}, \
         rps {rps_peak} {rps_spread:.0}"
    );
    assert!(drill_peak < 20_000, "DRILL peak queue {drill_peak} B");
    for (name, peak, spread) in [
        ("ECMP", ecmp_peak, ecmp_spread),
        ("RPS", rps_peak, rps_spread),
    ] {
        assert!(
            peak > 5 * drill_peak,
            "{name} peak {peak} B vs DRILL {drill_peak} B"
        );
        assert!(
            spread > 10.0 * drill_spread,
            "{name} mean-queue spread {spread:.0} B vs DRILL {drill_spread:.0} B"
        );
    }
}

#[test]
fn new_schemes_are_deterministic() {
    let topo = leaf_spine(2, 4, 8);
    let flows = shifted_flows();
    for lb in [
        LbConfig::Drb(DrbConfig::default()),
        LbConfig::LetFlow(LetFlowConfig::default()),
        LbConfig::Drill(DrillConfig::default()),
    ] {
        let cfg = with_lb(lb);
        let run = |seed| drain(&topo, cfg.clone(), flows.clone(), seed);
        let (a, b) = (run(7), run(7));
        assert_lossless_and_conserved(&a);
        assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
        assert_eq!(a.flows, b.flows);
    }
}

/// Two leaves of eight 25 Gbps hosts, four spines, 100 Gbps fabric links except one
/// leaf-spine link (both directions) at `slow`: hosts 0..16, leaves 16 and 17, spines 18..22.
fn degraded(leaf: u32, spine: u32, slow: Rate) -> Topology {
    let mut p = slow_hosts(8);
    p.overrides = vec![(leaf, spine, Some(slow), None)];
    Topology::leaf_spine(&p)
}

/// 96 flows of 100 KB from leaf 16 to leaf 17, one every 4 us (about 200 Gbps offered to a
/// fabric of 3 x 100 Gbps + the slow link), plus, if `reverse`, the same from leaf 17 to 16.
fn cross_leaf_flows(reverse: bool) -> Vec<FlowSpec> {
    let mut flows: Vec<FlowSpec> = (0..96u32)
        .map(|i| {
            flow(
                i % 8,
                8 + (i * 3 + i / 8) % 8,
                100_000,
                Time::from_us(4 * i as u64),
            )
        })
        .collect();
    if reverse {
        flows.extend((0..96u32).map(|i| {
            flow(
                8 + i % 8,
                (i * 5 + 1) % 8,
                100_000,
                Time::from_us(4 * i as u64 + 2),
            )
        }));
    }
    flows
}

#[test]
fn conga_avoids_a_degraded_uplink_by_its_local_dre() {
    // Leaf 16's uplink to spine 18 runs at 10 Gbps. ECMP hashes about a quarter of the flows
    // onto it; CONGA's source leaf sees that uplink's DRE, normalized by its rate, climb to
    // the top of the scale and places new flowlets elsewhere. Forcing a random or hashed
    // choice in CONGA makes it send as much as ECMP.
    let topo = degraded(0, 0, Rate::gbps(10));
    let run = |lb: LbConfig| {
        let out = drain(&topo, line_rate(lb), cross_leaf_flows(false), 9);
        assert_lossless_and_conserved(&out);
        tx_bytes(&out, 16, 18)
    };
    let ecmp = run(LbConfig::default());
    let conga = run(LbConfig::Conga(CongaConfig::default()));
    // As conweave-ns3 (DREs counted as packets are routed, windows that do not wrap, ...).
    let reference = run(conga_as_conweave_ns3());
    eprintln!("bytes on the slow uplink: ecmp {ecmp}, conga {conga}, as conweave-ns3 {reference}");
    assert!(
        ecmp > 1_000_000,
        "ECMP puts a share on the slow uplink: {ecmp}"
    );
    assert!(conga * 4 < ecmp, "CONGA {conga} B vs ECMP {ecmp} B");
    assert!(
        reference * 4 < ecmp,
        "CONGA (conweave-ns3) {reference} B vs ECMP {ecmp} B"
    );
}

/// `[lb] scheme = "conga"` with `preset = "conweave-ns3"`, read as a spec reads it.
fn conga_as_conweave_ns3() -> LbConfig {
    toml::from_str("scheme = \"conga\"\npreset = \"conweave-ns3\"").expect("the preset")
}

#[test]
fn conga_learns_a_degraded_remote_link_from_feedback() {
    // The link from spine 18 down to leaf 17 runs at 10 Gbps; leaf 16's own uplinks are all
    // fast, so only the CE folded in at spine 18 and fed back by leaf 17 can reveal it.
    // Traffic from 16 to 17 only: with `feedback_on_acks` the feedback rides on ACKs and CONGA
    // avoids the slow link; without it (the conweave-ns3 default) no packet carries feedback
    // back and CONGA does no better than ECMP. With data in both directions, the default
    // configuration gets the feedback on the reverse data.
    let topo = degraded(1, 0, Rate::gbps(10));
    let run = |lb: LbConfig, reverse: bool| {
        let out = drain(&topo, line_rate(lb), cross_leaf_flows(reverse), 9);
        assert_lossless_and_conserved(&out);
        tx_bytes(&out, 18, 17)
    };
    let acks = LbConfig::Conga(CongaConfig {
        feedback_on_acks: true,
        ..Default::default()
    });
    let plain = LbConfig::Conga(CongaConfig::default());
    let ecmp = run(LbConfig::default(), false);
    let with_acks = run(acks, false);
    let no_feedback = run(plain.clone(), false);
    let ecmp_both = run(LbConfig::default(), true);
    let reverse_data = run(plain, true);
    // As conweave-ns3: CE folded and read as packets are routed, random feedback entries.
    let reference = run(conga_as_conweave_ns3(), true);
    eprintln!(
        "bytes on the slow downlink: one way: ecmp {ecmp}, conga+acks {with_acks}, conga \
         {no_feedback}; both ways: ecmp {ecmp_both}, conga {reverse_data}, as conweave-ns3 \
         {reference}"
    );
    assert!(ecmp > 1_000_000, "{ecmp}");
    assert!(
        with_acks * 4 < ecmp,
        "CONGA with ACK feedback {with_acks} B vs ECMP {ecmp} B"
    );
    assert!(
        with_acks * 3 < no_feedback,
        "without feedback CONGA cannot see the link: {no_feedback} B vs {with_acks} B"
    );
    assert!(
        reverse_data * 2 < ecmp_both,
        "CONGA with reverse data {reverse_data} B vs ECMP {ecmp_both} B"
    );
    assert!(
        reference * 2 < ecmp_both,
        "CONGA (conweave-ns3) with reverse data {reference} B vs ECMP {ecmp_both} B"
    );
}

#[test]
fn conga_is_deterministic() {
    let topo = leaf_spine(2, 4, 8);
    let flows = shifted_flows();
    for feedback_on_acks in [false, true] {
        let cfg = with_lb(LbConfig::Conga(CongaConfig {
            feedback_on_acks,
            ..Default::default()
        }));
        let run = |seed| drain(&topo, cfg.clone(), flows.clone(), seed);
        let (a, b) = (run(7), run(7));
        assert_lossless_and_conserved(&a);
        assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
        assert_eq!(a.flows, b.flows);
    }
}

/// Runs until every flow has finished (HULA's probes never stop, so the network never drains),
/// losslessly, every byte delivered.
fn until_done_lossless(
    topo: &Topology,
    cfg: FabricConfig,
    flows: Vec<FlowSpec>,
    seed: u64,
) -> RunOutput {
    let out = until_done(topo, cfg, flows, seed);
    let s = &out.stats;
    assert_eq!(s.packets_dropped, 0);
    assert_eq!(s.flows_finished, s.flows_total);
    let total: u64 = out.flows.iter().map(|f| f.size_bytes).sum();
    assert_eq!(s.bytes_delivered, total);
    out
}

#[test]
fn hula_avoids_degraded_links_near_and_far_by_probed_utilization() {
    // A slow (10 Gbps) link at the source leaf's uplink, then one at the destination leaf's
    // downlink from spine 18. HULA's probes carry the maximum transmit utilization along each
    // path (normalized by each link's rate), so the source leaf's best hop towards leaf 17
    // avoids either; ECMP hashes a quarter of the flows onto it. Forcing the ECMP fallback in
    // HULA makes it send as much as ECMP.
    let hula = LbConfig::Hula(HulaConfig::default());
    for (leaf, node, peer) in [(0, 16, 18), (1, 18, 17)] {
        let topo = degraded(leaf, 0, Rate::gbps(10));
        let run = |lb: LbConfig| {
            let out = until_done_lossless(&topo, line_rate(lb), cross_leaf_flows(false), 9);
            tx_bytes(&out, node, peer)
        };
        let ecmp = run(LbConfig::default());
        let got = run(hula.clone());
        eprintln!("bytes on the slow link {node}->{peer}: ecmp {ecmp}, hula {got}");
        assert!(ecmp > 1_000_000, "{ecmp}");
        assert!(got * 3 < ecmp, "HULA {got} B vs ECMP {ecmp} B");
    }
}

#[test]
fn hula_probes_cross_links_and_runs_are_deterministic() {
    let topo = leaf_spine(2, 4, 8);
    let flows = shifted_flows();
    let cfg = with_lb(LbConfig::Hula(HulaConfig::default()));
    let run = |seed| until_done_lossless(&topo, cfg.clone(), flows.clone(), seed);
    let (a, b) = (run(7), run(7));
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(a.flows, b.flows);
    // Leaves (16, 17) probe each uplink every 10 us; spines send each probe on to the other
    // leaf. Nothing goes to hosts.
    let msgs = |node: u32, peer: u32| {
        a.ports
            .iter()
            .find(|p| p.node == node && p.peer == peer)
            .unwrap()
            .lb_messages_sent
    };
    let end_us = a.stats.end_ps / 1_000_000;
    for spine in 18..22 {
        for leaf in [16, 17] {
            let up = msgs(leaf, spine);
            assert!(
                up.abs_diff(end_us / 10 + 1) <= 1,
                "{leaf}->{spine}: {up}, {end_us} us"
            );
            assert!(msgs(spine, leaf).abs_diff(up) <= 1);
        }
    }
    assert!(a
        .ports
        .iter()
        .filter(|p| !p.is_switch || p.peer < 16)
        .all(|p| p.lb_messages_sent == 0));
}

#[test]
fn hula_probe_replication_in_a_fat_tree_is_loop_free_and_bounded() {
    // k = 4: 8 edge switches (ToRs). Per probe round a port carries at most one probe per
    // other ToR (an aggregation switch's downlink: the other edge of its pod and the six
    // remote ToRs). A replication loop or duplicate re-emission would exceed it.
    let link = (Rate::gbps(100), Time::from_us(1));
    let topo = Topology::fat_tree(4, link, link);
    let cfg = line_rate(LbConfig::Hula(HulaConfig::default()));
    let out = until_done_lossless(&topo, cfg, vec![flow(0, 4, 2_000_000, Time::ZERO)], 3);
    let rounds = out.stats.end_ps / 10_000_000 + 1;
    let max = out.ports.iter().map(|p| p.lb_messages_sent).max().unwrap();
    assert!(
        max <= 7 * rounds,
        "{max} probes on a port in {rounds} rounds"
    );
    assert!(
        max >= 7 * (rounds - 2),
        "{max} probes on a port in {rounds} rounds"
    );
    // Edge uplinks carry only their own ToR's probe; nothing goes to hosts.
    for p in out
        .ports
        .iter()
        .filter(|p| (16..24).contains(&p.node) && p.peer >= 24)
    {
        assert!(p.lb_messages_sent.abs_diff(rounds) <= 1, "{p:?}");
    }
    assert!(out
        .ports
        .iter()
        .filter(|p| p.peer < 16)
        .all(|p| p.lb_messages_sent == 0));
}

/// `kind = "permutation"` end to end: on a k = 4 fat-tree (16 hosts) without congestion
/// control, every host sends one 200 KB flow and receives one, and every flow finishes with
/// its bytes delivered once.
#[test]
fn a_permutation_finishes_every_flow_and_delivers_every_byte() {
    let text = r#"
seed = 3
[topology]
kind = "fat_tree"
k = 4
host_link = { rate = "100Gbps", delay = "1us" }
fabric_link = { rate = "100Gbps", delay = "1us" }
[cc]
kind = "none"
[[traffic]]
kind = "permutation"
size = "200KB"
"#;
    let out = crate::testing::run_text(text, "permutation.toml");
    assert_lossless_and_conserved(&out);
    assert_eq!(out.stats.flows_total, 16);
    assert_eq!(out.stats.bytes_delivered, 16 * 200_000);
    let ends: [fn(&FlowRecord) -> u32; 2] = [|f| f.src, |f| f.dst];
    for end in ends {
        let mut hosts: Vec<u32> = out.flows.iter().map(end).collect();
        hosts.sort();
        assert_eq!(hosts, (0..16).collect::<Vec<u32>>(), "each host once");
    }
    assert!(out
        .flows
        .iter()
        .all(|f| f.src != f.dst && f.source == "permutation"));
}
