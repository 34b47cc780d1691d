//! The destination-ToR side of ConWeave: packets of a flow's new path that overtake the old
//! path's last packet (the TAIL) wait in a reorder queue of the egress towards the host until
//! the TAIL arrives or a flush timer predicted from the timestamps expires.
//!
//! Two layers:
//! * [`ReorderQueues`], the reorder queues of one ToR and nothing of ConWeave's protocol, for
//!   any scheme that reorders at the destination ToR. A switch-side scheme whose capabilities
//!   ask for `reorder_queues_per_port` queues holds one and, for a packet that must wait,
//!   [`allocate`](ReorderQueues::allocate)s a queue (one of the flow's hashed choices on the
//!   packet's egress; `None`: all taken, let the packet pass), answers
//!   `Ingress::Hold { queue: local(out, q) }`, [`arm`](ReorderQueues::arm)s the queue's flush
//!   time (again whenever it learns better), passes every timer token it gets to
//!   [`due`](ReorderQueues::due), and [`release`](ReorderQueues::release)s a queue that is
//!   due or whose flow is in order again: its packets go out to the host in arrival order.
//! * ConWeave's rule on top ([`RxFlow`] per flow, `destination`): INIT and TAIL are answered
//!   (RTT_REPLY, CLEAR) and CE marks reported (NOTIFY); a phase-1 packet of a flow still in
//!   phase 0 is held; the TAIL flushes the flow's queue 1 ns after it, otherwise the queue
//!   flushes when the TAIL is expected (phase-0 arrival time plus the timestamp gap plus
//!   `extra_flush`, or `default_wait` with no phase-0 packet of the epoch seen).

use super::header::{ts_gap, unpack_data, FLAG_INIT, FLAG_TAIL, MSG_CLEAR, MSG_NOTIFY, MSG_REPLY};
use super::ConWeave;
use crate::engine::mix64;
use crate::lb::{Ingress, LbCtx, PortDir, RoutedMessage};
use crate::packet::{LbHeader, Packet};
use crate::units::Time;

/// The reorder queues of one ToR: `per_port` queues on each host-facing egress, in
/// `choices` equal arrays; a flow may use one queue of each array, chosen by hashing its key.
/// Queues are numbered across the switch (`q`); [`local`](Self::local) gives the number on
/// the port, which `Ingress::Hold` and `LbAction::Release` use. A queue's timer token is
/// `q << 32 | generation`; every change of its flush time, and every release, makes earlier
/// tokens stale.
#[derive(Clone, Debug)]
pub struct ReorderQueues {
    per_port: u32,
    choices: u32,
    /// First queue of each local port's reorder queues (`u32::MAX`: none).
    base: Vec<u32>,
    queues: Vec<Queue>,
}

impl ReorderQueues {
    /// `per_port` queues on each port of `port_dir` that faces a host, in `choices` arrays
    /// (`choices` divides `per_port`); none at all unless `enabled` (a switch that is no ToR).
    pub fn new(port_dir: &[PortDir], per_port: u32, choices: u32, enabled: bool) -> Self {
        let mut base = vec![u32::MAX; port_dir.len()];
        let mut n_queues = 0u32;
        if enabled {
            for (i, d) in port_dir.iter().enumerate() {
                if *d == PortDir::Host {
                    base[i] = n_queues;
                    n_queues += per_port;
                }
            }
        }
        ReorderQueues {
            per_port,
            choices,
            base,
            queues: vec![Queue::default(); n_queues as usize],
        }
    }

