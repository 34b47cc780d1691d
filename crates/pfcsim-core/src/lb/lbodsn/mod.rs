//! LBoDSN (Shi et al., "LBoDSN: An In-network Load Balancing Mechanism for Lossless Data
//! Center Networks Based on Direct Switch Notification"): the destination ToR predicts a PFC
//! PAUSE of an ingress queue, picks the flows causing it and tells their source ToR directly
//! which flow to move and where (a flow congestion notification, FCN); the source ToR moves
//! the flow, places new flows away from warned paths and drops stale CNPs of the old path; the
//! destination ToR restores order as ConWeave does.
//!
//! What is modelled (the paper leaves most mechanics open; each choice is in
//! `docs/schemes/lbodsn.md`):
//! * **Prediction** ([`predict`], eq. 1-2): per (ingress port from a spine, priority) of the
//!   destination ToR, the arrival and departure rates and growth of the queue over
//!   `rate_window`; while `λ > μ`, `Q ≥ Q_th` fires, at most once per `fcn_gap`.
//! * **Congested flows** ([`flows`], eq. 3): bytes per (ingress, flow) in the buffer; flows
//!   above `F_cc = Q >> ⌈log2 fNum⌉` (every flow with bytes, with `f_cc = false`), the largest
//!   `flows_per_fcn` named.
//! * **Target** ([`target`], eq. 4-5): power of two choices among the source ToR's other
//!   uplinks on `T_path + T_PFC`.
//! * **FCN**: a 64-byte strict-priority message routed to the source ToR (flow, target,
//!   tag 1); a tag-0 FCN for the path when the episode ends.
//! * **Source ToR** ([`source`], Table 1): flows keep their path until moved; tag-1 flags and
//!   the uplinks' DRE utilization class the paths for new flows.
//! * **Reordering** ([`reorder`]): TAIL on the last old-path packet, newer packets held in
//!   ConWeave's reorder queues until it arrives or `default_wait` passes.
//! * **Stale CNPs** ([`cnp`], eq. 6-7): the first new-path packet is flagged NEW and
//!   answered; until then the flow's CNPs are stale and dropped with the paper's probability.
//!
//! Not modelled: header bytes (the fields ride in `LbHeader`, which costs no wire bytes), the
//! INT and mirroring machinery (their results are read directly: send times, the MMU's
//! counters), more than two tiers of choice (upper tiers hash the 5-tuple).

mod cnp;
mod config;
mod flows;
mod header;
mod predict;
mod reorder;
mod source;
mod target;
#[cfg(test)]
mod tests;

pub use config::LbodsnConfig;
pub use source::{Class, TxFlow};

use super::dre::PortDres;
use super::reorder::ReorderQueues;
use super::{
    flow_hash, pick_index, Counters, Ingress, LbCtx, LbFabric, PortDir, SwitchScheme, NO_TOR,
};
use crate::engine::mix64;
use crate::packet::{LbHeader, Packet, PacketKind};
use crate::port::N_PRIO;
use crate::units::Time;
use config::Q_BITS;
use flows::{FlowBytes, FlowId};
use header::{since, Data, Msg, MSG_FCN, MSG_NEW_REPLY};
use predict::{Warned, Window};
use reorder::RxFlow;
use source::TxFlow as Tx;
use target::Paths;

/// What LBoDSN counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbodsnCounters {
    /// Tag-1 FCNs sent (destination ToR), and those sent while the ingress was already
    /// pausing.
    pub fcns: u64,
    pub fcns_while_pausing: u64,
    /// Tag-1 FCNs sent before any arrival found an ingress of this ToR pausing.
    pub fcns_before_pause: u64,
    /// Tag-0 FCNs sent.
    pub fcn_clears: u64,
    /// Triggers with no target (both sampled uplinks paused and not draining).
    pub no_target: u64,
    /// Tag-1 FCNs received (source ToR), those that moved a flow, and those ignored (flow
    /// unknown, idle, already moving, or no longer on the named path).
    pub fcns_received: u64,
    pub moves: u64,
    pub fcns_ignored: u64,
    /// Tag-0 FCNs received.
    pub clears_received: u64,
    /// New flows placed by the path classes.
    pub new_flows: u64,
    /// Packets sent flagged TAIL.
    pub tails: u64,
    /// NEW packets answered (destination ToR), and answers received (source ToR).
    pub new_answered: u64,
    pub new_replies: u64,
    /// Packets held in reorder queues; queues flushed by their TAIL and by `default_wait`;
    /// out-of-order packets passed because no queue was free.
    pub held: u64,
    pub flushes_on_tail: u64,
    pub flushes_on_timeout: u64,
    pub queue_fallbacks: u64,
    /// Stale CNPs seen, and those dropped.
    pub stale_cnps: u64,
    pub stale_cnps_dropped: u64,
}

