//! The run-wide reordering and PFC metrics (`RunStats`): out-of-order degree distribution,
//! out-of-order ratio, PFC pause rate and PAUSE frame rate. Each test fails if the measurement
//! it names is removed or computed differently.

use crate::testing::{flow, leaf_spine, line_rate, run_until as run, tx_packets, until_done};

use pfcsim_core::lb::{DrbConfig, LbConfig};
use pfcsim_core::metrics::RunStats;
use pfcsim_core::sim::RunOutput;
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::units::{Rate, Time};

/// Host 0 (leaf 2) sends to host 1 (leaf 3) over spine 4 (5 us links) or spine 5 (14 us
/// links). DRB alternates the spines packet by packet, starting at a random one.
fn two_delays() -> Topology {
    let d = Time::from_us(5);
    let mut p = LeafSpine::uniform(2, 2, 1, Rate::gbps(100), d);
    let slow = Some(Time::from_us(14));
    p.overrides = vec![(0, 1, None, slow), (1, 1, None, slow)];
    Topology::leaf_spine(&p)
}

#[test]
fn out_of_order_degrees_are_exactly_what_go_back_n_implies_on_two_paths() {
    // 201 packets at line rate (T = 1048 B / 100 Gbps = 83.84 ns apart) leave within 16.9 us,
    // less than the 18 us the slow path adds: every packet of the fast path arrives before
    // any of the slow one, in order, 2T apart, and nothing queues. The receiver accepts only
    // the expected packet and discards the rest (go-back-N), so, with p the first packet:
    // * p on the fast path (even packets fast): 0 is accepted; 2, 4, .., 200 arrive with
    //   expected 1: degrees 1, 3, .., 199. Then 1 is accepted; 3, 5, .., 199 arrive with
    //   expected 2: degrees 1, 3, .., 197. 199 out-of-order arrivals.
    // * p on the slow path (odd packets fast): 1, 3, .., 199 arrive with expected 0: degrees
    //   1, 3, .., 199. Then 0 is accepted; 2, 4, .., 200 arrive with expected 1: degrees
    //   1, 3, .., 199. 200 out-of-order arrivals.
    // Either way each odd degree below 199 occurs twice, so the median (rank 100) is 99 and
    // the 99th percentile (rank 198 of 199 or 200) is 197, while the maximum is 199.
    //
    // The run stops before any retransmission can arrive: the first NACK leaves the receiver
    // at the earliest with the second packet (T + one-way delay), takes at least 4 x 5 us back,
    // and the resent packet another one-way delay; the last first transmission arrives at
    // 200 T + one-way delay + 18 us.
    let topo = two_delays();
    let t = Rate::gbps(100).tx_time(1048).ps();
    let us = Time::from_us(1).ps();
    let one_way = 20 * us + 4 * t; // four store-and-forward hops on the fast path
    let last_first = 200 * t + one_way + 18 * us;
    let first_resend = t + one_way + 20 * us + one_way;
    assert!(last_first < first_resend);
    let stop = Time::from_ps((last_first + first_resend) / 2);

    let mut cases_seen = [false; 2];
    for seed in 1..=8 {
        let out = run(
            &topo,
            line_rate(LbConfig::Drb(DrbConfig::default())),
            vec![flow(0, 1, 201_000, Time::ZERO)],
            seed,
            stop,
        );
        // Packets 0, 2, .., 200 took the first packet's spine.
        let (fast, slow) = (tx_packets(&out, 4, 3), tx_packets(&out, 5, 3));
        let first_slow = match (fast, slow) {
            (101, 100) => false,
            (100, 101) => true,
            other => panic!("seed {seed}: spines carried {other:?} packets"),
        };
        cases_seen[first_slow as usize] = true;
        let ooo = if first_slow { 200 } else { 199 };
        let s = &out.stats;
        let f = &out.flows[0];
        assert_eq!(
            f.packets_received, 201,
            "seed {seed}: no retransmission arrived"
        );
        assert_eq!(
            (f.ooo_arrivals, f.max_ooo_degree),
            (ooo, 199),
            "seed {seed}"
        );
        assert_eq!(
            (s.data_packets_received, s.ooo_arrivals),
            (201, ooo),
            "seed {seed}"
        );
        assert_eq!(s.ooo_ratio, ooo as f64 / 201.0, "seed {seed}");
        assert_eq!(
            (s.ood_p50, s.ood_p99, s.ood_max),
            (99, 197, 199),
            "seed {seed}"
        );
    }
    assert_eq!(cases_seen, [true, true], "both first spines occur");
}

/// The run-wide counters agree with the per-flow records.
fn assert_consistent(out: &RunOutput) {
    let s = &out.stats;
    let received: u64 = out.flows.iter().map(|f| f.packets_received).sum();
    let ooo: u64 = out.flows.iter().map(|f| f.ooo_arrivals).sum();
    let max = out
        .flows
        .iter()
        .map(|f| f.max_ooo_degree)
        .max()
        .unwrap_or(0);
    assert_eq!(s.data_packets_received, received);
    assert_eq!(s.ooo_arrivals, ooo);
    assert_eq!(s.ood_max, max as u64);
    assert!(s.ood_p50 <= s.ood_p99 && s.ood_p99 <= s.ood_max);
    let ratio = if received > 0 {
        ooo as f64 / received as f64
    } else {
        0.0
    };
    assert_eq!(s.ooo_ratio, ratio);
}

