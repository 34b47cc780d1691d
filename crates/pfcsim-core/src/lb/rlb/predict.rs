//! The prediction module (III-B.1, III-B.3): sampling of the watched ingress queues, the CNMs
//! that warn the upstream switch, and the warned (and blocked) egresses of the upstream side.

use super::{Rlb, WarningEnd, MSG_CNM};
use crate::lb::LbCtx;
use crate::packet::LbHeader;
use crate::port::N_PRIO;
use crate::units::Time;

/// A CNM's `meta`: kind, warn (1) or clear (0), priority, the warning switch's port id.
pub fn cnm_meta(warn: bool, prio: u8, port: u16) -> u32 {
    MSG_CNM | (warn as u32) << 2 | (prio as u32 & 7) << 3 | (port as u32) << 8
}

/// Prediction state of one watched (ingress port, priority).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Watch {
    last: u64,
    warning: bool,
    sent: Time,
}

impl Rlb {
    /// Whether egress `port` carries a warning for priority `prio`.
    #[inline]
    pub fn warned(&self, port: u16, prio: u8, now: Time) -> bool {
        self.warned_until[port as usize * N_PRIO + prio as usize] > now
    }

    /// Whether the packet may not take egress `port` as it is (warned, or found faulty).
    #[inline]
    pub(super) fn blocked(&self, port: u16, prio: u8, now: Time) -> bool {
        self.removed[port as usize] || self.warned(port, prio, now)
    }

    /// Whether this switch is warning its upstream about ingress (`port`, `prio`) now.
    pub fn warning_sent(&self, port: u16, prio: u8) -> bool {
        self.watch[port as usize * N_PRIO + prio as usize].warning
    }

    /// A CNM from the downstream switch on egress `port` (`meta`: [`cnm_meta`]): the egress
    /// is warned for the CNM's priority (until cleared, or for `warning_ttl` in `expiry`
    /// mode), or the warning is lifted.
    pub(super) fn on_cnm(&mut self, now: Time, port: u16, meta: u32) {
        let warn = meta >> 2 & 1 == 1;
        let prio = (meta >> 3 & 7) as usize;
        let until = match (warn, self.warning_end) {
            (false, _) => Time::ZERO,
            (true, WarningEnd::Clear) => Time::MAX,
            (true, WarningEnd::Expiry) => now + self.ttl,
        };
        self.warned_until[port as usize * N_PRIO + prio] = until;
    }

