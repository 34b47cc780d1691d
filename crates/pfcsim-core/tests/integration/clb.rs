//! CLB end to end (`docs/schemes/clb.md`): the coflow tie-break splitting a coflow's flows
//! over the uplinks, Algorithm 2 preferring a large shrinking queue (class A) to a small
//! growing one (B), and the Fig. 4 motivation case of the paper. Each test also runs the case
//! with the schemes or the step it would catch removed (ECMP, DRILL, `tie_break = "random"`)
//! and checks that the same assertion fails for them.

use crate::testing::{self, assert_lossless_and_conserved};
use pfcsim_core::lb::clb::{Granularity, TieBreak};
use pfcsim_core::lb::{ClbConfig, DrillConfig, EcmpConfig, LbConfig};
use pfcsim_core::sim::{FabricConfig, RunOutput};
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::units::{Bytes, Rate, Time};

const US: fn(u64) -> Time = Time::from_us;

fn clb(granularity: Granularity, tie_break: TieBreak) -> LbConfig {
    LbConfig::Clb(ClbConfig {
        granularity,
        tie_break,
        ..ClbConfig::default()
    })
}

/// A flow of coflow `coflow` (if any), pinned to uplink `pin` (0-based, if any).
fn flow(
    src: u32,
    dst: u32,
    size: u64,
    start: Time,
    coflow: Option<u32>,
    pin: Option<u32>,
) -> FlowSpec {
    FlowSpec {
        coflow,
        path_tag: pin.map_or(0, |c| c + 1),
        ..testing::flow(src, dst, size, start)
    }
}

/// Runs to 20 ms (CLB's sampling timer never stops; every flow here ends well before).
fn run(topo: &Topology, cfg: FabricConfig, flows: Vec<FlowSpec>, seed: u64) -> RunOutput {
    let out = testing::run_until(topo, cfg, flows, seed, Time::from_ms(20));
    assert_lossless_and_conserved(&out);
    out
}

// ---- Four flows of one coflow at an idle leaf with two uplinks.

/// 2 leaves x 2 spines x 4 hosts, 100 Gbps and 1 us (hosts 0-7, leaves 8, 9, spines 10, 11).
fn two_uplinks() -> Topology {
    testing::leaf_spine(2, 2, 4)
}

/// Whether the four flows of one coflow (hosts 0-3 to 4-7, 100, 200, 400 and 800 packets of
/// 1 KB, one after the other at 0, 20, 60 and 120 us, each alone in the fabric while it
/// sends: every queue stays empty) each kept one path and split two and two over leaf 8's
/// two uplinks.
fn split_two_and_two(lb: LbConfig, seed: u64) -> bool {
    let flows = [0, 20, 60, 120]
        .into_iter()
        .zip(0..4)
        .map(|(at, i)| flow(i, 4 + i, 100_000 << i, US(at), Some(0), None))
        .collect();
    let out = run(&two_uplinks(), testing::line_rate(lb), flows, seed);
    if out.flows.iter().any(|f| f.paths_used != 1) {
        return false;
    }
    // The subset of flows whose packets crossed spine 10: exactly two of the four.
    let via_first = testing::tx_packets(&out, 8, 10);
    let subsets: Vec<u32> = (0u32..16)
        .filter(|mask| {
            let sent: u64 = (0..4)
                .filter(|i| mask & 1 << i != 0)
                .map(|i| out.flows.iter().find(|f| f.src == i).unwrap().packets_sent)
                .sum();
            sent == via_first
        })
        .collect();
    assert_eq!(subsets.len(), 1, "the packet counts identify the flows");
    subsets[0].count_ones() == 2
}

