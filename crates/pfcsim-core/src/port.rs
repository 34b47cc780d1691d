//! A port: one end of a full-duplex link and its egress, with the priority queues, the PFC
//! pause state and the counters that every hop of a packet touches.
//!
//! The simulation (`crate::sim`) owns the ports and drives them; load balancers and the MMU
//! only read them (through [`PortState`]'s accessors) or size by [`N_PRIO`].

use crate::metrics::PortRecord;
use crate::packet::{Packet, PacketArena, PacketId};
use crate::units::{Rate, Time};
use std::collections::VecDeque;

/// Number of PFC priority classes (queues per port).
pub const N_PRIO: usize = 8;
/// The priority of the strict-priority control queue.
pub const CONTROL_PRIO: u8 = 0;

/// One priority queue of an egress port, with everything an enqueue or dequeue touches: one
/// cache line (aligned to one, so that a hop of a packet touches one line of its queue).
#[derive(Default)]
#[repr(C, align(64))]
pub(crate) struct PrioQueue {
    pub(crate) packets: VecDeque<PacketId>,
    pub(crate) bytes: u64,
    /// Total time this priority has been paused, up to `paused_since` of a current pause.
    pub(crate) pause_clock: u64,
    /// `pause_clock` in (wrapping) nanoseconds, as packets carry it: kept so that the
    /// division is done once per pause, not at every enqueue and dequeue.
    pub(crate) pause_clock_ns: u32,
    pub(crate) paused_since: Time,
}

/// Read-only view of a port, also handed to load balancers.
///
/// The fields a packet's hop touches come first, packed into the first three cache lines, the
/// rarer ones (ECN marking above `ecn_kmin`, pauses) in the fourth, then one line per priority
/// queue; the port is aligned to a cache line, so each of these is one line of memory
/// (checked by a test). A hop then touches few lines of its port: in a large fabric, whose
/// thousands of ports do not fit the cache, each line is a miss (an unaligned port spread
/// each of them over two lines).
#[repr(C, align(64))]
pub struct PortState {
    // Line 1: the serializer and the queue totals.
    /// The serializer is busy until this time (the last packet started ends then).
    pub(crate) busy_until: Time,
    /// Time of the pending `TxDone` wake-up (`Time::MAX`: none). A `TxDone` at another time
    /// is stale and ignored.
    pub(crate) wake_at: Time,
    pub(crate) total_queue_bytes: u64,
    /// Time of the last change of `total_queue_bytes`.
    pub(crate) queue_changed: Time,
    /// Picoseconds per byte on the wire ([`Rate::ps_per_byte`]; 0: not a whole number, the
    /// serialization time is then computed from `rate`).
    ps_per_byte: u64,
    pub(crate) delay: Time,
    pub(crate) tx_packets: u64,
    pub(crate) tx_bytes: u64,
    // Line 2: the wire and the PFC frames.
    pub(crate) in_flight: VecDeque<(Time, PacketId)>,
    /// PFC frames waiting to go out; they go before anything else.
    pub(crate) pfc_out: VecDeque<PacketId>,
    // Line 3: who is at either end, the scheduler's bits, the queue statistics.
    /// Integral of `total_queue_bytes` over time (byte-picoseconds) up to `queue_changed`.
    pub(crate) queue_integral: u128,
    /// The node owning this port, and the node at the far end of the link.
    pub(crate) owner: NodeRef,
    pub(crate) peer_ref: NodeRef,
    pub(crate) node: u32,
    pub(crate) peer: u32,
    /// Bit `q` set: the queue of priority `q` is not empty.
    pub(crate) nonempty: u8,
    /// Bit `q` set: priority `q` of this egress is paused by the peer.
    pub(crate) paused: u8,
    /// Data priority the round-robin tries first.
    pub(crate) rr_next: u8,
    pub(crate) peak_queue_bytes: u64,
    /// RED parameters of this egress: marking starts above `ecn_kmin` bytes (u64::MAX: off).
    pub(crate) ecn_kmin: u64,
    // Line 4: ECN above `ecn_kmin`, the link's rate, pauses, the peer for load balancers.
    pub(crate) ecn_kmax: u64,
    pub(crate) ecn_pmax: f64,
    rate: Rate,
    pub(crate) paused_any_since: Time,
    pub(crate) peer_node: u32,
    // Lines 5 to 12: the priority queues, one line each.
    pub(crate) prio: [PrioQueue; N_PRIO],
    /// The counters not kept above.
    pub(crate) rec: PortRecord,
}

