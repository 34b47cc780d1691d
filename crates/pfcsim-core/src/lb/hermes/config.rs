//! Hermes's parameters (`[lb]` with `scheme = "hermes"`): [`HermesConfig`], its defaults and
//! validation, and [`RttThreshold`], an RTT threshold given as a time or as a queue size.

use super::Hermes;
use crate::check::check_range;
use crate::lb::host::{switch_side, HostFabric, HostScheme, PairTiming};
use crate::lb::{Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::units::{Bytes, Time};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// An RTT threshold: fixed, or relative to the base RTT of the pair of ToRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RttThreshold {
    /// The same time for every pair of ToRs (`"12us"`).
    Fixed(Time),
    /// The pair's base RTT plus the time to drain this many bytes at its bottleneck rate
    /// (`"25KB"`); as a difference (`rtt_better`), just the drain time.
    Queue(Bytes),
}

impl RttThreshold {
    /// The threshold for a pair with this base RTT and bottleneck; `absolute` adds the base.
    pub(super) fn resolve(self, timing: PairTiming, absolute: bool) -> Time {
        match self {
            RttThreshold::Fixed(t) => t,
            RttThreshold::Queue(b) => {
                let drain = timing.bottleneck.tx_time(b.0);
                if absolute {
                    timing.base_rtt + drain
                } else {
                    drain
                }
            }
        }
    }
}

impl fmt::Display for RttThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RttThreshold::Fixed(t) => t.fmt(f),
            RttThreshold::Queue(b) => b.fmt(f),
        }
    }
}

impl Serialize for RttThreshold {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for RttThreshold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if let Ok(t) = text.parse::<Time>() {
            return Ok(RttThreshold::Fixed(t));
        }
        match text.parse::<Bytes>() {
            Ok(b) => Ok(RttThreshold::Queue(b)),
            Err(_) => Err(de::Error::custom(format!(
                "'{text}' is neither a time (\"12us\": the threshold itself) nor a size (\"25KB\": base RTT plus that many bytes queued at the bottleneck rate)"
            ))),
        }
    }
}

/// Hermes's parameters (`[lb]` with `scheme = "hermes"`). Defaults and their sources are in
/// `docs/schemes/hermes.md`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HermesConfig {
    /// T_RTT_low: a path faster than this is good (default `"25KB"`: the paper's base RTT +
    /// 20 us, which is 25 KB queued at its 10 Gbps).
    pub rtt_low: RttThreshold,
    /// T_RTT_high: a path at least this slow (and marked) is bad (default `"175KB"`: the
    /// public code's 180 us against its ~40 us one-way base, 140 us at 10 Gbps).
    pub rtt_high: RttThreshold,
    /// Δ_RTT: how much lower a path's RTT must be to count as notably better (default
    /// `"125KB"`: the public code's 100 us at 10 Gbps).
    pub rtt_better: RttThreshold,
    /// T_ECN: ECN fraction that separates good from bad (paper: 40 %).
    pub ecn_threshold: f64,
    /// Δ_ECN: how much lower a path's ECN fraction must be to count as notably better.
    pub ecn_better: f64,
    /// Packets acknowledged on a path before its ECN fraction counts (the public code's
    /// 14,000 B of 1000 B packets).
    pub ecn_min_samples: u32,
    /// T1: RTT and ECN counters cover the last one to two windows of this length (public
    /// code's bootstrap scripts: 60 us).
    pub aging: Time,
    /// A path's RTT is unknown once it has had no sample for this long.
    pub rtt_expiry: Time,
    /// Rerouting of running flows off bad paths is on (off: paths are chosen at the start,
    /// after timeouts and off failed paths only).
    pub reroute: bool,
    /// S: bytes a flow must have sent on its path before it may move off a bad one (paper:
    /// 600 KB).
    pub reroute_min_sent: Bytes,
    /// R: a flow moves off a bad path only below this fraction of the pair's bottleneck rate
    /// (paper: 30 %).
    pub reroute_max_rate: f64,
    /// A flow's rate is the bytes acknowledged over the last window of this length.
    pub rate_window: Time,
    /// At most one reroute attempt per flow per this interval (public code: 100 us).
    pub reroute_interval: Time,
    /// Probing agents are on.
    pub probe: bool,
    /// Probing period of each agent (paper: 100-500 us).
    pub probe_interval: Time,
    /// A probe unanswered for this long counts as a loss on its path.
    pub probe_timeout: Time,
    /// Data priority of probes.
    pub probe_priority: u8,
    /// Retransmission timeouts in the fail window that fail a path.
    pub fail_timeouts: u32,
    /// Losses in the fail window that fail a path (with `fail_loss_fraction`).
    pub fail_losses: u32,
    /// Losses per packet sent on a path, in the fail window, that fail it (with `fail_losses`).
    pub fail_loss_fraction: f64,
    /// Loss and timeout counters cover the last one to two windows of this length.
    pub fail_window: Time,
    /// NACKs a flow gets this long after it moved are the reordering of the move (its old
    /// path's packets arriving behind the new path's), not losses (public code: 1 ms).
    pub reorder_window: Time,
    /// A failed path is avoided for this long, then tried again.
    pub fail_hold: Time,
}

