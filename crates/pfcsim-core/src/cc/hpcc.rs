//! HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019), window- and
//! rate-based, for RoCE flows (`[cc] kind = "hpcc"`), as the HPCC authors' ns-3 simulator
//! models it with one rate per flow (`RdmaHw::HandleAckHp` / `UpdateRateHp` / `FastReactHp`
//! with `MULTI_RATE 0`, also in the ConWeave simulator); `docs/reference/hpcc.md` has the
//! parameter table and its sources.
//!
//! * In-band telemetry: every switch egress a data packet leaves appends a record (its time,
//!   the bytes the port has transmitted, the bytes queued at the port, the port's rate;
//!   [`super::IntHop`]), up to [`super::MAX_INT_HOPS`]; the receiver echoes the records on its
//!   ACK or NACK. The records' bytes ([`super::INT_HEADER_BYTES`]) ride on every data packet
//!   and ACK of the flow.
//! * The sender compares each hop's record with the one it last saw for that hop: the
//!   hop's utilisation `u = tx_rate / rate + min(qlen, last qlen) / (rate * T)` (the queue
//!   term normalised by the window `W_init`, one BDP at line rate), and keeps `U`, an EWMA
//!   over time of the largest hop's `u` (`U = (U (T - dt) + u dt) / T`, `dt` that hop's time
//!   between the two records, at most the base RTT `T`).
//! * The reference window: `W_c`, updated once per round (an ACK beyond the data sent at the
//!   last update): with `k = U / eta`, `W = W_c / k + W_AI` if `k >= 1` or after `max_stage`
//!   additive rounds, else `W = W_c + W_AI` (an additive round). Between rounds, each ACK
//!   recomputes `W` from the same `W_c` (fast reaction) without moving `W_c`.
//! * As in the reference, the window is kept as a rate (`W / T`): `W_AI` is the rate step
//!   `additive_increase`, the rate stays within `[min_rate, line rate]`, the flow is paced at
//!   the rate, and (with `window`) the bytes in flight are limited to `W_init * rate / line
//!   rate` (`variable_window`) or `W_init`.
//!
//! `T` and `W_init` are the fabric's largest base RTT and BDP over every pair of hosts (the
//! reference's `GLOBAL_T 1`, `FabricRtt`).
//!
//! Not modelled: the reference's quantisation of INT fields (24-bit nanosecond time, bytes
//! in units of 128 B and queue lengths in units of 80 B, times `INT_MULTI`) and of rates to
//! whole bit/s; its shift of the next sending time when the rate changes (`ChangeRate`:
//! here the next packet leaves at the gap of the rate it was sent at); the per-hop rates
//! (`MULTI_RATE 1`) and sampled feedback options; PINT. A hop whose record is not later than
//! the last one seen for it (a packet that took another path) is left out of the estimate.

use super::{AckFeedback, CongestionControl, FabricRtt, IntHop, RateReading, MAX_INT_HOPS};
use crate::check::check_range;
use crate::units::{Rate, Time};
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// HPCC's parameters (`[cc] kind = "hpcc"`). Defaults: how the HPCC authors' `run.py` runs
/// it (`--cc hp` at 100 Gbps).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HpccConfig {
    /// Target utilisation eta (reference `U_TARGET`: 0.95).
    pub eta: f64,
    /// Additive rounds before a multiplicative one, maxStage (reference `MI_THRESH`: 0, every
    /// round multiplicative; the paper: 5).
    pub max_stage: u32,
    /// W_AI as a rate step (reference `RATE_AI`: 10 Mb/s per 25 Gb/s of NIC, 40 Mb/s at
    /// 100 Gbps).
    pub additive_increase: Rate,
    /// Lowest rate (reference `MIN_RATE`: 1 Gb/s).
    pub min_rate: Rate,
    /// Limit the bytes in flight to the window (reference `HAS_WIN`: on).
    pub window: bool,
    /// The window follows the rate, `W_init * rate / line rate` (reference `VAR_WIN`: on);
    /// off: `W_init`.
    pub variable_window: bool,
    /// React to every ACK between the once-per-round updates (reference `FAST_REACT`: on).
    pub fast_react: bool,
}

