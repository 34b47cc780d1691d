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

use super::host::{HostFabric, HostScheme};
use super::{
    pinned_choice, Capabilities, Counters, Ingress, Inner, LbConfig, LbCtx, LbFabric, PortDir,
    Resequencing, RoutedMessage, SchemeConfig, SwitchScheme,
};
use crate::engine::mix64;
use crate::metrics::AlertRecord;
use crate::packet::{LbHeader, Packet};
use crate::port::N_PRIO;
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};

/// How a PFC warning ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningEnd {
    /// The warning switch sends a clearing CNM once PFC is no longer predicted.
    #[default]
    Clear,
    /// The upstream switch forgets a warning `warning_ttl` after the last CNM; the warning
    /// switch refreshes it every `warning_ttl / 2` while PFC is still predicted.
    Expiry,
}

/// How path RTTs are measured between leaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttMeasurement {
    /// The prototype's (section V): the source leaf writes the send time into the header of a
    /// data packet it sends on the uplink, the destination leaf returns it on the next packet
    /// (data, ACK or NACK) it sends towards the source leaf, by any path. No extra packets.
    #[default]
    Piggyback,
    /// A 64-byte probe in the data priority per measurement, echoed by the destination leaf:
    /// paths are measured even with no traffic back, at the cost of bandwidth and buffer.
    Probe,
}

/// RLB parameters (`[lb]` with `scheme = "rlb"`, the wrapped scheme in `[lb.inner]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RlbConfig {
    /// Δt: sampling interval of the ingress queues (default 0: the smallest delay of the
    /// switch's links to other switches, the paper's "link delay 2 us"). Valid: 0..=1ms.
    pub interval: Time,
    /// A warning is sent when the queue, growing as over the last interval, would reach the
    /// XOFF threshold within this time (default 0: interval + 2 x the ingress link's delay:
    /// a sample may be one interval late, the CNM takes one link delay to arrive, and what is
    /// on the wire still arrives, eq. 1). Valid: 0..=10ms.
    pub horizon: Time,
    /// Q_th: no warning below this ingress use (default unset: rate x delay of the ingress
    /// link, the conservative lower end d x C of eq. 3). Valid: any.
    pub q_min: Option<Bytes>,
    /// How a warning ends (default `clear`: a clearing CNM; `expiry`: after `warning_ttl`).
    pub warning_end: WarningEnd,
    /// Lifetime of a warning without refresh in `expiry` mode (default 0: 4 x interval).
    /// Valid: 0..=100ms.
    pub warning_ttl: Time,
    /// Recirculate packets whose best path is warned when the RTT gap exceeds t_rc (default
    /// true; false: "reroute only", Fig. 17). True needs `[switch.loopback]`.
    pub recirculation: bool,
    /// RLB*: N_rc per round (eq. 4-5), the cumulative-delay rule (eq. 6) and failure
    /// detection (Algorithm 2) (default false: RLB).
    pub adaptive: bool,
    /// Most recirculations of one packet at one switch, in both modes (default 8; not in the
    /// paper, which stops only when Algorithm 1's condition fails). Valid: 1..=255.
    pub max_recirculations: u32,
    /// Algorithm 2: a round whose packets recirculated more than this many times on average
    /// points at a suspect egress (default 3; the paper gives no value). Valid: above 0 and
    /// below `max_recirculations`.
    pub fault_threshold: f64,
    /// Least time between two RTT measurements (stamps or probes) of one (destination ToR,
    /// uplink) (default 0: the base RTT to that ToR, the prototype's "one base RTT").
    /// Valid: 0..=10ms.
    pub rtt_period: Time,
    /// How path RTTs are measured (default `piggyback`, the prototype's; `probe`: probe
    /// packets, the measurement of earlier versions).
    pub rtt_measurement: RttMeasurement,
    /// Entries of the per-switch table of recirculating packets (default 4096).
    /// Valid: 1..=16,777,216.
    pub table_size: u32,
    /// The inner scheme's remembered port follows Algorithm 1's reroutes: DRILL's remembered
    /// port for the destination, LetFlow's flowlet port (default false: the inner scheme keeps
    /// its own choice and RLB only changes the packet's egress). True needs `drill` or
    /// `letflow` inside.
    pub inner_follows: bool,
    /// The wrapped scheme (default DRILL).
    #[serde(deserialize_with = "crate::tagged::nested")]
    pub inner: Box<LbConfig>,
}

impl Default for RlbConfig {
    fn default() -> Self {
        RlbConfig {
            interval: Time::ZERO,
            horizon: Time::ZERO,
            q_min: None,
            warning_end: WarningEnd::Clear,
            warning_ttl: Time::ZERO,
            recirculation: true,
            adaptive: false,
            max_recirculations: 8,
            fault_threshold: 3.0,
            rtt_period: Time::ZERO,
            rtt_measurement: RttMeasurement::Piggyback,
            table_size: 4096,
            inner_follows: false,
            inner: Box::new(LbConfig::Drill(super::DrillConfig::default())),
        }
    }
}

impl RlbConfig {
    /// Whether path RTTs ride on packets (`rtt_measurement = "piggyback"`), in RLB's scheme
    /// word.
    pub fn piggybacks(&self) -> bool {
        self.rtt_measurement == RttMeasurement::Piggyback
    }
}

impl SchemeConfig for RlbConfig {
    /// Checks the values; the message names the key under `[lb]` (`lb.inner.<key>` for the
    /// wrapped scheme's) and the valid range.
    fn validate(&self) -> Result<(), String> {
        if self.inner.capabilities().wrapper {
            return Err(format!(
                "lb.inner.scheme: \"{}\" wraps a scheme itself and cannot be wrapped; choose a switch-side scheme (ecmp, rps, drb, letflow, drill, conga, hula, conweave)",
                self.inner.name()
            ));
        }
        self.inner
            .validate()
            .map_err(|e| match e.strip_prefix("lb.") {
                Some(rest) => format!("lb.inner.{rest}"),
                None => format!("lb.inner: {e}"),
            })?;
        for (key, t, hi, dflt) in [
            (
                "interval",
                self.interval,
                Time::from_ms(1),
                "0s (the link delay)",
            ),
            ("horizon", self.horizon, Time::from_ms(10), "0s (auto)"),
            (
                "warning_ttl",
                self.warning_ttl,
                Time::from_ms(100),
                "0s (4 x interval)",
            ),
            (
                "rtt_period",
                self.rtt_period,
                Time::from_ms(10),
                "0s (base RTT)",
            ),
        ] {
            if t > hi {
                return Err(format!(
                    "lb.{key}: {t} is out of range; use 0s..={hi} (RLB default {dflt})"
                ));
            }
        }
        if !(1..=255).contains(&self.max_recirculations) {
            return Err(format!(
                "lb.max_recirculations: {} is out of range; use 1..=255 (RLB default 8)",
                self.max_recirculations
            ));
        }
        if !(self.fault_threshold > 0.0 && self.fault_threshold < self.max_recirculations as f64) {
            return Err(format!(
                "lb.fault_threshold: {} is out of range; use a value above 0 and below lb.max_recirculations ({}) (RLB default 3)",
                self.fault_threshold, self.max_recirculations
            ));
        }
        let remembers = match &*self.inner {
            LbConfig::Drill(d) => d.m > 0,
            LbConfig::LetFlow(_) => true,
            _ => false,
        };
        if self.inner_follows && !remembers {
            return Err(format!(
                "lb.inner_follows: the inner scheme \"{}\" remembers no port to follow a reroute; use it with lb.inner.scheme = \"drill\" (lb.inner.m above 0) or \"letflow\", or set it to false",
                self.inner.name()
            ));
        }
        super::check_table_size(self.table_size)
    }

    /// RLB's own needs, plus its inner scheme's (it runs the inner scheme's hooks).
    fn capabilities(&self) -> Capabilities {
        let inner = self.inner.capabilities();
        Capabilities {
            fabric: true,
            pinned: true,
            loopback: self.recirculation,
            ingress: inner.ingress,
            dequeue: true,
            acks: inner.acks || self.piggybacks(),
            scheme_word: self.piggybacks(),
            reorder_queues_per_port: inner.reorder_queues_per_port,
            hosts: inner.hosts,
            wrapper: true,
            alerts: true,
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Rlb::new(self, fabric))
    }

    /// RLB over a host-side scheme: the hosts run it, RLB takes their paths as input.
    fn host_scheme(&self, flows: usize, fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        self.inner.scheme().host_scheme(flows, fabric)
    }

