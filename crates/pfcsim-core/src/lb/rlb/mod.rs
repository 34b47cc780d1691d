//! RLB (Hu et al., "Enhancing Load Balancing With In-Network Recirculation to Prevent Packet
//! Reordering in Lossless Data Centers", IEEE/ACM ToN 2024; ICPP'23): a building block around
//! any switch-side scheme (`[lb.inner]`). `docs/schemes/rlb.md` lists every choice.
//!
//! * **Prediction** (III-B.1, III-B.3), at every switch: every `interval` (Δt, default the
//!   link delay) the switch samples, for each ingress port leading to a switch and each data
//!   priority, the bytes that count against the PFC XOFF threshold (the MMU's shared-pool use
//!   plus headroom of that (port, priority)) and its growth over the interval. If the queue
//!   holds at least `q_min` (Q_th, the lower end of eq. 3: one link delay of line rate) and,
//!   growing at that rate, reaches the current XOFF threshold within `horizon`, or the
//!   (port, priority) is already pausing, the switch sends a congestion notification message
//!   (CNM, a 64-byte scheme message on the link, strict priority) out of that port, carrying
//!   the port id and the priority. The warning ends when a later sample no longer predicts
//!   PFC: a clearing CNM is sent (`warning_end = "clear"`), or the upstream forgets it after
//!   `warning_ttl` unless refreshed (`"expiry"`, refreshed every `warning_ttl / 2` while the
//!   danger lasts). Ports to hosts are not watched: RLB runs in switches, hosts get no CNM.
//! * **Rerouting** (Algorithm 1), at the switch upstream: p is the inner scheme's choice (or
//!   the sender's pinned candidate). If p carries a warning for the packet's priority, p_s is
//!   the next candidate after p in port order (cyclically, skipping those already tried); if
//!   RTT(p_s) - RTT(p) > t_rc the packet is recirculated (it returns through the loopback and
//!   is decided again, inner scheme included), else p becomes p_s and is checked again. The
//!   packet leaves on the first candidate without a warning. If every candidate is warned the
//!   packet is recirculated if allowed, else it takes p.
//! * **Path RTT** (V), at ToRs for packets to other ToRs, per (destination ToR, uplink), at
//!   most once per `rtt_period` (default one base RTT). Default `rtt_measurement =
//!   "piggyback"`, the prototype's: the source ToR writes the send time into RLB's header
//!   word ([`Stamps`]) of a data packet as it leaves the uplink; the destination ToR takes it off at
//!   arrival and returns it on the next packet (data, ACK or NACK) it sends towards the
//!   source ToR, by any path (the stamp held longest first); RTT = arrival - send time. No
//!   packet is added. An unanswered stamp raises its path's RTT to its age only once a stamp
//!   sent later to that ToR came back (a path without traffic back must not look slow).
//!   `"probe"`: a 64-byte probe with the picked packet's addresses, ports and priority,
//!   queued and paused as that data, echoed by the destination ToR (strict priority, ECMP
//!   back); an unanswered probe raises the path's RTT to its age. Other switches have no
//!   RTTs: there the RTT gap is 0 and a warned packet is rerouted.
//! * **Recirculation** is physical (`[switch.loopback]`): the packet is serialized on the
//!   loopback, charged to the buffer, and comes back on the loopback's far end. t_rc is read
//!   from the recirculation queue as the prototype does: (bytes queued at the loopback + the
//!   packet) / loopback rate + the loopback's delay. Every packet may recirculate at most
//!   `max_recirculations` times.
//! * **RLB\*** (`adaptive = true`, section IV): rounds of one t_rc run while packets
//!   recirculate. Each round sets N_rc (eq. 4-5) from the room left below the PFC threshold
//!   for the recirculation queue; a packet recirculates only while its count is below N_rc
//!   and its recirculation delay so far plus the latest t_rc stays within the RTT gap that
//!   sent it round (eq. 6); otherwise it takes p. Failure detection (Algorithm 2): at the end
//!   of a round, if the mean recirculation count of the packets that left the loop exceeds
//!   `fault_threshold`, the egress charged with the most recirculations (the p_s whose RTT
//!   gap caused them) becomes suspect; suspect in two rounds in a row, it is faulty: an alert
//!   names the switch behind it and the egress is never chosen again.
//!
//! Per-packet recirculation state (count, first recirculation, RTT gap) is kept in a fixed
//! table at the switch keyed by (flow, sequence number), as a P4 switch keeps it in registers;
//! a collision loses the older entry's state (its packet counts as recirculated once).
//!
//! Not modelled: the prototype's match-action pipeline latency, CNM forwarding hop by hop by
//! MAC address (the CNM goes straight to the neighbour, which is the upstream switch), a
//! stamp's way back only through the same spine (any path is taken), per-port detection
//! counters reset other than by Algorithm 2.
//!
//! Files: `config.rs` holds [`RlbConfig`] and its validation; `predict.rs` the prediction
//! module and the warnings it sends and receives (CNMs, warned and blocked egresses);
//! `rtt.rs` the path RTTs (piggybacked [`Stamps`], probes and echoes); `reroute.rs`
//! Algorithm 1 ([`Decision`]); `recirculate.rs` the table of recirculating packets, t_rc and
//! the recirculation limits; `star.rs` RLB*'s rounds (N_rc) and Algorithm 2. This file holds
//! the [`Rlb`] state and the [`SwitchScheme`] hooks, the entry points that call them.