impl Default for HpccConfig {
    fn default() -> Self {
        HpccConfig {
            eta: 0.95,
            max_stage: 0,
            additive_increase: Rate::mbps(40),
            min_rate: Rate::gbps(1),
            window: true,
            variable_window: true,
            fast_react: true,
        }
    }
}

impl HpccConfig {
    /// Checks the values that the types alone cannot (the keys are those of `[cc]`).
    pub fn validate(&self) -> Result<(), String> {
        let unit = (Excluded(0.0), Included(1.0));
        check_range(
            "cc.eta",
            self.eta,
            unit,
            "(the target utilisation, e.g. 0.95)",
        )?;
        if self.variable_window && !self.window {
            return Err("cc.variable_window: true needs cc.window = true (a window to vary); set window = true or variable_window = false".into());
        }
        Ok(())
    }
}

/// HPCC's state for one queue pair (boxed: the telemetry of the last round does not fit the
/// flow's lines, and runs without HPCC keep none).
#[derive(Clone, Debug)]
pub struct Hpcc(Box<HpccState>);

#[derive(Clone, Debug)]
struct HpccState {
    /// Line rate and the current rate (bit/s).
    line: f64,
    rate: f64,
    /// The reference window, as a rate (W_c / T).
    reference_rate: f64,
    /// Additive rounds in a row.
    stage: u32,
    /// The utilisation estimate U.
    u: f64,
    /// The data sent at the last round's update (0: no ACK yet, as in the reference).
    last_update_seq: u64,
    /// The telemetry last seen, per hop.
    hops: [IntHop; MAX_INT_HOPS],
    /// The base RTT T and the window W_init (one BDP).
    base_rtt: Time,
    bdp: u64,
    /// The window's limit on the bytes in flight (0: none) and whether it follows the rate.
    window: u64,
    variable_window: bool,
}

impl Hpcc {
    /// A queue pair sent at `line` in a fabric whose largest base RTT and BDP are `fabric`.
    pub fn new(line: Rate, cfg: &HpccConfig, fabric: FabricRtt) -> Hpcc {
        let line = line.bps() as f64;
        Hpcc(Box::new(HpccState {
            line,
            rate: line,
            reference_rate: line,
            stage: 0,
            u: 0.0,
            last_update_seq: 0,
            hops: [IntHop::default(); MAX_INT_HOPS],
            base_rtt: fabric.rtt,
            bdp: fabric.bdp.max(1),
            window: if cfg.window { fabric.bdp.max(1) } else { 0 },
            variable_window: cfg.variable_window,
        }))
    }

    /// The sending rate (bit/s).
    pub fn rate(&self) -> f64 {
        self.0.rate
    }

    /// The utilisation estimate U.
    pub fn utilisation(&self) -> f64 {
        self.0.u
    }

    /// The window on the bytes in flight, if any.
    pub fn window(&self) -> Option<u64> {
        let s = &self.0;
        if s.window == 0 {
            return None;
        }
        if !s.variable_window {
            return Some(s.window);
        }
        let w = s.window as u128 * s.rate as u128 / s.line as u128;
        Some((w as u64).max(1))
    }
}

impl HpccState {
    /// `UpdateRateHp`: the estimate from the ACK's telemetry and the new rate; a round's
    /// update (`fast` false) also moves the reference window and the round.
    fn update(&mut self, cfg: &HpccConfig, ack: &AckFeedback, fast: bool) {
        let Some(int) = ack.int else { return };
        if self.last_update_seq == 0 {
            // The first ACK: the telemetry to compare the next one with.
            self.last_update_seq = ack.snd_nxt;
            let hops = int.hops_recorded();
            self.hops[..hops.len()].copy_from_slice(hops);
            return;
        }
        if let Some(hops) = int.hops() {
            let t = self.base_rtt.ps() as f64;
            let (mut max_u, mut dt) = (0.0f64, 0u64);
            let mut updated = false;
            for (hop, last) in hops.iter().zip(self.hops.iter_mut()) {
                let tau = hop.time.saturating_sub(last.time).ps();
                if tau > 0 {
                    let bytes = hop.tx_bytes.saturating_sub(last.tx_bytes);
                    let rate = hop.rate_bps as f64;
                    let tx_rate = bytes as f64 * 8.0 / (tau as f64 * 1e-12);
                    let queue = hop.queue_bytes.min(last.queue_bytes) as f64;
                    let u = tx_rate / rate + queue * self.line / rate / self.bdp as f64;
                    if u > max_u {
                        max_u = u;
                        dt = tau;
                    }
                    updated = true;
                }
                *last = *hop;
            }
            if updated {
                let dt = dt.min(self.base_rtt.ps()) as f64;
                self.u = (self.u * (t - dt) + max_u * dt) / t;
                let k = self.u / cfg.eta;
                let ai = cfg.additive_increase.bps() as f64;
                let (rate, stage) = if k >= 1.0 || self.stage >= cfg.max_stage {
                    (self.reference_rate / k + ai, 0)
                } else {
                    (self.reference_rate + ai, self.stage + 1)
                };
                let rate = rate.max(cfg.min_rate.bps() as f64).min(self.line);
                self.rate = rate;
                if !fast {
                    self.reference_rate = rate;
                    self.stage = stage;
                }
            }
        }
        if !fast && ack.snd_nxt > self.last_update_seq {
            self.last_update_seq = ack.snd_nxt;
        }
    }
}