impl Default for HermesConfig {
    fn default() -> Self {
        HermesConfig {
            rtt_low: RttThreshold::Queue(Bytes(25_000)),
            rtt_high: RttThreshold::Queue(Bytes(175_000)),
            rtt_better: RttThreshold::Queue(Bytes(125_000)),
            ecn_threshold: 0.4,
            ecn_better: 0.05,
            ecn_min_samples: 14,
            aging: Time::from_us(60),
            rtt_expiry: Time::from_ms(1),
            reroute: true,
            reroute_min_sent: Bytes(600_000),
            reroute_max_rate: 0.3,
            rate_window: Time::from_us(20),
            reroute_interval: Time::from_us(100),
            probe: true,
            probe_interval: Time::from_us(100),
            probe_timeout: Time::from_us(500),
            probe_priority: 3,
            fail_timeouts: 2,
            fail_losses: 3,
            fail_loss_fraction: 0.001,
            fail_window: Time::from_ms(10),
            reorder_window: Time::from_ms(1),
            fail_hold: Time::from_ms(10),
        }
    }
}

impl SchemeConfig for HermesConfig {
    fn validate(&self) -> Result<(), String> {
        let fraction = |key: &str, v: f64, example: &str| {
            check_range(
                &format!("lb.{key}"),
                v,
                0.0..=1.0,
                &format!("(a fraction, e.g. {example})"),
            )
        };
        fraction("ecn_threshold", self.ecn_threshold, "0.4")?;
        fraction("ecn_better", self.ecn_better, "0.05")?;
        fraction("reroute_max_rate", self.reroute_max_rate, "0.3")?;
        fraction("fail_loss_fraction", self.fail_loss_fraction, "0.001")?;
        let positive = |key: &str, t: Time, example: &str| {
            if t > Time::ZERO {
                Ok(())
            } else {
                Err(format!("lb.{key}: must be above 0 (e.g. \"{example}\")"))
            }
        };
        positive("aging", self.aging, "60us")?;
        positive("rtt_expiry", self.rtt_expiry, "1ms")?;
        positive("rate_window", self.rate_window, "20us")?;
        positive("fail_window", self.fail_window, "10ms")?;
        if self.probe {
            positive("probe_interval", self.probe_interval, "100us")?;
            positive("probe_timeout", self.probe_timeout, "500us")?;
            check_range(
                "lb.probe_priority",
                self.probe_priority,
                1..=7,
                "(a data priority, e.g. 3)",
            )?;
        }
        if self.fail_timeouts == 0 {
            return Err("lb.fail_timeouts: must be at least 1 (e.g. 2)".into());
        }
        if self.fail_losses == 0 {
            return Err("lb.fail_losses: must be at least 1 (e.g. 3)".into());
        }
        let low = |t: RttThreshold| match t {
            RttThreshold::Fixed(t) => (1, t.ps()),
            RttThreshold::Queue(b) => (0, b.0),
        };
        let (l, h) = (low(self.rtt_low), low(self.rtt_high));
        if l.0 == h.0 && l.1 > h.1 {
            return Err(format!(
                "lb.rtt_high: {} is below lb.rtt_low ({}); a bad path must be slower than a good one",
                self.rtt_high, self.rtt_low
            ));
        }
        Ok(())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hosts: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        switch_side(fabric)
    }

    fn host_scheme(&self, flows: usize, fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        Some(Box::new(Hermes::new(self, fabric, flows)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::hermes::tests::hermes;
    use crate::lb::host::TestHost;

    #[test]
    fn thresholds_scale_with_the_pairs_base_rtt() {
        let host = TestHost::new(4);
        // Base RTT 8 us, bottleneck 100 Gbps: 25 KB drain in 2 us, 175 KB in 14 us.
        let h = hermes(&host, &HermesConfig::default(), 1);
        let th = h.th(0, 1);
        assert_eq!(
            (th.low, th.high, th.better),
            (Time::from_us(10), Time::from_us(22), Time::from_us(10))
        );
        assert!((th.max_rate - 0.3 * 12.5e9).abs() < 1.0);
        let fixed = HermesConfig {
            rtt_low: RttThreshold::Fixed(Time::from_us(30)),
            ..Default::default()
        };
        assert_eq!(hermes(&host, &fixed, 1).th(0, 1).low, Time::from_us(30));
        // Spec strings: a time is the threshold, a size the queue above the base RTT.
        let cfg: HermesConfig = toml::from_str("rtt_low = \"12us\"\nrtt_high = \"200KB\"").unwrap();
        assert_eq!(cfg.rtt_low, RttThreshold::Fixed(Time::from_us(12)));
        assert_eq!(cfg.rtt_high, RttThreshold::Queue(Bytes(200_000)));
        assert!(toml::from_str::<HermesConfig>("rtt_low = \"fast\"").is_err());
    }

    #[test]
    fn bad_settings_are_refused_with_the_key() {
        let check = |cfg: HermesConfig, key: &str| {
            let e = cfg.validate().unwrap_err();
            assert!(e.starts_with(&format!("lb.{key}")), "{e}");
        };
        check(
            HermesConfig {
                ecn_threshold: 1.5,
                ..Default::default()
            },
            "ecn_threshold",
        );
        check(
            HermesConfig {
                reroute_max_rate: -0.1,
                ..Default::default()
            },
            "reroute_max_rate",
        );
        check(
            HermesConfig {
                aging: Time::ZERO,
                ..Default::default()
            },
            "aging",
        );
        check(
            HermesConfig {
                probe_interval: Time::ZERO,
                ..Default::default()
            },
            "probe_interval",
        );
        check(
            HermesConfig {
                probe_priority: 0,
                ..Default::default()
            },
            "probe_priority",
        );
        check(
            HermesConfig {
                fail_timeouts: 0,
                ..Default::default()
            },
            "fail_timeouts",
        );
        check(
            HermesConfig {
                rtt_low: RttThreshold::Queue(Bytes(200_000)),
                ..Default::default()
            },
            "rtt_high",
        );
        assert_eq!(HermesConfig::default().validate(), Ok(()));
    }
}
