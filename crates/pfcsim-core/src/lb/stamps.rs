//! Path RTTs from piggybacked timestamps, shared by the ToR-to-ToR schemes that measure them
//! (RLB, PLB).
//!
//! The source ToR writes a send time into a packet leaving one of its uplinks for another ToR,
//! at most once per sampling period per path (destination ToR, uplink); the destination ToR
//! takes it off at arrival, holds it, and returns it on the next packet it sends towards the
//! source ToR (data, ACK or NACK, by any path), the one held longest first; the source ToR
//! reads the path's RTT as return time - send time. No packet is added. What a stamp carries
//! besides its send time (RLB: the uplink; PLB: a utilization metric) and how it is packed in
//! the scheme's header word is the scheme's.
//!
//! * [`StampClock`]: a send time in a few header bits (a wrapping clock).
//! * [`StampsSent`]: the source ToR's side, when each path's next stamp is due and which
//!   stamps are unanswered. Silence is evidence of a slow path only once a stamp sent later to
//!   the same ToR came back ([`StampsSent::overdue_since`]): a path without traffic back must
//!   not look slow.
//! * [`HeldStamps`]: the destination ToR's side, one stamp held per (source ToR, source
//!   uplink), a newer one replacing it, none returned once stale.

use crate::units::Time;

/// A clock of `bits` bits counting `unit_ps` picoseconds, wrapping: the send time a stamp
/// carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StampClock {
    unit_ps: u64,
    bits: u32,
}

impl StampClock {
    pub const fn new(unit_ps: u64, bits: u32) -> StampClock {
        StampClock { unit_ps, bits }
    }

    /// The clock's bits in a stamp.
    #[inline]
    pub const fn mask(self) -> u32 {
        (1 << self.bits) - 1
    }

    /// The clock's reading at `now`.
    #[inline]
    pub fn read(self, now: Time) -> u32 {
        (now.ps() / self.unit_ps) as u32 & self.mask()
    }

    /// Time from reading `ts` (bits above the clock's are ignored) to `now`, modulo the wrap.
    #[inline]
    pub fn since(self, now: Time, ts: u32) -> Time {
        Time::from_ps((self.read(now).wrapping_sub(ts) & self.mask()) as u64 * self.unit_ps)
    }

    /// Half the wrap: a stamp older than this could be taken for a recent one, so a
    /// destination ToR drops a stamp it could not return within it.
    pub const fn stale(self) -> Time {
        Time::from_ps((1u64 << (self.bits - 1)) * self.unit_ps)
    }
}

/// The source ToR's stamps, per path `(t, up)` (destination ToR, uplink index): the last one
/// sent and the send time of the oldest unanswered one; per destination ToR, the send time of
/// the latest-sent stamp that came back.
#[derive(Clone, Debug, Default)]
pub struct StampsSent {
    n_up: usize,
    /// The stamps' clock unit: a send time read back from a stamp is late by less than it.
    unit: Time,
    last_sent: Vec<Option<Time>>,
    unanswered_since: Vec<Option<Time>>,
    answered_sent: Vec<Time>,
}

impl StampsSent {
    /// Stamps read by `clock`; no state (a switch that is not a measuring ToR) if `n_up` is 0.
    pub fn new(tors: usize, n_up: usize, clock: StampClock) -> StampsSent {
        let tors = if n_up > 0 { tors } else { 0 };
        StampsSent {
            n_up,
            unit: Time::from_ps(clock.unit_ps),
            last_sent: vec![None; tors * n_up],
            unanswered_since: vec![None; tors * n_up],
            answered_sent: vec![Time::ZERO; tors],
        }
    }

    #[inline]
    fn at(&self, t: u32, up: u8) -> usize {
        t as usize * self.n_up + up as usize
    }

    /// Whether path (`t`, `up`) is due a stamp at `now` (none sent within `period`); if so the
    /// stamp counts as sent, and unanswered until [`StampsSent::answered`].
    #[inline]
    pub fn take_due(&mut self, t: u32, up: u8, now: Time, period: Time) -> bool {
        let i = self.at(t, up);
        if self.last_sent[i].is_some_and(|at| now < at + period) {
            return false;
        }
        self.last_sent[i] = Some(now);
        // Send times may come out of order (PLB's `rtt_from = "arrival"`: packets of
        // different priorities leave in another order than they came): the oldest counts.
        let since = &mut self.unanswered_since[i];
        *since = Some(since.map_or(now, |s| s.min(now)));
        true
    }

