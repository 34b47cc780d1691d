//! Rerouting: the per-flow sender state ([`FlowState`]), the per-packet decision to move a
//! flow (at once off a failed path or after a timeout; cautiously off a bad one), the choice of
//! a path (`choose`) and the move itself (`assign`), the flow's rate, and the index of the
//! path an echoed tag names (`index_of`, the flow's two paths first).

use super::paths::PathClass;
use super::Hermes;
use crate::lb::host::{FlowInfo, HostCtx};
use crate::units::Time;
use rand::Rng as _;

/// Sender state of one flow.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FlowState {
    /// Flows between two ToRs with more than one path are steered.
    pub(super) active: bool,
    /// Path index now, and before the last move.
    pub(super) cur: u16,
    pub(super) prev: u16,
    /// Bytes from here on were last sent on `cur` (go-back-N resends from the hole on).
    pub(super) from_seq: u64,
    /// `high_sent` when the flow moved to `cur`.
    pub(super) sent_base: u64,
    pub(super) last_try: Time,
    /// Rate window: start, bytes acknowledged in it, rate of the previous window (B/s, < 0:
    /// none yet).
    pub(super) win_start: Time,
    pub(super) win_bytes: u64,
    pub(super) rate: f64,
    /// `snd_una` of the last NACK seen (one loss per hole).
    pub(super) last_loss: u64,
    /// NACKs before this time are taken for the reordering of the flow's last move.
    pub(super) reordering_until: Time,
    /// The retransmission timer fired: choose again at the next packet.
    pub(super) repick: bool,
}

impl FlowState {
    /// Counts `bytes` newly acknowledged at `now` in the rate window; a window at least
    /// `window` long closes first and gives the rate.
    pub(super) fn count_acked(&mut self, now: Time, window: Time, bytes: u64) {
        let elapsed = now.saturating_sub(self.win_start);
        if elapsed >= window {
            self.rate = self.win_bytes as f64 / elapsed.as_secs_f64();
            self.win_start = now;
            self.win_bytes = 0;
        }
        self.win_bytes += bytes;
    }
}

impl Hermes {
    /// The path tag of `flow`'s packet at byte `seq`, after moving the flow if it must (its
    /// path failed, or its retransmission timer fired: to any path that has not failed) or
    /// may (its path is bad, it has sent at least S there and runs below R: only to a notably
    /// better path, at most one attempt per `reroute_interval`).
    #[inline]
    pub(super) fn steer(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, seq: u64) -> u32 {
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        let f = self.flows[flow.id as usize];
        if !f.active {
            return paths[0];
        }
        let n = paths.len() as u16;
        let now = ctx.now;
        let (h, b) = (self.host(flow.src), ctx.fabric.tor(flow.dst));
        if seq < f.from_seq {
            self.flows[flow.id as usize].from_seq = seq;
        }
        let cur = self.view(h, b, f.cur, now);
        let forced = f.repick || cur.class == PathClass::Failed;
        if forced {
            self.flows[flow.id as usize].repick = false;
            if let Some(to) = self.choose(ctx, h, b, n, Some(f.cur), true) {
                self.assign(h, b, flow, to, seq, now);
            }
        } else if self.cfg.reroute
            && cur.class == PathClass::Bad
            && now >= f.last_try + self.cfg.reroute_interval
        {
            self.flows[flow.id as usize].last_try = now;
            let sent = flow.high_sent.saturating_sub(f.sent_base);
            let th = *self.th(self.host_tor[h as usize], b);
            if sent >= self.cfg.reroute_min_sent.0
                && Self::rate(&f, now, self.cfg.rate_window) < th.max_rate
            {
                if let Some(to) = self.choose(ctx, h, b, n, Some(f.cur), false) {
                    self.assign(h, b, flow, to, seq, now);
                }
            }
        }
        let cur = self.flows[flow.id as usize].cur;
        let e = self.entry(h, b, cur);
        self.stats[e].sent[0] += 1; // aged by `view` above
        ctx.fabric.paths(flow.src, flow.dst)[cur as usize]
    }

