//! FLB (fine-grained load balancing against micro-bursts): the sender splits each flow into
//! flowlets, cuts a flowlet short when the flow sends a burst, and puts each new flowlet on a
//! non-congested path whose probed delay cannot make its packets overtake the flow's packets
//! still in flight. Host-side; written for lossy TCP fabrics. See `docs/schemes/flb.md`.
//!
//! The paper gives its three algorithms as figures whose text is missing, so every rule below
//! is a reconstruction from its prose (the choices are listed on the scheme's page):
//!
//! * **Flowlet table** (the paper's Fig. 5): one entry per flow with `valid`, `age` and a
//!   path `offset` in 0..64. A packet of a valid entry sets `age` = 0 and keeps `offset`; a
//!   packet of an invalid entry validates it and takes a new `offset`. Every `flowlet_period`
//!   the table is swept: `age` = 1 clears `valid`, else `age` becomes 1, so a gap of one to two
//!   periods starts a new flowlet. The path is `offset mod n` of the `n` paths between the two
//!   ToRs, sent as the path tag (the paper adds the offset to the TCP source port). The sweeps
//!   run on the grid of multiples of `flowlet_period`; the entry is evaluated when a packet
//!   comes (two sweeps since its last packet: invalid), which is what a periodic sweep does.
//! * **Probing** (Alg. 1): while a host has flows to a ToR it sends a probe on every path to
//!   that ToR every `probe_interval`. `D(q)` is the latest one-way delay of path `q` (the
//!   paper's receiver sends the probes back over every path and ranks paths by arrival order:
//!   delays of one direction, compared across paths); `base(q)` the least seen. Path `q` is
//!   **congested** if `D(q) > base(q) + d_cong`, or if a probe on it has gone unanswered for
//!   `probe_timeout` with no later one answered (lost: the paper's lost probe removes its path).
//!   A path's delay is used while its latest reply is younger than `probe_timeout`.
//! * **Burst cut-over** (Alg. 2): a flow that sent more than `burst_bytes` within the current
//!   `monitor_period` window starts a new flowlet with its next packet, gap or not.
//! * **Path choice for a new flowlet** (Alg. 3), also run when the flow's current path becomes
//!   congested (the paper's "current path is congested or kicked out"): with `p` the flow's
//!   current path and `g` the time since its last packet, the eligible paths are the measured,
//!   non-congested `q` with `D(p) − D(q) ≤ g` (the reorder filter: `q` cannot deliver before
//!   what is still in flight on `p`), and for a burst cut-over `q ≠ p` (the cut-over moves the
//!   burst's next part to another path); the one with the least `D` is taken, ties at random.
//!   None eligible: the flow stays on `p`. No delay known yet on any path: a flowlet that
//!   starts after a gap (or the first) takes a random `offset`, as the flowlet table draws it
//!   (the flowlet period covers the paths' delay spread); a cut-over or a congested path
//!   without a gap keeps `p`, since no path is cleared by the reorder filter (with the filter
//!   off, it takes the random offset too).
//!
//! `mode = "probe_clocked"` reads Alg. 1 literally instead: each probe reply that reaches the
//! sender releases one data packet of the pair's flows on the probe's path (the flowlet table,
//! cut-over and filter unused); a flow ready to send waits for a reply.
//!
//! Not modelled: the receiver-driven probe direction (probes here go sender to
//! receiver on the data's direction, and the one-way delay is read from exact host clocks),
//! hash collisions in the flowlet table, the TTL bookkeeping.

use super::host::{switch_side, FlowInfo, HostAction, HostCtx, HostFabric, HostScheme, ProbeEcho};
use super::{Capabilities, Counters, LbFabric, SchemeConfig, SwitchScheme};
use crate::check::check_positive_time;
use crate::units::{Bytes, Time};
use rand::Rng as _;
use serde::{Deserialize, Serialize};

#[cfg(test)]
mod tests;

