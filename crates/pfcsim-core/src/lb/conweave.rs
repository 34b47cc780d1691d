//! ConWeave (Song et al., SIGCOMM'23): the source ToR reroutes a flow when an RTT probe on its
//! path comes back late, and the destination ToR puts the packets back in order before the
//! NIC, in a bounded number of reorder queues per host-facing egress.
//!
//! Follows conweave-ns3 (`conweave-routing.cc`), the RDMA reference, with the queue budget of
//! the Tofino2 implementation (conweave-p4); `docs/schemes/conweave.md` lists every choice.
//!
//! * **Source ToR** (a data packet from one of its hosts to another ToR), per flow (a table
//!   indexed by the 5-tuple hash): epoch, phase (0 before a reroute, 1 after), path, reply
//!   deadline, last activity, "stabilized". In order of precedence: a flow idle for longer
//!   than `inactive` starts a new epoch on a freshly sampled path with an INIT (RTT request);
//!   a flow whose last INIT got a timely RTT_REPLY (or whose reroute got its CLEAR) starts a
//!   new epoch on the same path with an INIT; a flow whose reply deadline (base RTT +
//!   `reply_extra`) passed sends this packet as the TAIL of its old path, then moves to a
//!   sampled path in phase 1 and stops rerouting until CLEAR; otherwise DATA. Path sampling:
//!   two random uplinks, the first not marked congested (a NOTIFY for it arrived within
//!   `path_busy`), else the current path.
//! * **Destination ToR** (a stamped data packet to one of its hosts): answers INIT with
//!   RTT_REPLY and TAIL with CLEAR, and CE-marked packets with NOTIFY(path), all as routed
//!   64-byte scheme messages to the source ToR (ECMP at every hop, strict priority). Per flow
//!   it tracks epoch and phase; a phase-1 packet that arrives while the flow is still in phase
//!   0 overtook the TAIL: it is held in a reorder queue of the egress towards the host (a
//!   physical queue: the packet stays charged to the switch buffer) until the TAIL arrives
//!   (flush 1 ns later) or a flush timer predicted from the timestamps expires. Phase-0
//!   packets pass. If none of the flow's `queue_choices` hashed queues is free, the packet
//!   passes out of order (as the P4 version falls back to the default queue).
//!
//! Header fields (carried in [`LbHeader`], no extra wire bytes): byte 0 of `path_tag` is the
//! path (the source ToR's uplink, `index + 1`); `meta` packs the flag (DATA/INIT/TAIL), the
//! phase, a 2-bit epoch and a 27-bit nanosecond timestamp: the source ToR's send time on
//! phase-0 packets, the TAIL's send time on phase-1 packets. Paths are the source ToR's
//! uplink choices; in more than two tiers the upper tiers hash the 5-tuple (as CONGA here).

use super::{
    flow_hash, Capabilities, Counters, Ingress, LbCtx, LbFabric, PortDir, RoutedMessage,
    SchemeConfig, SwitchScheme,
};
use crate::engine::mix64;
use crate::packet::{LbHeader, Packet};
use crate::units::Time;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// ConWeave parameters. Time defaults are conweave-ns3's `run.py` leaf-spine values, set for
/// 100 Gbps links of 1 us (base RTT 4 us between two leaves); scale them with the base RTT
/// for other fabrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConWeaveConfig {
    /// θ_reply: an RTT_REPLY must arrive within base RTT + this (default 4 us, conweave-ns3
    /// `extraReplyDeadline`, every config). Valid: 1ns..=10ms.
    pub reply_extra: Time,
    /// θ_path_busy: a NOTIFY marks its path congested for this long (default 16 us, `run.py`
    /// leaf-spine `pathPauseTime`; class default 8 us). Valid: 1ns..=10ms.
    pub path_busy: Time,
    /// θ_inactive: a flow idle for longer starts a new epoch on a new path (default 300 us,
    /// `run.py` leaf-spine `txExpiryTime`). Valid: 1us..=1s.
    pub inactive: Time,
    /// θ_extra: margin added to a predicted TAIL arrival before a reorder queue is flushed
    /// (default 16 us, `run.py` leaf-spine `extraVOQFlushTime`). Valid: 0..=10ms.
    pub extra_flush: Time,
    /// θ_default: flush wait when no phase-0 timestamp of the epoch is known (default 200 us,
    /// `run.py` leaf-spine `defaultVOQWaitingTime`). Valid: 1ns..=100ms.
    pub default_wait: Time,
    /// Sample paths among those not marked congested by NOTIFY (default true, conweave-ns3
    /// `pathAwareRerouting`); false: any random path.
    pub path_aware: bool,
    /// Base RTT between two ToRs; 0 (default) computes it as conweave-ns3 does: twice the
    /// hop count between the ToRs times the one-hop (propagation) delay of the source ToR's
    /// uplinks. Valid: 0..=10ms.
    pub base_rtt: Time,
    /// Reorder queues per host-facing egress port of a ToR (default 24: the Tofino2 100 Gbps
    /// build, 32 queues per port of which 24 reorder; conweave-ns3 has no bound). Valid:
    /// 1..=1024.
    pub reorder_queues: u32,
    /// A flow may use one of this many hashed queues, one in each of `queue_choices` equal
    /// arrays (default 3, as conweave-p4); equal to `reorder_queues`: any free queue.
    /// Valid: 1..=reorder_queues, dividing it.
    pub queue_choices: u32,
    /// Flow-table entries at each ToR, source and destination side (default 65,536, the
    /// conweave-p4 register size; conweave-ns3 uses unbounded maps). Valid: 1..=16,777,216.
    pub table_size: u32,
}

