//! Unit tests of PLB's hooks on hand-made switches: the class boundaries, Algorithm 2's
//! order, the budget's accounting and Algorithm 1's verdicts, the samples' round trip.

use super::header::{self, Echo, Stamp, Word};
use super::*;
use crate::lb::{LbAction, TestSwitch};
use crate::port::PortState;

const US: fn(u64) -> Time = Time::from_us;

/// Leaf `my_tor` (of two): hosts 0, 1 under ToR 0 and 2, 3 under ToR 1; ports 0-1 to hosts,
/// 2-5 up; 40 Gbps links of 1 us (base RTT to the other ToR: 4 us).
fn leaf(node: u32, my_tor: u32) -> LbFabric {
    LbFabric {
        node,
        nodes: 10,
        tor_of: vec![0, 0, 1, 1, NO_TOR, NO_TOR, NO_TOR, NO_TOR, NO_TOR, NO_TOR],
        tors: 2,
        my_tor: Some(my_tor),
        port_dir: vec![
            PortDir::Host,
            PortDir::Host,
            PortDir::Up,
            PortDir::Up,
            PortDir::Up,
            PortDir::Up,
        ],
        port_rate_bps: vec![40_000_000_000; 6],
        port_delay_ps: vec![1_000_000; 6],
        tor_hops: if my_tor == 0 { vec![0, 2] } else { vec![2, 0] },
    }
}

/// A spine: port `t` down to ToR `t`.
fn spine() -> LbFabric {
    LbFabric {
        my_tor: None,
        port_dir: vec![PortDir::Down; 2],
        port_rate_bps: vec![40_000_000_000; 2],
        port_delay_ps: vec![1_000_000; 2],
        tor_hops: vec![1, 1],
        ..leaf(6, 0)
    }
}

fn data(src: u32, dst: u32, sport: u16) -> Packet {
    let mut p = Packet::new(PacketKind::Data);
    (p.src, p.dst, p.sport, p.dport, p.wire_bytes, p.priority) = (src, dst, sport, 100, 1048, 3);
    p
}

const UPLINKS: [u16; 4] = [2, 3, 4, 5];

/// The least utilization metric of `u` x full use (q_bits = 6 by default).
fn metric(u: f64) -> u8 {
    (u * 64.0).ceil() as u8
}

fn ctx_with<'a>(w: &'a mut TestSwitch, now: Time, ports: &'a [PortState]) -> LbCtx<'a> {
    LbCtx {
        now,
        ports,
        ..w.ctx(0)
    }
}

#[test]
fn classes_split_at_rtt_low_and_u_full() {
    let mut plb = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let now = US(100);
    // RTT_low = 4 us base + 20 us.
    plb.set_sample(now, 1, 0, US(24) - Time::from_ps(1), metric(1.0));
    plb.set_sample(now, 1, 1, US(24), metric(0.9));
    plb.set_sample(now, 1, 2, US(24), metric(0.89));
    assert_eq!(
        plb.class(now, 1, 0),
        Class::NonCongested,
        "below RTT_low, whatever the use"
    );
    assert_eq!(
        plb.class(now, 1, 1),
        Class::Congested,
        "at RTT_low and u_full"
    );
    assert_eq!(
        plb.class(now, 1, 2),
        Class::Undetermined,
        "at RTT_low, below u_full"
    );
    // No sample: the base RTT, non-congested. A sample older than `aging` is forgotten.
    assert_eq!(plb.class(now, 1, 3), Class::NonCongested);
    assert_eq!(plb.class(now + US(501), 1, 1), Class::NonCongested);
    // The source ToR's own uplink metric counts: a busy uplink makes a slow path congested.
    plb.dres.set_bytes(4, 1e9);
    assert_eq!(plb.class(now, 1, 2), Class::Congested);
}