    /// The prediction module: one sample of every watched ingress queue. Returns whether
    /// any of them is in use or warned (sampling goes on).
    pub(super) fn predict(&mut self, ctx: &mut LbCtx) -> bool {
        let Some(mmu) = ctx.mmu else { return false };
        let mut busy = false;
        let threshold = mmu.threshold();
        let interval = self.interval.ps() as u128;
        for &p in &self.watched {
            let port = p as usize;
            let horizon = self.horizon[port].ps() as u128;
            for prio in 1..N_PRIO as u8 {
                let used = mmu.ingress_use(port, prio);
                let w = &mut self.watch[port * N_PRIO + prio as usize];
                let prev = w.last;
                w.last = used;
                if used == 0 && prev == 0 && !w.warning {
                    continue;
                }
                busy = true;
                let growth = used.saturating_sub(prev) as u128;
                let projected = used as u128 + growth * horizon / interval;
                let danger = mmu.is_pausing(port, prio)
                    || (used >= self.q_min[port] && growth > 0 && projected >= threshold as u128);
                let refresh = self.warning_end == WarningEnd::Expiry
                    && ctx.now.saturating_sub(w.sent).ps() * 2 >= self.ttl.ps();
                let send = match (w.warning, danger) {
                    (false, true) => Some(true),
                    (true, true) if refresh => Some(true),
                    (true, false) if self.warning_end == WarningEnd::Clear => Some(false),
                    _ => None,
                };
                w.warning = danger;
                if let Some(warn) = send {
                    w.sent = ctx.now;
                    if warn {
                        self.counters.cnm_warnings += 1;
                    } else {
                        self.counters.cnm_clears += 1;
                    }
                    ctx.send_control(
                        p,
                        LbHeader {
                            path_tag: 0,
                            meta: cnm_meta(warn, prio, p),
                        },
                    );
                }
            }
        }
        busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::rlb::tests::{cnm, ecmp_inner, leaf, switch, warn};
    use crate::lb::rlb::RlbConfig;
    use crate::lb::{Layer, LbAction, SwitchScheme};
    use crate::mmu::{Mmu, Threshold};

    /// A 9 MB buffer with a static 100 KB PFC threshold, 6 ports of 50 KB headroom.
    fn mmu_100kb() -> Mmu {
        Mmu::new(
            9_000_000,
            4_000,
            3_000,
            Threshold::Static { bytes: 100_000 },
            true,
            vec![50_000; 6],
        )
    }

    /// PFC prediction and the clearing CNM. Checked to fail with prediction disabled (no CNM)
    /// and with no clearing CNM sent.
    #[test]
    fn a_ramping_ingress_queue_is_warned_before_it_pauses_and_cleared_when_it_drains() {
        let mut rlb = leaf(&ecmp_inner());
        let mut sw = switch();
        // Threshold 100 KB static; uplink port 2 receives 4 KB per 2 us interval (16 Gbps).
        let mut mmu = mmu_100kb();
        let mut first_cnm = None;
        let mut paused_at = None;
        for tick in 1..=40u64 {
            for _ in 0..4 {
                if let crate::mmu::Admission::Accept { pause: true } = mmu.arrive(2, 0, 3, 1_000) {
                    paused_at.get_or_insert(tick);
                }
            }
            let mut ctx = sw.ctx(tick * 2_000);
            ctx.mmu = Some(&mmu);
            rlb.predict(&mut ctx);
            if let Some(LbAction::SendControl {
                port: 2, header, ..
            }) = sw.actions.pop()
            {
                assert_eq!(header.meta, cnm_meta(true, 3, 2));
                first_cnm.get_or_insert(tick);
            }
            assert!(sw.actions.is_empty());
        }
        let (cnm, pause) = (first_cnm.unwrap(), paused_at.unwrap());
        // Horizon 2 + 2 x 2 = 6 us = 3 intervals of 4 KB: warned 12 KB before the threshold.
        assert!(cnm < pause, "CNM at tick {cnm}, PAUSE at tick {pause}");
        assert_eq!(pause - cnm, 3);
        assert_eq!(rlb.counters.cnm_warnings, 1);
        // Drain well below: cleared once the PAUSE is over and the queue no longer grows.
        for _ in 0..150 {
            mmu.release(2, 0, 3, 1_000);
        }
        let mut ctx = sw.ctx(100_000);
        ctx.mmu = Some(&mmu);
        rlb.predict(&mut ctx);
        assert_eq!(
            sw.actions.pop(),
            Some(LbAction::SendControl {
                port: 2,
                header: LbHeader {
                    path_tag: 0,
                    meta: cnm_meta(false, 3, 2)
                },
                layer: Layer::Wrapper,
            })
        );
        // Host ports are never watched.
        assert_eq!(rlb.watched, vec![2, 3, 4, 5]);
    }

    /// `warning_end = "expiry"`. Checked to fail with warnings that never expire upstream,
    /// with no refresh of a lasting warning, and with prediction disabled.
    #[test]
    fn expiry_mode_refreshes_a_lasting_warning_and_forgets_one_that_is_not_refreshed() {
        let cfg = RlbConfig {
            warning_end: WarningEnd::Expiry,
            warning_ttl: Time::from_us(10),
            ..ecmp_inner()
        };
        // The upstream side: a warning lasts warning_ttl after the CNM.
        let mut rlb = leaf(&cfg);
        let mut sw = switch();
        warn(&mut rlb, &mut sw, 3, 3);
        assert!(rlb.warned(3, 3, Time::from_us(9)));
        assert!(!rlb.warned(3, 3, Time::from_us(10)));
        // The warning side: ingress (2, 3) pauses from 2 us to 20 us. A CNM at 2 us, then one
        // every warning_ttl / 2 = 5 us (on the 2 us ticks: 8, 14, 20 us); no clearing CNM
        // after the drain.
        let mut mmu = mmu_100kb();
        let mut sent = Vec::new();
        for tick in 1..=15u64 {
            match tick {
                1 => (0..110).for_each(|_| {
                    mmu.arrive(2, 0, 3, 1_000);
                }),
                11 => (0..110).for_each(|_| {
                    mmu.release(2, 0, 3, 1_000);
                }),
                _ => {}
            }
            let mut ctx = sw.ctx(tick * 2_000);
            ctx.mmu = Some(&mmu);
            rlb.predict(&mut ctx);
            while let Some(a) = sw.actions.pop() {
                assert_eq!(
                    a,
                    LbAction::SendControl {
                        port: 2,
                        header: LbHeader {
                            path_tag: 0,
                            meta: cnm_meta(true, 3, 2)
                        },
                        layer: Layer::Wrapper,
                    }
                );
                sent.push(tick * 2);
            }
        }
        assert_eq!(sent, [2, 8, 14, 20]);
        assert_eq!((rlb.counters.cnm_warnings, rlb.counters.cnm_clears), (4, 0));
        // Upstream, these CNMs keep the egress warned without a gap until 10 us after the
        // last one.
        let mut up = leaf(&cfg);
        let mut at = 0;
        for t_us in 2..=40u64 {
            if sent.contains(&t_us) {
                up.on_control(&mut sw.ctx(t_us * 1_000), 3, &cnm(cnm_meta(true, 3, 2)));
                at = t_us;
            }
            let now = Time::from_us(t_us) + Time::from_ns(500);
            assert_eq!(up.warned(3, 3, now), t_us < at + 10, "at {t_us}.5 us");
        }
    }
}
