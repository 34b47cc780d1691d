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

/// A packet on a wire: when it reaches the peer, and which it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InFlight {
    pub(crate) arrival: Time,
    pub(crate) pid: PacketId,
}

impl InFlight {
    /// What fills a ring's entries before they are used.
    const VACANT: InFlight = InFlight {
        arrival: Time::ZERO,
        pid: PacketId(u32::MAX),
    };
}

/// The packets on every link: each port's FIFO is a ring in this one pool ([`Wire`]).
///
/// A ring has a power-of-two number of entries at a place of its own in the pool; a full ring
/// moves to a place twice as large, and the place it leaves is taken by the next ring that
/// grows to that size, so the pool stops growing once the fabric's links have held their most
/// packets. An entry is named by its index in the pool, and an arrival event carries its
/// packet's: the event loop asks for the entry behind it (the next packet's, which the arrival
/// reads to schedule it) when it previews the event, without reading the port first. That
/// entry was written when the next packet was sent, a propagation delay before, and in a large
/// fabric it has left the cache by then.
#[derive(Debug, Default)]
pub(crate) struct WirePool {
    entries: Vec<InFlight>,
    /// Places left by rings that moved, by the log2 of their size.
    free: Vec<Vec<u32>>,
}

/// One port's FIFO of packets on the wire: `len` entries from `head` on, in the ring of `cap`
/// entries (a power of two, 0 before the first packet) at `base` in the [`WirePool`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wire {
    base: u32,
    cap: u32,
    head: u32,
    len: u32,
}

/// Entries of a port's first ring.
const FIRST_RING: u32 = 8;

impl Wire {
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Index in the pool of the entry `i` places behind the head (`i < cap`).
    #[inline]
    fn index(&self, i: u32) -> u32 {
        self.base + ((self.head + i) & (self.cap - 1))
    }

    /// The first packet on the wire, with its entry's index in the pool.
    #[inline]
    pub(crate) fn front(&self, pool: &WirePool) -> Option<(u32, InFlight)> {
        (self.len > 0).then(|| {
            let i = self.index(0);
            (i, pool.entries[i as usize])
        })
    }

    /// Takes the first packet off the wire.
    #[inline]
    pub(crate) fn pop_front(&mut self, pool: &WirePool) -> Option<InFlight> {
        if self.len == 0 {
            return None;
        }
        let first = pool.entries[self.index(0) as usize];
        self.head = (self.head + 1) & (self.cap - 1);
        self.len -= 1;
        Some(first)
    }

    /// Puts a packet on the wire, last; returns its entry's index in the pool.
    #[inline]
    pub(crate) fn push_back(&mut self, pool: &mut WirePool, packet: InFlight) -> u32 {
        if self.len == self.cap {
            pool.grow(self);
        }
        let i = self.index(self.len);
        pool.entries[i as usize] = packet;
        self.len += 1;
        i
    }

    /// The packets on the wire, first first.
    pub(crate) fn iter<'a>(&self, pool: &'a WirePool) -> impl Iterator<Item = InFlight> + 'a {
        let wire = *self;
        (0..wire.len).map(move |i| pool.entries[wire.index(i) as usize])
    }
}

impl WirePool {
    /// Moves `wire`'s packets to a ring twice its size (the first ring, if it has none).
    #[cold]
    fn grow(&mut self, wire: &mut Wire) {
        let cap = (wire.cap * 2).max(FIRST_RING);
        let size_class = cap.trailing_zeros() as usize;
        let base = match self.free.get_mut(size_class).and_then(Vec::pop) {
            Some(base) => base,
            None => {
                let base = self.entries.len();
                self.entries.resize(base + cap as usize, InFlight::VACANT);
                u32::try_from(self.entries.len()).expect("fewer than 2^32 packets on the wires");
                base as u32
            }
        };
        for i in 0..wire.len {
            self.entries[(base + i) as usize] = self.entries[wire.index(i) as usize];
        }
        if wire.cap > 0 {
            let old_class = wire.cap.trailing_zeros() as usize;
            if self.free.len() <= old_class {
                self.free.resize_with(old_class + 1, Vec::new);
            }
            self.free[old_class].push(wire.base);
        }
        *wire = Wire {
            base,
            cap,
            head: 0,
            len: wire.len,
        };
    }