#[test]
fn algorithm_2_prefers_non_congested_then_undetermined_then_congested_then_any() {
    let mut plb = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let mut w = TestSwitch::new(4);
    let now = US(100);
    let set =
        |plb: &mut Plb, up: u8, rtt: u64, u: f64| plb.set_sample(now, 1, up, US(rtt), metric(u));
    set(&mut plb, 0, 60, 1.0); // congested, 60 us
    set(&mut plb, 1, 50, 0.3); // undetermined, utilization 0.3
    set(&mut plb, 2, 80, 0.6); // undetermined, utilization 0.6
    set(&mut plb, 3, 20, 0.1); // non-congested
    let mut pick = |plb: &mut Plb| plb.pick(&mut w.ctx(100_000), 1, &UPLINKS);
    assert_eq!(pick(&mut plb), Some(3), "rule 1: the non-congested path");
    plb.kick_out(now, 1, 3);
    assert_eq!(
        pick(&mut plb),
        Some(2),
        "rule 2: the undetermined path used most"
    );
    plb.kick_out(now, 1, 2);
    plb.kick_out(now, 1, 1);
    assert_eq!(pick(&mut plb), Some(0), "rule 3: the congested path");
    plb.kick_out(now, 1, 0);
    assert_eq!(pick(&mut plb), Some(3), "rule 4: the least RTT of all");
    // Rule 1 takes the least RTT among non-congested paths; ties are broken at random.
    let mut plb = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    set(&mut plb, 0, 10, 0.0);
    set(&mut plb, 1, 8, 0.0);
    set(&mut plb, 2, 8, 0.0);
    set(&mut plb, 3, 12, 0.0);
    let picks: Vec<_> = (0..64)
        .map(|_| plb.pick(&mut w.ctx(100_000), 1, &UPLINKS).unwrap())
        .collect();
    assert!(picks.iter().all(|&u| u == 1 || u == 2));
    assert!(
        picks.contains(&1) && picks.contains(&2),
        "ties at random: {picks:?}"
    );
}

#[test]
fn a_flow_keeps_its_path_until_it_is_congested_kicked_or_idle() {
    let mut plb = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let mut w = TestSwitch::new(4);
    let ports = PortState::test_ports(6, 40_000_000_000, US(1));
    let p = data(0, 2, 7);
    let choose = |plb: &mut Plb, w: &mut TestSwitch, us: u64| {
        plb.choose(&mut ctx_with(w, US(us), &ports), &p, &UPLINKS)
    };
    let first = choose(&mut plb, &mut w, 10);
    let up = plb.uplink_index[first as usize];
    // Another path becomes better: the flow stays (only new, congested or kicked flows move).
    let other = (up + 1) % 4;
    for u in 0..4 {
        plb.set_sample(US(20), 1, u, US(if u == other { 5 } else { 15 }), 0);
    }
    assert_eq!(choose(&mut plb, &mut w, 20), first);
    // Its path turns congested: it moves to the best one.
    plb.set_sample(US(30), 1, up, US(40), metric(1.0));
    assert_eq!(choose(&mut plb, &mut w, 30), UPLINKS[other as usize]);
    assert_eq!(plb.counters.path_changes, 1);
    // Kicked out: it moves again; idle for longer than flow_idle: a new flow.
    plb.kick_out(US(40), 1, other);
    assert_ne!(choose(&mut plb, &mut w, 40), UPLINKS[other as usize]);
    assert_eq!(plb.counters.path_changes, 2);
    assert_eq!(plb.counters.new_flows, 1);
    choose(&mut plb, &mut w, 40 + 501);
    assert_eq!(plb.counters.new_flows, 2);
}

