//! PLB's header fields.
//!
//! `LbHeader.meta` of a data packet past its source ToR: the remaining budget `t_td` in bits
//! 0..24 (nanoseconds, saturating at about 16.8 ms) and the source ToR's uplink + 1 in bits
//! 24..32 (0: no PLB header, e.g. a packet between two hosts of one ToR).
//!
//! PLB's scheme word ([`crate::lb::Capabilities::scheme_word`]) carries the RTT and
//! utilization samples: bits 0..32 a [`Stamp`] on its way from the source ToR to the
//! destination ToR (the stamped packet's uplink is in `meta`), bits 32..64 an [`Echo`] of one
//! on its way back. Times are in units of 64 ns over 17 bits ([`CLOCK`]: they wrap after
//! 8.39 ms); the
//! utilization is the CE fold of the path's DRE metrics ([`crate::lb::dre`]); an echo names
//! the uplink in 6 bits, so a source ToR measures its first 64 uplinks.

use crate::lb::stamps::StampClock;

const BUDGET_BITS: u32 = 24;
/// The largest budget a header holds, in nanoseconds (about 16.8 ms).
pub const BUDGET_MAX_NS: u64 = (1 << BUDGET_BITS) - 1;
/// Timestamp width, and its clock (64 ns units).
const TS_BITS: u32 = 17;
pub const CLOCK: StampClock = StampClock::new(64_000, TS_BITS);
const TS_MASK: u32 = CLOCK.mask();
const VALID: u32 = 1 << 31;
const CE_SHIFT: u32 = TS_BITS;
const UP_SHIFT: u32 = CE_SHIFT + 8;
/// Uplinks an echo can name.
pub const MEASURED_UPLINKS: usize = 64;
/// `meta` carrying budget `budget_ns` (saturated) and uplink `up`.
#[inline]
pub fn pack_meta(budget_ns: u64, up: u8) -> u32 {
    budget_ns.min(BUDGET_MAX_NS) as u32 | (up as u32 + 1) << BUDGET_BITS
}

/// The budget of a PLB `meta`, in nanoseconds.
#[inline]
pub fn meta_budget_ns(meta: u32) -> u64 {
    (meta & BUDGET_MAX_NS as u32) as u64
}

/// The source ToR's uplink of a PLB `meta` (`None`: no PLB header).
#[inline]
pub fn meta_uplink(meta: u32) -> Option<u8> {
    let up = meta >> BUDGET_BITS;
    (up != 0).then(|| (up - 1) as u8)
}

/// `meta` with its budget set to `budget_ns` (saturated), the uplink kept.
#[inline]
pub fn with_budget(meta: u32, budget_ns: u64) -> u32 {
    meta & !(BUDGET_MAX_NS as u32) | budget_ns.min(BUDGET_MAX_NS) as u32
}

/// A path sample on its way to the destination ToR: when it left the source ToR, and the
/// largest DRE metric met so far (CE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub ts: u32,
    pub ce: u8,
}

/// A [`Stamp`] on its way back to the source ToR, with the uplink it measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Echo {
    pub up: u8,
    pub stamp: Stamp,
}

/// The contents of PLB's scheme word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Word {
    pub stamp: Option<Stamp>,
    pub echo: Option<Echo>,
}

impl Word {
    /// The word's fields.
    #[inline]
    pub fn of(word: u64) -> Word {
        let (lo, hi) = (word as u32, (word >> 32) as u32);
        let stamp_of = |half: u32| Stamp {
            ts: half & TS_MASK,
            ce: (half >> CE_SHIFT) as u8,
        };
        Word {
            stamp: (lo & VALID != 0).then(|| stamp_of(lo)),
            echo: (hi & VALID != 0).then(|| Echo {
                up: (hi >> UP_SHIFT & 0x3f) as u8,
                stamp: stamp_of(hi),
            }),
        }
    }

    /// The word carrying these fields.
    #[inline]
    pub fn bits(self) -> u64 {
        let half = |s: Stamp| VALID | (s.ce as u32) << CE_SHIFT | s.ts & TS_MASK;
        let lo = self.stamp.map_or(0, half);
        let hi = self
            .echo
            .map_or(0, |e| half(e.stamp) | (e.up as u32 & 0x3f) << UP_SHIFT);
        lo as u64 | (hi as u64) << 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_keeps_budget_and_uplink_and_saturates_the_budget() {
        let m = pack_meta(12_345, 7);
        assert_eq!((meta_budget_ns(m), meta_uplink(m)), (12_345, Some(7)));
        assert_eq!(meta_budget_ns(pack_meta(u64::MAX, 0)), BUDGET_MAX_NS);
        assert_eq!(meta_uplink(pack_meta(0, 0)), Some(0));
        assert_eq!(meta_uplink(0), None);
        let m = with_budget(m, 99);
        assert_eq!((meta_budget_ns(m), meta_uplink(m)), (99, Some(7)));
    }

    #[test]
    fn the_word_round_trips() {
        let w = Word {
            stamp: Some(Stamp { ts: 5, ce: 200 }),
            echo: Some(Echo {
                up: 63,
                stamp: Stamp { ts: TS_MASK, ce: 1 },
            }),
        };
        assert_eq!(Word::of(w.bits()), w);
        assert_eq!(Word::of(0), Word::default());
        assert_ne!(Word { stamp: None, ..w }.bits(), 0);
    }
}