    /// A stamp of path (`t`, `up`) came back, sent at `sent` as read from it (return time -
    /// [`StampClock::since`]: up to one clock unit before the true send time): the path's
    /// unanswered stamps sent up to then are answered; one sent later and still out, when an
    /// older stamp comes back last, stays unanswered (PLB).
    pub fn answered(&mut self, t: u32, up: u8, sent: Time) {
        self.answer(t, up, sent, false);
    }

    /// As [`StampsSent::answered`], but any stamp that comes back answers all of its path's,
    /// even those sent after it (RLB: the path is answering; kept as RLB was validated).
    pub fn answered_any(&mut self, t: u32, up: u8, sent: Time) {
        self.answer(t, up, sent, true);
    }

    fn answer(&mut self, t: u32, up: u8, sent: Time, any: bool) {
        let i = self.at(t, up);
        self.answered_sent[t as usize] = self.answered_sent[t as usize].max(sent);
        if any || self.unanswered_since[i].is_some_and(|since| since < sent + self.unit) {
            self.unanswered_since[i] = None;
        }
    }

    /// Path (`t`, `up`) as if a stamp sent at `at` had just come back (unit tests).
    #[cfg(test)]
    pub fn set_answered(&mut self, t: u32, up: u8, at: Time) {
        let i = self.at(t, up);
        self.last_sent[i] = Some(at);
        self.unanswered_since[i] = None;
    }

    /// The send time of path (`t`, `up`)'s oldest unanswered stamp, if any.
    #[inline]
    pub fn unanswered_since(&self, t: u32, up: u8) -> Option<Time> {
        self.unanswered_since[self.at(t, up)]
    }

    /// The send time of path (`t`, `up`)'s oldest unanswered stamp if its silence is evidence:
    /// a stamp sent later to ToR `t`, on any path, came back. The path's RTT is then at least
    /// the stamp's age.
    #[inline]
    pub fn overdue_since(&self, t: u32, up: u8) -> Option<Time> {
        self.unanswered_since(t, up)
            .filter(|&since| self.answered_sent[t as usize] > since)
    }
}

/// The destination ToR's stamps, held for the way back: per (source ToR, source uplink) the
/// latest one that arrived and when.
#[derive(Clone, Debug)]
pub struct HeldStamps<S> {
    n_up: usize,
    slots: Vec<Option<(S, Time)>>,
    /// Per source ToR: slots in use (0 spares the scan of its slots).
    count: Vec<u32>,
}

impl<S: Copy> HeldStamps<S> {
    /// Slots for the first `n_up` uplinks of `tors` source ToRs.
    pub fn new(tors: usize, n_up: usize) -> HeldStamps<S> {
        HeldStamps {
            n_up,
            slots: vec![None; tors * n_up],
            count: vec![0; tors],
        }
    }

    /// Holds `stamp`, from uplink `up` of ToR `from`, arrived at `now` (a newer stamp of the
    /// same path replaces the one held). A source ToR with more uplinks than this one has
    /// slots for is not measured beyond them (irregular fabrics).
    pub fn hold(&mut self, from: u32, up: usize, stamp: S, now: Time) {
        if up >= self.n_up {
            return;
        }
        let slot = &mut self.slots[from as usize * self.n_up + up];
        if slot.is_none() {
            self.count[from as usize] += 1;
        }
        *slot = Some((stamp, now));
    }

