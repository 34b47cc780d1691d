//! DCQCN congestion control, Mellanox flavour as modelled by the HPCC and ConWeave ns-3
//! simulators (see `docs/reference/dcqcn.md` for the parameter table and its sources).
//!
//! * Congestion point: RED/ECN marking at switch dequeue (in the switch, see `sim/switch.rs`).
//! * Notification point: the receiver sets a CNP flag on the ACK/NACK generated for a
//!   CE-marked packet (no separate CNP packet and no 50 us coalescing, as in both references).
//! * Reaction point (this file): per queue pair, rate `rc`, target `rt`, `alpha`; an
//!   alpha-update timer every `alpha_interval`, a decrease check every `decrease_interval`
//!   (first at `decrease_interval + 1ns` after the first CNP) and a rate-increase timer every
//!   `increase_interval` after the last cut (fast recovery, additive, then hyper increase).
//!
//! The periodic timers run "forever" in the references, but their effect between two CNPs is
//! deterministic, so here they are evaluated lazily: alpha is brought up to date in closed form
//! when it is needed, the rate-increase steps due since the last cut are applied when the rate
//! is read (at every packet the queue pair sends), and a decrease-check event is scheduled only
//! for the first check boundary after a CNP. The results are the same as with real periodic
//! timers, with one tie rule: an alpha or increase boundary that falls at the same picosecond
//! as a CNP or a send is applied first (a CNP that lands exactly on a pending decrease check
//! is ordered by the event queue, i.e. by scheduling order). A finished flow leaves at most
//! one pending decrease check behind, which then does nothing.

use super::{CongestionControl, RateReading};
use crate::check::check_range;
use crate::units::{Rate, Time};
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// DCQCN parameters. Defaults follow the ConWeave ns-3 `run.py` (the reference scenario R1);
/// `docs/reference/dcqcn.md` lists the HPCC and paper values next to them.
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

impl DcqcnConfig {
    /// Checks the values that the types alone cannot (the keys are those of `[cc]`).
    pub fn validate(&self) -> Result<(), String> {
        let unit = (Excluded(0.0), Included(1.0));
        check_range("cc.g", self.g, unit, "(the alpha gain, e.g. 0.00390625)")?;
        for (key, t) in [
            ("alpha_interval", self.alpha_interval),
            ("decrease_interval", self.decrease_interval),
            ("increase_interval", self.increase_interval),
        ] {
            if t == Time::ZERO {
                return Err(format!("cc.{key}: must be above 0 (e.g. \"4us\")"));
            }
        }
        let cut = "(the factor of the rate on the first CNP)";
        check_range("cc.rate_on_first_cnp", self.rate_on_first_cnp, unit, cut)
    }
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
    /// Time of the last rate cut; increase steps fall every `increase_interval` after it.
    last_cut: Option<Time>,
    increase_steps_done: u64,
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
            last_cut: None,
            increase_steps_done: 0,
        }
    }

    /// Sending rate at `now`, after the rate-increase steps due by then.
    #[inline]
    pub fn rate(&mut self, cfg: &DcqcnConfig, now: Time) -> f64 {
        self.advance_increase(cfg, now);
        self.rc
    }

    /// Applies the rate-increase steps that fell at or before `now`. Inlined into the rate's
    /// reading on every packet sent, where it usually returns at once.
    #[inline(always)]
    fn advance_increase(&mut self, cfg: &DcqcnConfig, now: Time) {
        let Some(cut) = self.last_cut else { return };
        if self.rc >= self.line && self.rt >= self.line {
            return; // back at line rate: further steps change nothing
        }
        let due = (now - cut).ps() / cfg.increase_interval.ps();
        while self.increase_steps_done < due {
            self.increase_steps_done += 1;
            self.increase_step(cfg);
            if self.rc >= self.line && self.rt >= self.line {
                break;
            }
        }
    }

    /// One firing of the rate-increase timer: fast recovery, additive or hyper increase.
    fn increase_step(&mut self, cfg: &DcqcnConfig) {
        let f = cfg.fast_recovery_stages;
        if self.stage == f {
            self.rt = (self.rt + cfg.additive_increase.bps() as f64).min(self.line);
        } else if self.stage > f {
            self.rt = (self.rt + cfg.hyper_increase.bps() as f64).min(self.line);
        }
        self.rc = (self.rc + self.rt) / 2.0;
        self.stage = self.stage.saturating_add(1);
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

    /// A congestion notification arrived (an ACK/NACK with the CNP flag). Returns the time of
    /// a decrease check the owner must schedule, if one is not pending already.
    pub fn on_cnp(&mut self, cfg: &DcqcnConfig, now: Time) -> Option<Time> {
        self.advance_increase(cfg, now);
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
        Some(self.next_check(cfg, now))
    }

    /// The decrease check scheduled by [`Dcqcn::on_cnp`] fired: cut the rate if a CNP
    /// arrived since the last check.
    pub fn on_decrease_check(&mut self, cfg: &DcqcnConfig, now: Time) {
        self.check_pending = false;
        if !self.cnp_since_check {
            return;
        }
        self.cnp_since_check = false;
        self.advance_increase(cfg, now);
        self.advance_alpha(cfg, now);
        if cfg.clamp_target_rate || self.stage != 0 {
            self.rt = self.rc;
        }
        self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(cfg.min_rate.bps() as f64);
        self.stage = 0;
        self.last_cut = Some(now);
        self.increase_steps_done = 0;
    }
}

