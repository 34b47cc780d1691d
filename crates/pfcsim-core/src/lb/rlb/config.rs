//! RLB's parameters (`[lb]` with `scheme = "rlb"`, the wrapped scheme in `[lb.inner]`), their
//! defaults and their validation.

use super::Rlb;
use crate::check::check_range;
use crate::lb::host::{HostFabric, HostScheme};
use crate::lb::{Capabilities, LbConfig, LbFabric, Resequencing, SchemeConfig, SwitchScheme};
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// How a PFC warning ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningEnd {
    /// The warning switch sends a clearing CNM once PFC is no longer predicted.
    #[default]
    Clear,
    /// The upstream switch forgets a warning `warning_ttl` after the last CNM; the warning
    /// switch refreshes it every `warning_ttl / 2` while PFC is still predicted.
    Expiry,
}

/// How path RTTs are measured between leaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttMeasurement {
    /// The prototype's (section V): the source leaf writes the send time into the header of a
    /// data packet it sends on the uplink, the destination leaf returns it on the next packet
    /// (data, ACK or NACK) it sends towards the source leaf, by any path. No extra packets.
    #[default]
    Piggyback,
    /// A 64-byte probe in the data priority per measurement, echoed by the destination leaf:
    /// paths are measured even with no traffic back, at the cost of bandwidth and buffer.
    Probe,
}

/// Which path Algorithm 1 takes as p_s, the alternative to a warned path p.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Alternative {
    /// The paper's "suboptimal path": the untried candidate with the smallest measured RTT
    /// (the path delay Algorithm 1 compares; ties, and switches that measure no RTT: the
    /// first after p in port order, cyclically).
    #[default]
    NextBest,
    /// The next untried candidate after p in port order, cyclically (the round-robin order
    /// of Presto and DRB), whatever its RTT.
    NextPort,
}

/// RLB parameters (`[lb]` with `scheme = "rlb"`, the wrapped scheme in `[lb.inner]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RlbConfig {
    /// Δt: sampling interval of the ingress queues (default 0: the smallest delay of the
    /// switch's links to other switches, the paper's "link delay 2 us"). Valid: 0..=1ms.
    pub interval: Time,
    /// A warning is sent when the queue, growing as over the last interval, would reach the
    /// XOFF threshold within this time (default 0: interval + 2 x the ingress link's delay:
    /// a sample may be one interval late, the CNM takes one link delay to arrive, and what is
    /// on the wire still arrives, eq. 1). Valid: 0..=10ms.
    pub horizon: Time,
    /// Q_th: no warning below this ingress use (default unset: rate x delay of the ingress
    /// link, the conservative lower end d x C of eq. 3). Valid: any.
    pub q_min: Option<Bytes>,
    /// How a warning ends (default `clear`: a clearing CNM; `expiry`: after `warning_ttl`).
    pub warning_end: WarningEnd,
    /// Lifetime of a warning without refresh in `expiry` mode (default 0: 4 x interval).
    /// Valid: 0..=100ms.
    pub warning_ttl: Time,
    /// Recirculate packets whose best path is warned when the RTT gap exceeds t_rc (default
    /// true; false: "reroute only", Fig. 17). True needs `[switch.loopback]`.
    pub recirculation: bool,
    /// RLB*: N_rc per round (eq. 4-5), the cumulative-delay rule (eq. 6) and failure
    /// detection (Algorithm 2) (default false: RLB).
    pub adaptive: bool,
    /// Most recirculations of one packet at one switch, in both modes (default 8; not in the
    /// paper, which stops only when Algorithm 1's condition fails). Valid: 1..=255.
    pub max_recirculations: u32,
    /// Algorithm 2: a round whose packets recirculated more than this many times on average
    /// points at a suspect egress (default 3; the paper gives no value). Valid: above 0 and
    /// below `max_recirculations`.
    pub fault_threshold: f64,
    /// Least time between two RTT measurements (stamps or probes) of one (destination ToR,
    /// uplink) (default 0: the base RTT to that ToR, the prototype's "one base RTT").
    /// Valid: 0..=10ms.
    pub rtt_period: Time,
    /// How path RTTs are measured (default `piggyback`, the prototype's; `probe`: probe
    /// packets, the measurement of earlier versions).
    pub rtt_measurement: RttMeasurement,
    /// Weight of a new RTT sample in a path's RTT: RTT = (1 - w) x RTT + w x sample (default
    /// 0.5, the smoothing of Hermes's code, whose RTT measurement the paper follows; 1: the
    /// latest sample alone). Valid: above 0, at most 1.
    pub rtt_gain: f64,
    /// Algorithm 1's p_s (default `next_best`: the untried candidate with the smallest RTT;
    /// `next_port`: the next candidate in port order).
    pub alternative: Alternative,
    /// Entries of the per-switch table of recirculating packets (default 4096).
    /// Valid: 1..=16,777,216.
    pub table_size: u32,
    /// The inner scheme's remembered port follows Algorithm 1's reroutes: DRILL's remembered
    /// port for the destination, LetFlow's flowlet port (default false: the inner scheme keeps
    /// its own choice and RLB only changes the packet's egress). True needs `drill` or
    /// `letflow` inside.
    pub inner_follows: bool,
    /// The wrapped scheme (default DRILL).
    #[serde(deserialize_with = "crate::tagged::nested")]
    pub inner: Box<LbConfig>,
}