/// FLB's parameters (`[lb]` with `scheme = "flb"`). The paper gives none but the 0-63 offset
/// range and the 25 µs burst-sampling interval; the defaults are proposals for its 10 Gbps
/// fabric with 100 µs and 300 µs paths (`docs/schemes/flb.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FlbConfig {
    /// Period of the flowlet table's aging sweep: a gap of one to two periods starts a flowlet
    /// (default 250 µs, above the 200 µs one-way difference between good and bad paths).
    pub flowlet_period: Time,
    /// Time between two probe rounds of a sender towards a destination ToR (default 100 µs).
    pub probe_interval: Time,
    /// A probe unanswered for this long marks its path lost (default 1.2 ms: two RTTs of the
    /// paper's 300 µs bad paths).
    pub probe_timeout: Time,
    /// Queueing delay above a path's base delay that makes it congested (default 60 µs: 75 KB
    /// at 10 Gbps).
    pub d_cong: Time,
    /// Window in which a flow's bytes are counted for the burst cut-over (default 25 µs, the
    /// paper's burst-sampling interval).
    pub monitor_period: Time,
    /// Bytes a flow may send within one `monitor_period` before its next packet starts a new
    /// flowlet (default 15,625 B: half of what 10 Gbps carries in 25 µs).
    pub burst_bytes: Bytes,
    /// The burst cut-over is on (off: flowlets start only after gaps and congestion).
    pub cut_over: bool,
    /// Which new flowlets the reorder filter screens (`docs/schemes/flb.md`, choice 7).
    pub reorder_filter: ReorderFilter,
    /// How data packets are sent: in flowlets (the default) or each on a probe's arrival.
    pub mode: FlbMode,
}

/// How FLB sends data packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlbMode {
    /// Flowlets: the transport sends when its window allows, and each packet takes its
    /// flowlet's path (the flowlet table, the cut-over and the probed path choice).
    #[default]
    Flowlet,
    /// The paper's Alg. 1 read literally: every probe reply that reaches the sender releases
    /// one data packet of a flow of its (sender, destination ToR) pair, on the probe's path;
    /// a flow ready to send without a reply to use waits for one. A pair sends at most one
    /// packet per path per `probe_interval`, a path whose probes are lost none. The flowlet
    /// table, the cut-over and the reorder filter play no part.
    ProbeClocked,
}

/// Which new flowlets the reorder filter (`D(p) − D(q) ≤ g`) screens. The paper says both
/// that FLB moves bursts onto non-congested paths and that it excludes paths that could
/// reorder; without a gap in the flow the two conflict, and the text does not say which wins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReorderFilter {
    /// Every new flowlet of a flow that has a path: after a gap, at a burst cut-over and off a
    /// congested path (no reordering from a move: a cut-over can only go to paths at least as
    /// slow as the current one, less the gap).
    #[default]
    EveryFlowlet,
    /// Only flowlets that start after a gap; a burst cut-over or a congested path moves to the
    /// least-delay non-congested path and accepts the reordering.
    AfterGap,
    /// No filter: every new flowlet takes the least-delay non-congested path.
    Off,
}

impl ReorderFilter {
    /// The filter screens a new flowlet started by `trigger`.
    fn screens(self, trigger: Trigger) -> bool {
        match self {
            ReorderFilter::EveryFlowlet => true,
            ReorderFilter::AfterGap => trigger == Trigger::Gap,
            ReorderFilter::Off => false,
        }
    }
}

impl Default for FlbConfig {
    fn default() -> Self {
        FlbConfig {
            flowlet_period: Time::from_us(250),
            probe_interval: Time::from_us(100),
            probe_timeout: Time::from_us(1200),
            d_cong: Time::from_us(60),
            monitor_period: Time::from_us(25),
            burst_bytes: Bytes(15_625),
            cut_over: true,
            reorder_filter: ReorderFilter::EveryFlowlet,
            mode: FlbMode::Flowlet,
        }
    }
}

