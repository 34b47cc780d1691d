//! Path sensing and classification: what a host knows of each path to each destination ToR
//! ([`PathStat`]: smoothed RTT, ECN fraction over the aging windows, sent, lost and timed-out
//! packets over the fail windows), the thresholds of each pair of ToRs, and the class a path
//! falls in ([`PathClass`], [`classify`]).

use super::config::HermesConfig;
use super::Hermes;
use crate::units::Time;

/// What Hermes makes of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathClass {
    Good,
    Gray,
    Bad,
    Failed,
}

/// The resolved thresholds of one pair of ToRs.
#[derive(Clone, Copy, Debug)]
pub(super) struct Thresholds {
    pub(super) low: Time,
    pub(super) high: Time,
    pub(super) better: Time,
    /// R in bytes per second.
    pub(super) max_rate: f64,
}

/// What a host knows of one path to one destination ToR.
#[derive(Clone, Copy, Debug)]
pub(super) struct PathStat {
    /// Smoothed RTT and the time of its last sample (`Time::MAX`: none yet).
    pub(super) rtt: Time,
    pub(super) rtt_at: Time,
    /// Aging window (`now / aging`) of `samples[0]`, `ce[0]`; index 1 is the window before.
    pub(super) epoch: u64,
    pub(super) samples: [u32; 2],
    pub(super) ce: [u32; 2],
    /// Fail window (`now / fail_window`) of the counters below, same layout.
    pub(super) fail_epoch: u64,
    pub(super) sent: [u32; 2],
    pub(super) losses: [u32; 2],
    pub(super) timeouts: [u32; 2],
    pub(super) failed_until: Time,
    /// This host's flows on the path now.
    pub(super) flows: u32,
}

impl Default for PathStat {
    fn default() -> Self {
        PathStat {
            rtt: Time::ZERO,
            rtt_at: Time::MAX,
            epoch: 0,
            samples: [0; 2],
            ce: [0; 2],
            fail_epoch: 0,
            sent: [0; 2],
            losses: [0; 2],
            timeouts: [0; 2],
            failed_until: Time::ZERO,
            flows: 0,
        }
    }
}

/// Moves two-window counters to window `now_epoch`.
#[inline]
fn roll<const N: usize>(epoch: &mut u64, now_epoch: u64, counters: [&mut [u32; 2]; N]) {
    if now_epoch == *epoch {
        return;
    }
    for c in counters {
        *c = if now_epoch == *epoch + 1 {
            [0, c[0]]
        } else {
            [0, 0]
        };
    }
    *epoch = now_epoch;
}

impl PathStat {
    pub(super) fn age(&mut self, now: Time, cfg: &HermesConfig) {
        let e = now.ps() / cfg.aging.ps();
        roll(&mut self.epoch, e, [&mut self.samples, &mut self.ce]);
        let e = now.ps() / cfg.fail_window.ps();
        roll(
            &mut self.fail_epoch,
            e,
            [&mut self.sent, &mut self.losses, &mut self.timeouts],
        );
    }

    pub(super) fn sample(&mut self, now: Time, rtt: Time, ce: bool, cfg: &HermesConfig) {
        self.age(now, cfg);
        self.rtt = if self.rtt_at == Time::MAX {
            rtt
        } else {
            Time((self.rtt.ps() + rtt.ps()) / 2)
        };
        self.rtt_at = now;
        self.samples[0] += 1;
        self.ce[0] += ce as u32;
    }

    /// The ECN fraction, if enough packets were acknowledged.
    pub(super) fn ecn(&self, cfg: &HermesConfig) -> Option<f64> {
        let n = self.samples[0] + self.samples[1];
        (n >= cfg.ecn_min_samples.max(1)).then(|| (self.ce[0] + self.ce[1]) as f64 / n as f64)
    }

    /// The RTT, if a sample is recent enough.
    fn known_rtt(&self, now: Time, cfg: &HermesConfig) -> Option<Time> {
        (self.rtt_at != Time::MAX && now.saturating_sub(self.rtt_at) <= cfg.rtt_expiry)
            .then_some(self.rtt)
    }