impl Default for RlbConfig {
    fn default() -> Self {
        RlbConfig {
            interval: Time::ZERO,
            horizon: Time::ZERO,
            q_min: None,
            warning_end: WarningEnd::Clear,
            warning_ttl: Time::ZERO,
            recirculation: true,
            adaptive: false,
            max_recirculations: 8,
            fault_threshold: 3.0,
            rtt_period: Time::ZERO,
            rtt_measurement: RttMeasurement::Piggyback,
            rtt_gain: 0.5,
            alternative: Alternative::NextBest,
            table_size: 4096,
            inner_follows: false,
            inner: Box::new(LbConfig::Drill(crate::lb::DrillConfig::default())),
        }
    }
}

impl RlbConfig {
    /// Whether path RTTs ride on packets (`rtt_measurement = "piggyback"`), in RLB's scheme
    /// word.
    pub fn piggybacks(&self) -> bool {
        self.rtt_measurement == RttMeasurement::Piggyback
    }
}

impl SchemeConfig for RlbConfig {
    /// Checks the values; the message names the key under `[lb]` (`lb.inner.<key>` for the
    /// wrapped scheme's) and the valid range.
    fn validate(&self) -> Result<(), String> {
        if self.inner.capabilities().wrapper {
            return Err(format!(
                "lb.inner.scheme: \"{}\" wraps a scheme itself and cannot be wrapped; choose a switch-side scheme (ecmp, rps, drb, letflow, drill, conga, hula, conweave)",
                self.inner.name()
            ));
        }
        if self.inner.capabilities().scheme_word {
            return Err(format!(
                "lb.inner.scheme: \"{}\" carries a header word of its own, which RLB does not pass on; choose a scheme without one (ecmp, rps, drb, letflow, drill, conga, hula, conweave)",
                self.inner.name()
            ));
        }
        self.inner
            .validate()
            .map_err(|e| match e.strip_prefix("lb.") {
                Some(rest) => format!("lb.inner.{rest}"),
                None => format!("lb.inner: {e}"),
            })?;
        let ms = Time::from_ms;
        for (key, t, hi, dflt) in [
            ("interval", self.interval, ms(1), "the link delay"),
            ("horizon", self.horizon, ms(10), "auto"),
            ("warning_ttl", self.warning_ttl, ms(100), "4 x interval"),
            ("rtt_period", self.rtt_period, ms(10), "base RTT"),
        ] {
            let note = format!("(RLB default 0s ({dflt}))");
            check_range(&format!("lb.{key}"), t, ..=hi, &note)?;
        }
        check_range(
            "lb.max_recirculations",
            self.max_recirculations,
            1..=255,
            "(RLB default 8)",
        )?;
        check_range(
            "lb.fault_threshold",
            self.fault_threshold,
            (Excluded(0.0), Excluded(self.max_recirculations as f64)),
            "(the upper bound is lb.max_recirculations; RLB default 3)",
        )?;
        check_range(
            "lb.rtt_gain",
            self.rtt_gain,
            (Excluded(0.0), Included(1.0)),
            "(RLB default 0.5; 1 keeps only the latest sample)",
        )?;
        let remembers = match &*self.inner {
            LbConfig::Drill(d) => d.m > 0,
            LbConfig::LetFlow(_) => true,
            _ => false,
        };
        if self.inner_follows && !remembers {
            return Err(format!(
                "lb.inner_follows: the inner scheme \"{}\" remembers no port to follow a reroute; use it with lb.inner.scheme = \"drill\" (lb.inner.m above 0) or \"letflow\", or set it to false",
                self.inner.name()
            ));
        }
        crate::lb::check_table_size(self.table_size)
    }

