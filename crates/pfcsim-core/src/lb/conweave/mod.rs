//! ConWeave (Song et al., SIGCOMM'23): the source ToR reroutes a flow when an RTT probe on its
//! path comes back late, and the destination ToR puts the packets back in order before the
//! NIC, in a bounded number of reorder queues per host-facing egress.
//!
//! Follows conweave-ns3 (`conweave-routing.cc`), the RDMA reference, with the queue budget of
//! the Tofino2 implementation (conweave-p4); `docs/schemes/conweave.md` lists every choice.
//!
//! * **Source ToR** (a data packet from one of its hosts to another ToR), per flow (a table
//!   indexed by the 5-tuple hash): epoch, phase (0 before a reroute, 1 after), path, reply
//!   deadline, last activity, "stabilized". In order of precedence: a flow idle for longer
//!   than `inactive` starts a new epoch on a freshly sampled path with an INIT (RTT request);
//!   a flow whose last INIT got a timely RTT_REPLY (or whose reroute got its CLEAR) starts a
//!   new epoch on the same path with an INIT; a flow whose reply deadline (base RTT +
//!   `reply_extra`) passed sends this packet as the TAIL of its old path, then moves to a
//!   sampled path in phase 1 and stops rerouting until CLEAR; otherwise DATA. Path sampling:
//!   two random uplinks, the first not marked congested (a NOTIFY for it arrived within
//!   `path_busy`), else the current path.
//! * **Destination ToR** (a stamped data packet to one of its hosts): answers INIT with
//!   RTT_REPLY and TAIL with CLEAR, and CE-marked packets with NOTIFY(path), all as routed
//!   64-byte scheme messages to the source ToR (ECMP at every hop, strict priority). Per flow
//!   it tracks epoch and phase; a phase-1 packet that arrives while the flow is still in phase
//!   0 overtook the TAIL: it is held in a reorder queue of the egress towards the host (a
//!   physical queue: the packet stays charged to the switch buffer) until the TAIL arrives
//!   (flush 1 ns later) or a flush timer predicted from the timestamps expires. Phase-0
//!   packets pass. If none of the flow's `queue_choices` hashed queues is free, the packet
//!   passes out of order (as the P4 version falls back to the default queue).
//!
//! Header fields (carried in [`LbHeader`], no extra wire bytes): byte 0 of `path_tag` is the
//! path (the source ToR's uplink, `index + 1`); `meta` packs the flag (DATA/INIT/TAIL), the
//! phase, a 2-bit epoch and a 27-bit nanosecond timestamp: the source ToR's send time on
//! phase-0 packets, the TAIL's send time on phase-1 packets. Paths are the source ToR's
//! uplink choices; in more than two tiers the upper tiers hash the 5-tuple (as CONGA here).
//!
//! Files: `config.rs` the parameters, `header.rs` the header fields, `source.rs` the source-ToR
//! side, `reorder.rs` the destination-ToR side (on [`ReorderQueues`], `lb/reorder.rs`, shared
//! with LBoDSN); here the per-switch state and the switch hooks.

mod config;
mod header;
mod reorder;
mod source;
#[cfg(test)]
mod tests;

pub use crate::lb::reorder::ReorderQueues;
pub use config::ConWeaveConfig;
pub use header::{
    pack_data, unpack_data, FLAG_DATA, FLAG_INIT, FLAG_TAIL, MSG_CLEAR, MSG_NOTIFY, MSG_REPLY,
};
pub use source::TxFlow;

use crate::engine::mix64;
use crate::lb::{flow_hash, pick_index, Counters, Ingress, LbCtx, LbFabric, PortDir, SwitchScheme};
use crate::packet::{LbHeader, Packet};
use crate::units::Time;
use reorder::{RxFlow, RX_EMPTY};
use source::TX_EMPTY;

/// What ConWeave counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConWeaveCounters {
    /// TAILs after which the flow took another path (reported as `conweave.reroutes`).
    pub reroutes: u64,
    /// Packets sent flagged INIT (asking the destination ToR for an RTT reply).
    pub inits: u64,
    /// Packets sent flagged TAIL (the last on the old path after a late reply).
    pub tails: u64,
    /// Packets held in a reorder queue at the destination ToR.
    pub held: u64,
    /// Reorder queues released by their TAIL, and by their timer.
    pub flushes_on_tail: u64,
    pub flushes_on_timeout: u64,
    /// Out-of-order packets passed on because no reorder queue was free.
    pub queue_fallbacks: u64,
}