impl Default for ConWeaveConfig {
    fn default() -> Self {
        ConWeaveConfig {
            reply_extra: Time::from_us(4),
            path_busy: Time::from_us(16),
            inactive: Time::from_us(300),
            extra_flush: Time::from_us(16),
            default_wait: Time::from_us(200),
            path_aware: true,
            base_rtt: Time::ZERO,
            reorder_queues: 24,
            queue_choices: 3,
            table_size: 65_536,
        }
    }
}

impl SchemeConfig for ConWeaveConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        let ns = Time::from_ns(1);
        for (key, t, lo, hi, dflt) in [
            (
                "reply_extra",
                self.reply_extra,
                ns,
                Time::from_ms(10),
                "4us",
            ),
            ("path_busy", self.path_busy, ns, Time::from_ms(10), "16us"),
            (
                "inactive",
                self.inactive,
                Time::from_us(1),
                Time::from_ms(1000),
                "300us",
            ),
            (
                "extra_flush",
                self.extra_flush,
                Time::ZERO,
                Time::from_ms(10),
                "16us",
            ),
            (
                "default_wait",
                self.default_wait,
                ns,
                Time::from_ms(100),
                "200us",
            ),
            (
                "base_rtt",
                self.base_rtt,
                Time::ZERO,
                Time::from_ms(10),
                "0s (auto)",
            ),
        ] {
            if t < lo || t > hi {
                return Err(format!(
                    "lb.{key}: {t} is out of range; use {lo}..={hi} (ConWeave default {dflt})"
                ));
            }
        }
        if !(1..=1024).contains(&self.reorder_queues) {
            return Err(format!(
                "lb.reorder_queues: {} is out of range; use 1..=1024 queues per port (ConWeave default 24)",
                self.reorder_queues
            ));
        }
        if self.queue_choices == 0
            || self.queue_choices > self.reorder_queues
            || self.reorder_queues % self.queue_choices != 0
        {
            return Err(format!(
                "lb.queue_choices: {} is out of range; use a divisor of lb.reorder_queues ({}) in 1..={} (ConWeave default 3)",
                self.queue_choices, self.reorder_queues, self.reorder_queues
            ));
        }
        super::check_table_size(self.table_size)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fabric: true,
            ingress: true,
            reorder_queues_per_port: self.reorder_queues,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(ConWeave::new(self, fabric))
    }
}

/// Flag of a data packet (`meta` bits 0..2); 0: not stamped by ConWeave (intra-ToR).
pub const FLAG_DATA: u32 = 1;
/// RTT request: the destination ToR answers with RTT_REPLY.
pub const FLAG_INIT: u32 = 2;
/// Last packet on the old path: the destination ToR answers with CLEAR.
pub const FLAG_TAIL: u32 = 3;
const TS_BITS: u32 = 27;
const TS_MASK: u32 = (1 << TS_BITS) - 1;

/// Kinds of scheme messages (`meta` bits 0..2 of a control header).
pub const MSG_REPLY: u32 = 1;
pub const MSG_CLEAR: u32 = 2;
pub const MSG_NOTIFY: u32 = 3;

/// The 27-bit nanosecond timestamp of `t`.
#[inline]
fn ts(t: Time) -> u32 {
    (t.ps() / 1_000) as u32 & TS_MASK
}

/// `a - b` of two 27-bit timestamps, in ns (0 if `a` is before `b`).
#[inline]
fn ts_gap(a: u32, b: u32) -> u64 {
    let d = a.wrapping_sub(b) & TS_MASK;
    if d > TS_MASK / 2 {
        0
    } else {
        d as u64
    }
}

/// Packs the data-packet fields into `meta`.
pub fn pack_data(flag: u32, phase: u8, epoch: u8, ts: u32) -> u32 {
    flag | (phase as u32 & 1) << 2 | (epoch as u32 & 3) << 3 | (ts & TS_MASK) << 5
}

/// (flag, phase, epoch, timestamp) of a data packet's `meta`.
pub fn unpack_data(meta: u32) -> (u32, u8, u8, u32) {
    (
        meta & 3,
        (meta >> 2 & 1) as u8,
        (meta >> 3 & 3) as u8,
        meta >> 5,
    )
}

