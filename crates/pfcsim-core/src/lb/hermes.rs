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
//!   and charged to the path that last carried the missing byte; a NACK for a byte sent on the
//!   flow's previous path is the reordering its own reroute caused and is not counted. A
//!   failed path is avoided for `fail_hold`, then tried again with fresh loss counters.
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

use super::host::{AckEcho, FlowInfo, HostAction, HostCtx, HostFabric, ProbeEcho};
use crate::lb::NO_TOR;
use crate::units::{Bytes, Time};
use rand::Rng as _;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// An RTT threshold: fixed, or relative to the base RTT of the pair of ToRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RttThreshold {
    /// The same time for every pair of ToRs (`"12us"`).
    Fixed(Time),
    /// The pair's base RTT plus the time to drain this many bytes at its bottleneck rate
    /// (`"25KB"`); as a difference (`rtt_better`), just the drain time.
    Queue(Bytes),
}

impl RttThreshold {
    /// The threshold for a pair with this base RTT and bottleneck; `absolute` adds the base.
    fn resolve(self, timing: super::host::PairTiming, absolute: bool) -> Time {
        match self {
            RttThreshold::Fixed(t) => t,
            RttThreshold::Queue(b) => {
                let drain = timing.bottleneck.tx_time(b.0);
                if absolute {
                    timing.base_rtt + drain
                } else {
                    drain
                }
            }
        }
    }
}

impl fmt::Display for RttThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RttThreshold::Fixed(t) => t.fmt(f),
            RttThreshold::Queue(b) => b.fmt(f),
        }
    }
}

impl Serialize for RttThreshold {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for RttThreshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if let Ok(t) = text.parse::<Time>() {
            return Ok(RttThreshold::Fixed(t));
        }
        match text.parse::<Bytes>() {
            Ok(b) => Ok(RttThreshold::Queue(b)),
            Err(_) => Err(de::Error::custom(format!(
                "'{text}' is neither a time (\"12us\": the threshold itself) nor a size (\"25KB\": base RTT plus that many bytes queued at the bottleneck rate)"
            ))),
        }
    }
}

/// Hermes's parameters (`[lb]` with `scheme = "hermes"`). Defaults and their sources are in
/// `docs/schemes/hermes.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HermesConfig {
    /// T_RTT_low: a path faster than this is good (default `"25KB"`: the paper's base RTT +
    /// 20 us, which is 25 KB queued at its 10 Gbps).
    pub rtt_low: RttThreshold,
    /// T_RTT_high: a path at least this slow (and marked) is bad (default `"175KB"`: the
    /// public code's 180 us against its ~40 us one-way base, 140 us at 10 Gbps).
    pub rtt_high: RttThreshold,
    /// Δ_RTT: how much lower a path's RTT must be to count as notably better (default
    /// `"125KB"`: the public code's 100 us at 10 Gbps).
    pub rtt_better: RttThreshold,
    /// T_ECN: ECN fraction that separates good from bad (paper: 40 %).
    pub ecn_threshold: f64,
    /// Δ_ECN: how much lower a path's ECN fraction must be to count as notably better.
    pub ecn_better: f64,
    /// Packets acknowledged on a path before its ECN fraction counts (the public code's
    /// 14,000 B of 1000 B packets).
    pub ecn_min_samples: u32,
    /// T1: RTT and ECN counters cover the last one to two windows of this length (public
    /// code's bootstrap scripts: 60 us).
    pub aging: Time,
    /// A path's RTT is unknown once it has had no sample for this long.
    pub rtt_expiry: Time,
    /// Rerouting of running flows off bad paths is on (off: paths are chosen at the start,
    /// after timeouts and off failed paths only).
    pub reroute: bool,
    /// S: bytes a flow must have sent on its path before it may move off a bad one (paper:
    /// 600 KB).
    pub reroute_min_sent: Bytes,
    /// R: a flow moves off a bad path only below this fraction of the pair's bottleneck rate
    /// (paper: 30 %).
    pub reroute_max_rate: f64,
    /// A flow's rate is the bytes acknowledged over the last window of this length.
    pub rate_window: Time,
    /// At most one reroute attempt per flow per this interval (public code: 100 us).
    pub reroute_interval: Time,
    /// Probing agents are on.
    pub probe: bool,
    /// Probing period of each agent (paper: 100-500 us).
    pub probe_interval: Time,
    /// A probe unanswered for this long counts as a loss on its path.
    pub probe_timeout: Time,
    /// Data priority of probes.
    pub probe_priority: u8,
    /// Retransmission timeouts in the fail window that fail a path.
    pub fail_timeouts: u32,
    /// Losses in the fail window that fail a path (with `fail_loss_fraction`).
    pub fail_losses: u32,
    /// Losses per packet sent on a path, in the fail window, that fail it (with `fail_losses`).
    pub fail_loss_fraction: f64,
    /// Loss and timeout counters cover the last one to two windows of this length.
    pub fail_window: Time,
    /// A failed path is avoided for this long, then tried again.
    pub fail_hold: Time,
}