impl SchemeConfig for FlbConfig {
    /// Checks the values; the message names the key under `[lb]` and an example.
    fn validate(&self) -> Result<(), String> {
        check_positive_time("lb.flowlet_period", self.flowlet_period, "250us")?;
        check_positive_time("lb.probe_interval", self.probe_interval, "100us")?;
        check_positive_time("lb.probe_timeout", self.probe_timeout, "1200us")?;
        check_positive_time("lb.monitor_period", self.monitor_period, "25us")?;
        if self.burst_bytes.0 == 0 {
            return Err(
                "lb.burst_bytes: must be above 0; give a size such as \"15625B\" (half a monitor period at line rate)"
                    .into(),
            );
        }
        if self.probe_timeout.ps() / self.probe_interval.ps() > 10_000 {
            return Err(format!(
                "lb.probe_timeout: {} is more than 10,000 probe intervals ({}); shorten it or lengthen lb.probe_interval",
                self.probe_timeout, self.probe_interval
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
        switch_side(fabric)
    }

    fn host_scheme(&self, flows: usize, fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        Some(Box::new(Flb::new(self, fabric, flows)))
    }
}

/// Range of the flowlet table's `offset` field.
const OFFSETS: u32 = 64;

/// A flow's flowlet-table entry and burst counter.
#[derive(Clone, Copy, Debug, Default)]
struct FlowEntry {
    /// The flow has sent a packet (the entry has a last packet time and a path).
    started: bool,
    /// Time of the flow's last packet.
    last_packet: Time,
    /// The entry's path offset (0..64); the path is `offset mod n`.
    offset: u8,
    /// Index of the current `monitor_period` window and the bytes sent in it since the
    /// window began or the last cut-over.
    window: u64,
    window_bytes: u64,
    /// Probe-clocked mode: the path (index) of the probe reply the flow's next packet uses.
    granted: Option<u8>,
    /// Probe-clocked mode: the flow waits for a probe reply, in its pair's queue.
    waiting: bool,
    /// The next flow in that queue (`NO_FLOW`: none).
    next_waiting: u32,
}

/// The end of a queue of waiting flows.
const NO_FLOW: u32 = u32::MAX;

/// A sender's probing towards one destination ToR.
#[derive(Clone, Copy, Debug)]
struct Pair {
    /// Flows of the sender to the ToR that have not finished.
    active_flows: u32,
    /// Host the probes go to (the destination of the flow that started the probing).
    probe_to: u32,
    priority: u8,
    /// Rounds sent so far (round `r` probes every path with number `r`).
    rounds: u32,
    /// Probe-clocked mode: the first and last flows waiting for a probe reply (`NO_FLOW`:
    /// none).
    wait_head: u32,
    wait_tail: u32,
}

impl Default for Pair {
    fn default() -> Self {
        Pair {
            active_flows: 0,
            probe_to: 0,
            priority: 0,
            rounds: 0,
            wait_head: NO_FLOW,
            wait_tail: NO_FLOW,
        }
    }
}

/// What a sender knows of one path to a destination ToR.
#[derive(Clone, Copy, Debug)]
struct PathView {
    /// Latest one-way delay and when its reply arrived (`replied` false: none yet).
    delay: Time,
    replied_at: Time,
    replied: bool,
    /// Least one-way delay seen.
    base: Time,
    /// 1 + the latest round answered on this path (0: none).
    answered: u32,
    /// Probe-clocked mode: a reply on this path has not released a packet yet, and when it
    /// arrived.
    credit: bool,
    credit_at: Time,
}

impl Default for PathView {
    fn default() -> Self {
        PathView {
            delay: Time::ZERO,
            replied_at: Time::ZERO,
            replied: false,
            base: Time(u64::MAX),
            answered: 0,
            credit: false,
            credit_at: Time::ZERO,
        }
    }
}

/// What a path is to the path choice at a given time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PathState {
    /// No recent reply.
    Unknown,
    /// Probe lost, or delay above base + `d_cong`.
    Congested,
    /// Measured and not congested, with this delay.
    Usable(Time),
}

/// Why a flow starts a new flowlet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    First,
    Gap,
    Burst,
    Congested,
}

/// FLB's state for every host of the run.
#[derive(Clone, Debug)]
pub struct Flb {
    cfg: FlbConfig,
    tors: u32,
    /// Most paths between two ToRs: the stride of `paths`.
    max_paths: usize,
    /// Rounds remembered per pair for the loss test (their send times).
    ring: usize,
    flows: Vec<FlowEntry>,
    /// By `node * tors + tor`.
    pairs: Vec<Pair>,
    /// By `(node * tors + tor) * max_paths + path index`.
    paths: Vec<PathView>,
    /// By `(node * tors + tor) * ring + round % ring`: send time of the round.
    round_sent: Vec<Time>,
    /// By node: the host's probe timer is set.
    timer_running: Vec<bool>,
    /// By node: pairs with active flows.
    active_pairs: Vec<u32>,
    stats: FlbStats,
}

/// Counters over all hosts (`flb.<name>` in the run's scheme counters): path choices by
/// trigger (a congested current path asks again at every packet until it clears or another
/// path is eligible), their outcomes, and probes sent.
#[derive(Clone, Copy, Debug, Default)]
struct FlbStats {
    choices_first: u64,
    choices_gap: u64,
    choices_burst: u64,
    choices_congested: u64,
    path_changes: u64,
    random_offsets: u64,
    none_eligible: u64,
    refused_by_reorder_filter: u64,
    probes: u64,
    clocked_packets: u64,
    holds: u64,
}

impl Flb {
    pub fn new(cfg: &FlbConfig, fabric: &HostFabric, flows: usize) -> Flb {
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let tors = fabric.tors;
        let max_paths = (0..tors)
            .flat_map(|a| (0..tors).map(move |b| (a, b)))
            .map(|(a, b)| fabric.tor_paths(a, b).len())
            .max()
            .unwrap_or(1);
        // Rounds of a pair are at least one interval apart, so this many span more than the
        // timeout: a round older than the ring is past it.
        let ring = (cfg.probe_timeout.ps().div_ceil(cfg.probe_interval.ps()) + 2) as usize;
        let nodes = fabric.nodes as usize;
        let pairs = nodes * tors as usize;
        Flb {
            cfg: cfg.clone(),
            tors,
            max_paths,
            ring,
            flows: vec![FlowEntry::default(); flows],
            pairs: vec![Pair::default(); pairs],
            paths: vec![PathView::default(); pairs * max_paths],
            round_sent: vec![Time::ZERO; pairs * ring],
            timer_running: vec![false; nodes],
            active_pairs: vec![0; nodes],
            stats: FlbStats::default(),
        }
    }