/// Source-ToR state of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TxFlow {
    /// Low 32 bits of the 5-tuple hash (0: empty slot).
    pub key: u32,
    pub active: Time,
    /// `Time::MAX`: no deadline (waiting for CLEAR).
    pub deadline: Time,
    pub epoch: u8,
    pub phase: u8,
    /// Uplink index among the candidates.
    pub path: u8,
    pub stabilized: bool,
    pub tail_ts: u32,
}

const TX_EMPTY: TxFlow = TxFlow {
    key: 0,
    active: Time::ZERO,
    deadline: Time::MAX,
    epoch: 0,
    phase: 0,
    path: 0,
    stabilized: false,
    tail_ts: 0,
};

/// Destination-ToR state of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
struct RxFlow {
    key: u32,
    epoch: u8,
    phase: u8,
    phase0_seen: bool,
    phase0_tx: u32,
    phase0_rx: Time,
    tail_ts: u32,
    /// Reorder queue (index into `queues`) while reordering.
    queue: Option<u32>,
}

const RX_EMPTY: RxFlow = RxFlow {
    key: 0,
    epoch: 0,
    phase: 0,
    phase0_seen: false,
    phase0_tx: 0,
    phase0_rx: Time::ZERO,
    tail_ts: 0,
    queue: None,
};

/// One reorder queue of a host-facing egress.
#[derive(Clone, Copy, Debug, Default)]
struct Queue {
    busy: bool,
    /// Index of the owning flow in the destination table, and its key.
    owner: u32,
    owner_key: u32,
    /// Bumped whenever the flush time changes; stale timers are ignored.
    gen: u32,
    flush_at: Time,
    /// The pending flush was set by the flow's TAIL (not a predicted deadline).
    by_tail: bool,
}

/// What ConWeave counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConWeaveCounters {
    /// TAILs after which the flow took another path (reported as `conweave.reroutes`).
    pub reroutes: u64,
    /// Packets sent flagged INIT (asking the destination ToR for an RTT reply).
    pub inits: u64,
    /// Packets sent flagged TAIL (the last on the old path after a late reply).
    pub tails: u64,
    /// Packets held in a reorder queue at the destination ToR.
    pub held: u64,
    /// Reorder queues released by their TAIL, and by their timer.
    pub flushes_on_tail: u64,
    pub flushes_on_timeout: u64,
    /// Out-of-order packets passed on because no reorder queue was free.
    pub queue_fallbacks: u64,
}

/// One switch's ConWeave instance (source and destination ToR roles; nothing elsewhere).
#[derive(Clone, Debug)]
pub struct ConWeave {
    cfg: ConWeaveConfig,
    salt: u64,
    my_tor: Option<u32>,
    tor_of: Vec<u32>,
    base_rtt: Vec<Time>,
    n_paths: usize,
    tx: Vec<TxFlow>,
    rx: Vec<RxFlow>,
    /// `congested_until[dst_tor * n_paths + path]`.
    congested_until: Vec<Time>,
    /// First queue of each local port's reorder queues (`u32::MAX`: none).
    queue_base: Vec<u32>,
    queues: Vec<Queue>,
    pub counters: ConWeaveCounters,
}

impl ConWeave {
    pub fn new(cfg: &ConWeaveConfig, fabric: &LbFabric) -> ConWeave {
        let is_tor = fabric.my_tor.is_some();
        let n_paths = fabric
            .port_dir
            .iter()
            .filter(|d| **d == PortDir::Up)
            .count()
            .clamp(1, 255);
        let uplink_delay = fabric
            .port_dir
            .iter()
            .zip(&fabric.port_delay_ps)
            .filter(|(d, _)| **d == PortDir::Up)
            .map(|(_, &ps)| ps)
            .max()
            .unwrap_or(0);
        let base_rtt = (0..fabric.tors as usize)
            .map(|t| {
                if cfg.base_rtt > Time::ZERO {
                    cfg.base_rtt
                } else {
                    let hops = fabric.tor_hops.get(t).copied().unwrap_or(2) as u64;
                    Time::from_ps(2 * hops * uplink_delay)
                }
            })
            .collect();
        let table = if is_tor { cfg.table_size as usize } else { 0 };
        let mut queue_base = vec![u32::MAX; fabric.port_dir.len()];
        let mut n_queues = 0u32;
        if is_tor {
            for (i, d) in fabric.port_dir.iter().enumerate() {
                if *d == PortDir::Host {
                    queue_base[i] = n_queues;
                    n_queues += cfg.reorder_queues;
                }
            }
        }
        ConWeave {
            cfg: cfg.clone(),
            salt: mix64(fabric.node as u64 ^ 0xc0de),
            my_tor: fabric.my_tor,
            tor_of: fabric.tor_of.clone(),
            base_rtt,
            n_paths,
            tx: vec![TX_EMPTY; table],
            rx: vec![RX_EMPTY; table],
            congested_until: vec![
                Time::ZERO;
                if is_tor {
                    fabric.tors as usize * n_paths
                } else {
                    0
                }
            ],
            queue_base,
            queues: vec![Queue::default(); n_queues as usize],
            counters: ConWeaveCounters::default(),
        }
    }