impl PortState {
    /// Bytes waiting in the egress queue of priority `prio`.
    pub fn queue_bytes(&self, prio: u8) -> u64 {
        self.prio[prio as usize].bytes
    }
    /// Bytes waiting in all egress queues.
    pub fn total_queue_bytes(&self) -> u64 {
        self.total_queue_bytes
    }
    /// Whether the peer has paused priority `prio` of this egress.
    pub fn is_paused(&self, prio: u8) -> bool {
        self.paused & (1 << prio) != 0
    }
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Changes the link's rate (a fault degrading it).
    pub(crate) fn set_rate(&mut self, rate: Rate) {
        self.rate = rate;
        self.ps_per_byte = rate.ps_per_byte().unwrap_or(0);
    }

    /// The time to serialize `bytes` on this port's link ([`Rate::tx_time`]).
    #[inline]
    pub(crate) fn tx_time(&self, bytes: u64) -> Time {
        if self.ps_per_byte != 0 {
            Time(bytes * self.ps_per_byte)
        } else {
            self.rate.tx_time(bytes)
        }
    }
    pub fn delay(&self) -> Time {
        self.delay
    }
    /// Node id at the far end of the link.
    pub fn peer_node(&self) -> u32 {
        self.peer_node
    }

    /// Sets the bytes waiting in this egress (unit tests of schemes that read queue lengths).
    #[cfg(test)]
    pub(crate) fn set_test_queue_bytes(&mut self, bytes: u64) {
        self.total_queue_bytes = bytes;
    }

    /// Pauses (or resumes) priority `prio` and sets its queued bytes (unit tests of schemes
    /// that read pause states).
    #[cfg(test)]
    pub(crate) fn set_test_pause(&mut self, prio: u8, paused: bool, queued: u64) {
        if paused {
            self.paused |= 1 << prio;
        } else {
            self.paused &= !(1 << prio);
        }
        self.prio[prio as usize].bytes = queued;
    }

    /// An idle port of a link of `rate` and `delay`: at node `node` (its `owner`), facing
    /// port `peer` of node `peer_node` (`peer_ref`), with the RED parameters `ecn` (kmin,
    /// kmax, pmax; kmin `u64::MAX`: no marking) and its record `rec`.
    pub(crate) fn new(
        (owner, node): (NodeRef, u32),
        (peer_ref, peer_node, peer): (NodeRef, u32, u32),
        rate: Rate,
        delay: Time,
        (ecn_kmin, ecn_kmax, ecn_pmax): (u64, u64, f64),
        rec: PortRecord,
    ) -> PortState {
        PortState {
            owner,
            peer_ref,
            node,
            peer,
            peer_node,
            rate,
            ps_per_byte: rate.ps_per_byte().unwrap_or(0),
            delay,
            prio: Default::default(),
            tx_packets: 0,
            tx_bytes: 0,
            peak_queue_bytes: 0,
            pfc_out: VecDeque::new(),
            total_queue_bytes: 0,
            busy_until: Time::ZERO,
            wake_at: Time::MAX,
            rr_next: 1,
            paused: 0,
            nonempty: 0,
            paused_any_since: Time::ZERO,
            queue_integral: 0,
            queue_changed: Time::ZERO,
            in_flight: VecDeque::new(),
            ecn_kmin,
            ecn_kmax,
            ecn_pmax,
            rec,
        }
    }

    /// `n` idle ports of one switch (node 0) with links of `rate_bps` and `delay`, the port
    /// `i` leading to node `100 + i`: views for unit tests of schemes.
    #[cfg(test)]
    pub(crate) fn test_ports(n: usize, rate_bps: u64, delay: Time) -> Vec<PortState> {
        (0..n)
            .map(|i| {
                PortState::new(
                    (NodeRef::Switch(0), 0),
                    (NodeRef::Switch(1), 100 + i as u32, 0),
                    Rate(rate_bps),
                    delay,
                    (u64::MAX, u64::MAX, 0.0),
                    PortRecord::default(),
                )
            })
            .collect()
    }

    /// Total time priority `prio` has been paused up to `now`.
    #[inline]
    pub(crate) fn pause_clock(&self, prio: u8, now: Time) -> u64 {
        let q = &self.prio[prio as usize];
        if self.is_paused(prio) {
            q.pause_clock + (now - q.paused_since).ps()
        } else {
            q.pause_clock
        }
    }

