//! Unit tests of CLB: Algorithm 1's class boundaries, Algorithm 2's order of rules and its
//! tie-breaks, T2's sampling, T3's decay, the granularities, the validation messages.

use super::*;
use crate::engine::{rng_stream, Rng, StreamKind};
use crate::lb::{LbAction, SchemeConfig, TestSwitch, NO_TOR};
use crate::mmu::{Mmu, Threshold};
use crate::packet::PacketKind;
use crate::port::PortState;

const US: fn(u64) -> Time = Time::from_us;
const THR: u64 = 170_000;

fn rng() -> Rng {
    rng_stream(11, StreamKind::Switch, 4)
}

/// A leaf: ports 0-1 to hosts, 2-5 up.
fn leaf() -> LbFabric {
    LbFabric {
        node: 4,
        nodes: 10,
        tor_of: vec![0, 0, 1, 1, NO_TOR, NO_TOR, NO_TOR, NO_TOR, NO_TOR, NO_TOR],
        tors: 2,
        my_tor: Some(0),
        port_dir: vec![
            PortDir::Host,
            PortDir::Host,
            PortDir::Up,
            PortDir::Up,
            PortDir::Up,
            PortDir::Up,
        ],
        port_rate_bps: vec![40_000_000_000; 6],
        port_delay_ps: vec![5_000_000; 6],
        tor_hops: vec![0, 2],
    }
}

const UPLINKS: [u16; 4] = [2, 3, 4, 5];

fn data(sport: u16, coflow: u32) -> Packet {
    let mut p = Packet::new(PacketKind::Data);
    (p.src, p.dst, p.sport, p.dport, p.wire_bytes, p.priority) = (0, 2, sport, 100, 1048, 3);
    p.lb.meta = coflow;
    p
}

fn ctx_with<'a>(
    w: &'a mut TestSwitch,
    now: Time,
    ports: &'a [PortState],
    mmu: Option<&'a Mmu>,
) -> LbCtx<'a> {
    LbCtx {
        now,
        node: w.node,
        ports,
        loopback: None,
        mmu,
        rng: &mut w.rng,
        layer: w.layer,
        arrived: Time::ZERO,
        actions: &mut w.actions,
    }
}

fn fixed(q_thr: u64) -> ClbConfig {
    ClbConfig {
        q_thr: crate::units::Bytes(q_thr),
        ..ClbConfig::default()
    }
}

/// Algorithm 1 at and around `Q_thr` and `G = 0`; `Q = Q_thr` with a growing queue is D.
#[test]
fn classes_split_at_q_thr_and_zero_growth() {
    assert_eq!(classify(0, 0, THR), Class::A);
    assert_eq!(classify(THR - 1, 0, THR), Class::A);
    assert_eq!(classify(THR - 1, -5, THR), Class::A);
    assert_eq!(classify(THR - 1, 1, THR), Class::B);
    assert_eq!(classify(THR, 0, THR), Class::C);
    assert_eq!(classify(THR, -1, THR), Class::C);
    assert_eq!(classify(THR, 1, THR), Class::D);
    assert_eq!(classify(THR + 1, 1, THR), Class::D);
    assert!(Class::A < Class::B && Class::B < Class::C && Class::C < Class::D);
}

/// Algorithm 2's order: any A beats any B (even a B with a smaller queue), any B beats any
/// C, any C any D; within A and C the least Q, within B and D the least G.
#[test]
fn algorithm_2_takes_the_best_class_then_its_key() {
    let cands = [0u16, 1, 2, 3];
    let pick = |view: [(u64, i64); 4]| {
        let d = decide(&cands, |p| view[p as usize], THR, None, &mut rng());
        (d.port, d.class, d.settled)
    };
    // A (larger Q, shrinking) beats B (smaller Q, growing).
    let a_b = [(50_000, 10), (90_000, -3), (1_000, 1), (60_000, 0)];
    assert_eq!(pick(a_b), (3, Class::A, Settled::Class));
    // Among B: the least G, not the least Q.
    let bs = [(10_000, 500), (100_000, 20), (150_000, 40), (200_000, 1)];
    assert_eq!(pick(bs), (1, Class::B, Settled::Class));
    // B beats C whatever the growths: C has reached Q_thr.
    let b_c = [(THR, -9_000), (THR - 1, 80_000), (THR + 5, 0), (THR * 2, 9)];
    assert_eq!(pick(b_c), (1, Class::B, Settled::Class));
    // Among C: the least Q (the least Q - Q_thr).
    let cs = [(THR + 10, 0), (THR + 5, -1), (THR * 2, -1_000), (THR, 7)];
    assert_eq!(pick(cs), (1, Class::C, Settled::Class));
    // Only D: the least G (line 14 of Algorithm 2 reads "C"; D is meant).
    let ds = [(THR + 10, 30), (THR * 3, 2), (THR, 9), (THR + 1, 40)];
    assert_eq!(pick(ds), (1, Class::D, Settled::Class));
}

