//! TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM
//! 2015), rate-based, for RoCE flows (`[cc] kind = "timely"`), as the HPCC authors' ns-3
//! simulator models it (`RdmaHw::HandleAckTimely` / `UpdateRateTimely`, also in the ConWeave
//! simulator); `docs/reference/timely.md` has the parameter table and its sources.
//!
//! Every data packet carries its send time, which the receiver echoes on the ACK (or NACK);
//! the sender's RTT sample is the ACK's arrival time minus that echo. Once per round (an ACK
//! whose cumulative sequence passes the data sent at the previous update) the sender updates
//! its rate from the sample:
//!
//! * `rtt_diff`, an EWMA of the difference between this round's sample and the last round's
//!   (`rtt_diff = (1 - alpha) rtt_diff + alpha (rtt - last_rtt)`), normalised by `min_rtt`
//!   into the gradient;
//! * below `t_low`: additive increase; above `t_high`: multiplicative decrease
//!   `rate (1 - beta (1 - t_high / rtt))`; in between, additive increase if the gradient is
//!   not positive, else decrease `rate (1 - beta gradient)` (at least 0);
//! * the increase step is `additive_increase`, and `hyper_increase` after
//!   [`HYPER_ROUNDS`] increases in a row (hyper-active increase); a decrease resets the count.
//!
//! The rate stays within `[min_rate, line rate]`; the first ACK only records the RTT and
//! starts the rounds. ACKs within a round change nothing (the reference's fast reaction for
//! TIMELY is empty).
//!
//! Not modelled: the paper's per-segment RTT (the NIC completion of a 16-64 KB segment: here
//! each ACK of one packet), its hardware timestamps' noise, and the reference's rounding of
//! times to nanoseconds (here picoseconds).

use super::{AckFeedback, CongestionControl, RateReading};
use crate::check::{check_positive_time, check_range};
use crate::units::{Rate, Time};
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// Increases in a row after which the step is `hyper_increase` (the reference's hard-coded 5,
/// the paper's N = 5).
pub const HYPER_ROUNDS: u32 = 5;

/// TIMELY's parameters (`[cc] kind = "timely"`). Defaults: the HPCC authors' simulator
/// (`RdmaHw` attributes, and `run.py` for the steps at 100 Gbps and the minimum rate).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimelyConfig {
    /// Weight of the newest RTT difference in the EWMA (reference: 0.875).
    pub alpha: f64,
    /// Multiplicative-decrease factor (reference: 0.8).
    pub beta: f64,
    /// Below this RTT the rate always increases (reference: 50 us).
    pub t_low: Time,
    /// Above this RTT the rate always decreases (reference: 500 us).
    pub t_high: Time,
    /// The RTT that normalises the gradient (reference: 20 us).
    pub min_rtt: Time,
    /// Additive step per round (reference `run.py`: 10 Mb/s per 10 Gb/s of NIC, 100 Mb/s at
    /// 100 Gbps).
    pub additive_increase: Rate,
    /// Hyper-active step (reference `run.py`: 50 Mb/s per 10 Gb/s, 500 Mb/s at 100 Gbps).
    pub hyper_increase: Rate,
    /// Lowest rate a decrease can reach (reference `run.py`: 1 Gb/s).
    pub min_rate: Rate,
}

impl Default for TimelyConfig {
    fn default() -> Self {
        TimelyConfig {
            alpha: 0.875,
            beta: 0.8,
            t_low: Time::from_us(50),
            t_high: Time::from_us(500),
            min_rtt: Time::from_us(20),
            additive_increase: Rate::mbps(100),
            hyper_increase: Rate::mbps(500),
            min_rate: Rate::gbps(1),
        }
    }
}

impl TimelyConfig {
    /// Checks the values that the types alone cannot (the keys are those of `[cc]`).
    pub fn validate(&self) -> Result<(), String> {
        let unit = (Excluded(0.0), Included(1.0));
        check_range(
            "cc.alpha",
            self.alpha,
            unit,
            "(the EWMA weight, e.g. 0.875)",
        )?;
        check_range(
            "cc.beta",
            self.beta,
            unit,
            "(the decrease factor, e.g. 0.8)",
        )?;
        check_positive_time("cc.min_rtt", self.min_rtt, "20us")?;
        if self.t_low >= self.t_high {
            return Err(format!(
                "cc.t_low: {} is not below cc.t_high ({}); give t_low < t_high (e.g. \"50us\" and \"500us\")",
                self.t_low, self.t_high
            ));
        }
        Ok(())
    }
}

/// TIMELY's state for one queue pair. Rates are in bits per second.
#[derive(Clone, Debug)]
pub struct Timely {
    line: f64,
    rate: f64,
    /// The EWMA of RTT differences, picoseconds.
    rtt_diff: f64,
    /// The RTT sample of the last update.
    last_rtt: Time,
    /// The data sent at the last update: the next ACK beyond it ends the round (0: no update
    /// yet, as in the reference).
    last_update_seq: u64,
    /// Increases in a row.
    increases: u32,
}

impl Timely {
    /// A queue pair starting at line rate.
    pub fn new(line: Rate) -> Timely {
        let line = line.bps() as f64;
        Timely {
            line,
            rate: line,
            rtt_diff: 0.0,
            last_rtt: Time::ZERO,
            last_update_seq: 0,
            increases: 0,
        }
    }

    /// The sending rate (bit/s).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The EWMA of RTT differences over `min_rtt`.
    pub fn gradient(&self, cfg: &TimelyConfig) -> f64 {
        self.rtt_diff / cfg.min_rtt.ps() as f64
    }

