//! LBoDSN's parameters (`[lb]` with `scheme = "lbodsn"`), their defaults and validation.
//!
//! Only `epsilon` has a value in the paper (section 3.2: "around 0.8"); every other default is
//! a choice of pfcsim, listed with its reason in `docs/schemes/lbodsn.md`.

use super::Lbodsn;
use crate::check::check_range;
use crate::lb::{check_table_size, Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::units::Time;
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// LBoDSN parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LbodsnConfig {
    /// ε of eq. 1: `Q_th = ε·(Q_PFC − (λ−μ)·t_d)` (default 0.8, section 3.2).
    /// Valid: above 0 and at most 1.
    pub epsilon: f64,
    /// Window over which the destination ToR measures an ingress queue's arrival rate λ,
    /// departure rate μ and growth ΔL (default 1 us; not in the paper). Valid: 1ns..=1ms.
    pub rate_window: Time,
    /// At most one FCN per (ingress port, priority) per this gap (default 0: the base RTT
    /// between two ToRs, the paper's "at most one new FCN in one RTT"). Valid: 0..=10ms.
    pub fcn_gap: Time,
    /// Predict the PAUSE (eq. 1-2, default true); false: send an FCN only once the ingress
    /// is pausing (the ablation of the prediction).
    pub predict: bool,
    /// Congested flows an FCN names, largest first (default 1; the paper's FCN carries "a
    /// flow ID"). Valid: 1..=16.
    pub flows_per_fcn: u32,
    /// Name only the flows holding more than `F_cc` bytes of the ingress queue (eq. 3,
    /// default true); false: every flow with bytes in the queue is congested, so an FCN names
    /// the largest `flows_per_fcn` of them whatever their share (the ablation of eq. 3).
    pub f_cc: bool,
    /// A source-ToR flow idle for longer than this is forgotten: its next packet is a new
    /// flow and is placed by the path classes (default 500 us). Valid: 1us..=1s.
    pub flow_idle: Time,
    /// A path whose tag-1 flag is set is congested if the local uplink's utilization (DRE)
    /// is at least this, and undetermined below it (Table 1; default 0.9). Valid: above 0
    /// and at most 4.
    pub u_high: f64,
    /// A tag-1 flag lapses after this long without a tag-0 FCN (default 0: 10 base RTTs).
    /// Valid: 0..=1s.
    pub fcn_ttl: Time,
    /// w_q of eq. 6, the weight of the stale-CNP count in its average (default 0.25).
    /// Valid: 0..=1.
    pub w_q: f64,
    /// maxP of eq. 7, the largest probability of dropping a stale CNP below `cnp_t`
    /// (default 0.5). Valid: 0..=1.
    pub max_p: f64,
    /// T of eq. 7: from this many stale CNPs of one move on, every stale CNP is dropped
    /// (default 4). Valid: 1..=1,000,000.
    pub cnp_t: u32,
    /// Filter stale CNPs at the source ToR (default true; false: the ablation).
    pub cnp_filter: bool,
    /// Reorder queues per host-facing egress of a ToR (default 24, as ConWeave's Tofino2
    /// budget); 0: no reordering (packets of a moved flow may arrive out of order).
    /// Valid: 0..=1024.
    pub reorder_queues: u32,
    /// A flow may use one of this many hashed reorder queues (default 3, as ConWeave).
    /// Valid: 1..=reorder_queues, dividing it.
    pub queue_choices: u32,
    /// A reorder queue whose TAIL has not arrived is flushed after this long (default
    /// 200 us, ConWeave's `default_wait`). Valid: 1ns..=100ms.
    pub default_wait: Time,
    /// DRE decrement period of the uplink utilization (default 50 us, as CONGA).
    /// Valid: above 0 and at most 10ms.
    pub t_dre: Time,
    /// DRE decay factor (default 0.2, as CONGA). Valid: above 0 and at most 1.
    pub dre_alpha: f64,
    /// Entries of the flow tables (source ToR flows, destination ToR per-(port, flow) bytes
    /// and reorder state) (default 65,536). Valid: 1..=16,777,216.
    pub table_size: u32,
}

impl Default for LbodsnConfig {
    fn default() -> Self {
        LbodsnConfig {
            epsilon: 0.8,
            rate_window: Time::from_us(1),
            fcn_gap: Time::ZERO,
            predict: true,
            flows_per_fcn: 1,
            f_cc: true,
            flow_idle: Time::from_us(500),
            u_high: 0.9,
            fcn_ttl: Time::ZERO,
            w_q: 0.25,
            max_p: 0.5,
            cnp_t: 4,
            cnp_filter: true,
            reorder_queues: 24,
            queue_choices: 3,
            default_wait: Time::from_us(200),
            t_dre: Time::from_us(50),
            dre_alpha: 0.2,
            table_size: 65_536,
        }
    }
}