/// Tied ports: the least `Tr` of the coflow, then the RNG; without `Tr` the RNG alone, which
/// spreads over every tied port and never picks an untied one.
#[test]
fn ties_go_to_the_least_tr_then_at_random() {
    let cands = [0u16, 1, 2, 3];
    let view = |p: u16| if p == 3 { (9_000, 0) } else { (1_000, 0) };
    let tr = |p: u16| [5.0, 2.0, 7.0, 0.0][p as usize];
    let d = decide(&cands, view, THR, Some(&tr), &mut rng());
    assert_eq!((d.port, d.settled), (1, Settled::Tr));
    // Two with the least Tr: drawn between them.
    let tr2 = |p: u16| [2.0, 2.0, 7.0, 0.0][p as usize];
    let mut r = rng();
    let got: Vec<u16> = (0..200)
        .map(|_| decide(&cands, view, THR, Some(&tr2), &mut r).port)
        .collect();
    assert!(got.iter().all(|&p| p == 0 || p == 1));
    assert!(got.contains(&0) && got.contains(&1));
    // No Tr (outside a coflow): uniform over the three tied ports.
    let mut r = rng();
    let got: Vec<u16> = (0..600)
        .map(|_| decide(&cands, view, THR, None, &mut r).port)
        .collect();
    for p in 0..3 {
        assert!(got.iter().filter(|&&g| g == p).count() > 150, "{got:?}");
    }
    assert!(!got.contains(&3));
    // A single best port draws nothing from the RNG.
    let (mut r1, r2) = (rng(), rng());
    decide(&cands, |p| (p as u64, 0), THR, None, &mut r1);
    assert_eq!(r1, r2);
}

/// T2: the timer samples `G = Q(t) - Q(t - Δt)` per (port, priority) of the fabric ports
/// every `interval`, and re-arms itself; host ports are not sampled.
#[test]
fn the_sampling_timer_measures_growth_per_interval() {
    let mut clb = Clb::new(&fixed(THR), &leaf());
    let mut w = TestSwitch::new(4);
    let mut ports = PortState::test_ports(6, 40_000_000_000, US(5));
    clb.on_start(&mut ctx_with(&mut w, Time::ZERO, &ports, None));
    let timer = LbAction::SetTimer {
        at: US(5),
        token: SAMPLE,
        layer: crate::lb::Layer::Base,
    };
    assert_eq!(w.actions, [timer]);
    w.actions.clear();
    ports[2].set_test_pause(3, false, 40_000);
    ports[0].set_test_pause(3, false, 40_000);
    clb.on_timer(&mut ctx_with(&mut w, US(5), &ports, None), SAMPLE);
    assert_eq!(clb.growth(2, 3), 40_000);
    assert_eq!(clb.growth(2, 4), 0);
    assert_eq!(clb.growth(0, 3), 0, "host ports are not sampled");
    assert!(matches!(w.actions[..], [LbAction::SetTimer { at, .. }] if at == US(10)));
    ports[2].set_test_pause(3, false, 10_000);
    clb.on_timer(&mut ctx_with(&mut w, US(10), &ports, None), SAMPLE);
    assert_eq!(clb.growth(2, 3), -30_000);
}