#[test]
fn the_budget_is_the_rtt_gap_and_every_hop_spends_its_sojourn() {
    let cfg = PlbConfig {
        td_scale: 2.0,
        ..PlbConfig::default()
    };
    let mut src = Plb::new(&cfg, &leaf(4, 0));
    let now = US(100);
    for (u, rtt) in [(0, 30), (1, 12), (2, 10), (3, 50)] {
        src.set_sample(now, 1, u, US(rtt), 0);
    }
    // Path 2 (10 us) against the best other active path (12 us): 2 x 2 us.
    assert_eq!(src.budget_ns(now, 1, 2), 4_000);
    // A path slower than another has no budget.
    assert_eq!(src.budget_ns(now, 1, 0), 0);
    // The best other path out of service: the next one (30 us) counts.
    src.kick_out(now, 1, 1);
    assert_eq!(src.budget_ns(now, 1, 2), 40_000);
    // Written at the uplink's dequeue, with the uplink.
    let mut w = TestSwitch::new(4);
    let mut p = data(0, 2, 1);
    let mut word = 0;
    src.on_dequeue(&mut w.ctx(100_000), 4, &mut p, &mut word);
    assert_eq!(header::meta_uplink(p.lb.meta), Some(2));
    assert_eq!(header::meta_budget_ns(p.lb.meta), 40_000);
    // A spine holds it 15 us: 25 us left; then 30 us at the next hop: none left.
    let mut sp = Plb::new(&cfg, &spine());
    p.hop = 1;
    let mut ctx = w.ctx(130_000);
    ctx.arrived = US(115);
    sp.on_dequeue(&mut ctx, 1, &mut p, &mut word);
    assert_eq!(header::meta_budget_ns(p.lb.meta), 25_000);
    assert_eq!(header::meta_uplink(p.lb.meta), Some(2), "the uplink stays");
    let mut ctx = w.ctx(200_000);
    ctx.arrived = US(170);
    sp.on_dequeue(&mut ctx, 1, &mut p, &mut word);
    assert_eq!(header::meta_budget_ns(p.lb.meta), 0);
    // t_avgST: 1/8 of 15 us, then 1/8 of the way to 30 us.
    let expected = 15_000.0 / 8.0 + (30_000.0 - 15_000.0 / 8.0) / 8.0;
    assert!((sp.avg_sojourn().ps() as f64 / 1_000.0 - expected).abs() < 1.0);
}

#[test]
fn a_paused_hop_keeps_the_packet_within_its_budget_and_kicks_the_path_beyond_it() {
    let mut sp = Plb::new(&PlbConfig::default(), &spine());
    let mut w = TestSwitch::new(6);
    let mut ports = PortState::test_ports(2, 40_000_000_000, US(1));
    // Egress 1 (to ToR 1) paused for priority 3, 50 KB ahead: t_pd = 10 us at 40 Gbps.
    ports[1].set_test_pause(3, true, 50_000);
    let mut p = data(0, 2, 1);
    p.hop = 1;
    p.lb.meta = header::pack_meta(10_000, 2);
    let v = sp.on_ingress(&mut ctx_with(&mut w, US(5), &ports), &mut p, &[1]);
    assert_eq!(
        v,
        crate::lb::Ingress::Forward,
        "the packet waits either way"
    );
    assert!(
        w.actions.is_empty(),
        "a budget of t_pd waits: {:?}",
        w.actions
    );
    assert_eq!(sp.counters.waits, 1);
    p.lb.meta = header::pack_meta(9_999, 2);
    sp.on_ingress(&mut ctx_with(&mut w, US(6), &ports), &mut p, &[1]);
    let kick = LbAction::SendRouted {
        message: RoutedMessage {
            via: None,
            src: 6,
            to_host: 0,
            sport: 1,
            dport: 100,
            priority: CONTROL_PRIO,
            header: LbHeader {
                path_tag: 1,
                meta: 2,
            },
        },
        layer: crate::lb::Layer::Base,
    };
    assert_eq!(
        w.actions,
        vec![kick],
        "KICK(dst ToR 1, uplink 2) to the source's ToR"
    );
    // One KICK per path per window; none for an unpaused egress or a packet without budget
    // header (intra-ToR traffic).
    sp.on_ingress(&mut ctx_with(&mut w, US(7), &ports), &mut p, &[1]);
    sp.on_ingress(&mut ctx_with(&mut w, US(7), &ports), &mut p, &[0]);
    p.lb.meta = 0;
    sp.on_ingress(&mut ctx_with(&mut w, US(7), &ports), &mut p, &[1]);
    assert_eq!(w.actions.len(), 1);
    assert_eq!(sp.counters.kick_messages, 1);
    // kick = "never" does nothing, "on_pause" kicks whatever the budget.
    for (kick, kicks) in [(Kick::Never, 0), (Kick::OnPause, 1)] {
        let cfg = PlbConfig {
            kick,
            ..PlbConfig::default()
        };
        let mut sp = Plb::new(&cfg, &spine());
        let mut w = TestSwitch::new(6);
        p.lb.meta = header::pack_meta(header::BUDGET_MAX_NS, 2);
        sp.on_ingress(&mut ctx_with(&mut w, US(5), &ports), &mut p, &[1]);
        assert_eq!(w.actions.len(), kicks, "{kick:?}");
    }
}

