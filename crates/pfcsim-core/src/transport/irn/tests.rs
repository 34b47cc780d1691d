//! IRN's loss recovery, BDP flow control and timeouts: on its own state, driven packet by
//! packet, and in runs with chosen data packets dropped on arrival at the receiver (the test
//! hook `Simulation::drop_data_at_receiver`) or dropped by full switch buffers with PFC off.

use super::{Irn, IrnConfig, Recovery};
use crate::cc::{Cc, CcConfig};
use crate::metrics::FlowRecord;
use crate::packet::{Packet, PacketKind};
use crate::sim::{drop_first, FabricConfig, RunOutput, Simulation, StopRule};
use crate::topology::{LeafSpine, Topology};
use crate::traffic::FlowSpec;
use crate::transport::{FlowState, NicConfig, Protocol, Transport};
use crate::units::{Bytes, Rate, Time};

const PAYLOAD: u64 = 1000;

fn irn_nic(irn: IrnConfig) -> NicConfig {
    NicConfig {
        recovery: Recovery::Irn,
        irn,
        ..NicConfig::default()
    }
}

/// IRN's state and one flow of `packets` full packets, outside any run.
fn alone(packets: u64, irn: IrnConfig) -> (Irn, FlowState) {
    let cfg = FabricConfig {
        nic: irn_nic(irn),
        cc: CcConfig::None,
        ..Default::default()
    };
    let spec = FlowSpec::scripted(0, 1, packets * PAYLOAD, Time::ZERO);
    let line = Rate::gbps(100);
    let flow = FlowState::new(0, spec, Time::ZERO, line, (Protocol::Irn, Cc::None));
    // As setup finds it for a fabric with a 100-packet BDP, unless `irn.bdp` says otherwise.
    let mut setup = cfg.transports();
    setup.fabric_rtt = Some(crate::cc::FabricRtt {
        rtt: Time::from_us(8),
        bdp: 100 * PAYLOAD,
    });
    let irn = Irn::new(&setup, std::slice::from_ref(&flow));
    (irn, flow)
}

/// Sends what the flow may send now; returns the sequence numbers sent.
fn send_all(irn: &mut Irn, flow: &mut FlowState) -> Vec<u64> {
    let mut sent = Vec::new();
    while irn.can_send(flow) {
        let seg = irn.next_segment(flow);
        flow.note_sent(seg.seq, seg.payload);
        sent.push(seg.seq);
    }
    sent
}

/// An ACK (or, with `sack`, a NACK selectively acknowledging the packet at `sack`) of
/// everything below `cumulative`.
fn ack(cumulative: u64, sack: Option<u64>) -> Packet {
    let kind = match sack {
        Some(_) => PacketKind::Nack,
        None => PacketKind::Ack,
    };
    let mut p = Packet::new(kind);
    p.seq = cumulative;
    p.set_sack_offset(sack.map_or(0, |s| ((s - cumulative) / PAYLOAD) as u32));
    p
}

#[test]
fn bdp_flow_control_caps_the_bytes_outstanding() {
    let bdp = IrnConfig {
        bdp: Some(Bytes(4 * PAYLOAD)),
        ..IrnConfig::default()
    };
    let (mut irn, mut flow) = alone(20, bdp);
    let cc = Default::default();
    assert_eq!(send_all(&mut irn, &mut flow), [0, 1000, 2000, 3000]);
    assert_eq!(flow.high_sent - flow.snd_una, 4 * PAYLOAD);
    // Each packet acknowledged lets one more go.
    let out = irn.on_ack(&mut flow, &cc, &ack(PAYLOAD, None), Time::ZERO);
    assert!(out.send && !out.go_back);
    assert_eq!(send_all(&mut irn, &mut flow), [4000]);
    let out = irn.on_ack(&mut flow, &cc, &ack(3 * PAYLOAD, None), Time::ZERO);
    assert_eq!(out.newly_acked, 2 * PAYLOAD);
    assert_eq!(send_all(&mut irn, &mut flow), [5000, 6000]);
}

#[test]
fn hpccs_window_holds_new_packets_as_the_bdp_cap_does() {
    // IRN's cap at 200 packets, HPCC's window at the fabric's BDP, 100 packets: the window
    // binds.
    let cfg = FabricConfig {
        nic: irn_nic(IrnConfig {
            bdp: Some(Bytes(200 * PAYLOAD)),
            ..IrnConfig::default()
        }),
        cc: CcConfig::Hpcc(Default::default()),
        ..Default::default()
    };
    let mut setup = cfg.transports();
    setup.fabric_rtt = Some(crate::cc::FabricRtt {
        rtt: Time::from_us(8),
        bdp: 100 * PAYLOAD,
    });
    let line = Rate::gbps(100);
    let spec = FlowSpec::scripted(0, 1, 500 * PAYLOAD, Time::ZERO);
    let how = (Protocol::Irn, setup.roce_cc(line));
    let mut flow = FlowState::new(0, spec, Time::ZERO, line, how);
    let mut irn = Irn::new(&setup, std::slice::from_ref(&flow));
    assert_eq!(flow.cc.window(), Some(100 * PAYLOAD));
    assert_eq!(send_all(&mut irn, &mut flow).len(), 100);
    assert_eq!(
        irn.next_segment(&flow).header,
        48 + 42,
        "HPCC's telemetry on the wire"
    );
}

