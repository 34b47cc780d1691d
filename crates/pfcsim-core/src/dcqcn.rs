//! DCQCN congestion control, Mellanox flavour as modelled by the HPCC and ConWeave ns-3
//! simulators (see `docs/dcqcn.md` for the parameter table and its sources).
//!
//! * Congestion point: RED/ECN marking at switch dequeue (in the switch, see `sim/switch.rs`).
//! * Notification point: the receiver sets a CNP flag on the ACK/NACK generated for a
//!   CE-marked packet (no separate CNP packet and no 50 us coalescing, as in both references).
//! * Reaction point (this file): per queue pair, rate `rc`, target `rt`, `alpha`; an
//!   alpha-update timer every `alpha_interval`, a decrease check every `decrease_interval`
//!   (first at `decrease_interval + 1ns` after the first CNP) and a rate-increase timer every
//!   `increase_interval` after the last cut (fast recovery, additive, then hyper increase).
//!
//! The two periodic timers run "forever" in the references but only matter when a CNP has
//! arrived, so here they are evaluated lazily: alpha is brought up to date in closed form when
//! it is needed, and a decrease-check event is scheduled only for the first check boundary
//! after a CNP. The results are the same as with real periodic timers (a timer that fires at
//! the same picosecond as a CNP arrival is taken to fire first).

use crate::units::{Rate, Time};
use serde::{Deserialize, Serialize};

/// DCQCN parameters. Defaults follow the ConWeave ns-3 `run.py` (the reference scenario R1);
/// `docs/dcqcn.md` lists the HPCC and paper values next to them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnConfig {
    /// Alpha gain g.
    pub g: f64,
    /// Alpha-update period (ConWeave: 1 us).
    pub alpha_interval: Time,
    /// Rate-decrease check period (ConWeave: 4 us).
    pub decrease_interval: Time,
    /// Rate-increase timer (ConWeave: 300 us).
    pub increase_interval: Time,
    /// Fast-recovery stages F (ConWeave: 1).
    pub fast_recovery_stages: u32,
    /// Additive increase step R_AI (ConWeave: 40 Mb/s at 100 G).
    pub additive_increase: Rate,
    /// Hyper increase step R_HAI (ConWeave: 100 Mb/s at 100 G).
    pub hyper_increase: Rate,
    /// Lowest rate a cut can reach (ConWeave: 100 Mb/s).
    pub min_rate: Rate,
    /// Multiplier applied to the rate on the first CNP of a queue pair (1.0: no cut).
    pub rate_on_first_cnp: f64,
    /// Set the target rate to the current rate on every cut (ConWeave: false).
    pub clamp_target_rate: bool,
}

impl Default for DcqcnConfig {
    fn default() -> Self {
        DcqcnConfig {
            g: 1.0 / 256.0,
            alpha_interval: Time::from_us(1),
            decrease_interval: Time::from_us(4),
            increase_interval: Time::from_us(300),
            fast_recovery_stages: 1,
            additive_increase: Rate::mbps(40),
            hyper_increase: Rate::mbps(100),
            min_rate: Rate::mbps(100),
            rate_on_first_cnp: 1.0,
            clamp_target_rate: false,
        }
    }
}

/// What the owner of a [`Dcqcn`] must schedule after a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DcqcnTimer {
    /// A decrease check at this time.
    Decrease(Time),
    /// A rate-increase step at this time, valid while the generation matches.
    Increase(Time, u32),
}

/// Reaction-point state of one queue pair. Rates are in bits per second.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    line: f64,
    rc: f64,
    rt: f64,
    alpha: f64,
    first_cnp_at: Option<Time>,
    alpha_slots_done: u64,
    cnp_in_alpha_slot: bool,
    cnp_since_check: bool,
    check_pending: bool,
    stage: u32,
    increase_gen: u32,
}

impl Dcqcn {
    /// A queue pair starting at line rate.
    pub fn new(line: Rate) -> Dcqcn {
        let line = line.bps() as f64;
        Dcqcn {
            line,
            rc: line,
            rt: line,
            alpha: 1.0,
            first_cnp_at: None,
            alpha_slots_done: 0,
            cnp_in_alpha_slot: false,
            cnp_since_check: false,
            check_pending: false,
            stage: 0,
            increase_gen: 0,
        }
    }

    /// Current sending rate.
    pub fn rate(&self) -> f64 {
        self.rc
    }

    pub fn target_rate(&self) -> f64 {
        self.rt
    }

    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Brings alpha up to date with every alpha-timer firing at or before `now`.
    fn advance_alpha(&mut self, cfg: &DcqcnConfig, now: Time) {
        let Some(t0) = self.first_cnp_at else { return };
        let slots = (now - t0).ps() / cfg.alpha_interval.ps();
        let n = slots - self.alpha_slots_done;
        if n == 0 {
            return;
        }
        let keep = 1.0 - cfg.g;
        self.alpha = keep * self.alpha + if self.cnp_in_alpha_slot { cfg.g } else { 0.0 };
        if n > 1 {
            self.alpha *= keep.powi((n - 1).min(i32::MAX as u64) as i32);
        }
        self.cnp_in_alpha_slot = false;
        self.alpha_slots_done = slots;
    }

    /// First decrease-check boundary strictly after `now`.
    fn next_check(&self, cfg: &DcqcnConfig, now: Time) -> Time {
        let t0 = self.first_cnp_at.expect("checks start with the first CNP");
        let first = t0 + cfg.decrease_interval + Time::from_ns(1);
        if now < first {
            return first;
        }
        let period = cfg.decrease_interval.ps();
        let k = (now - first).ps() / period + 1;
        Time(first.ps() + k * period)
    }