    /// Accounts the queue occupancy since its last change, up to `now`.
    #[inline]
    pub(crate) fn integrate_queue(&mut self, now: Time) {
        self.queue_integral +=
            self.total_queue_bytes as u128 * (now - self.queue_changed).ps() as u128;
        self.queue_changed = now;
    }

    /// The pause clock in (wrapping) nanoseconds, as packets carry it.
    #[inline]
    pub(crate) fn pause_clock_ns(&self, prio: u8, now: Time) -> u32 {
        if self.is_paused(prio) {
            (self.pause_clock(prio, now) / 1_000) as u32
        } else {
            self.prio[prio as usize].pause_clock_ns
        }
    }

    #[inline(always)]
    pub(crate) fn enqueue(&mut self, prio: u8, pid: PacketId, pkt: &mut Packet, now: Time) {
        self.integrate_queue(now);
        pkt.pause_mark = self.pause_clock_ns(prio, now);
        let q = &mut self.prio[prio as usize];
        q.packets.push_back(pid);
        q.bytes += pkt.wire_bytes as u64;
        self.nonempty |= 1 << prio;
        self.total_queue_bytes += pkt.wire_bytes as u64;
        self.peak_queue_bytes = self.peak_queue_bytes.max(self.total_queue_bytes);
    }

    /// Whether a packet of priority `prio` arriving now would be taken out of its queue at
    /// once: the serializer is idle, nothing is queued (no packet, no PFC frame) and `prio` is
    /// not paused (the control priority never is).
    #[inline(always)]
    pub(crate) fn takes_at_once(&self, prio: u8, now: Time) -> bool {
        self.busy_until <= now
            && self.total_queue_bytes == 0
            && self.pfc_out.is_empty()
            && (prio == CONTROL_PRIO || !self.is_paused(prio))
    }

    /// [`PortState::enqueue`] then [`PortState::dequeue`] of `pkt` at `now`, on a port that
    /// [`PortState::takes_at_once`]: the same state of the queues after both (the time of
    /// their last change, their peak, the packet's pause mark; it waited for no pause),
    /// without going through the queue.
    #[inline(always)]
    pub(crate) fn pass_through(&mut self, prio: u8, pkt: &mut Packet, now: Time) {
        debug_assert!(self.takes_at_once(prio, now));
        // The integral gains nothing: the queues hold no bytes before, nor after.
        self.queue_changed = now;
        self.peak_queue_bytes = self.peak_queue_bytes.max(pkt.wire_bytes as u64);
        pkt.pause_mark = self.pause_clock_ns(prio, now);
    }

    /// Removes the head of queue `prio`, charging its PFC wait to the packet.
    #[inline(always)]
    pub(crate) fn dequeue(&mut self, prio: u8, arena: &mut PacketArena, now: Time) -> PacketId {
        self.integrate_queue(now);
        let q = &mut self.prio[prio as usize];
        let pid = q
            .packets
            .pop_front()
            .expect("dequeue from a non-empty queue");
        // The next packet of the queue leaves a serialization time from now at the earliest:
        // its line is asked for now.
        if let Some(&next) = q.packets.front() {
            crate::engine::prefetch(arena.get(next));
        }
        let pkt = arena.get_mut(pid);
        q.bytes -= pkt.wire_bytes as u64;
        if q.packets.is_empty() {
            self.nonempty &= !(1 << prio);
        }
        self.total_queue_bytes -= pkt.wire_bytes as u64;
        let waited = self.pause_clock_ns(prio, now).wrapping_sub(pkt.pause_mark);
        pkt.pfc_wait_ns = pkt.pfc_wait_ns.saturating_add(waited);
        pid
    }
}

/// Which node a node id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeRef {
    Host(u32),
    Switch(u32),
}

#[cfg(test)]
mod tests {
    use super::{PortState, CONTROL_PRIO};
    use crate::packet::{Packet, PacketArena, PacketKind};
    use crate::units::{Rate, Time};

    /// A data packet of `wire_bytes` in `arena`.
    fn packet(arena: &mut PacketArena, wire_bytes: u16) -> crate::packet::PacketId {
        let mut p = Packet::new(PacketKind::Data);
        p.wire_bytes = wire_bytes;
        arena.alloc(p)
    }