/// A port whose queue grows (B) loses packets to a port with a larger, shrinking queue (A);
/// once it reaches Q_thr and keeps growing (D), to a shrinking one over Q_thr (C).
#[test]
fn choose_reads_live_queues_and_sampled_growth() {
    let mut clb = Clb::new(&fixed(THR), &leaf());
    let mut w = TestSwitch::new(4);
    let mut ports = PortState::test_ports(6, 40_000_000_000, US(5));
    // At the first sample: uplink 2 went 0 -> 20 KB (B); 3 went 0 -> 60 KB (B); 4, 5 idle.
    for (p, q) in [(2, 20_000), (3, 60_000), (4, 0), (5, 0)] {
        ports[p].set_test_pause(3, false, q);
    }
    clb.on_timer(&mut ctx_with(&mut w, US(5), &ports, None), SAMPLE);
    // Now 3 drains to 50 KB and 2 keeps 20 KB... after the next sample 3 is shrinking (A at
    // 50 KB) and 2 is flat (A at 20 KB); 4 and 5 fill (B).
    for (p, q) in [(2, 20_000), (3, 50_000), (4, 1_000), (5, 2_000)] {
        ports[p].set_test_pause(3, false, q);
    }
    clb.on_timer(&mut ctx_with(&mut w, US(10), &ports, None), SAMPLE);
    let p = data(1, 0);
    let now = US(11);
    assert_eq!(
        clb.choose(&mut ctx_with(&mut w, now, &ports, None), &p, &UPLINKS),
        2
    );
    // Between 3 (A, 50 KB) and 4, 5 (B, 1 and 2 KB): A wins though its queue is larger.
    assert_eq!(
        clb.choose(&mut ctx_with(&mut w, now, &ports, None), &p, &[3, 4, 5]),
        3
    );
    // Among the B ports, the least growth.
    assert_eq!(
        clb.choose(&mut ctx_with(&mut w, now, &ports, None), &p, &[4, 5]),
        4
    );
    assert_eq!(clb.clb_counters().chosen, [2, 1, 0, 0]);
}

/// `q_thr_fraction` of the switch's XOFF threshold, static or dynamic.
#[test]
fn q_thr_is_a_fraction_of_the_xoff_threshold_unless_set() {
    let clb = Clb::new(&ClbConfig::default(), &leaf());
    let fixed_mmu = Mmu::new(
        6_000_000,
        0,
        0,
        Threshold::Static { bytes: 256_000 },
        true,
        vec![0; 6],
    );
    assert_eq!(clb.q_thr(Some(&fixed_mmu)), 170_752);
    let dynamic = Mmu::new(
        6_000_000,
        0,
        0,
        Threshold::Dynamic { alpha: 0.125 },
        true,
        vec![0; 6],
    );
    assert_eq!(clb.q_thr(Some(&dynamic)), (0.667 * 750_000.0) as u64);
    assert_eq!(
        Clb::new(&fixed(99_000), &leaf()).q_thr(Some(&fixed_mmu)),
        99_000
    );
}

/// T3: each packet of a coflow adds its bytes to its port's `Tr`, which decays by `1 - a`
/// every `tr_period`; other coflows and packets outside coflows add nothing; the least `Tr`
/// spreads one coflow's packets over idle ports while another coflow's are spread on their
/// own.
#[test]
fn tr_counts_a_coflows_bytes_per_port_and_decays() {
    let mut clb = Clb::new(&fixed(THR), &leaf());
    let mut w = TestSwitch::new(4);
    let ports = PortState::test_ports(6, 40_000_000_000, US(5));
    let mut got = Vec::new();
    for i in 0..8 {
        let p = data(i, 7);
        got.push(clb.choose(&mut ctx_with(&mut w, US(1), &ports, None), &p, &UPLINKS));
    }
    // All four ports idle (A, Q = 0): the coflow's packets go round them, two each.
    for up in UPLINKS {
        assert_eq!(got.iter().filter(|&&p| p == up).count(), 2, "{got:?}");
        assert_eq!(clb.tr(US(1), up, 7), 2_096.0);
    }
    assert_eq!(clb.tr(US(1), 2, 8), 0.0);
    // One tr_period later: x (1 - a).
    assert!((clb.tr(US(50), 2, 7) - 2_096.0 * 0.8).abs() < 1e-9);
    // A packet outside a coflow counts nowhere.
    let before: Vec<f64> = UPLINKS.iter().map(|&u| clb.tr(US(1), u, 7)).collect();
    clb.choose(
        &mut ctx_with(&mut w, US(1), &ports, None),
        &data(99, 0),
        &UPLINKS,
    );
    let after: Vec<f64> = UPLINKS.iter().map(|&u| clb.tr(US(1), u, 7)).collect();
    assert_eq!(before, after);
    let c = clb.clb_counters();
    assert_eq!(c.chosen[0], 9);
    // Ties of 4, 3 and 2 zero Trs are drawn; the fourth packet takes the one port left at 0.
    assert_eq!((c.by_tr, c.by_rng), (2, 7), "{c:?}");
}

