//! LetFlow (Vanini et al., NSDI'17): flowlet switching with random path choice. Every switch
//! that has a choice keeps a flowlet table indexed by a hash of the 5-tuple; a data packet
//! that arrives within `flowlet_timeout` of the previous packet of its entry follows the
//! entry's egress, otherwise it starts a new flowlet on an egress drawn uniformly at random.
//!
//! Decision point (`decision`): by default every switch with several equal-cost next hops,
//! each independently, as in the paper and the TCP reference simulator (ns3-load-balance).
//! With `decision = "source_tor"`, as the RDMA reference (conweave-ns3), only the packet's
//! first switch keeps flowlets: a new flowlet also draws the choices of the later hops, which
//! the first switch writes into the packet's path tag as it leaves, and the later switches
//! follow the tag. In a two-tier leaf-spine the two are the same (a spine has one way down).
//! See `docs/schemes/letflow.md`.
//!
//! The table is a fixed array of `table_size` entries indexed by `hash mod table_size`, as in
//! hardware: flows that collide share an entry (and its flowlets). The timeout is compared
//! with the gap since the last packet *of the entry*, which every packet refreshes.

use super::{flow_hash, Capabilities, LbCtx, LbFabric, SchemeConfig, SwitchScheme};
use crate::check::check_positive_time;
use crate::engine::mix64;
use crate::packet::Packet;
use crate::units::Time;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// Where flowlets are detected and paths chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LetFlowDecision {
    /// Every switch with a choice, each with its own table (paper, ns3-load-balance).
    #[default]
    EverySwitch,
    /// The packet's first switch (its ToR) chooses the whole path and writes the later hops'
    /// choices into the path tag (conweave-ns3).
    SourceTor,
}

/// Range of the path-tag byte drawn for a later hop: `1..=TAG_RANGE`; the hop takes candidate
/// `(byte - 1) mod n`, uniform whenever n divides 240 (1-6, 8, 10, 12, 15, 16, 20, 24, ...).
const TAG_RANGE: u32 = 240;

/// `[lb] preset = "conweave-ns3"`: LetFlow as the RDMA reference simulator runs it
/// (`letflow-routing.cc`, `network-load-balance.cc` at 100 Gbps): flowlets at the source ToR,
/// which picks the whole path, with a 100 us timeout. Its table is an unbounded map, which
/// no `table_size` matches; the preset keeps the default (`docs/schemes/letflow.md`).
pub const PRESET_CONWEAVE_NS3: &str = r#"
decision = "source_tor"
flowlet_timeout = "100us"
"#;

/// LetFlow parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LetFlowConfig {
    /// A gap longer than this between two packets of a flowlet-table entry starts a new
    /// flowlet (default 100 us, as conweave-ns3 configures for 100 Gbps fabrics with 1 us
    /// links; ns3-load-balance uses 500 us at 10 Gbps with 10 us links).
    pub flowlet_timeout: Time,
    /// Entries of each switch's flowlet table (default 65,536: the 64K-entry flowlet table of
    /// the CONGA hardware design, recalled from the paper, not re-read; both reference
    /// simulators use unbounded maps, i.e. no collisions). Valid: 1..=16,777,216.
    pub table_size: u32,
    /// Where the decision runs (default `every_switch`, as the paper and ns3-load-balance;
    /// `source_tor` as conweave-ns3).
    pub decision: LetFlowDecision,
}

impl Default for LetFlowConfig {
    fn default() -> Self {
        LetFlowConfig {
            flowlet_timeout: Time::from_us(100),
            table_size: 65_536,
            decision: LetFlowDecision::EverySwitch,
        }
    }
}

impl SchemeConfig for LetFlowConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        check_positive_time("lb.flowlet_timeout", self.flowlet_timeout, "100us")?;
        super::check_table_size(self.table_size)
    }

    /// With `source_tor`, the first switch writes the later hops' choices at dequeue.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            dequeue: self.decision == LetFlowDecision::SourceTor,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(LetFlow::new(self, fabric.node))
    }
}

/// One switch's flowlet table.
///
/// An entry is packed in a `u128`: bits 0..64 the time of the entry's last packet (ps),
/// bits 64..80 the egress port + 1 (0: empty entry), bits 80..104 the path-tag bytes of
/// hops 1, 2, 3 drawn for the flowlet (`source_tor` only). A zeroed vector is an empty table,
/// and the allocator hands zeroed memory out lazily, so untouched parts cost nothing.
#[derive(Clone, Debug)]
pub struct LetFlow {
    timeout: u64,
    source_tor: bool,
    salt: u64,
    table: Vec<u128>,
}

