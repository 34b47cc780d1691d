//! Helpers shared by RLB's unit tests (each test is beside the code it tests).

use super::{cnm_meta, Rlb, RlbConfig};
use crate::lb::{EcmpConfig, Layer, LbConfig, LbFabric, PortDir, SwitchScheme, TestSwitch, NO_TOR};
use crate::packet::{LbHeader, Packet, PacketKind};

/// The switch of the tests' RLB instances: its hooks run as the wrapper's.
pub(super) fn switch() -> TestSwitch {
    let mut sw = TestSwitch::new(10);
    sw.layer = Layer::Wrapper;
    sw
}

/// A leaf (node 10) with hosts on ports 0, 1 and uplinks on ports 2..6; ToRs 0 (this one)
/// and 1 (hosts 2, 3).
pub(super) fn leaf(cfg: &RlbConfig) -> Rlb {
    let fabric = LbFabric {
        node: 10,
        nodes: 16,
        tor_of: vec![0, 0, 1, 1, NO_TOR, NO_TOR],
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
        port_delay_ps: vec![2_000_000; 6],
        tor_hops: vec![0, 2],
    };
    Rlb::new(cfg, &fabric)
}

pub(super) fn data(dst: u32, seq: u64) -> Packet {
    let mut p = Packet::new(PacketKind::Data);
    (p.src, p.dst, p.flow, p.seq, p.priority, p.wire_bytes) = (0, dst, 1, seq, 3, 1048);
    p
}

pub(super) fn ecmp_inner() -> RlbConfig {
    RlbConfig {
        inner: Box::new(LbConfig::Ecmp(EcmpConfig::default())),
        ..Default::default()
    }
}

pub(super) fn cnm(meta: u32) -> LbHeader {
    LbHeader { path_tag: 0, meta }
}

pub(super) fn warn(rlb: &mut Rlb, sw: &mut TestSwitch, port: u16, prio: u8) {
    let h = LbHeader {
        path_tag: 0,
        meta: cnm_meta(true, prio, 7),
    };
    rlb.on_control(&mut sw.ctx(0), port, &h);
}

/// A leaf for the tests of the recirculation limits (`max_recirculations = 5`; the tests'
/// switch views hold a loopback on ports 6 and 7).
pub(super) fn recirc_leaf(adaptive: bool) -> Rlb {
    let cfg = RlbConfig {
        adaptive,
        max_recirculations: 5,
        ..ecmp_inner()
    };
    leaf(&cfg)
}
