//! The source ToR's path table: RTT and utilization samples, the three classes, whether a
//! path is active, Algorithm 2 and the budget `t_td`.
//!
//! * A path's RTT is its latest sample, or the base RTT while it has none or its sample is
//!   older than `aging`. As in RLB ([`crate::lb::stamps`]), a stamp not yet answered raises
//!   the RTT to its age once a stamp sent later to the same ToR came back (silence is evidence
//!   only then: a path without traffic back must not look slow).
//! * Its utilization is the larger of the fed-back CE (while not aged) and the source ToR's
//!   current DRE metric of the uplink, over 2^q_bits.

use super::header::{self, Echo};
use super::Plb;
use crate::lb::LbCtx;
use crate::units::Time;
use rand::Rng as _;

/// A path's state (section 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// RTT below `RTT_low`.
    NonCongested,
    /// RTT at or above `RTT_low`, utilization below `u_full`: paused by PFC.
    Undetermined,
    /// RTT at or above `RTT_low`, utilization at least `u_full`.
    Congested,
}

/// One (destination ToR, uplink) at the source ToR.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Path {
    /// Latest RTT sample (`None`: none yet), its utilization metric, when its stamp left and
    /// when it came back.
    sample: Option<(Time, u8)>,
    sample_sent: Time,
    sampled_at: Time,
    /// When the path was kicked out (`None`: active).
    kicked_at: Option<Time>,
}

impl Plb {
    #[inline]
    pub(super) fn path_mut(&mut self, t: u32, up: u8) -> &mut Path {
        let n_up = self.n_up();
        &mut self.paths[t as usize * n_up + up as usize]
    }

    #[inline]
    fn path(&self, t: u32, up: u8) -> &Path {
        &self.paths[t as usize * self.n_up() + up as usize]
    }

    /// The fresh sample of a path, if any.
    #[inline]
    fn fresh(&self, now: Time, path: &Path) -> Option<(Time, u8)> {
        path.sample
            .filter(|_| now.saturating_sub(path.sampled_at) <= self.aging)
    }

    /// The RTT PLB believes path (`t`, `up`) has.
    pub fn rtt(&self, now: Time, t: u32, up: u8) -> Time {
        let path = self.path(t, up);
        let rtt = self
            .fresh(now, path)
            .map_or(self.base_rtt[t as usize], |(rtt, _)| rtt);
        match self.sent.overdue_since(t, up) {
            Some(since) => rtt.max(now.saturating_sub(since)),
            None => rtt,
        }
    }

    /// The utilization metric of path (`t`, `up`): 2^q_bits at full use (a read: the
    /// uplink's DRE is left as it is, so monitors may call it too).
    pub fn util_metric(&self, now: Time, t: u32, up: u8) -> u32 {
        let local = self.dres.metric_at(now.ps(), self.uplinks[up as usize]);
        let remote = self
            .fresh(now, self.path(t, up))
            .map_or(0, |(_, ce)| ce as u32);
        local.max(remote)
    }

    /// The class of path (`t`, `up`) (section 3.2).
    pub fn class(&self, now: Time, t: u32, up: u8) -> Class {
        if self.rtt(now, t, up) < self.base_rtt[t as usize] + self.rtt_low_extra {
            Class::NonCongested
        } else if self.util_metric(now, t, up) as f64 >= self.full_metric {
            Class::Congested
        } else {
            Class::Undetermined
        }
    }

    /// Whether path (`t`, `up`) is kicked out at `now`, without ending an expired kick
    /// (monitors; [`Plb::active`] ends it).
    pub(super) fn kicked(&self, now: Time, t: u32, up: u8) -> bool {
        let ttl = self.kick_ttl[t as usize];
        self.path(t, up).kicked_at.is_some_and(|at| now < at + ttl)
    }

    /// Whether path (`t`, `up`) is in service; a kick older than `kick_ttl` ends here.
    pub fn active(&mut self, now: Time, t: u32, up: u8) -> bool {
        let ttl = self.kick_ttl[t as usize];
        let path = self.path_mut(t, up);
        match path.kicked_at {
            None => true,
            Some(at) if now >= at + ttl => {
                path.kicked_at = None;
                self.counters.expiries += 1;
                true
            }
            Some(_) => false,
        }
    }