/// Per flow (`granularity = "flow"`), every uplink is in class A with an empty queue, so
/// only `Tr` tells them apart: each flow of the coflow goes where the coflow has sent least
/// (decayed), 100 KB | 200 KB, then 400 KB with the 100 KB, 800 KB with the 200 KB: 2 + 2
/// at every seed. Hashing (ECMP), drawing the ties at random (the tie-break removed) or
/// DRILL's random samples put three or four on one uplink at some seed.
#[test]
fn four_flows_of_a_coflow_split_two_and_two_over_two_uplinks() {
    let seeds = 1..=8;
    for seed in seeds.clone() {
        assert!(
            split_two_and_two(clb(Granularity::Flow, TieBreak::Coflow), seed),
            "seed {seed}"
        );
    }
    for (name, lb) in [
        ("ecmp", LbConfig::Ecmp(EcmpConfig::default())),
        ("drill", LbConfig::Drill(DrillConfig::default())),
        ("clb, random ties", clb(Granularity::Flow, TieBreak::Random)),
    ] {
        let all = seeds
            .clone()
            .all(|seed| split_two_and_two(lb.clone(), seed));
        assert!(!all, "{name} split 2 + 2 at every seed too");
    }
}

// ---- A growing queue below Q_thr (B) against a larger shrinking one (A).

/// Packets of the probe flows (host 0 to 6, eight flows of 10 packets at 36 us) that left
/// leaf 8 by spine 11, whose queue is growing (two flows pinned there from 30 us) but smaller
/// than spine 10's, which drains a burst (two flows pinned there from 0 to 24 us).
fn probes_on_the_growing_uplink(lb: LbConfig) -> (u64, RunOutput) {
    let mut flows = vec![
        flow(0, 4, 300_000, Time::ZERO, None, Some(0)),
        flow(1, 4, 300_000, Time::ZERO, None, Some(0)),
        flow(2, 5, 300_000, US(30), None, Some(1)),
        flow(3, 5, 300_000, US(30), None, Some(1)),
    ];
    flows.extend((0..8).map(|_| flow(0, 6, 10_000, US(36), None, None)));
    let out = run(&two_uplinks(), testing::line_rate(lb), flows, 1);
    let pinned: u64 = out
        .flows
        .iter()
        .filter(|f| f.src == 2 || f.src == 3)
        .map(|f| f.packets_sent)
        .sum();
    (testing::tx_packets(&out, 8, 11) - pinned, out)
}

/// At 36 us spine 10's queue holds about 150 KB and shrinks (A), spine 11's about 75 KB and
/// grows (B): CLB sends every probe packet to the larger, shrinking queue. DRILL (the least
/// queue) and ECMP (hashing) send probe packets to the growing one.
#[test]
fn a_growing_queue_below_q_thr_loses_packets_to_a_larger_shrinking_one() {
    let (on_growing, out) =
        probes_on_the_growing_uplink(clb(Granularity::Packet, TieBreak::Coflow));
    assert_eq!(on_growing, 0);
    let chosen_a = out.stats.counter("clb.class_a");
    assert_eq!((chosen_a, out.stats.counter("clb.class_b")), (80, 0));
    let (drill, _) = probes_on_the_growing_uplink(LbConfig::Drill(DrillConfig::default()));
    assert!(drill >= 10, "DRILL sent {drill} of 80 to the growing queue");
    let (ecmp, _) = probes_on_the_growing_uplink(LbConfig::Ecmp(EcmpConfig::default()));
    assert!(ecmp >= 10, "ECMP sent {ecmp} of 80 to the growing queue");
}

// ---- The Fig. 4 motivation case.

/// The paper's Fig. 3 fabric: 2 leaves x 3 spines x 3 hosts, 40 Gbps and 5 us, 9 MB buffers,
/// static PFC threshold 256 KB, DCQCN (hosts 0-5, leaves 6, 7, spines 8-10).
fn fig4(lb: LbConfig) -> (Topology, FabricConfig) {
    let rate = Rate::gbps(40);
    let topo = Topology::leaf_spine(&LeafSpine::uniform(2, 3, 3, rate, US(5)));
    let mut cfg = testing::with_lb(lb);
    cfg.switch.buffer = Bytes(9_000_000);
    cfg.switch.pfc.static_threshold = Some(Bytes(256_000));
    (topo, cfg)
}

