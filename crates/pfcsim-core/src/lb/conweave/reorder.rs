//! The destination-ToR side of ConWeave: packets of a flow's new path that overtake the old
//! path's last packet (the TAIL) wait in a reorder queue of the egress towards the host until
//! the TAIL arrives or a flush timer predicted from the timestamps expires.
//!
//! Two layers:
//! * [`ReorderQueues`](crate::lb::reorder::ReorderQueues) (`lb/reorder.rs`, shared with
//!   LBoDSN), the reorder queues of one ToR and nothing of ConWeave's protocol, for any scheme
//!   that reorders at the destination ToR (its module doc says how a scheme uses them).
//! * ConWeave's rule on top ([`RxFlow`] per flow, `destination`): INIT and TAIL are answered
//!   (RTT_REPLY, CLEAR) and CE marks reported (NOTIFY); a phase-1 packet of a flow still in
//!   phase 0 is held; the TAIL flushes the flow's queue 1 ns after it, otherwise the queue
//!   flushes when the TAIL is expected (phase-0 arrival time plus the timestamp gap plus
//!   `extra_flush`, or `default_wait` with no phase-0 packet of the epoch seen).

use super::header::{ts_gap, unpack_data, FLAG_INIT, FLAG_TAIL, MSG_CLEAR, MSG_NOTIFY, MSG_REPLY};
use super::ConWeave;
use crate::lb::{Ingress, LbCtx, RoutedMessage};
use crate::packet::{LbHeader, Packet};
use crate::units::Time;

/// Destination-ToR state of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RxFlow {
    key: u32,
    epoch: u8,
    phase: u8,
    phase0_seen: bool,
    phase0_tx: u32,
    phase0_rx: Time,
    tail_ts: u32,
    /// Reorder queue (index into `queues`) while reordering.
    queue: Option<u32>,
}

pub(super) const RX_EMPTY: RxFlow = RxFlow {
    key: 0,
    epoch: 0,
    phase: 0,
    phase0_seen: false,
    phase0_tx: 0,
    phase0_rx: Time::ZERO,
    tail_ts: 0,
    queue: None,
};

impl ConWeave {
    /// Sends a scheme message back to the source ToR of `pkt`.
    fn reply(ctx: &mut LbCtx, pkt: &Packet, tag: u32, meta: u32) {
        ctx.send_routed(RoutedMessage {
            via: None,
            src: ctx.node,
            to_host: pkt.src,
            sport: pkt.dport,
            dport: pkt.sport,
            priority: 0,
            header: LbHeader {
                path_tag: tag,
                meta,
            },
        });
    }

    /// Destination-ToR rule for one stamped data packet towards local egress `out`.
    pub(super) fn destination(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, out: u16) -> Ingress {
        let (flag, phase, epoch, stamp) = unpack_data(pkt.lb.meta);
        if flag == 0 {
            return Ingress::Forward;
        }
        let now = ctx.now;
        let (key, slot) = self.key(pkt);
        let path = (pkt.lb.path_tag & 0xff).saturating_sub(1);
        if pkt.ce() {
            let me = self.my_tor.unwrap_or(0);
            Self::reply(ctx, pkt, key, MSG_NOTIFY | path << 8 | me << 16);
        }
        let ctrl = |kind: u32| kind | (phase as u32) << 2 | (epoch as u32) << 3;
        match flag {
            FLAG_INIT => Self::reply(ctx, pkt, key, ctrl(MSG_REPLY)),
            FLAG_TAIL => Self::reply(ctx, pkt, key, ctrl(MSG_CLEAR)),
            _ => {}
        }
        let mut f = self.rx[slot];
        if f.key != key {
            // A new flow, or another one evicting it (its queue, if any, flushes on its timer).
            f = RxFlow {
                key,
                epoch: epoch.wrapping_sub(1),
                ..RX_EMPTY
            };
        }
        let d = epoch.wrapping_sub(f.epoch) & 3;
        if d >= 2 {
            // Older epoch: pass.
            self.rx[slot] = f;
            return Ingress::Forward;
        }
        if d == 1 {
            if let Some(q) = f.queue.take() {
                self.flush(ctx, q, true);
            }
            f.epoch = epoch;
            f.phase = u8::from(flag == FLAG_TAIL);
            f.phase0_seen = false;
        }
        let verdict = if phase == 0 {
            f.phase0_seen = true;
            f.phase0_tx = stamp;
            f.phase0_rx = now;
            if let Some(q) = f.queue {
                let at = if flag == FLAG_TAIL {
                    now + Time::from_ns(1)
                } else {
                    now + Time::from_ns(ts_gap(f.tail_ts, stamp)) + self.cfg.extra_flush
                };
                self.reorder.arm(ctx, q, at, flag == FLAG_TAIL);
            } else if flag == FLAG_TAIL {
                f.phase = 1;
            }
            Ingress::Forward
        } else if f.phase == 0 {
            // Phase 1 ahead of the TAIL: hold it.
            f.tail_ts = stamp;
            match f.queue {
                Some(q) => {
                    self.counters.held += 1;
                    Ingress::Hold {
                        queue: self.reorder.local(out, q),
                    }
                }
                None => match self.reorder.allocate(out, key, slot as u32) {
                    Some(q) => {
                        f.queue = Some(q);
                        let at = if f.phase0_seen {
                            f.phase0_rx
                                + Time::from_ns(ts_gap(stamp, f.phase0_tx))
                                + self.cfg.extra_flush
                        } else {
                            now + self.cfg.default_wait
                        };
                        self.reorder.arm(ctx, q, at, false);
                        self.counters.held += 1;
                        Ingress::Hold {
                            queue: self.reorder.local(out, q),
                        }
                    }
                    None => {
                        self.counters.queue_fallbacks += 1;
                        Ingress::Forward
                    }
                },
            }
        } else {
            Ingress::Forward
        };
        self.rx[slot] = f;
        verdict
    }