    /// Host `h`'s choice among its `n` paths to ToR `b`, other than `current`: a good path
    /// with the fewest flows, else a notably better gray or bad one with the lowest RTT; if
    /// `any` (a new flow, or a forced move), else a random path that has not failed; a new
    /// flow (no `current`) whose every path has failed takes a random one, a forced move
    /// finds nothing (moving from one failed path to another gains nothing and reorders).
    pub(super) fn choose(
        &mut self,
        ctx: &mut HostCtx,
        h: u32,
        b: u32,
        n: u16,
        current: Option<u16>,
        any: bool,
    ) -> Option<u16> {
        let now = ctx.now;
        let a = self.host_tor[h as usize];
        let th = *self.th(a, b);
        let cur = current.map(|c| self.view(h, b, c, now));
        // Best candidate per class: (index, key, ties seen).
        let mut good: Option<(u16, u32, u32)> = None;
        let mut other: Option<(u16, (PathClass, Time, u32), u32)> = None;
        let mut usable = 0u32; // paths that have not failed, for the random fallback
        for i in 0..n {
            if Some(i) == current {
                continue;
            }
            let v = self.view(h, b, i, now);
            if v.class == PathClass::Failed {
                continue;
            }
            usable += 1;
            if v.class == PathClass::Good {
                pick_min(&mut good, i, v.flows, ctx);
            } else if cur
                .as_ref()
                .is_none_or(|c| v.better_than(c, &th, &self.cfg))
            {
                pick_min(&mut other, i, (v.class, v.rtt, v.flows), ctx);
            }
        }
        if let Some((i, _, _)) = good {
            return Some(i);
        }
        if let Some((i, _, _)) = other {
            return Some(i);
        }
        if !any {
            return None;
        }
        let others = n - current.is_some() as u16;
        if others == 0 || (usable == 0 && current.is_some()) {
            return None;
        }
        // Random among the paths that have not failed, or among all if every one has.
        let pool = if usable > 0 { usable } else { others as u32 };
        let mut k = ctx.rng.gen_range(0..pool);
        for i in 0..n {
            if Some(i) == current {
                continue;
            }
            if usable > 0 && self.view(h, b, i, now).class == PathClass::Failed {
                continue;
            }
            if k == 0 {
                return Some(i);
            }
            k -= 1;
        }
        unreachable!("k < pool")
    }

    /// Puts `flow` of host `h` on path `to` (towards ToR `b`), from byte `seq` on.
    pub(super) fn assign(&mut self, h: u32, b: u32, flow: &FlowInfo, to: u16, seq: u64, now: Time) {
        let (id, high_sent) = (flow.id, flow.high_sent);
        let f = self.flows[id as usize];
        if f.active {
            let e = self.entry(h, b, f.cur);
            self.stats[e].flows -= 1;
        }
        let e = self.entry(h, b, to);
        self.stats[e].flows += 1;
        let f = &mut self.flows[id as usize];
        if f.active {
            f.reordering_until = now + self.cfg.reorder_window;
        }
        f.prev = if f.active { f.cur } else { to };
        f.cur = to;
        f.from_seq = seq;
        f.sent_base = high_sent;
        f.last_try = now;
        f.active = true;
    }

    /// The flow's rate in bytes per second at `now`.
    fn rate(f: &FlowState, now: Time, window: Time) -> f64 {
        let elapsed = now.saturating_sub(f.win_start);
        if elapsed >= window || f.rate < 0.0 {
            if elapsed == Time::ZERO {
                0.0
            } else {
                f.win_bytes as f64 / elapsed.as_secs_f64()
            }
        } else {
            f.rate
        }
    }

    /// The path index flow `id` is on.
    pub fn flow_path(&self, id: u32) -> u16 {
        self.flows[id as usize].cur
    }

    /// Index of `tag` among `paths`, trying the flow's two paths first.
    pub(super) fn index_of(paths: &[u32], tag: u32, f: &FlowState) -> Option<u16> {
        if paths.get(f.cur as usize) == Some(&tag) {
            return Some(f.cur);
        }
        if paths.get(f.prev as usize) == Some(&tag) {
            return Some(f.prev);
        }
        paths.iter().position(|&t| t == tag).map(|i| i as u16)
    }
}

