//! Bounded reorder queues at a destination ToR, for any switch-side scheme that restores the
//! order of packets before the hosts (ConWeave, LBoDSN).
//!
//! A scheme whose capabilities ask for `reorder_queues_per_port` queues holds one
//! [`ReorderQueues`] and, for a packet that must wait, [`allocate`](ReorderQueues::allocate)s a
//! queue (one of the flow's hashed choices on the packet's egress; `None`: all taken, let the
//! packet pass), answers `Ingress::Hold { queue: local(out, q) }`,
//! [`arm`](ReorderQueues::arm)s the queue's flush time (again whenever it learns better),
//! passes every timer token it gets to [`due`](ReorderQueues::due), and
//! [`release`](ReorderQueues::release)s a queue that is due or whose flow is in order again:
//! its packets go out to the host in arrival order. The queues are physical: held packets stay
//! charged to the switch buffer.

use crate::engine::mix64;
use crate::lb::{LbCtx, PortDir};
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