/// One switch's ConWeave instance (source and destination ToR roles; nothing elsewhere).
#[derive(Clone, Debug)]
pub struct ConWeave {
    cfg: ConWeaveConfig,
    salt: u64,
    my_tor: Option<u32>,
    tor_of: Vec<u32>,
    base_rtt: Vec<Time>,
    n_paths: usize,
    tx: Vec<TxFlow>,
    rx: Vec<RxFlow>,
    /// `congested_until[dst_tor * n_paths + path]`.
    congested_until: Vec<Time>,
    /// Reorder queues of the host-facing egresses (ToRs only).
    reorder: ReorderQueues,
    pub counters: ConWeaveCounters,
}

impl ConWeave {
    pub fn new(cfg: &ConWeaveConfig, fabric: &LbFabric) -> ConWeave {
        let is_tor = fabric.my_tor.is_some();
        let n_paths = fabric
            .port_dir
            .iter()
            .filter(|d| **d == PortDir::Up)
            .count()
            .clamp(1, 255);
        let uplink_delay = fabric
            .port_dir
            .iter()
            .zip(&fabric.port_delay_ps)
            .filter(|(d, _)| **d == PortDir::Up)
            .map(|(_, &ps)| ps)
            .max()
            .unwrap_or(0);
        let base_rtt = (0..fabric.tors as usize)
            .map(|t| {
                if cfg.base_rtt > Time::ZERO {
                    cfg.base_rtt
                } else {
                    let hops = fabric.tor_hops.get(t).copied().unwrap_or(2) as u64;
                    Time::from_ps(2 * hops * uplink_delay)
                }
            })
            .collect();
        let table = if is_tor { cfg.table_size as usize } else { 0 };
        ConWeave {
            cfg: cfg.clone(),
            salt: mix64(fabric.node as u64 ^ 0xc0de),
            my_tor: fabric.my_tor,
            tor_of: fabric.tor_of.clone(),
            base_rtt,
            n_paths,
            tx: vec![TX_EMPTY; table],
            rx: vec![RX_EMPTY; table],
            congested_until: vec![
                Time::ZERO;
                if is_tor {
                    fabric.tors as usize * n_paths
                } else {
                    0
                }
            ],
            reorder: ReorderQueues::new(
                &fabric.port_dir,
                cfg.reorder_queues,
                cfg.queue_choices,
                is_tor,
            ),
            counters: ConWeaveCounters::default(),
        }
    }

    /// Flow key shared by both ToRs (unsalted hash of the 5-tuple, never 0) and its slot.
    #[inline]
    fn key(&self, pkt: &Packet) -> (u32, usize) {
        let k = (flow_hash(pkt, 0) as u32).max(1);
        (k, k as usize % self.cfg.table_size as usize)
    }
}

impl SwitchScheme for ConWeave {
    /// Upper-tier switches (and ToRs for anything not pinned): the 5-tuple hash.
    fn choose(&mut self, _ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        candidates[pick_index(flow_hash(pkt, self.salt), candidates.len())]
    }

    /// A data packet arrived; `candidates` are its equal-cost egresses here.
    fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        let Some(me) = self.my_tor else {
            return Ingress::Forward;
        };
        let src_tor = self.tor_of[pkt.src as usize];
        let dst_tor = self.tor_of[pkt.dst as usize];
        if src_tor == dst_tor {
            return Ingress::Forward;
        }
        if src_tor == me {
            self.source(ctx, pkt, candidates.len(), dst_tor);
            Ingress::Forward
        } else if dst_tor == me {
            self.destination(ctx, pkt, candidates[0])
        } else {
            Ingress::Forward
        }
    }

    /// A reorder queue's flush timer.
    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        if let Some((q, by_tail)) = self.reorder.due(token) {
            self.flush(ctx, q, !by_tail);
        }
    }

    fn counters(&self, out: &mut Counters) {
        let c = &self.counters;
        out.add("reroutes", c.reroutes);
        out.add("inits", c.inits);
        out.add("tails", c.tails);
        out.add("held", c.held);
        out.add("flushes_on_tail", c.flushes_on_tail);
        out.add("flushes_on_timeout", c.flushes_on_timeout);
        out.add("queue_fallbacks", c.queue_fallbacks);
    }

    /// A routed scheme message reached this (source) ToR.
    fn on_control(&mut self, ctx: &mut LbCtx, _port: u16, header: &LbHeader) {
        self.on_message(ctx, header);
    }
}
