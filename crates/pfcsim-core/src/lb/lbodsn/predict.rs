//! PFC prediction at the destination ToR (section 3.2, eq. 1-2) and the FCNs it sends.
//!
//! Per (ingress port from a spine, priority) a [`Window`] measures, over `rate_window`, the
//! arrival rate λ (bytes of LBoDSN data packets arriving), the departure rate μ (those bytes
//! leaving towards the hosts) and the growth ΔL of the queue `Q` (the bytes charged to the
//! ingress against the XOFF threshold, [`crate::mmu::Mmu::ingress_use`], as RLB reads them).
//! Rates are those of the last complete window. At every arrival, while `λ > μ`, the trigger
//! fires when `Q ≥ Q_th` (eq. 1, clamped by eq. 2), at most once per `fcn_gap`; it names the
//! congested flows ([`super::flows`]) and sends each one's source ToR an FCN with a target
//! ([`super::target`]). The episode ends, and every warned source ToR gets a tag-0 FCN for
//! the path, once `Q < Q_th` and `ΔL ≤ 0`.

use super::flows::Slot;
use super::header::{Msg, MSG_FCN};
use super::Lbodsn;
use crate::lb::{LbCtx, RoutedMessage};
use crate::packet::LbHeader;
use crate::port::{CONTROL_PRIO, N_PRIO};
use crate::units::Time;

/// Rate and growth measurement of one ingress queue.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    start: Time,
    arr: u64,
    dep: u64,
    q_start: u64,
    /// λ and μ of the last complete window, bytes per ns.
    pub lambda: f64,
    pub mu: f64,
    /// ΔL of the last complete window, bytes per ns.
    pub slope: f64,
    /// When the last tag-1 FCN for this queue left.
    pub last_fcn: Option<Time>,
}

impl Window {
    /// Closes the window if `window` has passed (`q`: the queue now).
    #[inline]
    pub fn roll(&mut self, now: Time, window: Time, q: u64) {
        if now < self.start + window {
            return;
        }
        let el = (now - self.start).as_ns_f64();
        if el > 0.0 {
            self.lambda = self.arr as f64 / el;
            self.mu = self.dep as f64 / el;
            self.slope = (q as f64 - self.q_start as f64) / el;
        }
        self.start = now;
        self.arr = 0;
        self.dep = 0;
        self.q_start = q;
    }

    #[inline]
    pub fn arrive(&mut self, bytes: u64) {
        self.arr += bytes;
    }

    #[inline]
    pub fn depart(&mut self, bytes: u64) {
        self.dep += bytes;
    }
}

/// Eq. 1 clamped by eq. 2: `ε·(Q_PFC − (λ−μ)·t_d)` within `[C·t_d, ε·(Q_PFC − C·t_d)]`
/// (the upper bound wins when the range is empty, so that the trigger still comes before
/// the PAUSE). Rates in bytes per ns, `t_d` in ns.
pub fn q_th(epsilon: f64, q_pfc: u64, lambda: f64, mu: f64, t_d_ns: f64, c: f64) -> f64 {
    let x = epsilon * (q_pfc as f64 - (lambda - mu) * t_d_ns);
    let lo = c * t_d_ns;
    let hi = epsilon * (q_pfc as f64 - c * t_d_ns);
    x.max(lo).min(hi).max(0.0)
}

/// A source ToR warned in an episode of one ingress queue: where a tag-0 FCN goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Warned {
    pub src_tor: u32,
    pub up: u8,
    pub host: u32,
}

impl Lbodsn {
    /// `Q_th` of ingress (`port`, `prio`) now.
    pub(super) fn threshold_of(&self, port: u16, prio: u8, q_pfc: u64) -> f64 {
        let w = &self.windows[port as usize * N_PRIO + prio as usize];
        q_th(
            self.epsilon,
            q_pfc,
            w.lambda,
            w.mu,
            self.t_d.as_ns_f64(),
            self.port_bytes_per_ns[port as usize],
        )
    }

    /// The trigger, at the arrival of an LBoDSN data packet on ingress (`port`, `prio`).
    pub(super) fn check_trigger(&mut self, ctx: &mut LbCtx, port: u16, prio: u8) {
        let Some(mmu) = ctx.mmu else { return };
        let pq = port as usize * N_PRIO + prio as usize;
        let q = mmu.ingress_use(port as usize, prio);
        let pausing = mmu.is_pausing(port as usize, prio);
        if pausing && self.first_pause_seen.is_none() {
            self.first_pause_seen = Some(ctx.now);
        }
        let w = self.windows[pq];
        if w.last_fcn.is_some_and(|t| ctx.now < t + self.fcn_gap) {
            return;
        }
        let fire = if self.predict {
            w.lambda > w.mu && q as f64 >= self.threshold_of(port, prio, mmu.threshold())
        } else {
            pausing
        };
        if !fire {
            return;
        }
        let flows = self
            .flows
            .congested(port, prio, q, self.f_cc, self.flows_per_fcn as usize);
        if flows.is_empty() {
            return;
        }
        self.windows[pq].last_fcn = Some(ctx.now);
        for s in flows {
            self.notify(ctx, port, prio, &s, pausing);
        }
    }

