//! A port: one end of a full-duplex link and its egress, with the priority queues, the PFC
//! pause state and the counters that every hop of a packet touches.
//!
//! The simulation (`crate::sim`) owns the ports and drives them; load balancers and the MMU
//! only read them (through [`PortState`]'s accessors) or size by [`N_PRIO`].

use crate::metrics::PortRecord;
use crate::packet::{Packet, PacketArena, PacketId, NO_PACKET};
use crate::units::{Rate, Time};
use std::collections::HashMap;
use std::collections::VecDeque;

/// Number of PFC priority classes (queues per port).
pub const N_PRIO: usize = 8;
/// The priority of the strict-priority control queue.
pub const CONTROL_PRIO: u8 = 0;

/// One priority queue of an egress port, with everything of the queue an enqueue or dequeue
/// touches: one cache line (aligned to one, so that a hop of a packet touches one line of its
/// queue, besides the packets themselves).
///
/// The packets wait in a FIFO threaded through them, as on a wire: each queued packet names
/// the one behind it ([`Packet::behind_in_queue`]), and the queue keeps the first and the
/// last. A dequeue then learns the next packet from the packet it takes out, a line it reads
/// anyway, and an enqueue writes the last packet, queued a moment before.
#[repr(C, align(64))]
pub(crate) struct PrioQueue {
    /// The first packet ([`NO_PACKET`]: the queue is empty) and the last.
    head: u32,
    tail: u32,
    /// How many packets wait.
    pub(crate) len: u32,
    /// `pause_clock` in (wrapping) nanoseconds, as packets carry it: kept so that the
    /// division is done once per pause, not at every enqueue and dequeue.
    pub(crate) pause_clock_ns: u32,
    pub(crate) bytes: u64,
    /// Total time this priority has been paused, up to `paused_since` of a current pause.
    pub(crate) pause_clock: u64,
    pub(crate) paused_since: Time,
}

impl Default for PrioQueue {
    fn default() -> PrioQueue {
        PrioQueue {
            head: NO_PACKET,
            tail: NO_PACKET,
            len: 0,
            pause_clock_ns: 0,
            bytes: 0,
            pause_clock: 0,
            paused_since: Time::ZERO,
        }
    }
}

impl PrioQueue {
    /// The packets waiting, first first.
    pub(crate) fn iter<'a>(&self, arena: &'a PacketArena) -> impl Iterator<Item = PacketId> + 'a {
        linked(arena, self.head, Packet::behind_in_queue)
    }
}

/// The packets of a list threaded through them (a queue's or a wire's), from `head` on, each
/// naming the next by `behind`.
fn linked(
    arena: &PacketArena,
    head: u32,
    behind: fn(&Packet) -> u32,
) -> impl Iterator<Item = PacketId> + '_ {
    let mut at = head;
    std::iter::from_fn(move || {
        (at != NO_PACKET).then(|| {
            let pid = PacketId(at);
            at = behind(arena.get(pid));
            pid
        })
    })
}

/// One port's FIFO of packets on the wire, a list threaded through the packets: each packet on
/// the wire names the one behind it and how long after it that one arrives
/// ([`Packet::behind_on_wire`]). The port keeps the first and the last, and when the last
/// arrives. An arrival thus reads the next packet and its time from the packet it delivers,
/// one line it reads anyway; pushing a packet writes the one ahead of it (sent a
/// serialization time before, still in cache).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Wire {
    head: u32,
    tail: u32,
    tail_arrival: Time,
}

impl Default for Wire {
    fn default() -> Wire {
        Wire {
            head: NO_PACKET,
            tail: NO_PACKET,
            tail_arrival: Time::ZERO,
        }
    }
}

/// The gap that says "too long for 32 bits: ask [`FarArrivals`]".
const FAR: u32 = u32::MAX;

