//! The receivers' resequencing buffer, in front of the transport (whose go-back-N discards
//! what arrives out of order), for host-side schemes that ask for one (Presto's GRO rule; see
//! `lb/presto.rs`).
//!
//! A data packet that arrives ahead of the next expected byte, in a later flowcell than that
//! byte, is held instead of reaching the transport (reordering between flowcells). Every
//! other packet reaches the transport at once, and after it every held packet that is now in
//! order, old, or in the expected byte's flowcell (a hole inside a flowcell is a loss: it goes
//! to the transport at once). Held packets go to the transport in sequence order, where it
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
                    self.totals.payload_discarded += pkt.payload as u64;
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

#[cfg(test)]
mod tests {
    //! The resequencer in isolation: packets of one flow are handed to it at chosen times and
    //! its timer events are fired when due, with no traffic in the fabric.
    use super::*;
    use crate::packet::PacketKind;

    /// Presto with flowcells of 4 packets (4000 B) and a 10 us timeout; one 16 KB flow from
    /// host 0 to host 2 that starts after the test (its sender stays idle).
    fn sim() -> Simulation {
        let text = r#"
            seed = 1
            [topology]
            kind = "leaf_spine"
            leaves = 2
            spines = 2
            hosts_per_leaf = 2
            host_link = { rate = "100Gbps", delay = "1us" }
            fabric_link = { rate = "100Gbps", delay = "1us" }
            [cc]
            kind = "none"
            [lb]
            scheme = "presto"
            flowcell = "4KB"
            reorder_timeout = "10us"
            [[traffic]]
            kind = "scripted"
            flows = [{ src = 0, dst = 2, size = "16KB", start = "1s" }]
        "#;
        let spec =
            crate::spec::Spec::from_toml(text, "reseq.toml").unwrap_or_else(|e| panic!("{e}"));
        let sc = crate::spec::Scenario::prepare(spec, std::path::Path::new("."))
            .unwrap_or_else(|e| panic!("{e}"));
        let sim = crate::run::build_simulation(sc).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sim.reseq.as_ref().unwrap().rule.flowcell, 4_000);
        sim
    }

    /// Fires flow 0's resequencing timer at every time it is due up to `until`, as the event
    /// loop would.
    fn fire_due(sim: &mut Simulation, until: Time) {
        loop {
            let at = sim.reseq.as_ref().unwrap().flows[0].timer_at;
            if at > until {
                return;
            }
            sim.now = at;
            sim.reseq_timeout(0);
        }
    }

    /// Data packet `seq` (1000 B of payload) of flow 0 reaches host 2 at `at_ns`.
    fn arrive(sim: &mut Simulation, at_ns: u64, seq: u64) {
        let at = Time::from_ns(at_ns);
        fire_due(sim, at);
        sim.now = at;
        let mut p = Packet::new(PacketKind::Data);
        (p.flow, p.src, p.dst, p.seq, p.payload, p.wire_bytes) = (0, 0, 2, seq, 1000, 1048);
        let h = sim.host_index[2];
        sim.resequence(h, &p);
    }

    fn held(sim: &Simulation) -> usize {
        sim.reseq.as_ref().unwrap().flows[0].held.len()
    }

    fn counts(sim: &Simulation) -> (u64, u64) {
        let r = sim.reseq.as_ref().unwrap();
        (r.resequenced, r.flushed)
    }

    /// A held packet of the flowcell the expected byte has just entered, with a hole before
    /// it, is a loss inside that flowcell: it goes to the transport (and go-back-N) at once,
    /// not at the timeout. Checked to fail with the flowcell test of `release_in_order`
    /// removed (the packet then stays held until the timeout).
    #[test]
    fn a_hole_inside_the_expected_flowcell_goes_to_go_back_n_at_once() {
        let mut sim = sim();
        // Packet 5 (flowcell 1) arrives first: held.
        arrive(&mut sim, 0, 5_000);
        assert_eq!(held(&sim), 1);
        // Packets 0..3 complete flowcell 0; packet 4 is lost. The expected byte (4000) is now
        // in flowcell 1, like the held packet: released at once, out of order.
        for seq in 0..4 {
            arrive(&mut sim, 1_000, seq * 1_000);
        }
        assert_eq!(sim.flows[0].expected(), 4_000);
        assert_eq!(held(&sim), 0, "released at 1 us, 9 us before the timeout");
        assert_eq!(counts(&sim), (1, 0));
        // The transport saw it ahead of the expected byte: discarded, a NACK for byte 4000.
        assert_eq!(sim.totals.payload_discarded, 1_000);
        assert_eq!(sim.flows[0].last_nack(), 4_000);
        // No timer is left to flush anything.
        fire_due(&mut sim, Time::from_ms(1));
        assert_eq!(counts(&sim), (1, 0));
    }

    /// The timeout counts from the last move of the expected byte, not from when the packet
    /// was held: a flowcell that trickles in, every gap shorter than the timeout but the
    /// whole longer, is resequenced without a flush. The timeout still fires when the expected
    /// byte stops moving. Checked to fail with the restart removed from `release_in_order`
    /// (restarted only when a held packet is released: the held packet is then flushed at
    /// 10 us, out of order).
    #[test]
    fn the_timeout_restarts_when_the_expected_byte_moves() {
        let mut sim = sim();
        // Packet 8 (flowcell 2) is held at 0 (deadline 10 us).
        arrive(&mut sim, 0, 8_000);
        // Packets 0, 1, 2 every 6 us, then 3..7 at 24 us: 24 us in all, 6 us between moves.
        for (at_us, seq) in [(6, 0), (12, 1), (18, 2)] {
            arrive(&mut sim, at_us * 1_000, seq * 1_000);
            assert_eq!(held(&sim), 1, "still held at {at_us} us");
        }
        for seq in 3..8 {
            arrive(&mut sim, 24_000, seq * 1_000);
        }
        assert_eq!(sim.flows[0].expected(), 9_000);
        assert_eq!(counts(&sim), (1, 0), "resequenced, never flushed");
        assert_eq!(
            sim.totals.payload_discarded, 0,
            "the transport saw it in order"
        );
        // Packet 12 (flowcell 3) is held at 30 us, and nothing moves: flushed at 40 us.
        arrive(&mut sim, 30_000, 12_000);
        fire_due(&mut sim, Time::from_ns(39_999));
        assert_eq!(held(&sim), 1);
        fire_due(&mut sim, Time::from_us(40));
        assert_eq!((held(&sim), counts(&sim)), (0, (1, 1)));
        assert_eq!(sim.totals.payload_discarded, 1_000);
    }
}
