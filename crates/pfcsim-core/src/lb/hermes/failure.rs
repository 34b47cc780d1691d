//! Failure detection: retransmission timeouts and losses (NACK holes, unanswered probes) are
//! counted per path over the fail windows; a path with `fail_timeouts` timeouts, or with
//! `fail_losses` losses that are also `fail_loss_fraction` of its packets while it is not
//! congested, fails for `fail_hold`.

use super::Hermes;
use crate::lb::host::FlowInfo;
use crate::units::Time;

impl Hermes {
    /// A NACK of `flow` (of host `h`, towards ToR `b`) at `now`: a loss of the path that last
    /// carried the missing byte, counted once per hole, unless it is the reordering of the
    /// flow's last move.
    pub(super) fn nack_loss(&mut self, h: u32, b: u32, flow: &FlowInfo, now: Time) {
        let fs = &mut self.flows[flow.id as usize];
        if flow.snd_una == fs.last_loss {
            return;
        }
        fs.last_loss = flow.snd_una;
        // Within the reorder window after a move, a hole is the old path's packets still
        // on their way behind the new path's (and, once go-back-N has resent them on the
        // new path, the new path's copies the receiver discarded meanwhile): reordering
        // caused by the move, whatever byte it is at. Later, a loss of the path that last
        // carried the missing byte.
        if now >= fs.reordering_until {
            let i = if flow.snd_una >= fs.from_seq {
                fs.cur
            } else {
                fs.prev
            };
            let e = self.entry(h, b, i);
            self.record_loss(e, now);
        }
    }

    /// Counts a loss on entry `e` at `now`.
    pub(super) fn record_loss(&mut self, e: usize, now: Time) {
        self.stats[e].age(now, &self.cfg);
        self.stats[e].losses[0] += 1;
        self.check_failed(e, now);
    }

    /// Counts a retransmission timeout on entry `e` at `now`.
    pub(super) fn record_timeout(&mut self, e: usize, now: Time) {
        self.stats[e].age(now, &self.cfg);
        self.stats[e].timeouts[0] += 1;
        self.check_failed(e, now);
    }

    /// Marks entry `e` failed if its timeouts or losses say so.
    fn check_failed(&mut self, e: usize, now: Time) {
        let cfg = &self.cfg;
        let s = &mut self.stats[e];
        let timeouts = s.timeouts[0] + s.timeouts[1];
        let losses = s.losses[0] + s.losses[1];
        let sent = (s.sent[0] + s.sent[1]).max(1);
        let congested = s.ecn(cfg).is_some_and(|f| f >= cfg.ecn_threshold);
        let lossy = losses >= cfg.fail_losses
            && losses as f64 >= cfg.fail_loss_fraction * sent as f64
            && !congested;
        if timeouts >= cfg.fail_timeouts || lossy {
            s.failed_until = now + cfg.fail_hold;
            s.sent = [0; 2];
            s.losses = [0; 2];
            s.timeouts = [0; 2];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::hermes::tests::{flow, hermes, US};
    use crate::lb::hermes::{HermesConfig, PathClass};
    use crate::lb::host::{AckEcho, HostScheme, TestHost};

    #[test]
    fn timeouts_move_the_flow_and_fail_the_path() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 4);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let first = h.path_tag(&mut host.ctx(0), &f, 0, 1000);
        let i = (first - 1) as u16;
        let f = FlowInfo {
            snd_una: 0,
            high_sent: 50_000,
            ..f
        };
        h.on_timeout(&mut host.ctx(4_000 * US), &f);
        assert_eq!(h.class(0, 1, i, Time::from_ns(4_000 * US)), PathClass::Bad);
        let second = h.path_tag(&mut host.ctx(4_000 * US), &f, 0, 1000);
        assert_ne!(second, first, "a timeout moves the flow at once");
        // A second timeout on the same path (another flow) fails it.
        let g = flow(1, 0);
        h.on_flow_start(&mut host.ctx(4_001 * US), &g);
        h.flows[1].cur = i; // as if it had been there
        h.on_timeout(
            &mut host.ctx(4_002 * US),
            &FlowInfo {
                high_sent: 1000,
                snd_una: 0,
                ..g
            },
        );
        assert_eq!(
            h.class(0, 1, i, Time::from_ns(4_002 * US)),
            PathClass::Failed
        );
        for id in 2..4 {
            let f = flow(id, 0);
            h.on_flow_start(&mut host.ctx(4_003 * US), &f);
            assert_ne!(h.path_tag(&mut host.ctx(4_003 * US), &f, 0, 1000), first);
        }
        // Failure lasts `fail_hold`, then the path is tried again (not sticky).
        let later = Time::from_ns(4_002 * US) + cfg.fail_hold;
        assert_ne!(h.class(0, 1, i, later), PathClass::Failed);
    }

