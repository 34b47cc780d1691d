//! The receivers' resequencing buffer, in front of go-back-N, for host-side schemes that ask
//! for one (Presto's GRO rule; see `lb/presto.rs`).
//!
//! A data packet that arrives ahead of the next expected byte, in a later flowcell than that
//! byte, is held instead of reaching the transport (reordering between flowcells). Every
//! other packet reaches the transport at once, and after it every held packet that is now in
//! order (or old). Held packets go to the transport in sequence order, where go-back-N deals
//! with them as with any out-of-order arrival, when the flow has made no progress for
//! `timeout` since the last packet was held or released, or when one more packet would
//! exceed `limit`. The buffer is host memory: it costs no switch buffer.

use super::{Event, Simulation};
use crate::lb::Resequencing;
use crate::packet::Packet;
use crate::units::Time;

/// Held packets of every flow.
pub(super) struct Resequencer {
    rule: Resequencing,
    flows: Vec<FlowHold>,
    /// Packets that were held and then reached the transport in order.
    pub(super) resequenced: u64,
    /// Packets pushed to the transport out of order by a timeout or an overflow.
    pub(super) flushed: u64,
}

#[derive(Default)]
struct FlowHold {
    /// Held packets, in decreasing sequence order (the next to release is last).
    held: Vec<Packet>,
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
        let Some(reseq) = self.reseq.as_deref_mut() else {
            self.transport_receive(h, pkt);
            return;
        };
        let f = pkt.flow as usize;
        let expected = self.flows[f].expected();
        let cell = reseq.rule.flowcell;
        let hold = &mut reseq.flows[f];
        if pkt.seq > expected && pkt.seq / cell > expected / cell {
            if hold.held.len() < reseq.rule.limit as usize {
                // Keep decreasing order; a copy of a packet already held is dropped here (the
                // transport would discard it as well).
                match hold.held.binary_search_by(|p| pkt.seq.cmp(&p.seq)) {
                    Ok(_) => self.payload_discarded += pkt.payload as u64,
                    Err(i) => hold.held.insert(i, *pkt),
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
        self.release_in_order(h, f);
    }

    /// Passes the held packets of flow `f` that are now in order (or already received) to
    /// the transport.
    fn release_in_order(&mut self, h: u32, f: usize) {
        let mut released = false;
        loop {
            let reseq = self.reseq.as_deref_mut().expect("resequencer");
            let hold = &mut reseq.flows[f];
            match hold.held.last() {
                Some(p) if p.seq <= self.flows[f].expected() => {
                    let p = hold.held.pop().expect("non-empty");
                    reseq.resequenced += 1;
                    released = true;
                    self.transport_receive(h, &p);
                }
                _ => break,
            }
        }
        if released {
            let reseq = self.reseq.as_deref_mut().expect("resequencer");
            let hold = &mut reseq.flows[f];
            if !hold.held.is_empty() {
                hold.deadline = self.now + reseq.rule.timeout;
                self.arm_reseq_timer(f);
            }
        }
    }

    /// Pushes every held packet of flow `f` to the transport, in sequence order.
    fn flush_held(&mut self, h: u32, f: usize) {
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        let mut held = std::mem::take(&mut reseq.flows[f].held);
        reseq.flushed += held.len() as u64;
        while let Some(p) = held.pop() {
            self.transport_receive(h, &p);
        }
        // Give the vector (and its capacity) back.
        let reseq = self.reseq.as_deref_mut().expect("resequencer");
        reseq.flows[f].held = held;
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