impl CongestionControl for Hpcc {
    type Config = HpccConfig;

    #[inline]
    fn rate(&mut self, _cfg: &HpccConfig, _now: Time) -> Option<f64> {
        Some(self.0.rate)
    }

    /// A round's update on an ACK beyond the data sent at the last one, else the fast
    /// reaction.
    fn on_feedback(&mut self, cfg: &HpccConfig, ack: &AckFeedback) {
        let s = &mut self.0;
        if ack.ack_seq > s.last_update_seq {
            s.update(cfg, ack, false);
        } else if cfg.fast_react {
            s.update(cfg, ack, true);
        }
    }

    fn window(&self) -> Option<u64> {
        Hpcc::window(self)
    }

    fn observe(&self, _cfg: &HpccConfig, _now: Time) -> Option<RateReading> {
        Some(RateReading {
            rate: self.0.rate,
            target: Some(self.0.reference_rate),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::IntStack;
    use super::*;

    const LINE: u64 = 100_000_000_000;

    fn fabric() -> FabricRtt {
        // 10 us and its BDP at 100 Gbps.
        FabricRtt {
            rtt: Time::from_us(10),
            bdp: 125_000,
        }
    }

    /// One hop's telemetry: at `t_ns`, `tx` bytes sent so far, `queue` bytes queued.
    fn int(t_ns: u64, tx: u64, queue: u64) -> IntStack {
        let mut s = IntStack::default();
        s.push(IntHop {
            time: Time::from_ns(t_ns),
            tx_bytes: tx,
            queue_bytes: queue,
            rate_bps: LINE,
        });
        s
    }

    fn ack(ack_seq: u64, snd_nxt: u64, int: &IntStack) -> AckFeedback<'_> {
        AckFeedback {
            ack_seq,
            snd_nxt,
            rtt: Time::ZERO,
            int: Some(int),
        }
    }

    /// A hop at full rate with a standing queue of one BDP: u = 2 after a whole base RTT, and
    /// the round's update sets the rate to rate / (u / eta) + W_AI.
    #[test]
    fn an_overloaded_hop_cuts_the_rate_by_u_over_eta() {
        let cfg = HpccConfig::default();
        let mut h = Hpcc::new(Rate::gbps(100), &cfg, fabric());
        h.on_feedback(&cfg, &ack(1_000, 10_000, &int(0, 0, 125_000)));
        // 10 us later, 125,000 bytes more sent: full rate; the queue is one BDP.
        h.on_feedback(&cfg, &ack(11_000, 20_000, &int(10_000, 125_000, 125_000)));
        assert!((h.utilisation() - 2.0).abs() < 1e-9, "{}", h.utilisation());
        let expected = 1e11 / (2.0 / 0.95) + 40e6;
        assert!((h.rate() - expected).abs() < 1.0, "{}", h.rate());
        // The window follows the rate.
        let w = h.window().unwrap();
        assert_eq!(w, (125_000u128 * h.rate() as u128 / LINE as u128) as u64);
    }

    /// An idle-ish hop (half rate, no queue) lets the rate grow from the reference window,
    /// and ACKs within the round react from the same reference without moving it.
    #[test]
    fn fast_reaction_recomputes_from_the_reference_window() {
        let cfg = HpccConfig::default();
        let mut h = Hpcc::new(Rate::gbps(100), &cfg, fabric());
        h.on_feedback(&cfg, &ack(1_000, 10_000, &int(0, 0, 125_000)));
        // A round: a full base RTT at full rate with one BDP queued: u = 2.
        h.on_feedback(&cfg, &ack(11_000, 20_000, &int(10_000, 125_000, 125_000)));
        let after_round = h.rate();
        // Within the round (ack 12,000 <= 20,000): 1 us at half rate, no queue: the EWMA
        // moves a tenth of the way towards 0.5, and the rate is recomputed from the round's
        // reference (the same as after the round), not from the current rate.
        h.on_feedback(&cfg, &ack(12_000, 21_000, &int(11_000, 131_250, 0)));
        let u = (2.0 * 9.0 + 0.5) / 10.0;
        assert!((h.utilisation() - u).abs() < 1e-9, "{}", h.utilisation());
        let expected = after_round / (u / 0.95) + 40e6;
        assert!((h.rate() - expected).abs() < 1.0);
        // Without fast reaction, the ACK within the round changes nothing.
        let slow = HpccConfig {
            fast_react: false,
            ..HpccConfig::default()
        };
        let mut s = Hpcc::new(Rate::gbps(100), &slow, fabric());
        s.on_feedback(&slow, &ack(1_000, 10_000, &int(0, 0, 0)));
        s.on_feedback(&slow, &ack(11_000, 20_000, &int(10_000, 125_000, 125_000)));
        let r = s.rate();
        s.on_feedback(&slow, &ack(12_000, 21_000, &int(11_000, 131_250, 0)));
        assert_eq!(s.rate(), r);
    }

    /// With maxStage 5 (the paper's), an underloaded hop gives additive rounds before a
    /// multiplicative one; with the default 0 every round is multiplicative.
    #[test]
    fn max_stage_gives_additive_rounds_first() {
        let paper = HpccConfig {
            max_stage: 5,
            ..HpccConfig::default()
        };
        let mut h = Hpcc::new(Rate::gbps(100), &paper, fabric());
        let mut seq = 1_000;
        h.on_feedback(&paper, &ack(seq, seq + 1, &int(0, 0, 0)));
        // Drive the rate down first: two rounds at u = 2.
        let mut t = 0;
        let mut tx = 0;
        for _ in 0..2 {
            seq += 2;
            t += 10_000;
            tx += 125_000;
            h.on_feedback(&paper, &ack(seq, seq + 1, &int(t, tx, 125_000)));
        }
        // Then underloaded rounds (u well below eta): five additive steps of 40 Mb/s.
        let low = h.rate();
        for k in 1..=5 {
            seq += 2;
            t += 10_000;
            tx += 12_500;
            h.on_feedback(&paper, &ack(seq, seq + 1, &int(t, tx, 0)));
            if k < 5 {
                assert!(
                    (h.rate() - (low + 40e6 * k as f64)).abs() < 1.0,
                    "round {k}"
                );
            }
        }
        assert!((h.rate() - (low + 40e6 * 5.0)).abs() < 1.0);
        // The sixth: multiplicative (k < 1 raises the rate by 1/k).
        seq += 2;
        t += 10_000;
        tx += 12_500;
        h.on_feedback(&paper, &ack(seq, seq + 1, &int(t, tx, 0)));
        assert!(h.rate() > low + 40e6 * 6.0);
    }

    /// Telemetry of more hops than a header holds is not used.
    #[test]
    fn too_many_hops_change_nothing() {
        let cfg = HpccConfig::default();
        let mut h = Hpcc::new(Rate::gbps(100), &cfg, fabric());
        h.on_feedback(&cfg, &ack(1_000, 10_000, &int(0, 0, 0)));
        let mut long = int(10_000, 125_000, 125_000);
        for _ in 0..MAX_INT_HOPS {
            long.push(IntHop::default());
        }
        assert!(long.hops().is_none());
        h.on_feedback(&cfg, &ack(11_000, 20_000, &long));
        assert_eq!(h.rate(), 1e11);
    }
}