    /// Takes the stamp held longest for ToR `t` and its uplink index, dropping those held
    /// longer than `stale` (`None`: nothing to return).
    pub fn take_oldest(&mut self, t: u32, now: Time, stale: Time) -> Option<(usize, S)> {
        let t = t as usize;
        if self.count[t] == 0 {
            return None;
        }
        let held = &mut self.slots[t * self.n_up..(t + 1) * self.n_up];
        let mut oldest: Option<(Time, usize)> = None;
        for (i, slot) in held.iter_mut().enumerate() {
            let Some((_, at)) = *slot else { continue };
            if now.saturating_sub(at) > stale {
                *slot = None;
                self.count[t] -= 1;
            } else if oldest.is_none_or(|(first, _)| at < first) {
                oldest = Some((at, i));
            }
        }
        let (_, i) = oldest?;
        let (stamp, _) = held[i].take()?;
        self.count[t] -= 1;
        Some((i, stamp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_wraps_and_ignores_bits_above_it() {
        let clock = StampClock::new(64_000, 17);
        let sent = Time::from_ps(clock.mask() as u64 * 64_000);
        let ts = clock.read(sent);
        // 10 us across the wrap, to the unit below.
        assert_eq!(
            clock.since(sent + Time::from_us(10), ts),
            Time::from_ps(156 * 64_000)
        );
        assert_eq!(
            clock.since(Time::from_us(3), 1 << 31 | clock.read(Time::from_us(1))),
            Time::from_ps(31 * 64_000)
        );
        assert_eq!(clock.stale(), Time::from_ps((1 << 16) * 64_000));
    }

    #[test]
    fn a_stamp_is_due_once_per_period_and_silence_counts_once_a_later_one_came_back() {
        let (us, period) = (Time::from_us, Time::from_us(8));
        let mut sent = StampsSent::new(2, 2, StampClock::new(1_000, 22));
        assert!(sent.take_due(1, 0, us(1), period));
        assert!(!sent.take_due(1, 0, us(5), period));
        assert!(sent.take_due(1, 1, us(2), period));
        // Path 0 unanswered since 1 us, but nothing came back from ToR 1 yet: no evidence.
        assert_eq!(sent.unanswered_since(1, 0), Some(us(1)));
        assert_eq!(sent.overdue_since(1, 0), None);
        // Path 1's stamp (sent at 2 us) comes back: path 0's silence now counts.
        sent.answered(1, 1, us(2));
        assert_eq!(sent.unanswered_since(1, 1), None);
        assert_eq!(sent.overdue_since(1, 0), Some(us(1)));
        // A second stamp on path 0 keeps the oldest unanswered send time.
        assert!(sent.take_due(1, 0, us(9), period));
        assert_eq!(sent.unanswered_since(1, 0), Some(us(1)));
        // The 1 us stamp answers both; a stale answer does not clear a later stamp.
        sent.answered(1, 0, us(1));
        assert_eq!(sent.unanswered_since(1, 0), None);
        assert!(sent.take_due(1, 0, us(20), period));
        sent.answered(1, 0, us(9));
        assert_eq!(sent.unanswered_since(1, 0), Some(us(20)));
        // RLB's reading: any answer clears the path.
        sent.answered_any(1, 0, us(9));
        assert_eq!(sent.unanswered_since(1, 0), None);
    }

    #[test]
    fn a_stamp_answers_itself_though_its_send_time_reads_back_a_unit_early() {
        let clock = StampClock::new(64_000, 17);
        let mut sent = StampsSent::new(1, 1, clock);
        // Sent at 60 ns into a 64 ns tick, back at 10 ns into a later tick: read back as sent
        // 50 ns early.
        let at = Time::from_ps(10 * 64_000 + 60_000);
        assert!(sent.take_due(0, 0, at, Time::from_us(1)));
        let back = Time::from_ps(200 * 64_000 + 10_000);
        let read = back.saturating_sub(clock.since(back, clock.read(at)));
        assert_eq!(read, Time::from_ps(10 * 64_000 + 10_000));
        sent.answered(0, 0, read);
        assert_eq!(sent.unanswered_since(0, 0), None);
    }

    #[test]
    fn the_oldest_fresh_stamp_goes_back_first_and_stale_ones_are_dropped() {
        let us = Time::from_us;
        let mut held: HeldStamps<u32> = HeldStamps::new(2, 3);
        assert_eq!(held.take_oldest(0, us(0), us(100)), None);
        held.hold(0, 2, 20, us(2));
        held.hold(0, 1, 10, us(1));
        held.hold(0, 0, 5, us(5));
        // A newer stamp of the same path replaces the held one (and its age).
        held.hold(0, 1, 11, us(3));
        // Beyond this ToR's slots: not held.
        held.hold(0, 3, 99, us(0));
        assert_eq!(held.take_oldest(0, us(10), us(100)), Some((2, 20)));
        assert_eq!(held.take_oldest(0, us(10), us(100)), Some((1, 11)));
        // Stale by then: dropped, not returned.
        assert_eq!(held.take_oldest(0, us(200), us(100)), None);
        assert_eq!(held.count[0], 0);
        assert_eq!(held.take_oldest(1, us(0), us(100)), None);
    }
}