    fn pair_index(&self, node: u32, tor: u32) -> usize {
        (node * self.tors + tor) as usize
    }

    fn path_index(&self, pair: usize, i: usize) -> usize {
        pair * self.max_paths + i
    }

    /// The state of path `i` of pair `pair` at `now`.
    fn state(&self, pair: usize, i: usize, now: Time) -> PathState {
        let view = &self.paths[self.path_index(pair, i)];
        if self.lost(pair, view, now) {
            return PathState::Congested;
        }
        if !view.replied || now.saturating_sub(view.replied_at) >= self.cfg.probe_timeout {
            return PathState::Unknown;
        }
        if view.delay > view.base + self.cfg.d_cong {
            PathState::Congested
        } else {
            PathState::Usable(view.delay)
        }
    }

    /// A probe on the path has gone unanswered for `probe_timeout`, and no later one was
    /// answered.
    fn lost(&self, pair: usize, view: &PathView, now: Time) -> bool {
        let sent = self.pairs[pair].rounds;
        let oldest_unanswered = view.answered;
        if oldest_unanswered >= sent {
            return false;
        }
        if (sent - oldest_unanswered) as usize > self.ring {
            return true;
        }
        let at = self.round_sent[pair * self.ring + oldest_unanswered as usize % self.ring];
        at + self.cfg.probe_timeout <= now
    }

    /// Sends round `rounds` of host `node`'s probes to ToR `tor` on every path.
    fn probe_round(&mut self, ctx: &mut HostCtx, tor: u32) {
        let pair = self.pair_index(ctx.host, tor);
        let a = ctx.fabric.tor(ctx.host);
        let paths = ctx.fabric.tor_paths(a, tor);
        let Pair {
            rounds,
            probe_to,
            priority,
            ..
        } = self.pairs[pair];
        self.round_sent[pair * self.ring + rounds as usize % self.ring] = ctx.now;
        self.pairs[pair].rounds = rounds + 1;
        for (i, &tag) in paths.iter().enumerate() {
            ctx.actions.push(HostAction::SendProbe {
                to_host: probe_to,
                path_tag: tag,
                priority,
                // Path index in the low byte, the round's low 24 bits above it.
                meta: (rounds << 8) | i as u32,
            });
        }
        self.stats.probes += paths.len() as u64;
    }

