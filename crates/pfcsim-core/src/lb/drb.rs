//! DRB (digit-reversal bouncing, Cao et al., CoNEXT'13): per-packet round robin over the
//! equal-cost next hops, with one counter per destination.
//!
//! The reference implementation (ns3-load-balance, `Ipv4DrbRouting` in its per-destination
//! mode) runs at the sending host: it tags each packet with a path (one per spine), keeps a
//! round-robin index per destination address, starts it at a random path and advances it by
//! one per packet. pfcsim runs the same rule in every switch that has a choice, with the
//! counter keyed by the packet's destination host: at the source leaf of a leaf-spine this is
//! the host rule for the leaf's senders (exactly the host rule when one sender talks to a
//! destination); in a three-tier Clos the first tier's choice changes fastest, which is the
//! paper's digit-reversal order of bouncing switches. See `docs/schemes/drb.md`.
//!
//! Not modelled: IP-in-IP encapsulation (the bounce), the receiver's resequencing buffer (an
//! RDMA NIC has none; go-back-N handles reordering), weighted DRB.

use super::{LbCtx, LbFabric, SchemeConfig, SwitchScheme};
use crate::packet::Packet;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// The order in which a counter walks the candidates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrbOrder {
    /// Candidate `(start + k) mod n` for the destination's `k`-th packet (ns3-load-balance).
    #[default]
    RoundRobin,
    /// The `k`-th packet takes the position whose index is `k mod n` with its binary digits
    /// reversed (over the next power of two, skipping positions >= n): for n = 4 the order
    /// 0, 2, 1, 3. Consecutive packets go to candidates far apart in port order.
    DigitReversal,
}

/// DRB parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrbConfig {
    /// Order of the walk over a switch's candidates (default `round_robin`, as
    /// ns3-load-balance; `digit_reversal` applies the paper's digit reversal within a switch).
    pub order: DrbOrder,
}

/// One switch's counters, one per destination node (sized to the fabric's node count).
#[derive(Clone, Debug)]
pub struct Drb {
    order: DrbOrder,
    /// 0: destination not seen yet; otherwise `k + 1`, `k` the index of the next packet.
    next: Vec<u32>,
}

impl SchemeConfig for DrbConfig {
    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Drb::new(self, fabric.nodes))
    }
}

impl Drb {
    pub fn new(cfg: &DrbConfig, nodes: u32) -> Drb {
        Drb {
            order: cfg.order,
            next: vec![0; nodes as usize],
        }
    }
}

impl SwitchScheme for Drb {
    #[inline]
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let n = candidates.len() as u32;
        let slot = &mut self.next[pkt.dst as usize];
        // The first packet to a destination starts at a random position, as the reference.
        let k = if *slot == 0 {
            ctx.rng.gen_range(0..n)
        } else {
            *slot - 1
        };
        // Keep the counter within one cycle of n, so it never wraps mid-cycle.
        *slot = (k + 1) % n + 1;
        let pos = match self.order {
            DrbOrder::RoundRobin => k % n,
            DrbOrder::DigitReversal => digit_reversed(k % n, n),
        };
        candidates[pos as usize]
    }
}

/// The `k`-th element (k < n) of the bit-reversal order of 0..n: the indices 0..2^b (2^b the
/// smallest power of two >= n) with their b bits reversed, keeping those below n.
fn digit_reversed(k: u32, n: u32) -> u32 {
    let bits = n.next_power_of_two().trailing_zeros();
    if bits == 0 {
        return 0;
    }
    let mut seen = 0;
    for i in 0..1u32 << bits {
        let r = i.reverse_bits() >> (32 - bits);
        if r < n {
            if seen == k {
                return r;
            }
            seen += 1;
        }
    }
    unreachable!("k < n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{rng_stream, StreamKind};
    use crate::packet::PacketKind;
    use crate::units::Time;

    fn choices(drb: &mut Drb, dsts: &[u32], cands: &[u16]) -> Vec<u16> {
        let mut rng = rng_stream(3, StreamKind::Switch, 1);
        let mut actions = Vec::new();
        dsts.iter()
            .map(|&dst| {
                let mut p = Packet::new(PacketKind::Data);
                p.dst = dst;
                let mut ctx = LbCtx {
                    now: Time::ZERO,
                    node: 1,
                    ports: &[],
                    layer: crate::lb::Layer::Base,
                    arrived: Time::ZERO,
                    loopback: None,
                    mmu: None,
                    rng: &mut rng,
                    actions: &mut actions,
                };
                drb.choose(&mut ctx, &p, cands)
            })
            .collect()
    }

    #[test]
    fn round_robin_per_destination_from_a_random_start() {
        let mut drb = Drb::new(&DrbConfig::default(), 16);
        let cands = [4u16, 5, 6];
        // Interleaved destinations 2 and 3: each walks the candidates on its own.
        let dsts: Vec<u32> = (0..30).map(|i| 2 + i % 2).collect();
        let got = choices(&mut drb, &dsts, &cands);
        for d in 0..2 {
            let seq: Vec<u16> = got.iter().skip(d).step_by(2).copied().collect();
            for w in seq.windows(2) {
                assert_eq!((w[0] - 4 + 1) % 3, w[1] - 4, "{seq:?}");
            }
        }
        // The starts are random: over many destinations every position starts some walk.
        let mut drb = Drb::new(&DrbConfig::default(), 300);
        let firsts = choices(&mut drb, &(0..300).collect::<Vec<_>>(), &cands);
        assert!(cands.iter().all(|c| firsts.contains(c)));
    }

    #[test]
    fn digit_reversal_orders() {
        let order = |n| (0..n).map(|k| digit_reversed(k, n)).collect::<Vec<_>>();
        assert_eq!(order(1), [0]);
        assert_eq!(order(2), [0, 1]);
        assert_eq!(order(4), [0, 2, 1, 3]);
        assert_eq!(order(8), [0, 4, 2, 6, 1, 5, 3, 7]);
        assert_eq!(order(6), [0, 4, 2, 1, 5, 3]);
        let cfg = DrbConfig {
            order: DrbOrder::DigitReversal,
        };
        let mut drb = Drb::new(&cfg, 4);
        let got = choices(&mut drb, &[1; 12], &[0, 1, 2, 3]);
        // Some rotation of 0, 2, 1, 3, repeated.
        let start = [0u16, 2, 1, 3].iter().position(|&c| c == got[0]).unwrap();
        for (i, &c) in got.iter().enumerate() {
            assert_eq!(c, [0u16, 2, 1, 3][(start + i) % 4]);
        }
    }
}
