//! The rate-based congestion controls of RoCE flows end to end (TIMELY, against DCQCN and
//! none): each test fails if the mechanism it names is removed. The algorithms' own
//! arithmetic is tested in `src/cc/timely.rs`.

use crate::testing::{self, flow, leaf_spine, port, tx_bytes, until_done};
use pfcsim_core::cc::{CcConfig, TimelyConfig};
use pfcsim_core::sim::{FabricConfig, RunOutput};
use pfcsim_core::units::Time;

fn with_cc(cc: CcConfig) -> FabricConfig {
    FabricConfig {
        cc,
        ..Default::default()
    }
}

fn timely() -> CcConfig {
    CcConfig::Timely(TimelyConfig::default())
}

/// Three hosts of one leaf send 4 MB each to a host of the other (2 leaves x 1 spine x 4
/// hosts: hosts 0-7, leaves 8 and 9, spine 10): their leaf's uplink to the spine is the one
/// bottleneck.
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

/// The same spec and seed give the same run under TIMELY.
#[test]
fn timely_runs_are_deterministic() {
    let text = format!("{}\n[cc]\nkind = \"timely\"\n", testing::TINY);
    let a = testing::run_text(&text, "cc.toml");
    let b = testing::run_text(&text, "cc.toml");
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(a.stats.events, b.stats.events);
    testing::assert_complete(&a);
}