    /// One round's update from the RTT sample `rtt`.
    fn update(&mut self, cfg: &TimelyConfig, rtt: Time) {
        let new_diff = rtt.ps() as f64 - self.last_rtt.ps() as f64;
        let rtt_diff = (1.0 - cfg.alpha) * self.rtt_diff + cfg.alpha * new_diff;
        let gradient = rtt_diff / cfg.min_rtt.ps() as f64;
        let cut = if rtt < cfg.t_low {
            None
        } else if rtt > cfg.t_high {
            Some(1.0 - cfg.beta * (1.0 - cfg.t_high.ps() as f64 / rtt.ps() as f64))
        } else if gradient <= 0.0 {
            None
        } else {
            Some((1.0 - cfg.beta * gradient).max(0.0))
        };
        match cut {
            None => {
                let step = if self.increases < HYPER_ROUNDS {
                    cfg.additive_increase
                } else {
                    cfg.hyper_increase
                };
                self.rate = (self.rate + step.bps() as f64).min(self.line);
                self.increases += 1;
            }
            Some(c) => {
                self.rate = (self.rate * c).max(cfg.min_rate.bps() as f64);
                self.increases = 0;
            }
        }
        self.rtt_diff = rtt_diff;
    }
}

impl CongestionControl for Timely {
    type Config = TimelyConfig;

    #[inline]
    fn rate(&mut self, _cfg: &TimelyConfig, _now: Time) -> Option<f64> {
        Some(self.rate)
    }

    fn on_feedback(&mut self, cfg: &TimelyConfig, ack: &AckFeedback) {
        if ack.ack_seq <= self.last_update_seq {
            return; // within the round
        }
        if self.last_update_seq != 0 {
            self.update(cfg, ack.rtt);
        }
        if ack.snd_nxt > self.last_update_seq {
            self.last_update_seq = ack.snd_nxt;
            self.last_rtt = ack.rtt;
        }
    }

    fn observe(&self, _cfg: &TimelyConfig, _now: Time) -> Option<RateReading> {
        Some(RateReading {
            rate: self.rate,
            target: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(ack_seq: u64, snd_nxt: u64, rtt_us: u64) -> AckFeedback<'static> {
        AckFeedback {
            ack_seq,
            snd_nxt,
            rtt: Time::from_us(rtt_us),
            int: None,
        }
    }

    /// One round per RTT of `rtts`: each ACK passes the data sent at the last update.
    fn rounds(t: &mut Timely, cfg: &TimelyConfig, rtts: &[u64]) {
        for &rtt in rtts {
            let seq = t.last_update_seq + 1;
            t.on_feedback(cfg, &ack(seq, seq + 1_000, rtt));
        }
    }

    /// A rising RTT between t_low and t_high cuts the rate by beta times the gradient; a
    /// steady RTT there, after a rise, cuts it again (the EWMA is still positive); any RTT
    /// below t_low increases it additively, then hyper-actively after five increases in a row.
    #[test]
    fn a_positive_gradient_above_t_low_cuts_and_below_t_low_increases() {
        let cfg = TimelyConfig::default();
        let mut t = Timely::new(Rate::gbps(100));
        // Start at 60 us (no update on the first ACK), then 70 us: the gradient is
        // alpha * 10 us / 20 us.
        rounds(&mut t, &cfg, &[60, 70]);
        let gradient = cfg.alpha * 10.0 / 20.0;
        let cut = 1e11 * (1.0 - cfg.beta * gradient);
        assert!((t.rate() - cut).abs() < 1.0, "{}", t.rate());
        assert!((t.gradient(&cfg) - gradient).abs() < 1e-12);
        let mut again = t.clone();
        rounds(&mut again, &cfg, &[70]);
        assert!(again.rate() < cut);
        // Below t_low: +100 Mb/s five times, then +500 Mb/s.
        let mut low = t.clone();
        rounds(&mut low, &cfg, &[40]);
        assert!((low.rate() - (cut + 1e8)).abs() < 1.0);
        rounds(&mut low, &cfg, &[40; 4]);
        assert!((low.rate() - (cut + 5e8)).abs() < 1.0);
        rounds(&mut low, &cfg, &[40]);
        assert!((low.rate() - (cut + 1e9)).abs() < 1.0, "hyper-active");
    }

    /// A falling RTT between t_low and t_high increases the rate; above t_high the rate is
    /// cut by beta (1 - t_high / rtt), down to the minimum rate.
    #[test]
    fn a_negative_gradient_increases_and_a_high_rtt_cuts() {
        let cfg = TimelyConfig::default();
        let mut t = Timely::new(Rate::gbps(100));
        rounds(&mut t, &cfg, &[300, 250]);
        assert_eq!(t.rate(), 1e11, "an increase, at line rate already");
        let mut high = Timely::new(Rate::gbps(100));
        rounds(&mut high, &cfg, &[300, 1_000]);
        let c = 1.0 - cfg.beta * (1.0 - 500.0 / 1_000.0);
        assert!((high.rate() - 1e11 * c).abs() < 1.0);
        rounds(&mut high, &cfg, &[1_000; 40]);
        assert_eq!(high.rate(), 1e9, "the minimum rate");
    }

    /// ACKs within a round (not beyond the data sent at the last update) change nothing.
    #[test]
    fn one_update_per_round() {
        let cfg = TimelyConfig::default();
        let mut t = Timely::new(Rate::gbps(100));
        t.on_feedback(&cfg, &ack(1_000, 10_000, 60));
        t.on_feedback(&cfg, &ack(5_000, 12_000, 400));
        t.on_feedback(&cfg, &ack(10_000, 12_000, 400));
        assert_eq!(t.rate(), 1e11);
        t.on_feedback(&cfg, &ack(11_000, 12_000, 400));
        assert!(t.rate() < 1e11);
    }
}
