//! Clove (Katta et al., CoNEXT'17): flowlet switching in the sender's vSwitch over the paths
//! it has discovered, with path weights lowered on ECN echoes (Clove-ECN).
//!
//! Modelled (the paper, read from the summary in `/work/shared/spec`, and the public ns-3
//! code, ns3-load-balance `src/clove/model/ipv4-clove.cc`; see `docs/schemes/clove.md`):
//! * Paths: the sender knows the paths from its ToR to every other ToR as path tags
//!   ([`super::host::HostFabric::paths`]). This stands for Clove's traceroute-style
//!   discovery (one outer source port per distinct path); discovery traffic and its delay
//!   are not modelled, the table is complete from time zero.
//! * Flowlets, per flow: the time its last data packet was sent and its current path. A
//!   packet sent `flowlet_timeout` or more after the previous one of its flow (or the flow's
//!   first packet) starts a new flowlet on a new path choice; every other packet stays on the
//!   flowlet's path. Retransmissions count as packets like any other (the vSwitch cannot tell
//!   them apart).
//! * `mode = "ecn"` (Clove-ECN): weights per (sender host, destination ToR, path), all 1 at
//!   the start; a new flowlet draws its path with probability proportional to the weights.
//!   An ACK or NACK that echoes a CE mark for path `p` (the receiver echoes the data packet's
//!   path tag and mark) cuts `p`'s weight by `weight_cut` (1/3) and spreads the removed weight
//!   evenly over the pair's other paths, at most once per `half_rtt` per path; with a single
//!   path nothing changes. The weights' sum stays the number of paths.
//! * `mode = "edge_flowlet"`: a uniformly random path per flowlet (Clove's Edge-Flowlet).
//! * Weight recovery: none by default, as the public code (weights only move on ECN echoes).
//!   With `weight_recovery = T` the weights relax exponentially back to 1 with time constant
//!   `T` (a pfcsim option, not in the paper or the code), which keeps their sum.
//!
//! Not modelled: Clove-INT (it needs switches that stamp link utilization into every packet
//! and a receiver that echoes it; see the scheme page), path discovery traffic and its
//! refresh on topology changes (the table is the fabric's paths at time zero; after a link
//! failure a tag whose hop has fewer next hops wraps modulo their number), the
//! `DisToUncongestedPath` option of the public code (broken there), and vSwitch
//! encapsulation overhead.

use super::host::{AckEcho, FlowInfo, HostCtx, HostFabric, HostScheme};
use super::{Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::check::{check_positive_time, check_range};
use crate::units::Time;
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use std::ops::Bound::Excluded;

/// How a new flowlet picks its path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloveMode {
    /// Clove-ECN: weighted random choice, weights cut on ECN echoes.
    #[default]
    Ecn,
    /// Edge-Flowlet: uniformly random choice.
    EdgeFlowlet,
}

/// Clove's parameters (`[lb]` with `scheme = "clove"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CloveConfig {
    /// Path choice per new flowlet (default `ecn`).
    pub mode: CloveMode,
    /// A gap at least this long since the flow's previous packet starts a new flowlet
    /// (default 50 us: the public driver's 500 us for a base RTT of about 80 us, 10 Gbps and
    /// 10 us links, scaled to the 8 us base RTT of a 100 Gbps, 1 us leaf-spine).
    pub flowlet_timeout: Time,
    /// A path's weight is cut at most once per this span (default 4 us: the public code's
    /// 40 us `HalfRTT`, half its base RTT, scaled the same way).
    pub half_rtt: Time,
    /// Fraction of a path's weight removed on an ECN echo (default 1/3: the public code's
    /// 0.67 kept and 0.33 spread). Valid: 0 < cut < 1.
    pub weight_cut: f64,
    /// Time constant of the relaxation of the weights back to 1 (default 0s: never, as the
    /// public code).
    pub weight_recovery: Time,
}

impl Default for CloveConfig {
    fn default() -> Self {
        CloveConfig {
            mode: CloveMode::Ecn,
            flowlet_timeout: Time::from_us(50),
            half_rtt: Time::from_us(4),
            weight_cut: 1.0 / 3.0,
            weight_recovery: Time::ZERO,
        }
    }
}

