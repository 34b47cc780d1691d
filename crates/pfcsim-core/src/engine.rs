//! The discrete-event engine: event queue, RNG streams and the run fingerprint.
//!
//! Nothing here knows about networks. Events are ordered by `(time, seq)` where `seq` is the
//! order in which they were scheduled: events at the same picosecond run first-scheduled
//! first, which makes every run reproducible without relying on heap internals.

use crate::units::Time;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Width of a wheel slot: 2^7 ps (128 ps). Narrow enough that a slot holds one or two events
/// even in a large fabric (a 1,024-host leaf-spine at R1's load runs about 17 events per
/// nanosecond, R1's 128 hosts about 2): a slot's events are sorted when the queue reaches it,
/// and few per slot keeps that cheap (slots of 1,024 ps ran 4.4% slower at 1,024 hosts and
/// 2.8% on R1, `benches/HISTORY.md`, "Cost at scale, second round").
const SLOT_BITS: u32 = 7;
/// Slots in the wheel: it covers 2^15 x 128 ps (about 4.2 us) from the current slot on, past
/// a link's propagation delay and a packet's serialization (the events of a packet's hops).
const N_SLOTS: usize = 1 << 15;
/// Words of the occupancy bitmask (one bit a slot). The wheel's two arrays have these sizes
/// in their types, so an index taken modulo the size needs no bounds check.
const N_WORDS: usize = N_SLOTS / 64;

/// Priority queue of events of type `E`, popped in `(time, insertion order)`.
///
/// A timing wheel for the near future plus a binary heap for the rest. The wheel has
/// `N_SLOTS` slots of `2^SLOT_BITS` ps; an event whose slot number (`time >> SLOT_BITS`) lies
/// within `N_SLOTS` of the current one (that of the last popped event) is filed, unsorted, in
/// the slot of that number modulo `N_SLOTS`; a later one goes to the heap (`far`), where it
/// stays until popped. When the queue reaches the first non-empty slot (found with an
/// occupancy bitmask), it moves that slot's events, sorted once, into the run `current`;
/// events scheduled into that slot (or an earlier one) while the run lasts join the run in
/// their sorted place. A slot of one event (most of them) is popped from its node directly,
/// without the run. A pop takes the last (earliest) event of the run and compares it with
/// the head of the heap, both by `(time, seq)`, `seq` counting the `schedule` calls: so the
/// order is exactly `(time, insertion order)`. Nearly every event of a packet simulation (a
/// link's propagation, a serialization) lands in the wheel, so a push and a pop are a few
/// instructions, and each event's node is read once on its way out however many events share
/// its slot (scanning the slot's list for its earliest event at every pop read every node of
/// the slot again, a cache miss each, and made the cost per event grow with fabric size). A
/// slot is a linked list through one pool of nodes whose freed nodes are reused last-freed
/// first (from a stack of their indices, so that taking one does not read a node freed long
/// ago), so the wheel's memory stays small (the pool has as many nodes as events were ever
/// pending at once) and the queue allocates nothing more once it has reached its peak. When
/// it loads a slot, the queue asks for the first node of the next non-empty slot
/// ([`prefetch`]): a node is written when its event is scheduled, often a propagation delay
/// before it is popped, and is no longer in the cache by then.
pub struct EventQueue<E> {
    /// First node of every slot's list (`NIL`: empty).
    heads: Box<[u32; N_SLOTS]>,
    nodes: Vec<Node<E>>,
    /// Free nodes, the last freed on top.
    free: Vec<u32>,
    /// Bit `i % 64` of word `i / 64` set: slot `i` is not empty.
    occupied: Box<[u64; N_WORDS]>,
    /// Slot number (`time >> SLOT_BITS`) of the last popped event.
    cursor: u64,
    /// Events in the wheel's slot lists (not counting `current`).
    near: usize,
    /// The events of slot `current_slot` and of any earlier slot that are not in `far`,
    /// sorted by decreasing `(time, seq)` (the next one last); empty between runs.
    current: Vec<Entry<E>>,
    /// Slot number of the run in `current` (meaningful while it is not empty).
    current_slot: u64,
    far: std::collections::BinaryHeap<std::cmp::Reverse<Entry<E>>>,
    next_seq: u64,
    /// Key of the last popped event (to check that nothing is scheduled in the past).
    last: (u64, u64),
}