    fn resequencing(&self) -> Option<Resequencing> {
        self.inner.scheme().resequencing()
    }

    fn inner(&self) -> Option<&LbConfig> {
        Some(&self.inner)
    }
}

/// Kinds of RLB messages (`meta` bits 0..2).
const MSG_CNM: u32 = 1;
const MSG_PROBE: u32 = 2;
const MSG_ECHO: u32 = 3;
/// Timer tokens (with [`OUTER_TIMER`]).
const TICK: u64 = 1;
const ROUND: u64 = 2;
/// Probe timestamps: nanoseconds, 22 bits (wrap after 4.19 ms, far above any RTT).
const TS_BITS: u32 = 22;
const TS_MASK: u32 = (1 << TS_BITS) - 1;
/// A piggybacked timestamp (half of [`Stamps`]): bit 31 set, the source leaf's uplink index in
/// bits 22..30, the send time in bits 0..22 (nanoseconds, wrapping).
const STAMP_VALID: u32 = 1 << 31;
/// A destination leaf drops a timestamp it could not return within this time (half the
/// timestamp's wrap: an older one could be mistaken for a recent one).
const STAMP_STALE: Time = Time::from_ps(((1u64 << TS_BITS) / 2) * 1_000);

/// RLB's scheme word on a packet ([`Capabilities::scheme_word`]): the timestamps it carries
/// (0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    /// A timestamp on its way from the source leaf to the destination leaf.
    pub stamp: u32,
    /// A timestamp on its way back, piggybacked by the destination leaf.
    pub echo: u32,
}

impl Stamps {
    /// The timestamps a scheme word carries.
    pub fn of(word: u64) -> Stamps {
        Stamps {
            stamp: word as u32,
            echo: (word >> 32) as u32,
        }
    }

    /// The scheme word carrying these timestamps.
    pub fn word(self) -> u64 {
        self.stamp as u64 | (self.echo as u64) << 32
    }
}

/// The timestamp of uplink `up` taken at `now`.
#[inline]
fn stamp_word(up: u8, now: Time) -> u32 {
    STAMP_VALID | (up as u32) << TS_BITS | (now.ps() / 1_000) as u32 & TS_MASK
}
/// Candidates considered by Algorithm 1 (bits of the "tried" mask).
const MAX_TRIED: usize = 64;
/// Largest candidate set filtered for removed egresses on the stack.
const MAX_CANDIDATES: usize = 256;

/// A CNM's `meta`: kind, warn (1) or clear (0), priority, the warning switch's port id.
pub fn cnm_meta(warn: bool, prio: u8, port: u16) -> u32 {
    MSG_CNM | (warn as u32) << 2 | (prio as u32 & 7) << 3 | (port as u32) << 8
}

/// Prediction state of one watched (ingress port, priority).
#[derive(Clone, Copy, Debug, Default)]
struct Watch {
    last: u64,
    warning: bool,
    sent: Time,
}

/// RTT state of one (destination ToR, uplink).
#[derive(Clone, Copy, Debug, Default)]
struct PathRtt {
    /// Latest measured RTT (0: none yet; the base RTT stands in).
    sample: Time,
    /// Last probe sent (`None`: never).
    last_probe: Option<Time>,
    /// Send time of the oldest probe not yet answered, if any.
    unanswered_since: Option<Time>,
}

/// A timestamp the destination leaf holds until a packet towards its source leaf leaves.
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    /// The stamp word (0: none held).
    word: u32,
    /// When it arrived here.
    at: Time,
}

/// A recirculating packet.
#[derive(Clone, Copy, Debug, Default)]
struct Recirc {
    used: bool,
    flow: u32,
    seq: u64,
    count: u8,
    first_at: Time,
    gap: Time,
}

/// State of the current RLB* round.
#[derive(Clone, Debug, Default)]
struct Round {
    active: bool,
    n_rc: u32,
    t_rc: Time,
    /// Loopback queue bytes at the round's start (its growth sets N_rc).
    queue_at_start: u64,
    /// Packets that left the recirculation loop this round, and their recirculations.
    finished: u64,
    finished_sum: u64,
    /// Recirculations this round, and those charged to each egress.
    recirculated: u64,
    per_port: Vec<u32>,
    suspect: Option<u16>,
    suspect_rounds: u32,
    /// Rounds started since the run began.
    started: u64,
}

/// What RLB counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RlbCounters {
    pub cnm_warnings: u64,
    pub cnm_clears: u64,
    pub recirculations: u64,
    pub reroutes: u64,
    /// Recirculations refused by N_rc or `max_recirculations`.
    pub refused_limit: u64,
    /// Recirculations refused by the cumulative-delay rule (eq. 6).
    pub refused_delay: u64,
    pub probes: u64,
    pub echoes: u64,
    /// Timestamps written into data packets (piggyback mode), and those that came back.
    pub stamps: u64,
    pub stamp_returns: u64,
}