/// Keeps the candidate with the smallest key in `best`, breaking ties uniformly at random.
#[inline]
fn pick_min<K: PartialOrd + Copy>(
    best: &mut Option<(u16, K, u32)>,
    i: u16,
    key: K,
    ctx: &mut HostCtx,
) {
    match best {
        None => *best = Some((i, key, 1)),
        Some((bi, bk, ties)) => {
            if key < *bk {
                *best = Some((i, key, 1));
            } else if key == *bk {
                *ties += 1;
                if ctx.rng.gen_range(0..*ties) == 0 {
                    *bi = i;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::hermes::tests::{flow, hermes, probe_replies, US};
    use crate::lb::hermes::{HermesConfig, RttThreshold};
    use crate::lb::host::{AckEcho, HostScheme, TestHost};

    #[allow(clippy::too_many_arguments)]
    fn ack(
        h: &mut Hermes,
        host: &mut TestHost,
        t_ns: u64,
        f: &FlowInfo,
        tag: u32,
        rtt_us: u64,
        ce: bool,
        acked: u64,
    ) {
        let echo = AckEcho {
            nack: false,
            path_tag: tag,
            ce,
            rtt: Time::from_us(rtt_us),
            newly_acked: acked,
        };
        h.on_ack(&mut host.ctx(t_ns), f, &echo);
    }

    #[test]
    fn new_flows_take_good_paths_then_gray_then_bad() {
        let mut host = TestHost::new(4);
        let mut h = hermes(&host, &HermesConfig::default(), 8);
        // Path 1 bad, path 2 gray, paths 3 and 4 good.
        probe_replies(&mut h, &mut host, 0, 1, 30, true, 20);
        probe_replies(&mut h, &mut host, 100, 2, 15, false, 20);
        probe_replies(&mut h, &mut host, 200, 3, 9, false, 20);
        probe_replies(&mut h, &mut host, 300, 4, 9, false, 20);
        let class: Vec<_> = (0..4)
            .map(|i| h.class(0, 1, i, Time::from_ns(400)))
            .collect();
        assert_eq!(
            class,
            [
                PathClass::Bad,
                PathClass::Gray,
                PathClass::Good,
                PathClass::Good
            ]
        );
        // Good paths, fewest flows first: the first two flows split over 3 and 4.
        let mut tags = Vec::new();
        for id in 0..4 {
            let f = flow(id, 0);
            h.on_flow_start(&mut host.ctx(400), &f);
            tags.push(h.path_tag(&mut host.ctx(400), &f, 0, 1000));
        }
        assert!(tags.iter().all(|&t| t == 3 || t == 4), "{tags:?}");
        assert_eq!(tags.iter().filter(|&&t| t == 3).count(), 2, "{tags:?}");
        // No good path left (3 and 4 turn bad): gray beats bad.
        probe_replies(&mut h, &mut host, 500, 3, 40, true, 20);
        probe_replies(&mut h, &mut host, 600, 4, 40, true, 20);
        let f = flow(4, 0);
        h.on_flow_start(&mut host.ctx(700), &f);
        assert_eq!(h.path_tag(&mut host.ctx(700), &f, 0, 1000), 2);
    }

    /// Flow 0 on path 1 (the only good path at its start); then path 1 turns bad and path 2
    /// good. `sent` bytes sent so far; `acked` acknowledged over the last rate window.
    fn on_bad_path(cfg: &HermesConfig, sent: u64, acked: u64) -> u32 {
        let mut host = TestHost::new(4);
        let mut h = hermes(&host, cfg, 1);
        probe_replies(&mut h, &mut host, 0, 1, 9, false, 20);
        for tag in 2..=4 {
            probe_replies(&mut h, &mut host, 0, tag, 30, true, 20);
        }
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(100), &f);
        assert_eq!(h.path_tag(&mut host.ctx(100), &f, 0, 1000), 1);
        // 2 ms later (older samples expired): path 1 is bad, path 2 good, 3 and 4 unknown.
        let t = 2_000 * US;
        let f = flow(0, sent);
        ack(&mut h, &mut host, t, &f, 1, 30, true, 0);
        for k in 1..20 {
            ack(&mut h, &mut host, t + k, &f, 1, 30, true, 0);
        }
        probe_replies(&mut h, &mut host, t + 100, 2, 9, false, 20);
        ack(&mut h, &mut host, t + 25 * US, &f, 1, 30, true, acked);
        ack(&mut h, &mut host, t + 50 * US, &f, 1, 30, true, 0); // closes the window
        assert_eq!(h.class(0, 1, 0, Time::from_ns(t + 50 * US)), PathClass::Bad);
        h.path_tag(&mut host.ctx(t + 50 * US), &f, sent, 1000)
    }

    #[test]
    fn only_large_slow_flows_move_off_a_bad_path() {
        let cfg = HermesConfig::default();
        // Rate window 20 us: 250 KB in 25 us is 80 Gbps, 25 KB is 8 Gbps (R: 30 Gbps).
        assert_eq!(
            on_bad_path(&cfg, 1_000_000, 25_000),
            2,
            "large and slow: moves"
        );
        assert_eq!(
            on_bad_path(&cfg, 1_000_000, 250_000),
            1,
            "large and fast: stays"
        );
        assert_eq!(
            on_bad_path(&cfg, 100_000, 25_000),
            1,
            "sent less than S: stays"
        );
        let off = HermesConfig {
            reroute: false,
            ..Default::default()
        };
        assert_eq!(on_bad_path(&off, 1_000_000, 25_000), 1);
        // Only to a notably better path: with Δ_RTT above 30 - 9 us, path 2 is not.
        let picky = HermesConfig {
            rtt_better: RttThreshold::Fixed(Time::from_us(25)),
            ..Default::default()
        };
        assert_eq!(
            on_bad_path(&picky, 1_000_000, 25_000),
            2,
            "good paths need no margin"
        );
    }

    #[test]
    fn a_gray_candidate_must_be_notably_better() {
        // Path 1 bad at 30 us; the only alternative is gray (ECN-marked) at `alt` us.
        let run = |alt: u64| {
            let mut host = TestHost::new(2);
            let mut h = hermes(&host, &HermesConfig::default(), 1);
            probe_replies(&mut h, &mut host, 0, 1, 9, false, 20);
            probe_replies(&mut h, &mut host, 0, 2, 30, true, 20);
            let f = flow(0, 0);
            h.on_flow_start(&mut host.ctx(100), &f);
            let t = 2_000 * US;
            let f = flow(0, 1_000_000);
            for k in 0..20 {
                ack(&mut h, &mut host, t + k, &f, 1, 30, true, 0);
            }
            probe_replies(&mut h, &mut host, t + 100, 2, alt, true, 1);
            for k in 0..20 {
                probe_replies(&mut h, &mut host, t + 200 + k, 2, alt, false, 1);
            }
            ack(&mut h, &mut host, t + 50 * US, &f, 1, 30, true, 0);
            assert_eq!(
                h.class(0, 1, 1, Time::from_ns(t + 50 * US)),
                PathClass::Gray
            );
            h.path_tag(&mut host.ctx(t + 50 * US), &f, 1_000_000, 1000)
        };
        assert_eq!(run(12), 2, "18 us faster than the bad path (Δ 10 us)");
        assert_eq!(run(21), 1, "9 us faster: not worth it");
    }

    #[test]
    fn a_forced_move_never_goes_to_another_failed_path() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 2);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let first = h.path_tag(&mut host.ctx(0), &f, 0, 1000);
        // Every path has failed: the flow stays where it is rather than hopping between
        // failed paths packet by packet.
        let until = Time::from_ms(5);
        for i in 0..4 {
            let e = h.entry(0, 1, i);
            h.stats[e].failed_until = until;
        }
        for k in 1..20 {
            let tag = h.path_tag(&mut host.ctx(k * US), &flow(0, k * 1000), k * 1000, 1000);
            assert_eq!(tag, first, "packet {k}");
        }
        // A new flow still gets a path.
        let g = flow(1, 0);
        h.on_flow_start(&mut host.ctx(30 * US), &g);
        assert!((1..=4).contains(&h.path_tag(&mut host.ctx(30 * US), &g, 0, 1000)));
        // One path back: the flow moves there at once.
        let back = (first % 4) as u16; // index of the next path
        let e = h.entry(0, 1, back);
        h.stats[e].failed_until = Time::ZERO;
        let tag = h.path_tag(&mut host.ctx(40 * US), &flow(0, 20_000), 20_000, 1000);
        assert_eq!(tag, back as u32 + 1);
    }
}