#[test]
fn a_nack_retransmits_only_the_packets_below_the_highest_sack() {
    let (mut irn, mut flow) = alone(20, IrnConfig::default());
    let cc = Default::default();
    assert_eq!(send_all(&mut irn, &mut flow).len(), 20);
    // Packets 2 and 4 are lost; 3 and 5 arrive and are NACKed.
    irn.on_ack(&mut flow, &cc, &ack(2 * PAYLOAD, None), Time::ZERO);
    let out = irn.on_ack(&mut flow, &cc, &ack(2 * PAYLOAD, Some(3000)), Time::ZERO);
    assert!(out.loss && !out.go_back && out.send);
    assert_eq!(flow.nacks_received, 1);
    assert_eq!(
        send_all(&mut irn, &mut flow),
        [2000],
        "2 only: nothing past 3 is SACKed"
    );
    irn.on_ack(&mut flow, &cc, &ack(2 * PAYLOAD, Some(5000)), Time::ZERO);
    assert_eq!(
        send_all(&mut irn, &mut flow),
        [4000],
        "3 is SACKed, 4 is lost"
    );
    // The retransmissions arrive: the cumulative ACK passes the end of recovery.
    irn.on_ack(&mut flow, &cc, &ack(20 * PAYLOAD, None), Time::ZERO);
    assert!(!irn.state(&flow).recovery);
    assert_eq!(flow.retransmitted_bytes, 2 * PAYLOAD);
}

#[test]
fn the_references_reading_resends_every_unsacked_packet_up_to_the_recovery_point() {
    let cfg = IrnConfig {
        retransmit: super::Retransmit::Unsacked,
        ..IrnConfig::default()
    };
    let (mut irn, mut flow) = alone(10, cfg);
    let cc = Default::default();
    assert_eq!(send_all(&mut irn, &mut flow).len(), 10);
    irn.on_ack(&mut flow, &cc, &ack(2 * PAYLOAD, Some(3000)), Time::ZERO);
    irn.on_ack(&mut flow, &cc, &ack(2 * PAYLOAD, Some(5000)), Time::ZERO);
    // Everything from the cumulative ACK to the recovery point but the SACKed 3 and 5.
    assert_eq!(
        send_all(&mut irn, &mut flow),
        [2000, 4000, 6000, 7000, 8000, 9000]
    );
}

#[test]
fn rto_low_applies_only_with_few_packets_outstanding() {
    let cfg = IrnConfig::default();
    let (mut irn, mut flow) = alone(20, cfg.clone());
    let now = Time::from_us(7);
    let mut timers = Vec::new();
    for _ in 0..5 {
        let seg = irn.next_segment(&flow);
        flow.note_sent(seg.seq, seg.payload);
        timers.push(irn.timer_on_send(&flow, now).unwrap() - now);
    }
    let (low, high) = (cfg.rto_low, cfg.rto_high);
    assert_eq!(timers, [low, low, low, high, high]);
    // An ACK that leaves three packets outstanding restarts the timer with the low timeout.
    let out = irn.on_ack(&mut flow, &Default::default(), &ack(2 * PAYLOAD, None), now);
    assert_eq!(out.timer, Some(now + low));
}

/// Leaf-spine, 2 leaves, 1 spine, `hosts` hosts per leaf, 100 Gbps and 1 us links.
fn fabric(hosts: u32) -> Topology {
    Topology::leaf_spine(&LeafSpine::uniform(
        2,
        1,
        hosts,
        Rate::gbps(100),
        Time::from_us(1),
    ))
}

/// One flow of `packets` packets from host 0 to host 1 (on the other leaf) under `nic`, run
/// to the end with `drop` deciding which data packets are lost.
fn run(nic: NicConfig, packets: u64, drop: impl FnMut(&Packet) -> bool + 'static) -> RunOutput {
    let topo = fabric(1);
    let cfg = FabricConfig {
        nic,
        cc: CcConfig::None,
        ..Default::default()
    };
    let flow = FlowSpec::scripted(0, 1, packets * PAYLOAD, Time::ZERO);
    let stop = StopRule {
        at: Time::from_ms(100),
        when_flows_done: true,
    };
    let mut sim = Simulation::new(&topo, cfg, vec![flow], 1, stop).unwrap();
    sim.drop_data_at_receiver(Box::new(drop));
    sim.run_to_end()
}