/// The flow key both ToRs use: the unsalted 5-tuple hash (as [`flow_hash`] with salt 0),
/// never 0.
#[inline]
pub(crate) fn key(src: u32, dst: u32, sport: u16, dport: u16) -> u32 {
    let tuple = (src as u64) << 32 | dst as u64;
    let ports = (sport as u64) << 16 | dport as u64;
    (mix64(mix64(tuple) ^ ports) as u32).max(1)
}

/// One switch's LBoDSN instance (source and destination ToR roles; other switches hash).
#[derive(Debug)]
pub struct Lbodsn {
    epsilon: f64,
    rate_window: Time,
    fcn_gap: Time,
    predict: bool,
    flows_per_fcn: u32,
    f_cc: bool,
    flow_idle: Time,
    u_high: f64,
    fcn_ttl: Time,
    w_q: f64,
    max_p: f64,
    cnp_t: u32,
    cnp_filter: bool,
    default_wait: Time,
    reorder_enabled: bool,
    salt: u64,
    my_tor: Option<u32>,
    tor_of: Vec<u32>,
    tors: usize,
    n_up: usize,
    port_dir: Vec<PortDir>,
    /// Line rate of each local port, bytes per ns (`C`).
    port_bytes_per_ns: Vec<f64>,
    port_delay: Vec<Time>,
    /// One-way time of an FCN to a source ToR: 2 hops of propagation and serialization.
    t_d: Time,
    // Source ToR.
    tx: Vec<Tx>,
    /// `tag1_until[tor * n_up + up]`: the path's tag-1 flag lapses then.
    tag1_until: Vec<Time>,
    dres: PortDres,
    // Destination ToR.
    flows: FlowBytes,
    /// Per (port, priority).
    windows: Vec<Window>,
    episode: Vec<Vec<Warned>>,
    paths: Paths,
    rx: Vec<RxFlow>,
    reorder_queues: ReorderQueues,
    /// When the first FCN left, and when an arrival first found its ingress pausing.
    first_fcn: Option<Time>,
    first_pause_seen: Option<Time>,
    counters: LbodsnCounters,
}

impl Lbodsn {
    pub fn new(cfg: &LbodsnConfig, fabric: &LbFabric) -> Lbodsn {
        use crate::lb::SchemeConfig;
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let is_tor = fabric.my_tor.is_some();
        let n_ports = fabric.port_dir.len();
        let n_up = fabric
            .port_dir
            .iter()
            .filter(|d| **d == PortDir::Up)
            .count()
            .min(header::MAX_UPLINKS);
        let fabric_ports = || {
            fabric
                .port_dir
                .iter()
                .enumerate()
                .filter(|(_, d)| matches!(d, PortDir::Up | PortDir::Down | PortDir::Flat))
                .map(|(i, _)| i)
        };
        let fabric_delay = fabric_ports()
            .map(|i| fabric.port_delay_ps[i])
            .max()
            .unwrap_or(0);
        let fabric_rate = fabric_ports()
            .map(|i| fabric.port_rate_bps[i])
            .min()
            .unwrap_or(100_000_000_000)
            .max(1);
        let max_hops = fabric.tor_hops.iter().copied().max().unwrap_or(2).max(1) as u64;
        let base_rtt = Time::from_ps(2 * max_hops * fabric_delay).max(Time::from_ns(100));
        let control_ser = Time::from_ps(64 * 8 * 1_000_000_000_000 / fabric_rate);
        let t_d = Time::from_ps(2 * (fabric_delay + control_ser.ps()));
        let or = |v: Time, dflt: Time| if v > Time::ZERO { v } else { dflt };
        let tors = fabric.tors as usize;
        let table = if is_tor { cfg.table_size as usize } else { 0 };
        let per_pq = if is_tor { n_ports * N_PRIO } else { 0 };
        Lbodsn {
            epsilon: cfg.epsilon,
            rate_window: cfg.rate_window,
            fcn_gap: or(cfg.fcn_gap, base_rtt),
            predict: cfg.predict,
            flows_per_fcn: cfg.flows_per_fcn,
            f_cc: cfg.f_cc,
            flow_idle: cfg.flow_idle,
            u_high: cfg.u_high,
            fcn_ttl: or(cfg.fcn_ttl, Time(10 * base_rtt.ps())),
            w_q: cfg.w_q,
            max_p: cfg.max_p,
            cnp_t: cfg.cnp_t,
            cnp_filter: cfg.cnp_filter,
            default_wait: cfg.default_wait,
            reorder_enabled: cfg.reorder_queues > 0,
            salt: mix64(fabric.node as u64 ^ 0x1b0d5),
            my_tor: fabric.my_tor,
            tor_of: fabric.tor_of.clone(),
            tors,
            n_up,
            port_dir: fabric.port_dir.clone(),
            port_bytes_per_ns: fabric
                .port_rate_bps
                .iter()
                .map(|&r| r as f64 / 8e9)
                .collect(),
            port_delay: fabric
                .port_delay_ps
                .iter()
                .map(|&ps| Time::from_ps(ps))
                .collect(),
            t_d,
            tx: vec![Tx::default(); table],
            tag1_until: vec![Time::ZERO; if is_tor { tors * n_up } else { 0 }],
            dres: PortDres::new(cfg.t_dre, cfg.dre_alpha, Q_BITS, &fabric.port_rate_bps),
            flows: FlowBytes::new(table, n_ports),
            windows: vec![Window::default(); per_pq],
            episode: vec![Vec::new(); per_pq],
            paths: Paths::new(if is_tor { tors } else { 0 }, n_up),
            rx: vec![RxFlow::default(); if cfg.reorder_queues > 0 { table } else { 0 }],
            reorder_queues: ReorderQueues::new(
                &fabric.port_dir,
                cfg.reorder_queues,
                cfg.queue_choices.max(1),
                is_tor && cfg.reorder_queues > 0,
            ),
            first_fcn: None,
            first_pause_seen: None,
            counters: LbodsnCounters::default(),
        }
    }