impl SchemeConfig for CloveConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        check_positive_time("lb.flowlet_timeout", self.flowlet_timeout, "50us")?;
        check_range(
            "lb.weight_cut",
            self.weight_cut,
            (Excluded(0.0), Excluded(1.0)),
            "(the fraction of a path's weight cut per ECN echo, Clove default 0.33)",
        )
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hosts: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        super::host::switch_side(fabric)
    }

    fn host_scheme(&self, flows: usize, _fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        Some(Box::new(Clove::new(self, flows)))
    }
}

/// No host slot (switch nodes, or hosts before their `on_start`).
const NO_SLOT: u32 = u32::MAX;

/// A flow's current flowlet.
#[derive(Clone, Copy, Debug, Default)]
struct Flowlet {
    /// When the flow's last data packet was sent.
    last: Time,
    /// Index of the flowlet's path in the pair's path list.
    path: u16,
    /// The flow has sent a packet.
    started: bool,
}

/// Clove's state for every host: weights per (host, destination ToR, path) and flowlets per
/// flow. The tables are sized in `on_start`, once per host; no hook allocates afterwards.
#[derive(Clone, Debug)]
pub struct Clove {
    mode: CloveMode,
    timeout: Time,
    half_rtt: Time,
    cut: f64,
    /// Recovery time constant in picoseconds (0: none).
    recovery_ps: f64,
    /// By node id: the host's slot (order of `on_start` calls), or [`NO_SLOT`].
    slot: Vec<u32>,
    tors: u32,
    /// One node id of a host under each ToR.
    tor_host: Vec<u32>,
    /// Group `slot * tors + dst_tor`: its paths' entries are
    /// `group_start[g]..group_start[g + 1]` of `weight` and `last_cut`.
    group_start: Vec<u32>,
    /// Per group: when its weights were last relaxed (`weight_recovery` only).
    relaxed_at: Vec<Time>,
    weight: Vec<f64>,
    /// When the path's weight was last cut (`None`: never).
    last_cut: Vec<Option<Time>>,
    /// By flow id.
    flowlets: Vec<Flowlet>,
}

impl Clove {
    pub fn new(cfg: &CloveConfig, flows: usize) -> Clove {
        Clove {
            mode: cfg.mode,
            timeout: cfg.flowlet_timeout,
            half_rtt: cfg.half_rtt,
            cut: cfg.weight_cut,
            recovery_ps: cfg.weight_recovery.ps() as f64,
            slot: Vec::new(),
            tors: 0,
            tor_host: Vec::new(),
            group_start: vec![0],
            relaxed_at: Vec::new(),
            weight: Vec::new(),
            last_cut: Vec::new(),
            flowlets: vec![Flowlet::default(); flows],
        }
    }

    /// The group of weights of `src`'s paths to `dst`'s ToR.
    #[inline]
    fn group(&self, ctx: &HostCtx, src: u32, dst: u32) -> usize {
        let slot = self.slot[src as usize];
        debug_assert_ne!(slot, NO_SLOT, "on_start sizes every host's tables");
        (slot * self.tors + ctx.fabric.tor(dst)) as usize
    }

    #[inline]
    fn range(&self, group: usize) -> std::ops::Range<usize> {
        self.group_start[group] as usize..self.group_start[group + 1] as usize
    }

    /// Relaxes the group's weights towards 1 for the time since the last relaxation:
    /// `w := 1 + (w - 1) e^(-dt / T)`, which keeps their sum.
    fn relax(&mut self, group: usize, now: Time) {
        if self.recovery_ps == 0.0 {
            return;
        }
        let dt = now.saturating_sub(self.relaxed_at[group]).ps() as f64;
        self.relaxed_at[group] = now;
        if dt == 0.0 {
            return;
        }
        let keep = (-dt / self.recovery_ps).exp();
        let range = self.range(group);
        for w in &mut self.weight[range] {
            *w = 1.0 + (*w - 1.0) * keep;
        }
    }

    /// The path index of a new flowlet of `src` towards `dst` (`n` paths).
    fn pick(&mut self, ctx: &mut HostCtx, src: u32, dst: u32, n: usize) -> usize {
        if n == 1 {
            return 0;
        }
        match self.mode {
            CloveMode::EdgeFlowlet => ctx.rng.gen_range(0..n),
            CloveMode::Ecn => {
                let group = self.group(ctx, src, dst);
                self.relax(group, ctx.now);
                let weights = &self.weight[self.range(group)];
                let total: f64 = weights.iter().sum();
                let r = ctx.rng.gen::<f64>() * total;
                let mut acc = 0.0;
                let mut last_positive = 0;
                for (i, &w) in weights.iter().enumerate() {
                    acc += w;
                    if w > 0.0 {
                        last_positive = i;
                        if r < acc {
                            return i;
                        }
                    }
                }
                last_positive // rounding left r at the very top
            }
        }
    }

