//! The stale-CNP filter at the source ToR (section 3.3, eq. 6-7).
//!
//! In pfcsim a CNP is the `cnp` flag of an ACK or NACK. A CNP of a flow that was moved and
//! whose NEW packet the destination ToR has not yet answered is stale (it reports the old
//! path). For each: `W += 1` (W counts the stale CNPs of the current move, reset when the
//! reply arrives), `avg ← (1 − w_q)·avg + w_q·W`, `p = max_p·avg/T`; the CNP is dropped with
//! probability `p` while `W < T`, and always from `W ≥ T` on. Dropping clears the flag as the
//! ACK leaves towards the sender (the ACK itself still acknowledges).

use super::Lbodsn;
use crate::lb::LbCtx;
use crate::packet::Packet;
use rand::Rng as _;

/// Eq. 6-7 for one stale CNP: updates `w` and `avg`; whether to drop it.
pub fn drop_stale(w: &mut u32, avg: &mut f64, w_q: f64, max_p: f64, t: u32, draw: f64) -> bool {
    *w += 1;
    *avg = (1.0 - w_q) * *avg + w_q * *w as f64;
    if *w >= t {
        return true;
    }
    draw < max_p * *avg / t as f64
}

impl Lbodsn {
    /// An ACK or NACK leaving this ToR towards its sender, one of this ToR's hosts.
    pub(super) fn filter_cnp(&mut self, ctx: &mut LbCtx, ack: &mut Packet) {
        if !ack.cnp() || self.tx.is_empty() {
            return;
        }
        // The data flow's key: the ACK's addresses and ports reversed.
        let key = super::key(ack.dst, ack.src, ack.dport, ack.sport);
        let n = self.tx.len();
        let f = &mut self.tx[key as usize % n];
        if f.key != key || !f.stale {
            return;
        }
        self.counters.stale_cnps += 1;
        let draw = ctx.rng.gen::<f64>();
        if drop_stale(&mut f.w, &mut f.avg, self.w_q, self.max_p, self.cnp_t, draw) {
            ack.set_cnp(false);
            self.counters.stale_cnps_dropped += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// T = 1 drops every stale CNP; max_p = 0 drops none below T.
    #[test]
    fn t_one_drops_all_and_max_p_zero_drops_none_below_t() {
        let (mut w, mut avg) = (0, 0.0);
        assert!((0..10).all(|_| drop_stale(&mut w, &mut avg, 0.25, 0.0, 1, 0.99)));
        let (mut w, mut avg) = (0, 0.0);
        assert!((0..10).all(|_| !drop_stale(&mut w, &mut avg, 0.25, 0.0, 100, 0.0)));
        // Eq. 6-7: W = 1, avg = 0.25, p = 0.5 x 0.25 / 4 = 1/32; W = 4 drops.
        let (mut w, mut avg) = (0, 0.0);
        assert!(drop_stale(&mut w, &mut avg, 0.25, 0.5, 4, 0.03));
        assert_eq!(avg, 0.25);
        let (mut w, mut avg) = (0, 0.0);
        assert!(!drop_stale(&mut w, &mut avg, 0.25, 0.5, 4, 0.04));
        assert!(!drop_stale(&mut w, &mut avg, 0.25, 0.5, 4, 0.99));
        assert!(!drop_stale(&mut w, &mut avg, 0.25, 0.5, 4, 0.99));
        assert!(drop_stale(&mut w, &mut avg, 0.25, 0.5, 4, 0.99));
        assert_eq!(w, 4);
    }
}
