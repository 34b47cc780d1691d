//! The receivers' resequencing buffer, in front of go-back-N, for host-side schemes that ask
//! for one (Presto's GRO rule; see `lb/presto.rs`).
//!
//! A data packet that arrives ahead of the next expected byte, in a later flowcell than that
//! byte, is held instead of reaching the transport (reordering between flowcells). Every
//! other packet reaches the transport at once, and after it every held packet that is now in
//! order, old, or in the expected byte's flowcell (a hole inside a flowcell is a loss: it goes
//! to go-back-N at once). Held packets go to the transport in sequence order, where go-back-N
//! deals with them as with any out-of-order arrival, when the flow's next expected byte has
//! not moved for `timeout` (since a packet was first held, or since it last moved), or when
//! one more packet would exceed `limit`. The buffer is host memory: it costs no switch buffer.

use super::{Event, Simulation};
use crate::lb::Resequencing;
use crate::packet::Packet;
use crate::units::Time;
use std::collections::VecDeque;

/// Held packets of every flow.
pub(super) struct Resequencer {
    rule: Resequencing,
    flows: Vec<FlowHold>,
    /// Packets that were held and then released to the transport when the gap before them
    /// closed (stale copies included), not by a timeout or an overflow.
    pub(super) resequenced: u64,
    /// Packets pushed to the transport out of order by a timeout or an overflow.
    pub(super) flushed: u64,
}

#[derive(Default)]
struct FlowHold {
    /// Held packets, in increasing sequence order.
    held: VecDeque<Packet>,
    /// When the held packets are pushed to the transport if nothing moves before.
    deadline: Time,
    /// Time of the pending `ReseqTimeout` event of the flow (`Time::MAX`: none).
    timer_at: Time,
}

impl Resequencer {
    pub(super) fn new(rule: Resequencing, flows: usize) -> Resequencer {
        Resequencer {
            rule,
            flows: (0..flows)
                .map(|_| FlowHold {
                    timer_at: Time::MAX,
                    ..Default::default()
                })
                .collect(),
            resequenced: 0,
            flushed: 0,
        }
    }

    /// Packets held when the run ended.
    pub(super) fn packets_held(&self) -> usize {
        self.flows.iter().map(|f| f.held.len()).sum()
    }
}

impl Simulation {
    /// A data packet reached its receiver, host `h`: hold it, or pass it (and what it frees)
    /// to the transport.
    pub(super) fn resequence(&mut self, h: u32, pkt: &Packet) {
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        let f = pkt.flow as usize;
        let expected = self.flows[f].expected();
        let cell = reseq.rule.flowcell;
        let hold = &mut reseq.flows[f];
        if pkt.seq > expected && pkt.seq / cell > expected / cell {
            if hold.held.len() < reseq.rule.limit as usize {
                // Packets of a later flowcell mostly arrive in order: search from the back. A
                // copy of a packet already held is dropped here (the transport would discard
                // it as well).
                let at = hold.held.partition_point(|p| p.seq < pkt.seq);
                if hold.held.get(at).is_some_and(|p| p.seq == pkt.seq) {
                    self.payload_discarded += pkt.payload as u64;
                } else {
                    hold.held.insert(at, *pkt);
                }
                if hold.held.len() == 1 {
                    hold.deadline = self.now + reseq.rule.timeout;
                    self.arm_reseq_timer(f);
                }
                return;
            }
            // Full: everything held goes to the transport, then this packet.
            self.flush_held(h, f);
            self.transport_receive(h, pkt);
            return;
        }
        self.transport_receive(h, pkt);
        self.release_in_order(h, f, expected);
    }

    /// Passes to the transport the held packets of flow `f` that are now in order, already
    /// received, or in the flowcell of the next expected byte; restarts the timeout if the
    /// next expected byte moved from `before` and packets are still held.
    fn release_in_order(&mut self, h: u32, f: usize, before: u64) {
        loop {
            let reseq = self.reseq.as_deref_mut().expect("resequencer");
            let cell = reseq.rule.flowcell;
            let expected = self.flows[f].expected();
            let hold = &mut reseq.flows[f];
            match hold.held.front() {
                Some(p) if p.seq <= expected || p.seq / cell == expected / cell => {
                    let p = hold.held.pop_front().expect("non-empty");
                    reseq.resequenced += 1;
                    self.transport_receive(h, &p);
                }
                _ => break,
            }
        }
        let expected = self.flows[f].expected();
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        let hold = &mut reseq.flows[f];
        if expected >= self.flows[f].spec.size {
            hold.held = VecDeque::new(); // complete: free the buffer's memory
        } else if expected > before && !hold.held.is_empty() {
            hold.deadline = self.now + reseq.rule.timeout;
            self.arm_reseq_timer(f);
        }
    }

    /// Pushes every held packet of flow `f` to the transport, in sequence order.
    fn flush_held(&mut self, h: u32, f: usize) {
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        let mut held = std::mem::take(&mut reseq.flows[f].held);
        reseq.flushed += held.len() as u64;
        while let Some(p) = held.pop_front() {
            self.transport_receive(h, &p);
        }
        // Give the buffer (and its capacity) back, unless the flow is complete.
        if self.flows[f].expected() < self.flows[f].spec.size {
            let reseq = self.reseq.as_deref_mut().expect("resequencer");
            reseq.flows[f].held = held;
        }
    }

    /// Makes sure a timeout event is pending for flow `f` no later than its deadline.
    fn arm_reseq_timer(&mut self, f: usize) {
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        let hold = &mut reseq.flows[f];
        if hold.timer_at > hold.deadline {
            hold.timer_at = hold.deadline;
            self.events
                .schedule(hold.deadline, Event::ReseqTimeout(f as u32));
        }
    }

    /// The resequencing timer of flow `f` fired.
    pub(super) fn reseq_timeout(&mut self, f: u32) {
        let now = self.now;
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        let hold = &mut reseq.flows[f as usize];
        if hold.timer_at != now {
            return; // superseded by an earlier one
        }
        hold.timer_at = Time::MAX;
        if hold.held.is_empty() {
            return;
        }
        if hold.deadline > now {
            self.arm_reseq_timer(f as usize);
            return;
        }
        let h = self.host_index[self.flows[f as usize].spec.dst as usize];
        self.flush_held(h, f as usize);
    }
}