mod config;
mod predict;
mod recirculate;
mod reroute;
mod rtt;
mod star;
#[cfg(test)]
mod tests;

pub use config::{Alternative, RlbConfig, RttMeasurement, WarningEnd};
pub use predict::cnm_meta;
pub use reroute::Decision;
pub use rtt::Stamps;

use super::{
    pinned_choice, Counters, Ingress, Inner, LbCtx, LbFabric, PortDir, SchemeConfig, SwitchScheme,
};
use crate::lb::stamps::{HeldStamps, StampsSent};
use crate::metrics::AlertRecord;
use crate::packet::{LbHeader, Packet};
use crate::port::N_PRIO;
use crate::units::Time;
use predict::Watch;
use recirculate::Recirc;
use reroute::MAX_CANDIDATES;
use star::Round;

/// Kinds of RLB messages (`meta` bits 0..2).
const MSG_CNM: u32 = 1;
const MSG_PROBE: u32 = 2;
const MSG_ECHO: u32 = 3;
/// Timer tokens (the switch tags them with RLB's layer, apart from the inner scheme's).
const TICK: u64 = 1;
const ROUND: u64 = 2;

/// What RLB counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RlbCounters {
    pub cnm_warnings: u64,
    pub cnm_clears: u64,
    pub recirculations: u64,
    pub reroutes: u64,
    /// Recirculations refused by N_rc or `max_recirculations`, or because the loopback's
    /// ingress would reach its XOFF threshold.
    pub refused_limit: u64,
    /// Recirculations refused by the cumulative-delay rule (eq. 6).
    pub refused_delay: u64,
    pub probes: u64,
    pub echoes: u64,
    /// Timestamps written into data packets (piggyback mode), and those that came back.
    pub stamps: u64,
    pub stamp_returns: u64,
}

