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

use super::host::{AckEcho, FlowInfo, HostAction, HostCtx, HostFabric, HostScheme, ProbeEcho};
use super::{Capabilities, LbFabric, SchemeConfig, SwitchScheme};
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
    /// NACKs a flow gets this long after it moved are the reordering of the move (its old
    /// path's packets arriving behind the new path's), not losses (public code: 1 ms).
    pub reorder_window: Time,
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
            reorder_window: Time::from_ms(1),
            fail_hold: Time::from_ms(10),
        }
    }
}

impl SchemeConfig for HermesConfig {
    fn validate(&self) -> Result<(), String> {
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

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hosts: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        super::host::switch_side(fabric)
    }

    fn host_scheme(&self, flows: usize, fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        Some(Box::new(Hermes::new(self, fabric, flows)))
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
    /// `snd_una` of the last NACK seen (one loss per hole).
    last_loss: u64,
    /// NACKs before this time are taken for the reordering of the flow's last move.
    reordering_until: Time,
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
    /// `any` (a new flow, or a forced move), else a random path that has not failed; a new
    /// flow (no `current`) whose every path has failed takes a random one, a forced move
    /// finds nothing (moving from one failed path to another gains nothing and reorders).
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
            } else if cur
                .as_ref()
                .map_or(true, |c| v.better_than(c, &th, &self.cfg))
            {
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
        if others == 0 || (usable == 0 && current.is_some()) {
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

    /// Puts `flow` of host `h` on path `to` (towards ToR `b`), from byte `seq` on.
    fn assign(&mut self, h: u32, b: u32, flow: &FlowInfo, to: u16, seq: u64, now: Time) {
        let (id, high_sent) = (flow.id, flow.high_sent);
        let f = self.flows[id as usize];
        if f.active {
            let e = self.entry(h, b, f.cur);
            self.stats[e].flows -= 1;
        }
        let e = self.entry(h, b, to);
        self.stats[e].flows += 1;
        let f = &mut self.flows[id as usize];
        if f.active {
            f.reordering_until = now + self.cfg.reorder_window;
        }
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

    /// Whether host `h` is its rack's probing agent.
    fn is_agent(&self, h: u32) -> bool {
        self.rack[self.host_tor[h as usize] as usize].first() == Some(&h)
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
        if self.cfg.probe && !self.probing[a as usize] {
            // The rack's agent resumes on its round grid.
            self.probing[a as usize] = true;
            let (phase, interval) = (self.phase[a as usize].ps(), self.cfg.probe_interval.ps());
            let now = ctx.now.ps();
            let at = if now <= phase {
                phase
            } else {
                phase + (now - phase).div_ceil(interval) * interval
            };
            ctx.actions.push(HostAction::SetTimer {
                host: self.rack_node[a as usize],
                at: Time(at),
                token: 0,
            });
        }
        let f = &mut self.flows[flow.id as usize];
        f.win_start = ctx.now;
        f.rate = -1.0;
        f.last_loss = u64::MAX;
        f.reordering_until = Time::ZERO;
    }

    #[inline]
    fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, seq: u64) -> u32 {
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
                self.assign(h, b, flow, to, seq, now);
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
                    self.assign(h, b, flow, to, seq, now);
                }
            }
        }
        let cur = self.flows[flow.id as usize].cur;
        let e = self.entry(h, b, cur);
        self.stats[e].sent[0] += 1; // aged by `view` above
        ctx.fabric.paths(flow.src, flow.dst)[cur as usize]
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
            // Within the reorder window after a move, a hole is the old path's packets still
            // on their way behind the new path's (and, once go-back-N has resent them on the
            // new path, the new path's copies the receiver discarded meanwhile): reordering
            // caused by the move, whatever byte it is at. Later, a loss of the path that last
            // carried the missing byte.
            if now >= fs.reordering_until {
                let i = if flow.snd_una >= fs.from_seq {
                    fs.cur
                } else {
                    fs.prev
                };
                let e = self.entry(h, b, i);
                self.stats[e].age(now, &self.cfg);
                self.stats[e].losses[0] += 1;
                self.check_failed(e, now);
            }
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
        self.stats[e].age(ctx.now, &self.cfg);
        self.stats[e].timeouts[0] += 1;
        self.check_failed(e, ctx.now);
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
        let h = self.host(ctx.host);
        if self.cfg.probe && self.tors > 1 && self.is_agent(h) {
            // Agents run at random phases, so that racks do not probe in lockstep. They
            // start with the first flow of their rack.
            let phase = ctx.rng.gen_range(0..self.cfg.probe_interval.ps());
            self.phase[self.host_tor[h as usize] as usize] = ctx.now + Time(phase);
        }
    }

    /// A probing round of the agent of this host's rack. With no flow of the rack running,
    /// it only waits for the probes still out (answered, or lost after `probe_timeout`), then
    /// stops until the rack's next flow starts.
    fn on_timer(&mut self, ctx: &mut HostCtx, _token: u64) {
        let h = self.host(ctx.host);
        let a = self.host_tor[h as usize];
        let now = ctx.now;
        let idle = self.rack_flows[a as usize] == 0;
        let mut waiting = false;
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
                waiting |= self.probes[o].seq != 0;
            }
            if idle {
                continue;
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
        if idle && !waiting {
            self.probing[a as usize] = false;
            return;
        }
        ctx.actions.push(HostAction::SetTimer {
            host: ctx.host,
            at: now + self.cfg.probe_interval,
            token: 0,
        });
    }

    fn on_probe_reply(&mut self, ctx: &mut HostCtx, echo: &ProbeEcho) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::host::TestHost;

    const US: u64 = 1_000;

    fn hermes(host: &TestHost, cfg: &HermesConfig, flows: usize) -> Hermes {
        Hermes::new(cfg, &host.fabric, flows)
    }

    /// `n` probe replies at `t_ns` on path tag `tag` (ToR 1), with this RTT and mark, at
    /// host 0 (its rack's agent): every host of rack 0 learns them.
    fn probe_replies(
        h: &mut Hermes,
        host: &mut TestHost,
        t_ns: u64,
        tag: u32,
        rtt_us: u64,
        ce: bool,
        n: u32,
    ) {
        for k in 0..n {
            let echo = ProbeEcho {
                to_host: 2,
                path_tag: tag,
                ce,
                rtt: Time::from_us(rtt_us),
                meta: 0,
            };
            h.on_probe_reply(&mut host.ctx(t_ns + k as u64), &echo);
        }
    }

    fn flow(id: u32, high_sent: u64) -> FlowInfo {
        FlowInfo {
            high_sent,
            snd_una: high_sent,
            ..TestHost::flow(id, 10_000_000)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn ack(
        h: &mut Hermes,
        host: &mut TestHost,
        t_ns: u64,
        f: &FlowInfo,
        tag: u32,
        rtt_us: u64,
        ce: bool,
        acked: u64,
    ) {
        let echo = AckEcho {
            nack: false,
            path_tag: tag,
            ce,
            rtt: Time::from_us(rtt_us),
            newly_acked: acked,
        };
        h.on_ack(&mut host.ctx(t_ns), f, &echo);
    }

    #[test]
    fn paths_are_classed_by_rtt_and_ecn() {
        let (low, high) = (Time::from_us(10), Time::from_us(22));
        let c = |rtt: Option<u64>, ecn| classify(rtt.map(Time::from_us), ecn, low, high, 0.4);
        assert_eq!(c(Some(9), Some(0.1)), PathClass::Good);
        assert_eq!(c(Some(9), Some(0.5)), PathClass::Gray, "fast but marked");
        assert_eq!(c(Some(25), Some(0.5)), PathClass::Bad);
        assert_eq!(c(Some(25), Some(0.1)), PathClass::Gray, "slow but unmarked");
        assert_eq!(
            c(Some(15), Some(0.0)),
            PathClass::Gray,
            "between the RTT thresholds"
        );
        // Too few samples for an ECN fraction: the RTT alone decides.
        assert_eq!(c(Some(9), None), PathClass::Good);
        assert_eq!(c(Some(25), None), PathClass::Bad);
        assert_eq!(c(None, None), PathClass::Gray, "unknown");
    }

    #[test]
    fn thresholds_scale_with_the_pairs_base_rtt() {
        let host = TestHost::new(4);
        // Base RTT 8 us, bottleneck 100 Gbps: 25 KB drain in 2 us, 175 KB in 14 us.
        let h = hermes(&host, &HermesConfig::default(), 1);
        let th = h.th(0, 1);
        assert_eq!(
            (th.low, th.high, th.better),
            (Time::from_us(10), Time::from_us(22), Time::from_us(10))
        );
        assert!((th.max_rate - 0.3 * 12.5e9).abs() < 1.0);
        let fixed = HermesConfig {
            rtt_low: RttThreshold::Fixed(Time::from_us(30)),
            ..Default::default()
        };
        assert_eq!(hermes(&host, &fixed, 1).th(0, 1).low, Time::from_us(30));
        // Spec strings: a time is the threshold, a size the queue above the base RTT.
        let cfg: HermesConfig = toml::from_str("rtt_low = \"12us\"\nrtt_high = \"200KB\"").unwrap();
        assert_eq!(cfg.rtt_low, RttThreshold::Fixed(Time::from_us(12)));
        assert_eq!(cfg.rtt_high, RttThreshold::Queue(Bytes(200_000)));
        assert!(toml::from_str::<HermesConfig>("rtt_low = \"fast\"").is_err());
    }

    #[test]
    fn new_flows_take_good_paths_then_gray_then_bad() {
        let mut host = TestHost::new(4);
        let mut h = hermes(&host, &HermesConfig::default(), 8);
        // Path 1 bad, path 2 gray, paths 3 and 4 good.
        probe_replies(&mut h, &mut host, 0, 1, 30, true, 20);
        probe_replies(&mut h, &mut host, 100, 2, 15, false, 20);
        probe_replies(&mut h, &mut host, 200, 3, 9, false, 20);
        probe_replies(&mut h, &mut host, 300, 4, 9, false, 20);
        let class: Vec<_> = (0..4)
            .map(|i| h.class(0, 1, i, Time::from_ns(400)))
            .collect();
        assert_eq!(
            class,
            [
                PathClass::Bad,
                PathClass::Gray,
                PathClass::Good,
                PathClass::Good
            ]
        );
        // Good paths, fewest flows first: the first two flows split over 3 and 4.
        let mut tags = Vec::new();
        for id in 0..4 {
            let f = flow(id, 0);
            h.on_flow_start(&mut host.ctx(400), &f);
            tags.push(h.path_tag(&mut host.ctx(400), &f, 0));
        }
        assert!(tags.iter().all(|&t| t == 3 || t == 4), "{tags:?}");
        assert_eq!(tags.iter().filter(|&&t| t == 3).count(), 2, "{tags:?}");
        // No good path left (3 and 4 turn bad): gray beats bad.
        probe_replies(&mut h, &mut host, 500, 3, 40, true, 20);
        probe_replies(&mut h, &mut host, 600, 4, 40, true, 20);
        let f = flow(4, 0);
        h.on_flow_start(&mut host.ctx(700), &f);
        assert_eq!(h.path_tag(&mut host.ctx(700), &f, 0), 2);
    }

    /// Flow 0 on path 1 (the only good path at its start); then path 1 turns bad and path 2
    /// good. `sent` bytes sent so far; `acked` acknowledged over the last rate window.
    fn on_bad_path(cfg: &HermesConfig, sent: u64, acked: u64) -> u32 {
        let mut host = TestHost::new(4);
        let mut h = hermes(&host, cfg, 1);
        probe_replies(&mut h, &mut host, 0, 1, 9, false, 20);
        for tag in 2..=4 {
            probe_replies(&mut h, &mut host, 0, tag, 30, true, 20);
        }
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(100), &f);
        assert_eq!(h.path_tag(&mut host.ctx(100), &f, 0), 1);
        // 2 ms later (older samples expired): path 1 is bad, path 2 good, 3 and 4 unknown.
        let t = 2_000 * US;
        let f = flow(0, sent);
        ack(&mut h, &mut host, t, &f, 1, 30, true, 0);
        for k in 1..20 {
            ack(&mut h, &mut host, t + k, &f, 1, 30, true, 0);
        }
        probe_replies(&mut h, &mut host, t + 100, 2, 9, false, 20);
        ack(&mut h, &mut host, t + 25 * US, &f, 1, 30, true, acked);
        ack(&mut h, &mut host, t + 50 * US, &f, 1, 30, true, 0); // closes the window
        assert_eq!(h.class(0, 1, 0, Time::from_ns(t + 50 * US)), PathClass::Bad);
        h.path_tag(&mut host.ctx(t + 50 * US), &f, sent)
    }

    #[test]
    fn only_large_slow_flows_move_off_a_bad_path() {
        let cfg = HermesConfig::default();
        // Rate window 20 us: 250 KB in 25 us is 80 Gbps, 25 KB is 8 Gbps (R: 30 Gbps).
        assert_eq!(
            on_bad_path(&cfg, 1_000_000, 25_000),
            2,
            "large and slow: moves"
        );
        assert_eq!(
            on_bad_path(&cfg, 1_000_000, 250_000),
            1,
            "large and fast: stays"
        );
        assert_eq!(
            on_bad_path(&cfg, 100_000, 25_000),
            1,
            "sent less than S: stays"
        );
        let off = HermesConfig {
            reroute: false,
            ..Default::default()
        };
        assert_eq!(on_bad_path(&off, 1_000_000, 25_000), 1);
        // Only to a notably better path: with Δ_RTT above 30 - 9 us, path 2 is not.
        let picky = HermesConfig {
            rtt_better: RttThreshold::Fixed(Time::from_us(25)),
            ..Default::default()
        };
        assert_eq!(
            on_bad_path(&picky, 1_000_000, 25_000),
            2,
            "good paths need no margin"
        );
    }

    #[test]
    fn a_gray_candidate_must_be_notably_better() {
        // Path 1 bad at 30 us; the only alternative is gray (ECN-marked) at `alt` us.
        let run = |alt: u64| {
            let mut host = TestHost::new(2);
            let mut h = hermes(&host, &HermesConfig::default(), 1);
            probe_replies(&mut h, &mut host, 0, 1, 9, false, 20);
            probe_replies(&mut h, &mut host, 0, 2, 30, true, 20);
            let f = flow(0, 0);
            h.on_flow_start(&mut host.ctx(100), &f);
            let t = 2_000 * US;
            let f = flow(0, 1_000_000);
            for k in 0..20 {
                ack(&mut h, &mut host, t + k, &f, 1, 30, true, 0);
            }
            probe_replies(&mut h, &mut host, t + 100, 2, alt, true, 1);
            for k in 0..20 {
                probe_replies(&mut h, &mut host, t + 200 + k, 2, alt, false, 1);
            }
            ack(&mut h, &mut host, t + 50 * US, &f, 1, 30, true, 0);
            assert_eq!(
                h.class(0, 1, 1, Time::from_ns(t + 50 * US)),
                PathClass::Gray
            );
            h.path_tag(&mut host.ctx(t + 50 * US), &f, 1_000_000)
        };
        assert_eq!(run(12), 2, "18 us faster than the bad path (Δ 10 us)");
        assert_eq!(run(21), 1, "9 us faster: not worth it");
    }

    #[test]
    fn timeouts_move_the_flow_and_fail_the_path() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 4);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let first = h.path_tag(&mut host.ctx(0), &f, 0);
        let i = (first - 1) as u16;
        let f = FlowInfo {
            snd_una: 0,
            high_sent: 50_000,
            ..f
        };
        h.on_timeout(&mut host.ctx(4_000 * US), &f);
        assert_eq!(h.class(0, 1, i, Time::from_ns(4_000 * US)), PathClass::Bad);
        let second = h.path_tag(&mut host.ctx(4_000 * US), &f, 0);
        assert_ne!(second, first, "a timeout moves the flow at once");
        // A second timeout on the same path (another flow) fails it.
        let g = flow(1, 0);
        h.on_flow_start(&mut host.ctx(4_001 * US), &g);
        h.flows[1].cur = i; // as if it had been there
        h.on_timeout(
            &mut host.ctx(4_002 * US),
            &FlowInfo {
                high_sent: 1000,
                snd_una: 0,
                ..g
            },
        );
        assert_eq!(
            h.class(0, 1, i, Time::from_ns(4_002 * US)),
            PathClass::Failed
        );
        for id in 2..4 {
            let f = flow(id, 0);
            h.on_flow_start(&mut host.ctx(4_003 * US), &f);
            assert_ne!(h.path_tag(&mut host.ctx(4_003 * US), &f, 0), first);
        }
        // Failure lasts `fail_hold`, then the path is tried again (not sticky).
        let later = Time::from_ns(4_002 * US) + cfg.fail_hold;
        assert_ne!(h.class(0, 1, i, later), PathClass::Failed);
    }

    /// A NACK of flow 0 at `t_ns` for the hole at `una`, made by a packet on `tag`.
    fn nack(h: &mut Hermes, host: &mut TestHost, t_ns: u64, una: u64, tag: u32) {
        let f = FlowInfo {
            snd_una: una,
            high_sent: 200_000,
            ..flow(0, 0)
        };
        let echo = AckEcho {
            nack: true,
            path_tag: tag,
            ce: false,
            rtt: Time::from_us(9),
            newly_acked: 0,
        };
        h.on_ack(&mut host.ctx(t_ns), &f, &echo);
    }

    /// Flow 0 sends 100 packets on its first path, times out at 4 ms and moves at byte
    /// 100,000. Gives Hermes, the host, the first and the second path index.
    fn moved_flow() -> (Hermes, TestHost, u16, u16) {
        let mut host = TestHost::new(4);
        let mut h = hermes(&host, &HermesConfig::default(), 1);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let first = h.path_tag(&mut host.ctx(0), &f, 0);
        for k in 1..100 {
            h.path_tag(&mut host.ctx(k), &flow(0, k * 1000), k * 1000);
        }
        let sent = flow(0, 100_000);
        h.on_timeout(&mut host.ctx(4_000 * US), &FlowInfo { snd_una: 0, ..sent });
        let second = h.path_tag(&mut host.ctx(4_000 * US), &sent, 100_000);
        assert_ne!(first, second);
        (h, host, (first - 1) as u16, (second - 1) as u16)
    }

    #[test]
    fn losses_fail_a_path_but_reordering_after_a_move_does_not() {
        let (mut h, mut host, i, j) = moved_flow();
        let t = 4_000 * US;
        let (tag_i, tag_j) = (i as u32 + 1, j as u32 + 1);
        // The old path's packets arrive behind the new path's: holes below the move.
        nack(&mut h, &mut host, t + 20 * US, 40_000, tag_j);
        // Go-back-N resends from byte 40,000 on the new path; new-path copies the receiver
        // discarded meanwhile leave holes above the move too, still within the window.
        for k in 0..50 {
            let seq = 40_000 + k * 1000;
            h.path_tag(&mut host.ctx(t + 30 * US + k), &flow(0, 100_000), seq);
        }
        for (k, una) in [100_000, 110_000, 120_000, 130_000].into_iter().enumerate() {
            nack(&mut h, &mut host, t + 100 * US + k as u64, una, tag_j);
        }
        let now = Time::from_ns(t + 200 * US);
        assert_eq!(
            h.class(0, 1, j, now),
            PathClass::Good,
            "reordering, not loss"
        );
        assert_eq!(h.class(0, 1, i, now), PathClass::Bad, "the timeout");
        // After the reorder window holes are losses of the path that last carried the byte,
        // the same hole once: three in 50 packets fail the new path.
        let later = t + 1_100 * US;
        for una in [140_000, 140_000, 150_000] {
            nack(&mut h, &mut host, later, una, tag_j);
        }
        assert_ne!(h.class(0, 1, j, Time::from_ns(later)), PathClass::Failed);
        nack(&mut h, &mut host, later, 160_000, tag_j);
        assert_eq!(h.class(0, 1, j, Time::from_ns(later)), PathClass::Failed);
        assert_ne!(h.class(0, 1, i, Time::from_ns(later)), PathClass::Failed);

        // Holes below the move (no go-back-N since), after the window: the old path's.
        let (mut h, mut host, i, j) = moved_flow();
        let later = 4_000 * US + 1_100 * US;
        for una in [10_000, 20_000, 30_000] {
            nack(&mut h, &mut host, later, una, tag_i);
        }
        let now = Time::from_ns(later);
        assert_eq!(h.class(0, 1, i, now), PathClass::Failed);
        assert_ne!(h.class(0, 1, j, now), PathClass::Failed);
    }

    #[test]
    fn a_forced_move_never_goes_to_another_failed_path() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 2);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let first = h.path_tag(&mut host.ctx(0), &f, 0);
        // Every path has failed: the flow stays where it is rather than hopping between
        // failed paths packet by packet.
        let until = Time::from_ms(5);
        for i in 0..4 {
            let e = h.entry(0, 1, i);
            h.stats[e].failed_until = until;
        }
        for k in 1..20 {
            let tag = h.path_tag(&mut host.ctx(k * US), &flow(0, k * 1000), k * 1000);
            assert_eq!(tag, first, "packet {k}");
        }
        // A new flow still gets a path.
        let g = flow(1, 0);
        h.on_flow_start(&mut host.ctx(30 * US), &g);
        assert!((1..=4).contains(&h.path_tag(&mut host.ctx(30 * US), &g, 0)));
        // One path back: the flow moves there at once.
        let back = (first % 4) as u16; // index of the next path
        let e = h.entry(0, 1, back);
        h.stats[e].failed_until = Time::ZERO;
        let tag = h.path_tag(&mut host.ctx(40 * US), &flow(0, 20_000), 20_000);
        assert_eq!(tag, back as u32 + 1);
    }

    #[test]
    fn the_rack_agent_probes_and_shares_what_it_learns() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 1);
        // Agents start with their rack's first flow, on the round grid of their phase.
        for node in [1, 0] {
            host.host = node;
            h.on_start(&mut host.ctx(0));
            assert!(host.actions.is_empty());
        }
        // A flow of host 1 (not the agent) wakes host 0, the agent.
        host.host = 1;
        h.on_flow_start(
            &mut host.ctx(0),
            &FlowInfo {
                src: 1,
                ..flow(0, 0)
            },
        );
        let [HostAction::SetTimer { host: 0, at, .. }] = host.actions[..] else {
            panic!("{:?}", host.actions)
        };
        assert!(at < Time::ZERO + cfg.probe_interval);
        host.host = 0;
        host.actions.clear();
        // A round: two random paths and the best, distinct ones once, to host 2.
        let mut rounds = Vec::new();
        let mut t = 0;
        for _ in 0..3 {
            h.on_timer(&mut host.ctx(t), 0);
            let probes: Vec<u32> = host
                .actions
                .iter()
                .filter_map(|a| match *a {
                    HostAction::SendProbe {
                        to_host,
                        path_tag,
                        priority,
                        ..
                    } => {
                        assert_eq!((to_host, priority), (2, 3));
                        Some(path_tag)
                    }
                    _ => None,
                })
                .collect();
            assert!(matches!(
                host.actions.last(),
                Some(HostAction::SetTimer { .. })
            ));
            host.actions.clear();
            rounds.push(probes);
            t += 600 * US; // replies never come: every probe times out
        }
        assert!((2..=3).contains(&rounds[0].len()), "{rounds:?}");
        // The best path (all unknown: the first) is probed every round; its unanswered
        // probes are losses for the whole rack, and the third fails it.
        assert!(rounds.iter().all(|r| r.contains(&1)), "{rounds:?}");
        assert_ne!(h.class(1, 1, 0, Time::from_ns(t)), PathClass::Failed);
        h.on_timer(&mut host.ctx(t), 0);
        for node in [0, 1] {
            assert_eq!(h.class(node, 1, 0, Time::from_ns(t)), PathClass::Failed);
        }
        // A reply reaches every host of the rack.
        let mut h = hermes(&host, &cfg, 0);
        probe_replies(&mut h, &mut host, 0, 2, 30, true, 20);
        assert_eq!(h.class(1, 1, 1, Time::from_ns(100)), PathClass::Bad);
    }

    #[test]
    fn the_agent_stops_while_its_rack_is_idle_and_resumes_on_its_grid() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 2);
        h.on_start(&mut host.ctx(0));
        let phase = 37 * US; // a whole number of ns, for the test's clock
        h.phase[0] = Time::from_ns(phase);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let [HostAction::SetTimer { host: 0, at, .. }] = host.actions[..] else {
            panic!("{:?}", host.actions)
        };
        assert_eq!(at, Time::from_ns(phase));
        host.actions.clear();
        let round = |h: &mut Hermes, host: &mut TestHost, t: u64| {
            host.actions.clear();
            h.on_timer(&mut host.ctx(t), 0);
            let probes = host
                .actions
                .iter()
                .filter(|a| matches!(a, HostAction::SendProbe { .. }))
                .count();
            let next = host.actions.iter().find_map(|a| match *a {
                HostAction::SetTimer { host: 0, at, .. } => Some(at),
                _ => None,
            });
            (probes, next)
        };
        // A flow runs: probes, next round one interval later.
        let (probes, next) = round(&mut h, &mut host, phase);
        assert!(probes >= 2);
        assert_eq!(next, Some(Time::from_ns(phase) + cfg.probe_interval));
        // The flow ends: no more probes; the round waits for the three still out...
        h.on_flow_end(&mut host.ctx(phase + 50 * US), &f);
        let (probes, next) = round(&mut h, &mut host, phase + 100 * US);
        assert_eq!((probes, next.is_some()), (0, true));
        // ...and stops once they are answered.
        for tag in 1..=4 {
            for meta in 1..=3 {
                let echo = ProbeEcho {
                    to_host: 2,
                    path_tag: tag,
                    ce: false,
                    rtt: Time::from_us(9),
                    meta,
                };
                h.on_probe_reply(&mut host.ctx(phase + 150 * US), &echo);
            }
        }
        assert_eq!(round(&mut h, &mut host, phase + 200 * US), (0, None));
        // The rack's next flow restarts the agent at its next round on the grid.
        host.actions.clear();
        h.on_flow_start(&mut host.ctx(phase + 1_234 * US), &flow(1, 0));
        let [HostAction::SetTimer { host: 0, at, .. }] = host.actions[..] else {
            panic!("{:?}", host.actions)
        };
        assert_eq!(at, Time::from_ns(phase + 1_300 * US));
        // A second flow does not start it twice.
        host.actions.clear();
        h.on_flow_start(&mut host.ctx(phase + 1_250 * US), &flow(0, 0));
        assert!(host.actions.is_empty());
    }

    #[test]
    fn bad_settings_are_refused_with_the_key() {
        let check = |cfg: HermesConfig, key: &str| {
            let e = cfg.validate().unwrap_err();
            assert!(e.starts_with(&format!("lb.{key}")), "{e}");
        };
        check(
            HermesConfig {
                ecn_threshold: 1.5,
                ..Default::default()
            },
            "ecn_threshold",
        );
        check(
            HermesConfig {
                reroute_max_rate: -0.1,
                ..Default::default()
            },
            "reroute_max_rate",
        );
        check(
            HermesConfig {
                aging: Time::ZERO,
                ..Default::default()
            },
            "aging",
        );
        check(
            HermesConfig {
                probe_interval: Time::ZERO,
                ..Default::default()
            },
            "probe_interval",
        );
        check(
            HermesConfig {
                probe_priority: 0,
                ..Default::default()
            },
            "probe_priority",
        );
        check(
            HermesConfig {
                fail_timeouts: 0,
                ..Default::default()
            },
            "fail_timeouts",
        );
        check(
            HermesConfig {
                rtt_low: RttThreshold::Queue(Bytes(200_000)),
                ..Default::default()
            },
            "rtt_high",
        );
        assert_eq!(HermesConfig::default().validate(), Ok(()));
    }
}