/// Coflow A = {A1: H1 to R1 pinned via S1, A2: H2 to R2}, 1 MB each at 200 us, and flow B:
/// H3 to R3 pinned via S2, 5 MB from 0. Returns A's CCT (its last flow's FCT) and whether
/// A2 crossed S2 (leaf 6's port to spine 9 carried more than B's packets).
fn fig4_cct(lb: LbConfig, seed: u64) -> (f64, bool) {
    let (topo, cfg) = fig4(lb);
    let flows = vec![
        flow(2, 5, 5_000_000, Time::ZERO, None, Some(1)),
        flow(0, 3, 1_000_000, US(200), Some(0), Some(0)),
        flow(1, 4, 1_000_000, US(200), Some(0), None),
    ];
    let out = run(&topo, cfg, flows, seed);
    let b = out.flows.iter().find(|f| f.src == 2).unwrap().packets_sent;
    let a2_via_s2 = testing::tx_packets(&out, 6, 9) > b + 100;
    let cct = out
        .flows
        .iter()
        .filter(|f| f.src != 2)
        .map(|f| f.fct_ps.unwrap())
        .max()
        .unwrap();
    (cct as f64 / 1e6, a2_via_s2)
}

/// The paper's case: ECMP hashes A2 onto B's spine (seed 1 does), where A2 shares S2 with
/// B and DCQCN cuts its rate; CLB moves A2's packets off S2 as its queue grows and A's CCT
/// is shorter, though A2 pays for its reordering with go-back-N retransmissions (see
/// `docs/results/clb/fig4.md`: where ECMP hashes A2 onto the idle S3, ECMP wins).
#[test]
fn on_the_fig4_fabric_clb_beats_ecmp() {
    let seed = 1;
    let (ecmp, collided) = fig4_cct(LbConfig::Ecmp(EcmpConfig::default()), seed);
    assert!(
        collided,
        "ECMP did not put A2 on S2: the case is not exercised"
    );
    let (c, _) = fig4_cct(clb(Granularity::Packet, TieBreak::Coflow), seed);
    assert!(c < 0.97 * ecmp, "CLB {c:.0} us, ECMP {ecmp:.0} us");
}

/// Same seed, same run.
#[test]
fn clb_runs_are_deterministic() {
    let flows = || {
        (0..4)
            .map(|i| flow(i, 4 + i, 100_000, Time::ZERO, Some(i % 2), None))
            .collect()
    };
    let lb = clb(Granularity::Packet, TieBreak::Coflow);
    let a = run(&two_uplinks(), testing::with_lb(lb.clone()), flows(), 3);
    let b = run(&two_uplinks(), testing::with_lb(lb), flows(), 3);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(a.stats.scheme_counters, b.stats.scheme_counters);
}

/// Bad CLB keys are refused before any simulation, naming the key and the range.
#[test]
fn bad_clb_keys_are_refused() {
    for (body, expected) in [
        (
            "q_thr_fraction = 1.5",
            "lb.q_thr_fraction: 1.5 is out of range",
        ),
        ("interval = \"0s\"", "lb.interval"),
        ("coflow_slots = 0", "lb.coflow_slots: 0 is out of range"),
        ("a = 0.0", "lb.a: 0 is out of range"),
        ("granularity = \"flowlets\"", "granularity"),
    ] {
        let mut table = testing::tiny();
        let lb = format!("scheme = \"clb\"\n{body}");
        table.insert("lb".into(), toml::Value::Table(lb.parse().unwrap()));
        let e = testing::spec_error(&testing::to_text(&table), "clb.toml");
        assert!(e.contains(expected), "{body}: {e}");
    }
}
