//! PLB (Hu et al., APNet'22, "Load Balancing in PFC-Enabled Datacenter Networks"): the source
//! ToR sorts its paths into non-congested, congested and undetermined (paused by PFC) from
//! their RTT and utilization, and a budget carried by each packet decides, at every hop, when
//! a PFC pause is long enough to kick the packet's path out.
//!
//! What is modelled (the paper leaves most mechanics open; each choice is in
//! `docs/schemes/plb.md`):
//! * **Decision point**: the source ToR, per flow, over its uplinks; a path is (destination
//!   ToR, uplink). Other switches hash among their candidates (ECMP).
//! * **RTT-level signals** ([`paths`]): per path, the RTT and the utilization, sampled together
//!   by a stamp piggybacked on a data packet leaving the uplink (at most one per `rtt_period`
//!   per path): the destination ToR holds the stamp and returns it on the next packet (data,
//!   ACK or NACK) it sends towards the source ToR, as RLB does; RTT = return time - send
//!   time, the send time being when the packet leaves the uplink or, with `rtt_from =
//!   "arrival"`, when it arrived at the source ToR (so the uplink's queue counts). The utilization is the largest DRE metric along the path ([`crate::lb::dre`], the
//!   CE fold of CONGA), with the source ToR's current metric of the uplink. Unanswered stamps,
//!   aging and the class boundaries are in [`paths`].
//! * **Classes** (section 3.2): non-congested if `rtt < RTT_low`; congested if `rtt >= RTT_low`
//!   and utilization `>= u_full`; otherwise undetermined. `RTT_low = base RTT + rtt_low_extra`.
//! * **Choice** (Algorithm 2): only for a new flow (a table miss, or idle for `flow_idle`) or
//!   one whose path is congested or kicked out: the active non-congested path with the least
//!   RTT, else the active undetermined path with the highest utilization, else the active
//!   congested path with the least RTT, else (not in the paper) the least RTT of all. Ties at
//!   random.
//! * **Sub-RTT signal** (Algorithm 1): the source ToR writes into each data packet it sends up
//!   the budget `t_td = td_scale x (RTT of the best other active path - RTT of the packet's
//!   path)`, at least 0, and the uplink ([`header`]). Every switch subtracts the packet's
//!   sojourn from it as the packet leaves (cumulative, at every hop) and keeps the average
//!   sojourn `t_avgST` (EWMA, weight `alpha`). A data packet about to queue behind a paused
//!   fabric egress (its priority paused by the next switch) waits if `t_td >= max(t_avgST,
//!   t_pd)` with `t_pd` = bytes queued ahead / the egress's rate; otherwise it waits too (PLB
//!   never drops or recirculates) and its path is kicked out: locally at the source ToR
//!   (before the choice, so the packet itself moves), elsewhere by a 64-byte KICK sent to the
//!   source ToR at strict priority (later packets move).
//! * A kicked path comes back when a sample whose stamp left after the kick arrives, or after
//!   `kick_ttl`.
//!
//! Not modelled: the header bytes (fields ride in `LbHeader` and the scheme word, which cost
//! no wire bytes), PLB in more than two tiers of choice (upper tiers hash), pauses of host
//! links (common to every path: they kick nothing). `kick = "on_pause"` and `"never"` replace
//! Algorithm 1's test for the motivation figures.
//!
//! Layout: `config.rs` the parameters, `header.rs` the header fields, `paths.rs` the path
//! table (signals, classes, Algorithm 2, the budget); this file the per-switch state and the
//! hooks.

mod config;
mod header;
mod paths;
#[cfg(test)]
mod tests;

pub use config::{Kick, PlbConfig, RttFrom};
pub use paths::Class;

use super::dre::{fold, PortDres};
use super::stamps::{HeldStamps, StampsSent};
use super::{
    flow_hash, pick_index, Counters, LbCtx, LbFabric, PortDir, RoutedMessage, SwitchScheme, NO_TOR,
};
use crate::engine::mix64;
use crate::packet::{LbHeader, Packet, PacketKind};
use crate::port::CONTROL_PRIO;
use crate::units::Time;
use header::{Echo, Stamp, Word};
use paths::Path;
use std::collections::HashMap;

/// What PLB counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlbCounters {
    /// Flows placed by Algorithm 2 as new (table miss or idle).
    pub new_flows: u64,
    /// Packets of a known flow sent on another uplink than the flow's previous one.
    pub path_changes: u64,
    /// Paths kicked out at the source ToR (by its own check or a KICK).
    pub kicks: u64,
    /// KICK messages sent by switches past the source ToR.
    pub kick_messages: u64,
    /// Packets that met a pause and waited within their budget (Algorithm 1, line 6).
    pub waits: u64,
    /// Kicked paths back in service by a fresh sample, and by `kick_ttl`.
    pub readmissions: u64,
    pub expiries: u64,
    /// Stamps sent, and samples (returned stamps) taken.
    pub stamps: u64,
    pub samples: u64,
}