    /// RLB's own needs, plus its inner scheme's (it runs the inner scheme's hooks).
    fn capabilities(&self) -> Capabilities {
        let inner = self.inner.capabilities();
        Capabilities {
            fabric: true,
            pinned: true,
            loopback: self.recirculation,
            ingress: inner.ingress,
            dequeue: true,
            acks: inner.acks || self.piggybacks(),
            scheme_word: self.piggybacks(),
            reorder_queues_per_port: inner.reorder_queues_per_port,
            hosts: inner.hosts,
            wrapper: true,
            alerts: true,
            sojourn: inner.sojourn,
            coflow_tag: inner.coflow_tag,
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Rlb::new(self, fabric))
    }

    /// RLB over a host-side scheme: the hosts run it, RLB takes their paths as input.
    fn host_scheme(&self, flows: usize, fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        self.inner.scheme().host_scheme(flows, fabric)
    }

    fn resequencing(&self) -> Option<Resequencing> {
        self.inner.scheme().resequencing()
    }

    fn inner(&self) -> Option<&LbConfig> {
        Some(&self.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::rlb::tests::ecmp_inner;

    #[test]
    fn config_errors_name_the_key() {
        let bad = RlbConfig {
            inner: Box::new(LbConfig::Rlb(RlbConfig::default())),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().starts_with("lb.inner.scheme:"));
        let bad = RlbConfig {
            inner: Box::new(LbConfig::Drill(crate::lb::DrillConfig {
                d: 0,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().starts_with("lb.inner.d: 0"));
        let bad = RlbConfig {
            fault_threshold: 9.0,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("lb.fault_threshold:"));
        let bad = RlbConfig {
            inner_follows: true,
            ..ecmp_inner()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.inner_follows: the inner scheme \"ecmp\" remembers no port to follow a reroute; use it with lb.inner.scheme = \"drill\" (lb.inner.m above 0) or \"letflow\", or set it to false"
        );
        let no_memory = RlbConfig {
            inner_follows: true,
            inner: Box::new(LbConfig::Drill(crate::lb::DrillConfig {
                m: 0,
                ..Default::default()
            })),
            ..Default::default()
        };
        assert!(no_memory
            .validate()
            .unwrap_err()
            .starts_with("lb.inner_follows:"));
        assert!(RlbConfig {
            inner_follows: true,
            ..Default::default()
        }
        .validate()
        .is_ok());
        assert!(RlbConfig::default().validate().is_ok());
    }

    /// The range messages name the key, the value, the valid range and RLB's default.
    #[test]
    fn range_errors_give_the_valid_range_and_the_default() {
        let interval = Time::from_ms(2);
        for (bad, message) in [
            (
                RlbConfig { interval, ..Default::default() },
                "lb.interval: 2ms is out of range; use interval <= 1ms (RLB default 0s (the link delay))",
            ),
            (
                RlbConfig { rtt_gain: 0.0, ..Default::default() },
                "lb.rtt_gain: 0 is out of range; use 0 < rtt_gain <= 1 (RLB default 0.5; 1 keeps only the latest sample)",
            ),
            (
                RlbConfig { max_recirculations: 0, ..Default::default() },
                "lb.max_recirculations: 0 is out of range; use 1..=255 (RLB default 8)",
            ),
            (
                RlbConfig { fault_threshold: 9.0, ..Default::default() },
                "lb.fault_threshold: 9 is out of range; use 0 < fault_threshold < 8 (the upper bound is lb.max_recirculations; RLB default 3)",
            ),
        ] {
            assert_eq!(bad.validate().unwrap_err(), message);
        }
    }
}