/// The arrival times of packets that arrive more than 4.29 ms (2^32 ps) after the packet
/// ahead of them on their wire, too long a gap for the packet ahead to keep: only on links
/// with more delay and serialization time than a data centre has (a link slowed to a few
/// Mbps by a fault). Kept by packet until the packet ahead of it leaves the wire: when that one
/// arrives (and this one's arrival is scheduled), or when their link goes down.
#[derive(Debug, Default)]
pub(crate) struct FarArrivals(HashMap<u32, Time>);

impl FarArrivals {
    /// When `next`, `gap` picoseconds (as [`Packet::behind_on_wire`] gave it) behind a packet
    /// arriving at `now`, arrives.
    #[inline]
    pub(crate) fn arrival(&mut self, next: u32, gap: u32, now: Time) -> Time {
        if gap != FAR {
            now + Time(gap as u64)
        } else {
            self.take(next)
        }
    }

    #[cold]
    fn take(&mut self, pid: u32) -> Time {
        self.0
            .remove(&pid)
            .expect("a far arrival is kept until the packet ahead leaves the wire")
    }
}

impl Wire {
    /// Puts packet `pid`, arriving at `arrival`, on the wire, last; true if it is the first.
    #[inline]
    pub(crate) fn push_back(
        &mut self,
        arena: &mut PacketArena,
        far: &mut FarArrivals,
        pid: PacketId,
        arrival: Time,
    ) -> bool {
        arena.get_mut(pid).set_behind_on_wire(NO_PACKET, 0);
        let first = self.head == NO_PACKET;
        if first {
            self.head = pid.0;
        } else {
            let gap = match u32::try_from((arrival - self.tail_arrival).ps()) {
                Ok(gap) if gap != FAR => gap,
                _ => {
                    let previous = far.0.insert(pid.0, arrival);
                    debug_assert!(previous.is_none(), "packet {} kept twice", pid.0);
                    FAR
                }
            };
            arena
                .get_mut(PacketId(self.tail))
                .set_behind_on_wire(pid.0, gap);
        }
        self.tail = pid.0;
        self.tail_arrival = arrival;
        first
    }

    /// Takes packet `pid`, which arrives, off the wire; `behind` is the packet behind it
    /// ([`Packet::behind_on_wire`]). False if the wire is empty: it went down with the packet
    /// on it (a fault), which is then gone.
    #[inline]
    pub(crate) fn arrived(&mut self, pid: PacketId, behind: u32) -> bool {
        if self.head == NO_PACKET {
            return false;
        }
        debug_assert_eq!(self.head, pid.0);
        self.head = behind;
        true
    }

    /// Takes the first packet off the wire, without it arriving (its link went down).
    pub(crate) fn pop_front(
        &mut self,
        arena: &PacketArena,
        far: &mut FarArrivals,
    ) -> Option<PacketId> {
        if self.head == NO_PACKET {
            return None;
        }
        let first = PacketId(self.head);
        let (behind, gap) = arena.get(first).behind_on_wire();
        if gap == FAR {
            far.take(behind);
        }
        self.head = behind;
        Some(first)
    }

    /// The packets on the wire, first first.
    pub(crate) fn iter<'a>(&self, arena: &'a PacketArena) -> impl Iterator<Item = PacketId> + 'a {
        linked(arena, self.head, |pkt| pkt.behind_on_wire().0)
    }
}