/// No node.
const NIL: u32 = u32::MAX;

/// A wheel event and the next one of its slot's list.
struct Node<E> {
    entry: Entry<E>,
    next: u32,
}

/// An event with its key.
struct Entry<E> {
    time: u64,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.time, self.seq)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key().cmp(&other.key())
    }
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heads: Box::new([NIL; N_SLOTS]),
            nodes: Vec::new(),
            free: Vec::new(),
            occupied: Box::new([0; N_WORDS]),
            cursor: 0,
            near: 0,
            current: Vec::new(),
            current_slot: 0,
            far: std::collections::BinaryHeap::new(),
            next_seq: 0,
            last: (0, 0),
        }
    }
}

impl<E: Copy> EventQueue<E> {
    /// Schedules `event` at `time`; ties with already-scheduled events run after them.
    /// `time` must not be before the last popped event's time.
    ///
    /// Always inlined: called out of line, the event (16 bytes) went through memory, written
    /// by the caller field by field and read back whole, and in a loaded fabric that read
    /// waited on the caller's earlier stores to lines that had left the cache (58% of the
    /// call's samples were on the store just after that read: `benches/HISTORY.md`, "Cost at
    /// scale, fourth round").
    #[inline(always)]
    pub fn schedule(&mut self, time: Time, event: E) {
        let seq = self.next_seq;
        self.next_seq += 1;
        debug_assert!((time.0, seq) > self.last || seq == 0);
        let entry = Entry {
            time: time.0,
            seq,
            event,
        };
        let slot = time.0 >> SLOT_BITS;
        if !self.current.is_empty() && slot <= self.current_slot {
            // Into the run being popped, before every later event (its `seq` is the largest).
            let at = self.current.partition_point(|e| e.key() > entry.key());
            self.current.insert(at, entry);
        } else if slot - self.cursor < N_SLOTS as u64 {
            let i = slot as usize % N_SLOTS;
            let node = Node {
                entry,
                next: self.heads[i],
            };
            let n = if let Some(n) = self.free.pop() {
                self.nodes[n as usize] = node;
                n
            } else {
                self.nodes.push(node);
                self.nodes.len() as u32 - 1
            };
            self.heads[i] = n;
            self.occupied[i / 64] |= 1 << (i % 64);
            self.near += 1;
        } else {
            self.far.push(std::cmp::Reverse(entry));
        }
    }

    /// The first non-empty slot at or after the cursor, if the wheel holds anything.
    #[inline]
    fn first_slot(&self) -> Option<usize> {
        if self.near == 0 {
            return None;
        }
        let start = self.cursor as usize % N_SLOTS;
        let (w0, b0) = (start / 64, start % 64);
        let head = self.occupied[w0] & (u64::MAX << b0);
        if head != 0 {
            return Some(w0 * 64 + head.trailing_zeros() as usize);
        }
        for k in 1..=N_WORDS {
            let w = (w0 + k) % N_WORDS;
            let bits = self.occupied[w];
            if bits != 0 {
                return Some(w * 64 + bits.trailing_zeros() as usize);
            }
        }
        unreachable!("near > 0 with no occupied slot")
    }

    /// The first non-empty slot after slot `i` within the next two words of the occupancy
    /// bitmask (64 to 128 slots, 8 to 16 ns), if any: how far the queue looks ahead.
    #[inline]
    fn occupied_after(&self, i: usize) -> Option<usize> {
        let (w, b) = (i / 64, i % 64);
        let rest = self.occupied[w % N_WORDS] & (u64::MAX << b) & !(1 << b);
        if rest != 0 {
            return Some(w * 64 + rest.trailing_zeros() as usize);
        }
        let w = (w + 1) % N_WORDS;
        let bits = self.occupied[w];
        (bits != 0).then(|| w * 64 + bits.trailing_zeros() as usize)
    }