/// A flow-table entry (the flow hash picks the slot; colliding flows share it).
#[derive(Clone, Copy, Debug, Default)]
struct FlowEntry {
    /// Last packet; `None`: empty.
    last: Option<Time>,
    /// Destination ToR and uplink of the flow's path.
    tor: u32,
    up: u8,
}

/// One switch's PLB state.
#[derive(Debug)]
pub struct Plb {
    rtt_low_extra: Time,
    /// `u_full` x 2^q_bits: the metric of a fully used path.
    full_metric: f64,
    alpha: f64,
    flow_idle: Time,
    td_scale: f64,
    kick: Kick,
    rtt_from: RttFrom,
    aging: Time,
    salt: u64,
    tor_of: Vec<u32>,
    my_tor: Option<u32>,
    port_dir: Vec<PortDir>,
    /// Per local port: its index among the uplinks (`u8::MAX`: not a measured uplink).
    uplink_index: Vec<u8>,
    /// Local port of each uplink index.
    uplinks: Vec<u16>,
    /// Per destination ToR: base RTT (propagation, leaf to leaf and back), sampling period
    /// and kick lifetime.
    base_rtt: Vec<Time>,
    rtt_period: Vec<Time>,
    kick_ttl: Vec<Time>,
    /// Least time between two KICKs of one path from this switch (about one base RTT).
    kick_window: Time,
    dres: PortDres,
    /// `t_avgST`, nanoseconds.
    avg_sojourn_ns: f64,
    /// `paths[tor * n_up + up]` (source ToR side).
    paths: Vec<Path>,
    /// Stamps sent per path, and unanswered (source ToR side).
    sent: StampsSent,
    /// Stamps from another ToR's uplinks, held for the way back (destination ToR side).
    held: HeldStamps<Stamp>,
    flows: Vec<FlowEntry>,
    /// Last KICK sent per (source ToR, destination ToR, uplink).
    kicks_sent: HashMap<u64, Time>,
    counters: PlbCounters,
}

impl Plb {
    pub fn new(cfg: &PlbConfig, fabric: &LbFabric) -> Plb {
        use crate::lb::SchemeConfig;
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let n_ports = fabric.port_dir.len();
        let mut uplink_index = vec![u8::MAX; n_ports];
        let mut uplinks = Vec::new();
        if fabric.my_tor.is_some() {
            for (p, d) in fabric.port_dir.iter().enumerate() {
                if *d == PortDir::Up && uplinks.len() < header::MEASURED_UPLINKS {
                    uplink_index[p] = uplinks.len() as u8;
                    uplinks.push(p as u16);
                }
            }
        }
        let n_up = uplinks.len();
        let fabric_delay = fabric
            .port_dir
            .iter()
            .zip(&fabric.port_delay_ps)
            .filter(|(d, _)| matches!(d, PortDir::Up | PortDir::Down | PortDir::Flat))
            .map(|(_, &ps)| ps)
            .max()
            .unwrap_or(0);
        let tors = fabric.tors as usize;
        let base_rtt: Vec<Time> = (0..tors)
            .map(|t| {
                let hops = fabric.tor_hops.get(t).copied().unwrap_or(2) as u64;
                Time::from_ps(2 * hops * fabric_delay)
            })
            .collect();
        let or_rtts = |value: Time, rtts: u64| -> Vec<Time> {
            base_rtt
                .iter()
                .map(|&b| {
                    if value > Time::ZERO {
                        value
                    } else {
                        Time(rtts * b.max(Time::from_ns(100)).ps())
                    }
                })
                .collect()
        };
        let rtt_period = or_rtts(cfg.rtt_period, 1);
        let kick_ttl = or_rtts(cfg.kick_ttl, 4);
        let max_hops = fabric.tor_hops.iter().copied().max().unwrap_or(1).max(1) as u64;
        let source = fabric.my_tor.is_some() && n_up > 0;
        let per_tor = |n: usize| if source { n * tors } else { 0 };
        let scale = (1u64 << cfg.q_bits) as f64;
        Plb {
            rtt_low_extra: cfg.rtt_low_extra,
            full_metric: cfg.u_full * scale,
            alpha: cfg.alpha,
            flow_idle: cfg.flow_idle,
            td_scale: cfg.td_scale,
            kick: cfg.kick,
            rtt_from: cfg.rtt_from,
            aging: cfg.aging,
            salt: mix64(fabric.node as u64 ^ 0x9_1b00),
            tor_of: fabric.tor_of.clone(),
            my_tor: fabric.my_tor,
            port_dir: fabric.port_dir.clone(),
            uplink_index,
            uplinks,
            base_rtt,
            rtt_period,
            kick_ttl,
            kick_window: Time(4 * max_hops * fabric_delay).max(Time::from_ns(100)),
            dres: PortDres::new(cfg.t_dre, cfg.dre_alpha, cfg.q_bits, &fabric.port_rate_bps),
            avg_sojourn_ns: 0.0,
            paths: vec![Path::default(); per_tor(n_up)],
            sent: StampsSent::new(if source { tors } else { 0 }, n_up, header::CLOCK),
            held: HeldStamps::new(if source { tors } else { 0 }, n_up),
            flows: if source {
                vec![FlowEntry::default(); cfg.table_size as usize]
            } else {
                Vec::new()
            },
            kicks_sent: HashMap::new(),
            counters: PlbCounters::default(),
        }
    }