impl Default for HermesConfig {
    fn default() -> Self {
        HermesConfig {
            rtt_low: RttThreshold::Queue(Bytes(25_000)),
            rtt_high: RttThreshold::Queue(Bytes(175_000)),
            rtt_better: RttThreshold::Queue(Bytes(125_000)),
            ecn_threshold: 0.4,
            ecn_better: 0.05,
            ecn_min_samples: 14,
            aging: Time::from_us(60),
            rtt_expiry: Time::from_ms(1),
            reroute: true,
            reroute_min_sent: Bytes(600_000),
            reroute_max_rate: 0.3,
            rate_window: Time::from_us(20),
            reroute_interval: Time::from_us(100),
            probe: true,
            probe_interval: Time::from_us(100),
            probe_timeout: Time::from_us(500),
            probe_priority: 3,
            fail_timeouts: 2,
            fail_losses: 3,
            fail_loss_fraction: 0.001,
            fail_window: Time::from_ms(10),
            fail_hold: Time::from_ms(10),
        }
    }
}

impl HermesConfig {
    pub fn validate(&self) -> Result<(), String> {
        let fraction = |key: &str, v: f64, example: &str| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!(
                    "lb.{key}: {v} is out of range; use a fraction in 0..=1 (e.g. {example})"
                ))
            }
        };
        fraction("ecn_threshold", self.ecn_threshold, "0.4")?;
        fraction("ecn_better", self.ecn_better, "0.05")?;
        fraction("reroute_max_rate", self.reroute_max_rate, "0.3")?;
        fraction("fail_loss_fraction", self.fail_loss_fraction, "0.001")?;
        let positive = |key: &str, t: Time, example: &str| {
            if t > Time::ZERO {
                Ok(())
            } else {
                Err(format!("lb.{key}: must be above 0 (e.g. \"{example}\")"))
            }
        };
        positive("aging", self.aging, "60us")?;
        positive("rtt_expiry", self.rtt_expiry, "1ms")?;
        positive("rate_window", self.rate_window, "20us")?;
        positive("fail_window", self.fail_window, "10ms")?;
        if self.probe {
            positive("probe_interval", self.probe_interval, "100us")?;
            positive("probe_timeout", self.probe_timeout, "500us")?;
            if !(1..=7).contains(&self.probe_priority) {
                return Err(format!(
                    "lb.probe_priority: {} is out of range; use a data priority 1..=7 (e.g. 3)",
                    self.probe_priority
                ));
            }
        }
        if self.fail_timeouts == 0 {
            return Err("lb.fail_timeouts: must be at least 1 (e.g. 2)".into());
        }
        if self.fail_losses == 0 {
            return Err("lb.fail_losses: must be at least 1 (e.g. 3)".into());
        }
        let low = |t: RttThreshold| match t {
            RttThreshold::Fixed(t) => (1, t.ps()),
            RttThreshold::Queue(b) => (0, b.0),
        };
        let (l, h) = (low(self.rtt_low), low(self.rtt_high));
        if l.0 == h.0 && l.1 > h.1 {
            return Err(format!(
                "lb.rtt_high: {} is below lb.rtt_low ({}); a bad path must be slower than a good one",
                self.rtt_high, self.rtt_low
            ));
        }
        Ok(())
    }
}

/// What Hermes makes of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathClass {
    Good,
    Gray,
    Bad,
    Failed,
}