    /// A free reorder queue of egress `out` among the hashed choices of the flow with this
    /// `key`, now held for it (`owner`: the caller's index of the flow, given back by
    /// [`release`](Self::release)); `None` if all are taken or `out` has no reorder queues.
    pub fn allocate(&mut self, out: u16, key: u32, owner: u32) -> Option<u32> {
        let base = *self.base.get(out as usize)?;
        if base == u32::MAX {
            return None;
        }
        let ways = self.choices;
        let per_way = self.per_port / ways;
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

    /// (Re)sets the flush time of queue `q` (never earlier than 1 ns from now) and sets its
    /// timer; `by_tail`: this flush is the one the flow's TAIL called for, not a prediction.
    pub fn arm(&mut self, ctx: &mut LbCtx, q: u32, at: Time, by_tail: bool) {
        let at = at.max(ctx.now + Time::from_ns(1));
        let queue = &mut self.queues[q as usize];
        queue.gen = queue.gen.wrapping_add(1);
        queue.flush_at = at;
        queue.by_tail = by_tail;
        ctx.set_timer(at, (q as u64) << 32 | queue.gen as u64);
    }

    /// The number on egress `out` of queue `q` (a queue of `out`).
    pub fn local(&self, out: u16, q: u32) -> u16 {
        (q - self.base[out as usize]) as u16
    }

    /// The queue whose timer `token` is, if that timer is still current: the queue, and
    /// whether its flush is the TAIL's.
    pub fn due(&self, token: u64) -> Option<(u32, bool)> {
        let q = (token >> 32) as u32;
        let gen = token as u32;
        let queue = self.queues.get(q as usize)?;
        if !queue.busy || queue.gen != gen {
            return None;
        }
        Some((q, queue.by_tail))
    }

    /// Releases the packets of queue `q` to its egress and frees it; gives its `owner` and
    /// flow key as [`allocate`](Self::allocate) took them.
    pub fn release(&mut self, ctx: &mut LbCtx, q: u32) -> (u32, u32) {
        let queue = self.queues[q as usize];
        let port = self
            .base
            .iter()
            .rposition(|&b| b != u32::MAX && b <= q)
            .expect("queue of a host port");
        ctx.release(port as u16, (q - self.base[port]) as u16);
        self.queues[q as usize] = Queue {
            gen: queue.gen.wrapping_add(1),
            ..Queue::default()
        };
        (queue.owner, queue.owner_key)
    }

    /// Reorder queues of local port `port` in use now.
    pub fn in_use(&self, port: u16) -> usize {
        match self.base.get(port as usize) {
            Some(&b) if b != u32::MAX => self.queues[b as usize..(b + self.per_port) as usize]
                .iter()
                .filter(|q| q.busy)
                .count(),
            _ => 0,
        }
    }
}

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

/// Destination-ToR state of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RxFlow {
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

pub(super) const RX_EMPTY: RxFlow = RxFlow {
    key: 0,
    epoch: 0,
    phase: 0,
    phase0_seen: false,
    phase0_tx: 0,
    phase0_rx: Time::ZERO,
    tail_ts: 0,
    queue: None,
};

impl ConWeave {
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
    pub(super) fn destination(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, out: u16) -> Ingress {
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
                self.reorder.arm(ctx, q, at, flag == FLAG_TAIL);
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
                        queue: self.reorder.local(out, q),
                    }
                }
                None => match self.reorder.allocate(out, key, slot as u32) {
                    Some(q) => {
                        f.queue = Some(q);
                        let at = if f.phase0_seen {
                            f.phase0_rx
                                + Time::from_ns(ts_gap(stamp, f.phase0_tx))
                                + self.cfg.extra_flush
                        } else {
                            now + self.cfg.default_wait
                        };
                        self.reorder.arm(ctx, q, at, false);
                        self.counters.held += 1;
                        Ingress::Hold {
                            queue: self.reorder.local(out, q),
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

    /// Releases queue `q` to its egress and frees it; the owning flow (if still in the table)
    /// moves to phase 1. `timeout`: flushed by its timer rather than the TAIL.
    pub(super) fn flush(&mut self, ctx: &mut LbCtx, q: u32, timeout: bool) {
        let (owner, owner_key) = self.reorder.release(ctx, q);
        let f = &mut self.rx[owner as usize];
        if f.key == owner_key && f.queue == Some(q) {
            f.queue = None;
            f.phase = 1;
        }
        if timeout {
            self.counters.flushes_on_timeout += 1;
        } else {
            self.counters.flushes_on_tail += 1;
        }
    }

    /// Reorder queues of local port `port` in use now.
    pub fn queues_in_use(&self, port: u16) -> usize {
        self.reorder.in_use(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::conweave::header::{pack_data, FLAG_DATA};
    use crate::lb::conweave::tests::{data, leaf};
    use crate::lb::conweave::ConWeaveConfig;
    use crate::lb::{LbAction, SwitchScheme, TestSwitch};

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
}