    /// The average sojourn time `t_avgST` at this switch.
    pub fn avg_sojourn(&self) -> Time {
        Time::from_ps((self.avg_sojourn_ns * 1_000.0) as u64)
    }

    #[inline]
    fn n_up(&self) -> usize {
        self.uplinks.len()
    }

    #[inline]
    fn tor(&self, node: u32) -> u32 {
        self.tor_of.get(node as usize).copied().unwrap_or(NO_TOR)
    }

    /// The destination ToR of a packet leaving this ToR for another one, if this switch is a
    /// ToR that measures paths.
    #[inline]
    fn remote_tor(&self, node: u32) -> Option<u32> {
        let me = self.my_tor?;
        let t = self.tor(node);
        (t != me && t != NO_TOR && self.n_up() > 0).then_some(t)
    }

    /// Algorithm 1 for a packet that crossed its source ToR, about to queue at fabric egress
    /// `egress`: if the egress is paused for its priority and the budget does not cover the
    /// wait, the source ToR is told to kick the packet's path out (KICK). The packet waits
    /// either way.
    fn check_transit(&mut self, ctx: &mut LbCtx, pkt: &Packet, egress: u16) {
        let Some(up) = header::meta_uplink(pkt.lb.meta) else {
            return;
        };
        if !self.paused_fabric_egress(ctx, pkt, egress) {
            return;
        }
        let budget = header::meta_budget_ns(pkt.lb.meta);
        if !self.kicks_for(ctx, pkt, egress, budget) {
            return;
        }
        let (src_tor, dst_tor) = (self.tor(pkt.src), self.tor(pkt.dst));
        if src_tor == NO_TOR || dst_tor == NO_TOR {
            return;
        }
        let key = (src_tor as u64) << 40 | (dst_tor as u64) << 8 | up as u64;
        let last = self.kicks_sent.get(&key).copied();
        if last.is_some_and(|at| ctx.now < at + self.kick_window) {
            return;
        }
        self.kicks_sent.insert(key, ctx.now);
        self.counters.kick_messages += 1;
        ctx.send_routed(RoutedMessage {
            via: None,
            src: ctx.node,
            to_host: pkt.src,
            sport: pkt.sport,
            dport: pkt.dport,
            priority: CONTROL_PRIO,
            header: LbHeader {
                path_tag: dst_tor,
                meta: up as u32,
            },
        });
    }

    /// Whether `egress` leads to another switch and is paused for the packet's priority.
    #[inline]
    fn paused_fabric_egress(&self, ctx: &LbCtx, pkt: &Packet, egress: u16) -> bool {
        matches!(
            self.port_dir[egress as usize],
            PortDir::Up | PortDir::Down | PortDir::Flat
        ) && ctx.ports[egress as usize].is_paused(pkt.priority)
    }

    /// Whether a packet with `budget_ns` left, meeting a pause at `egress`, kicks its path
    /// out (per `kick`; counts the packets that wait within their budget).
    fn kicks_for(&mut self, ctx: &LbCtx, pkt: &Packet, egress: u16, budget_ns: u64) -> bool {
        match self.kick {
            Kick::Never => false,
            Kick::OnPause => true,
            Kick::Budget => {
                let port = &ctx.ports[egress as usize];
                let ahead = port.queue_bytes(pkt.priority);
                let t_pd_ns = port.rate().tx_time(ahead).ps() as f64 / 1_000.0;
                let covered = budget_ns as f64 >= self.avg_sojourn_ns.max(t_pd_ns);
                if covered {
                    self.counters.waits += 1;
                }
                !covered
            }
        }
    }