/// The resolved thresholds of one pair of ToRs.
#[derive(Clone, Copy, Debug)]
struct Thresholds {
    low: Time,
    high: Time,
    better: Time,
    /// R in bytes per second.
    max_rate: f64,
}

/// What a host knows of one path to one destination ToR.
#[derive(Clone, Copy, Debug)]
struct PathStat {
    /// Smoothed RTT and the time of its last sample (`Time::MAX`: none yet).
    rtt: Time,
    rtt_at: Time,
    /// Aging window (`now / aging`) of `samples[0]`, `ce[0]`; index 1 is the window before.
    epoch: u64,
    samples: [u32; 2],
    ce: [u32; 2],
    /// Fail window (`now / fail_window`) of the counters below, same layout.
    fail_epoch: u64,
    sent: [u32; 2],
    losses: [u32; 2],
    timeouts: [u32; 2],
    failed_until: Time,
    /// This host's flows on the path now.
    flows: u32,
}

impl Default for PathStat {
    fn default() -> Self {
        PathStat {
            rtt: Time::ZERO,
            rtt_at: Time::MAX,
            epoch: 0,
            samples: [0; 2],
            ce: [0; 2],
            fail_epoch: 0,
            sent: [0; 2],
            losses: [0; 2],
            timeouts: [0; 2],
            failed_until: Time::ZERO,
            flows: 0,
        }
    }
}

/// Moves two-window counters to window `now_epoch`.
#[inline]
fn roll<const N: usize>(epoch: &mut u64, now_epoch: u64, counters: [&mut [u32; 2]; N]) {
    if now_epoch == *epoch {
        return;
    }
    for c in counters {
        *c = if now_epoch == *epoch + 1 {
            [0, c[0]]
        } else {
            [0, 0]
        };
    }
    *epoch = now_epoch;
}

impl PathStat {
    fn age(&mut self, now: Time, cfg: &HermesConfig) {
        let e = now.ps() / cfg.aging.ps();
        roll(&mut self.epoch, e, [&mut self.samples, &mut self.ce]);
        let e = now.ps() / cfg.fail_window.ps();
        roll(
            &mut self.fail_epoch,
            e,
            [&mut self.sent, &mut self.losses, &mut self.timeouts],
        );
    }

    fn sample(&mut self, now: Time, rtt: Time, ce: bool, cfg: &HermesConfig) {
        self.age(now, cfg);
        self.rtt = if self.rtt_at == Time::MAX {
            rtt
        } else {
            Time((self.rtt.ps() + rtt.ps()) / 2)
        };
        self.rtt_at = now;
        self.samples[0] += 1;
        self.ce[0] += ce as u32;
    }

    /// The ECN fraction, if enough packets were acknowledged.
    fn ecn(&self, cfg: &HermesConfig) -> Option<f64> {
        let n = self.samples[0] + self.samples[1];
        (n >= cfg.ecn_min_samples.max(1)).then(|| (self.ce[0] + self.ce[1]) as f64 / n as f64)
    }

    /// The RTT, if a sample is recent enough.
    fn known_rtt(&self, now: Time, cfg: &HermesConfig) -> Option<Time> {
        (self.rtt_at != Time::MAX && now.saturating_sub(self.rtt_at) <= cfg.rtt_expiry)
            .then_some(self.rtt)
    }

    /// Class, RTT estimate and ECN fraction (call `age` first).
    fn view(&self, now: Time, th: &Thresholds, cfg: &HermesConfig) -> PathView {
        let rtt = self.known_rtt(now, cfg);
        let ecn = self.ecn(cfg);
        let class = if now < self.failed_until {
            PathClass::Failed
        } else if self.timeouts[0] + self.timeouts[1] > 0 {
            PathClass::Bad
        } else {
            classify(rtt, ecn, th.low, th.high, cfg.ecn_threshold)
        };
        PathView {
            class,
            rtt: rtt.unwrap_or(th.low),
            ecn,
            flows: self.flows,
        }
    }
}