/// Without the tie-break (`tie_break = "random"`), T3 is not kept and ties are drawn.
#[test]
fn the_random_tie_break_keeps_no_tr() {
    let cfg = ClbConfig {
        tie_break: TieBreak::Random,
        ..fixed(THR)
    };
    let mut clb = Clb::new(&cfg, &leaf());
    let mut w = TestSwitch::new(4);
    let ports = PortState::test_ports(6, 40_000_000_000, US(5));
    for i in 0..8 {
        clb.choose(
            &mut ctx_with(&mut w, US(1), &ports, None),
            &data(i, 7),
            &UPLINKS,
        );
    }
    assert!(clb.tr.is_empty());
    assert_eq!(clb.tr(US(1), 2, 7), 0.0);
    assert_eq!(clb.clb_counters().by_rng, 8);
}

/// `flowlet`: a flow keeps its port within `flowlet_timeout` and is placed afresh after a
/// longer gap; `flow`: it keeps its port whatever the gap.
#[test]
fn flowlets_and_flows_follow_their_port() {
    for (granularity, moves) in [(Granularity::Flowlet, true), (Granularity::Flow, false)] {
        let cfg = ClbConfig {
            granularity,
            ..fixed(THR)
        };
        let mut clb = Clb::new(&cfg, &leaf());
        let mut w = TestSwitch::new(4);
        let mut ports = PortState::test_ports(6, 40_000_000_000, US(5));
        let p = data(5, 0);
        let first = clb.choose(&mut ctx_with(&mut w, US(1), &ports, None), &p, &UPLINKS);
        // The flow's port fills up: the others would be better, but the flowlet goes on.
        ports[first as usize].set_test_pause(3, false, 100_000);
        let again = clb.choose(&mut ctx_with(&mut w, US(90), &ports, None), &p, &UPLINKS);
        assert_eq!(again, first);
        // 101 us idle: a new flowlet moves, a flow stays.
        let late = clb.choose(&mut ctx_with(&mut w, US(191), &ports, None), &p, &UPLINKS);
        assert_eq!(late != first, moves, "{granularity:?}");
        // Another flow is placed on its own.
        let other = clb.choose(
            &mut ctx_with(&mut w, US(191), &ports, None),
            &data(6, 0),
            &UPLINKS,
        );
        assert_ne!(other, first);
        let c = clb.clb_counters();
        assert_eq!(c.followed, if moves { 1 } else { 2 });
    }
}

#[test]
fn validation_names_the_key_and_range() {
    for (cfg, expected) in [
        (
            ClbConfig {
                q_thr_fraction: 0.0,
                ..ClbConfig::default()
            },
            "lb.q_thr_fraction: 0 is out of range; use 0 < q_thr_fraction <= 1 (CLB default 0.667)",
        ),
        (
            ClbConfig {
                interval: Time::ZERO,
                ..ClbConfig::default()
            },
            "lb.interval: 0ps is out of range; use 0ps < interval <= 10ms",
        ),
        (
            ClbConfig {
                a: 1.5,
                ..ClbConfig::default()
            },
            "lb.a: 1.5 is out of range",
        ),
        (
            ClbConfig {
                coflow_slots: 0,
                ..ClbConfig::default()
            },
            "lb.coflow_slots: 0 is out of range; use 1..=1048576",
        ),
        (
            ClbConfig {
                flowlet_timeout: Time::ZERO,
                ..ClbConfig::default()
            },
            "lb.flowlet_timeout",
        ),
        (
            ClbConfig {
                table_size: 0,
                ..ClbConfig::default()
            },
            "lb.table_size",
        ),
    ] {
        let e = cfg.validate().unwrap_err();
        assert!(e.starts_with(expected), "{e}");
    }
    assert!(ClbConfig::default().validate().is_ok());
}