    /// The source ToR's choice for a data packet to ToR `t` (Algorithm 2 with Algorithm 1's
    /// check of the flow's current path first).
    fn choose_at_source(&mut self, ctx: &mut LbCtx, pkt: &Packet, t: u32, cands: &[u16]) -> u16 {
        let now = ctx.now;
        let slot = (flow_hash(pkt, self.salt) % self.flows.len() as u64) as usize;
        let entry = self.flows[slot];
        let current = entry
            .last
            .filter(|&last| entry.tor == t && now.saturating_sub(last) <= self.flow_idle)
            .map(|_| entry.up)
            .filter(|&up| cands.contains(&self.uplinks[up as usize]));
        let up = match current {
            Some(up) => {
                self.check_source(ctx, pkt, t, up);
                let stay = self.active(now, t, up) && self.class(now, t, up) != Class::Congested;
                if stay {
                    up
                } else {
                    self.pick(ctx, t, cands).unwrap_or(up)
                }
            }
            None => {
                self.counters.new_flows += 1;
                match self.pick(ctx, t, cands) {
                    Some(up) => {
                        // A new flow's path may be paused right now: Algorithm 1 applies.
                        if self.check_source(ctx, pkt, t, up) {
                            self.pick(ctx, t, cands).unwrap_or(up)
                        } else {
                            up
                        }
                    }
                    None => return cands[pick_index(flow_hash(pkt, self.salt), cands.len())],
                }
            }
        };
        if current.is_some_and(|c| c != up) {
            self.counters.path_changes += 1;
        }
        self.flows[slot] = FlowEntry {
            last: Some(now),
            tor: t,
            up,
        };
        self.uplinks[up as usize]
    }

    /// Algorithm 1 at the source ToR for a packet about to take uplink `up` to ToR `t`: kicks
    /// the path out if its uplink is paused and the path's budget does not cover the wait.
    /// Returns whether it did.
    fn check_source(&mut self, ctx: &mut LbCtx, pkt: &Packet, t: u32, up: u8) -> bool {
        let egress = self.uplinks[up as usize];
        if !self.paused_fabric_egress(ctx, pkt, egress) {
            return false;
        }
        let budget = self.budget_ns(ctx.now, t, up);
        if self.kicks_for(ctx, pkt, egress, budget) {
            self.kick_out(ctx.now, t, up);
            true
        } else {
            false
        }
    }

    /// At a source ToR's uplink: the PLB header, a stamp if one is due, and a held stamp to
    /// return if any. `arrived`: when the packet arrived at this switch (a stamp's send time
    /// with `rtt_from = "arrival"`).
    fn stamp_out(&mut self, now: Time, arrived: Time, port: u16, pkt: &mut Packet, word: &mut u64) {
        let up = self.uplink_index[port as usize];
        let Some(t) = self.remote_tor(pkt.dst).filter(|_| up != u8::MAX) else {
            return;
        };
        let mut carried = Word::of(*word);
        if pkt.kind == PacketKind::Data {
            let budget = self.budget_ns(now, t, up);
            pkt.lb.meta = header::pack_meta(budget, up);
            let period = self.rtt_period[t as usize];
            let sent = match self.rtt_from {
                RttFrom::Uplink => now,
                RttFrom::Arrival => arrived.min(now),
            };
            if carried.stamp.is_none() && self.sent.take_due(t, up, sent, period) {
                let ce = fold(0, self.dres.metric(now.ps(), port));
                carried.stamp = Some(Stamp {
                    ts: header::CLOCK.read(sent),
                    ce,
                });
                self.counters.stamps += 1;
            }
        }
        if carried.echo.is_none() {
            carried.echo =
                self.held
                    .take_oldest(t, now, header::CLOCK.stale())
                    .map(|(up, stamp)| Echo {
                        up: up as u8,
                        stamp,
                    });
        }
        *word = carried.bits();
    }
}

