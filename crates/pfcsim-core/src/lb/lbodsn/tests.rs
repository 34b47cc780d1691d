//! Unit tests of LBoDSN's hooks, with `crate::lb::TestSwitch` and a real MMU.

use super::header::{timestamp, Data, Msg, MSG_FCN};
use super::Class;
use super::{Lbodsn, LbodsnConfig};
use crate::lb::{Ingress, LbAction, LbFabric, PortDir, SwitchScheme, TestSwitch};
use crate::mmu::{Mmu, Threshold};
use crate::packet::{LbHeader, Packet, PacketKind};
use crate::units::Time;

/// Leaf (node 20): ports 0, 1 to its hosts; ports 2, 3, 4 up to three spines (100 Gbps,
/// 1 us). Hosts 0, 1 are under ToR 0, hosts 2, 3 under ToR 1, hosts 4, 5 under ToR 2.
fn leaf(my_tor: u32) -> LbFabric {
    let mut port_dir = vec![PortDir::Host; 2];
    port_dir.extend([PortDir::Up; 3]);
    LbFabric {
        node: 20,
        nodes: 30,
        tor_of: (0..30)
            .map(|n| if n < 6 { n / 2 } else { crate::lb::NO_TOR })
            .collect(),
        tors: 3,
        my_tor: Some(my_tor),
        port_dir,
        port_rate_bps: vec![100_000_000_000; 5],
        port_delay_ps: vec![1_000_000; 5],
        tor_hops: (0..3).map(|t| if t == my_tor { 0 } else { 2 }).collect(),
    }
}

/// A 9 MB buffer with a static 100 KB XOFF threshold and a 10 KB resume offset, 5 ports.
fn mmu() -> Mmu {
    Mmu::new(
        9_000_000,
        0,
        10_000,
        Threshold::Static { bytes: 100_000 },
        true,
        vec![50_000; 5],
    )
}

/// A 1000-byte data packet of flow `sport` from host `src` to host 0, stamped by its source
/// ToR with uplink `up`, arriving at ToR 0 on port `port`.
fn data(src: u32, sport: u16, up: u8, port: u16, now: Time) -> Packet {
    let mut p = Packet::new(PacketKind::Data);
    p.src = src;
    p.dst = 0;
    p.sport = sport;
    p.dport = 100;
    p.priority = 3;
    p.wire_bytes = 1_000;
    p.set_ingress_port(port);
    p.lb = LbHeader {
        path_tag: up as u32 + 1,
        meta: Data {
            tail: false,
            new: false,
            epoch: 0,
            up,
            ts: timestamp(now.saturating_sub(Time::from_us(2))),
        }
        .pack(),
    };
    p
}

/// The tag-1 FCNs among `actions`: (flow key, old uplink, target).
fn fcns(actions: &[LbAction]) -> Vec<(u32, u8, u8)> {
    actions
        .iter()
        .filter_map(|a| match a {
            LbAction::SendRouted { message, .. } => {
                let m = Msg::of(message.header.meta);
                (m.kind == MSG_FCN && m.tag).then_some((message.header.path_tag, m.old, m.target))
            }
            _ => None,
        })
        .collect()
}

/// Feeds `n` packets of `(src, sport)` flows in turn (by `mix`) into ToR 0's ingress from
/// spine port 2, 80 ns apart from `t0`, charging the MMU; returns the time after the last.
fn feed(
    lb: &mut Lbodsn,
    sw: &mut TestSwitch,
    mmu: &mut Mmu,
    mix: &[(u32, u16)],
    n: usize,
    t0: Time,
) -> Time {
    let mut now = t0;
    for i in 0..n {
        let (src, sport) = mix[i % mix.len()];
        let mut p = data(src, sport, 0, 2, now);
        let mut ctx = sw.ctx(now.ps() / 1_000);
        ctx.mmu = Some(mmu);
        assert_eq!(lb.on_ingress(&mut ctx, &mut p, &[0]), Ingress::Forward);
        mmu.arrive(2, 0, 3, 1_000);
        now += Time::from_ns(80);
    }
    now
}

