//! ECMP: every switch hashes the flow's 5-tuple, salted with its own id so that the tiers
//! do not make correlated choices, and takes `hash mod n` among the equal-cost next hops.
//!
//! Modelled as in the HPCC/ConWeave ns-3 simulators (hash over source and destination
//! address and ports, seeded per switch). The hash function itself differs (a 64-bit mixer
//! instead of Murmur3), so individual flows land on other paths than in those simulators; the
//! distribution is the same. Not modelled: weighted ECMP, resilient hashing on link failure.

use super::{flow_hash, pick_index, LbCtx, LbFabric, SchemeConfig, SwitchScheme};
use crate::engine::mix64;
use crate::packet::Packet;
use serde::{Deserialize, Serialize};

/// ECMP has one knob: a salt mixed into every switch's hash (change it to draw another
/// hash-to-path assignment with the same traffic).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EcmpConfig {
    /// Extra salt mixed with the switch id (default 0).
    pub salt: u64,
}

/// ECMP state of one switch: just its salt.
#[derive(Clone, Debug)]
pub struct Ecmp {
    salt: u64,
}

impl SchemeConfig for EcmpConfig {
    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Ecmp::new(self, fabric.node))
    }
}

impl Ecmp {
    pub fn new(cfg: &EcmpConfig, node: u32) -> Ecmp {
        Ecmp {
            salt: mix64(cfg.salt ^ mix64(node as u64)),
        }
    }

    /// The candidate of the packet's flow at this switch.
    #[inline]
    pub fn pick(&self, pkt: &Packet, candidates: &[u16]) -> u16 {
        candidates[pick_index(flow_hash(pkt, self.salt), candidates.len())]
    }
}

impl SwitchScheme for Ecmp {
    #[inline]
    fn choose(&mut self, _ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        self.pick(pkt, candidates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::PacketKind;

    fn pkt(sport: u16) -> Packet {
        let mut p = Packet::new(PacketKind::Data);
        p.src = 3;
        p.dst = 40;
        p.sport = sport;
        p.dport = 100;
        p
    }

    #[test]
    fn same_flow_same_port_and_flows_spread_evenly() {
        let e = Ecmp::new(&EcmpConfig::default(), 130);
        let cands = [4u16, 5, 6, 7];
        assert_eq!(e.pick(&pkt(1), &cands), e.pick(&pkt(1), &cands));
        let mut counts = [0usize; 8];
        for s in 0..8000u16 {
            counts[e.pick(&pkt(s), &cands) as usize] += 1;
        }
        for c in &counts[4..8] {
            assert!((1800..2200).contains(c), "{counts:?}");
        }
    }

    #[test]
    fn switches_hash_independently() {
        let a = Ecmp::new(&EcmpConfig::default(), 130);
        let b = Ecmp::new(&EcmpConfig::default(), 131);
        let cands = [0u16, 1];
        let agree = (0..4000u16)
            .filter(|&s| a.pick(&pkt(s), &cands) == b.pick(&pkt(s), &cands))
            .count();
        // Independent hashes agree about half the time, correlated ones always.
        assert!((1800..2200).contains(&agree), "{agree}");
    }
}