    /// Asks for the entry after entry `index` ([`crate::engine::prefetch`]): the next packet
    /// on the same wire, unless the ring wraps there or has moved since (a hint either way).
    #[inline]
    pub(crate) fn prefetch_after(&self, index: u32) {
        if let Some(entry) = self.entries.get(index as usize + 1) {
            crate::engine::prefetch(entry);
        }
    }
}

/// Read-only view of a port, also handed to load balancers.
///
/// The fields a packet's hop touches come first: a packet arriving over the wire, or passing
/// through an idle egress, reads only the first two cache lines; one that is queued also the
/// third (the queue integral, the PFC frames, ECN above `ecn_kmin`) and its queue's line; the
/// rarer fields (the rate, pauses) are in the fourth, then one line per priority queue. The
/// port is aligned to a cache line, so each of these is one line of memory (checked by a
/// test). A hop then touches few lines of its port: in a large fabric, whose thousands of
/// ports do not fit the cache, each line is a miss (an unaligned port spread each of them
/// over two lines).
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
    // Line 2: the wire and its ends, the scheduler's bits, the peak (with line 1, all that a
    // packet passing through an idle egress, or arriving over the wire, reads of the port).
    /// The packets on the wire, in the [`WirePool`].
    pub(crate) wire: Wire,
    /// The node at the far end of the link, and the port there.
    pub(crate) peer_ref: NodeRef,
    /// The node owning this port.
    pub(crate) owner: NodeRef,
    pub(crate) peer: u32,
    /// Bit `q` set: the queue of priority `q` is not empty.
    pub(crate) nonempty: u8,
    /// Bit `q` set: priority `q` of this egress is paused by the peer.
    pub(crate) paused: u8,
    /// Data priority the round-robin tries first.
    pub(crate) rr_next: u8,
    /// PFC frames wait in `pfc_out` (kept with it by [`PortState::queue_pfc`] and
    /// [`PortState::next_pfc`]).
    pfc_waiting: bool,
    pub(crate) peak_queue_bytes: u64,
    /// RED parameters of this egress: marking starts above `ecn_kmin` bytes (u64::MAX: off).
    pub(crate) ecn_kmin: u64,
    pub(crate) node: u32,
    // Line 3: the queue integral, the PFC frames, ECN above `ecn_kmin`.
    /// Integral of `total_queue_bytes` over time (byte-picoseconds) up to `queue_changed`.
    pub(crate) queue_integral: u128,
    /// PFC frames waiting to go out; they go before anything else.
    pfc_out: VecDeque<PacketId>,
    pub(crate) ecn_kmax: u64,
    pub(crate) ecn_pmax: f64,
    // Line 4: the link's rate, pauses, the peer for load balancers.
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

    /// Asks for the two lines of the port that a packet passing through its idle egress touches
    /// ([`crate::engine::prefetch`]; a hint).
    #[inline]
    pub(crate) fn prefetch_hop(&self) {
        crate::engine::prefetch(&self.busy_until);
        crate::engine::prefetch(&self.wire);
    }

    /// Whether PFC frames wait to go out.
    #[inline]
    pub(crate) fn pfc_waiting(&self) -> bool {
        self.pfc_waiting
    }

    /// Queues a PFC frame to go out before anything else.
    pub(crate) fn queue_pfc(&mut self, pid: PacketId) {
        self.pfc_out.push_back(pid);
        self.pfc_waiting = true;
    }

    /// Takes the next PFC frame to go out, if any.
    #[inline]
    pub(crate) fn next_pfc(&mut self) -> Option<PacketId> {
        if !self.pfc_waiting {
            return None;
        }
        let pid = self.pfc_out.pop_front();
        self.pfc_waiting = !self.pfc_out.is_empty();
        pid
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
            pfc_waiting: false,
            total_queue_bytes: 0,
            busy_until: Time::ZERO,
            wake_at: Time::MAX,
            rr_next: 1,
            paused: 0,
            nonempty: 0,
            paused_any_since: Time::ZERO,
            queue_integral: 0,
            queue_changed: Time::ZERO,
            wire: Wire::default(),
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
            && !self.pfc_waiting
            && (prio == CONTROL_PRIO || !self.is_paused(prio))
    }

    /// [`PortState::enqueue`] then [`PortState::dequeue`] of `pkt` at `now`, on a port that
    /// [`PortState::takes_at_once`]: the same state of the queues after both (the time of
    /// their last change, their peak; the packet waited for no pause), without going through
    /// the queue. The packet's pause mark is left as it was: only a dequeue reads it, after
    /// the enqueue that sets it, so the mark the pair would leave is never read (and the
    /// queue's line, where the pause clock is, need not be).
    #[inline(always)]
    pub(crate) fn pass_through(&mut self, pkt: &Packet, now: Time) {
        // The integral gains nothing: the queues hold no bytes before, nor after.
        self.queue_changed = now;
        self.peak_queue_bytes = self.peak_queue_bytes.max(pkt.wire_bytes as u64);
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
            a.pass_through(arena.get(direct), now);
            b.enqueue(prio, queued, arena.get_mut(queued), now);
            assert_eq!(b.dequeue(prio, &mut arena, now), queued);
            assert_eq!(a.queue_changed, b.queue_changed);
            assert_eq!(a.queue_integral, b.queue_integral);
            assert_eq!(a.peak_queue_bytes, b.peak_queue_bytes);
            assert_eq!(a.total_queue_bytes, b.total_queue_bytes);
            assert_eq!(a.nonempty, b.nonempty);
            assert_eq!(arena.get(direct).pfc_wait_ns, arena.get(queued).pfc_wait_ns);
            // The pause marks differ (the pair set one), but no later hop can tell: the next
            // egress sets its own before it reads one. Both wait there 2 us paused.
            let mut next = PortState::test_ports(1, 100_000_000_000, Time(1_000_000));
            let next = &mut next[0];
            let later = Time(10_000_000);
            for pid in [direct, queued] {
                next.enqueue(prio, pid, arena.get_mut(pid), later);
                next.paused |= 1 << prio;
                next.prio[prio as usize].paused_since = later;
                let resumed = later + Time(2_000_000);
                let queue = &mut next.prio[prio as usize];
                queue.pause_clock += 2_000_000;
                queue.pause_clock_ns = (queue.pause_clock / 1_000) as u32;
                next.paused &= !(1 << prio);
                assert_eq!(next.dequeue(prio, &mut arena, resumed), pid);
            }
            assert_eq!(arena.get(direct).pfc_wait_ns, 2_000);
            assert_eq!(arena.get(queued).pfc_wait_ns, 2_000);
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
        frame.queue_pfc(crate::packet::PacketId(0));
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

    /// Wires (rings in one pool) against `VecDeque`s: random pushes and pops on a few wires,
    /// enough to grow their rings several times; every pop, front and listing agrees, and the
    /// index a push returns is where `front` finds that packet once it is first, unless its
    /// ring has grown (moved) since.
    #[test]
    fn wires_keep_their_packets_in_order_as_their_rings_grow() {
        use super::{InFlight, Wire, WirePool};
        use crate::packet::PacketId;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut pool = WirePool::default();
        let mut wires = [Wire::default(); 4];
        // Each packet with the index its push returned and the size of its ring then.
        let mut models: [std::collections::VecDeque<(InFlight, u32, u32)>; 4] = Default::default();
        let mut indices_checked = 0;
        for step in 0..20_000u32 {
            let w = rng.gen_range(0..4);
            // Pushes outnumber pops early on, so the wires fill up to a few hundred packets.
            if rng.gen_bool(if step < 10_000 { 0.6 } else { 0.4 }) {
                let packet = InFlight {
                    arrival: Time(step as u64),
                    pid: PacketId(step),
                };
                let at = wires[w].push_back(&mut pool, packet);
                models[w].push_back((packet, at, wires[w].cap));
            } else {
                let popped = models[w].pop_front().map(|e| e.0);
                assert_eq!(wires[w].pop_front(&pool), popped);
            }
            for (wire, model) in wires.iter().zip(&models) {
                assert_eq!(wire.len(), model.len());
                let front = wire.front(&pool);
                assert_eq!(front.map(|(_, p)| p), model.front().map(|e| e.0));
                if let (Some((at, _)), Some(&(_, pushed_at, cap))) = (front, model.front()) {
                    if cap == wire.cap {
                        assert_eq!(at, pushed_at);
                        indices_checked += 1;
                    }
                }
            }
        }
        for (wire, model) in wires.iter().zip(&models) {
            let listed: Vec<InFlight> = wire.iter(&pool).collect();
            assert_eq!(listed, model.iter().map(|e| e.0).collect::<Vec<_>>());
        }
        assert!(wires.iter().all(|w| w.cap >= 64), "the rings grew");
        assert!(indices_checked > 10_000);
    }

    /// A ring that grows leaves its place to the next ring that grows to that size: two
    /// wires that take turns filling up share the pool, which holds no more than their rings
    /// at their largest and the places they left.
    #[test]
    fn a_ring_that_moves_leaves_its_place_to_the_next() {
        use super::{InFlight, Wire, WirePool, FIRST_RING};
        use crate::packet::PacketId;
        let mut pool = WirePool::default();
        let (mut a, mut b) = (Wire::default(), Wire::default());
        let packet = InFlight {
            arrival: Time::ZERO,
            pid: PacketId(0),
        };
        // `a` takes a ring of 8 and grows to 16: its ring of 8 is left.
        for _ in 0..=FIRST_RING {
            a.push_back(&mut pool, packet);
        }
        assert_eq!((a.cap, pool.entries.len()), (16, 24));
        // `b`'s first ring is the one `a` left.
        b.push_back(&mut pool, packet);
        assert_eq!((b.base, b.cap, pool.entries.len()), (0, 8, 24));
        // `b` grows to 16 at the end of the pool, leaving the 8 again.
        for _ in 0..FIRST_RING {
            b.push_back(&mut pool, packet);
        }
        assert_eq!((b.base, b.cap, pool.entries.len()), (24, 16, 40));
        assert_eq!(pool.free[3], vec![0]);
    }

    #[test]
    fn the_hot_fields_of_a_port_fit_its_first_three_cache_lines() {
        use std::mem::offset_of;
        assert_eq!(std::mem::align_of::<PortState>(), 64);
        // Line 2: all that an arrival and a direct departure read besides line 1.
        assert_eq!(offset_of!(PortState, wire), 64);
        for end in [
            offset_of!(PortState, peer_ref) + 8,
            offset_of!(PortState, owner) + 8,
            offset_of!(PortState, peer) + 4,
            offset_of!(PortState, nonempty) + 1,
            offset_of!(PortState, paused) + 1,
            offset_of!(PortState, rr_next) + 1,
            offset_of!(PortState, pfc_waiting) + 1,
            offset_of!(PortState, peak_queue_bytes) + 8,
            offset_of!(PortState, ecn_kmin) + 8,
        ] {
            assert!(end <= 128, "{end}");
        }
        assert_eq!(offset_of!(PortState, queue_integral), 128);
        assert!(offset_of!(PortState, pfc_out) + 32 <= 192);
        assert!(offset_of!(PortState, peer_node) + 4 <= 256);
    }

    #[test]
    fn pfc_frames_go_out_in_order_and_the_port_knows_when_some_wait() {
        let mut port = PortState::test_ports(1, 100_000_000_000, Time(1_000_000)).remove(0);
        assert!(!port.pfc_waiting());
        port.queue_pfc(crate::packet::PacketId(4));
        port.queue_pfc(crate::packet::PacketId(2));
        assert!(port.pfc_waiting());
        assert_eq!(port.next_pfc(), Some(crate::packet::PacketId(4)));
        assert!(port.pfc_waiting());
        assert_eq!(port.next_pfc(), Some(crate::packet::PacketId(2)));
        assert!(!port.pfc_waiting());
        assert_eq!(port.next_pfc(), None);
    }

    #[test]
    fn each_priority_queue_is_one_cache_line_of_its_own() {
        assert_eq!(std::mem::size_of::<super::PrioQueue>(), 64);
        assert_eq!(std::mem::align_of::<super::PrioQueue>(), 64);
        assert_eq!(std::mem::offset_of!(PortState, prio), 256);
    }
}