    /// The path (index) for a new flowlet of a flow on `p` (if any), `gap` after its last
    /// packet, started by `trigger`. A burst cut-over looks for another path than `p`. Ties
    /// in delay are broken at random.
    #[allow(clippy::too_many_arguments)]
    fn choose(
        &mut self,
        rng: &mut crate::engine::Rng,
        pair: usize,
        n: usize,
        p: Option<usize>,
        trigger: Trigger,
        gap: Time,
        now: Time,
    ) -> Choice {
        let move_off = trigger == Trigger::Burst;
        let filtered = self.cfg.reorder_filter.screens(trigger);
        let d_p = p.and_then(|p| match self.state(pair, p, now) {
            PathState::Usable(d) => Some(d),
            PathState::Congested => {
                let view = &self.paths[self.path_index(pair, p)];
                view.replied.then_some(view.delay)
            }
            PathState::Unknown => None,
        });
        let mut best: Option<(Time, usize)> = None;
        let mut ties = 0u32;
        let mut any_known = false;
        let mut refused = false;
        for q in 0..n {
            let state = self.state(pair, q, now);
            any_known |= state != PathState::Unknown;
            let PathState::Usable(d_q) = state else {
                continue;
            };
            if Some(q) == p {
                if move_off {
                    continue;
                }
            } else if filtered && d_p.is_some_and(|d_p| d_p > d_q + gap) {
                refused = true;
                continue;
            }
            match best {
                Some((d, _)) if d_q > d => {}
                Some((d, _)) if d_q == d => {
                    // Reservoir sampling: each of the tied paths is kept with equal chance.
                    ties += 1;
                    if rng.gen_range(0..ties) == 0 {
                        best = Some((d_q, q));
                    }
                }
                _ => {
                    best = Some((d_q, q));
                    ties = 1;
                }
            }
        }
        if refused {
            self.stats.refused_by_reorder_filter += 1;
        }
        match (best, p) {
            (Some((_, q)), _) => Choice::Path(q),
            // Without a gap (a cut-over, a congested path), no path is safe to move to
            // unless probes clear it.
            (None, Some(p)) if any_known || (filtered && move_off_now(trigger)) => Choice::Keep(p),
            (None, _) => Choice::Random,
        }
    }
}

impl Flb {
    /// Puts flow `f` at the end of pair `pair`'s queue of flows waiting for a probe reply.
    fn enqueue_waiting(&mut self, pair: usize, f: u32) {
        let entry = &mut self.flows[f as usize];
        entry.waiting = true;
        entry.next_waiting = NO_FLOW;
        match self.pairs[pair].wait_tail {
            NO_FLOW => self.pairs[pair].wait_head = f,
            tail => self.flows[tail as usize].next_waiting = f,
        }
        self.pairs[pair].wait_tail = f;
    }

    /// Takes the first flow off pair `pair`'s queue of waiting flows.
    fn dequeue_waiting(&mut self, pair: usize) -> Option<u32> {
        let head = self.pairs[pair].wait_head;
        if head == NO_FLOW {
            return None;
        }
        let entry = &mut self.flows[head as usize];
        entry.waiting = false;
        self.pairs[pair].wait_head = entry.next_waiting;
        if entry.next_waiting == NO_FLOW {
            self.pairs[pair].wait_tail = NO_FLOW;
        }
        Some(head)
    }
}

/// A trigger without a gap in the flow's packets: the cut-over and the congested path.
fn move_off_now(trigger: Trigger) -> bool {
    matches!(trigger, Trigger::Burst | Trigger::Congested)
}

/// The outcome of the path choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    Path(usize),
    Keep(usize),
    Random,
}

