//! The source ToR (section 3.3): flows keep their path until an FCN moves them; new flows
//! are placed by the path classes of Table 1.
//!
//! * Per (destination ToR, uplink): a tag-1 flag (set by a tag-1 FCN naming the path as the
//!   old one, cleared by a tag-0 FCN for it or after `fcn_ttl`) and the uplink's utilization
//!   (CONGA's DRE, [`crate::lb::dre`]). Uncongested: no flag; undetermined: flag and
//!   utilization below `u_high`; congested: flag and utilization at or above `u_high`.
//! * A new flow (table miss, or idle for `flow_idle`) takes a random uncongested path, else a
//!   random undetermined one, else one at random among the (up to) 3 uplinks with the least
//!   bytes queued for its priority. A flow whose sender pinned its path (byte 0 of the path
//!   tag, a scripted `path`) starts on that uplink instead; it may be moved like any other.
//! * A tag-1 FCN for a flow of the table moves it: its next packet is sent on the old path
//!   flagged TAIL, the packets after it on the target, the first of them flagged NEW, in the
//!   flow's next epoch. Until the destination ToR answers the NEW packet, the flow's CNPs are
//!   stale ([`super::cnp`]) and further FCNs for it are ignored (one move at a time).

use super::header::{timestamp, Data, MAX_UPLINKS};
use super::Lbodsn;
use crate::lb::LbCtx;
use crate::packet::Packet;
use crate::units::Time;
use rand::Rng as _;

/// A source-ToR flow-table entry.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TxFlow {
    pub key: u32,
    pub last: Time,
    pub tor: u32,
    pub up: u8,
    pub epoch: u8,
    /// Target of a move whose TAIL is still to be sent.
    pub move_to: Option<u8>,
    /// The next packet is the first on the new path (NEW).
    pub new_next: bool,
    /// A move awaits the destination ToR's reply: CNPs are stale.
    pub stale: bool,
    /// Stale CNPs of the current move (W), and their average (eq. 6).
    pub w: u32,
    pub avg: f64,
}

/// The class of a path (Table 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    Uncongested,
    Undetermined,
    Congested,
}

impl Lbodsn {
    /// The class of path (`tor`, `up`) now; `port` is the uplink's local port.
    pub fn class(&mut self, now: Time, tor: u32, up: u8, port: u16) -> Class {
        let i = tor as usize * self.n_up + up as usize;
        if self.tag1_until.get(i).is_none_or(|&t| t <= now) {
            return Class::Uncongested;
        }
        let util = self.dres.metric(now.ps(), port) as f64 / (1u64 << super::Q_BITS) as f64;
        if util >= self.u_high {
            Class::Congested
        } else {
            Class::Undetermined
        }
    }

    /// The path of a new flow to `tor` among the uplinks `candidates` at priority `prio`
    /// (no allocation: at most [`MAX_UPLINKS`] uplinks).
    pub(super) fn place(&mut self, ctx: &mut LbCtx, tor: u32, candidates: &[u16], prio: u8) -> u8 {
        let n = candidates.len().min(self.n_up).min(MAX_UPLINKS);
        let mut best = [0u8; MAX_UPLINKS];
        let mut n_best = 0;
        let mut best_class = Class::Congested;
        for (up, &port) in candidates.iter().enumerate().take(n) {
            let c = self.class(ctx.now, tor, up as u8, port);
            if c < best_class {
                best_class = c;
                n_best = 0;
            }
            if c == best_class && c != Class::Congested {
                best[n_best] = up as u8;
                n_best += 1;
            }
        }
        if n_best > 0 {
            return best[ctx.rng.gen_range(0..n_best)];
        }
        // All congested: among the 3 least-loaded local queues.
        let mut by_load = [(0u64, 0u8); MAX_UPLINKS];
        for (up, slot) in by_load.iter_mut().enumerate().take(n) {
            let q = ctx
                .ports
                .get(candidates[up] as usize)
                .map_or(0, |p| p.queue_bytes(prio));
            *slot = (q, up as u8);
        }
        by_load[..n].sort_unstable();
        by_load[ctx.rng.gen_range(0..n.min(3))].1
    }

    /// A data packet from one of this ToR's hosts to ToR `tor`: its path, stamped.
    pub(super) fn source(
        &mut self,
        ctx: &mut LbCtx,
        pkt: &mut Packet,
        candidates: &[u16],
        tor: u32,
    ) {
        let key = super::key(pkt.src, pkt.dst, pkt.sport, pkt.dport);
        let slot = key as usize % self.tx.len();
        let now = ctx.now;
        let mut f = self.tx[slot];
        let known = f.key == key && f.tor == tor && now < f.last + self.flow_idle;
        if !known {
            // A flow seen before keeps its epoch: the idle gap orders its packets.
            let epoch = if f.key == key { f.epoch } else { 0 };
            // A sender's pin (a scripted path) places the flow; LBoDSN may move it later.
            let pinned = pkt.lb.path_tag & 0xff;
            let up = if pinned != 0 {
                ((pinned - 1) as usize % candidates.len().min(self.n_up)) as u8
            } else {
                self.place(ctx, tor, candidates, pkt.priority)
            };
            self.counters.new_flows += 1;
            f = TxFlow {
                key,
                tor,
                up,
                epoch,
                ..TxFlow::default()
            };
        }
        f.last = now;
        let mut data = Data {
            tail: false,
            new: false,
            epoch: f.epoch,
            up: f.up,
            ts: timestamp(now),
        };
        if let Some(target) = f.move_to.take() {
            data.tail = true;
            self.counters.tails += 1;
            f.up = target;
            f.epoch = f.epoch.wrapping_add(1) & 3;
            f.new_next = true;
        } else if f.new_next {
            data.new = true;
            f.new_next = false;
        }
        pkt.lb.path_tag = data.up as u32 + 1;
        pkt.lb.meta = data.pack();
        self.tx[slot] = f;
    }

    /// A tag-1 FCN from ToR `tor`: flow `key` is to leave uplink `old` for `target`.
    pub(super) fn on_fcn(&mut self, now: Time, tor: u32, key: u32, old: u8, target: u8) {
        if tor as usize >= self.tors || old as usize >= self.n_up || target as usize >= self.n_up {
            return;
        }
        self.counters.fcns_received += 1;
        self.tag1_until[tor as usize * self.n_up + old as usize] = now + self.fcn_ttl;
        let n = self.tx.len();
        let slot = key as usize % n;
        let f = &mut self.tx[slot];
        let live = f.key == key && f.tor == tor && now < f.last + self.flow_idle;
        if !live || f.stale || f.move_to.is_some() || f.up != old || target == old {
            self.counters.fcns_ignored += 1;
            return;
        }
        f.move_to = Some(target);
        f.stale = true;
        f.w = 0;
        self.counters.moves += 1;
    }

    /// A tag-0 FCN: path (`tor`, `up`) is clear.
    pub(super) fn on_clear(&mut self, tor: u32, up: u8) {
        if let Some(t) = self
            .tag1_until
            .get_mut(tor as usize * self.n_up + up as usize)
        {
            *t = Time::ZERO;
            self.counters.clears_received += 1;
        }
    }

    /// The destination ToR answered the NEW packet of flow `key`: its CNPs are fresh again.
    pub(super) fn on_new_reply(&mut self, key: u32) {
        let n = self.tx.len();
        let slot = key as usize % n;
        let f = &mut self.tx[slot];
        if f.key == key && f.stale {
            f.stale = false;
            f.w = 0;
            self.counters.new_replies += 1;
        }
    }
}
