//! CLB's parameters (`[lb]` with `scheme = "clb"`), their defaults and their validation.

use super::Clb;
use crate::check::check_range;
use crate::lb::{Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// What one decision of Algorithm 2 places.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    /// Every data packet is placed on its own, as Algorithm 2 is written ("for every packet").
    #[default]
    Packet,
    /// A packet arriving more than `flowlet_timeout` after the previous packet of its flow
    /// starts a new flowlet, placed by Algorithm 2; the others follow their flowlet's port.
    Flowlet,
    /// The first packet of a flow is placed by Algorithm 2; the rest follow it.
    Flow,
}

/// How ports left tied after the class rule of Algorithm 2 are told apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TieBreak {
    /// The least `Tr` of the packet's coflow (T3), then the switch's RNG (Algorithm 2, line
    /// 17). Packets outside coflows skip `Tr`.
    #[default]
    Coflow,
    /// The switch's RNG only (CLB without its coflow spreading, for ablations).
    Random,
}

/// CLB parameters (`[lb]` with `scheme = "clb"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClbConfig {
    /// `Q_thr` as a size; above 0 it replaces `q_thr_fraction` (default 0B: use the fraction;
    /// section 3.2.3 gives 170 KB for a PFC threshold of 256 KB). Valid: 0..=1GB.
    pub q_thr: Bytes,
    /// `Q_thr` as a fraction of the switch's current PFC XOFF threshold (the static one, or
    /// the dynamic one at the moment of the decision), used when `q_thr` is 0 (default 0.667:
    /// "two-thirds of the PFC pausing threshold", section 3.2.3). Valid: above 0 and at most 1.
    pub q_thr_fraction: f64,
    /// `Δt`: the growth `G` of every egress queue is sampled every `interval` (default 5 us:
    /// one link delay of the paper's fabrics, as RLB's `Δt`; the paper says "a certain
    /// (small) interval"). Valid: above 0 and at most 10ms.
    pub interval: Time,
    /// T3 decrement period: every `tr_period` each `Tr` is multiplied by `1 - a` (default
    /// 50 us, CONGA's DRE period; the paper does not say how `Tr` forgets). Valid: above 0 and
    /// at most 10ms.
    pub tr_period: Time,
    /// T3 decay factor (default 0.2, CONGA's DRE). Valid: above 0 and at most 1.
    pub a: f64,
    /// Slots of T3 per egress port; a coflow's slot is a hash of its id (default 4096, not in
    /// the paper). Valid: 1..=1,048,576.
    pub coflow_slots: u32,
    /// What one decision places (default `packet`, as Algorithm 2 is written; `flowlet` and
    /// `flow` for the fewer out-of-order packets section 4 credits CLB with).
    pub granularity: Granularity,
    /// With `granularity = "flowlet"`: a gap longer than this starts a new flowlet (default
    /// 100 us, as LetFlow's default). Valid: above 0 and at most 1s.
    pub flowlet_timeout: Time,
    /// Entries of the flowlet or flow table (indexed by flow hash) with `granularity =
    /// "flowlet"` or `"flow"` (default 65,536, the size of CONGA's flowlet table).
    /// Valid: 1..=16,777,216.
    pub table_size: u32,
    /// How ports tied after the class rule are told apart (default `coflow`: the least `Tr`,
    /// then at random; `random`: at random, for ablations).
    pub tie_break: TieBreak,
}

impl Default for ClbConfig {
    fn default() -> Self {
        ClbConfig {
            q_thr: Bytes(0),
            q_thr_fraction: 0.667,
            interval: Time::from_us(5),
            tr_period: Time::from_us(50),
            a: 0.2,
            coflow_slots: 4096,
            granularity: Granularity::Packet,
            flowlet_timeout: Time::from_us(100),
            table_size: 65_536,
            tie_break: TieBreak::Coflow,
        }
    }
}

/// Largest accepted `coflow_slots`.
pub const MAX_COFLOW_SLOTS: u32 = 1 << 20;

impl SchemeConfig for ClbConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        let ms = Time::from_ms;
        check_range(
            "lb.q_thr",
            self.q_thr,
            ..=Bytes(1_000_000_000),
            "(CLB default 0B: q_thr_fraction of the PFC threshold)",
        )?;
        let unit = (Excluded(0.0), Included(1.0));
        check_range(
            "lb.q_thr_fraction",
            self.q_thr_fraction,
            unit,
            "(CLB default 0.667)",
        )?;
        let period = (Excluded(Time::ZERO), Included(ms(10)));
        check_range("lb.interval", self.interval, period, "(CLB default 5us)")?;
        check_range("lb.tr_period", self.tr_period, period, "(CLB default 50us)")?;
        check_range("lb.a", self.a, unit, "(CLB default 0.2)")?;
        check_range(
            "lb.coflow_slots",
            self.coflow_slots,
            1..=MAX_COFLOW_SLOTS,
            "slots (CLB default 4096)",
        )?;
        check_range(
            "lb.flowlet_timeout",
            self.flowlet_timeout,
            (Excluded(Time::ZERO), Included(ms(1_000))),
            "(CLB default 100us)",
        )?;
        crate::lb::check_table_size(self.table_size)
    }

    /// The port directions (which egresses to sample) and, for the coflow tie-break, each
    /// data packet's coflow in `lb.meta` (written by its sender's NIC); nothing else on the
    /// data path beyond `choose`.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fabric: true,
            coflow_tag: self.tie_break == TieBreak::Coflow,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Clb::new(self, fabric))
    }
}