/// Read-only view of a port, also handed to load balancers.
///
/// The fields a packet's hop touches come first: a packet arriving over the wire, or passing
/// through an idle egress, reads only the first two cache lines; one that is queued also the
/// third (the queue integral, the PFC frames, ECN above `ecn_kmin`) and its queue's line (and
/// the packet queued before it, which it is linked behind: [`PrioQueue`]); the
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
    /// The packets on the wire.
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
    #[inline(always)]
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

    /// Puts packet `pid` last in the queue of priority `prio`. Its PFC wait is charged at
    /// [`PortState::dequeue`]: the pause clock is taken from it now and added back then, so
    /// that in between it holds its wait minus the clock's reading (wrapping).
    #[inline(always)]
    pub(crate) fn enqueue(&mut self, prio: u8, pid: PacketId, arena: &mut PacketArena, now: Time) {
        self.integrate_queue(now);
        let clock_ns = self.pause_clock_ns(prio, now);
        let pkt = arena.get_mut(pid);
        pkt.pfc_wait_ns = pkt.pfc_wait_ns.wrapping_sub(clock_ns);
        pkt.set_behind_in_queue(NO_PACKET);
        let wire_bytes = pkt.wire_bytes as u64;
        let q = &mut self.prio[prio as usize];
        if q.tail == NO_PACKET {
            q.head = pid.0;
        } else {
            arena.get_mut(PacketId(q.tail)).set_behind_in_queue(pid.0);
        }
        q.tail = pid.0;
        q.len += 1;
        q.bytes += wire_bytes;
        self.nonempty |= 1 << prio;
        self.total_queue_bytes += wire_bytes;
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
    /// the queue. The packet is left as it was: the pair would take the pause clock from its
    /// wait and add the same reading back (so the queue's line, where the clock is, need not
    /// be read), and the place words the queue would write are read only while it is queued.
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
        let clock_ns = self.pause_clock_ns(prio, now);
        let q = &mut self.prio[prio as usize];
        debug_assert!(q.head != NO_PACKET, "dequeue from a non-empty queue");
        let pid = PacketId(q.head);
        let pkt = arena.get_mut(pid);
        let next = pkt.behind_in_queue();
        q.head = next;
        q.len -= 1;
        q.bytes -= pkt.wire_bytes as u64;
        self.total_queue_bytes -= pkt.wire_bytes as u64;
        pkt.pfc_wait_ns = pkt.pfc_wait_ns.wrapping_add(clock_ns);
        if next == NO_PACKET {
            q.tail = NO_PACKET;
            self.nonempty &= !(1 << prio);
        } else {
            // The next packet of the queue leaves a serialization time from now at the
            // earliest: its line is asked for now.
            crate::engine::prefetch(arena.get(PacketId(next)));
        }
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
                port.enqueue(prio, early, &mut arena, Time(1_000_000));
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
            b.enqueue(prio, queued, &mut arena, now);
            assert_eq!(b.dequeue(prio, &mut arena, now), queued);
            assert_eq!(a.queue_changed, b.queue_changed);
            assert_eq!(a.queue_integral, b.queue_integral);
            assert_eq!(a.peak_queue_bytes, b.peak_queue_bytes);
            assert_eq!(a.total_queue_bytes, b.total_queue_bytes);
            assert_eq!(a.nonempty, b.nonempty);
            assert_eq!(arena.get(direct).pfc_wait_ns, arena.get(queued).pfc_wait_ns);
            // Both wait 2 us paused at the next egress (each at an egress of its own, the same
            // from the same time on) and carry the same wait out of it.
            let later = Time(10_000_000);
            for pid in [direct, queued] {
                let mut next = PortState::test_ports(1, 100_000_000_000, Time(1_000_000));
                let next = &mut next[0];
                next.enqueue(prio, pid, &mut arena, later);
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

    /// Priority queues (lists threaded through the packets) against `VecDeque`s of (packet,
    /// enqueue time), through random enqueues, dequeues, pauses and resumes of three
    /// priorities of one port: packets leave in order, the counts and bytes agree, and each
    /// packet's PFC wait grows by the time its priority was paused while it waited (pauses
    /// kept as intervals by the model, to the nanosecond the clock counts in), on top of
    /// the wait it came with.
    #[test]
    fn queues_keep_their_packets_in_order_and_charge_each_its_pauses() {
        use crate::packet::PacketId;
        use rand::{Rng, SeedableRng};
        use std::collections::VecDeque;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let mut port = PortState::test_ports(1, 100_000_000_000, Time(1_000_000)).remove(0);
        let mut arena = PacketArena::default();
        let prios = [CONTROL_PRIO, 3, 5];
        let mut models: [VecDeque<(PacketId, Time, u32)>; 3] = Default::default();
        // Each priority's pauses so far: (start, end), the last open while paused.
        let mut pauses: [Vec<(Time, Time)>; 3] = Default::default();
        let paused_within = |pauses: &[(Time, Time)], from: Time, to: Time| -> u64 {
            (pauses.iter())
                .map(|&(a, b)| b.min(to).ps().saturating_sub(a.max(from).ps()))
                .sum()
        };
        let (mut now, mut charged) = (Time(5_000_000), 0);
        for step in 0..30_000u32 {
            now += Time(rng.gen_range(0..3_000_000));
            let i = rng.gen_range(0..3);
            let prio = prios[i];
            let roll: f64 = rng.gen();
            if roll < 0.02 && prio != CONTROL_PRIO {
                if port.is_paused(prio) {
                    // RESUME, as the simulation takes it.
                    let q = &mut port.prio[prio as usize];
                    q.pause_clock += (now - q.paused_since).ps();
                    q.pause_clock_ns = (q.pause_clock / 1_000) as u32;
                    port.paused &= !(1 << prio);
                    pauses[i].last_mut().unwrap().1 = now;
                } else {
                    port.prio[prio as usize].paused_since = now;
                    port.paused |= 1 << prio;
                    pauses[i].push((now, Time::MAX));
                }
            } else if roll < if step < 15_000 { 0.6 } else { 0.45 } {
                let mut p = Packet::new(PacketKind::Data);
                p.wire_bytes = rng.gen_range(64..9_000);
                p.pfc_wait_ns = rng.gen_range(0..1_000_000);
                let came_with = p.pfc_wait_ns;
                let pid = arena.alloc(p);
                port.enqueue(prio, pid, &mut arena, now);
                models[i].push_back((pid, now, came_with));
            } else if let Some((pid, since, came_with)) = models[i].pop_front() {
                assert_eq!(port.dequeue(prio, &mut arena, now), pid);
                let waited_ps = paused_within(&pauses[i], since, now);
                let waited_ns = (arena.get(pid).pfc_wait_ns - came_with) as u64;
                // The clock counts whole nanoseconds: a wait read off it is at most one off.
                assert!(
                    waited_ns * 1_000 <= waited_ps + 1_000 && waited_ps < (waited_ns + 1) * 1_000,
                    "priority {prio}: waited {waited_ps} ps, charged {waited_ns} ns"
                );
                charged += (waited_ps > 0) as u32;
                arena.free(pid);
            }
            for (i, &prio) in prios.iter().enumerate() {
                let q = &port.prio[prio as usize];
                let listed: Vec<PacketId> = q.iter(&arena).collect();
                let model: Vec<PacketId> = models[i].iter().map(|m| m.0).collect();
                assert_eq!(listed, model);
                assert_eq!(q.len as usize, model.len());
                let bytes: u64 = model.iter().map(|&p| arena.get(p).wire_bytes as u64).sum();
                assert_eq!(q.bytes, bytes);
                assert_eq!(port.nonempty & (1 << prio) != 0, !model.is_empty());
            }
        }
        assert!(charged > 1_000, "{charged} packets waited paused");
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

    /// Wires (lists threaded through the packets) against `VecDeque`s of (packet, arrival):
    /// random pushes, arrivals and links going down on a few wires, with gaps between
    /// arrivals of up to 2^33 ps (some too long for a packet to keep). Every arrival names the
    /// packet behind it and when that one arrives, every listing agrees, and the far arrivals
    /// are all taken once the wires are empty.
    #[test]
    fn wires_keep_their_packets_in_order_and_know_when_each_arrives() {
        use super::{FarArrivals, Wire};
        use crate::packet::{Packet, PacketArena, PacketId, PacketKind, NO_PACKET};
        use rand::{Rng, SeedableRng};
        use std::collections::VecDeque;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut arena = PacketArena::default();
        let mut far = FarArrivals::default();
        let mut wires = [Wire::default(); 4];
        let mut models: [VecDeque<(PacketId, Time)>; 4] = Default::default();
        let mut last_arrival = [Time::ZERO; 4];
        let (mut arrivals, mut far_gaps) = (0, 0);
        for step in 0..20_000u32 {
            let w = rng.gen_range(0..4);
            // Pushes outnumber pops early on, so the wires fill up (to tens of packets: a
            // link goes down now and then).
            if rng.gen_bool(if step < 10_000 { 0.6 } else { 0.4 }) {
                let gap = if rng.gen_bool(0.05) {
                    rng.gen_range(u32::MAX as u64 - 2..1 << 33)
                } else {
                    rng.gen_range(0..100_000)
                };
                far_gaps += (gap >= u32::MAX as u64 && !models[w].is_empty()) as u32;
                let arrival = last_arrival[w] + Time(gap);
                last_arrival[w] = arrival;
                let pid = arena.alloc(Packet::new(PacketKind::Data));
                let first = wires[w].push_back(&mut arena, &mut far, pid, arrival);
                assert_eq!(first, models[w].is_empty());
                models[w].push_back((pid, arrival));
            } else if rng.gen_bool(0.99) {
                // The first packet arrives: it names the next and when that one arrives.
                let Some((pid, at)) = models[w].pop_front() else {
                    assert!(!wires[w].arrived(PacketId(0), NO_PACKET));
                    continue;
                };
                let (behind, gap) = arena.get(pid).behind_on_wire();
                assert!(wires[w].arrived(pid, behind));
                match models[w].front() {
                    Some(&(next, next_at)) => {
                        assert_eq!(behind, next.0);
                        assert_eq!(far.arrival(behind, gap, at), next_at);
                    }
                    None => assert_eq!(behind, NO_PACKET),
                }
                arena.free(pid);
                arrivals += 1;
            } else {
                // The link goes down: everything on it is taken off.
                while let Some(pid) = wires[w].pop_front(&arena, &mut far) {
                    assert_eq!(Some(pid), models[w].pop_front().map(|m| m.0));
                    arena.free(pid);
                }
                assert!(models[w].is_empty());
            }
            let listed: Vec<PacketId> = wires[w].iter(&arena).collect();
            let model: Vec<PacketId> = models[w].iter().map(|m| m.0).collect();
            assert_eq!(listed, model);
        }
        for (wire, model) in wires.iter_mut().zip(&mut models) {
            while let Some(pid) = wire.pop_front(&arena, &mut far) {
                assert_eq!(Some(pid), model.pop_front().map(|m| m.0));
            }
        }
        assert!(far.0.is_empty(), "every far arrival taken: {:?}", far.0);
        assert!(
            arrivals > 5_000 && far_gaps > 300,
            "{arrivals} arrivals, {far_gaps} far"
        );
    }

    /// The largest gap a packet keeps is 2^32 - 2 ps; 2^32 - 1 and more are kept beside.
    #[test]
    fn the_longest_gap_a_packet_keeps_is_just_under_2_to_the_32_ps() {
        use super::{FarArrivals, Wire, FAR};
        use crate::packet::{Packet, PacketArena, PacketKind};
        let mut arena = PacketArena::default();
        let mut far = FarArrivals::default();
        let mut wire = Wire::default();
        let gaps = [u32::MAX as u64 - 1, u32::MAX as u64, 1 << 40, 0];
        let mut at = Time(5);
        let mut pids = vec![arena.alloc(Packet::new(PacketKind::Data))];
        wire.push_back(&mut arena, &mut far, pids[0], at);
        let mut arrivals = vec![at];
        for gap in gaps {
            at += Time(gap);
            let pid = arena.alloc(Packet::new(PacketKind::Data));
            assert!(!wire.push_back(&mut arena, &mut far, pid, at));
            pids.push(pid);
            arrivals.push(at);
        }
        assert_eq!(far.0.len(), 2);
        for (i, gap) in gaps.into_iter().enumerate() {
            let (behind, kept) = arena.get(pids[i]).behind_on_wire();
            assert_eq!(behind, pids[i + 1].0);
            assert_eq!(kept == FAR, gap >= u32::MAX as u64, "gap {gap}");
            assert!(wire.arrived(pids[i], behind));
            assert_eq!(far.arrival(behind, kept, arrivals[i]), arrivals[i + 1]);
        }
        assert!(far.0.is_empty());
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
