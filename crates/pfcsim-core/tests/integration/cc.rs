//! The rate-based congestion controls of RoCE flows end to end (TIMELY, HPCC, against DCQCN
//! and none): each test fails if the mechanism it names is removed. The algorithms' own
//! arithmetic is tested in `src/cc/timely.rs` and `src/cc/hpcc.rs`, the window's hold on the
//! sender in `src/transport/roce/mod.rs`.

use crate::testing::{self, flow, leaf_spine, port, tx_bytes, until_done};
use pfcsim_core::cc::{CcConfig, HpccConfig, TimelyConfig};
use pfcsim_core::sim::{FabricConfig, RunOutput};
use pfcsim_core::units::Time;

fn with_cc(cc: CcConfig) -> FabricConfig {
    FabricConfig {
        cc,
        ..Default::default()
    }
}

fn hpcc() -> CcConfig {
    CcConfig::Hpcc(HpccConfig::default())
}

fn timely() -> CcConfig {
    CcConfig::Timely(TimelyConfig::default())
}

/// Three hosts of one leaf send 4 MB each to a host of the other (2 leaves x 1 spine x 4
/// hosts: hosts 0-7, leaves 8 and 9, spine 10): their leaf's uplink to the spine is the one
/// bottleneck, on a path whose base RTT is the fabric's largest (HPCC's `T`).
fn incast(cc: CcConfig) -> RunOutput {
    let flows = (5..=7).map(|s| flow(s, 0, 4_000_000, Time::ZERO)).collect();
    let out = until_done(&leaf_spine(2, 1, 4), with_cc(cc), flows, 1);
    testing::assert_lossless_and_conserved(&out);
    out
}

/// The bottleneck's mean queue (bytes) and utilisation (wire bytes it sent over the time the
/// flows took, at 100 Gbps).
fn bottleneck(out: &RunOutput) -> (f64, f64) {
    let p = port(out, 9, 10);
    let last = out.flows.iter().filter_map(|f| f.finish_ps).max().unwrap();
    let utilisation = p.tx_bytes as f64 * 8.0 / (last as f64 * 1e-12) / 1e11;
    (p.mean_queue_bytes, utilisation)
}

/// HPCC holds a single bottleneck near eta x capacity with a near-empty queue, where DCQCN
/// builds a standing queue (around its marking threshold) and, with its slow recovery
/// (300 us increase timer), leaves the link idle a good part of the time.
#[test]
fn hpcc_holds_a_bottleneck_near_eta_with_a_near_empty_queue() {
    let (hpcc_queue, hpcc_util) = bottleneck(&incast(hpcc()));
    let (dcqcn_queue, dcqcn_util) = bottleneck(&incast(CcConfig::default()));
    eprintln!("hpcc {hpcc_queue:.0} B {hpcc_util:.4}; dcqcn {dcqcn_queue:.0} B {dcqcn_util:.4}");
    assert!((0.90..0.97).contains(&hpcc_util), "HPCC at {hpcc_util}");
    assert!(hpcc_queue < 10_000.0, "HPCC's mean queue {hpcc_queue} B");
    assert!(
        dcqcn_queue > 5.0 * hpcc_queue,
        "DCQCN's mean queue {dcqcn_queue} B"
    );
}

/// A lone flow under HPCC reads its path's telemetry and settles at eta of the line rate
/// (without the telemetry it would stay at line rate, as under DCQCN without marks).
#[test]
fn a_lone_hpcc_flow_runs_at_eta_of_the_line() {
    let size = 20_000_000;
    let slowdown = |cc| {
        let out = until_done(
            &leaf_spine(2, 1, 1),
            with_cc(cc),
            vec![flow(0, 1, size, Time::ZERO)],
            1,
        );
        testing::assert_lossless_and_conserved(&out);
        out.flows[0].slowdown.unwrap()
    };
    let (hpcc, dcqcn) = (slowdown(hpcc()), slowdown(CcConfig::default()));
    eprintln!("slowdown hpcc {hpcc:.4} dcqcn {dcqcn:.4}");
    assert!(dcqcn < 1.01, "DCQCN alone: {dcqcn}");
    assert!(
        (1.0 / 0.97..1.0 / 0.92).contains(&hpcc),
        "HPCC alone: {hpcc}"
    );
}

/// TIMELY cuts its rate when the RTT climbs past t_low with a positive gradient: with t_low
/// below the queueing delay of the incast the bottleneck's queue stays far below that of
/// senders without congestion control (which fill it up to PFC's threshold).
#[test]
fn timely_cuts_when_the_rtt_rises_above_t_low() {
    let low = CcConfig::Timely(TimelyConfig {
        t_low: Time::from_us(10),
        t_high: Time::from_us(100),
        ..TimelyConfig::default()
    });
    let (timely_queue, timely_util) = bottleneck(&incast(low));
    let none = incast(CcConfig::None);
    let (none_queue, _) = bottleneck(&none);
    eprintln!("timely {timely_queue:.0} B {timely_util:.4}; none {none_queue:.0} B");
    assert!(
        timely_queue * 3.0 < none_queue,
        "TIMELY {timely_queue} B, none {none_queue} B"
    );
    assert!(timely_util > 0.6, "TIMELY at {timely_util}");
}

/// The congestion control's header bytes ride on every data packet and ACK: 100 full packets
/// and their 100 ACKs on an idle path.
#[test]
fn cc_header_bytes_count_on_the_wire() {
    for (cc, data, ack) in [
        (hpcc(), 1_000 + 48 + 42, 64 + 42),
        (timely(), 1_000 + 48 + 8, 64 + 8),
        (CcConfig::default(), 1_000 + 48, 64),
    ] {
        let out = until_done(
            &leaf_spine(2, 1, 1),
            with_cc(cc.clone()),
            vec![flow(0, 1, 100_000, Time::ZERO)],
            1,
        );
        testing::assert_lossless_and_conserved(&out);
        assert_eq!(testing::retransmitted(&out), 0);
        // Hosts 0 and 1 under leaves 2 and 3.
        assert_eq!(tx_bytes(&out, 0, 2), 100 * data, "{cc:?}");
        assert_eq!(tx_bytes(&out, 1, 3), 100 * ack, "{cc:?}");
    }
}

/// The same spec and seed give the same run under TIMELY and HPCC.
#[test]
fn timely_and_hpcc_runs_are_deterministic() {
    for kind in ["timely", "hpcc"] {
        let text = format!("{}\n[cc]\nkind = \"{kind}\"\n", testing::TINY);
        let a = testing::run_text(&text, "cc.toml");
        let b = testing::run_text(&text, "cc.toml");
        assert_eq!(a.stats.fingerprint, b.stats.fingerprint, "{kind}");
        assert_eq!(a.stats.events, b.stats.events, "{kind}");
        testing::assert_complete(&a);
    }
}