/// What Algorithm 1 decided for a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Forward on this egress (`rerouted`: not the inner scheme's choice).
    Forward { port: u16, rerouted: bool },
    /// Recirculate; `charged` is the egress whose RTT gap caused it (`None` when every
    /// candidate is warned: congestion everywhere, nobody's fault), `gap` that gap.
    Recirculate { charged: Option<u16>, gap: Time },
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
    paths: Vec<PathRtt>,
    /// RTTs ride on packets (`rtt_measurement = "piggyback"`), not on probes.
    piggyback: bool,
    /// The inner scheme sees ACKs in `on_dequeue` (RLB shows it only those it asked for).
    inner_acks: bool,
    /// Piggyback, at the destination leaf: per (source ToR, source uplink), the timestamp held
    /// for the way back, and per source ToR how many are held.
    held: Vec<Held>,
    held_count: Vec<u32>,
    /// Piggyback, at the source leaf: per destination ToR, the send time of the latest-sent
    /// timestamp that came back (evidence that its packets do come back).
    answered_sent: Vec<Time>,
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
        let per_tor = |n: usize| {
            if piggyback {
                n * fabric.tors as usize
            } else {
                0
            }
        };
        Rlb {
            piggyback,
            inner_acks: inner.capabilities().acks,
            held: vec![Held::default(); per_tor(n_up)],
            held_count: vec![0; per_tor(1)],
            answered_sent: vec![Time::ZERO; per_tor(1)],
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
            paths: vec![
                PathRtt::default();
                if n_up > 0 {
                    fabric.tors as usize * n_up
                } else {
                    0
                }
            ],
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

    /// Piggyback, at a leaf's uplink `port`: a data packet to another ToR carries a timestamp
    /// of its path if one is due (at most one per `rtt_period` per (destination ToR,
    /// uplink)); any packet to another ToR carries back the oldest timestamp held for it.
    #[inline]
    fn piggyback_out(&mut self, now: Time, port: u16, pkt: &Packet, word: &mut u64) {
        let up = self.uplink_index[port as usize];
        if up == u8::MAX {
            return;
        }
        let Some(t) = self.dst_tor(pkt) else { return };
        let t = t as usize;
        let mut carried = Stamps::of(*word);
        if pkt.kind == crate::packet::PacketKind::Data && carried.stamp == 0 {
            let path = &mut self.paths[t * self.n_up + up as usize];
            if !path
                .last_probe
                .is_some_and(|at| now < at + self.rtt_period[t])
            {
                path.last_probe = Some(now);
                path.unanswered_since.get_or_insert(now);
                carried.stamp = stamp_word(up, now);
                self.counters.stamps += 1;
            }
        }
        if carried.echo == 0 && self.held_count[t] > 0 {
            let held = &mut self.held[t * self.n_up..(t + 1) * self.n_up];
            let mut oldest: Option<(Time, usize)> = None;
            for (i, h) in held.iter_mut().enumerate() {
                if h.word == 0 {
                    continue;
                }
                if now.saturating_sub(h.at) > STAMP_STALE {
                    h.word = 0;
                    self.held_count[t] -= 1;
                } else if oldest.map_or(true, |(at, _)| h.at < at) {
                    oldest = Some((h.at, i));
                }
            }
            if let Some((_, i)) = oldest {
                carried.echo = held[i].word;
                held[i].word = 0;
                self.held_count[t] -= 1;
            }
        }
        *word = carried.word();
    }

    /// Whether egress `port` carries a warning for priority `prio`.
    #[inline]
    pub fn warned(&self, port: u16, prio: u8, now: Time) -> bool {
        self.warned_until[port as usize * N_PRIO + prio as usize] > now
    }

    /// Whether the packet may not take egress `port` as it is (warned, or found faulty).
    #[inline]
    fn blocked(&self, port: u16, prio: u8, now: Time) -> bool {
        self.removed[port as usize] || self.warned(port, prio, now)
    }

    /// Whether this switch is warning its upstream about ingress (`port`, `prio`) now.
    pub fn warning_sent(&self, port: u16, prio: u8) -> bool {
        self.watch[port as usize * N_PRIO + prio as usize].warning
    }

    /// Whether egress `port` was found faulty (Algorithm 2) and is no longer chosen.
    pub fn is_removed(&self, port: u16) -> bool {
        self.removed[port as usize]
    }

    /// RLB*'s rounds as a test sees them: rounds started so far, the current round's t_rc
    /// (its length), and Algorithm 2's suspect egress with the rounds in a row it has topped.
    pub fn round_view(&self) -> (u64, Time, Option<(u16, u32)>) {
        let r = &self.round;
        (r.started, r.t_rc, r.suspect.map(|p| (p, r.suspect_rounds)))
    }

    /// The prediction module: one sample of every watched ingress queue. Returns whether
    /// any of them is in use or warned (sampling goes on).
    fn predict(&mut self, ctx: &mut LbCtx) -> bool {
        let Some(mmu) = ctx.mmu else { return false };
        let mut busy = false;
        let threshold = mmu.threshold();
        let interval = self.interval.ps() as u128;
        for &p in &self.watched {
            let port = p as usize;
            let horizon = self.horizon[port].ps() as u128;
            for prio in 1..N_PRIO as u8 {
                let used = mmu.ingress_use(port, prio);
                let w = &mut self.watch[port * N_PRIO + prio as usize];
                let prev = w.last;
                w.last = used;
                if used == 0 && prev == 0 && !w.warning {
                    continue;
                }
                busy = true;
                let growth = used.saturating_sub(prev) as u128;
                let projected = used as u128 + growth * horizon / interval;
                let danger = mmu.is_pausing(port, prio)
                    || (used >= self.q_min[port] && growth > 0 && projected >= threshold as u128);
                let refresh = self.warning_end == WarningEnd::Expiry
                    && ctx.now.saturating_sub(w.sent).ps() * 2 >= self.ttl.ps();
                let send = match (w.warning, danger) {
                    (false, true) => Some(true),
                    (true, true) if refresh => Some(true),
                    (true, false) if self.warning_end == WarningEnd::Clear => Some(false),
                    _ => None,
                };
                w.warning = danger;
                if let Some(warn) = send {
                    w.sent = ctx.now;
                    if warn {
                        self.counters.cnm_warnings += 1;
                    } else {
                        self.counters.cnm_clears += 1;
                    }
                    ctx.send_control(
                        p,
                        LbHeader {
                            path_tag: 0,
                            meta: cnm_meta(warn, prio, p),
                        },
                    );
                }
            }
        }
        busy
    }

    /// The measured RTT of egress `port` towards ToR `dst_tor` (0 where none is measured:
    /// upper tiers, intra-ToR traffic, ports that are not uplinks).
    pub fn rtt(&self, now: Time, dst_tor: Option<u32>, port: u16) -> Time {
        let (Some(t), up) = (dst_tor, self.uplink_index[port as usize]) else {
            return Time::ZERO;
        };
        if up == u8::MAX {
            return Time::ZERO;
        }
        let path = &self.paths[t as usize * self.n_up + up as usize];
        let sample = if path.sample > Time::ZERO {
            path.sample
        } else {
            self.base_rtt[t as usize]
        };
        match path.unanswered_since {
            // Piggybacked: silence is evidence only once a timestamp sent later, on another
            // path to that ToR, came back (a path without traffic back must not look slow).
            Some(since) if !self.piggyback || self.answered_sent[t as usize] > since => {
                sample.max(now.saturating_sub(since))
            }
            _ => sample,
        }
    }

    /// The latest RTT sample of egress `port` towards ToR `dst_tor` (`None`: not measured
    /// yet, or not an uplink of a ToR).
    pub fn measured_rtt(&self, dst_tor: u32, port: u16) -> Option<Time> {
        let up = *self.uplink_index.get(port as usize)?;
        if up == u8::MAX {
            return None;
        }
        let path = self.paths.get(dst_tor as usize * self.n_up + up as usize)?;
        (path.sample > Time::ZERO).then_some(path.sample)
    }

    /// Sets a measured RTT sample (unit tests).
    #[cfg(test)]
    fn set_rtt(&mut self, dst_tor: u32, port: u16, rtt: Time) {
        let up = self.uplink_index[port as usize] as usize;
        let path = &mut self.paths[dst_tor as usize * self.n_up + up];
        path.sample = rtt;
        path.unanswered_since = None;
        path.last_probe = Some(Time::ZERO);
    }

    /// The destination ToR of a packet from another ToR's point of view (`None` for
    /// intra-ToR packets and at switches that are not ToRs).
    #[inline]
    fn dst_tor(&self, pkt: &Packet) -> Option<u32> {
        let me = self.my_tor?;
        let t = self.tor_of[pkt.dst as usize];
        (t != me && t != super::NO_TOR).then_some(t)
    }

    /// Sends an RTT probe for `pkt` out of uplink `port` if the path's period has passed.
    /// Nothing in piggyback mode (timestamps are written at the uplink's dequeue).
    fn maybe_probe(&mut self, ctx: &mut LbCtx, pkt: &Packet, dst_tor: Option<u32>, port: u16) {
        let Some(t) = dst_tor.filter(|_| !self.piggyback) else {
            return;
        };
        let up = self.uplink_index[port as usize];
        if up == u8::MAX {
            return;
        }
        let period = self.rtt_period[t as usize];
        let path = &mut self.paths[t as usize * self.n_up + up as usize];
        if path.last_probe.is_some_and(|at| ctx.now < at + period) {
            return;
        }
        path.last_probe = Some(ctx.now);
        path.unanswered_since.get_or_insert(ctx.now);
        self.counters.probes += 1;
        let ts = (ctx.now.ps() / 1_000) as u32 & TS_MASK;
        ctx.send_routed(RoutedMessage {
            via: Some(port),
            src: pkt.src,
            to_host: pkt.dst,
            sport: pkt.sport,
            dport: pkt.dport,
            priority: pkt.priority,
            header: LbHeader {
                path_tag: pkt.src,
                meta: MSG_PROBE | (up as u32) << 2 | ts << 10,
            },
        });
    }

    /// t_rc: the delay of a recirculation now, read from the recirculation queue.
    fn t_rc(ctx: &LbCtx, lo: u16, pkt: &Packet) -> Time {
        let port = &ctx.ports[lo as usize];
        port.rate()
            .tx_time(port.total_queue_bytes() + pkt.wire_bytes as u64)
            + port.delay()
    }

    /// Algorithm 1 for a packet whose inner choice `p` is blocked: the next candidate after
    /// p in port order is p_s; recirculate if RTT(p_s) - RTT(p) > t_rc, else move to p_s and
    /// check again. `can_recirculate`: the switch recirculates at all.
    #[allow(clippy::too_many_arguments)]
    pub fn algorithm1(
        &self,
        now: Time,
        pkt: &Packet,
        p: u16,
        candidates: &[u16],
        dst_tor: Option<u32>,
        t_rc: Time,
        can_recirculate: bool,
    ) -> Decision {
        let prio = pkt.priority;
        let n = candidates.len().min(MAX_TRIED);
        let Some(start) = candidates[..n].iter().position(|&c| c == p) else {
            // The pinned candidate was removed: treat the first kept candidate as p.
            return Decision::Forward {
                port: candidates[0],
                rerouted: true,
            };
        };
        let mut cur = start;
        let mut tried: u64 = 1 << start;
        loop {
            let port = candidates[cur];
            if !self.blocked(port, prio, now) {
                return Decision::Forward {
                    port,
                    rerouted: port != p,
                };
            }
            // p_s: the next untried candidate after the current one, cyclically.
            let Some(next) = (1..n)
                .map(|k| (cur + k) % n)
                .find(|&i| tried & (1 << i) == 0)
            else {
                break;
            };
            let ps = candidates[next];
            let gap = self
                .rtt(now, dst_tor, ps)
                .saturating_sub(self.rtt(now, dst_tor, port));
            // Waiting for a faulty path is pointless: only warned paths are waited for.
            if can_recirculate && !self.removed[port as usize] && gap > t_rc {
                return Decision::Recirculate {
                    charged: Some(ps),
                    gap,
                };
            }
            tried |= 1 << next;
            cur = next;
        }
        // Every candidate is warned: wait by recirculating, or take p.
        if can_recirculate && !self.removed[p as usize] {
            Decision::Recirculate {
                charged: None,
                gap: Time::MAX,
            }
        } else {
            Decision::Forward {
                port: p,
                rerouted: false,
            }
        }
    }

    #[inline]
    fn slot(&self, pkt: &Packet) -> usize {
        (mix64((pkt.flow as u64) << 40 ^ pkt.seq) % self.table.len() as u64) as usize
    }

    /// The recirculation limits: `max_recirculations`, and with RLB* N_rc (eq. 5) and the
    /// cumulative-delay rule (eq. 6). Records the recirculation if admitted.
    #[allow(clippy::too_many_arguments)]
    fn admit_recirculation(
        &mut self,
        ctx: &mut LbCtx,
        lo: u16,
        pkt: &Packet,
        from_loop: bool,
        gap: Time,
        t_rc: Time,
        charged: Option<u16>,
    ) -> bool {
        let slot = self.slot(pkt);
        let mut e = self.table[slot];
        let mine = e.used && e.flow == pkt.flow && e.seq == pkt.seq;
        if !mine {
            // First recirculation (or its state was lost to a collision: counted once).
            e = Recirc {
                used: true,
                flow: pkt.flow,
                seq: pkt.seq,
                count: from_loop as u8,
                first_at: if from_loop {
                    ctx.now.saturating_sub(t_rc)
                } else {
                    ctx.now
                },
                gap,
            };
        }
        if self.adaptive && !self.round.active {
            self.start_round(ctx, lo, pkt);
        }
        let limit = if self.adaptive {
            self.round.n_rc.min(self.max_recirc)
        } else {
            self.max_recirc
        };
        // The recirculation ingress must stay below its XOFF threshold: what is queued for the
        // loopback will all arrive there.
        let loop_full = ctx.mmu.is_some_and(|m| {
            let queued = ctx.ports[lo as usize].total_queue_bytes();
            m.ingress_use(lo as usize + 1, pkt.priority) + queued + pkt.wire_bytes as u64
                >= m.threshold()
        });
        let refused = if loop_full || e.count as u32 >= limit {
            self.counters.refused_limit += 1;
            true
        } else if self.adaptive && ctx.now.saturating_sub(e.first_at) + t_rc > e.gap {
            self.counters.refused_delay += 1;
            true
        } else {
            false
        };
        if refused && !from_loop {
            return false; // never entered the loop: nothing to keep
        }
        if !self.table[slot].used {
            self.in_loop += 1;
        }
        if refused {
            // Kept until the packet leaves the loop (at once, through `leave_loop`).
            self.table[slot] = e;
            return false;
        }
        e.count += 1;
        self.table[slot] = e;
        self.counters.recirculations += 1;
        self.round.recirculated += 1;
        if let Some(ps) = charged {
            self.round.per_port[ps as usize] += 1;
        }
        true
    }

    /// A packet leaves the recirculation loop: its count goes to the round's statistics.
    fn leave_loop(&mut self, pkt: &Packet) {
        if self.table.is_empty() {
            return;
        }
        let slot = self.slot(pkt);
        let e = &mut self.table[slot];
        let count = if e.used && e.flow == pkt.flow && e.seq == pkt.seq {
            e.used = false;
            self.in_loop -= 1;
            e.count as u64
        } else {
            1
        };
        self.round.finished += 1;
        self.round.finished_sum += count;
    }

    /// Starts an RLB* round of one t_rc and sets its N_rc (eq. 4-5): the room left below the
    /// PFC threshold for the recirculation queue, minus its growth over the last round, in
    /// units of what the loopback carries in one t_rc.
    fn start_round(&mut self, ctx: &mut LbCtx, lo: u16, pkt: &Packet) {
        let t_rc = Self::t_rc(ctx, lo, pkt);
        let port = &ctx.ports[lo as usize];
        let queued = port.total_queue_bytes();
        let growth = if self.round.active {
            queued.saturating_sub(self.round.queue_at_start)
        } else {
            0
        };
        let threshold = ctx.mmu.map_or(u64::MAX, |m| m.threshold());
        let per_round = port.rate().bytes_in(t_rc).max(1);
        let room = threshold.saturating_sub(queued).saturating_sub(growth);
        self.round.n_rc = (room / per_round).min(self.max_recirc as u64) as u32;
        self.round.t_rc = t_rc;
        self.round.queue_at_start = queued;
        self.round.active = true;
        self.round.started += 1;
        ctx.set_timer(ctx.now + t_rc, ROUND);
    }

    /// The end of an RLB* round: Algorithm 2, then the next round if packets still
    /// recirculate.
    fn end_round(&mut self, ctx: &mut LbCtx) {
        let r = &mut self.round;
        let recirculated = r.recirculated;
        r.recirculated = 0;
        // A round in which no packet left the loop brings no evidence either way.
        if r.finished == 0 {
        } else if r.finished_sum as f64 / r.finished as f64 > self.fault_threshold {
            // The egress charged with the most recirculations (lowest index on ties).
            let top = (0..r.per_port.len())
                .filter(|&p| r.per_port[p] > 0)
                .max_by_key(|&p| (r.per_port[p], std::cmp::Reverse(p)))
                .map(|p| p as u16);
            if let Some(top) = top {
                if r.suspect == Some(top) {
                    r.suspect_rounds += 1;
                } else {
                    r.suspect = Some(top);
                    r.suspect_rounds = 1;
                }
                if r.suspect_rounds >= 2 && !self.removed[top as usize] {
                    self.removed[top as usize] = true;
                    self.any_removed = true;
                    self.alerts.push(AlertRecord {
                        time_ps: ctx.now.ps(),
                        node: self.node,
                        port: top,
                        downstream: ctx
                            .ports
                            .get(top as usize)
                            .map_or(u32::MAX, |p| p.peer_node()),
                    });
                    r.suspect = None;
                    r.suspect_rounds = 0;
                }
            }
        } else {
            r.suspect = None;
            r.suspect_rounds = 0;
        }
        r.finished = 0;
        r.finished_sum = 0;
        r.per_port.iter_mut().for_each(|c| *c = 0);
        let still = recirculated > 0 || self.in_loop > 0;
        if still {
            // The next round: N_rc from the queue now (the packet size of an MTU stands in).
            let lo = ctx.loopback.expect("rounds run only with recirculation");
            let mut probe = Packet::new(crate::packet::PacketKind::Data);
            probe.wire_bytes = 0;
            self.start_round(ctx, lo, &probe);
        } else {
            self.round.active = false;
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

    /// Piggyback: a packet carrying a timestamp arrived. At the destination leaf (the
    /// packet's destination host is one of this ToR's) a forward timestamp is held for the
    /// way back (a newer one of the same path replaces it); at the source leaf a returned
    /// one gives the path's RTT: arrival time - send time. Both are cleared from the header.
    fn on_arrival(&mut self, ctx: &mut LbCtx, pkt: &Packet, word: &mut u64) {
        let Some(me) = self.my_tor else { return };
        if !self.piggyback || self.tor_of[pkt.dst as usize] != me {
            return;
        }
        let from = self.tor_of[pkt.src as usize];
        let Stamps { stamp, echo } = Stamps::of(std::mem::take(word));
        if from == super::NO_TOR || from == me {
            return;
        }
        let t = from as usize;
        if stamp != 0 {
            let up = (stamp >> TS_BITS & 0xff) as usize;
            // A source leaf with more uplinks than this one: not measured (irregular fabrics).
            if up < self.n_up {
                let h = &mut self.held[t * self.n_up + up];
                if h.word == 0 {
                    self.held_count[t] += 1;
                }
                *h = Held {
                    word: stamp,
                    at: ctx.now,
                };
            }
        }
        if echo != 0 {
            let up = (echo >> TS_BITS & 0xff) as usize;
            if up < self.n_up {
                let now_ns = (ctx.now.ps() / 1_000) as u32 & TS_MASK;
                let rtt = Time::from_ns((now_ns.wrapping_sub(echo) & TS_MASK).max(1) as u64);
                let path = &mut self.paths[t * self.n_up + up];
                path.sample = rtt;
                path.unanswered_since = None;
                let sent = ctx.now.saturating_sub(rtt);
                self.answered_sent[t] = self.answered_sent[t].max(sent);
                self.counters.stamp_returns += 1;
            }
        }
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
            MSG_CNM => {
                let warn = meta >> 2 & 1 == 1;
                let prio = (meta >> 3 & 7) as usize;
                let until = match (warn, self.warning_end) {
                    (false, _) => Time::ZERO,
                    (true, WarningEnd::Clear) => Time::MAX,
                    (true, WarningEnd::Expiry) => ctx.now + self.ttl,
                };
                self.warned_until[port as usize * N_PRIO + prio] = until;
            }
            MSG_PROBE => {
                let Some(me) = self.my_tor else { return };
                ctx.send_routed(RoutedMessage {
                    via: None,
                    src: ctx.node,
                    to_host: header.path_tag,
                    sport: (meta >> 2 & 0xff) as u16,
                    dport: me as u16,
                    priority: 0,
                    header: LbHeader {
                        path_tag: me,
                        meta: MSG_ECHO | (meta & !3),
                    },
                });
            }
            MSG_ECHO => {
                let (tor, up) = (header.path_tag as usize, (meta >> 2 & 0xff) as usize);
                if self.n_up == 0 || up >= self.n_up || tor * self.n_up >= self.paths.len() {
                    return;
                }
                let sent = meta >> 10 & TS_MASK;
                let now_ns = (ctx.now.ps() / 1_000) as u32 & TS_MASK;
                let rtt_ns = now_ns.wrapping_sub(sent) & TS_MASK;
                let path = &mut self.paths[tor * self.n_up + up];
                path.sample = Time::from_ns(rtt_ns.max(1) as u64);
                path.unanswered_since = None;
                self.counters.echoes += 1;
            }
            _ => {}
        }
    }

    /// Picks the egress of a data packet among `candidates`.
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let mut kept = [0u16; MAX_CANDIDATES];
        let cands: &[u16] = if self.any_removed {
            let mut n = 0;
            for &c in candidates.iter().take(MAX_CANDIDATES) {
                if !self.removed[c as usize] {
                    kept[n] = c;
                    n += 1;
                }
            }
            if n == 0 {
                candidates
            } else {
                &kept[..n]
            }
        } else {
            candidates
        };
        // A pinned path RLB* removed as faulty is not taken: the inner scheme chooses instead.
        let pinned = pinned_choice(pkt, candidates).filter(|&c| !self.removed[c as usize]);
        let p = match pinned {
            Some(c) => c,
            None => self.inner.choose(ctx, pkt, cands),
        };
        let lo = ctx.loopback.filter(|_| self.recirculation);
        let from_loop = ctx.loopback.is_some_and(|l| pkt.ingress_port == l + 1);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::{EcmpConfig, TestSwitch};
    use crate::lb::{Layer, LbAction};
    use crate::mmu::{Mmu, Threshold};
    use crate::packet::PacketKind;

    /// A leaf (node 10) with hosts on ports 0, 1 and uplinks on ports 2..6; ToRs 0 (this one)
    /// and 1 (hosts 2, 3).
    /// The switch of the tests' RLB instances: its hooks run as the wrapper's.
    fn switch() -> TestSwitch {
        let mut sw = TestSwitch::new(10);
        sw.layer = Layer::Wrapper;
        sw
    }

    fn leaf(cfg: &RlbConfig) -> Rlb {
        let fabric = LbFabric {
            node: 10,
            nodes: 16,
            tor_of: vec![0, 0, 1, 1, NO_TOR_, NO_TOR_],
            tors: 2,
            my_tor: Some(0),
            port_dir: vec![
                PortDir::Host,
                PortDir::Host,
                PortDir::Up,
                PortDir::Up,
                PortDir::Up,
                PortDir::Up,
            ],
            port_rate_bps: vec![40_000_000_000; 6],
            port_delay_ps: vec![2_000_000; 6],
            tor_hops: vec![0, 2],
        };
        Rlb::new(cfg, &fabric)
    }
    const NO_TOR_: u32 = crate::lb::NO_TOR;

    fn data(dst: u32, seq: u64) -> Packet {
        let mut p = Packet::new(PacketKind::Data);
        (p.src, p.dst, p.flow, p.seq, p.priority, p.wire_bytes) = (0, dst, 1, seq, 3, 1048);
        p
    }

    fn ecmp_inner() -> RlbConfig {
        RlbConfig {
            inner: Box::new(LbConfig::Ecmp(EcmpConfig::default())),
            ..Default::default()
        }
    }

    fn cnm(meta: u32) -> LbHeader {
        LbHeader { path_tag: 0, meta }
    }

    fn warn(rlb: &mut Rlb, sw: &mut TestSwitch, port: u16, prio: u8) {
        let h = LbHeader {
            path_tag: 0,
            meta: cnm_meta(true, prio, 7),
        };
        rlb.on_control(&mut sw.ctx(0), port, &h);
    }

    /// Algorithm 1. Checked to fail with the RTT gap test replaced by "always reroute" and by
    /// "always recirculate", without the "check again" of a replaced p_s, and with clearing
    /// CNMs ignored.
    #[test]
    fn an_unwarned_choice_is_kept_and_a_warned_one_is_replaced_or_recirculated() {
        let mut rlb = leaf(&ecmp_inner());
        let mut sw = switch();
        let cands = [2u16, 3, 4, 5];
        let pkt = data(2, 0);
        let t_rc = Time::from_ns(500);
        for port in cands {
            rlb.set_rtt(1, port, Time::from_us(10));
        }
        // No warning: p stays.
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 3,
                rerouted: false
            }
        );
        // p = 3 warned for priority 3, p_s = 4 with a small RTT gap (< t_rc): rerouted to 4.
        warn(&mut rlb, &mut sw, 3, 3);
        rlb.set_rtt(1, 4, Time::from_us(10) + Time::from_ns(400));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 4,
                rerouted: true
            }
        );
        // Another priority is not warned.
        let mut other = pkt;
        other.priority = 4;
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &other, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 3,
                rerouted: false
            }
        );
        // A large gap (> t_rc): recirculate, charged to p_s.
        rlb.set_rtt(1, 4, Time::from_us(12));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Recirculate {
                charged: Some(4),
                gap: Time::from_us(2)
            }
        );
        // Reroute only: the large gap does not matter.
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, false),
            Decision::Forward {
                port: 4,
                rerouted: true
            }
        );
        // p_s = 4 warned too with a small gap: go on to 5 (Algorithm 1's "check again").
        warn(&mut rlb, &mut sw, 4, 3);
        rlb.set_rtt(1, 4, Time::from_us(10));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 5,
                rerouted: true
            }
        );
        // All warned: recirculate (or, without recirculation, take p).
        warn(&mut rlb, &mut sw, 5, 3);
        warn(&mut rlb, &mut sw, 2, 3);
        assert!(matches!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Recirculate { charged: None, .. }
        ));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, false),
            Decision::Forward {
                port: 3,
                rerouted: false
            }
        );
        // A clearing CNM lifts the warning.
        let clear = LbHeader {
            path_tag: 0,
            meta: cnm_meta(false, 3, 7),
        };
        rlb.on_control(&mut sw.ctx(0), 3, &clear);
        assert!(!rlb.warned(3, 3, Time::ZERO));
    }

    /// RTT probes. Checked to fail with no probe sent, with an unanswered probe's age not
    /// counted, and with echoes ignored.
    #[test]
    fn a_lost_probe_makes_its_path_look_slower_and_an_echo_measures_the_rtt() {
        let probes = RlbConfig {
            rtt_measurement: RttMeasurement::Probe,
            ..ecmp_inner()
        };
        let mut rlb = leaf(&probes);
        let mut sw = switch();
        let pkt = data(2, 0);
        // The base RTT stands in before any sample: 2 hops x 2 us x 2.
        assert_eq!(rlb.rtt(Time::ZERO, Some(1), 3), Time::from_us(8));
        rlb.maybe_probe(&mut sw.ctx(1_000), &pkt, Some(1), 3);
        let probe = match sw.actions.pop() {
            Some(LbAction::SendRouted {
                message:
                    RoutedMessage {
                        via: Some(3),
                        to_host: 2,
                        priority: 3,
                        header,
                        ..
                    },
                layer: Layer::Wrapper,
            }) => header,
            other => panic!("{other:?}"),
        };
        // Unanswered for 20 us: the path's RTT is at least that.
        assert_eq!(rlb.rtt(Time::from_us(21), Some(1), 3), Time::from_us(20));
        // Not due again within the period.
        rlb.maybe_probe(&mut sw.ctx(2_000), &pkt, Some(1), 3);
        assert!(sw.actions.is_empty());
        // The destination ToR (here: another instance) echoes; the echo gives the sample.
        let mut dst = leaf(&probes);
        dst.my_tor = Some(1);
        dst.on_control(&mut sw.ctx(6_000), 2, &probe);
        let echo = match sw.actions.pop() {
            Some(LbAction::SendRouted {
                message:
                    RoutedMessage {
                        to_host: 0,
                        priority: 0,
                        header,
                        ..
                    },
                layer: Layer::Wrapper,
            }) => header,
            other => panic!("{other:?}"),
        };
        rlb.on_control(&mut sw.ctx(12_000), 2, &echo);
        assert_eq!(rlb.rtt(Time::from_us(12), Some(1), 3), Time::from_us(11));
        // Answered: the sample stands until the next one, however old.
        assert_eq!(rlb.rtt(Time::from_us(50), Some(1), 3), Time::from_us(11));
        assert_eq!(rlb.counters.echoes, 1);
        // Ports that are not uplinks and intra-ToR packets have no RTT.
        assert_eq!(rlb.rtt(Time::ZERO, Some(1), 0), Time::ZERO);
        assert_eq!(rlb.rtt(Time::ZERO, None, 3), Time::ZERO);
    }

    fn no_message(sw: &mut TestSwitch) {
        assert!(
            sw.actions
                .drain(..)
                .all(|a| matches!(a, LbAction::SetTimer { .. })),
            "piggybacking sends nothing"
        );
    }

    #[test]
    fn a_timestamp_rides_a_data_packet_out_and_any_packet_back_and_measures_the_rtt() {
        let mut src = leaf(&ecmp_inner());
        let mut dst = leaf(&ecmp_inner());
        dst.my_tor = Some(1);
        let mut sw = switch();
        // A data packet to ToR 1 leaves uplink 3: stamped (the send time), no message sent.
        let mut a = data(2, 0);
        let mut wa = 0u64;
        src.on_dequeue(&mut sw.ctx(1_000), 3, &mut a, &mut wa);
        assert_ne!(Stamps::of(wa).stamp, 0);
        assert_eq!(src.counters.stamps, 1);
        no_message(&mut sw);
        // Not again on that path within the period (one base RTT, 8 us); another path is due.
        let mut b = data(2, 1);
        let mut wb = 0u64;
        src.on_dequeue(&mut sw.ctx(2_000), 3, &mut b, &mut wb);
        assert_eq!(Stamps::of(wb).stamp, 0);
        src.on_dequeue(&mut sw.ctx(2_000), 4, &mut b, &mut wb);
        assert_ne!(Stamps::of(wb).stamp, 0);
        // Not on a host port, not for a local host, not on an ACK.
        let mut c = data(1, 2);
        let mut wc = 0u64;
        src.on_dequeue(&mut sw.ctx(3_000), 5, &mut c, &mut wc);
        let mut d = data(2, 3);
        let mut wd = 0u64;
        src.on_dequeue(&mut sw.ctx(3_000), 0, &mut d, &mut wd);
        let mut ack = Packet::new(PacketKind::Ack);
        let mut wack = 0u64;
        (ack.src, ack.dst) = (0, 2);
        src.on_dequeue(&mut sw.ctx(3_000), 5, &mut ack, &mut wack);
        assert_eq!(
            (
                Stamps::of(wc).stamp,
                Stamps::of(wd).stamp,
                Stamps::of(wack).stamp
            ),
            (0, 0, 0)
        );
        no_message(&mut sw);
        // The destination leaf holds them (b arrives first), clearing the header.
        dst.on_arrival(&mut sw.ctx(5_000), &b, &mut wb);
        dst.on_arrival(&mut sw.ctx(6_000), &a, &mut wa);
        assert_eq!((Stamps::of(wa).stamp, Stamps::of(wb).stamp), (0, 0));
        // Any packet towards ToR 0 takes one back, the longest held first: an ACK on
        // uplink 2 takes b's, a data packet on uplink 5 a's; a third gets nothing.
        let mut back = [Packet::new(PacketKind::Ack), data(0, 9), data(0, 10)];
        let mut wback = [0u64; 3];
        for p in back.iter_mut() {
            (p.src, p.dst) = (2, 0);
        }
        dst.on_dequeue(&mut sw.ctx(7_000), 2, &mut back[0], &mut wback[0]);
        dst.on_dequeue(&mut sw.ctx(7_000), 5, &mut back[1], &mut wback[1]);
        dst.on_dequeue(&mut sw.ctx(7_000), 5, &mut back[2], &mut wback[2]);
        let stamp_of = |up: u32, ns: u32| STAMP_VALID | up << TS_BITS | ns;
        assert_eq!(Stamps::of(wback[0]).echo, stamp_of(2, 2_000));
        assert_eq!(Stamps::of(wback[1]).echo, stamp_of(1, 1_000));
        assert_eq!(Stamps::of(wback[2]).echo, 0);
        no_message(&mut sw);
        // The source leaf: RTT = arrival - send time, per uplink.
        src.on_arrival(&mut sw.ctx(12_000), &back[1], &mut wback[1]);
        src.on_arrival(&mut sw.ctx(13_000), &back[0], &mut wback[0]);
        assert_eq!(Stamps::of(wback[0]).echo, 0);
        assert_eq!(src.measured_rtt(1, 3), Some(Time::from_us(11)));
        assert_eq!(src.measured_rtt(1, 4), Some(Time::from_us(11)));
        assert_eq!(src.measured_rtt(1, 2), None);
        assert_eq!(src.counters.stamp_returns, 2);
        // A timestamp held longer than half the wrap is dropped, not returned.
        let mut e = data(2, 4);
        let mut we = 0u64;
        src.on_dequeue(&mut sw.ctx(20_000), 2, &mut e, &mut we);
        dst.on_arrival(&mut sw.ctx(21_000), &e, &mut we);
        let mut late = data(0, 11);
        let mut wlate = 0u64;
        (late.src, late.dst) = (2, 0);
        dst.on_dequeue(&mut sw.ctx(21_000 + 2_200_000), 2, &mut late, &mut wlate);
        assert_eq!(Stamps::of(wlate).echo, 0);
    }

    #[test]
    fn silence_slows_a_path_only_once_later_timestamps_came_back() {
        let mut src = leaf(&ecmp_inner());
        let mut sw = switch();
        let base = Time::from_us(8);
        // Uplink 3 stamped at 1 us, never answered: with nothing back from ToR 1 at all, no
        // evidence: it keeps the base RTT (a path without traffic back must not look slow).
        let mut a = data(2, 0);
        let mut wa = 0u64;
        src.on_dequeue(&mut sw.ctx(1_000), 3, &mut a, &mut wa);
        assert_eq!(src.rtt(Time::from_us(50), Some(1), 3), base);
        // Uplink 4 stamped at 2 us and answered at 12 us: ToR 1 does send packets back, so
        // uplink 3's stamp is overdue: its RTT is at least its age.
        let mut b = data(2, 1);
        let mut wb = 0u64;
        src.on_dequeue(&mut sw.ctx(2_000), 4, &mut b, &mut wb);
        let mut back = data(0, 0);
        (back.src, back.dst) = (2, 0);
        let mut wback = Stamps {
            stamp: 0,
            echo: Stamps::of(wb).stamp,
        }
        .word();
        src.on_arrival(&mut sw.ctx(12_000), &back, &mut wback);
        assert_eq!(src.rtt(Time::from_us(12), Some(1), 4), Time::from_us(10));
        assert_eq!(src.rtt(Time::from_us(50), Some(1), 3), Time::from_us(49));
        // Its own answer clears it.
        let mut back = data(0, 1);
        (back.src, back.dst) = (2, 0);
        let mut wback = Stamps {
            stamp: 0,
            echo: Stamps::of(wa).stamp,
        }
        .word();
        src.on_arrival(&mut sw.ctx(60_000), &back, &mut wback);
        assert_eq!(src.rtt(Time::from_us(70), Some(1), 3), Time::from_us(59));
    }

    /// A 9 MB buffer with a static 100 KB PFC threshold, 6 ports of 50 KB headroom.
    fn mmu_100kb() -> Mmu {
        Mmu::new(
            9_000_000,
            4_000,
            3_000,
            Threshold::Static { bytes: 100_000 },
            true,
            vec![50_000; 6],
        )
    }

    /// PFC prediction and the clearing CNM. Checked to fail with prediction disabled (no CNM)
    /// and with no clearing CNM sent.
    #[test]
    fn a_ramping_ingress_queue_is_warned_before_it_pauses_and_cleared_when_it_drains() {
        let mut rlb = leaf(&ecmp_inner());
        let mut sw = switch();
        // Threshold 100 KB static; uplink port 2 receives 4 KB per 2 us interval (16 Gbps).
        let mut mmu = mmu_100kb();
        let mut first_cnm = None;
        let mut paused_at = None;
        for tick in 1..=40u64 {
            for _ in 0..4 {
                if let crate::mmu::Admission::Accept { pause: true } = mmu.arrive(2, 3, 1_000) {
                    paused_at.get_or_insert(tick);
                }
            }
            let mut ctx = sw.ctx(tick * 2_000);
            ctx.mmu = Some(&mmu);
            rlb.predict(&mut ctx);
            if let Some(LbAction::SendControl {
                port: 2, header, ..
            }) = sw.actions.pop()
            {
                assert_eq!(header.meta, cnm_meta(true, 3, 2));
                first_cnm.get_or_insert(tick);
            }
            assert!(sw.actions.is_empty());
        }
        let (cnm, pause) = (first_cnm.unwrap(), paused_at.unwrap());
        // Horizon 2 + 2 x 2 = 6 us = 3 intervals of 4 KB: warned 12 KB before the threshold.
        assert!(cnm < pause, "CNM at tick {cnm}, PAUSE at tick {pause}");
        assert_eq!(pause - cnm, 3);
        assert_eq!(rlb.counters.cnm_warnings, 1);
        // Drain well below: cleared once the PAUSE is over and the queue no longer grows.
        for _ in 0..150 {
            mmu.release(2, 3, 1_000);
        }
        let mut ctx = sw.ctx(100_000);
        ctx.mmu = Some(&mmu);
        rlb.predict(&mut ctx);
        assert_eq!(
            sw.actions.pop(),
            Some(LbAction::SendControl {
                port: 2,
                header: LbHeader {
                    path_tag: 0,
                    meta: cnm_meta(false, 3, 2)
                },
                layer: Layer::Wrapper,
            })
        );
        // Host ports are never watched.
        assert_eq!(rlb.watched, vec![2, 3, 4, 5]);
    }

    /// `warning_end = "expiry"`. Checked to fail with warnings that never expire upstream,
    /// with no refresh of a lasting warning, and with prediction disabled.
    #[test]
    fn expiry_mode_refreshes_a_lasting_warning_and_forgets_one_that_is_not_refreshed() {
        let cfg = RlbConfig {
            warning_end: WarningEnd::Expiry,
            warning_ttl: Time::from_us(10),
            ..ecmp_inner()
        };
        // The upstream side: a warning lasts warning_ttl after the CNM.
        let mut rlb = leaf(&cfg);
        let mut sw = switch();
        warn(&mut rlb, &mut sw, 3, 3);
        assert!(rlb.warned(3, 3, Time::from_us(9)));
        assert!(!rlb.warned(3, 3, Time::from_us(10)));
        // The warning side: ingress (2, 3) pauses from 2 us to 20 us. A CNM at 2 us, then one
        // every warning_ttl / 2 = 5 us (on the 2 us ticks: 8, 14, 20 us); no clearing CNM
        // after the drain.
        let mut mmu = mmu_100kb();
        let mut sent = Vec::new();
        for tick in 1..=15u64 {
            match tick {
                1 => (0..110).for_each(|_| {
                    mmu.arrive(2, 3, 1_000);
                }),
                11 => (0..110).for_each(|_| {
                    mmu.release(2, 3, 1_000);
                }),
                _ => {}
            }
            let mut ctx = sw.ctx(tick * 2_000);
            ctx.mmu = Some(&mmu);
            rlb.predict(&mut ctx);
            while let Some(a) = sw.actions.pop() {
                assert_eq!(
                    a,
                    LbAction::SendControl {
                        port: 2,
                        header: LbHeader {
                            path_tag: 0,
                            meta: cnm_meta(true, 3, 2)
                        },
                        layer: Layer::Wrapper,
                    }
                );
                sent.push(tick * 2);
            }
        }
        assert_eq!(sent, [2, 8, 14, 20]);
        assert_eq!((rlb.counters.cnm_warnings, rlb.counters.cnm_clears), (4, 0));
        // Upstream, these CNMs keep the egress warned without a gap until 10 us after the
        // last one.
        let mut up = leaf(&cfg);
        let mut at = 0;
        for t_us in 2..=40u64 {
            if sent.contains(&t_us) {
                up.on_control(&mut sw.ctx(t_us * 1_000), 3, &cnm(cnm_meta(true, 3, 2)));
                at = t_us;
            }
            let now = Time::from_us(t_us) + Time::from_ns(500);
            assert_eq!(up.warned(3, 3, now), t_us < at + 10, "at {t_us}.5 us");
        }
    }

    /// Recirculation limits, with a switch view holding a loopback (ports 6 and 7).
    fn recirc_leaf(adaptive: bool) -> Rlb {
        let cfg = RlbConfig {
            adaptive,
            max_recirculations: 5,
            ..ecmp_inner()
        };
        leaf(&cfg)
    }

    fn mmu(threshold: u64) -> Mmu {
        Mmu::new(
            9_000_000,
            4_000,
            3_000,
            Threshold::Static { bytes: threshold },
            true,
            vec![50_000; 8],
        )
    }

    /// Recirculations of one packet admitted in a row, one t_rc apart, at a switch whose
    /// loopback (ports 6 and 7) is empty: `gap` is the RTT gap that sent it round.
    fn recirculate(rlb: &mut Rlb, mmu: &Mmu, gap: Time) -> u32 {
        use crate::port::PortState;
        let ports: Vec<PortState> = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let pkt = data(2, 7);
        let mut sw = switch();
        let mut n = 0;
        let mut t = 0;
        loop {
            let mut ctx = sw.ctx(t);
            ctx.ports = &ports;
            ctx.loopback = Some(6);
            ctx.mmu = Some(mmu);
            let t_rc = Rlb::t_rc(&ctx, 6, &pkt);
            if !rlb.admit_recirculation(&mut ctx, 6, &pkt, n > 0, gap, t_rc, Some(3)) {
                return n;
            }
            n += 1;
            t += t_rc.ps() / 1_000;
            assert!(n < 100);
        }
    }

    /// Checked to fail with each limit disabled in turn: `max_recirculations` ignored, N_rc
    /// not applied, N_rc not computed from the buffer (always `max_recirculations`), the
    /// growth term of eq. 4 left out, eq. 6 not checked.
    #[test]
    fn max_recirculations_bounds_plain_rlb_and_n_rc_and_eq6_bound_rlb_star() {
        use crate::port::PortState;
        let roomy = mmu(100_000);
        // Plain RLB: max_recirculations, whatever the gap.
        let mut plain = recirc_leaf(false);
        assert_eq!(recirculate(&mut plain, &roomy, Time::from_ms(1)), 5);
        assert_eq!(plain.counters.refused_limit, 1);
        // RLB*: N_rc from the buffer room. Threshold 100 KB, empty queue, t_rc = 1048 B at
        // 40 Gbps + 200 ns = 409.6 ns, 2048 B per round: room for 48 rounds, capped at 5.
        let mut star = recirc_leaf(true);
        assert_eq!(recirculate(&mut star, &roomy, Time::from_ms(1)), 5);
        assert_eq!(star.round.n_rc, 5);
        // RLB*, eq. 6: a gap of 1 us allows the delays 0.41 + 0.41 (<= 1), not a third.
        let mut star = recirc_leaf(true);
        assert_eq!(recirculate(&mut star, &roomy, Time::from_us(1)), 2);
        assert_eq!(star.counters.refused_delay, 1);
        // Plain RLB has no eq. 6.
        let mut plain = recirc_leaf(false);
        assert_eq!(recirculate(&mut plain, &roomy, Time::from_us(1)), 5);
        // N_rc shrinks with the room: a threshold just above one round's bytes (2048 B)
        // allows one recirculation per packet; plain RLB is not bound by it.
        let tight = mmu(2_100);
        let mut star = recirc_leaf(true);
        assert_eq!(recirculate(&mut star, &tight, Time::from_ms(1)), 1);
        assert_eq!(star.round.n_rc, 1);
        assert_eq!(star.counters.refused_limit, 1);
        let mut plain = recirc_leaf(false);
        assert_eq!(recirculate(&mut plain, &tight, Time::from_ms(1)), 5);
        // Eq. 4: the queue's growth over the last round comes off the room. A round starts on
        // an empty loopback; at the next, 20 KB wait there: t_rc = 20 KB at 40 Gbps + 200 ns
        // = 4.2 us, 21 KB per round; room 100 KB - 20 KB - 20 KB of growth: N_rc = 2 (3
        // without the growth term).
        let mut ports = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let mut star = recirc_leaf(true);
        let mut sw = switch();
        let mut probe = data(2, 7);
        probe.wire_bytes = 0;
        {
            let mut ctx = sw.ctx(0);
            ctx.ports = &ports;
            ctx.loopback = Some(6);
            ctx.mmu = Some(&roomy);
            star.start_round(&mut ctx, 6, &probe);
        }
        ports[6].set_test_queue_bytes(20_000);
        let mut ctx = sw.ctx(1_000);
        ctx.ports = &ports;
        ctx.loopback = Some(6);
        ctx.mmu = Some(&roomy);
        star.start_round(&mut ctx, 6, &probe);
        assert_eq!(star.round.t_rc, Time::from_ns(4_200));
        assert_eq!(star.round.n_rc, 2);
    }

    /// t_rc is read from the recirculation queue: with the loopback busy, the same RTT gap
    /// that made the packet wait on an idle loopback makes it take p_s. Checked to fail with
    /// t_rc computed without the queue.
    #[test]
    fn t_rc_is_the_recirculation_queue_s_delay_and_decides_against_the_rtt_gap() {
        use crate::port::PortState;
        let roomy = mmu(100_000);
        let mut ports = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let mut rlb = leaf(&ecmp_inner());
        let mut sw = switch();
        let pkt = data(2, 7);
        let cands = [2u16, 3, 4, 5];
        let mut choose = |rlb: &mut Rlb, ports: &[PortState]| {
            let mut ctx = sw.ctx(0);
            ctx.ports = ports;
            ctx.loopback = Some(6);
            ctx.mmu = Some(&roomy);
            let t_rc = Rlb::t_rc(&ctx, 6, &pkt);
            (rlb.choose(&mut ctx, &pkt, &cands), t_rc)
        };
        // The inner choice p, then p warned, and p_s (the next candidate) 700 ns slower.
        let (p, t_rc) = choose(&mut rlb, &ports);
        assert_eq!(t_rc, Time::from_ps(409_600));
        let ps = cands[(cands.iter().position(|&c| c == p).unwrap() + 1) % 4];
        warn(&mut rlb, &mut TestSwitch::new(10), p, 3);
        rlb.set_rtt(1, p, Time::from_us(10));
        rlb.set_rtt(1, ps, Time::from_ns(10_700));
        // Idle loopback: t_rc = 409.6 ns < 700 ns: the packet waits for p (recirculated).
        assert_eq!(choose(&mut rlb, &ports), (6, Time::from_ps(409_600)));
        // 2952 B queued at the loopback: t_rc = 4000 B at 40 Gbps + 200 ns = 1 us > 700 ns:
        // waiting costs more than the slower path, the packet takes p_s.
        ports[6].set_test_queue_bytes(2_952);
        assert_eq!(choose(&mut rlb, &ports), (ps, Time::from_us(1)));
        assert_eq!(rlb.counters.reroutes, 1);
    }

    /// Algorithm 2. Checked to fail with detection disabled, with a port flagged after one
    /// round and only after three, with a flagged port not removed, and with a round below
    /// the threshold not resetting the suspicion.
    #[test]
    fn algorithm2_removes_the_port_that_tops_two_rounds_in_a_row() {
        use crate::port::PortState;
        let ports: Vec<PortState> = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let mut rlb = recirc_leaf(true);
        let mut sw = switch();
        let mut round = |rlb: &mut Rlb, sum: u64, top: usize| {
            rlb.round.active = true;
            rlb.round.finished = 2;
            rlb.round.finished_sum = sum;
            rlb.round.per_port[top] = 9;
            rlb.round.per_port[2] = 1;
            let mut ctx = sw.ctx(1_000);
            ctx.ports = &ports;
            ctx.loopback = Some(6);
            rlb.end_round(&mut ctx);
        };
        // Average 4 > 3 twice in a row, port 4 on top both times: removed, alert raised.
        round(&mut rlb, 8, 4);
        assert!(rlb.alerts.is_empty());
        round(&mut rlb, 8, 4);
        assert!(rlb.is_removed(4));
        assert_eq!(rlb.alerts.len(), 1);
        assert_eq!((rlb.alerts[0].node, rlb.alerts[0].port), (10, 4));
        // A round below the threshold in between resets the suspicion.
        let mut rlb = recirc_leaf(true);
        round(&mut rlb, 8, 5);
        round(&mut rlb, 4, 5);
        round(&mut rlb, 8, 5);
        assert!(!rlb.is_removed(5) && rlb.alerts.is_empty());
        round(&mut rlb, 8, 5);
        assert!(rlb.is_removed(5));
        // A removed port is never chosen again, by the inner scheme or by Algorithm 1.
        let cands = [2u16, 3, 4, 5];
        for seq in 0..64 {
            let mut p = data(2, seq);
            p.sport = seq as u16;
            let mut ctx = sw.ctx(2_000);
            ctx.ports = &ports;
            assert_ne!(rlb.choose(&mut ctx, &p, &cands), 5);
        }
    }

    /// `inner_follows`, around LetFlow: a flowlet whose packet was rerouted off a warned port
    /// goes on from the port it was rerouted to once the warning is cleared; without the
    /// option it returns to its own port. Checked to fail with `adopt` doing nothing and with
    /// RLB not calling it.
    #[test]
    fn with_inner_follows_a_rerouted_flowlet_stays_on_its_new_port() {
        for follows in [false, true] {
            let cfg = RlbConfig {
                inner: Box::new(LbConfig::LetFlow(crate::lb::LetFlowConfig::default())),
                inner_follows: follows,
                ..Default::default()
            };
            let mut rlb = leaf(&cfg);
            let mut sw = switch();
            let cands = [2u16, 3, 4, 5];
            let pkt = data(2, 0);
            let p = rlb.choose(&mut sw.ctx(0), &pkt, &cands);
            warn(&mut rlb, &mut sw, p, 3);
            let ps = rlb.choose(&mut sw.ctx(1_000), &data(2, 1000), &cands);
            assert_eq!(
                ps,
                cands[(cands.iter().position(|&c| c == p).unwrap() + 1) % 4]
            );
            let clear = cnm(cnm_meta(false, 3, 7));
            rlb.on_control(&mut sw.ctx(2_000), p, &clear);
            // The same flowlet (within the 100 us timeout), no warning left.
            let next = rlb.choose(&mut sw.ctx(3_000), &data(2, 2000), &cands);
            assert_eq!(
                next,
                if follows { ps } else { p },
                "inner_follows = {follows}"
            );
        }
    }

    #[test]
    fn config_errors_name_the_key() {
        let bad = RlbConfig {
            inner: Box::new(LbConfig::Rlb(RlbConfig::default())),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().starts_with("lb.inner.scheme:"));
        let bad = RlbConfig {
            inner: Box::new(LbConfig::Drill(crate::lb::DrillConfig {
                d: 0,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().starts_with("lb.inner.d: 0"));
        let bad = RlbConfig {
            fault_threshold: 9.0,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("lb.fault_threshold:"));
        let bad = RlbConfig {
            inner_follows: true,
            ..ecmp_inner()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.inner_follows: the inner scheme \"ecmp\" remembers no port to follow a reroute; use it with lb.inner.scheme = \"drill\" (lb.inner.m above 0) or \"letflow\", or set it to false"
        );
        let no_memory = RlbConfig {
            inner_follows: true,
            inner: Box::new(LbConfig::Drill(crate::lb::DrillConfig {
                m: 0,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert!(no_memory
            .validate()
            .unwrap_err()
            .starts_with("lb.inner_follows:"));
        assert!(RlbConfig {
            inner_follows: true,
            ..Default::default()
        }
        .validate()
        .is_ok());
        assert!(RlbConfig::default().validate().is_ok());
    }
}
