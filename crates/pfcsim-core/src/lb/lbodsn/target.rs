//! The target of an FCN (section 3.2, eq. 4-5): two random uplinks of the flow's source ToR
//! other than its current one (power of two choices), the one with the smaller
//! `T_d = T_path + T_PFC` kept.
//!
//! * `T_path`: the latest one-way delay of the path (source ToR uplink → this ToR), read from
//!   the send time and uplink stamped on its data packets (0 while the path is unseen).
//! * `T_PFC`: 0 unless this ToR is pausing the ingress the path arrives on (learnt from the
//!   packets: path (source ToR, uplink) ↦ local ingress port). Then
//!   `(Q − Q*)/(−ΔL) + T_re_flight` with `Q* = XOFF − resume_offset` and `T_re_flight` the
//!   link's propagation delay back to the spine; infinite while `ΔL ≥ 0`.
//!
//! The source ToR is taken to have as many uplinks as this one (a regular leaf-spine).

use super::Lbodsn;
use crate::lb::LbCtx;
use crate::port::N_PRIO;
use crate::units::Time;
use rand::Rng as _;

/// What the destination ToR knows of each path towards it.
#[derive(Clone, Debug, Default)]
pub struct Paths {
    n_up: usize,
    /// `delay[src_tor * n_up + up]`: latest one-way delay (`None`: unseen).
    delay: Vec<Option<Time>>,
    /// The local ingress port of that path (`u16::MAX`: unknown).
    ingress: Vec<u16>,
}

impl Paths {
    pub fn new(tors: usize, n_up: usize) -> Paths {
        Paths {
            n_up,
            delay: vec![None; tors * n_up],
            ingress: vec![u16::MAX; tors * n_up],
        }
    }

    /// A data packet of path (`src_tor`, `up`) arrived on `port` after `delay`.
    #[inline]
    pub fn seen(&mut self, src_tor: u32, up: u8, port: u16, delay: Time) {
        if (up as usize) < self.n_up {
            let i = src_tor as usize * self.n_up + up as usize;
            if let Some(d) = self.delay.get_mut(i) {
                *d = Some(delay);
                self.ingress[i] = port;
            }
        }
    }

    /// (latest delay, local ingress) of path (`src_tor`, `up`).
    pub fn of(&self, src_tor: u32, up: u8) -> (Option<Time>, Option<u16>) {
        let i = src_tor as usize * self.n_up + up as usize;
        let port = self.ingress.get(i).copied().filter(|&p| p != u16::MAX);
        (self.delay.get(i).copied().flatten(), port)
    }

    pub fn n_up(&self) -> usize {
        self.n_up
    }
}

/// Eq. 5: the time until a pausing ingress resumes, ns (infinite while it is not draining).
pub fn t_pfc_ns(q: u64, q_resume: u64, slope: f64, re_flight_ns: f64) -> f64 {
    if slope >= 0.0 {
        f64::INFINITY
    } else {
        q.saturating_sub(q_resume) as f64 / -slope + re_flight_ns
    }
}

impl Lbodsn {
    /// `T_d` (eq. 4) of path (`src_tor`, `up`) for priority `prio`, ns.
    pub(super) fn t_d_ns(&mut self, ctx: &LbCtx, src_tor: u32, up: u8, prio: u8) -> f64 {
        let (delay, port) = self.paths.of(src_tor, up);
        let t_path = delay.map_or(0.0, Time::as_ns_f64);
        let (Some(port), Some(mmu)) = (port, ctx.mmu) else {
            return t_path;
        };
        if !mmu.is_pausing(port as usize, prio) {
            return t_path;
        }
        let q = mmu.ingress_use(port as usize, prio);
        let w = &mut self.windows[port as usize * N_PRIO + prio as usize];
        w.roll(ctx.now, self.rate_window, q);
        let q_resume = mmu.threshold().saturating_sub(mmu.resume_offset());
        let re_flight = self.port_delay[port as usize].as_ns_f64();
        t_path + t_pfc_ns(q, q_resume, w.slope, re_flight)
    }

    /// The target uplink for a flow of `src_tor` now on `cur` (`None`: no other uplink).
    pub(super) fn choose_target(
        &mut self,
        ctx: &mut LbCtx,
        src_tor: u32,
        cur: u8,
        prio: u8,
    ) -> Option<u8> {
        let n = self.paths.n_up();
        if n < 2 {
            return None;
        }
        // Two distinct uplinks other than `cur`, uniformly.
        let others = n - 1;
        let pick = |i: usize| -> u8 {
            if i >= cur as usize {
                i as u8 + 1
            } else {
                i as u8
            }
        };
        let a = ctx.rng.gen_range(0..others);
        if others == 1 {
            return Some(pick(a));
        }
        let mut b = ctx.rng.gen_range(0..others - 1);
        if b >= a {
            b += 1;
        }
        let (a, b) = (pick(a), pick(b));
        let (da, db) = (
            self.t_d_ns(ctx, src_tor, a, prio),
            self.t_d_ns(ctx, src_tor, b, prio),
        );
        if da.is_infinite() && db.is_infinite() {
            self.counters.no_target += 1;
            return None;
        }
        Some(if db < da { b } else { a })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_pfc_is_infinite_unless_draining() {
        assert!(t_pfc_ns(100_000, 50_000, 0.0, 1_000.0).is_infinite());
        assert!(t_pfc_ns(100_000, 50_000, 2.0, 1_000.0).is_infinite());
        // 50 KB above Q* draining at 0.5 B/ns: 100 us, plus the 1 us flight.
        assert_eq!(t_pfc_ns(100_000, 50_000, -0.5, 1_000.0), 101_000.0);
        assert_eq!(t_pfc_ns(40_000, 50_000, -0.5, 1_000.0), 1_000.0);
    }
}