    /// Flow key shared by both ToRs (unsalted hash of the 5-tuple, never 0) and its slot.
    #[inline]
    fn key(&self, pkt: &Packet) -> (u32, usize) {
        let k = (flow_hash(pkt, 0) as u32).max(1);
        (k, k as usize % self.cfg.table_size as usize)
    }

    /// Two random paths, the first not congested; else `current` (or the first draw).
    fn sample_path(&mut self, ctx: &mut LbCtx, dst_tor: u32, n: usize, current: Option<u8>) -> u8 {
        let a = ctx.rng.gen_range(0..n) as u8;
        if !self.cfg.path_aware {
            return a;
        }
        let b = ctx.rng.gen_range(0..n) as u8;
        let base = dst_tor as usize * self.n_paths;
        for p in [a, b] {
            if self.congested_until[base + p as usize] <= ctx.now {
                return p;
            }
        }
        current.unwrap_or(a)
    }

    /// Source-ToR rule for one data packet: stamps path and `meta`.
    fn source(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, n: usize, dst_tor: u32) {
        let n = n.min(self.n_paths).max(1);
        let now = ctx.now;
        let (key, slot) = self.key(pkt);
        let mut f = self.tx[slot];
        let deadline = now + self.base_rtt[dst_tor as usize] + self.cfg.reply_extra;
        let flag;
        let mut pkt_phase = f.phase;
        let mut pkt_path = f.path;
        let mut stamp = ts(now);
        if f.key != key || now.saturating_sub(f.active) > self.cfg.inactive {
            // Expired (or new): new epoch on a fresh path.
            let current = (f.key == key).then_some(f.path.min(n as u8 - 1));
            f = TxFlow {
                key,
                epoch: f.epoch.wrapping_add(1),
                path: self.sample_path(ctx, dst_tor, n, current),
                deadline,
                ..TX_EMPTY
            };
            flag = FLAG_INIT;
            pkt_phase = 0;
            pkt_path = f.path;
        } else if f.stabilized {
            f.epoch = f.epoch.wrapping_add(1);
            f.phase = 0;
            f.stabilized = false;
            f.deadline = deadline;
            f.tail_ts = 0;
            flag = FLAG_INIT;
            pkt_phase = 0;
        } else if f.deadline != Time::MAX && now > f.deadline {
            // Reply timeout: this packet is the TAIL of the old path.
            flag = FLAG_TAIL;
            pkt_phase = 0;
            f.tail_ts = stamp;
            f.phase = 1;
            let old = f.path.min(n as u8 - 1);
            f.path = self.sample_path(ctx, dst_tor, n, Some(old));
            f.deadline = Time::MAX;
            self.counters.tails += 1;
            if f.path != old {
                self.counters.reroutes += 1;
            }
        } else {
            flag = FLAG_DATA;
            if f.phase == 1 {
                stamp = f.tail_ts;
            }
        }
        if flag == FLAG_INIT {
            self.counters.inits += 1;
        }
        f.active = now;
        self.tx[slot] = f;
        let path = pkt_path.min(n as u8 - 1);
        pkt.lb.path_tag = (pkt.lb.path_tag & !0xff) | (path as u32 + 1);
        pkt.lb.meta = pack_data(flag, pkt_phase, f.epoch, stamp);
    }

    /// Sends a scheme message back to the source ToR of `pkt`.
    fn reply(ctx: &mut LbCtx, pkt: &Packet, tag: u32, meta: u32) {
        ctx.send_routed(RoutedMessage {
            via: None,
            src: ctx.node,
            to_host: pkt.src,
            sport: pkt.dport,
            dport: pkt.sport,
            priority: 0,
            header: LbHeader {
                path_tag: tag,
                meta,
            },
        });
    }