    /// Sends a tag-1 FCN moving flow `s` to a target uplink of its source ToR.
    fn notify(&mut self, ctx: &mut LbCtx, port: u16, prio: u8, s: &Slot, pausing: bool) {
        let Some(target) = self.choose_target(ctx, s.src_tor, s.up, prio) else {
            return;
        };
        let me = self.my_tor.unwrap_or(0);
        self.counters.fcns += 1;
        if pausing {
            self.counters.fcns_while_pausing += 1;
        }
        if self.first_pause_seen.is_none() {
            self.counters.fcns_before_pause += 1;
        }
        if self.first_fcn.is_none() {
            self.first_fcn = Some(ctx.now);
        }
        Self::send(
            ctx,
            s.src,
            s.sport,
            s.dport,
            s.key,
            Msg {
                kind: MSG_FCN,
                tag: true,
                target,
                old: s.up,
                dst_tor: me,
            },
        );
        let warned = Warned {
            src_tor: s.src_tor,
            up: s.up,
            host: s.src,
        };
        let list = &mut self.episode[port as usize * N_PRIO + prio as usize];
        if !list.contains(&warned) {
            list.push(warned);
        }
    }

    /// Ends the episode of ingress (`port`, `prio`) if its queue is below `Q_th` and not
    /// growing: every warned source ToR gets a tag-0 FCN for the path.
    pub(super) fn check_clear(&mut self, ctx: &mut LbCtx, port: u16, prio: u8) {
        let pq = port as usize * N_PRIO + prio as usize;
        if self.episode[pq].is_empty() {
            return;
        }
        let Some(mmu) = ctx.mmu else { return };
        let q = mmu.ingress_use(port as usize, prio) as f64;
        if q >= self.threshold_of(port, prio, mmu.threshold()) || self.windows[pq].slope > 0.0 {
            return;
        }
        let me = self.my_tor.unwrap_or(0);
        for w in std::mem::take(&mut self.episode[pq]) {
            self.counters.fcn_clears += 1;
            Self::send(
                ctx,
                w.host,
                0,
                0,
                0,
                Msg {
                    kind: MSG_FCN,
                    tag: false,
                    target: w.up,
                    old: w.up,
                    dst_tor: me,
                },
            );
        }
    }

    /// A 64-byte strict-priority scheme message to the ToR of host `to_host`.
    pub(super) fn send(ctx: &mut LbCtx, to_host: u32, sport: u16, dport: u16, key: u32, msg: Msg) {
        ctx.send_routed(RoutedMessage {
            via: None,
            src: ctx.node,
            to_host,
            sport: dport,
            dport: sport,
            priority: CONTROL_PRIO,
            header: LbHeader {
                path_tag: key,
                meta: msg.pack(),
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q_th_follows_eq_1_within_the_bounds_of_eq_2() {
        // Q_PFC 200 KB, t_d 2 us, C 12.5 B/ns: bounds [25 KB, 140 KB].
        let th = |l: f64, m: f64| q_th(0.8, 200_000, l, m, 2_000.0, 12.5);
        // λ − μ = 5 B/ns: 0.8 x (200 KB − 10 KB) = 152 KB, clamped to 140 KB.
        assert!((th(17.5, 12.5) - 140_000.0).abs() < 1e-6);
        // λ − μ = 50 B/ns: 0.8 x (200 KB − 100 KB) = 80 KB.
        assert!((th(62.5, 12.5) - 80_000.0).abs() < 1e-6);
        // Fast growth: clamped at C·t_d = 25 KB.
        assert!((th(112.5, 12.5) - 25_000.0).abs() < 1e-6);
        // A small Q_PFC: the upper bound wins (below the PAUSE).
        assert!(q_th(0.8, 20_000, 30.0, 12.5, 2_000.0, 12.5) < 20_000.0);
    }

    #[test]
    fn a_window_measures_rates_and_growth() {
        let mut w = Window::default();
        w.roll(Time::ZERO, Time::from_us(1), 0);
        w.arrive(20_000);
        w.depart(12_500);
        w.roll(Time::from_ns(500), Time::from_us(1), 7_500);
        assert_eq!(w.lambda, 0.0);
        w.roll(Time::from_us(1), Time::from_us(1), 7_500);
        assert_eq!((w.lambda, w.mu, w.slope), (20.0, 12.5, 7.5));
    }
}