fn finished(out: &RunOutput) -> &FlowRecord {
    assert_eq!(out.stats.flows_finished, 1);
    assert_eq!(out.stats.bytes_delivered, out.flows[0].size_bytes);
    &out.flows[0]
}

#[test]
fn one_dropped_packet_costs_one_retransmission_where_go_back_n_resends_the_tail() {
    let irn = run(
        irn_nic(IrnConfig::default()),
        300,
        drop_first(100 * PAYLOAD, 1),
    );
    let f = finished(&irn);
    assert_eq!(f.transport, "irn");
    assert_eq!(irn.stats.packets_dropped, 1);
    assert_eq!((f.timeouts, f.retransmitted_bytes), (0, PAYLOAD));
    assert_eq!(f.packets_sent, 301);
    assert!(f.nacks_received >= 1);
    assert_eq!(
        irn.stats.payload_discarded, 0,
        "every packet after the hole was held"
    );
    assert!(f.ooo_buffer_max_bytes >= PAYLOAD);
    let gbn = run(NicConfig::default(), 300, drop_first(100 * PAYLOAD, 1));
    let g = finished(&gbn);
    assert_eq!(g.transport, "roce");
    assert!(
        g.retransmitted_bytes > 10 * PAYLOAD,
        "go-back-N resent {} bytes",
        g.retransmitted_bytes
    );
    assert!(gbn.stats.payload_discarded > 0);
    assert!(f.fct_ps < g.fct_ps);
}

#[test]
fn a_lone_lost_packet_is_repaired_after_the_low_timeout() {
    let cfg = IrnConfig::default();
    let out = run(irn_nic(cfg.clone()), 1, drop_first(0, 1));
    let f = finished(&out);
    assert_eq!((f.timeouts, f.retransmitted_bytes), (1, PAYLOAD));
    let fct = Time(f.fct_ps.unwrap());
    assert!(
        fct > cfg.rto_low && fct < cfg.rto_low + Time::from_us(20),
        "{fct}"
    );
}

#[test]
fn losses_spread_over_a_long_flow_cost_one_retransmission_each() {
    // Every 97th packet is lost once, over many turns of the bitmaps' rings.
    let lost = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let count = lost.clone();
    let mut seen = std::collections::HashSet::new();
    let out = run(irn_nic(IrnConfig::default()), 5_000, move |p| {
        let hit = (p.seq / PAYLOAD) % 97 == 5 && seen.insert(p.seq);
        count.set(count.get() + hit as u64);
        hit
    });
    let f = finished(&out);
    assert_eq!(lost.get(), 52);
    assert_eq!(f.retransmitted_bytes, 52 * PAYLOAD);
    assert_eq!(f.timeouts, 0);
    assert_eq!(out.stats.payload_discarded, 0);
}

/// `senders` hosts of one leaf send `packets` packets each to one host of the other, PFC
/// off and a buffer small enough to drop.
fn lossy_incast(senders: u32, packets: u64, seed: u64) -> RunOutput {
    let topo = fabric(senders);
    let mut cfg = FabricConfig {
        nic: irn_nic(IrnConfig::default()),
        cc: CcConfig::None,
        ..Default::default()
    };
    cfg.switch.pfc.enabled = false;
    cfg.switch.buffer = Bytes(300_000);
    let dst = topo.hosts[senders as usize];
    let flows = (0..senders)
        .map(|i| FlowSpec::scripted(topo.hosts[i as usize], dst, packets * PAYLOAD, Time::ZERO))
        .collect();
    let stop = StopRule {
        at: Time::from_ms(100),
        when_flows_done: true,
    };
    Simulation::new(&topo, cfg, flows, seed, stop)
        .unwrap()
        .run_to_end()
}

#[test]
fn a_lossy_incast_conserves_bytes_and_is_deterministic() {
    let out = lossy_incast(8, 400, 3);
    let s = &out.stats;
    assert_eq!(s.flows_finished, 8);
    assert!(s.drops_buffer > 0, "the incast overflows the buffer");
    assert_eq!(s.bytes_delivered, 8 * 400 * PAYLOAD);
    // Every byte put on the wire was delivered once, discarded as a duplicate, or dropped.
    assert_eq!(
        s.payload_sent,
        s.bytes_delivered + s.payload_discarded + s.payload_dropped
    );
    let resent: u64 = out.flows.iter().map(|f| f.retransmitted_bytes).sum();
    assert_eq!(s.payload_sent, s.bytes_offered + resent);
    assert!(resent >= s.payload_dropped);
    assert_eq!(lossy_incast(8, 400, 3).stats.fingerprint, s.fingerprint);
}