    #[test]
    fn passing_through_an_idle_egress_leaves_what_enqueue_then_dequeue_leaves() {
        for prio in [CONTROL_PRIO, 3] {
            let mut ports = PortState::test_ports(2, 100_000_000_000, Time(1_000_000));
            let mut arena = PacketArena::default();
            // A history: an earlier packet queued for 5 us (the integral and the peak are
            // not zero), and priority `prio` paused for a while before (its clock neither).
            for port in &mut ports {
                let early = packet(&mut arena, 3_000);
                port.enqueue(prio, early, arena.get_mut(early), Time(1_000_000));
                port.dequeue(prio, &mut arena, Time(6_000_000));
                port.prio[prio as usize].pause_clock = 7_654_321;
                port.prio[prio as usize].pause_clock_ns = 7_654;
            }
            let now = Time(9_000_000);
            let (direct, queued) = (packet(&mut arena, 1_048), packet(&mut arena, 1_048));
            let [a, b] = &mut ports[..] else {
                unreachable!()
            };
            assert!(a.takes_at_once(prio, now));
            a.pass_through(prio, arena.get_mut(direct), now);
            b.enqueue(prio, queued, arena.get_mut(queued), now);
            assert_eq!(b.dequeue(prio, &mut arena, now), queued);
            assert_eq!(a.queue_changed, b.queue_changed);
            assert_eq!(a.queue_integral, b.queue_integral);
            assert_eq!(a.peak_queue_bytes, b.peak_queue_bytes);
            assert_eq!(a.total_queue_bytes, b.total_queue_bytes);
            assert_eq!(a.nonempty, b.nonempty);
            let (pd, pq) = (arena.get(direct), arena.get(queued));
            assert_eq!(
                (pd.pause_mark, pd.pfc_wait_ns),
                (pq.pause_mark, pq.pfc_wait_ns)
            );
            assert_eq!(pd.pause_mark, 7_654);
        }
    }

    #[test]
    fn an_egress_takes_a_packet_at_once_only_when_idle_empty_and_unpaused() {
        let now = Time(1_000_000);
        let idle = || PortState::test_ports(1, 100_000_000_000, Time(1_000_000)).remove(0);
        assert!(idle().takes_at_once(3, now));
        let mut busy = idle();
        busy.busy_until = now + Time(1);
        assert!(!busy.takes_at_once(3, now));
        let mut queued = idle();
        queued.set_test_queue_bytes(1);
        assert!(!queued.takes_at_once(3, now));
        let mut frame = idle();
        frame.pfc_out.push_back(crate::packet::PacketId(0));
        assert!(!frame.takes_at_once(CONTROL_PRIO, now));
        let mut paused = idle();
        paused.set_test_pause(3, true, 0);
        assert!(!paused.takes_at_once(3, now));
        assert!(
            paused.takes_at_once(4, now),
            "another priority is not paused"
        );
        paused.set_test_pause(CONTROL_PRIO, true, 0);
        assert!(
            paused.takes_at_once(CONTROL_PRIO, now),
            "the control priority never waits"
        );
    }

    #[test]
    fn a_port_serializes_as_its_rate_does_before_and_after_a_change() {
        assert_eq!(Rate::gbps(100).ps_per_byte(), Some(80));
        assert_eq!(
            Rate::gbps(3).ps_per_byte(),
            None,
            "8 Tbit/s is not a multiple of it"
        );
        let mut port = PortState::test_ports(1, 100_000_000_000, Time(1_000_000)).remove(0);
        for rate in [
            Rate::gbps(100),
            Rate::gbps(3),
            Rate(7_777_777_777),
            Rate::gbps(25),
        ] {
            port.set_rate(rate);
            for bytes in [0, 1, 64, 1_048, 9_000, 1 << 30] {
                assert_eq!(
                    port.tx_time(bytes),
                    rate.tx_time(bytes),
                    "{rate:?} {bytes} B"
                );
            }
        }
    }

    #[test]
    fn the_hot_fields_of_a_port_fit_its_first_three_cache_lines() {
        assert_eq!(std::mem::align_of::<PortState>(), 64);
        assert_eq!(std::mem::offset_of!(PortState, in_flight), 64);
        assert_eq!(std::mem::offset_of!(PortState, queue_integral), 128);
        assert!(std::mem::offset_of!(PortState, ecn_kmin) + 8 <= 192);
        assert!(std::mem::offset_of!(PortState, peer_node) + 4 <= 256);
    }

    #[test]
    fn each_priority_queue_is_one_cache_line_of_its_own() {
        assert_eq!(std::mem::size_of::<super::PrioQueue>(), 64);
        assert_eq!(std::mem::align_of::<super::PrioQueue>(), 64);
        assert_eq!(std::mem::offset_of!(PortState, prio), 256);
    }
}
