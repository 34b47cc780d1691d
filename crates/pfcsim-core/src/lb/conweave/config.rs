//! ConWeave's parameters (`[lb]` with `scheme = "conweave"`): [`ConWeaveConfig`], its defaults
//! and validation.

use super::ConWeave;
use crate::check::check_range;
use crate::lb::{check_table_size, Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::units::Time;
use serde::{Deserialize, Serialize};

/// ConWeave parameters. Time defaults are conweave-ns3's `run.py` leaf-spine values, set for
/// 100 Gbps links of 1 us (base RTT 4 us between two leaves); scale them with the base RTT
/// for other fabrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConWeaveConfig {
    /// θ_reply: an RTT_REPLY must arrive within base RTT + this (default 4 us, conweave-ns3
    /// `extraReplyDeadline`, every config). Valid: 1ns..=10ms.
    pub reply_extra: Time,
    /// θ_path_busy: a NOTIFY marks its path congested for this long (default 16 us, `run.py`
    /// leaf-spine `pathPauseTime`; class default 8 us). Valid: 1ns..=10ms.
    pub path_busy: Time,
    /// θ_inactive: a flow idle for longer starts a new epoch on a new path (default 300 us,
    /// `run.py` leaf-spine `txExpiryTime`). Valid: 1us..=1s.
    pub inactive: Time,
    /// θ_extra: margin added to a predicted TAIL arrival before a reorder queue is flushed
    /// (default 16 us, `run.py` leaf-spine `extraVOQFlushTime`). Valid: 0..=10ms.
    pub extra_flush: Time,
    /// θ_default: flush wait when no phase-0 timestamp of the epoch is known (default 200 us,
    /// `run.py` leaf-spine `defaultVOQWaitingTime`). Valid: 1ns..=100ms.
    pub default_wait: Time,
    /// Sample paths among those not marked congested by NOTIFY (default true, conweave-ns3
    /// `pathAwareRerouting`); false: any random path.
    pub path_aware: bool,
    /// Base RTT between two ToRs; 0 (default) computes it as conweave-ns3 does: twice the
    /// hop count between the ToRs times the one-hop (propagation) delay of the source ToR's
    /// uplinks. Valid: 0..=10ms.
    pub base_rtt: Time,
    /// Reorder queues per host-facing egress port of a ToR (default 24: the Tofino2 100 Gbps
    /// build, 32 queues per port of which 24 reorder; conweave-ns3 has no bound). Valid:
    /// 1..=1024.
    pub reorder_queues: u32,
    /// A flow may use one of this many hashed queues, one in each of `queue_choices` equal
    /// arrays (default 3, as conweave-p4); equal to `reorder_queues`: any free queue.
    /// Valid: 1..=reorder_queues, dividing it.
    pub queue_choices: u32,
    /// Flow-table entries at each ToR, source and destination side (default 65,536, the
    /// conweave-p4 register size; conweave-ns3 uses unbounded maps). Valid: 1..=16,777,216.
    pub table_size: u32,
}

impl Default for ConWeaveConfig {
    fn default() -> Self {
        ConWeaveConfig {
            reply_extra: Time::from_us(4),
            path_busy: Time::from_us(16),
            inactive: Time::from_us(300),
            extra_flush: Time::from_us(16),
            default_wait: Time::from_us(200),
            path_aware: true,
            base_rtt: Time::ZERO,
            reorder_queues: 24,
            queue_choices: 3,
            table_size: 65_536,
        }
    }
}

impl SchemeConfig for ConWeaveConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        let ns = Time::from_ns(1);
        for (key, t, lo, hi, dflt) in [
            (
                "reply_extra",
                self.reply_extra,
                ns,
                Time::from_ms(10),
                "4us",
            ),
            ("path_busy", self.path_busy, ns, Time::from_ms(10), "16us"),
            (
                "inactive",
                self.inactive,
                Time::from_us(1),
                Time::from_ms(1000),
                "300us",
            ),
            (
                "extra_flush",
                self.extra_flush,
                Time::ZERO,
                Time::from_ms(10),
                "16us",
            ),
            (
                "default_wait",
                self.default_wait,
                ns,
                Time::from_ms(100),
                "200us",
            ),
            (
                "base_rtt",
                self.base_rtt,
                Time::ZERO,
                Time::from_ms(10),
                "0s (auto)",
            ),
        ] {
            check_range(
                &format!("lb.{key}"),
                t,
                lo..=hi,
                &format!("(ConWeave default {dflt})"),
            )?;
        }
        let queues = self.reorder_queues;
        check_range(
            "lb.reorder_queues",
            queues,
            1..=1024,
            "queues per port (ConWeave default 24)",
        )?;
        let divisor = "(a divisor of lb.reorder_queues; ConWeave default 3)";
        check_range("lb.queue_choices", self.queue_choices, 1..=queues, divisor)?;
        if !queues.is_multiple_of(self.queue_choices) {
            let divisors: Vec<String> = (1..=queues)
                .filter(|d| queues.is_multiple_of(*d))
                .map(|d| d.to_string())
                .collect();
            return Err(format!(
                "lb.queue_choices: {} does not divide lb.reorder_queues ({queues}); use one of {} (ConWeave default 3)",
                self.queue_choices,
                divisors.join(", ")
            ));
        }
        check_table_size(self.table_size)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fabric: true,
            ingress: true,
            reorder_queues_per_port: self.reorder_queues,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(ConWeave::new(self, fabric))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_key_and_range() {
        let bad = |c: ConWeaveConfig| c.validate().unwrap_err();
        assert!(ConWeaveConfig::default().validate().is_ok());
        assert!(bad(ConWeaveConfig {
            reply_extra: Time::ZERO,
            ..Default::default()
        })
        .starts_with("lb.reply_extra: 0"));
        assert_eq!(
            bad(ConWeaveConfig {
                reorder_queues: 0,
                ..Default::default()
            }),
            "lb.reorder_queues: 0 is out of range; use 1..=1024 queues per port (ConWeave default 24)"
        );
        assert_eq!(
            bad(ConWeaveConfig {
                queue_choices: 5,
                ..Default::default()
            }),
            "lb.queue_choices: 5 does not divide lb.reorder_queues (24); use one of 1, 2, 3, 4, 6, 8, 12, 24 (ConWeave default 3)"
        );
        assert_eq!(
            bad(ConWeaveConfig {
                queue_choices: 25,
                ..Default::default()
            }),
            "lb.queue_choices: 25 is out of range; use 1..=24 (a divisor of lb.reorder_queues; ConWeave default 3)"
        );
        assert!(bad(ConWeaveConfig {
            table_size: 0,
            ..Default::default()
        })
        .starts_with("lb.table_size: 0 is out of range"));
    }
}