impl SwitchScheme for Plb {
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        if pkt.hop == 0 {
            if let Some(t) = self.remote_tor(pkt.dst) {
                if candidates
                    .iter()
                    .all(|&c| self.uplink_index[c as usize] != u8::MAX)
                {
                    return self.choose_at_source(ctx, pkt, t, candidates);
                }
            }
        }
        let egress = candidates[pick_index(flow_hash(pkt, self.salt), candidates.len())];
        self.check_transit(ctx, pkt, egress);
        egress
    }

    fn on_ingress(
        &mut self,
        ctx: &mut LbCtx,
        pkt: &mut Packet,
        candidates: &[u16],
    ) -> super::Ingress {
        if let [egress] = candidates {
            self.check_transit(ctx, pkt, *egress);
        }
        super::Ingress::Forward
    }

    fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet, word: &mut u64) {
        let now = ctx.now;
        if pkt.kind != PacketKind::Data {
            // An ACK or NACK from one of this ToR's hosts may carry a held stamp back.
            if self.my_tor.is_some() && self.uplink_index[port as usize] != u8::MAX {
                self.stamp_out(now, now, port, pkt, word);
            }
            return;
        }
        let sojourn_ns = now.saturating_sub(ctx.arrived).ps() as f64 / 1_000.0;
        self.avg_sojourn_ns += self.alpha * (sojourn_ns - self.avg_sojourn_ns);
        let fabric = matches!(
            self.port_dir[port as usize],
            PortDir::Up | PortDir::Down | PortDir::Flat
        );
        if fabric {
            self.dres.add(now.ps(), port, pkt.wire_bytes as u64);
        }
        if pkt.hop == 0 && self.uplink_index[port as usize] != u8::MAX {
            self.stamp_out(now, ctx.arrived, port, pkt, word);
        } else if header::meta_uplink(pkt.lb.meta).is_some() {
            let left = header::meta_budget_ns(pkt.lb.meta).saturating_sub(sojourn_ns as u64);
            pkt.lb.meta = header::with_budget(pkt.lb.meta, left);
            if fabric && *word as u32 != 0 {
                let mut carried = Word::of(*word);
                if let Some(stamp) = &mut carried.stamp {
                    stamp.ce = fold(stamp.ce, self.dres.metric(now.ps(), port));
                    *word = carried.bits();
                }
            }
        }
    }

    fn on_arrival(&mut self, ctx: &mut LbCtx, pkt: &Packet, word: &mut u64) {
        let Some(me) = self.my_tor else { return };
        if self.tor(pkt.dst) != me {
            return;
        }
        let carried = Word::of(std::mem::take(word));
        let from = self.tor(pkt.src);
        if from == NO_TOR || from == me || self.n_up() == 0 {
            return;
        }
        if let (Some(stamp), Some(up)) = (carried.stamp, header::meta_uplink(pkt.lb.meta)) {
            // Held for the way back; a newer stamp of the same path replaces it.
            self.held.hold(from, up as usize, stamp, ctx.now);
        }
        if let Some(echo) = carried.echo {
            if (echo.up as usize) < self.n_up() {
                self.sample(ctx.now, from, echo);
            }
        }
    }

    fn on_control(&mut self, ctx: &mut LbCtx, _port: u16, header: &LbHeader) {
        let (t, up) = (header.path_tag, header.meta);
        if (up as usize) < self.n_up() && (t as usize) * self.n_up() < self.paths.len() {
            self.kick_out(ctx.now, t, up as u8);
        }
    }

    fn counters(&self, out: &mut Counters) {
        let c = &self.counters;
        for (name, value) in [
            ("new_flows", c.new_flows),
            ("path_changes", c.path_changes),
            ("kicks", c.kicks),
            ("kick_messages", c.kick_messages),
            ("waits", c.waits),
            ("readmissions", c.readmissions),
            ("expiries", c.expiries),
            ("stamps", c.stamps),
            ("samples", c.samples),
        ] {
            out.add(name, value);
        }
    }

    /// At ToRs, per (destination ToR `t`, uplink at local `port`), key `t << 16 | port`:
    /// `path_rtt_us`, the RTT PLB believes the path has (µs); `path_class`, its class (0
    /// non-congested, 1 undetermined: paused by PFC, 2 congested); `kicked`, 1 while it is
    /// kicked out.
    fn samples(&self, now: Time, emit: &mut dyn FnMut(&'static str, u32, f64)) {
        for t in (0..self.base_rtt.len() as u32).filter(|&t| Some(t) != self.my_tor) {
            for (up, &port) in self.uplinks.iter().enumerate() {
                let (key, up) = (t << 16 | port as u32, up as u8);
                emit("path_rtt_us", key, self.rtt(now, t, up).ps() as f64 / 1e6);
                let class = match self.class(now, t, up) {
                    Class::NonCongested => 0.0,
                    Class::Undetermined => 1.0,
                    Class::Congested => 2.0,
                };
                emit("path_class", key, class);
                emit("kicked", key, self.kicked(now, t, up) as u8 as f64);
            }
        }
    }
}