/// One switch's RLB instance around its inner scheme.
#[derive(Debug)]
pub struct Rlb {
    inner: Inner,
    /// The inner scheme adopts the egress of a packet Algorithm 1 rerouted (`inner_follows`).
    inner_follows: bool,
    warning_end: WarningEnd,
    recirculation: bool,
    adaptive: bool,
    max_recirc: u32,
    fault_threshold: f64,
    interval: Time,
    /// A sampling tick is pending (ticks run while any watched queue is in use or warned,
    /// and restart at the next data packet the switch sends).
    tick_armed: bool,
    ttl: Time,
    /// Ingress ports leading to switches, watched for PFC.
    watched: Vec<u16>,
    /// Per local port: horizon and Q_th.
    horizon: Vec<Time>,
    q_min: Vec<u64>,
    watch: Vec<Watch>,
    /// Per (local port, priority): warned by the downstream switch (clear mode: until
    /// cleared, `Time::MAX`; expiry mode: until that time).
    warned_until: Vec<Time>,
    removed: Vec<bool>,
    any_removed: bool,
    my_tor: Option<u32>,
    tor_of: Vec<u32>,
    /// Per local port: its uplink index (`u8::MAX`: not an uplink).
    uplink_index: Vec<u8>,
    n_up: usize,
    base_rtt: Vec<Time>,
    rtt_period: Vec<Time>,
    /// Per (destination ToR, uplink): the path's RTT, the samples smoothed by `rtt_gain` (0:
    /// none yet; the base RTT stands in), and the stamps or probes sent.
    rtt_samples: Vec<Time>,
    /// Weight of a new RTT sample (`rtt_gain`).
    rtt_gain: f64,
    /// Algorithm 1's p_s (`alternative`).
    alternative: Alternative,
    sent: StampsSent,
    /// RTTs ride on packets (`rtt_measurement = "piggyback"`), not on probes.
    piggyback: bool,
    /// The inner scheme sees ACKs in `on_dequeue` (RLB shows it only those it asked for).
    inner_acks: bool,
    /// Piggyback, at the destination leaf: per (source ToR, source uplink), the timestamp held
    /// for the way back.
    held: HeldStamps<u32>,
    table: Vec<Recirc>,
    /// Entries of `table` in use (packets in the recirculation loop).
    in_loop: u32,
    round: Round,
    pub counters: RlbCounters,
    pub alerts: Vec<AlertRecord>,
    node: u32,
}

impl Rlb {
    pub fn new(cfg: &RlbConfig, fabric: &LbFabric) -> Rlb {
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let n_ports = fabric.port_dir.len();
        let watched: Vec<u16> = (0..n_ports)
            .filter(|&p| {
                matches!(
                    fabric.port_dir[p],
                    PortDir::Up | PortDir::Down | PortDir::Flat
                )
            })
            .map(|p| p as u16)
            .collect();
        let interval = if cfg.interval > Time::ZERO {
            cfg.interval
        } else {
            watched
                .iter()
                .map(|&p| Time::from_ps(fabric.port_delay_ps[p as usize]))
                .filter(|&d| d > Time::ZERO)
                .min()
                .unwrap_or(Time::from_us(1))
        };
        let delay = |p: usize| Time::from_ps(fabric.port_delay_ps.get(p).copied().unwrap_or(0));
        let horizon = (0..n_ports)
            .map(|p| {
                if cfg.horizon > Time::ZERO {
                    cfg.horizon
                } else {
                    interval + delay(p) + delay(p)
                }
            })
            .collect();
        let q_min = (0..n_ports)
            .map(|p| match cfg.q_min {
                Some(b) => b.0,
                None => crate::units::Rate(fabric.port_rate_bps.get(p).copied().unwrap_or(0))
                    .bytes_in(delay(p)),
            })
            .collect();
        let mut uplink_index = vec![u8::MAX; n_ports];
        let mut n_up = 0usize;
        if fabric.my_tor.is_some() {
            for (p, d) in fabric.port_dir.iter().enumerate() {
                if *d == PortDir::Up && n_up < u8::MAX as usize {
                    uplink_index[p] = n_up as u8;
                    n_up += 1;
                }
            }
        }
        let uplink_delay = fabric
            .port_dir
            .iter()
            .zip(&fabric.port_delay_ps)
            .filter(|(d, _)| **d == PortDir::Up)
            .map(|(_, &ps)| ps)
            .max()
            .unwrap_or(0);
        let base_rtt: Vec<Time> = (0..fabric.tors as usize)
            .map(|t| {
                let hops = fabric.tor_hops.get(t).copied().unwrap_or(2) as u64;
                Time::from_ps(2 * hops * uplink_delay)
            })
            .collect();
        let rtt_period = base_rtt
            .iter()
            .map(|&b| {
                if cfg.rtt_period > Time::ZERO {
                    cfg.rtt_period
                } else {
                    b.max(Time::from_ns(100))
                }
            })
            .collect();
        let ttl = if cfg.warning_ttl > Time::ZERO {
            cfg.warning_ttl
        } else {
            Time(4 * interval.ps())
        };
        let inner = Inner::new(&cfg.inner, fabric);
        let piggyback = cfg.piggybacks() && n_up > 0;
        Rlb {
            piggyback,
            inner_acks: inner.capabilities().acks,
            held: HeldStamps::new(if piggyback { fabric.tors as usize } else { 0 }, n_up),
            inner,
            inner_follows: cfg.inner_follows,
            warning_end: cfg.warning_end,
            recirculation: cfg.recirculation,
            adaptive: cfg.adaptive,
            max_recirc: cfg.max_recirculations,
            fault_threshold: cfg.fault_threshold,
            interval,
            tick_armed: false,
            ttl,
            watched,
            horizon,
            q_min,
            watch: vec![Watch::default(); n_ports * N_PRIO],
            warned_until: vec![Time::ZERO; n_ports * N_PRIO],
            removed: vec![false; n_ports],
            any_removed: false,
            my_tor: fabric.my_tor,
            tor_of: fabric.tor_of.clone(),
            uplink_index,
            n_up,
            rtt_samples: vec![Time::ZERO; fabric.tors as usize * n_up],
            rtt_gain: cfg.rtt_gain,
            alternative: cfg.alternative,
            sent: StampsSent::new(fabric.tors as usize, n_up, rtt::CLOCK),
            base_rtt,
            rtt_period,
            table: vec![
                Recirc::default();
                if cfg.recirculation {
                    cfg.table_size as usize
                } else {
                    0
                }
            ],
            in_loop: 0,
            round: Round {
                per_port: vec![0; n_ports],
                ..Default::default()
            },
            counters: RlbCounters::default(),
            alerts: Vec::new(),
            node: fabric.node,
        }
    }
}