    /// What this switch counted.
    pub fn lbodsn_counters(&self) -> LbodsnCounters {
        self.counters
    }

    /// When this switch sent its first FCN, and when an arriving packet first found its
    /// ingress pausing (destination ToR).
    pub fn first_fcn(&self) -> Option<Time> {
        self.first_fcn
    }

    pub fn first_pause_seen(&self) -> Option<Time> {
        self.first_pause_seen
    }

    /// The source ToR's entry for a flow (`None`: not in the table).
    pub fn tx_flow(&self, src: u32, dst: u32, sport: u16, dport: u16) -> Option<TxFlow> {
        let k = key(src, dst, sport, dport);
        let f = self.tx.get(k as usize % self.tx.len().max(1))?;
        (f.key == k).then_some(*f)
    }

    #[inline]
    fn tor(&self, node: u32) -> u32 {
        self.tor_of.get(node as usize).copied().unwrap_or(NO_TOR)
    }

    /// Destination-ToR work for an LBoDSN data packet from ToR `src_tor`: path delay,
    /// per-flow bytes, rates, the trigger, the NEW reply, and reordering.
    fn destination(
        &mut self,
        ctx: &mut LbCtx,
        pkt: &Packet,
        d: Data,
        src_tor: u32,
        out: u16,
    ) -> Ingress {
        let port = pkt.ingress_port();
        let k = key(pkt.src, pkt.dst, pkt.sport, pkt.dport);
        if self.port_dir.get(port as usize) == Some(&PortDir::Up) {
            self.paths.seen(src_tor, d.up, port, since(ctx.now, d.ts));
            let prio = pkt.priority;
            let bytes = pkt.wire_bytes as u64;
            if let Some(mmu) = ctx.mmu {
                let q = mmu.ingress_use(port as usize, prio);
                let w = &mut self.windows[port as usize * N_PRIO + prio as usize];
                w.roll(ctx.now, self.rate_window, q);
                w.arrive(bytes);
            }
            let id = FlowId {
                key: k,
                src: pkt.src,
                sport: pkt.sport,
                dport: pkt.dport,
                src_tor,
                up: d.up,
            };
            self.flows.add(port, prio, id, bytes);
            self.check_trigger(ctx, port, prio);
        }
        if d.new {
            self.counters.new_answered += 1;
            Self::send(
                ctx,
                pkt.src,
                pkt.sport,
                pkt.dport,
                k,
                Msg {
                    kind: MSG_NEW_REPLY,
                    tag: false,
                    target: d.up,
                    old: d.up,
                    dst_tor: self.my_tor.unwrap_or(0),
                },
            );
        }
        self.reorder(ctx, k, d, out)
    }