/// Of two flows in one ingress queue, only the one holding 90% of its bytes is named, even
/// with `flows_per_fcn = 2`; the FCN goes before the queue reaches the XOFF threshold. Fails
/// without `F_cc` (both named, as with `f_cc = false`) and without the prediction (no FCN
/// below the threshold).
#[test]
fn only_the_flow_with_most_of_the_queue_is_named_before_the_pause() {
    let cfg = LbodsnConfig {
        flows_per_fcn: 2,
        ..Default::default()
    };
    let mut lb = Lbodsn::new(&cfg, &leaf(0));
    let mut sw = TestSwitch::new(20);
    let mut mmu = mmu();
    // 12.5 B/ns in, nothing out: the queue grows at line rate; 9 packets of flow A (host 2)
    // for each one of flow B (host 4).
    let mut mix = vec![(2, 7); 9];
    mix.push((4, 9));
    feed(&mut lb, &mut sw, &mut mmu, &mix, 90, Time::from_us(10));
    let sent = fcns(&sw.actions);
    assert_eq!(sent.len(), 1, "{sent:?}");
    let key_a = super::key(2, 0, 7, 100);
    assert_eq!(sent[0].0, key_a);
    assert_eq!(sent[0].1, 0);
    assert!(!mmu.is_pausing(2, 3), "the FCN came before the PAUSE");
    assert_eq!(lb.counters.fcns_before_pause, 1);
    // Without F_cc (the ablation) the same trigger names both flows, A first.
    let mut lb = Lbodsn::new(&LbodsnConfig { f_cc: false, ..cfg }, &leaf(0));
    let mut sw = TestSwitch::new(20);
    let mut mmu = self::mmu();
    feed(&mut lb, &mut sw, &mut mmu, &mix, 90, Time::from_us(10));
    let keys: Vec<u32> = fcns(&sw.actions).iter().map(|f| f.0).collect();
    assert_eq!(keys, [key_a, super::key(4, 0, 9, 100)]);
}

/// At most one FCN per (port, priority) per `fcn_gap`, however long the queue stays above
/// `Q_th`. Fails without the rate limit.
#[test]
fn one_fcn_per_ingress_queue_per_gap() {
    let cfg = LbodsnConfig {
        fcn_gap: Time::from_us(4),
        ..Default::default()
    };
    let mut lb = Lbodsn::new(&cfg, &leaf(0));
    let mut sw = TestSwitch::new(20);
    let mut mmu = mmu();
    let mut now = Time::from_us(10);
    let mut times = Vec::new();
    // 30 us of line-rate arrivals (just under the 100 KB threshold plus headroom).
    for i in 0..140 {
        let mut p = data(2 + (i % 2) as u32 * 2, 7, 0, 2, now);
        let mut ctx = sw.ctx(now.ps() / 1_000);
        ctx.mmu = Some(&mmu);
        lb.on_ingress(&mut ctx, &mut p, &[0]);
        if !fcns(&sw.actions).is_empty() {
            times.push(now);
        }
        sw.actions.clear();
        mmu.arrive(2, 0, 3, 1_000);
        now += Time::from_ns(80);
    }
    assert!(times.len() >= 2, "{times:?}");
    for w in times.windows(2) {
        assert!(w[1] - w[0] >= Time::from_us(4), "{times:?}");
    }
}

