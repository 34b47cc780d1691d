//! LBoDSN's header fields, carried in [`crate::packet::LbHeader`] (no extra wire bytes).
//!
//! A data packet between two ToRs: `path_tag` byte 0 is the source ToR's uplink + 1 (the
//! switch honours it at hop 0); `meta` bit 0 marks the header present, bit 1 TAIL (the last
//! packet of the flow on its old path), bit 2 NEW (the first on its new path), bits 3..5 the
//! flow's epoch (moves so far, modulo 4), bits 5..11 the uplink, bits 11..32 the source ToR's
//! send time in 16 ns units (wrapping after 33.5 ms).
//!
//! A scheme message (64 bytes, strict priority, routed to the source ToR): `path_tag` the flow
//! key (0 in a tag-0 FCN), `meta` bits 0..2 the kind, bit 2 the FCN's congestion tag, bits
//! 3..9 the target uplink, bits 9..15 the old (warned) uplink, bits 15..32 the destination
//! ToR that sent it.

use crate::units::Time;

pub const PRESENT: u32 = 1;
pub const TAIL: u32 = 1 << 1;
pub const NEW: u32 = 1 << 2;
const TS_UNIT_PS: u64 = 16_000;
const TS_BITS: u32 = 21;
const TS_MASK: u32 = (1 << TS_BITS) - 1;
/// Uplinks a header can name.
pub const MAX_UPLINKS: usize = 64;

/// A flow congestion notification (tag 1: move the flow; tag 0: the path is clear).
pub const MSG_FCN: u32 = 1;
/// The destination ToR's answer to a NEW packet.
pub const MSG_NEW_REPLY: u32 = 2;

/// The fields of a data packet's `meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Data {
    pub tail: bool,
    pub new: bool,
    pub epoch: u8,
    pub up: u8,
    pub ts: u32,
}

/// The 16 ns timestamp of `t`.
#[inline]
pub fn timestamp(t: Time) -> u32 {
    (t.ps() / TS_UNIT_PS) as u32 & TS_MASK
}

/// Time from timestamp `ts` to `now` (modulo the wrap).
#[inline]
pub fn since(now: Time, ts: u32) -> Time {
    Time::from_ps((timestamp(now).wrapping_sub(ts) & TS_MASK) as u64 * TS_UNIT_PS)
}

impl Data {
    #[inline]
    pub fn pack(self) -> u32 {
        PRESENT
            | if self.tail { TAIL } else { 0 }
            | if self.new { NEW } else { 0 }
            | (self.epoch as u32 & 3) << 3
            | (self.up as u32 & 0x3f) << 5
            | (self.ts & TS_MASK) << 11
    }

    /// The fields of `meta`, if it carries an LBoDSN header.
    #[inline]
    pub fn of(meta: u32) -> Option<Data> {
        (meta & PRESENT != 0).then_some(Data {
            tail: meta & TAIL != 0,
            new: meta & NEW != 0,
            epoch: (meta >> 3 & 3) as u8,
            up: (meta >> 5 & 0x3f) as u8,
            ts: meta >> 11,
        })
    }
}

/// The fields of a scheme message's `meta`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    pub kind: u32,
    pub tag: bool,
    pub target: u8,
    pub old: u8,
    pub dst_tor: u32,
}

impl Msg {
    #[inline]
    pub fn pack(self) -> u32 {
        self.kind & 3
            | (self.tag as u32) << 2
            | (self.target as u32 & 0x3f) << 3
            | (self.old as u32 & 0x3f) << 9
            | self.dst_tor << 15
    }

    #[inline]
    pub fn of(meta: u32) -> Msg {
        Msg {
            kind: meta & 3,
            tag: meta >> 2 & 1 == 1,
            target: (meta >> 3 & 0x3f) as u8,
            old: (meta >> 9 & 0x3f) as u8,
            dst_tor: meta >> 15,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_timestamps_wrap() {
        let d = Data {
            tail: true,
            new: false,
            epoch: 3,
            up: 63,
            ts: TS_MASK,
        };
        assert_eq!(Data::of(d.pack()), Some(d));
        assert_eq!(Data::of(0), None);
        let m = Msg {
            kind: MSG_FCN,
            tag: true,
            target: 5,
            old: 62,
            dst_tor: 70_000,
        };
        assert_eq!(Msg::of(m.pack()), m);
        let sent = Time::from_ps(TS_MASK as u64 * TS_UNIT_PS);
        let ts = timestamp(sent);
        assert_eq!(since(sent + Time::from_ns(3_200), ts), Time::from_ns(3_200));
    }
}