impl SwitchScheme for Rlb {
    fn on_start(&mut self, ctx: &mut LbCtx) {
        self.inner.on_start(ctx);
    }

    fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        self.inner.on_ingress(ctx, pkt, candidates)
    }

    fn inner(&mut self) -> Option<&mut Inner> {
        Some(&mut self.inner)
    }

    fn counters(&self, out: &mut Counters) {
        let c = &self.counters;
        out.add("cnm_warnings", c.cnm_warnings);
        out.add("cnm_clears", c.cnm_clears);
        out.add("recirculations", c.recirculations);
        out.add("reroutes", c.reroutes);
        out.add("refused_limit", c.refused_limit);
        out.add("refused_delay", c.refused_delay);
        out.add("probes", c.probes);
        out.add("echoes", c.echoes);
        out.add("stamps", c.stamps);
        out.add("stamp_returns", c.stamp_returns);
        self.inner.counters(out);
    }

    fn alerts(&self) -> &[AlertRecord] {
        &self.alerts
    }

    /// `path_rtt_us` at ToRs: the RTT RLB uses for each (destination ToR `t`, uplink `port`),
    /// key `t << 16 | port`, in µs (the base RTT until a sample comes back); `warned`: per
    /// egress `port` (key) with a warning in force, the bit mask of its warned priorities.
    /// Then the inner scheme's values.
    fn samples(&self, now: Time, emit: &mut dyn FnMut(&'static str, u32, f64)) {
        for (port, &up) in self.uplink_index.iter().enumerate() {
            if up == u8::MAX {
                continue;
            }
            for t in (0..self.base_rtt.len() as u32).filter(|&t| Some(t) != self.my_tor) {
                let rtt = self.rtt(now, Some(t), port as u16);
                emit("path_rtt_us", t << 16 | port as u32, rtt.ps() as f64 / 1e6);
            }
        }
        for port in 0..self.removed.len() as u16 {
            let mask = (0..N_PRIO as u8)
                .filter(|&q| self.warned(port, q, now))
                .fold(0u32, |m, q| m | 1 << q);
            if mask != 0 {
                emit("warned", port as u32, mask as f64);
            }
        }
        self.inner.samples(now, emit);
    }

    /// A data packet (or, in piggyback mode, an ACK or NACK) leaves egress `port`: the inner
    /// scheme's hook, the sampling ticks restart if they had stopped (an idle switch does not
    /// tick, so runs drain), and at a leaf's uplink the piggybacked timestamps are written.
    #[inline]
    fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet, word: &mut u64) {
        if pkt.kind == crate::packet::PacketKind::Data {
            self.inner.on_dequeue(ctx, port, pkt);
            if !self.tick_armed && !self.watched.is_empty() {
                self.tick_armed = true;
                ctx.set_timer(ctx.now + self.interval, TICK);
            }
        } else if self.inner_acks {
            self.inner.on_dequeue(ctx, port, pkt);
        }
        if self.piggyback {
            self.piggyback_out(ctx.now, port, pkt, word);
        }
    }

    /// A packet arrived: in piggyback mode the timestamps it carries are taken off the
    /// header ([`Rlb::piggyback_in`]).
    fn on_arrival(&mut self, ctx: &mut LbCtx, pkt: &Packet, word: &mut u64) {
        self.piggyback_in(ctx, pkt, word);
    }

    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        match token {
            TICK => {
                if self.predict(ctx) {
                    ctx.set_timer(ctx.now + self.interval, TICK);
                } else {
                    self.tick_armed = false;
                }
            }
            ROUND => self.end_round(ctx),
            _ => unreachable!("unknown RLB timer {token:#x}"),
        }
    }

    /// A message of RLB arrived: a CNM from the downstream switch on `port`, a probe (this
    /// is the destination ToR) or an echo (this is the source ToR).
    fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        let meta = header.meta;
        match meta & 3 {
            MSG_CNM => self.on_cnm(ctx.now, port, meta),
            MSG_PROBE => self.echo_probe(ctx, header),
            MSG_ECHO => self.on_echo(ctx.now, header),
            _ => {}
        }
    }

    /// Picks the egress of a data packet among `candidates`.
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let mut kept = [0u16; MAX_CANDIDATES];
        let cands = self.without_removed(candidates, &mut kept);
        // A pinned path RLB* removed as faulty is not taken: the inner scheme chooses instead.
        let pinned = pinned_choice(pkt, candidates).filter(|&c| !self.removed[c as usize]);
        let p = match pinned {
            Some(c) => c,
            None => self.inner.choose(ctx, pkt, cands),
        };
        let lo = ctx.loopback.filter(|_| self.recirculation);
        let from_loop = ctx.loopback.is_some_and(|l| pkt.ingress_port() == l + 1);
        let dst_tor = self.dst_tor(pkt);
        if !self.blocked(p, pkt.priority, ctx.now) {
            // Fast path: the inner choice carries no warning.
            if from_loop {
                self.leave_loop(pkt);
            }
            self.maybe_probe(ctx, pkt, dst_tor, p);
            return p;
        }
        let t_rc = lo.map_or(Time::MAX, |l| Self::t_rc(ctx, l, pkt));
        let decision = self.algorithm1(ctx.now, pkt, p, cands, dst_tor, t_rc, lo.is_some());
        match decision {
            Decision::Recirculate { charged, gap } => {
                let lo = lo.expect("recirculation needs the loopback");
                // Measure the path that made the packet wait, if it is due.
                if let Some(ps) = charged {
                    self.maybe_probe(ctx, pkt, dst_tor, ps);
                }
                if self.admit_recirculation(ctx, lo, pkt, from_loop, gap, t_rc, charged) {
                    return lo;
                }
                // Refused: the packet takes the path it would have waited for.
                if from_loop {
                    self.leave_loop(pkt);
                }
                self.maybe_probe(ctx, pkt, dst_tor, p);
                p
            }
            Decision::Forward { port, rerouted } => {
                if rerouted {
                    self.counters.reroutes += 1;
                    // Only a choice the inner scheme made can follow the reroute.
                    if self.inner_follows && pinned.is_none() {
                        self.inner.adopt(pkt, port);
                    }
                }
                if from_loop {
                    self.leave_loop(pkt);
                }
                self.maybe_probe(ctx, pkt, dst_tor, port);
                port
            }
        }
    }
}
