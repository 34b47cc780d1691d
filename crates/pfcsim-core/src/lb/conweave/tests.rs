//! Helpers shared by the unit tests of ConWeave's parts (which are beside the code they test),
//! and the test of what `ConWeave::new` derives from the fabric.

use super::{ConWeave, ConWeaveConfig};
use crate::lb::{LbFabric, PortDir};
use crate::packet::{Packet, PacketKind};
use crate::units::Time;

/// Leaf (ToR 0 of 2, node 20): ports 0, 1 to hosts 0, 1; ports 2..6 up (1 us links).
/// Hosts 2, 3 are under ToR 1, two hops away.
pub(super) fn leaf(my_tor: u32) -> LbFabric {
    let mut port_dir = vec![PortDir::Host; 2];
    port_dir.extend([PortDir::Up; 4]);
    LbFabric {
        node: 20,
        nodes: 30,
        tor_of: (0..30)
            .map(|n| if n < 4 { n / 2 } else { crate::lb::NO_TOR })
            .collect(),
        tors: 2,
        my_tor: Some(my_tor),
        port_dir,
        port_rate_bps: vec![100_000_000_000; 6],
        port_delay_ps: vec![1_000_000; 6],
        tor_hops: vec![
            if my_tor == 0 { 0 } else { 2 },
            if my_tor == 0 { 2 } else { 0 },
        ],
    }
}

pub(super) fn data(seq: u64) -> Packet {
    let mut p = Packet::new(PacketKind::Data);
    p.src = 0;
    p.dst = 2;
    p.sport = 7;
    p.dport = 100;
    p.seq = seq;
    p
}

#[test]
fn base_rtt_is_four_one_hop_delays_between_leaves() {
    let cw = ConWeave::new(&ConWeaveConfig::default(), &leaf(0));
    assert_eq!(cw.base_rtt[1], Time::from_us(4));
}