    /// Destination-ToR rule for one stamped data packet towards local egress `out`.
    fn destination(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, out: u16) -> Ingress {
        let (flag, phase, epoch, stamp) = unpack_data(pkt.lb.meta);
        if flag == 0 {
            return Ingress::Forward;
        }
        let now = ctx.now;
        let (key, slot) = self.key(pkt);
        let path = (pkt.lb.path_tag & 0xff).saturating_sub(1);
        if pkt.ce {
            let me = self.my_tor.unwrap_or(0);
            Self::reply(ctx, pkt, key, MSG_NOTIFY | path << 8 | me << 16);
        }
        let ctrl = |kind: u32| kind | (phase as u32) << 2 | (epoch as u32) << 3;
        match flag {
            FLAG_INIT => Self::reply(ctx, pkt, key, ctrl(MSG_REPLY)),
            FLAG_TAIL => Self::reply(ctx, pkt, key, ctrl(MSG_CLEAR)),
            _ => {}
        }
        let mut f = self.rx[slot];
        if f.key != key {
            // A new flow, or another one evicting it (its queue, if any, flushes on its timer).
            f = RxFlow {
                key,
                epoch: epoch.wrapping_sub(1),
                ..RX_EMPTY
            };
        }
        let d = epoch.wrapping_sub(f.epoch) & 3;
        if d >= 2 {
            // Older epoch: pass.
            self.rx[slot] = f;
            return Ingress::Forward;
        }
        if d == 1 {
            if let Some(q) = f.queue.take() {
                self.flush(ctx, q, true);
            }
            f.epoch = epoch;
            f.phase = u8::from(flag == FLAG_TAIL);
            f.phase0_seen = false;
        }
        let verdict = if phase == 0 {
            f.phase0_seen = true;
            f.phase0_tx = stamp;
            f.phase0_rx = now;
            if let Some(q) = f.queue {
                let at = if flag == FLAG_TAIL {
                    now + Time::from_ns(1)
                } else {
                    now + Time::from_ns(ts_gap(f.tail_ts, stamp)) + self.cfg.extra_flush
                };
                self.arm(ctx, q, at);
                self.queues[q as usize].by_tail = flag == FLAG_TAIL;
            } else if flag == FLAG_TAIL {
                f.phase = 1;
            }
            Ingress::Forward
        } else if f.phase == 0 {
            // Phase 1 ahead of the TAIL: hold it.
            f.tail_ts = stamp;
            match f.queue {
                Some(q) => {
                    self.counters.held += 1;
                    Ingress::Hold {
                        queue: (q - self.queue_base[out as usize]) as u16,
                    }
                }
                None => match self.allocate(out, key, slot as u32) {
                    Some(q) => {
                        f.queue = Some(q);
                        let at = if f.phase0_seen {
                            f.phase0_rx
                                + Time::from_ns(ts_gap(stamp, f.phase0_tx))
                                + self.cfg.extra_flush
                        } else {
                            now + self.cfg.default_wait
                        };
                        self.arm(ctx, q, at);
                        self.counters.held += 1;
                        Ingress::Hold {
                            queue: (q - self.queue_base[out as usize]) as u16,
                        }
                    }
                    None => {
                        self.counters.queue_fallbacks += 1;
                        Ingress::Forward
                    }
                },
            }
        } else {
            Ingress::Forward
        };
        self.rx[slot] = f;
        verdict
    }

    /// A free reorder queue of egress `out` among the flow's hashed choices.
    fn allocate(&mut self, out: u16, key: u32, owner: u32) -> Option<u32> {
        let base = *self.queue_base.get(out as usize)?;
        if base == u32::MAX {
            return None;
        }
        let ways = self.cfg.queue_choices;
        let per_way = self.cfg.reorder_queues / ways;
        for w in 0..ways {
            let h = if per_way == 1 {
                0
            } else {
                (mix64(key as u64 ^ (w as u64) << 40) % per_way as u64) as u32
            };
            let q = base + w * per_way + h;
            let queue = &mut self.queues[q as usize];
            if !queue.busy {
                *queue = Queue {
                    busy: true,
                    owner,
                    owner_key: key,
                    gen: queue.gen.wrapping_add(1),
                    flush_at: Time::MAX,
                    by_tail: false,
                };
                return Some(q);
            }
        }
        None
    }

    /// (Re)sets the flush time of queue `q` (never earlier than 1 ns from now).
    fn arm(&mut self, ctx: &mut LbCtx, q: u32, at: Time) {
        let at = at.max(ctx.now + Time::from_ns(1));
        let queue = &mut self.queues[q as usize];
        queue.gen = queue.gen.wrapping_add(1);
        queue.flush_at = at;
        ctx.set_timer(at, (q as u64) << 32 | queue.gen as u64);
    }

    /// Releases queue `q` to its egress and frees it; the owning flow (if still in the table)
    /// moves to phase 1. `timeout`: flushed by its timer rather than the TAIL.
    fn flush(&mut self, ctx: &mut LbCtx, q: u32, timeout: bool) {
        let queue = self.queues[q as usize];
        let port = self
            .queue_base
            .iter()
            .rposition(|&b| b != u32::MAX && b <= q)
            .expect("queue of a host port");
        ctx.release(port as u16, (q - self.queue_base[port]) as u16);
        self.queues[q as usize] = Queue {
            gen: queue.gen.wrapping_add(1),
            ..Queue::default()
        };
        let f = &mut self.rx[queue.owner as usize];
        if f.key == queue.owner_key && f.queue == Some(q) {
            f.queue = None;
            f.phase = 1;
        }
        if timeout {
            self.counters.flushes_on_timeout += 1;
        } else {
            self.counters.flushes_on_tail += 1;
        }
    }

    /// Source-ToR state of the flow of `pkt` (tests and diagnostics).
    pub fn tx_flow(&self, pkt: &Packet) -> Option<TxFlow> {
        let (key, slot) = self.key(pkt);
        self.tx.get(slot).filter(|f| f.key == key).copied()
    }