    /// Empties slot `i`, which held `count` events, and asks for the first node of the next
    /// non-empty slot, so that it is in the cache when that slot is loaded.
    #[inline(always)]
    fn clear_slot(&mut self, i: usize, count: usize) {
        self.near -= count;
        self.heads[i % N_SLOTS] = NIL;
        self.occupied[i / 64 % N_WORDS] &= !(1 << (i % 64));
        if let Some(j) = self.occupied_after(i) {
            prefetch(&self.nodes[self.heads[j % N_SLOTS] as usize]);
        }
    }

    /// Pops the event of the first non-empty slot, `i`, if it is the slot's only one and no
    /// event of the heap comes before it (most slots hold one event), after showing it to
    /// `preview`; otherwise leaves the queue as it was.
    #[inline]
    fn pop_lone(&mut self, i: usize, preview: &mut impl FnMut(&E)) -> Option<Entry<E>> {
        let n = self.heads[i % N_SLOTS];
        let node = &self.nodes[n as usize];
        if node.next != NIL {
            return None;
        }
        let entry = Entry {
            time: node.entry.time,
            seq: node.entry.seq,
            event: node.entry.event,
        };
        if self.far.peek().is_some_and(|f| f.0.key() < entry.key()) {
            return None;
        }
        preview(&entry.event);
        self.free.push(n);
        self.clear_slot(i, 1);
        Some(entry)
    }

    /// Moves the events of slot `i` (the first non-empty one) into `current`, sorted, and
    /// shows each to `preview`. `current` must be empty.
    #[inline]
    fn load_slot(&mut self, i: usize, preview: &mut impl FnMut(&E)) {
        let mut n = self.heads[i % N_SLOTS];
        while n != NIL {
            let node = &self.nodes[n as usize];
            self.current.push(Entry {
                time: node.entry.time,
                seq: node.entry.seq,
                event: node.entry.event,
            });
            self.free.push(n);
            n = node.next;
        }
        for e in &self.current {
            preview(&e.event);
        }
        self.clear_slot(i, self.current.len());
        if self.current.len() > 1 {
            self.current
                .sort_unstable_by_key(|e| std::cmp::Reverse(e.key()));
        }
        self.current_slot = self.current[0].time >> SLOT_BITS;
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.pop_with(|_| {})
    }