    /// Kicks path (`t`, `up`) out (nothing if it is out already).
    pub(super) fn kick_out(&mut self, now: Time, t: u32, up: u8) {
        if self.active(now, t, up) {
            self.path_mut(t, up).kicked_at = Some(now);
            self.counters.kicks += 1;
        }
    }

    /// The budget `t_td` of a packet sent on path (`t`, `up`), nanoseconds: `td_scale` x the
    /// RTT of the best other active path minus this path's, at least 0; the largest a header
    /// holds if no other path is active (waiting is then all there is).
    pub(super) fn budget_ns(&mut self, now: Time, t: u32, up: u8) -> u64 {
        let mine = self.rtt(now, t, up);
        let mut best_other: Option<Time> = None;
        for other in 0..self.n_up() as u8 {
            if other != up && self.active(now, t, other) {
                let rtt = self.rtt(now, t, other);
                best_other = Some(best_other.map_or(rtt, |b| b.min(rtt)));
            }
        }
        match best_other {
            Some(other) => {
                let gap_ns = other.saturating_sub(mine).ps() as f64 / 1_000.0;
                (self.td_scale * gap_ns) as u64
            }
            None => header::BUDGET_MAX_NS,
        }
    }

    /// Algorithm 2 among the candidate uplinks to ToR `t` (all uplinks of a leaf): the
    /// uplink index of the first of these that exists: the active non-congested path with the
    /// least RTT; the active undetermined one with the highest utilization; the active
    /// congested one with the least RTT; the least RTT of all. Ties at random.
    pub(super) fn pick(&mut self, ctx: &mut LbCtx, t: u32, candidates: &[u16]) -> Option<u8> {
        let now = ctx.now;
        // Rank: (rule, key) compared lexicographically, smaller is better.
        let mut best: Option<((u8, i64), u8)> = None;
        let mut ties = 0u32;
        for &port in candidates {
            let up = self.uplink_index[port as usize];
            if up == u8::MAX {
                continue;
            }
            let rtt = self.rtt(now, t, up).ps() as i64;
            let rank = if self.active(now, t, up) {
                match self.class(now, t, up) {
                    Class::NonCongested => (0, rtt),
                    Class::Undetermined => (1, -(self.util_metric(now, t, up) as i64)),
                    Class::Congested => (2, rtt),
                }
            } else {
                (3, rtt)
            };
            match best {
                Some((b, _)) if rank > b => {}
                Some((b, _)) if rank == b => {
                    ties += 1;
                    if ctx.rng.gen_range(0..ties) == 0 {
                        best = Some((rank, up));
                    }
                }
                _ => {
                    best = Some((rank, up));
                    ties = 1;
                }
            }
        }
        best.map(|(_, up)| up)
    }

    /// A returned stamp from ToR `t`: the RTT and utilization sample of my path (`t`,
    /// `echo.up`); a kicked path whose stamp left after the kick is back in service.
    pub(super) fn sample(&mut self, now: Time, t: u32, echo: Echo) {
        let rtt = header::CLOCK
            .since(now, echo.stamp.ts)
            .max(Time::from_ps(1));
        let sent = now.saturating_sub(rtt);
        self.counters.samples += 1;
        self.sent.answered(t, echo.up, sent);
        let path = self.path_mut(t, echo.up);
        path.sample = Some((rtt, echo.stamp.ce));
        path.sample_sent = sent;
        path.sampled_at = now;
        if path.kicked_at.is_some_and(|at| sent > at) {
            path.kicked_at = None;
            self.counters.readmissions += 1;
        }
    }

    /// Sets path (`t`, `up`)'s sample as if its stamp had come back at `now` (unit tests).
    #[cfg(test)]
    pub(super) fn set_sample(&mut self, now: Time, t: u32, up: u8, rtt: Time, ce: u8) {
        let path = self.path_mut(t, up);
        path.sample = Some((rtt, ce));
        path.sample_sent = now.saturating_sub(rtt);
        path.sampled_at = now;
    }
}