/// A spine whose ingress this ToR is pausing, draining slowly, is never the target even
/// though its path delay is the smallest: `T_PFC` (eq. 5) dominates. Fails if `T_PFC` is
/// left out of `T_d`.
#[test]
fn a_paused_slowly_draining_spine_is_never_the_target() {
    let mut lb = Lbodsn::new(&LbodsnConfig::default(), &leaf(0));
    let mut sw = TestSwitch::new(20);
    let mut mmu = mmu();
    // Paths from ToR 1: uplink 1 arrives on port 3 after 3 us, uplink 2 on port 4 after 2 us.
    lb.paths.seen(1, 1, 3, Time::from_us(3));
    lb.paths.seen(1, 2, 4, Time::from_us(2));
    // Port 4's ingress is paused (120 KB), and drains by 1 KB per window.
    for _ in 0..120 {
        mmu.arrive(4, 0, 3, 1_000);
    }
    assert!(mmu.is_pausing(4, 3));
    for t in 1..=3u64 {
        mmu.release(4, 0, 3, 1_000);
        let q = mmu.ingress_use(4, 3);
        lb.windows[4 * crate::port::N_PRIO + 3].roll(Time::from_us(t), Time::from_us(1), q);
    }
    assert!(mmu.is_pausing(4, 3));
    for i in 0..50 {
        let mut ctx = sw.ctx(3_000 + i);
        ctx.mmu = Some(&mmu);
        assert_eq!(lb.choose_target(&mut ctx, 1, 0, 3), Some(1));
    }
    // Without the pause, the shorter path wins.
    let fresh = self::mmu();
    let mut ctx = sw.ctx(4_000);
    ctx.mmu = Some(&fresh);
    assert_eq!(lb.choose_target(&mut ctx, 1, 0, 3), Some(2));
}

/// New flows avoid paths with a tag-1 flag while an uncongested one is left, and take them
/// again once a tag-0 FCN clears them. Fails if new flows ignore the classes.
#[test]
fn new_flows_avoid_tag_1_paths() {
    let mut lb = Lbodsn::new(&LbodsnConfig::default(), &leaf(0));
    let mut sw = TestSwitch::new(20);
    let fcn = |tag: bool, old: u8| LbHeader {
        path_tag: 1,
        meta: Msg {
            kind: MSG_FCN,
            tag,
            target: 2,
            old,
            dst_tor: 1,
        }
        .pack(),
    };
    lb.on_control(&mut sw.ctx(1_000), 2, &fcn(true, 0));
    lb.on_control(&mut sw.ctx(1_000), 2, &fcn(true, 1));
    assert_eq!(lb.class(Time::from_us(2), 1, 0, 2), Class::Undetermined);
    let up_of = |lb: &mut Lbodsn, sw: &mut TestSwitch, sport: u16, ns: u64| {
        let mut p = Packet::new(PacketKind::Data);
        (p.src, p.dst, p.sport, p.dport) = (0, 2, sport, 100);
        lb.on_ingress(&mut sw.ctx(ns), &mut p, &[2, 3, 4]);
        Data::of(p.lb.meta).unwrap().up
    };
    for sport in 0..40 {
        assert_eq!(up_of(&mut lb, &mut sw, sport, 2_000), 2);
    }
    // Cleared: new flows spread over all three uplinks again.
    lb.on_control(&mut sw.ctx(3_000), 2, &fcn(false, 0));
    lb.on_control(&mut sw.ctx(3_000), 2, &fcn(false, 1));
    let mut seen = [false; 3];
    for sport in 100..160 {
        seen[up_of(&mut lb, &mut sw, sport, 4_000) as usize] = true;
    }
    assert_eq!(seen, [true; 3]);
}

