//! TCP loss recovery with chosen data packets dropped on arrival at the receiver (the test
//! hook `Simulation::drop_data_at_receiver`): an isolated loss is repaired by fast retransmit,
//! a lost tail by the retransmission timer with exponential backoff; and the packet sizes
//! host-side schemes time an all-TCP run with.

use crate::cc::CcConfig;
use crate::metrics::FlowRecord;
use crate::sim::{drop_first, FabricConfig, RunOutput, Simulation, StopRule};
use crate::topology::{LeafSpine, Topology};
use crate::traffic::FlowSpec;
use crate::transport::{NicConfig, TcpConfig, TransportConfig, TransportKind};
use crate::units::{Rate, Time};

const MSS: u64 = 1460;

/// One TCP flow of `segments` full segments from host 0 to host 1 (10 Gbps, 1 us links,
/// 2 leaves, 1 spine), run to the end with `drop` deciding which data packets are lost.
fn run(segments: u64, drop: impl FnMut(&crate::packet::Packet) -> bool + 'static) -> RunOutput {
    let topo = Topology::leaf_spine(&LeafSpine::uniform(
        2,
        1,
        1,
        Rate::gbps(10),
        Time::from_us(1),
    ));
    let cfg = FabricConfig {
        cc: CcConfig::None,
        transport: TransportConfig {
            kind: TransportKind::Tcp,
            tcp: TcpConfig::default(),
        },
        ..Default::default()
    };
    let flow = FlowSpec::scripted(0, 1, segments * MSS, Time::ZERO);
    let stop = StopRule {
        at: Time::from_ms(200),
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
fn one_lost_segment_is_repaired_by_fast_retransmit() {
    let out = run(300, drop_first(100 * MSS, 1));
    let f = finished(&out);
    assert_eq!(out.stats.packets_dropped, 1);
    assert_eq!(f.timeouts, 0, "no timeout");
    assert_eq!(f.fast_retransmits, 1);
    assert_eq!(
        f.retransmitted_bytes, MSS,
        "only the lost segment goes again"
    );
    assert!(f.dup_acks >= 3);
    // The segments after the hole waited in the receiver's buffer, none was sent twice.
    assert_eq!(f.packets_sent, 301);
    assert!(out.stats.payload_discarded == 0);
    // Repaired within a few round trips, far below the 10 ms minimum RTO.
    let lossless = run(300, |_| false);
    let extra = f.fct_ps.unwrap() - finished(&lossless).fct_ps.unwrap();
    assert!(extra < Time::from_us(100).ps(), "loss cost {extra} ps");
}

#[test]
fn a_lost_tail_is_repaired_by_the_timer_with_backoff() {
    // The last segment is lost twice: no duplicate ACK can follow it, so the timer repairs
    // it, after the RTO (rto_min, 10 ms) and then twice the RTO.
    let n = 20;
    let out = run(n, drop_first((n - 1) * MSS, 2));
    let f = finished(&out);
    assert_eq!(out.stats.packets_dropped, 2);
    assert_eq!((f.timeouts, f.fast_retransmits), (2, 0));
    assert_eq!(f.retransmitted_bytes, 2 * MSS);
    let lossless = run(n, |_| false);
    let base = finished(&lossless).fct_ps.unwrap();
    let rto = TcpConfig::default().rto_min.ps();
    let fct = f.fct_ps.unwrap();
    // The timer restarts at the ACK of the previous segment, shortly before the lost one
    // would have been acknowledged; 3 RTOs later (1 + 2) the second retransmission leaves,
    // and its ACK is back one round trip after.
    assert!(
        fct > base + 3 * rto && fct < base + 3 * rto + Time::from_us(50).ps(),
        "fct {fct} ps, lossless {base} ps, rto {rto} ps"
    );
}

/// The base RTT that a host-side scheme (Hermes) reads for a pair of ToRs: four 10 Gbps, 1 us
/// links crossed by one full data packet out and its ACK back, sized by the transport of the
/// run's flows.
fn hermes_base_rtt(transport: TransportKind) -> Time {
    let topo = Topology::leaf_spine(&LeafSpine::uniform(
        2,
        1,
        1,
        Rate::gbps(10),
        Time::from_us(1),
    ));
    let cfg = FabricConfig {
        cc: CcConfig::None,
        lb: crate::lb::LbConfig::Hermes(Default::default()),
        transport: TransportConfig {
            kind: transport,
            tcp: TcpConfig::default(),
        },
        ..Default::default()
    };
    let stop = StopRule {
        at: Time::from_ms(1),
        when_flows_done: true,
    };
    let sim = Simulation::new(&topo, cfg, Vec::new(), 1, stop).unwrap();
    sim.host_pair_base_rtt(0, 1)
}

#[test]
fn host_schemes_time_an_all_tcp_run_with_tcp_segments() {
    let rate = Rate::gbps(10);
    let link = |data: u64, ack: u64| rate.tx_time(data) + rate.tx_time(ack) + Time::from_us(2);
    let four = |t: Time| t + t + t + t;
    let tcp = TcpConfig::default();
    let segment = tcp.mss.0 + tcp.header_bytes as u64;
    assert_eq!(
        hermes_base_rtt(TransportKind::Tcp),
        four(link(segment, tcp.ack_bytes as u64))
    );
    let nic = NicConfig::default();
    assert_eq!(
        hermes_base_rtt(TransportKind::Roce),
        four(link(nic.mtu_wire_bytes(), nic.control_bytes as u64))
    );
    assert_ne!(
        segment,
        nic.mtu_wire_bytes(),
        "the two sizes must differ to tell"
    );
}