    /// Cuts path `p` of `group` by `weight_cut` and spreads the removed weight over the
    /// group's other paths, unless it was cut less than `half_rtt` ago.
    fn cut_weight(&mut self, group: usize, p: usize, now: Time) {
        let range = self.range(group);
        let n = range.len();
        if n < 2 {
            return; // nowhere to move the weight (the public code undoes the cut)
        }
        let i = range.start + p;
        if let Some(t) = self.last_cut[i] {
            if now.saturating_sub(t) < self.half_rtt {
                return;
            }
        }
        self.last_cut[i] = Some(now);
        self.relax(group, now);
        let removed = self.weight[i] * self.cut;
        let share = removed / (n - 1) as f64;
        for w in &mut self.weight[range] {
            *w += share;
        }
        self.weight[i] -= removed + share;
    }

    /// The weights of `host`'s paths to ToR `tor` (tests and diagnostics).
    pub fn weights(&self, host: u32, tor: u32) -> &[f64] {
        let group = (self.slot[host as usize] * self.tors + tor) as usize;
        &self.weight[self.range(group)]
    }
}

impl HostScheme for Clove {
    /// Sizes the host's weight tables: one weight of 1 per path to every ToR.
    fn on_start(&mut self, ctx: &mut HostCtx) {
        let fabric = ctx.fabric;
        if self.slot.is_empty() {
            self.slot = vec![NO_SLOT; fabric.nodes as usize];
            self.tors = fabric.tors;
            self.tor_host = vec![NO_SLOT; fabric.tors as usize];
            for (node, &tor) in fabric.tor_of.iter().enumerate() {
                if tor != super::NO_TOR && self.tor_host[tor as usize] == NO_SLOT {
                    self.tor_host[tor as usize] = node as u32;
                }
            }
        }
        let slot = (self.group_start.len() - 1) as u32 / self.tors.max(1);
        self.slot[ctx.host as usize] = slot;
        for &dst in &self.tor_host {
            let n = fabric.paths(ctx.host, dst).len();
            self.weight.resize(self.weight.len() + n, 1.0);
            self.last_cut.resize(self.last_cut.len() + n, None);
            self.relaxed_at.push(Time::ZERO);
            self.group_start.push(self.weight.len() as u32);
        }
    }