    /// A NACK of flow 0 at `t_ns` for the hole at `una`, made by a packet on `tag`.
    fn nack(h: &mut Hermes, host: &mut TestHost, t_ns: u64, una: u64, tag: u32) {
        let f = FlowInfo {
            snd_una: una,
            high_sent: 200_000,
            ..flow(0, 0)
        };
        let echo = AckEcho {
            nack: true,
            path_tag: tag,
            ce: false,
            rtt: Time::from_us(9),
            newly_acked: 0,
        };
        h.on_ack(&mut host.ctx(t_ns), &f, &echo);
    }

    /// Flow 0 sends 100 packets on its first path, times out at 4 ms and moves at byte
    /// 100,000. Gives Hermes, the host, the first and the second path index.
    fn moved_flow() -> (Hermes, TestHost, u16, u16) {
        let mut host = TestHost::new(4);
        let mut h = hermes(&host, &HermesConfig::default(), 1);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let first = h.path_tag(&mut host.ctx(0), &f, 0, 1000);
        for k in 1..100 {
            h.path_tag(&mut host.ctx(k), &flow(0, k * 1000), k * 1000, 1000);
        }
        let sent = flow(0, 100_000);
        h.on_timeout(&mut host.ctx(4_000 * US), &FlowInfo { snd_una: 0, ..sent });
        let second = h.path_tag(&mut host.ctx(4_000 * US), &sent, 100_000, 1000);
        assert_ne!(first, second);
        (h, host, (first - 1) as u16, (second - 1) as u16)
    }

    #[test]
    fn losses_fail_a_path_but_reordering_after_a_move_does_not() {
        let (mut h, mut host, i, j) = moved_flow();
        let t = 4_000 * US;
        let (tag_i, tag_j) = (i as u32 + 1, j as u32 + 1);
        // The old path's packets arrive behind the new path's: holes below the move.
        nack(&mut h, &mut host, t + 20 * US, 40_000, tag_j);
        // Go-back-N resends from byte 40,000 on the new path; new-path copies the receiver
        // discarded meanwhile leave holes above the move too, still within the window.
        for k in 0..50 {
            let seq = 40_000 + k * 1000;
            h.path_tag(&mut host.ctx(t + 30 * US + k), &flow(0, 100_000), seq, 1000);
        }
        for (k, una) in [100_000, 110_000, 120_000, 130_000].into_iter().enumerate() {
            nack(&mut h, &mut host, t + 100 * US + k as u64, una, tag_j);
        }
        let now = Time::from_ns(t + 200 * US);
        assert_eq!(
            h.class(0, 1, j, now),
            PathClass::Good,
            "reordering, not loss"
        );
        assert_eq!(h.class(0, 1, i, now), PathClass::Bad, "the timeout");
        // After the reorder window holes are losses of the path that last carried the byte,
        // the same hole once: three in 50 packets fail the new path.
        let later = t + 1_100 * US;
        for una in [140_000, 140_000, 150_000] {
            nack(&mut h, &mut host, later, una, tag_j);
        }
        assert_ne!(h.class(0, 1, j, Time::from_ns(later)), PathClass::Failed);
        nack(&mut h, &mut host, later, 160_000, tag_j);
        assert_eq!(h.class(0, 1, j, Time::from_ns(later)), PathClass::Failed);
        assert_ne!(h.class(0, 1, i, Time::from_ns(later)), PathClass::Failed);

        // Holes below the move (no go-back-N since), after the window: the old path's.
        let (mut h, mut host, i, j) = moved_flow();
        let later = 4_000 * US + 1_100 * US;
        for una in [10_000, 20_000, 30_000] {
            nack(&mut h, &mut host, later, una, tag_i);
        }
        let now = Time::from_ns(later);
        assert_eq!(h.class(0, 1, i, now), PathClass::Failed);
        assert_ne!(h.class(0, 1, j, now), PathClass::Failed);
    }
}
