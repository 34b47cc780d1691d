//! ConWeave's header fields (see the module doc): the flags of data packets, the kinds of
//! scheme messages, the 27-bit timestamps, and a data packet's `meta` (flag in bits 0..2, phase
//! in bit 2, epoch in bits 3..5, timestamp in bits 5..32). A scheme message carries the flow key
//! in `path_tag` and, in `meta`, its kind (bits 0..2) with the phase and epoch placed as in a
//! data packet (REPLY, CLEAR), or the path (bits 8..16) and the ToR that saw the mark (bits
//! 16..) (NOTIFY).

use crate::units::Time;

/// Flag of a data packet (`meta` bits 0..2); 0: not stamped by ConWeave (intra-ToR).
pub const FLAG_DATA: u32 = 1;
/// RTT request: the destination ToR answers with RTT_REPLY.
pub const FLAG_INIT: u32 = 2;
/// Last packet on the old path: the destination ToR answers with CLEAR.
pub const FLAG_TAIL: u32 = 3;
const TS_BITS: u32 = 27;
const TS_MASK: u32 = (1 << TS_BITS) - 1;

/// Kinds of scheme messages (`meta` bits 0..2 of a control header).
pub const MSG_REPLY: u32 = 1;
pub const MSG_CLEAR: u32 = 2;
pub const MSG_NOTIFY: u32 = 3;

/// The 27-bit nanosecond timestamp of `t`.
#[inline]
pub(super) fn ts(t: Time) -> u32 {
    (t.ps() / 1_000) as u32 & TS_MASK
}

/// `a - b` of two 27-bit timestamps, in ns (0 if `a` is before `b`).
#[inline]
pub(super) fn ts_gap(a: u32, b: u32) -> u64 {
    let d = a.wrapping_sub(b) & TS_MASK;
    if d > TS_MASK / 2 {
        0
    } else {
        d as u64
    }
}

/// Packs the data-packet fields into `meta`.
pub fn pack_data(flag: u32, phase: u8, epoch: u8, ts: u32) -> u32 {
    flag | (phase as u32 & 1) << 2 | (epoch as u32 & 3) << 3 | (ts & TS_MASK) << 5
}

/// (flag, phase, epoch, timestamp) of a data packet's `meta`.
pub fn unpack_data(meta: u32) -> (u32, u8, u8, u32) {
    (
        meta & 3,
        (meta >> 2 & 1) as u8,
        (meta >> 3 & 3) as u8,
        meta >> 5,
    )
}