    /// Reorder queues of local port `port` in use now.
    pub fn queues_in_use(&self, port: u16) -> usize {
        match self.queue_base.get(port as usize) {
            Some(&b) if b != u32::MAX => self.queues
                [b as usize..(b + self.cfg.reorder_queues) as usize]
                .iter()
                .filter(|q| q.busy)
                .count(),
            _ => 0,
        }
    }
}

impl SwitchScheme for ConWeave {
    /// Upper-tier switches (and ToRs for anything not pinned): the 5-tuple hash.
    fn choose(&mut self, _ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        candidates[(flow_hash(pkt, self.salt) % candidates.len() as u64) as usize]
    }

    /// A data packet arrived; `candidates` are its equal-cost egresses here.
    fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        let Some(me) = self.my_tor else {
            return Ingress::Forward;
        };
        let src_tor = self.tor_of[pkt.src as usize];
        let dst_tor = self.tor_of[pkt.dst as usize];
        if src_tor == dst_tor {
            return Ingress::Forward;
        }
        if src_tor == me {
            self.source(ctx, pkt, candidates.len(), dst_tor);
            Ingress::Forward
        } else if dst_tor == me {
            self.destination(ctx, pkt, candidates[0])
        } else {
            Ingress::Forward
        }
    }

    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        let q = (token >> 32) as u32;
        let gen = token as u32;
        let Some(queue) = self.queues.get(q as usize) else {
            return;
        };
        if !queue.busy || queue.gen != gen {
            return;
        }
        let timeout = !queue.by_tail;
        self.flush(ctx, q, timeout);
    }

    /// A routed scheme message reached this (source) ToR.
    fn counters(&self, out: &mut Counters) {
        let c = &self.counters;
        out.add("reroutes", c.reroutes);
        out.add("inits", c.inits);
        out.add("tails", c.tails);
        out.add("held", c.held);
        out.add("flushes_on_tail", c.flushes_on_tail);
        out.add("flushes_on_timeout", c.flushes_on_timeout);
        out.add("queue_fallbacks", c.queue_fallbacks);
    }

    fn on_control(&mut self, ctx: &mut LbCtx, _port: u16, header: &LbHeader) {
        if self.my_tor.is_none() {
            return;
        }
        let meta = header.meta;
        let kind = meta & 3;
        if kind == MSG_NOTIFY {
            let path = (meta >> 8 & 0xff) as usize;
            let tor = (meta >> 16) as usize;
            if path < self.n_paths && tor * self.n_paths < self.congested_until.len() {
                self.congested_until[tor * self.n_paths + path] = ctx.now + self.cfg.path_busy;
            }
            return;
        }
        let key = header.path_tag;
        let slot = key as usize % self.cfg.table_size as usize;
        let f = &mut self.tx[slot];
        let (phase, epoch) = ((meta >> 2 & 1) as u8, (meta >> 3 & 3) as u8);
        if f.key != key || f.epoch & 3 != epoch {
            return;
        }
        // A timely RTT_REPLY for the current epoch and phase, or the CLEAR of a reroute.
        let timely = f.phase == phase && f.deadline != Time::MAX && ctx.now <= f.deadline;
        if (kind == MSG_REPLY && timely) || (kind == MSG_CLEAR && f.phase == 1) {
            f.stabilized = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::LbAction;
    use crate::lb::TestSwitch;
    use crate::packet::PacketKind;

    /// Leaf (ToR 0 of 2, node 20): ports 0, 1 to hosts 0, 1; ports 2..6 up (1 us links).
    /// Hosts 2, 3 are under ToR 1, two hops away.
    fn leaf(my_tor: u32) -> LbFabric {
        let mut port_dir = vec![PortDir::Host; 2];
        port_dir.extend([PortDir::Up; 4]);
        LbFabric {
            node: 20,
            nodes: 30,
            tor_of: (0..30)
                .map(|n| if n < 4 { n / 2 } else { crate::lb::NO_TOR })
                .collect(),
            tors: 2,
            my_tor: Some(my_tor),
            port_dir,
            port_rate_bps: vec![100_000_000_000; 6],
            port_delay_ps: vec![1_000_000; 6],
            tor_hops: vec![
                if my_tor == 0 { 0 } else { 2 },
                if my_tor == 0 { 2 } else { 0 },
            ],
        }
    }

    fn data(seq: u64) -> Packet {
        let mut p = Packet::new(PacketKind::Data);
        p.src = 0;
        p.dst = 2;
        p.sport = 7;
        p.dport = 100;
        p.seq = seq;
        p
    }

    const UP: [u16; 4] = [2, 3, 4, 5];

    /// Sends one packet through the source ToR; returns (flag, phase, epoch, path).
    fn send(cw: &mut ConWeave, w: &mut TestSwitch, now_ns: u64) -> (u32, u8, u8, u32) {
        let mut p = data(now_ns);
        assert_eq!(
            cw.on_ingress(&mut w.ctx(now_ns), &mut p, &UP),
            Ingress::Forward
        );
        let (flag, phase, epoch, _) = unpack_data(p.lb.meta);
        (flag, phase, epoch, p.lb.path_tag & 0xff)
    }

    fn control(kind: u32, phase: u8, epoch: u8) -> LbHeader {
        let (key, _) = ConWeave::new(&ConWeaveConfig::default(), &leaf(0)).key(&data(0));
        LbHeader {
            path_tag: key,
            meta: kind | (phase as u32) << 2 | (epoch as u32 & 3) << 3,
        }
    }

    #[test]
    fn base_rtt_is_four_one_hop_delays_between_leaves() {
        let cw = ConWeave::new(&ConWeaveConfig::default(), &leaf(0));
        assert_eq!(cw.base_rtt[1], Time::from_us(4));
    }

    #[test]
    fn source_tor_expiry_stabilize_timeout_and_clear() {
        let cfg = ConWeaveConfig::default();
        let mut cw = ConWeave::new(&cfg, &leaf(0));
        let mut w = TestSwitch::new(20);
        // A new flow: INIT, epoch 1, phase 0, some path.
        let (flag, phase, e1, path) = send(&mut cw, &mut w, 1_000);
        assert_eq!((flag, phase), (FLAG_INIT, 0));
        assert!((1..=4).contains(&path));
        let f = cw.tx_flow(&data(0)).unwrap();
        assert_eq!(f.deadline, Time::from_ns(1_000) + Time::from_us(8));
        // Before the deadline, without a reply: DATA on the same path.
        assert_eq!(send(&mut cw, &mut w, 2_000), (FLAG_DATA, 0, e1, path));
        // A timely RTT_REPLY stabilizes: the next packet opens a new epoch on the same path.
        cw.on_control(&mut w.ctx(6_000), 2, &control(MSG_REPLY, 0, e1));
        assert!(cw.tx_flow(&data(0)).unwrap().stabilized);
        let (flag, phase, e2, p2) = send(&mut cw, &mut w, 7_000);
        assert_eq!((flag, phase, p2), (FLAG_INIT, 0, path));
        assert_eq!(e2, e1.wrapping_add(1) & 3);
        // A late reply is ignored; the deadline passes: this packet is the TAIL, on the old
        // path, phase 0; the flow moves to phase 1 on a sampled path, with no deadline.
        cw.on_control(&mut w.ctx(15_001), 2, &control(MSG_REPLY, 0, e2));
        assert!(!cw.tx_flow(&data(0)).unwrap().stabilized);
        let (flag, phase, e, p) = send(&mut cw, &mut w, 15_002);
        assert_eq!((flag, phase, e, p), (FLAG_TAIL, 0, e2, path));
        let f = cw.tx_flow(&data(0)).unwrap();
        assert_eq!((f.phase, f.deadline), (1, Time::MAX));
        assert_eq!(cw.counters.tails, 1);
        // Later packets: DATA, phase 1, on the new path, carrying the TAIL's timestamp.
        let mut p = data(1);
        cw.on_ingress(&mut w.ctx(16_000), &mut p, &UP);
        let (flag, phase, e, stamp) = unpack_data(p.lb.meta);
        assert_eq!((flag, phase, e), (FLAG_DATA, 1, e2));
        assert_eq!(stamp, 15_002);
        assert_eq!(p.lb.path_tag & 0xff, f.path as u32 + 1);
        // No second reroute before CLEAR, however long it takes.
        assert_eq!(send(&mut cw, &mut w, 100_000).0, FLAG_DATA);
        // CLEAR stabilizes: next packet starts a new epoch on the new path.
        cw.on_control(&mut w.ctx(101_000), 2, &control(MSG_CLEAR, 1, e2));
        let (flag, phase, e3, p3) = send(&mut cw, &mut w, 102_000);
        assert_eq!((flag, phase, p3), (FLAG_INIT, 0, f.path as u32 + 1));
        assert_eq!(e3, e2.wrapping_add(1) & 3);
        // Idle longer than θ_inactive: expired, new epoch with an INIT.
        let (flag, _, e4, _) = send(&mut cw, &mut w, 102_000 + 300_001);
        assert_eq!(flag, FLAG_INIT);
        assert_eq!(e4, e3.wrapping_add(1) & 3);
    }

    #[test]
    fn path_sampling_skips_paths_marked_congested_by_notify() {
        let mut cw = ConWeave::new(&ConWeaveConfig::default(), &leaf(0));
        let mut w = TestSwitch::new(20);
        for path in 0..3u32 {
            let h = LbHeader {
                path_tag: 0,
                meta: MSG_NOTIFY | path << 8 | 1 << 16,
            };
            cw.on_control(&mut w.ctx(0), 2, &h);
        }
        // Only path 3 (tag 4) is free: new flows take it unless both samples are congested.
        let mut free = 0;
        for i in 0..200u16 {
            let mut p = data(0);
            p.sport = i;
            cw.on_ingress(&mut w.ctx(1_000), &mut p, &UP);
            free += u32::from(p.lb.path_tag & 0xff == 4);
        }
        // P(at least one of two samples is path 3) = 7/16.
        assert!((60..120).contains(&free), "{free}");
        // After θ_path_busy the marks are gone.
        assert!(cw.congested_until.iter().all(|&t| t <= Time::from_us(17)));
    }

    #[test]
    fn destination_tor_holds_overtaking_packets_until_the_tail() {
        let cfg = ConWeaveConfig::default();
        let mut cw = ConWeave::new(&cfg, &leaf(1));
        let mut w = TestSwitch::new(20);
        let host_port = [0u16];
        let arrive = |cw: &mut ConWeave, w: &mut TestSwitch, ns: u64, flag, phase, ts| {
            let mut p = data(ns);
            p.lb.path_tag = 1;
            p.lb.meta = pack_data(flag, phase, 1, ts);
            cw.on_ingress(&mut w.ctx(ns), &mut p, &host_port)
        };
        // INIT of epoch 1: passes, answered with an RTT_REPLY to host 0's ToR.
        assert_eq!(
            arrive(&mut cw, &mut w, 5_000, FLAG_INIT, 0, 1_000),
            Ingress::Forward
        );
        assert!(matches!(
            w.actions.pop(),
            Some(LbAction::SendRouted { message, .. })
                if message.to_host == 0 && message.header.meta & 3 == MSG_REPLY
        ));
        // A phase-1 packet overtakes the TAIL: held in a queue, flush timer from timestamps.
        assert!(matches!(
            arrive(&mut cw, &mut w, 6_000, FLAG_DATA, 1, 3_000),
            Ingress::Hold { .. }
        ));
        assert_eq!(cw.counters.held, 1);
        assert_eq!(cw.queues_in_use(0), 1);
        // Expected TAIL arrival: phase-0 RX (5 us) + (3 us - 1 us) + θ_extra (16 us).
        assert!(matches!(
            w.actions.pop(),
            Some(LbAction::SetTimer { at, .. }) if at == Time::from_ns(23_000)
        ));
        // A second one joins the same queue; a phase-0 packet passes.
        assert!(matches!(
            arrive(&mut cw, &mut w, 6_100, FLAG_DATA, 1, 3_000),
            Ingress::Hold { .. }
        ));
        assert_eq!(
            arrive(&mut cw, &mut w, 6_200, FLAG_DATA, 0, 2_000),
            Ingress::Forward
        );
        w.actions.clear();
        // The TAIL passes, answered with CLEAR; the queue flushes 1 ns later.
        assert_eq!(
            arrive(&mut cw, &mut w, 7_000, FLAG_TAIL, 0, 3_000),
            Ingress::Forward
        );
        let timer = w.actions.iter().find_map(|a| match a {
            LbAction::SetTimer { at, token, .. } => Some((*at, *token)),
            _ => None,
        });
        assert!(w.actions.iter().any(
            |a| matches!(a, LbAction::SendRouted { message, .. } if message.header.meta & 3 == MSG_CLEAR)
        ));
        let (at, token) = timer.unwrap();
        assert_eq!(at, Time::from_ns(7_001));
        w.actions.clear();
        cw.on_timer(&mut w.ctx(7_001), token);
        assert!(matches!(w.actions[..], [LbAction::Release { port: 0, .. }]));
        assert_eq!(cw.queues_in_use(0), 0);
        assert_eq!(cw.counters.flushes_on_tail, 1);
        // Stale timers (the earlier prediction) do nothing; later phase-1 packets pass.
        w.actions.clear();
        cw.on_timer(&mut w.ctx(23_000), (token & !0xffff_ffff) | 1);
        assert!(w.actions.is_empty());
        assert_eq!(
            arrive(&mut cw, &mut w, 8_000, FLAG_DATA, 1, 3_000),
            Ingress::Forward
        );
    }

    #[test]
    fn validation_names_the_key_and_range() {
        let bad = |c: ConWeaveConfig| c.validate().unwrap_err();
        assert!(ConWeaveConfig::default().validate().is_ok());
        assert!(bad(ConWeaveConfig {
            reply_extra: Time::ZERO,
            ..Default::default()
        })
        .starts_with("lb.reply_extra: 0"));
        assert_eq!(
            bad(ConWeaveConfig {
                reorder_queues: 0,
                ..Default::default()
            }),
            "lb.reorder_queues: 0 is out of range; use 1..=1024 queues per port (ConWeave default 24)"
        );
        assert!(bad(ConWeaveConfig {
            queue_choices: 5,
            ..Default::default()
        })
        .starts_with(
            "lb.queue_choices: 5 is out of range; use a divisor of lb.reorder_queues (24)"
        ));
        assert!(bad(ConWeaveConfig {
            table_size: 0,
            ..Default::default()
        })
        .starts_with("lb.table_size: 0 is out of range"));
    }
}