impl CongestionControl for Dcqcn {
    type Config = DcqcnConfig;

    #[inline]
    fn rate(&mut self, cfg: &DcqcnConfig, now: Time) -> Option<f64> {
        Some(Dcqcn::rate(self, cfg, now))
    }

    fn on_cnp(&mut self, cfg: &DcqcnConfig, now: Time) -> Option<Time> {
        Dcqcn::on_cnp(self, cfg, now)
    }

    /// The decrease check.
    fn on_timer(&mut self, cfg: &DcqcnConfig, now: Time) {
        self.on_decrease_check(cfg, now);
    }

    fn observe(&self, cfg: &DcqcnConfig, now: Time) -> Option<RateReading> {
        // On a copy: the rate's lazy increase steps are the run's own to apply.
        let mut d = self.clone();
        let rate = Dcqcn::rate(&mut d, cfg, now);
        Some(RateReading {
            rate,
            target: Some(d.target_rate()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(x: u64) -> Time {
        Time::from_us(x)
    }

    fn check_at(x: u64) -> Time {
        us(x) + Time::from_ns(1)
    }

    #[test]
    fn first_cut_is_about_half_after_one_check_period() {
        let cfg = DcqcnConfig::default();
        let mut d = Dcqcn::new(Rate::gbps(100));
        assert_eq!(d.on_cnp(&cfg, us(10)), Some(check_at(14)));
        // A second CNP in the same period schedules nothing more.
        assert_eq!(d.on_cnp(&cfg, us(11)), None);
        d.on_decrease_check(&cfg, check_at(14));
        // Alpha: reset to 1 by the first CNP; the slot (11, 12] saw a CNP; then two plain
        // decays at 13 and 14 us.
        let g = cfg.g;
        let alpha = ((1.0 - g) * (1.0 - g) + g) * (1.0 - g) * (1.0 - g);
        assert!(
            (d.alpha() - alpha).abs() < 1e-12,
            "{} vs {alpha}",
            d.alpha()
        );
        let cut = 1e11 * (1.0 - alpha / 2.0);
        assert!((d.rate(&cfg, check_at(14)) - cut).abs() < 1.0);
        assert_eq!(d.target_rate(), 1e11); // not clamped, stage was 0
                                           // No increase before one increase interval has passed.
        assert!((d.rate(&cfg, check_at(313)) - cut).abs() < 1.0);
        // Fast recovery: halfway back to the (unclamped) target at 314 us.
        assert!((d.rate(&cfg, check_at(314)) - (cut + 1e11) / 2.0).abs() < 1.0);
    }

    #[test]
    fn no_cnp_no_cut_and_alpha_decays() {
        let cfg = DcqcnConfig::default();
        let mut d = Dcqcn::new(Rate::gbps(100));
        d.on_cnp(&cfg, us(0));
        d.on_decrease_check(&cfg, check_at(4));
        let r = d.rate(&cfg, check_at(4));
        // A check without a CNP since the last one does nothing.
        d.on_decrease_check(&cfg, check_at(8));
        assert_eq!(d.rate(&cfg, check_at(8)), r);
        // Alpha decays by (1-g) per microsecond while no CNP arrives.
        let a0 = d.alpha();
        d.on_cnp(&cfg, us(104));
        assert!((d.alpha() - a0 * (1.0 - cfg.g).powi(100)).abs() < 1e-12);
    }

    #[test]
    fn recovery_steps_match_fast_additive_then_hyper_increase() {
        let cfg = DcqcnConfig::default();
        let mut d = Dcqcn::new(Rate::gbps(100));
        d.on_cnp(&cfg, us(0));
        d.on_decrease_check(&cfg, check_at(4));
        let (mut rc, mut rt) = (d.rate(&cfg, check_at(4)), 1e11);
        // Replay the timer by hand: step k falls at 4us + 1ns + k * 300us.
        for k in 1..=60u64 {
            let f = cfg.fast_recovery_stages as u64;
            if k - 1 == f {
                rt = (rt + 40e6f64).min(1e11);
            } else if k - 1 > f {
                rt = (rt + 100e6f64).min(1e11);
            }
            rc = (rc + rt) / 2.0;
            let got = d.rate(&cfg, check_at(4 + 300 * k));
            assert_eq!(got, rc, "step {k}");
        }
        assert_eq!(d.rate(&cfg, us(1_000_000)), 1e11);
    }

    #[test]
    fn a_cut_applies_the_increases_due_before_it() {
        let cfg = DcqcnConfig::default();
        let mut a = Dcqcn::new(Rate::gbps(100));
        let mut b = Dcqcn::new(Rate::gbps(100));
        for d in [&mut a, &mut b] {
            d.on_cnp(&cfg, us(0));
            d.on_decrease_check(&cfg, check_at(4));
        }
        // `a` is read at every step, `b` only when the next CNP arrives: same result.
        for k in 1..=3 {
            a.rate(&cfg, check_at(4 + 300 * k));
        }
        for d in [&mut a, &mut b] {
            let at = d.on_cnp(&cfg, us(950)).unwrap();
            d.on_decrease_check(&cfg, at);
        }
        assert_eq!(a.rate(&cfg, us(960)), b.rate(&cfg, us(960)));
        assert!(a.rate(&cfg, us(960)) < 1e11);
    }
}