#[test]
fn a_kicked_path_returns_with_a_fresh_sample_or_after_kick_ttl() {
    let mut src = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let mut w = TestSwitch::new(4);
    let header = LbHeader {
        path_tag: 1,
        meta: 2,
    };
    src.on_control(&mut w.ctx(100_000), 0, &header);
    assert!(!src.active(US(100), 1, 2));
    assert_eq!(src.counters.kicks, 1);
    // A sample whose stamp left before the kick does not bring it back; a later one does.
    let echo = |ts_at: Time| Echo {
        up: 2,
        stamp: Stamp {
            ts: header::CLOCK.read(ts_at),
            ce: 0,
        },
    };
    src.sample(US(110), 1, echo(US(90)));
    assert!(!src.active(US(110), 1, 2));
    src.sample(US(112), 1, echo(US(101)));
    assert!(src.active(US(112), 1, 2));
    assert_eq!(src.counters.readmissions, 1);
    // kick_ttl (4 base RTTs: 16 us) ends a kick without samples.
    src.kick_out(US(200), 1, 2);
    assert!(!src.active(US(215), 1, 2));
    assert!(src.active(US(216), 1, 2));
    assert_eq!(src.counters.expiries, 1);
}

#[test]
fn a_source_tor_kicks_the_paused_path_of_a_flow_before_choosing() {
    let mut plb = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let mut w = TestSwitch::new(4);
    let mut ports = PortState::test_ports(6, 40_000_000_000, US(1));
    let p = data(0, 2, 9);
    let first = plb.choose(&mut ctx_with(&mut w, US(10), &ports), &p, &UPLINKS);
    // The other paths are 1 us slower: a budget of 1 us, below t_pd = 10 us.
    let up = plb.uplink_index[first as usize];
    for u in 0..4 {
        plb.set_sample(US(20), 1, u, US(if u == up { 5 } else { 6 }), 0);
    }
    ports[first as usize].set_test_pause(3, true, 50_000);
    let next = plb.choose(&mut ctx_with(&mut w, US(20), &ports), &p, &UPLINKS);
    assert_ne!(next, first, "the packet itself moves at the source ToR");
    assert_eq!(plb.counters.kicks, 1);
    assert!(w.actions.is_empty(), "a local kick sends nothing");
    // With a budget that covers the wait, the flow stays and waits.
    let mut plb = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let clear = PortState::test_ports(6, 40_000_000_000, US(1));
    let first = plb.choose(&mut ctx_with(&mut w, US(10), &clear), &p, &UPLINKS);
    let up = plb.uplink_index[first as usize];
    for u in 0..4 {
        plb.set_sample(US(20), 1, u, US(if u == up { 5 } else { 20 }), 0);
    }
    let mut paused = PortState::test_ports(6, 40_000_000_000, US(1));
    paused[first as usize].set_test_pause(3, true, 50_000);
    assert_eq!(
        plb.choose(&mut ctx_with(&mut w, US(20), &paused), &p, &UPLINKS),
        first
    );
    assert_eq!((plb.counters.kicks, plb.counters.waits), (0, 1));
}