impl HostScheme for Flb {
    fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, _seq: u64, payload: u32) -> u32 {
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        let n = paths.len();
        if n == 1 {
            return paths[0];
        }
        if self.cfg.mode == FlbMode::ProbeClocked {
            let i = self.flows[flow.id as usize].granted.take();
            self.stats.clocked_packets += 1;
            return paths[i.expect("may_send granted a probe reply") as usize];
        }
        let now = ctx.now;
        let pair = self.pair_index(flow.src, ctx.fabric.tor(flow.dst));
        let entry = self.flows[flow.id as usize];
        let current = entry.started.then_some(entry.offset as usize % n);
        let window = now.ps() / self.cfg.monitor_period.ps();
        let window_bytes = if entry.started && entry.window == window {
            entry.window_bytes
        } else {
            0
        };
        let period = self.cfg.flowlet_period.ps();
        let trigger = match current {
            None => Some(Trigger::First),
            Some(_) if now.ps() / period - entry.last_packet.ps() / period >= 2 => {
                Some(Trigger::Gap)
            }
            Some(_) if self.cfg.cut_over && window_bytes > self.cfg.burst_bytes.0 => {
                Some(Trigger::Burst)
            }
            Some(p) if self.state(pair, p, now) == PathState::Congested => Some(Trigger::Congested),
            Some(_) => None,
        };
        let mut offset = entry.offset;
        let mut window_bytes = window_bytes;
        if let Some(trigger) = trigger {
            match trigger {
                Trigger::First => self.stats.choices_first += 1,
                Trigger::Gap => self.stats.choices_gap += 1,
                Trigger::Burst => self.stats.choices_burst += 1,
                Trigger::Congested => self.stats.choices_congested += 1,
            }
            if trigger == Trigger::Burst {
                window_bytes = 0;
            }
            let gap = now.saturating_sub(entry.last_packet);
            match self.choose(ctx.rng, pair, n, current, trigger, gap, now) {
                Choice::Path(q) => offset = q as u8,
                Choice::Keep(_) => self.stats.none_eligible += 1,
                Choice::Random => {
                    self.stats.random_offsets += 1;
                    offset = ctx.rng.gen_range(0..OFFSETS) as u8;
                }
            }
            if current.is_some_and(|p| p != offset as usize % n) {
                self.stats.path_changes += 1;
            }
        }
        self.flows[flow.id as usize] = FlowEntry {
            started: true,
            last_packet: now,
            offset,
            window,
            window_bytes: window_bytes + payload as u64,
            ..entry
        };
        paths[offset as usize % n]
    }

    fn clocks_sending(&self) -> bool {
        self.cfg.mode == FlbMode::ProbeClocked
    }

    /// Probe-clocked mode: the flow may send if it holds a probe reply's credit or can take
    /// the one that arrived first among its pair's unused ones; otherwise it joins its pair's
    /// queue and waits for the next reply. In the other modes (not asked: `clocks_sending`)
    /// every flow may send.
    fn may_send(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) -> bool {
        let n = ctx.fabric.paths(flow.src, flow.dst).len();
        let id = flow.id as usize;
        if !self.clocks_sending() || n == 1 || self.flows[id].granted.is_some() {
            return true;
        }
        let pair = self.pair_index(flow.src, ctx.fabric.tor(flow.dst));
        let first_credit = (0..n)
            .map(|i| (i, self.paths[self.path_index(pair, i)]))
            .filter(|(_, view)| view.credit)
            .min_by_key(|(_, view)| view.credit_at)
            .map(|(i, _)| i);
        if let Some(i) = first_credit {
            let k = self.path_index(pair, i);
            self.paths[k].credit = false;
            self.flows[id].granted = Some(i as u8);
            return true;
        }
        self.stats.holds += 1;
        if !self.flows[id].waiting {
            self.enqueue_waiting(pair, flow.id);
        }
        false
    }

    fn on_flow_start(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let (a, b) = (ctx.fabric.tor(flow.src), ctx.fabric.tor(flow.dst));
        if a == b || ctx.fabric.tor_paths(a, b).len() < 2 {
            return;
        }
        let node = ctx.host;
        let pair = self.pair_index(node, b);
        self.pairs[pair].active_flows += 1;
        if self.pairs[pair].active_flows > 1 {
            return;
        }
        self.pairs[pair].probe_to = flow.dst;
        self.pairs[pair].priority = flow.priority;
        self.active_pairs[node as usize] += 1;
        // A running timer probes the pair at its next tick (within one interval); otherwise
        // the pair is probed now and the timer starts.
        if !self.timer_running[node as usize] {
            self.timer_running[node as usize] = true;
            self.probe_round(ctx, b);
            ctx.actions.push(HostAction::SetTimer {
                host: node,
                at: ctx.now + self.cfg.probe_interval,
                token: 0,
            });
        }
    }

    fn on_flow_end(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let (a, b) = (ctx.fabric.tor(flow.src), ctx.fabric.tor(flow.dst));
        if a == b || ctx.fabric.tor_paths(a, b).len() < 2 {
            return;
        }
        let pair = self.pair_index(ctx.host, b);
        self.pairs[pair].active_flows -= 1;
        if self.pairs[pair].active_flows == 0 {
            self.active_pairs[ctx.host as usize] -= 1;
        }
    }

    /// The probe tick of host `ctx.host`: a round to every ToR it has flows to.
    fn on_timer(&mut self, ctx: &mut HostCtx, _token: u64) {
        let node = ctx.host;
        if self.active_pairs[node as usize] == 0 {
            self.timer_running[node as usize] = false;
            return;
        }
        for tor in 0..self.tors {
            if self.pairs[self.pair_index(node, tor)].active_flows > 0 {
                self.probe_round(ctx, tor);
            }
        }
        ctx.actions.push(HostAction::SetTimer {
            host: node,
            at: ctx.now + self.cfg.probe_interval,
            token: 0,
        });
    }

    fn on_probe_reply(&mut self, ctx: &mut HostCtx, echo: &ProbeEcho) {
        let pair = self.pair_index(ctx.host, ctx.fabric.tor(echo.to_host));
        let i = (echo.meta & 0xff) as usize;
        // The round's full number: the latest sent whose low 24 bits match.
        let sent = self.pairs[pair].rounds;
        let round = sent.wrapping_sub(1).wrapping_sub(
            ((sent.wrapping_sub(1) & 0xff_ffff).wrapping_sub(echo.meta >> 8)) & 0xff_ffff,
        );
        let k = self.path_index(pair, i);
        let view = &mut self.paths[k];
        view.answered = view.answered.max(round + 1);
        view.delay = echo.one_way;
        view.replied_at = ctx.now;
        view.replied = true;
        view.base = view.base.min(echo.one_way);
        if self.cfg.mode == FlbMode::ProbeClocked {
            match self.dequeue_waiting(pair) {
                Some(f) => {
                    self.flows[f as usize].granted = Some(i as u8);
                    ctx.actions.push(HostAction::Release { flow: f });
                }
                // At most one unused reply per path, dated by the first.
                None if !self.paths[k].credit => {
                    let view = &mut self.paths[k];
                    view.credit = true;
                    view.credit_at = ctx.now;
                }
                None => {}
            }
        }
    }

    fn counters(&self, out: &mut Counters) {
        let s = &self.stats;
        out.add("choices_first", s.choices_first);
        out.add("choices_gap", s.choices_gap);
        out.add("choices_burst", s.choices_burst);
        out.add("choices_congested", s.choices_congested);
        out.add("path_changes", s.path_changes);
        out.add("random_offsets", s.random_offsets);
        out.add("none_eligible", s.none_eligible);
        out.add("refused_by_reorder_filter", s.refused_by_reorder_filter);
        out.add("probes", s.probes);
        out.add("clocked_packets", s.clocked_packets);
        out.add("holds", s.holds);
    }

    /// At a host, per destination ToR `b` and path index `i` (key `b << 16 | i`), for the pairs
    /// the host probes or has probed: `path_delay_us` (the latest one-way delay `D`),
    /// `path_base_us` (the least seen) and `path_state` (0 usable, 1 congested or lost, 2 no
    /// recent reply).
    fn samples(
        &self,
        now: Time,
        host: u32,
        fabric: &HostFabric,
        emit: &mut dyn FnMut(&'static str, u32, f64),
    ) {
        if host >= fabric.nodes || fabric.tor_of[host as usize] == super::NO_TOR {
            return;
        }
        let a = fabric.tor(host);
        for b in (0..self.tors).filter(|&b| b != a) {
            let pair = self.pair_index(host, b);
            if self.pairs[pair].rounds == 0 {
                continue;
            }
            for i in 0..fabric.tor_paths(a, b).len() {
                let view = &self.paths[self.path_index(pair, i)];
                let key = b << 16 | i as u32;
                if view.replied {
                    emit("path_delay_us", key, view.delay.ps() as f64 / 1e6);
                    emit("path_base_us", key, view.base.ps() as f64 / 1e6);
                }
                let state = match self.state(pair, i, now) {
                    PathState::Usable(_) => 0.0,
                    PathState::Congested => 1.0,
                    PathState::Unknown => 2.0,
                };
                emit("path_state", key, state);
            }
        }
    }
}
