//! The discrete-event engine: event queue, RNG streams and the run fingerprint.
//!
//! Nothing here knows about networks. Events are ordered by `(time, seq)` where `seq` is the
//! order in which they were scheduled: events at the same picosecond run first-scheduled
//! first, which makes every run reproducible without relying on heap internals.

use crate::units::Time;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// Priority queue of events of type `E`, popped in `(time, insertion order)`.
///
/// A radix heap: the key of an event is `time << 64 | seq`, unique and never below the key
/// last popped (events are never scheduled in the past), so an event is filed in the bucket
/// of the highest bit in which its key differs from the last popped key. Pushing is O(1);
/// popping refiles the smallest non-empty bucket when bucket 0 is empty, and every event is
/// refiled at most a few times. The buckets keep their capacity, so a queue that has reached
/// its peak size allocates nothing more.
pub struct EventQueue<E> {
    buckets: Vec<Vec<(u128, E)>>,
    /// Bit `i` set: bucket `i` is not empty.
    occupied: [u64; 3],
    last: u128,
    len: usize,
    next_seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            buckets: (0..=128).map(|_| Vec::new()).collect(),
            occupied: [0; 3],
            last: 0,
            len: 0,
            next_seq: 0,
        }
    }
}

impl<E> EventQueue<E> {
    #[inline]
    fn bucket(&self, key: u128) -> usize {
        128 - (key ^ self.last).leading_zeros() as usize
    }

    /// Schedules `event` at `time`; ties with already-scheduled events run after them.
    /// `time` must not be before the last popped event's time.
    #[inline]
    pub fn schedule(&mut self, time: Time, event: E) {
        let key = (time.0 as u128) << 64 | self.next_seq as u128;
        debug_assert!(key > self.last || self.len == 0 && self.next_seq == 0);
        self.next_seq += 1;
        let b = self.bucket(key);
        self.buckets[b].push((key, event));
        self.occupied[b / 64] |= 1 << (b % 64);
        self.len += 1;
    }

    /// Removes and returns the earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(Time, E)> {
        if self.occupied[0] & 1 == 0 {
            let word = self.occupied.iter().position(|&w| w != 0)?;
            let i = word * 64 + self.occupied[word].trailing_zeros() as usize;
            let mut moving = std::mem::take(&mut self.buckets[i]);
            self.occupied[word] &= !(1 << (i % 64));
            self.last = moving.iter().map(|&(k, _)| k).min().expect("non-empty");
            for (key, event) in moving.drain(..) {
                let b = self.bucket(key);
                self.buckets[b].push((key, event));
                self.occupied[b / 64] |= 1 << (b % 64);
            }
            // Give the emptied bucket its storage back.
            self.buckets[i] = moving;
        }
        let (key, event) = self.buckets[0].pop()?;
        if self.buckets[0].is_empty() {
            self.occupied[0] &= !1;
        }
        self.len -= 1;
        Some((Time((key >> 64) as u64), event))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
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

    #[test]
    fn matches_a_reference_ordering_on_random_schedules() {
        let mut rng = rng_stream(9, StreamKind::Traffic, 0);
        let mut q = EventQueue::default();
        let mut reference = Vec::new();
        let mut now = 0u64;
        let mut seq = 0u32;
        let mut popped = Vec::new();
        for _ in 0..20_000 {
            if rng.gen_bool(0.55) {
                let t = now + rng.gen_range(0..3u64) * rng.gen_range(0..1_000_000u64);
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
        // Everything comes out, in (time, insertion) order within what was pending.
        let mut sorted = popped.clone();
        sorted.sort();
        assert_eq!(sorted, reference);
        assert!(popped
            .windows(2)
            .all(|w| w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1)));
        assert!(q.is_empty());
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