    /// [`EventQueue::pop`], showing `preview` every event of a slot when the queue reaches
    /// it (the events of the next 128 ps, in no particular order), before the first of them
    /// is popped. The caller can ask for what they will need (a packet, a port) then, so that
    /// the cache misses of a large fabric, whose working set outgrows the caches, overlap
    /// with other work instead of coming one at a time as each event is handled.
    #[inline]
    pub fn pop_with(&mut self, mut preview: impl FnMut(&E)) -> Option<(Time, E)> {
        if self.current.is_empty() {
            if let Some(i) = self.first_slot() {
                if let Some(entry) = self.pop_lone(i, &mut preview) {
                    return Some(self.popped(entry));
                }
                self.load_slot(i, &mut preview);
            }
        }
        let near_first = match (self.current.last(), self.far.peek()) {
            (Some(n), far) => far.is_none_or(|f| n.key() < f.0.key()),
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let entry = if near_first {
            self.current.pop().expect("checked above")
        } else {
            self.far.pop().expect("peeked").0
        };
        Some(self.popped(entry))
    }

    /// Moves the cursor to the popped `entry`.
    #[inline]
    fn popped(&mut self, entry: Entry<E>) -> (Time, E) {
        self.cursor = entry.time >> SLOT_BITS;
        self.last = entry.key();
        (Time(entry.time), entry.event)
    }

    /// Takes the next insertion number without scheduling anything: something kept outside
    /// the queue under that number orders against its events, by `(time, seq)`, as if it had
    /// been scheduled now (the sim's looks, `sim/events.rs`).
    pub fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// The insertion number of the last popped event.
    pub fn last_seq(&self) -> u64 {
        self.last.1
    }

    pub fn len(&self) -> usize {
        self.near + self.current.len() + self.far.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Asks the CPU to start loading the cache line of `value` without waiting for it: a hint,
/// with no effect on what the program computes (a no-op on targets without one). The data
/// path uses it for a packet or port it will read a while later (the next packet of a wire
/// or a queue), so that the load's miss overlaps other work instead of stalling it.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    safe_arch::prefetch_t0(value);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// SplitMix64 finaliser: a bijective 64-bit mixer.
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Kinds of components that own an RNG stream. The stream of a component depends only on
/// the run seed, its kind and its index, so adding a component of one kind never shifts the
/// random numbers another one sees.
#[derive(Clone, Copy, Debug)]
pub enum StreamKind {
    Traffic = 1,
    Switch = 2,
    Topology = 3,
    Ecn = 4,
    Fault = 5,
    /// Host-side load balancers, one stream per host.
    Host = 6,
}

/// The random number generator used by every component.
pub type Rng = Xoshiro256PlusPlus;

/// Derives the RNG stream of component `(kind, index)` from the run `seed`.
pub fn rng_stream(seed: u64, kind: StreamKind, index: u64) -> Rng {
    let key = mix64(seed ^ mix64((kind as u64) << 56 ^ mix64(index)));
    Rng::seed_from_u64(key)
}

/// A running hash of the event trajectory: every processed event folds in its time and a
/// compact description. Two runs with the same fingerprint processed the same events at the
/// same times in the same order.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fingerprint(u64);

impl Fingerprint {
    #[inline]
    pub fn add(&mut self, time: Time, code: u64) {
        self.0 = mix64(self.0 ^ time.0).wrapping_add(code.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    }

    pub fn value(self) -> u64 {
        mix64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng as _;

    #[test]
    fn same_time_events_pop_in_schedule_order() {
        let mut q = EventQueue::default();
        q.schedule(Time(5), 'a');
        q.schedule(Time(3), 'b');
        q.schedule(Time(5), 'c');
        q.schedule(Time(3), 'd');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, vec!['b', 'd', 'a', 'c']);
    }

    /// Schedules and pops at random (`steps` times: schedule with probability `p_schedule`, at
    /// `now + delta(rng)`, else pop), then pops the rest; checks that everything comes out,
    /// in (time, insertion) order, which is the reference's sorted order since no event is
    /// scheduled before the time last popped.
    fn pops_in_reference_order(
        stream: u64,
        steps: usize,
        p_schedule: f64,
        mut delta: impl FnMut(&mut crate::engine::Rng) -> u64,
    ) {
        let mut rng = rng_stream(stream, StreamKind::Traffic, stream);
        let mut q = EventQueue::default();
        let mut reference = Vec::new();
        let mut now = 0u64;
        let mut seq = 0u32;
        let mut popped = Vec::new();
        for _ in 0..steps {
            if rng.gen_bool(p_schedule) {
                let t = now + delta(&mut rng);
                q.schedule(Time(t), seq);
                reference.push((t, seq));
                seq += 1;
            } else if let Some((t, e)) = q.pop() {
                now = t.0;
                popped.push((t.0, e));
            }
        }
        while let Some((t, e)) = q.pop() {
            popped.push((t.0, e));
        }
        reference.sort();
        assert_eq!(popped, reference);
        assert!(q.is_empty());
    }

    #[test]
    fn matches_a_reference_ordering_on_random_schedules() {
        pops_in_reference_order(9, 20_000, 0.55, |rng| {
            rng.gen_range(0..3u64) * rng.gen_range(0..1_000_000u64)
        });
    }

    #[test]
    fn near_and_far_events_interleave_in_order() {
        // Events beyond the wheel, at its edge, in the same slot, and at the same time.
        let span = (N_SLOTS as u64) << SLOT_BITS;
        pops_in_reference_order(3, 50_000, 0.5, |rng| match rng.gen_range(0..6) {
            0 => 0,
            1 => rng.gen_range(0..1024),
            2 => span - 1024 + rng.gen_range(0..2048),
            3 => rng.gen_range(0..4 * span),
            4 => rng.gen_range(0..1_000_000_000),
            _ => rng.gen_range(0..span),
        });
    }

    #[test]
    fn crowded_slots_pop_in_order_with_events_added_to_the_slot_being_popped() {
        // Dozens of events per slot (a large fabric), and while a slot is being popped, new
        // events in it, in earlier slots than those pending, and beyond the wheel.
        pops_in_reference_order(5, 50_000, 0.5, |rng| match rng.gen_range(0..4) {
            0 => 0,
            1 => rng.gen_range(0..(1 << SLOT_BITS)),
            2 => rng.gen_range(0..(4 << SLOT_BITS)),
            _ => rng.gen_range(0..(1u64 << SLOT_BITS) * (N_SLOTS as u64 + 8)),
        });
    }

    #[test]
    fn pop_with_shows_each_event_of_a_slot_once_when_reaching_it() {
        let mut q = EventQueue::default();
        let slot = 1u64 << SLOT_BITS;
        // A slot of three events, then one of two.
        for i in 0..3 {
            q.schedule(Time(slot + i), i);
        }
        for i in 0..2 {
            q.schedule(Time(3 * slot + i), 100 + i);
        }
        let mut shown = Vec::new();
        let mut popped = Vec::new();
        while let Some((t, e)) = q.pop_with(|&e| shown.push(e)) {
            popped.push(e);
            if popped.len() == 1 {
                // Shown all at once, before the first of them is handled.
                shown.sort();
                assert_eq!(shown, vec![0, 1, 2]);
                // An event scheduled into the slot being popped joins its run, unshown.
                q.schedule(t, 7);
            }
        }
        assert_eq!(popped, vec![0, 7, 1, 2, 100, 101]);
        shown.sort();
        assert_eq!(shown, vec![0, 1, 2, 100, 101]);
    }

    #[test]
    fn a_lone_event_of_the_wheel_waits_for_an_earlier_one_of_the_heap() {
        let span = (N_SLOTS as u64) << SLOT_BITS;
        let mut q = EventQueue::default();
        q.schedule(Time(1_000), 'a');
        // Beyond the wheel when scheduled: into the heap.
        q.schedule(Time(span + 10), 'b');
        assert_eq!(q.pop(), Some((Time(1_000), 'a')));
        // Within the wheel from the new cursor on, alone in its slot, but after 'b'.
        q.schedule(Time(span + 500), 'c');
        let mut shown = Vec::new();
        let mut popped = Vec::new();
        while let Some((t, e)) = q.pop_with(|&e| shown.push(e)) {
            popped.push((t, e));
        }
        assert_eq!(
            popped,
            vec![(Time(span + 10), 'b'), (Time(span + 500), 'c')]
        );
        // Shown once, when it was popped (heap events are not shown).
        assert_eq!(shown, vec!['c']);
    }

    #[test]
    fn streams_are_independent_and_reproducible() {
        let a1: u64 = rng_stream(7, StreamKind::Switch, 3).gen();
        let a2: u64 = rng_stream(7, StreamKind::Switch, 3).gen();
        let b: u64 = rng_stream(7, StreamKind::Switch, 4).gen();
        let c: u64 = rng_stream(8, StreamKind::Switch, 3).gen();
        let d: u64 = rng_stream(7, StreamKind::Topology, 3).gen();
        assert_eq!(a1, a2);
        assert!(a1 != b && a1 != c && a1 != d);
    }

    #[test]
    fn fingerprint_depends_on_order_and_time() {
        let fp = |evs: &[(u64, u64)]| {
            let mut f = Fingerprint::default();
            for &(t, c) in evs {
                f.add(Time(t), c);
            }
            f.value()
        };
        assert_eq!(fp(&[(1, 2), (3, 4)]), fp(&[(1, 2), (3, 4)]));
        assert_ne!(fp(&[(1, 2), (3, 4)]), fp(&[(3, 4), (1, 2)]));
        assert_ne!(fp(&[(1, 2), (3, 4)]), fp(&[(1, 2), (3, 5)]));
    }
}