/// Hermes's path classes from RTT and ECN alone (`None`: unknown).
pub fn classify(
    rtt: Option<Time>,
    ecn: Option<f64>,
    low: Time,
    high: Time,
    ecn_threshold: f64,
) -> PathClass {
    let Some(rtt) = rtt else {
        return PathClass::Gray;
    };
    let (ecn_low, ecn_high) = match ecn {
        Some(f) => (f < ecn_threshold, f >= ecn_threshold),
        None => (true, true),
    };
    if rtt < low && ecn_low {
        PathClass::Good
    } else if rtt >= high && ecn_high {
        PathClass::Bad
    } else {
        PathClass::Gray
    }
}

#[derive(Clone, Copy, Debug)]
struct PathView {
    class: PathClass,
    rtt: Time,
    ecn: Option<f64>,
    flows: u32,
}

impl PathView {
    /// Notably better than `other`.
    fn better_than(&self, other: &PathView, th: &Thresholds, cfg: &HermesConfig) -> bool {
        let rtt = self.rtt + th.better <= other.rtt;
        match (self.ecn, other.ecn) {
            (Some(a), Some(b)) => rtt && a + cfg.ecn_better <= b,
            _ => rtt,
        }
    }
}

/// Sender state of one flow.
#[derive(Clone, Copy, Debug, Default)]
struct FlowState {
    /// Flows between two ToRs with more than one path are steered.
    active: bool,
    /// Path index now, and before the last move.
    cur: u16,
    prev: u16,
    /// Bytes from here on were last sent on `cur` (go-back-N resends from the hole on).
    from_seq: u64,
    /// `high_sent` when the flow moved to `cur`.
    sent_base: u64,
    last_try: Time,
    /// Rate window: start, bytes acknowledged in it, rate of the previous window (B/s, < 0:
    /// none yet).
    win_start: Time,
    win_bytes: u64,
    rate: f64,
    /// `snd_una` of the last NACK counted (one loss per hole).
    last_loss: u64,
    /// The retransmission timer fired: choose again at the next packet.
    repick: bool,
}

