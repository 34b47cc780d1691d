//! Hermes: the sender senses every path to a destination ToR from what its ACKs echo and
//! from probes, sorts paths into good, gray, bad and failed, and reroutes a flow only when
//! that is clearly worth it.
//!
//! Modelled (Hermes, SIGCOMM'17, and its authors' ns-3 code, "TLB" in `ns3-load-balance`;
//! `docs/schemes/hermes.md` has the sources and every deviation):
//! * Sensing, per (host, destination ToR, path): a smoothed RTT (EWMA, weight 1/2 on the new
//!   sample) from the RTT the ACK echoes (now minus the data packet's send time: a round
//!   trip, not the one-way delay of the public code), the fraction of ECN-marked packets
//!   among those acknowledged over the last one to two `aging` windows, and, over the last one
//!   to two `fail_window`s, packets sent, losses (NACKs) and retransmission timeouts.
//! * Classes: failed (see below); bad if a timeout hit it in the fail window, or if its RTT
//!   is at least `rtt_high` and its ECN fraction at least `ecn_threshold`; good if its RTT is
//!   below `rtt_low` and its ECN fraction below `ecn_threshold`; gray otherwise. With fewer
//!   than `ecn_min_samples` packets acknowledged the ECN fraction is unknown and the class
//!   follows the RTT alone; a path without an RTT sample for `rtt_expiry` is unknown: gray,
//!   with its RTT taken as `rtt_low` (as the public code).
//! * Choice (a new flow, or a reroute): the good path with the fewest of this host's flows
//!   (ties at random); else the gray path with the lowest RTT, else the bad one, in both
//!   cases only if notably better than the flow's current path (RTT lower by `rtt_better`
//!   and, when both ECN fractions are known, ECN fraction lower by `ecn_better`); a new flow
//!   that found nothing takes a random path that has not failed.
//! * Timely yet cautious rerouting, checked at every data packet: a flow whose path failed,
//!   or whose retransmission timer fired, moves at once to any path that has not failed;
//!   a flow whose path is bad moves (at most one attempt per `reroute_interval`) only if it
//!   has sent at least `reroute_min_sent` bytes on that path and its rate (bytes acknowledged
//!   over the last `rate_window`) is below `reroute_max_rate` of the pair's bottleneck
//!   rate, and only to a notably better path.
//! * Failure detection: a path fails when `fail_timeouts` retransmission timeouts, or at
//!   least `fail_losses` losses that are also at least `fail_loss_fraction` of the packets sent
//!   on it, fall in the fail window while its ECN fraction is below `ecn_threshold` (losses of
//!   a congested path are congestion, not failure). A loss is a NACK, counted once per hole
//!   and charged to the path that last carried the missing byte; NACKs within
//!   `reorder_window` of the flow's last move are the reordering the move caused and are not
//!   counted. A failed path is avoided for `fail_hold`, then tried again with fresh loss
//!   counters.
//! * Timely yet cautious also when paths fail: a flow whose path failed moves only to a path
//!   that has not; with every other path failed too it stays.
//! * Probing: the first host of each ToR probes every other ToR every `probe_interval`, on
//!   two random paths and the current best one, to that ToR's first host. A reply updates the
//!   RTT and ECN views of every host of the prober's rack at once (instantaneous sharing); a
//!   probe unanswered for `probe_timeout` counts as a loss on its path for every host of the
//!   rack. Probes are 64-byte packets in `probe_priority`, queued and marked like data.
//!
//! Thresholds scale with the fabric: `rtt_low`, `rtt_high` and `rtt_better` are given either
//! as times or as queue sizes, meaning the base RTT between the two ToRs plus the time to
//! drain that many bytes at the pair's bottleneck rate (`RttThreshold`).
//!
//! Not modelled: the public code's 50 % coin before a reroute and its reroute on flowlet
//! gaps (neither is in the paper), the paper's local sending rate per path as the tie-break
//! among good paths (the code's flow count is used), probing agents on dedicated hosts, the
//! cost of sharing probe results inside a rack.
//!
//! Files: `config.rs` the parameters, `paths.rs` path sensing and classes, `reroute.rs` the
//! flow state, path choice and moves, `failure.rs` loss and timeout counting and failed paths,
//! `probe.rs` the rack agents' probing; here the per-host state and the host hooks.

mod config;
mod failure;
mod paths;
mod probe;
mod reroute;
#[cfg(test)]
mod tests;