#[test]
fn a_reordering_run_to_the_end_counts_every_arrival_and_retransmission() {
    // The same two paths, run until the network drains: go-back-N retransmits, and every
    // data packet that reaches the receiver (retransmitted copies and duplicates included)
    // is counted once.
    let out = run(
        &two_delays(),
        line_rate(LbConfig::Drb(DrbConfig::default())),
        vec![flow(0, 1, 201_000, Time::ZERO)],
        1,
        Time::from_ms(100),
    );
    let s = &out.stats;
    let f = &out.flows[0];
    assert_eq!(s.flows_finished, 1);
    assert_eq!(s.packets_dropped, 0);
    assert!(f.retransmitted_bytes > 0);
    // Lossless and drained: every data packet sent arrived.
    assert_eq!(f.packets_received, f.packets_sent);
    assert!(s.ooo_arrivals > 201, "go-back-N rounds reorder again");
    assert_consistent(&out);
}

/// `(pause rate, PAUSE frames per port per second)` computed by hand from the port records:
/// the ports whose peer is a switch (node id >= `hosts` in a leaf-spine), over the time from
/// the first flow's start to the end of the run.
fn by_hand(out: &RunOutput, hosts: u32) -> (f64, f64) {
    let s = &out.stats;
    let pausable: Vec<_> = out.ports.iter().filter(|p| p.peer >= hosts).collect();
    let interval = (s.end_ps - s.measure_from_ps) as f64;
    let paused: u64 = pausable.iter().map(|p| p.paused_time_ps).sum();
    let frames: u64 = out.ports.iter().map(|p| p.pfc_pauses_sent).sum();
    let port_time = pausable.len() as f64 * interval;
    (
        paused as f64 / port_time,
        frames as f64 / (port_time * 1e-12),
    )
}

fn assert_close(a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-300), "{a} vs {b}");
}

#[test]
fn ecmp_without_congestion_neither_reorders_nor_pauses() {
    // Eight cross-leaf flows from distinct senders to distinct receivers, one hashed path
    // each: nothing is reordered, and with two flows at most per 100 Gbps spine link the
    // queues stay far below the PFC threshold.
    let topo = leaf_spine(2, 4, 8);
    let flows: Vec<FlowSpec> = (0..8)
        .map(|i| flow(i, 8 + i, 500_000, Time::from_us(10 + i as u64)))
        .collect();
    let out = run(
        &topo,
        line_rate(LbConfig::default()),
        flows,
        3,
        Time::from_ms(100),
    );
    let s = &out.stats;
    assert_eq!(s.flows_finished, 8);
    assert_eq!(s.measure_from_ps, Time::from_us(10).ps());
    assert_eq!(s.data_packets_received, 8 * 500);
    assert_eq!(s.ooo_arrivals, 0);
    assert_eq!(s.ooo_ratio, 0.0);
    assert_eq!((s.ood_p50, s.ood_p99, s.ood_max), (0, 0, 0));
    assert!(out.ports.iter().all(|p| p.pfc_pauses_sent == 0));
    assert_eq!((s.pfc_pause_rate, s.pfc_pauses_per_port_s), (0.0, 0.0));
    assert_consistent(&out);
}

#[test]
fn incast_pause_rate_is_the_paused_share_of_pausable_port_time() {
    // Sixteen senders on two leaves to one receiver (the incast of `fabric`): PFC
    // pauses the spines, the senders' leaves and the senders' NICs.
    let topo = leaf_spine(3, 2, 8);
    let flows = (8..24)
        .map(|src| flow(src, 0, 1_500_000, Time::from_us(3)))
        .collect();
    let out = until_done(&topo, line_rate(LbConfig::default()), flows, 1);
    let s = &out.stats;
    assert_eq!(s.flows_finished, 16);
    assert_eq!(
        s.end_ps,
        out.flows.iter().filter_map(|f| f.finish_ps).max().unwrap()
    );
    assert!(out.ports.iter().any(|p| p.pfc_pauses_sent > 0));
    assert!(
        s.pfc_pause_rate > 0.0 && s.pfc_pause_rate < 1.0,
        "{}",
        s.pfc_pause_rate
    );
    let (rate, frames) = by_hand(&out, 24);
    assert_close(s.pfc_pause_rate, rate);
    assert_close(s.pfc_pauses_per_port_s, frames);
    assert!(s.pfc_pauses_per_port_s > 0.0);
    // The ports facing hosts are never paused (hosts send no PFC) and are not counted: the
    // rate over every port would be smaller.
    let all_ports: u64 = out.ports.iter().map(|p| p.paused_time_ps).sum();
    let over_all =
        all_ports as f64 / (out.ports.len() as f64 * (s.end_ps - s.measure_from_ps) as f64);
    assert!(over_all < s.pfc_pause_rate);
    assert_consistent(&out);
}

#[test]
fn run_stats_serialize_the_new_fields() {
    let json = serde_json::to_value(RunStats::default()).unwrap();
    for key in [
        "measure_from_ps",
        "data_packets_received",
        "ooo_arrivals",
        "ooo_ratio",
        "ood_p50",
        "ood_p99",
        "ood_max",
        "pfc_pause_rate",
        "pfc_pauses_per_port_s",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
}