/// A probe in flight: its number and send time (`seq` 0: none).
#[derive(Clone, Copy, Debug, Default)]
struct Outstanding {
    seq: u32,
    sent_at: Time,
}

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
        }
    }

    /// Index in `stats` of host `h`'s entry for path `i` towards ToR `b`.
    #[inline]
    fn entry(&self, h: u32, b: u32, i: u16) -> usize {
        let a = self.host_tor[h as usize];
        (self.host_base[h as usize] + self.row[(a * self.tors + b) as usize]) as usize + i as usize
    }

    #[inline]
    fn th(&self, a: u32, b: u32) -> &Thresholds {
        &self.thresholds[(a * self.tors + b) as usize]
    }

    /// Ages host `h`'s entry of path `i` to ToR `b` and gives its view.
    fn view(&mut self, h: u32, b: u32, i: u16, now: Time) -> PathView {
        let e = self.entry(h, b, i);
        self.stats[e].age(now, &self.cfg);
        let th = *self.th(self.host_tor[h as usize], b);
        self.stats[e].view(now, &th, &self.cfg)
    }

    /// Host `h`'s choice among its `n` paths to ToR `b`, other than `current`: a good path
    /// with the fewest flows, else a notably better gray or bad one with the lowest RTT; if
    /// `any` (a new flow, or a forced move), else a random path that has not failed, else a
    /// random path.
    fn choose(
        &mut self,
        ctx: &mut HostCtx,
        h: u32,
        b: u32,
        n: u16,
        current: Option<u16>,
        any: bool,
    ) -> Option<u16> {
        let now = ctx.now;
        let a = self.host_tor[h as usize];
        let th = *self.th(a, b);
        let cur = current.map(|c| self.view(h, b, c, now));
        // Best candidate per class: (index, key, ties seen).
        let mut good: Option<(u16, u32, u32)> = None;
        let mut other: Option<(u16, (PathClass, Time, u32), u32)> = None;
        let mut usable = 0u32; // paths that have not failed, for the random fallback
        for i in 0..n {
            if Some(i) == current {
                continue;
            }
            let v = self.view(h, b, i, now);
            if v.class == PathClass::Failed {
                continue;
            }
            usable += 1;
            if v.class == PathClass::Good {
                pick_min(&mut good, i, v.flows, ctx);
            } else if cur.is_none_or(|c| v.better_than(&c, &th, &self.cfg)) {
                pick_min(&mut other, i, (v.class, v.rtt, v.flows), ctx);
            }
        }
        if let Some((i, _, _)) = good {
            return Some(i);
        }
        if let Some((i, _, _)) = other {
            return Some(i);
        }
        if !any {
            return None;
        }
        let others = n - current.is_some() as u16;
        if others == 0 {
            return None;
        }
        // Random among the paths that have not failed, or among all if every one has.
        let pool = if usable > 0 { usable } else { others as u32 };
        let mut k = ctx.rng.gen_range(0..pool);
        for i in 0..n {
            if Some(i) == current {
                continue;
            }
            if usable > 0 && self.view(h, b, i, now).class == PathClass::Failed {
                continue;
            }
            if k == 0 {
                return Some(i);
            }
            k -= 1;
        }
        unreachable!("k < pool")
    }

    /// Puts flow `id` of host `h` on path `to` (towards ToR `b`), from byte `seq` on.
    fn assign(&mut self, h: u32, b: u32, id: u32, to: u16, seq: u64, high_sent: u64, now: Time) {
        let f = self.flows[id as usize];
        if f.active {
            let e = self.entry(h, b, f.cur);
            self.stats[e].flows -= 1;
        }
        let e = self.entry(h, b, to);
        self.stats[e].flows += 1;
        let f = &mut self.flows[id as usize];
        f.prev = if f.active { f.cur } else { to };
        f.cur = to;
        f.from_seq = seq;
        f.sent_base = high_sent;
        f.last_try = now;
        f.active = true;
    }

    fn host(&self, node: u32) -> u32 {
        self.host_of_node[node as usize]
    }

    pub fn on_flow_start(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let n = ctx.fabric.paths(flow.src, flow.dst).len() as u16;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        if n < 2 || self.host_tor[h as usize] == b {
            return; // one path: nothing to balance
        }
        let to = self.choose(ctx, h, b, n, None, true).expect("n >= 2");
        self.assign(h, b, flow.id, to, 0, 0, ctx.now);
        let f = &mut self.flows[flow.id as usize];
        f.win_start = ctx.now;
        f.rate = -1.0;
        f.last_loss = u64::MAX;
    }

    /// The flow's rate in bytes per second at `now`.
    fn rate(f: &FlowState, now: Time, window: Time) -> f64 {
        let elapsed = now.saturating_sub(f.win_start);
        if elapsed >= window || f.rate < 0.0 {
            if elapsed == Time::ZERO {
                0.0
            } else {
                f.win_bytes as f64 / elapsed.as_secs_f64()
            }
        } else {
            f.rate
        }
    }

    #[inline]
    pub fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, seq: u64) -> u32 {
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        let f = self.flows[flow.id as usize];
        if !f.active {
            return paths[0];
        }
        let n = paths.len() as u16;
        let now = ctx.now;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        if seq < f.from_seq {
            self.flows[flow.id as usize].from_seq = seq;
        }
        let cur = self.view(h, b, f.cur, now);
        let forced = f.repick || cur.class == PathClass::Failed;
        if forced {
            self.flows[flow.id as usize].repick = false;
            if let Some(to) = self.choose(ctx, h, b, n, Some(f.cur), true) {
                self.assign(h, b, flow.id, to, seq, flow.high_sent, now);
            }
        } else if self.cfg.reroute
            && cur.class == PathClass::Bad
            && now >= f.last_try + self.cfg.reroute_interval
        {
            self.flows[flow.id as usize].last_try = now;
            let sent = flow.high_sent.saturating_sub(f.sent_base);
            let th = *self.th(self.host_tor[h as usize], b);
            if sent >= self.cfg.reroute_min_sent.0
                && Self::rate(&f, now, self.cfg.rate_window) < th.max_rate
            {
                if let Some(to) = self.choose(ctx, h, b, n, Some(f.cur), false) {
                    self.assign(h, b, flow.id, to, seq, flow.high_sent, now);
                }
            }
        }
        let cur = self.flows[flow.id as usize].cur;
        let e = self.entry(h, b, cur);
        self.stats[e].sent[0] += 1; // aged by `view` above
        ctx.fabric.paths(flow.src, flow.dst)[cur as usize]
    }

    /// Index of `tag` among `paths`, trying the flow's two paths first.
    fn index_of(paths: &[u32], tag: u32, f: &FlowState) -> Option<u16> {
        if paths.get(f.cur as usize) == Some(&tag) {
            return Some(f.cur);
        }
        if paths.get(f.prev as usize) == Some(&tag) {
            return Some(f.prev);
        }
        paths.iter().position(|&t| t == tag).map(|i| i as u16)
    }

    #[inline]
    pub fn on_ack(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, echo: &AckEcho) {
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
        let window = self.cfg.rate_window;
        let fs = &mut self.flows[flow.id as usize];
        let elapsed = now.saturating_sub(fs.win_start);
        if elapsed >= window {
            fs.rate = fs.win_bytes as f64 / elapsed.as_secs_f64();
            fs.win_start = now;
            fs.win_bytes = 0;
        }
        fs.win_bytes += echo.newly_acked;
        if echo.nack && flow.snd_una != fs.last_loss {
            fs.last_loss = flow.snd_una;
            // A hole in bytes sent before the last move was left behind on the previous
            // path: reordering caused by the move, not a loss.
            if flow.snd_una >= fs.from_seq {
                let cur = fs.cur;
                let e = self.entry(h, b, cur);
                self.stats[e].age(now, &self.cfg);
                self.stats[e].losses[0] += 1;
                self.check_failed(e, now);
            }
        }
    }

    pub fn on_timeout(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
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
        self.stats[e].age(ctx.now, &self.cfg);
        self.stats[e].timeouts[0] += 1;
        self.check_failed(e, ctx.now);
        self.flows[flow.id as usize].repick = true;
    }

    /// Marks entry `e` failed if its timeouts or losses say so.
    fn check_failed(&mut self, e: usize, now: Time) {
        let cfg = &self.cfg;
        let s = &mut self.stats[e];
        let timeouts = s.timeouts[0] + s.timeouts[1];
        let losses = s.losses[0] + s.losses[1];
        let sent = (s.sent[0] + s.sent[1]).max(1);
        let congested = s.ecn(cfg).is_some_and(|f| f >= cfg.ecn_threshold);
        let lossy = losses >= cfg.fail_losses
            && losses as f64 >= cfg.fail_loss_fraction * sent as f64
            && !congested;
        if timeouts >= cfg.fail_timeouts || lossy {
            s.failed_until = now + cfg.fail_hold;
            s.sent = [0; 2];
            s.losses = [0; 2];
            s.timeouts = [0; 2];
        }
    }

    pub fn on_flow_end(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let f = &mut self.flows[flow.id as usize];
        if !f.active {
            return;
        }
        f.active = false;
        let cur = f.cur;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        let e = self.entry(h, b, cur);
        self.stats[e].flows -= 1;
    }

    /// Whether host `h` is its rack's probing agent.
    fn is_agent(&self, h: u32) -> bool {
        self.rack[self.host_tor[h as usize] as usize].first() == Some(&h)
    }

    pub fn on_start(&mut self, ctx: &mut HostCtx) {
        let h = self.host(ctx.host);
        if self.cfg.probe && self.tors > 1 && self.is_agent(h) {
            // Agents start at random phases, so that racks do not probe in lockstep.
            let phase = ctx.rng.gen_range(0..self.cfg.probe_interval.ps());
            ctx.actions.push(HostAction::SetTimer {
                at: ctx.now + Time(phase),
                token: 0,
            });
        }
    }

    /// A probing round of the agent of this host's rack.
    pub fn on_timer(&mut self, ctx: &mut HostCtx, _token: u64) {
        let h = self.host(ctx.host);
        let a = self.host_tor[h as usize];
        let now = ctx.now;
        for b in 0..self.tors {
            if b == a {
                continue;
            }
            let n = ctx.fabric.tor_paths(a, b).len() as u16;
            // Probes unanswered for too long are losses for the whole rack.
            for i in 0..n {
                let o = self.probe_slot(a, b, i);
                let p = self.probes[o];
                if p.seq != 0 && now.saturating_sub(p.sent_at) >= self.cfg.probe_timeout {
                    self.probes[o].seq = 0;
                    for k in 0..self.rack[a as usize].len() {
                        let e = self.entry(self.rack[a as usize][k], b, i);
                        self.stats[e].age(now, &self.cfg);
                        self.stats[e].losses[0] += 1;
                        self.check_failed(e, now);
                    }
                }
            }
            // Two random paths and the best one.
            let first = ctx.rng.gen_range(0..n);
            let second = if n > 1 {
                (first + 1 + ctx.rng.gen_range(0..n - 1)) % n
            } else {
                first
            };
            let best = self.best(h, b, n, now);
            for i in [first, second, best] {
                self.send_probe(ctx, a, b, i);
            }
        }
        ctx.actions.push(HostAction::SetTimer {
            at: now + self.cfg.probe_interval,
            token: 0,
        });
    }

    /// The path host `h` rates best towards ToR `b`: lowest class, then RTT, then index.
    fn best(&mut self, h: u32, b: u32, n: u16, now: Time) -> u16 {
        (0..n)
            .min_by_key(|&i| {
                let v = self.view(h, b, i, now);
                (v.class, v.rtt)
            })
            .expect("n >= 1")
    }

    fn probe_slot(&self, a: u32, b: u32, i: u16) -> usize {
        (self.probe_base[a as usize] + self.row[(a * self.tors + b) as usize]) as usize + i as usize
    }

    /// Sends a probe on path `i` from ToR `a`'s agent to ToR `b`, unless one is in flight.
    fn send_probe(&mut self, ctx: &mut HostCtx, a: u32, b: u32, i: u16) {
        let o = self.probe_slot(a, b, i);
        if self.probes[o].seq != 0 {
            return;
        }
        self.probe_seq = self.probe_seq.wrapping_add(1).max(1);
        self.probes[o] = Outstanding {
            seq: self.probe_seq,
            sent_at: ctx.now,
        };
        for k in 0..self.rack[a as usize].len() {
            let e = self.entry(self.rack[a as usize][k], b, i);
            self.stats[e].age(ctx.now, &self.cfg);
            self.stats[e].sent[0] += 1;
        }
        ctx.actions.push(HostAction::SendProbe {
            to_host: self.rack_node[b as usize],
            path_tag: ctx.fabric.tor_paths(a, b)[i as usize],
            priority: self.cfg.probe_priority,
            meta: self.probe_seq,
        });
    }

    pub fn on_probe_reply(&mut self, ctx: &mut HostCtx, echo: &ProbeEcho) {
        let h = self.host(ctx.host);
        let a = self.host_tor[h as usize];
        let b = ctx.fabric.tor(echo.to_host);
        let Some(i) = ctx
            .fabric
            .tor_paths(a, b)
            .iter()
            .position(|&t| t == echo.path_tag)
        else {
            return;
        };
        let i = i as u16;
        let o = self.probe_slot(a, b, i);
        if self.probes[o].seq == echo.meta {
            self.probes[o].seq = 0;
        }
        // Shared with the whole rack at once.
        for k in 0..self.rack[a as usize].len() {
            let e = self.entry(self.rack[a as usize][k], b, i);
            self.stats[e].sample(ctx.now, echo.rtt, echo.ce, &self.cfg);
        }
    }

    /// Host `node`'s class of path `i` towards ToR `b` at `now` (for tests and inspection).
    pub fn class(&mut self, node: u32, b: u32, i: u16, now: Time) -> PathClass {
        let h = self.host(node);
        self.view(h, b, i, now).class
    }

    /// The path index flow `id` is on.
    pub fn flow_path(&self, id: u32) -> u16 {
        self.flows[id as usize].cur
    }
}

/// Keeps the candidate with the smallest key in `best`, breaking ties uniformly at random.
#[inline]
fn pick_min<K: PartialOrd + Copy>(
    best: &mut Option<(u16, K, u32)>,
    i: u16,
    key: K,
    ctx: &mut HostCtx,
) {
    match best {
        None => *best = Some((i, key, 1)),
        Some((bi, bk, ties)) => {
            if key < *bk {
                *best = Some((i, key, 1));
            } else if key == *bk {
                *ties += 1;
                if ctx.rng.gen_range(0..*ties) == 0 {
                    *bi = i;
                }
            }
        }
    }
}