    /// Releases queue `q` to its egress and frees it; the owning flow (if still in the table)
    /// moves to phase 1. `timeout`: flushed by its timer rather than the TAIL.
    pub(super) fn flush(&mut self, ctx: &mut LbCtx, q: u32, timeout: bool) {
        let (owner, owner_key) = self.reorder.release(ctx, q);
        let f = &mut self.rx[owner as usize];
        if f.key == owner_key && f.queue == Some(q) {
            f.queue = None;
            f.phase = 1;
        }
        if timeout {
            self.counters.flushes_on_timeout += 1;
        } else {
            self.counters.flushes_on_tail += 1;
        }
    }

    /// Reorder queues of local port `port` in use now.
    pub fn queues_in_use(&self, port: u16) -> usize {
        self.reorder.in_use(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::conweave::header::{pack_data, FLAG_DATA};
    use crate::lb::conweave::tests::{data, leaf};
    use crate::lb::conweave::ConWeaveConfig;
    use crate::lb::{LbAction, SwitchScheme, TestSwitch};

    #[test]
    fn destination_tor_holds_overtaking_packets_until_the_tail() {
        let cfg = ConWeaveConfig::default();
        let mut cw = ConWeave::new(&cfg, &leaf(1));
        let mut w = TestSwitch::new(20);
        let host_port = [0u16];
        let arrive = |cw: &mut ConWeave, w: &mut TestSwitch, ns: u64, flag, phase, ts| {
            let mut p = data(ns);
            p.lb.path_tag = 1;
            p.lb.meta = pack_data(flag, phase, 1, ts);
            cw.on_ingress(&mut w.ctx(ns), &mut p, &host_port)
        };
        // INIT of epoch 1: passes, answered with an RTT_REPLY to host 0's ToR.
        assert_eq!(
            arrive(&mut cw, &mut w, 5_000, FLAG_INIT, 0, 1_000),
            Ingress::Forward
        );
        assert!(matches!(
            w.actions.pop(),
            Some(LbAction::SendRouted { message, .. })
                if message.to_host == 0 && message.header.meta & 3 == MSG_REPLY
        ));
        // A phase-1 packet overtakes the TAIL: held in a queue, flush timer from timestamps.
        assert!(matches!(
            arrive(&mut cw, &mut w, 6_000, FLAG_DATA, 1, 3_000),
            Ingress::Hold { .. }
        ));
        assert_eq!(cw.counters.held, 1);
        assert_eq!(cw.queues_in_use(0), 1);
        // Expected TAIL arrival: phase-0 RX (5 us) + (3 us - 1 us) + θ_extra (16 us).
        assert!(matches!(
            w.actions.pop(),
            Some(LbAction::SetTimer { at, .. }) if at == Time::from_ns(23_000)
        ));
        // A second one joins the same queue; a phase-0 packet passes.
        assert!(matches!(
            arrive(&mut cw, &mut w, 6_100, FLAG_DATA, 1, 3_000),
            Ingress::Hold { .. }
        ));
        assert_eq!(
            arrive(&mut cw, &mut w, 6_200, FLAG_DATA, 0, 2_000),
            Ingress::Forward
        );
        w.actions.clear();
        // The TAIL passes, answered with CLEAR; the queue flushes 1 ns later.
        assert_eq!(
            arrive(&mut cw, &mut w, 7_000, FLAG_TAIL, 0, 3_000),
            Ingress::Forward
        );
        let timer = w.actions.iter().find_map(|a| match a {
            LbAction::SetTimer { at, token, .. } => Some((*at, *token)),
            _ => None,
        });
        assert!(w.actions.iter().any(
            |a| matches!(a, LbAction::SendRouted { message, .. } if message.header.meta & 3 == MSG_CLEAR)
        ));
        let (at, token) = timer.unwrap();
        assert_eq!(at, Time::from_ns(7_001));
        w.actions.clear();
        cw.on_timer(&mut w.ctx(7_001), token);
        assert!(matches!(w.actions[..], [LbAction::Release { port: 0, .. }]));
        assert_eq!(cw.queues_in_use(0), 0);
        assert_eq!(cw.counters.flushes_on_tail, 1);
        // Stale timers (the earlier prediction) do nothing; later phase-1 packets pass.
        w.actions.clear();
        cw.on_timer(&mut w.ctx(23_000), (token & !0xffff_ffff) | 1);
        assert!(w.actions.is_empty());
        assert_eq!(
            arrive(&mut cw, &mut w, 8_000, FLAG_DATA, 1, 3_000),
            Ingress::Forward
        );
    }
}