/// A tag-1 FCN moves its flow: the next packet leaves on the old path flagged TAIL, the one
/// after on the target flagged NEW in the next epoch; the NEW reply ends the staleness.
#[test]
fn an_fcn_moves_its_flow_with_a_tail_and_a_new_packet() {
    let mut lb = Lbodsn::new(&LbodsnConfig::default(), &leaf(0));
    let mut sw = TestSwitch::new(20);
    let send = |lb: &mut Lbodsn, sw: &mut TestSwitch, ns: u64| {
        let mut p = Packet::new(PacketKind::Data);
        (p.src, p.dst, p.sport, p.dport) = (0, 2, 7, 100);
        p.lb.path_tag = 1; // a scripted start on uplink 0
        lb.on_ingress(&mut sw.ctx(ns), &mut p, &[2, 3, 4]);
        Data::of(p.lb.meta).unwrap()
    };
    assert_eq!(send(&mut lb, &mut sw, 1_000).up, 0);
    let key = super::key(0, 2, 7, 100);
    let fcn = LbHeader {
        path_tag: key,
        meta: Msg {
            kind: MSG_FCN,
            tag: true,
            target: 2,
            old: 0,
            dst_tor: 1,
        }
        .pack(),
    };
    lb.on_control(&mut sw.ctx(2_000), 2, &fcn);
    assert!(lb.tx_flow(0, 2, 7, 100).unwrap().stale);
    let tail = send(&mut lb, &mut sw, 3_000);
    assert!(tail.tail && !tail.new && tail.up == 0 && tail.epoch == 0);
    let new = send(&mut lb, &mut sw, 3_100);
    assert!(new.new && !new.tail && new.up == 2 && new.epoch == 1);
    let next = send(&mut lb, &mut sw, 3_200);
    assert!(!next.new && next.up == 2 && next.epoch == 1);
    // A second FCN before the reply is ignored; the reply ends the staleness.
    lb.on_control(&mut sw.ctx(3_300), 2, &fcn);
    assert_eq!(lb.counters.fcns_ignored, 1);
    let reply = LbHeader {
        path_tag: key,
        meta: Msg {
            kind: super::header::MSG_NEW_REPLY,
            tag: false,
            target: 2,
            old: 2,
            dst_tor: 1,
        }
        .pack(),
    };
    lb.on_control(&mut sw.ctx(4_000), 2, &reply);
    assert!(!lb.tx_flow(0, 2, 7, 100).unwrap().stale);
}

/// The destination ToR holds the new path's packets until the old path's TAIL, then
/// releases them; with `reorder_queues = 0` they pass.
#[test]
fn the_destination_holds_the_new_epoch_until_the_tail() {
    let mut lb = Lbodsn::new(&LbodsnConfig::default(), &leaf(0));
    let mut sw = TestSwitch::new(20);
    let arrive = |lb: &mut Lbodsn, sw: &mut TestSwitch, ns: u64, epoch: u8, tail: bool| {
        let mut p = data(2, 7, epoch * 2, 2 + epoch as u16 * 2, Time::from_ns(ns));
        let mut d = Data::of(p.lb.meta).unwrap();
        (d.epoch, d.tail, d.new) = (epoch, tail, false);
        p.lb.meta = d.pack();
        lb.on_ingress(&mut sw.ctx(ns), &mut p, &[0])
    };
    assert_eq!(arrive(&mut lb, &mut sw, 1_000, 0, false), Ingress::Forward);
    assert!(matches!(
        arrive(&mut lb, &mut sw, 1_100, 1, false),
        Ingress::Hold { .. }
    ));
    assert_eq!(lb.queues_in_use(0), 1);
    assert_eq!(arrive(&mut lb, &mut sw, 1_200, 0, true), Ingress::Forward);
    let token = sw
        .actions
        .iter()
        .rev()
        .find_map(|a| match a {
            LbAction::SetTimer { at, token, .. } if *at == Time::from_ns(1_201) => Some(*token),
            _ => None,
        })
        .expect("the TAIL's flush");
    sw.actions.clear();
    lb.on_timer(&mut sw.ctx(1_201), token);
    assert!(matches!(
        sw.actions[..],
        [LbAction::Release { port: 0, .. }]
    ));
    assert_eq!(lb.queues_in_use(0), 0);
    assert_eq!(arrive(&mut lb, &mut sw, 1_300, 1, false), Ingress::Forward);
    let mut off = Lbodsn::new(
        &LbodsnConfig {
            reorder_queues: 0,
            ..Default::default()
        },
        &leaf(0),
    );
    assert_eq!(arrive(&mut off, &mut sw, 1_000, 0, false), Ingress::Forward);
    assert_eq!(arrive(&mut off, &mut sw, 1_100, 1, false), Ingress::Forward);
}