pub use config::{HermesConfig, RttThreshold};
pub use paths::{classify, PathClass};

use crate::lb::host::{AckEcho, FlowInfo, HostCtx, HostFabric, HostScheme, ProbeEcho};
use crate::lb::NO_TOR;
use crate::units::Time;
use paths::{PathStat, Thresholds};
use probe::Outstanding;
use reroute::FlowState;

/// Hermes's state for every host of the fabric.
#[derive(Clone, Debug)]
pub struct Hermes {
    cfg: HermesConfig,
    tors: u32,
    /// Dense host index of each node (`u32::MAX` for switches).
    host_of_node: Vec<u32>,
    /// ToR of each host (dense index).
    host_tor: Vec<u32>,
    /// Hosts of each ToR (dense indices, in node order; the first is the probing agent).
    rack: Vec<Vec<u32>>,
    /// Node id of the first host of each ToR (where probes go).
    rack_node: Vec<u32>,
    /// `row[a * tors + b]`: offset of pair (a, b)'s paths in a row of ToR `a`.
    row: Vec<u32>,
    /// Start of each host's row in `stats`.
    host_base: Vec<u32>,
    stats: Vec<PathStat>,
    /// Per pair of ToRs.
    thresholds: Vec<Thresholds>,
    flows: Vec<FlowState>,
    /// Probes in flight, per agent: the agent's ToR row layout, starting at `probe_base[a]`.
    probe_base: Vec<u32>,
    probes: Vec<Outstanding>,
    probe_seq: u32,
    /// Per ToR: flows of its hosts that Hermes steers, running now.
    rack_flows: Vec<u32>,
    /// Per ToR: the agent's next probing round is scheduled.
    probing: Vec<bool>,
    /// Per ToR: the agent's first possible round (a random phase in the first interval);
    /// rounds fall on `phase + k * probe_interval`.
    phase: Vec<Time>,
}

impl Hermes {
    pub fn new(cfg: &HermesConfig, fabric: &HostFabric, flows: usize) -> Hermes {
        let tors = fabric.tors;
        let mut host_of_node = vec![u32::MAX; fabric.nodes as usize];
        let mut host_tor = Vec::new();
        let mut rack = vec![Vec::new(); tors as usize];
        let mut rack_node = vec![u32::MAX; tors as usize];
        for (node, &t) in fabric.tor_of.iter().enumerate() {
            if t == NO_TOR {
                continue;
            }
            let h = host_tor.len() as u32;
            host_of_node[node] = h;
            host_tor.push(t);
            if rack[t as usize].is_empty() {
                rack_node[t as usize] = node as u32;
            }
            rack[t as usize].push(h);
        }
        let mut row = vec![0; (tors * tors) as usize];
        let mut row_len = vec![0; tors as usize];
        let mut thresholds = Vec::with_capacity((tors * tors) as usize);
        for a in 0..tors {
            for b in 0..tors {
                row[(a * tors + b) as usize] = row_len[a as usize];
                row_len[a as usize] += fabric.tor_paths(a, b).len() as u32;
                let timing = fabric.timing(a, b);
                thresholds.push(Thresholds {
                    low: cfg.rtt_low.resolve(timing, true),
                    high: cfg.rtt_high.resolve(timing, true),
                    better: cfg.rtt_better.resolve(timing, false),
                    max_rate: cfg.reroute_max_rate * timing.bottleneck.bps() as f64 / 8.0,
                });
            }
        }
        let mut host_base = Vec::with_capacity(host_tor.len());
        let mut total = 0;
        for &t in &host_tor {
            host_base.push(total);
            total += row_len[t as usize];
        }
        let mut probe_base = Vec::with_capacity(tors as usize);
        let mut probes_total = 0;
        for a in 0..tors {
            probe_base.push(probes_total);
            probes_total += row_len[a as usize];
        }
        Hermes {
            cfg: cfg.clone(),
            tors,
            host_of_node,
            host_tor,
            rack,
            rack_node,
            row,
            host_base,
            stats: vec![PathStat::default(); total as usize],
            thresholds,
            flows: vec![FlowState::default(); flows],
            probe_base,
            probes: vec![Outstanding::default(); probes_total as usize],
            probe_seq: 0,
            rack_flows: vec![0; tors as usize],
            probing: vec![false; tors as usize],
            phase: vec![Time::ZERO; tors as usize],
        }
    }