impl LetFlow {
    pub fn new(cfg: &LetFlowConfig, node: u32) -> LetFlow {
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        LetFlow {
            timeout: cfg.flowlet_timeout.ps(),
            source_tor: cfg.decision == LetFlowDecision::SourceTor,
            salt: mix64(node as u64 ^ 0x1e7f_1040),
            table: vec![0u128; cfg.table_size as usize],
        }
    }

    #[inline]
    fn slot(&self, pkt: &Packet) -> usize {
        (flow_hash(pkt, self.salt) % self.table.len() as u64) as usize
    }
}

impl SwitchScheme for LetFlow {
    /// The flowlet decision. With `source_tor` a switch after the first one only gets here
    /// when the packet carries no tag byte for it (the first switch could not write one); it
    /// then decides with its own table.
    #[inline]
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let now = ctx.now.ps();
        let slot = self.slot(pkt);
        let entry = self.table[slot];
        let last = entry as u64;
        let stored = (entry >> 64) as u16;
        // Same flowlet: the entry is in use, the gap is within the timeout, and its port is
        // a next hop of this packet (a colliding flow to elsewhere may have set another).
        if stored != 0 && now - last <= self.timeout && candidates.contains(&(stored - 1)) {
            self.table[slot] = entry & !(u64::MAX as u128) | now as u128;
            return stored - 1;
        }
        let port = candidates[ctx.rng.gen_range(0..candidates.len())];
        let mut route = 0u128;
        if self.source_tor && pkt.hop == 0 {
            for hop in 0..3 {
                route |= (ctx.rng.gen_range(1..=TAG_RANGE) as u128) << (8 * hop);
            }
        }
        self.table[slot] = now as u128 | (port as u128 + 1) << 64 | route << 80;
        port
    }

    /// RLB with `inner_follows`: the packet left on `port` instead of its flowlet's port; the
    /// flowlet goes on from `port` (its time and its later hops' tag bytes are kept).
    fn adopt(&mut self, pkt: &Packet, port: u16) {
        let slot = self.slot(pkt);
        let entry = self.table[slot];
        if (entry >> 64) as u16 != 0 {
            self.table[slot] = entry & !((u16::MAX as u128) << 64) | (port as u128 + 1) << 64;
        }
    }

    /// With `source_tor`, the first switch writes the flowlet's choices for hops 1, 2, 3 into
    /// the path tag of a packet leaving on the flowlet's port (a packet that already carries
    /// a tag, set by its sender, keeps it).
    #[inline]
    fn on_dequeue(&mut self, _ctx: &mut LbCtx, port: u16, pkt: &mut Packet, _word: &mut u64) {
        if !self.source_tor || pkt.hop != 0 || pkt.lb.path_tag != 0 {
            return;
        }
        let entry = self.table[self.slot(pkt)];
        // The entry may have been taken over by a colliding flow while the packet queued;
        // then the later hops decide for themselves.
        if (entry >> 64) as u16 == port + 1 {
            pkt.lb.path_tag = ((entry >> 80) as u32 & 0xff_ffff) << 8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{rng_stream, StreamKind};
    use crate::packet::PacketKind;

    /// `lf`'s `on_dequeue` for packet `p` leaving on `port`.
    fn dequeue(lf: &mut LetFlow, port: u16, p: &mut Packet) {
        let mut sw = crate::lb::TestSwitch::new(7);
        lf.on_dequeue(&mut sw.ctx(0), port, p, &mut 0);
    }

    fn pkt(sport: u16) -> Packet {
        let mut p = Packet::new(PacketKind::Data);
        p.src = 1;
        p.dst = 9;
        p.sport = sport;
        p.dport = 100;
        p
    }

    /// Feeds packets of `sport` at the given times (ns) and returns the chosen ports.
    fn run(lf: &mut LetFlow, rng: &mut crate::engine::Rng, sends: &[(u16, u64)]) -> Vec<u16> {
        let mut actions = Vec::new();
        let cands = [2u16, 3, 4, 5];
        sends
            .iter()
            .map(|&(sport, ns)| {
                let mut ctx = LbCtx {
                    now: Time::from_ns(ns),
                    node: 7,
                    ports: &[],
                    layer: crate::lb::Layer::Base,
                    arrived: Time::ZERO,
                    loopback: None,
                    mmu: None,
                    rng,
                    actions: &mut actions,
                };
                lf.choose(&mut ctx, &pkt(sport), &cands)
            })
            .collect()
    }

    #[test]
    fn keeps_the_port_within_a_flowlet_and_redraws_after_a_gap() {
        let cfg = LetFlowConfig {
            flowlet_timeout: Time::from_us(10),
            ..Default::default()
        };
        let mut lf = LetFlow::new(&cfg, 7);
        let mut rng = rng_stream(1, StreamKind::Switch, 7);
        // A packet every 9 us for 900 us: one flowlet, since each packet refreshes the entry.
        let steady: Vec<_> = (0..100).map(|i| (1u16, i * 9_000)).collect();
        let ports = run(&mut lf, &mut rng, &steady);
        assert!(ports.iter().all(|&p| p == ports[0]), "{ports:?}");
        // A packet every 11 us: every packet starts a flowlet; the draws are uniform.
        let gappy: Vec<_> = (0..4000).map(|i| (2u16, 1_000_000 + i * 11_000)).collect();
        let ports = run(&mut lf, &mut rng, &gappy);
        let mut counts = [0usize; 6];
        for p in &ports {
            counts[*p as usize] += 1;
        }
        for c in &counts[2..] {
            assert!((900..1100).contains(c), "{counts:?}");
        }
        // A gap of exactly the timeout is still the same flowlet.
        let ports = run(&mut lf, &mut rng, &[(3, 0), (3, 10_000), (3, 20_000)]);
        assert!(ports.iter().all(|&p| p == ports[0]), "{ports:?}");
    }

    #[test]
    fn source_tor_tags_later_hops_per_flowlet() {
        let cfg = LetFlowConfig {
            flowlet_timeout: Time::from_us(10),
            decision: LetFlowDecision::SourceTor,
            ..Default::default()
        };
        let mut lf = LetFlow::new(&cfg, 7);
        let mut rng = rng_stream(1, StreamKind::Switch, 7);
        let mut tags = Vec::new();
        for (i, ns) in [0u64, 5_000, 30_000, 35_000, 60_000]
            .into_iter()
            .enumerate()
        {
            let port = run(&mut lf, &mut rng, &[(1, ns)])[0];
            let mut p = pkt(1);
            dequeue(&mut lf, port, &mut p);
            let tag = p.lb.path_tag;
            // Byte 0 (this switch) is left to the switch; bytes 1..4 are in 1..=240.
            assert_eq!(tag & 0xff, 0, "{tag:#x}");
            for b in 1..4 {
                assert!((1..=240).contains(&(tag >> (8 * b) & 0xff)), "{tag:#x}");
            }
            tags.push(tag);
            // A packet leaving on another port than the flowlet's is not tagged.
            let mut other = pkt(1);
            dequeue(&mut lf, port + 1, &mut other);
            assert_eq!(other.lb.path_tag, 0, "packet {i}");
        }
        // Same flowlet, same tag; new flowlets (after 25 us gaps) draw new ones.
        assert_eq!(tags[0], tags[1]);
        assert_eq!(tags[2], tags[3]);
        assert!(tags[1] != tags[2] && tags[3] != tags[4], "{tags:x?}");
        // Not the first switch, or a tag set by the sender: nothing is written.
        let mut later = pkt(1);
        later.hop = 1;
        dequeue(&mut lf, 2, &mut later);
        let mut pinned = pkt(1);
        pinned.lb.path_tag = 0x0300;
        dequeue(&mut lf, 2, &mut pinned);
        assert_eq!((later.lb.path_tag, pinned.lb.path_tag), (0, 0x0300));
        // every_switch writes no tag.
        let mut lf = LetFlow::new(&LetFlowConfig::default(), 7);
        let port = run(&mut lf, &mut rng, &[(1, 0)])[0];
        let mut p = pkt(1);
        dequeue(&mut lf, port, &mut p);
        assert_eq!(p.lb.path_tag, 0);
    }

    #[test]
    fn colliding_flows_share_an_entry() {
        let cfg = LetFlowConfig {
            table_size: 1,
            ..Default::default()
        };
        let mut lf = LetFlow::new(&cfg, 7);
        let mut rng = rng_stream(1, StreamKind::Switch, 7);
        let sends: Vec<_> = (0..200).map(|i| (i as u16, i * 1_000)).collect();
        let ports = run(&mut lf, &mut rng, &sends);
        assert!(ports.iter().all(|&p| p == ports[0]), "{ports:?}");
    }

    #[test]
    fn validation_names_the_key_and_range() {
        let zero = LetFlowConfig {
            flowlet_timeout: Time::ZERO,
            ..Default::default()
        };
        assert!(zero
            .validate()
            .unwrap_err()
            .starts_with("lb.flowlet_timeout: must be above 0"));
        let empty = LetFlowConfig {
            table_size: 0,
            ..Default::default()
        };
        assert_eq!(
            empty.validate().unwrap_err(),
            "lb.table_size: 0 is out of range; use 1..=16777216 entries (e.g. 65536)"
        );
    }
}
