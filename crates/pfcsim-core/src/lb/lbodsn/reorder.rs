//! Reordering at the destination ToR, on the reorder queues ConWeave uses
//! ([`crate::lb::reorder::ReorderQueues`], shared, not copied).
//!
//! Per flow (a hashed table): the epoch `cur` whose packets pass. A packet of `cur` passes;
//! if it is the TAIL, `cur` moves on (at once, or when the flow's reorder queue flushes 1 ns
//! later if it holds packets). A packet of a newer epoch overtook the TAIL: it is held in a
//! reorder queue of its egress (allocated from the flow's hashed choices; none free: it
//! passes, counted as a fallback), which flushes when the TAIL arrives or `default_wait` after
//! the first hold; the flush moves `cur` past the newest epoch held. Older packets pass. With
//! `reorder_queues = 0` nothing is held.

use super::header::Data;
use super::Lbodsn;
use crate::lb::{Ingress, LbCtx};
use crate::units::Time;

/// Destination-ToR state of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxFlow {
    pub key: u32,
    pub cur: u8,
    /// Newest epoch held, and whether its TAIL is among the held packets.
    top: u8,
    top_tail: bool,
    /// Reorder queue (switch-wide index) while packets are held.
    pub queue: Option<u32>,
}

impl Lbodsn {
    /// The reordering verdict for a data packet of flow `key` with header `d`, towards local
    /// egress `out`.
    pub(super) fn reorder(&mut self, ctx: &mut LbCtx, key: u32, d: Data, out: u16) -> Ingress {
        if self.rx.is_empty() {
            return Ingress::Forward;
        }
        let slot = key as usize % self.rx.len();
        let mut f = self.rx[slot];
        if f.key != key {
            // A new flow (or one evicting another, whose queue flushes on its timer).
            f = RxFlow {
                key,
                cur: d.epoch,
                ..RxFlow::default()
            };
        }
        let ahead = d.epoch.wrapping_sub(f.cur) & 3;
        let verdict = match (ahead, f.queue) {
            (0, queue) => {
                if d.tail {
                    match queue {
                        Some(q) => {
                            self.reorder_queues
                                .arm(ctx, q, ctx.now + Time::from_ns(1), true)
                        }
                        None => f.cur = (f.cur + 1) & 3,
                    }
                }
                Ingress::Forward
            }
            (1, None) if self.reorder_enabled => {
                match self.reorder_queues.allocate(out, key, slot as u32) {
                    Some(q) => {
                        f.queue = Some(q);
                        let at = ctx.now + self.default_wait;
                        self.reorder_queues.arm(ctx, q, at, false);
                        f.top = d.epoch;
                        f.top_tail = d.tail;
                        self.counters.held += 1;
                        Ingress::Hold {
                            queue: self.reorder_queues.local(out, q),
                        }
                    }
                    None => {
                        self.counters.queue_fallbacks += 1;
                        Ingress::Forward
                    }
                }
            }
            (1 | 2, Some(q)) => {
                if d.epoch == f.top {
                    f.top_tail |= d.tail;
                } else {
                    f.top = d.epoch;
                    f.top_tail = d.tail;
                }
                self.counters.held += 1;
                Ingress::Hold {
                    queue: self.reorder_queues.local(out, q),
                }
            }
            _ => Ingress::Forward,
        };
        self.rx[slot] = f;
        verdict
    }

    /// Releases reorder queue `q`; its flow now passes the newest epoch it held.
    pub(super) fn flush(&mut self, ctx: &mut LbCtx, q: u32, by_tail: bool) {
        let (owner, owner_key) = self.reorder_queues.release(ctx, q);
        if let Some(f) = self.rx.get_mut(owner as usize) {
            if f.key == owner_key && f.queue == Some(q) {
                f.queue = None;
                f.cur = (f.top + f.top_tail as u8) & 3;
            }
        }
        if by_tail {
            self.counters.flushes_on_tail += 1;
        } else {
            self.counters.flushes_on_timeout += 1;
        }
    }

    /// Reorder queues of local port `port` in use now.
    pub fn queues_in_use(&self, port: u16) -> usize {
        self.reorder_queues.in_use(port)
    }
}