/// Bits of the DRE's quantized utilization (as PLB).
pub(super) const Q_BITS: u32 = 6;

impl SchemeConfig for LbodsnConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        let ms = Time::from_ms;
        let unit_open = (Excluded(0.0), Included(1.0));
        check_range(
            "lb.epsilon",
            self.epsilon,
            unit_open,
            "(LBoDSN default 0.8)",
        )?;
        check_range(
            "lb.rate_window",
            self.rate_window,
            Time::from_ns(1)..=ms(1),
            "(LBoDSN default 1us)",
        )?;
        check_range(
            "lb.fcn_gap",
            self.fcn_gap,
            ..=ms(10),
            "(LBoDSN default 0s: the base RTT)",
        )?;
        check_range(
            "lb.flows_per_fcn",
            self.flows_per_fcn,
            1..=16,
            "(LBoDSN default 1)",
        )?;
        check_range(
            "lb.flow_idle",
            self.flow_idle,
            Time::from_us(1)..=ms(1_000),
            "(LBoDSN default 500us)",
        )?;
        let u_high = (Excluded(0.0), Included(4.0));
        check_range("lb.u_high", self.u_high, u_high, "(LBoDSN default 0.9)")?;
        check_range(
            "lb.fcn_ttl",
            self.fcn_ttl,
            ..=ms(1_000),
            "(LBoDSN default 0s: 10 base RTTs)",
        )?;
        check_range("lb.w_q", self.w_q, 0.0..=1.0, "(LBoDSN default 0.25)")?;
        check_range("lb.max_p", self.max_p, 0.0..=1.0, "(LBoDSN default 0.5)")?;
        check_range("lb.cnp_t", self.cnp_t, 1..=1_000_000, "(LBoDSN default 4)")?;
        let queues = self.reorder_queues;
        check_range(
            "lb.reorder_queues",
            queues,
            0..=1024,
            "queues per port (LBoDSN default 24)",
        )?;
        if queues > 0 {
            let divisor = "(a divisor of lb.reorder_queues; LBoDSN default 3)";
            check_range("lb.queue_choices", self.queue_choices, 1..=queues, divisor)?;
            if !queues.is_multiple_of(self.queue_choices) {
                return Err(format!(
                    "lb.queue_choices: {} does not divide lb.reorder_queues ({queues}) (LBoDSN default 3)",
                    self.queue_choices
                ));
            }
        }
        check_range(
            "lb.default_wait",
            self.default_wait,
            Time::from_ns(1)..=ms(100),
            "(LBoDSN default 200us)",
        )?;
        let t_dre = (Excluded(Time::ZERO), Included(ms(10)));
        check_range("lb.t_dre", self.t_dre, t_dre, "(LBoDSN default 50us)")?;
        check_range(
            "lb.dre_alpha",
            self.dre_alpha,
            unit_open,
            "(LBoDSN default 0.2)",
        )?;
        check_table_size(self.table_size)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fabric: true,
            ingress: true,
            dequeue: true,
            acks: true,
            reorder_queues_per_port: self.reorder_queues,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Lbodsn::new(self, fabric))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_key_and_range() {
        let bad = |c: LbodsnConfig| c.validate().unwrap_err();
        assert!(LbodsnConfig::default().validate().is_ok());
        assert!(bad(LbodsnConfig {
            epsilon: 0.0,
            ..Default::default()
        })
        .starts_with("lb.epsilon: 0 is out of range"));
        assert!(bad(LbodsnConfig {
            cnp_t: 0,
            ..Default::default()
        })
        .starts_with("lb.cnp_t: 0 is out of range"));
        assert!(bad(LbodsnConfig {
            queue_choices: 5,
            ..Default::default()
        })
        .starts_with("lb.queue_choices: 5 does not divide"));
        assert!(bad(LbodsnConfig {
            max_p: 1.5,
            ..Default::default()
        })
        .starts_with("lb.max_p: 1.5 is out of range"));
        // No reorder queues: queue_choices is not read.
        assert!(LbodsnConfig {
            reorder_queues: 0,
            queue_choices: 5,
            ..Default::default()
        }
        .validate()
        .is_ok());
    }
}