    /// Class, RTT estimate and ECN fraction (call `age` first).
    fn view(&self, now: Time, th: &Thresholds, cfg: &HermesConfig) -> PathView {
        let rtt = self.known_rtt(now, cfg);
        let ecn = self.ecn(cfg);
        let class = if now < self.failed_until {
            PathClass::Failed
        } else if self.timeouts[0] + self.timeouts[1] > 0 {
            PathClass::Bad
        } else {
            classify(rtt, ecn, th.low, th.high, cfg.ecn_threshold)
        };
        PathView {
            class,
            rtt: rtt.unwrap_or(th.low),
            ecn,
            flows: self.flows,
        }
    }
}

/// Hermes's path classes from RTT and ECN alone (`None`: unknown).
pub fn classify(
    rtt: Option<Time>,
    ecn: Option<f64>,
    low: Time,
    high: Time,
    ecn_threshold: f64,
) -> PathClass {
    let Some(rtt) = rtt else {
        return PathClass::Gray;
    };
    let (ecn_low, ecn_high) = match ecn {
        Some(f) => (f < ecn_threshold, f >= ecn_threshold),
        None => (true, true),
    };
    if rtt < low && ecn_low {
        PathClass::Good
    } else if rtt >= high && ecn_high {
        PathClass::Bad
    } else {
        PathClass::Gray
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct PathView {
    pub(super) class: PathClass,
    pub(super) rtt: Time,
    pub(super) ecn: Option<f64>,
    pub(super) flows: u32,
}

impl PathView {
    /// Notably better than `other`.
    pub(super) fn better_than(
        &self,
        other: &PathView,
        th: &Thresholds,
        cfg: &HermesConfig,
    ) -> bool {
        let rtt = self.rtt + th.better <= other.rtt;
        match (self.ecn, other.ecn) {
            (Some(a), Some(b)) => rtt && a + cfg.ecn_better <= b,
            _ => rtt,
        }
    }
}

impl Hermes {
    /// Index in `stats` of host `h`'s entry for path `i` towards ToR `b`.
    #[inline]
    pub(super) fn entry(&self, h: u32, b: u32, i: u16) -> usize {
        let a = self.host_tor[h as usize];
        (self.host_base[h as usize] + self.row[(a * self.tors + b) as usize]) as usize + i as usize
    }

    #[inline]
    pub(super) fn th(&self, a: u32, b: u32) -> &Thresholds {
        &self.thresholds[(a * self.tors + b) as usize]
    }

    /// Ages host `h`'s entry of path `i` to ToR `b` and gives its view.
    pub(super) fn view(&mut self, h: u32, b: u32, i: u16, now: Time) -> PathView {
        let e = self.entry(h, b, i);
        self.stats[e].age(now, &self.cfg);
        let th = *self.th(self.host_tor[h as usize], b);
        self.stats[e].view(now, &th, &self.cfg)
    }

    /// Host `h`'s view of path `i` to ToR `b` at `now`, the stored entry left as it is
    /// (monitors; [`Hermes::view`] ages it).
    pub(super) fn peek(&self, h: u32, b: u32, i: u16, now: Time) -> PathView {
        let mut stat = self.stats[self.entry(h, b, i)];
        stat.age(now, &self.cfg);
        stat.view(now, self.th(self.host_tor[h as usize], b), &self.cfg)
    }

    /// Host `node`'s class of path `i` towards ToR `b` at `now` (for tests and inspection).
    pub fn class(&mut self, node: u32, b: u32, i: u16, now: Time) -> PathClass {
        let h = self.host(node);
        self.view(h, b, i, now).class
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_classed_by_rtt_and_ecn() {
        let (low, high) = (Time::from_us(10), Time::from_us(22));
        let c = |rtt: Option<u64>, ecn| classify(rtt.map(Time::from_us), ecn, low, high, 0.4);
        assert_eq!(c(Some(9), Some(0.1)), PathClass::Good);
        assert_eq!(c(Some(9), Some(0.5)), PathClass::Gray, "fast but marked");
        assert_eq!(c(Some(25), Some(0.5)), PathClass::Bad);
        assert_eq!(c(Some(25), Some(0.1)), PathClass::Gray, "slow but unmarked");
        assert_eq!(
            c(Some(15), Some(0.0)),
            PathClass::Gray,
            "between the RTT thresholds"
        );
        // Too few samples for an ECN fraction: the RTT alone decides.
        assert_eq!(c(Some(9), None), PathClass::Good);
        assert_eq!(c(Some(25), None), PathClass::Bad);
        assert_eq!(c(None, None), PathClass::Gray, "unknown");
    }
}
