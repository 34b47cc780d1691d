//! PLB's parameters (`[lb]` with `scheme = "plb"`), their defaults and their validation.

use super::Plb;
use crate::check::check_range;
use crate::lb::{Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::units::Time;
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// What a switch does when a data packet is about to wait behind a PFC pause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kick {
    /// Algorithm 1: the packet waits; its path is kicked out only if its remaining budget
    /// `t_td` is below `max(t_avgST, t_pd)`.
    #[default]
    Budget,
    /// Every pause met kicks the path out (the "kick out directly" of section 2.2.4).
    OnPause,
    /// Never kick: PLB's classes and Algorithm 2 only.
    Never,
}

/// Where a path's RTT starts: what a sample measures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttFrom {
    /// The stamp's send time is when the packet leaves the source ToR's uplink: the RTT is the
    /// fabric's, past the decision point's own uplink queue.
    #[default]
    Uplink,
    /// The stamp's send time is when the packet arrived at the source ToR: the RTT also counts
    /// the wait in the ToR's uplink queue (a path congested at its first hop, as the paper's
    /// Path1 at P1/L1 in its Fig. 2(c), looks slow).
    Arrival,
}

/// PLB parameters (`[lb]` with `scheme = "plb"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlbConfig {
    /// `RTT_low = base RTT + rtt_low_extra`: a path whose RTT is below it is non-congested
    /// (default 20 us; section 3.2 gives 20-40 us). Valid: 0..=10ms.
    pub rtt_low_extra: Time,
    /// A path at or above `RTT_low` is congested when its utilization is at least this, and
    /// undetermined (paused by PFC) below it (default 0.9; the paper's "= 1", lowered so that
    /// a path carrying line rate counts despite the DRE's quantization and decay).
    /// Valid: above 0 and at most 4.
    pub u_full: f64,
    /// Weight of a new sojourn time in each switch's average `t_avgST` (default 1/8).
    /// Valid: above 0 and at most 1.
    pub alpha: f64,
    /// Least time between two RTT and utilization samples of one (destination ToR, uplink)
    /// (default 0: the base RTT to that ToR). Valid: 0..=10ms.
    pub rtt_period: Time,
    /// A flow idle for longer than this is new again and may take another path (default
    /// 500 us). Valid: above 0 and at most 1s.
    pub flow_idle: Time,
    /// A kicked path comes back after this long even without fresh samples (default 0: 4
    /// base RTTs to that ToR). Valid: 0..=1s.
    pub kick_ttl: Time,
    /// The budget `t_td` written at the source ToR is `td_scale` x the RTT gap to the next
    /// best active path (default 1). Valid: 0..=100.
    pub td_scale: f64,
    /// What a pause does (default `budget`, Algorithm 1; `on_pause` and `never` for the
    /// motivation figures).
    pub kick: Kick,
    /// Where a sample's RTT starts (default `uplink`: as the stamped packet leaves the source
    /// ToR's uplink; `arrival`: as it arrived at the source ToR, so the RTT counts the uplink
    /// queue; the paper does not say).
    pub rtt_from: RttFrom,
    /// Samples older than this are forgotten: the path's RTT is the base RTT again and its
    /// utilization 0 (default 500 us; not in the paper, which does not say how stale samples
    /// end; CONGA's aging). Valid: above 0 and at most 1s.
    pub aging: Time,
    /// DRE decrement period (default 50 us, as CONGA). Valid: above 0 and at most 10ms.
    pub t_dre: Time,
    /// DRE decay factor (default 0.2, as CONGA). Valid: above 0 and at most 1.
    pub dre_alpha: f64,
    /// Bits of the quantized utilization carried in headers: utilization = metric /
    /// 2^q_bits (default 6; CONGA's 3 bits cannot tell 0.9 from 0.875). Valid: 1..=7.
    pub q_bits: u32,
    /// Entries of the source ToR's flow table, indexed by flow hash (default 65,536, the
    /// size of CONGA's hardware flowlet table; the paper gives none).
    /// Valid: 1..=16,777,216.
    pub table_size: u32,
}

impl Default for PlbConfig {
    fn default() -> Self {
        PlbConfig {
            rtt_low_extra: Time::from_us(20),
            u_full: 0.9,
            alpha: 0.125,
            rtt_period: Time::ZERO,
            flow_idle: Time::from_us(500),
            kick_ttl: Time::ZERO,
            td_scale: 1.0,
            kick: Kick::Budget,
            rtt_from: RttFrom::Uplink,
            aging: Time::from_us(500),
            t_dre: Time::from_us(50),
            dre_alpha: 0.2,
            q_bits: 6,
            table_size: 65_536,
        }
    }
}

impl SchemeConfig for PlbConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        let ms = Time::from_ms;
        let positive = (Excluded(Time::ZERO), Included(ms(1_000)));
        check_range(
            "lb.rtt_low_extra",
            self.rtt_low_extra,
            ..=ms(10),
            "(PLB default 20us)",
        )?;
        check_range(
            "lb.rtt_period",
            self.rtt_period,
            ..=ms(10),
            "(PLB default 0s: the base RTT)",
        )?;
        check_range(
            "lb.kick_ttl",
            self.kick_ttl,
            ..=ms(1_000),
            "(PLB default 0s: 4 base RTTs)",
        )?;
        check_range(
            "lb.flow_idle",
            self.flow_idle,
            positive,
            "(PLB default 500us)",
        )?;
        check_range("lb.aging", self.aging, positive, "(PLB default 500us)")?;
        let t_dre = (Excluded(Time::ZERO), Included(ms(10)));
        check_range("lb.t_dre", self.t_dre, t_dre, "(PLB default 50us)")?;
        let unit = (Excluded(0.0), Included(1.0));
        check_range("lb.alpha", self.alpha, unit, "(PLB default 0.125)")?;
        check_range("lb.dre_alpha", self.dre_alpha, unit, "(PLB default 0.2)")?;
        let u_full = (Excluded(0.0), Included(4.0));
        check_range("lb.u_full", self.u_full, u_full, "(PLB default 0.9)")?;
        check_range("lb.td_scale", self.td_scale, 0.0..=100.0, "(PLB default 1)")?;
        check_range("lb.q_bits", self.q_bits, 1..=7, "bits (PLB default 6)")?;
        crate::lb::check_table_size(self.table_size)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fabric: true,
            ingress: true,
            dequeue: true,
            acks: true,
            scheme_word: true,
            sojourn: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Plb::new(self, fabric))
    }
}