    #[inline]
    fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, _seq: u64, _payload: u32) -> u32 {
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        let f = self.flowlets[flow.id as usize];
        let path = if !f.started || ctx.now.saturating_sub(f.last) >= self.timeout {
            self.pick(ctx, flow.src, flow.dst, paths.len())
        } else {
            f.path as usize
        };
        self.flowlets[flow.id as usize] = Flowlet {
            last: ctx.now,
            path: path as u16,
            started: true,
        };
        paths[path]
    }

    /// Clove-ECN's reaction to an echoed CE mark.
    #[inline]
    fn on_ack(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, echo: &AckEcho) {
        if self.mode != CloveMode::Ecn || !echo.ce {
            return;
        }
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        if let Some(p) = paths.iter().position(|&t| t == echo.path_tag) {
            let group = self.group(ctx, flow.src, flow.dst);
            self.cut_weight(group, p, ctx.now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::host::TestHost;

    fn clove(cfg: &CloveConfig, host: &mut TestHost) -> Clove {
        let mut c = Clove::new(cfg, 4);
        for h in 0..4 {
            host.host = h;
            c.on_start(&mut host.ctx(0));
        }
        host.host = 0;
        c
    }

    fn echo(path_tag: u32, ce: bool) -> AckEcho {
        AckEcho {
            nack: false,
            path_tag,
            ce,
            rtt: Time::from_us(8),
            newly_acked: 1000,
        }
    }

    fn assert_close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-12, "{a:?} != {b:?}");
        }
    }

    #[test]
    fn an_ecn_echo_cuts_a_third_and_spreads_it_over_the_other_paths() {
        let mut host = TestHost::new(4);
        let mut c = clove(&CloveConfig::default(), &mut host);
        let flow = TestHost::flow(0, 1_000_000);
        assert_close(c.weights(0, 1), &[1.0; 4]);
        // Unmarked echoes change nothing.
        c.on_ack(&mut host.ctx(1_000), &flow, &echo(2, false));
        assert_close(c.weights(0, 1), &[1.0; 4]);
        // A mark on path tag 2 (index 1): 1/3 removed, 1/9 to each of the three others.
        c.on_ack(&mut host.ctx(2_000), &flow, &echo(2, true));
        let third = 1.0 / 3.0;
        assert_close(
            c.weights(0, 1),
            &[
                1.0 + third / 3.0,
                1.0 - third,
                1.0 + third / 3.0,
                1.0 + third / 3.0,
            ],
        );
        assert!((c.weights(0, 1).iter().sum::<f64>() - 4.0).abs() < 1e-12);
        // Other hosts' weights and the group towards the own ToR are untouched.
        assert_close(c.weights(1, 1), &[1.0; 4]);
        assert_close(c.weights(0, 0), &[1.0]);
    }

    #[test]
    fn a_path_is_cut_at_most_once_per_half_rtt() {
        let mut host = TestHost::new(2);
        let mut c = clove(&CloveConfig::default(), &mut host);
        let flow = TestHost::flow(0, 1_000_000);
        c.on_ack(&mut host.ctx(10_000), &flow, &echo(1, true));
        let after_one = c.weights(0, 1).to_vec();
        assert_close(&after_one, &[2.0 / 3.0, 4.0 / 3.0]);
        // Marks within 4 us of the cut are ignored ...
        c.on_ack(&mut host.ctx(10_001), &flow, &echo(1, true));
        c.on_ack(&mut host.ctx(13_999), &flow, &echo(1, true));
        assert_close(c.weights(0, 1), &after_one);
        // ... but another path's mark is not: the window is per path.
        c.on_ack(&mut host.ctx(13_999), &flow, &echo(2, true));
        let w2 = 4.0 / 3.0 * 2.0 / 3.0;
        assert_close(c.weights(0, 1), &[2.0 - w2, w2]);
        // Past the window, path 1 is cut again.
        let before = c.weights(0, 1)[0];
        c.on_ack(&mut host.ctx(14_000), &flow, &echo(1, true));
        assert_close(
            c.weights(0, 1),
            &[before * 2.0 / 3.0, 2.0 - before * 2.0 / 3.0],
        );
    }

    #[test]
    fn a_single_path_and_edge_flowlet_mode_keep_their_weights() {
        let mut host = TestHost::new(1);
        let mut c = clove(&CloveConfig::default(), &mut host);
        let flow = TestHost::flow(0, 1_000_000);
        c.on_ack(&mut host.ctx(1_000), &flow, &echo(1, true));
        assert_close(c.weights(0, 1), &[1.0]);

        let mut host = TestHost::new(4);
        let cfg = CloveConfig {
            mode: CloveMode::EdgeFlowlet,
            ..Default::default()
        };
        let mut c = clove(&cfg, &mut host);
        c.on_ack(&mut host.ctx(1_000), &flow, &echo(1, true));
        assert_close(c.weights(0, 1), &[1.0; 4]);
    }

    #[test]
    fn weights_recover_towards_uniform_only_when_asked() {
        let flow = TestHost::flow(0, 1_000_000);
        let cut = |cfg: &CloveConfig| {
            let mut host = TestHost::new(2);
            let mut c = clove(cfg, &mut host);
            c.on_ack(&mut host.ctx(0), &flow, &echo(1, true));
            // A later flowlet's choice applies the relaxation up to its time.
            c.path_tag(&mut host.ctx(100_000), &flow, 0, 1000);
            c.weights(0, 1).to_vec()
        };
        // Public code: the cut stays.
        assert_close(&cut(&CloveConfig::default()), &[2.0 / 3.0, 4.0 / 3.0]);
        // With a 100 us time constant, 100 us later the deviation is e^-1 of what it was.
        let recovering = CloveConfig {
            weight_recovery: Time::from_us(100),
            ..Default::default()
        };
        let d = (-1.0f64).exp() / 3.0;
        assert_close(&cut(&recovering), &[1.0 - d, 1.0 + d]);
    }

    /// Path tags of packets of `flow` sent at the given times (ns).
    fn tags(c: &mut Clove, host: &mut TestHost, flow: &FlowInfo, times: &[u64]) -> Vec<u32> {
        times
            .iter()
            .map(|&t| c.path_tag(&mut host.ctx(t), flow, 0, 1000))
            .collect()
    }

    #[test]
    fn packets_within_the_timeout_stay_on_one_path_and_a_gap_may_move_them() {
        let mut host = TestHost::new(8);
        let cfg = CloveConfig::default(); // 50 us
        let mut c = clove(&cfg, &mut host);
        let flow = TestHost::flow(0, 1_000_000);
        // Packets 49.999 us apart for 5 ms: one flowlet (the gap is since the last packet,
        // not since the flowlet's first).
        let times: Vec<u64> = (0..100).map(|k| k * 49_999).collect();
        let t = tags(&mut c, &mut host, &flow, &times);
        assert!(t.iter().all(|&x| x == t[0]), "one flowlet: {t:?}");
        // Gaps of exactly the timeout: every packet a new flowlet, redrawn among 8 paths.
        let start = times[99] + 50_000;
        let times: Vec<u64> = (0..200).map(|k| start + k * 50_000).collect();
        let t = tags(&mut c, &mut host, &flow, &times);
        let changes = t.windows(2).filter(|w| w[0] != w[1]).count();
        let seen: std::collections::BTreeSet<u32> = t.iter().copied().collect();
        assert_eq!(seen.len(), 8, "new flowlets cover all paths: {seen:?}");
        assert!(changes > 150, "7 in 8 new flowlets move: {changes} of 199");
    }

    #[test]
    fn new_flowlets_follow_the_weights() {
        let mut host = TestHost::new(4);
        let mut c = clove(&CloveConfig::default(), &mut host);
        let flow = TestHost::flow(0, 1_000_000);
        // Cut path tag 1 five times: weight (2/3)^5 = 0.13 of 4.
        for k in 0..5 {
            c.on_ack(&mut host.ctx(k * 10_000), &flow, &echo(1, true));
        }
        let w = c.weights(0, 1).to_vec();
        assert!((w[0] - (2.0f64 / 3.0).powi(5)).abs() < 1e-12);
        let n = 20_000;
        let times: Vec<u64> = (0..n).map(|k| 1_000_000 + k * 100_000).collect();
        let t = tags(&mut c, &mut host, &flow, &times);
        for (i, &wi) in w.iter().enumerate() {
            let share = t.iter().filter(|&&x| x == i as u32 + 1).count() as f64 / n as f64;
            let want = wi / 4.0;
            assert!(
                (share - want).abs() < 0.015,
                "path {i}: share {share}, weight share {want}"
            );
        }
        // Edge-Flowlet ignores the weights: uniform.
        let cfg = CloveConfig {
            mode: CloveMode::EdgeFlowlet,
            ..Default::default()
        };
        let mut e = clove(&cfg, &mut host);
        let t = tags(&mut e, &mut host, &flow, &times);
        let share = t.iter().filter(|&&x| x == 1).count() as f64 / n as f64;
        assert!((share - 0.25).abs() < 0.015, "uniform: {share}");
    }

    #[test]
    fn zero_weight_paths_are_never_drawn() {
        let mut host = TestHost::new(3);
        let mut c = clove(&CloveConfig::default(), &mut host);
        let flow = TestHost::flow(0, 1_000_000);
        let g = c.group(&host.ctx(0), 0, 2);
        let r = c.range(g);
        c.weight[r].copy_from_slice(&[0.0, 3.0, 0.0]);
        let times: Vec<u64> = (0..1000).map(|k| k * 100_000).collect();
        let t = tags(&mut c, &mut host, &flow, &times);
        assert!(t.iter().all(|&x| x == 2), "only the path with weight");
    }

    #[test]
    fn bad_settings_are_refused_with_the_key() {
        let bad = CloveConfig {
            flowlet_timeout: Time::ZERO,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("lb.flowlet_timeout"));
        for cut in [0.0, 1.0, -0.5, f64::NAN] {
            let bad = CloveConfig {
                weight_cut: cut,
                ..Default::default()
            };
            assert!(bad.validate().unwrap_err().starts_with("lb.weight_cut"));
        }
        let bad = CloveConfig {
            weight_cut: 1.5,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.weight_cut: 1.5 is out of range; use 0 < weight_cut < 1 (the fraction of a path's weight cut per ECN echo, Clove default 0.33)"
        );
        assert_eq!(CloveConfig::default().validate(), Ok(()));
    }
}