    /// A congestion notification arrived (an ACK/NACK with the CNP flag).
    pub fn on_cnp(&mut self, cfg: &DcqcnConfig, now: Time) -> Option<DcqcnTimer> {
        if self.first_cnp_at.is_none() {
            self.first_cnp_at = Some(now);
            self.alpha = 1.0;
            self.rc = (self.rc * cfg.rate_on_first_cnp).max(cfg.min_rate.bps() as f64);
            self.rt = self.rc;
        } else {
            self.advance_alpha(cfg, now);
            self.cnp_in_alpha_slot = true;
        }
        self.cnp_since_check = true;
        if self.check_pending {
            return None;
        }
        self.check_pending = true;
        Some(DcqcnTimer::Decrease(self.next_check(cfg, now)))
    }

    /// The decrease check scheduled by [`Dcqcn::on_cnp`] fired.
    pub fn on_decrease_check(&mut self, cfg: &DcqcnConfig, now: Time) -> Option<DcqcnTimer> {
        self.check_pending = false;
        if !self.cnp_since_check {
            return None;
        }
        self.cnp_since_check = false;
        self.advance_alpha(cfg, now);
        if cfg.clamp_target_rate || self.stage != 0 {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(cfg.min_rate.bps() as f64);
        self.stage = 0;
        self.increase_gen = self.increase_gen.wrapping_add(1);
        Some(DcqcnTimer::Increase(
            now + cfg.increase_interval,
            self.increase_gen,
        ))
    }

    /// A rate-increase timer of generation `gen` fired; stale generations are ignored.
    pub fn on_increase(&mut self, cfg: &DcqcnConfig, now: Time, gen: u32) -> Option<DcqcnTimer> {
        if gen != self.increase_gen {
            return None;
        }
        let f = cfg.fast_recovery_stages;
        if self.stage == f {
            self.rt = (self.rt + cfg.additive_increase.bps() as f64).min(self.line);
        } else if self.stage > f {
            self.rt = (self.rt + cfg.hyper_increase.bps() as f64).min(self.line);
        }
        self.rc = (self.rc + self.rt) / 2.0;
        self.stage = self.stage.saturating_add(1);
        if self.rc >= self.line && self.rt >= self.line {
            // Back at line rate: further steps would change nothing.
            return None;
        }
        Some(DcqcnTimer::Increase(now + cfg.increase_interval, gen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> Time {
        Time::from_us(x)
    }

    #[test]
    fn first_cut_is_about_half_after_one_check_period() {
        let cfg = DcqcnConfig::default();
        let mut d = Dcqcn::new(Rate::gbps(100));
        let t = d.on_cnp(&cfg, us(10));
        assert_eq!(t, Some(DcqcnTimer::Decrease(us(14) + Time::from_ns(1))));
        // A second CNP in the same period schedules nothing more.
        assert_eq!(d.on_cnp(&cfg, us(11)), None);
        let inc = d.on_decrease_check(&cfg, us(14) + Time::from_ns(1));
        // alpha: 4 slots passed, one of them with a CNP: ~ (1-g)^4 + g(1-g)^3.
        let g = cfg.g;
        let alpha = ((1.0 - g) * 1.0) * (1.0 - g) + g; // slot 1 (CNP at 11us lands in slot 1)
        let alpha = alpha * (1.0 - g) * (1.0 - g);
        assert!(
            (d.alpha() - alpha).abs() < 1e-12,
            "{} vs {alpha}",
            d.alpha()
        );
        assert!((d.rate() - 1e11 * (1.0 - alpha / 2.0)).abs() < 1.0);
        assert_eq!(d.target_rate(), 1e11); // not clamped, stage was 0
        assert!(matches!(inc, Some(DcqcnTimer::Increase(t, _)) if t == us(314) + Time::from_ns(1)));
    }

    #[test]
    fn no_cnp_no_cut_and_alpha_decays() {
        let cfg = DcqcnConfig::default();
        let mut d = Dcqcn::new(Rate::gbps(100));
        d.on_cnp(&cfg, us(0));
        let _ = d.on_decrease_check(&cfg, us(4) + Time::from_ns(1));
        let r = d.rate();
        // A check without a CNP since the last one does nothing.
        assert_eq!(d.on_decrease_check(&cfg, us(8) + Time::from_ns(1)), None);
        assert_eq!(d.rate(), r);
        // alpha decays by (1-g) per microsecond while no CNP arrives.
        let a0 = d.alpha();
        d.on_cnp(&cfg, us(104));
        assert!((d.alpha() - a0 * (1.0 - cfg.g).powi(100)).abs() < 1e-12);
    }

    #[test]
    fn recovery_reaches_line_rate_through_fast_additive_and_hyper_steps() {
        let cfg = DcqcnConfig::default();
        let mut d = Dcqcn::new(Rate::gbps(100));
        d.on_cnp(&cfg, us(0));
        let mut next = d.on_decrease_check(&cfg, us(4) + Time::from_ns(1));
        let cut = d.rate();
        let mut steps = 0;
        while let Some(DcqcnTimer::Increase(t, gen)) = next {
            let before = d.rate();
            next = d.on_increase(&cfg, t, gen);
            assert!(d.rate() >= before);
            steps += 1;
            if steps == 1 {
                // Fast recovery: halfway back to the (unclamped) target of 100 G.
                assert!((d.rate() - (cut + 1e11) / 2.0).abs() < 1.0);
            }
            assert!(steps < 10_000);
        }
        assert_eq!(d.rate(), 1e11);
        // A stale increase timer is ignored.
        assert_eq!(d.on_increase(&cfg, us(1), 12345), None);
    }
}