#[test]
fn a_stamp_goes_out_once_per_period_and_comes_back_as_a_sample() {
    let mut a = Plb::new(&PlbConfig::default(), &leaf(4, 0));
    let mut b = Plb::new(&PlbConfig::default(), &leaf(5, 1));
    let mut sp = Plb::new(&PlbConfig::default(), &spine());
    let mut w = TestSwitch::new(4);
    // A sends on uplink index 1 (port 3): stamped, once per base RTT (4 us).
    let mut p = data(0, 2, 1);
    let mut word = 0;
    a.on_dequeue(&mut w.ctx(1_000), 3, &mut p, &mut word);
    let stamp = Word::of(word).stamp.expect("a stamp");
    let mut q = data(0, 2, 1);
    let mut word2 = 0;
    a.on_dequeue(&mut w.ctx(2_000), 3, &mut q, &mut word2);
    assert_eq!(Word::of(word2).stamp, None, "one stamp per period");
    // The spine folds its egress metric into the stamp's CE.
    sp.dres.set_bytes(1, 1e6);
    p.hop = 1;
    sp.on_dequeue(&mut w.ctx(3_000), 1, &mut p, &mut word);
    let ce = Word::of(word).stamp.unwrap().ce;
    assert!(ce > stamp.ce, "CE {ce} folds the spine's metric");
    // B holds it and returns it on an ACK towards A.
    b.on_arrival(&mut w.ctx(5_000), &p, &mut word);
    assert_eq!(word, 0, "taken off at the destination ToR");
    let mut ack = data(2, 0, 1);
    ack.kind = PacketKind::Ack;
    let mut back = 0;
    b.on_dequeue(&mut w.ctx(12_000), 2, &mut ack, &mut back);
    let echo = Word::of(back).echo.expect("the echo rides the ACK");
    assert_eq!((echo.up, echo.stamp.ce), (1, ce));
    // A takes the sample: RTT 14 us (to a 64 ns tick), the CE as utilization.
    a.on_arrival(&mut w.ctx(15_000), &ack, &mut back);
    assert_eq!(a.counters.samples, 1);
    let rtt = a.rtt(US(15), 1, 1);
    assert!(rtt.ps().abs_diff(US(14).ps()) < 64_000, "{rtt:?}");
    assert_eq!(a.util_metric(US(15), 1, 1), ce as u32);
}

#[test]
fn rtt_from_arrival_counts_the_source_tors_uplink_queue() {
    // A packet arrives at A at 1 us, leaves its uplink at 11 us (10 us queued there) and its
    // stamp comes back at 15 us: 4 us from the uplink, 14 us from the arrival.
    for (rtt_from, expected) in [(RttFrom::Uplink, 4), (RttFrom::Arrival, 14)] {
        let cfg = PlbConfig {
            rtt_from,
            ..PlbConfig::default()
        };
        let mut a = Plb::new(&cfg, &leaf(4, 0));
        let mut b = Plb::new(&cfg, &leaf(5, 1));
        let mut w = TestSwitch::new(4);
        let mut p = data(0, 2, 1);
        let mut word = 0;
        let mut ctx = w.ctx(11_000);
        ctx.arrived = US(1);
        a.on_dequeue(&mut ctx, 3, &mut p, &mut word);
        b.on_arrival(&mut w.ctx(13_000), &p, &mut word);
        let mut ack = data(2, 0, 1);
        ack.kind = PacketKind::Ack;
        let mut back = 0;
        b.on_dequeue(&mut w.ctx(14_000), 2, &mut ack, &mut back);
        a.on_arrival(&mut w.ctx(15_000), &ack, &mut back);
        let rtt = a.rtt(US(15), 1, 1);
        assert!(
            rtt.ps().abs_diff(US(expected).ps()) < 64_000,
            "{rtt_from:?}: {rtt:?}"
        );
        // The stamp answered itself: nothing is left overdue to raise the RTT later.
        assert_eq!(a.sent.unanswered_since(1, 1), None, "{rtt_from:?}");
    }
}