    fn host(&self, node: u32) -> u32 {
        self.host_of_node[node as usize]
    }
}

impl HostScheme for Hermes {
    fn on_flow_start(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let n = ctx.fabric.paths(flow.src, flow.dst).len() as u16;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        if n < 2 || self.host_tor[h as usize] == b {
            return; // one path: nothing to balance
        }
        let to = self.choose(ctx, h, b, n, None, true).expect("n >= 2");
        self.assign(h, b, flow, to, 0, ctx.now);
        let a = self.host_tor[h as usize];
        self.rack_flows[a as usize] += 1;
        self.wake_agent(ctx, a);
        let f = &mut self.flows[flow.id as usize];
        f.win_start = ctx.now;
        f.rate = -1.0;
        f.last_loss = u64::MAX;
        f.reordering_until = Time::ZERO;
    }

    #[inline]
    fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, seq: u64, _payload: u32) -> u32 {
        self.steer(ctx, flow, seq)
    }

    #[inline]
    fn on_ack(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, echo: &AckEcho) {
        let f = self.flows[flow.id as usize];
        if !f.active {
            return;
        }
        let now = ctx.now;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        if let Some(i) = Self::index_of(paths, echo.path_tag, &f) {
            let e = self.entry(h, b, i);
            self.stats[e].sample(now, echo.rtt, echo.ce, &self.cfg);
        }
        self.flows[flow.id as usize].count_acked(now, self.cfg.rate_window, echo.newly_acked);
        if echo.nack {
            self.nack_loss(h, b, flow, now);
        }
    }

    fn on_timeout(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let f = self.flows[flow.id as usize];
        if !f.active {
            return;
        }
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        let i = if flow.snd_una >= f.from_seq {
            f.cur
        } else {
            f.prev
        };
        let e = self.entry(h, b, i);
        self.record_timeout(e, ctx.now);
        self.flows[flow.id as usize].repick = true;
    }

    fn on_flow_end(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let f = &mut self.flows[flow.id as usize];
        if !f.active {
            return;
        }
        f.active = false;
        let cur = f.cur;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        let e = self.entry(h, b, cur);
        self.stats[e].flows -= 1;
        self.rack_flows[self.host_tor[h as usize] as usize] -= 1;
    }

    fn on_start(&mut self, ctx: &mut HostCtx) {
        self.start_agent(ctx);
    }

    /// A probing round of the agent of this host's rack. With no flow of the rack running,
    /// it only waits for the probes still out (answered, or lost after `probe_timeout`), then
    /// stops until the rack's next flow starts.
    fn on_timer(&mut self, ctx: &mut HostCtx, _token: u64) {
        self.probe_round(ctx);
    }

    fn on_probe_reply(&mut self, ctx: &mut HostCtx, echo: &ProbeEcho) {
        self.probe_reply(ctx, echo);
    }

    /// At a host, per destination ToR `b` and path index `i` (key `b << 16 | i`):
    /// `path_class` (0 good, 1 gray, 2 bad, 3 failed), `path_rtt_us` (the smoothed RTT, or
    /// `rtt_low` while no sample is recent), `path_ecn` (the ECN fraction, once
    /// `ecn_min_samples` packets were acknowledged in the aging windows) and `path_flows`
    /// (the host's flows on the path).
    fn samples(
        &self,
        now: Time,
        host: u32,
        fabric: &HostFabric,
        emit: &mut dyn FnMut(&'static str, u32, f64),
    ) {
        let Some(&h) = self.host_of_node.get(host as usize) else {
            return;
        };
        if h == u32::MAX {
            return;
        }
        let a = self.host_tor[h as usize];
        for b in (0..self.tors).filter(|&b| b != a) {
            for i in 0..fabric.tor_paths(a, b).len() as u16 {
                let view = self.peek(h, b, i, now);
                let key = b << 16 | i as u32;
                let class = match view.class {
                    PathClass::Good => 0.0,
                    PathClass::Gray => 1.0,
                    PathClass::Bad => 2.0,
                    PathClass::Failed => 3.0,
                };
                emit("path_class", key, class);
                emit("path_rtt_us", key, view.rtt.ps() as f64 / 1e6);
                if let Some(ecn) = view.ecn {
                    emit("path_ecn", key, ecn);
                }
                emit("path_flows", key, view.flows as f64);
            }
        }
    }
}