    /// An LBoDSN data packet from a spine leaves towards one of this ToR's hosts.
    fn departed(&mut self, ctx: &mut LbCtx, pkt: &Packet) {
        let port = pkt.ingress_port();
        if self.port_dir.get(port as usize) != Some(&PortDir::Up) {
            return;
        }
        let prio = pkt.priority;
        let bytes = pkt.wire_bytes as u64;
        let k = key(pkt.src, pkt.dst, pkt.sport, pkt.dport);
        self.flows.remove(port, prio, k, bytes);
        if let Some(mmu) = ctx.mmu {
            let q = mmu.ingress_use(port as usize, prio);
            let w = &mut self.windows[port as usize * N_PRIO + prio as usize];
            w.roll(ctx.now, self.rate_window, q);
            w.depart(bytes);
        }
        self.check_clear(ctx, port, prio);
    }
}

impl SwitchScheme for Lbodsn {
    /// Switches past the source ToR (and anything unstamped): the 5-tuple hash.
    fn choose(&mut self, _ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        candidates[pick_index(flow_hash(pkt, self.salt), candidates.len())]
    }

    fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        let Some(me) = self.my_tor else {
            return Ingress::Forward;
        };
        let (src_tor, dst_tor) = (self.tor(pkt.src), self.tor(pkt.dst));
        if src_tor == dst_tor || src_tor == NO_TOR || dst_tor == NO_TOR {
            return Ingress::Forward;
        }
        if src_tor == me {
            if self.n_up > 0 && candidates.len() > 1 {
                self.source(ctx, pkt, candidates, dst_tor);
            }
            Ingress::Forward
        } else if dst_tor == me {
            match Data::of(pkt.lb.meta) {
                Some(d) => self.destination(ctx, pkt, d, src_tor, candidates[0]),
                None => Ingress::Forward,
            }
        } else {
            Ingress::Forward
        }
    }

    fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet, _word: &mut u64) {
        let dir = self.port_dir.get(port as usize).copied();
        if pkt.kind != PacketKind::Data {
            if self.cnp_filter && self.my_tor.is_some() && dir == Some(PortDir::Host) {
                self.filter_cnp(ctx, pkt);
            }
            return;
        }
        match dir {
            Some(PortDir::Up) if self.my_tor.is_some() => {
                self.dres.add(ctx.now.ps(), port, pkt.wire_bytes as u64);
            }
            Some(PortDir::Host) if Data::of(pkt.lb.meta).is_some() => {
                let src_tor = self.tor(pkt.src);
                if src_tor != NO_TOR && Some(src_tor) != self.my_tor {
                    self.departed(ctx, pkt);
                }
            }
            _ => {}
        }
    }

    fn on_control(&mut self, ctx: &mut LbCtx, _port: u16, header: &LbHeader) {
        let m = Msg::of(header.meta);
        match (m.kind, m.tag) {
            (MSG_FCN, true) => self.on_fcn(ctx.now, m.dst_tor, header.path_tag, m.old, m.target),
            (MSG_FCN, false) => self.on_clear(m.dst_tor, m.old),
            (MSG_NEW_REPLY, _) => self.on_new_reply(header.path_tag),
            _ => {}
        }
    }

    /// A reorder queue's flush timer.
    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        if let Some((q, by_tail)) = self.reorder_queues.due(token) {
            self.flush(ctx, q, by_tail);
        }
    }

    fn counters(&self, out: &mut Counters) {
        let c = &self.counters;
        for (name, value) in [
            ("fcns", c.fcns),
            ("fcns_while_pausing", c.fcns_while_pausing),
            ("fcns_before_pause", c.fcns_before_pause),
            ("fcn_clears", c.fcn_clears),
            ("no_target", c.no_target),
            ("fcns_received", c.fcns_received),
            ("moves", c.moves),
            ("fcns_ignored", c.fcns_ignored),
            ("clears_received", c.clears_received),
            ("new_flows", c.new_flows),
            ("tails", c.tails),
            ("new_answered", c.new_answered),
            ("new_replies", c.new_replies),
            ("held", c.held),
            ("flushes_on_tail", c.flushes_on_tail),
            ("flushes_on_timeout", c.flushes_on_timeout),
            ("queue_fallbacks", c.queue_fallbacks),
            ("stale_cnps", c.stale_cnps),
            ("stale_cnps_dropped", c.stale_cnps_dropped),
        ] {
            out.add(name, value);
        }
    }
}
