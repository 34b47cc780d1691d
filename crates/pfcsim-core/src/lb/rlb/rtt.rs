//! Path RTTs (section V), at ToRs, per (destination ToR, uplink): timestamps piggybacked on
//! packets ([`Stamps`], the default; the bookkeeping is [`crate::lb::stamps`]'s) or probes and
//! their echoes.

use super::{Rlb, MSG_ECHO, MSG_PROBE};
use crate::lb::stamps::StampClock;
use crate::lb::{LbCtx, RoutedMessage, NO_TOR};
use crate::packet::{LbHeader, Packet};
use crate::units::Time;

/// Timestamps: nanoseconds, 22 bits (wrap after 4.19 ms, far above any RTT).
const TS_BITS: u32 = 22;
pub(super) const CLOCK: StampClock = StampClock::new(1_000, TS_BITS);
/// A piggybacked timestamp (half of [`Stamps`]): bit 31 set, the source leaf's uplink index in
/// bits 22..30, the send time in bits 0..22.
const STAMP_VALID: u32 = 1 << 31;

/// RLB's scheme word on a packet ([`Capabilities::scheme_word`]): the timestamps it carries
/// (0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamps {
    /// A timestamp on its way from the source leaf to the destination leaf.
    pub stamp: u32,
    /// A timestamp on its way back, piggybacked by the destination leaf.
    pub echo: u32,
}

impl Stamps {
    /// The timestamps a scheme word carries.
    pub fn of(word: u64) -> Stamps {
        Stamps {
            stamp: word as u32,
            echo: (word >> 32) as u32,
        }
    }

    /// The scheme word carrying these timestamps.
    pub fn word(self) -> u64 {
        self.stamp as u64 | (self.echo as u64) << 32
    }
}

/// The timestamp of uplink `up` taken at `now`.
#[inline]
fn stamp_word(up: u8, now: Time) -> u32 {
    STAMP_VALID | (up as u32) << TS_BITS | CLOCK.read(now)
}

/// The uplink index a timestamp names.
#[inline]
fn stamp_uplink(word: u32) -> usize {
    (word >> TS_BITS & 0xff) as usize
}

impl Rlb {
    /// Piggyback, at a leaf's uplink `port`: a data packet to another ToR carries a timestamp
    /// of its path if one is due (at most one per `rtt_period` per (destination ToR,
    /// uplink)); any packet to another ToR carries back the oldest timestamp held for it.
    #[inline]
    pub(super) fn piggyback_out(&mut self, now: Time, port: u16, pkt: &Packet, word: &mut u64) {
        let up = self.uplink_index[port as usize];
        if up == u8::MAX {
            return;
        }
        let Some(t) = self.dst_tor(pkt) else { return };
        let mut carried = Stamps::of(*word);
        if pkt.kind == crate::packet::PacketKind::Data
            && carried.stamp == 0
            && self.sent.take_due(t, up, now, self.rtt_period[t as usize])
        {
            carried.stamp = stamp_word(up, now);
            self.counters.stamps += 1;
        }
        if carried.echo == 0 {
            if let Some((_, held)) = self.held.take_oldest(t, now, CLOCK.stale()) {
                carried.echo = held;
            }
        }
        *word = carried.word();
    }

    /// Piggyback: a packet carrying a timestamp arrived. At the destination leaf (the
    /// packet's destination host is one of this ToR's) a forward timestamp is held for the
    /// way back (a newer one of the same path replaces it); at the source leaf a returned
    /// one gives the path's RTT: arrival time - send time. Both are cleared from the header.
    pub(super) fn piggyback_in(&mut self, ctx: &mut LbCtx, pkt: &Packet, word: &mut u64) {
        let Some(me) = self.my_tor else { return };
        if !self.piggyback || self.tor_of[pkt.dst as usize] != me {
            return;
        }
        let from = self.tor_of[pkt.src as usize];
        let Stamps { stamp, echo } = Stamps::of(std::mem::take(word));
        if from == NO_TOR || from == me {
            return;
        }
        if stamp != 0 {
            self.held.hold(from, stamp_uplink(stamp), stamp, ctx.now);
        }
        let up = stamp_uplink(echo);
        if echo != 0 && up < self.n_up {
            let rtt = CLOCK.since(ctx.now, echo).max(Time::from_ns(1));
            self.record_rtt(from as usize * self.n_up + up, rtt);
            self.sent
                .answered_any(from, up as u8, ctx.now.saturating_sub(rtt));
            self.counters.stamp_returns += 1;
        }
    }

    /// Folds a new sample into a path's RTT (entry `i` of `rtt_samples`): the first sample
    /// stands alone, later ones are weighted by `rtt_gain` (an EWMA, as Hermes's code smooths
    /// its path RTTs).
    fn record_rtt(&mut self, i: usize, sample: Time) {
        let old = self.rtt_samples[i];
        self.rtt_samples[i] = if old == Time::ZERO || self.rtt_gain >= 1.0 {
            sample
        } else {
            let g = self.rtt_gain;
            let ps = (1.0 - g) * old.ps() as f64 + g * sample.ps() as f64;
            Time::from_ps((ps.round() as u64).max(1))
        };
    }

    /// The measured RTT of egress `port` towards ToR `dst_tor` (0 where none is measured:
    /// upper tiers, intra-ToR traffic, ports that are not uplinks).
    pub fn rtt(&self, now: Time, dst_tor: Option<u32>, port: u16) -> Time {
        let (Some(t), up) = (dst_tor, self.uplink_index[port as usize]) else {
            return Time::ZERO;
        };
        if up == u8::MAX {
            return Time::ZERO;
        }
        let sample = match self.rtt_samples[t as usize * self.n_up + up as usize] {
            Time::ZERO => self.base_rtt[t as usize],
            sample => sample,
        };
        // Piggybacked: silence is evidence only once a timestamp sent later, on another path
        // to that ToR, came back (a path without traffic back must not look slow).
        let unanswered = if self.piggyback {
            self.sent.overdue_since(t, up)
        } else {
            self.sent.unanswered_since(t, up)
        };
        match unanswered {
            Some(since) => sample.max(now.saturating_sub(since)),
            None => sample,
        }
    }

    /// The (smoothed) RTT sample of egress `port` towards ToR `dst_tor` (`None`: not measured
    /// yet, or not an uplink of a ToR).
    pub fn measured_rtt(&self, dst_tor: u32, port: u16) -> Option<Time> {
        let up = *self.uplink_index.get(port as usize)?;
        if up == u8::MAX {
            return None;
        }
        let sample = *self
            .rtt_samples
            .get(dst_tor as usize * self.n_up + up as usize)?;
        (sample > Time::ZERO).then_some(sample)
    }

    /// Sets a measured RTT sample (unit tests).
    #[cfg(test)]
    pub(super) fn set_rtt(&mut self, dst_tor: u32, port: u16, rtt: Time) {
        let up = self.uplink_index[port as usize];
        self.rtt_samples[dst_tor as usize * self.n_up + up as usize] = rtt;
        self.sent.set_answered(dst_tor, up, Time::ZERO);
    }

    /// The destination ToR of a packet from another ToR's point of view (`None` for
    /// intra-ToR packets and at switches that are not ToRs).
    #[inline]
    pub(super) fn dst_tor(&self, pkt: &Packet) -> Option<u32> {
        let me = self.my_tor?;
        let t = self.tor_of[pkt.dst as usize];
        (t != me && t != NO_TOR).then_some(t)
    }

    /// Sends an RTT probe for `pkt` out of uplink `port` if the path's period has passed.
    /// Nothing in piggyback mode (timestamps are written at the uplink's dequeue).
    pub(super) fn maybe_probe(
        &mut self,
        ctx: &mut LbCtx,
        pkt: &Packet,
        dst_tor: Option<u32>,
        port: u16,
    ) {
        let Some(t) = dst_tor.filter(|_| !self.piggyback) else {
            return;
        };
        let up = self.uplink_index[port as usize];
        if up == u8::MAX {
            return;
        }
        if !self
            .sent
            .take_due(t, up, ctx.now, self.rtt_period[t as usize])
        {
            return;
        }
        self.counters.probes += 1;
        let ts = CLOCK.read(ctx.now);
        ctx.send_routed(RoutedMessage {
            via: Some(port),
            src: pkt.src,
            to_host: pkt.dst,
            sport: pkt.sport,
            dport: pkt.dport,
            priority: pkt.priority,
            header: LbHeader {
                path_tag: pkt.src,
                meta: MSG_PROBE | (up as u32) << 2 | ts << 10,
            },
        });
    }

    /// A probe arrived at its destination ToR: echoed to the probe's source host (strict
    /// priority, ECMP back), the source uplink and timestamp kept.
    pub(super) fn echo_probe(&mut self, ctx: &mut LbCtx, header: &LbHeader) {
        let meta = header.meta;
        let Some(me) = self.my_tor else { return };
        ctx.send_routed(RoutedMessage {
            via: None,
            src: ctx.node,
            to_host: header.path_tag,
            sport: (meta >> 2 & 0xff) as u16,
            dport: me as u16,
            priority: 0,
            header: LbHeader {
                path_tag: me,
                meta: MSG_ECHO | (meta & !3),
            },
        });
    }

    /// An echo came back to the source ToR: the RTT sample of its (destination ToR, uplink).
    pub(super) fn on_echo(&mut self, now: Time, header: &LbHeader) {
        let meta = header.meta;
        let (tor, up) = (header.path_tag as usize, (meta >> 2 & 0xff) as usize);
        if self.n_up == 0 || up >= self.n_up || tor * self.n_up >= self.rtt_samples.len() {
            return;
        }
        let rtt = CLOCK
            .since(now, meta >> 10 & CLOCK.mask())
            .max(Time::from_ns(1));
        self.record_rtt(tor * self.n_up + up, rtt);
        self.sent
            .answered_any(tor as u32, up as u8, now.saturating_sub(rtt));
        self.counters.echoes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::rlb::tests::{data, ecmp_inner, leaf, switch};
    use crate::lb::rlb::{RlbConfig, RttMeasurement};
    use crate::lb::{Layer, LbAction, SwitchScheme, TestSwitch};
    use crate::packet::PacketKind;

    /// RTT probes. Checked to fail with no probe sent, with an unanswered probe's age not
    /// counted, and with echoes ignored.
    #[test]
    fn a_lost_probe_makes_its_path_look_slower_and_an_echo_measures_the_rtt() {
        let probes = RlbConfig {
            rtt_measurement: RttMeasurement::Probe,
            ..ecmp_inner()
        };
        let mut rlb = leaf(&probes);
        let mut sw = switch();
        let pkt = data(2, 0);
        // The base RTT stands in before any sample: 2 hops x 2 us x 2.
        assert_eq!(rlb.rtt(Time::ZERO, Some(1), 3), Time::from_us(8));
        rlb.maybe_probe(&mut sw.ctx(1_000), &pkt, Some(1), 3);
        let probe = match sw.actions.pop() {
            Some(LbAction::SendRouted {
                message:
                    RoutedMessage {
                        via: Some(3),
                        to_host: 2,
                        priority: 3,
                        header,
                        ..
                    },
                layer: Layer::Wrapper,
            }) => header,
            other => panic!("{other:?}"),
        };
        // Unanswered for 20 us: the path's RTT is at least that.
        assert_eq!(rlb.rtt(Time::from_us(21), Some(1), 3), Time::from_us(20));
        // Not due again within the period.
        rlb.maybe_probe(&mut sw.ctx(2_000), &pkt, Some(1), 3);
        assert!(sw.actions.is_empty());
        // The destination ToR (here: another instance) echoes; the echo gives the sample.
        let mut dst = leaf(&probes);
        dst.my_tor = Some(1);
        dst.on_control(&mut sw.ctx(6_000), 2, &probe);
        let echo = match sw.actions.pop() {
            Some(LbAction::SendRouted {
                message:
                    RoutedMessage {
                        to_host: 0,
                        priority: 0,
                        header,
                        ..
                    },
                layer: Layer::Wrapper,
            }) => header,
            other => panic!("{other:?}"),
        };
        rlb.on_control(&mut sw.ctx(12_000), 2, &echo);
        assert_eq!(rlb.rtt(Time::from_us(12), Some(1), 3), Time::from_us(11));
        // Answered: the sample stands until the next one, however old.
        assert_eq!(rlb.rtt(Time::from_us(50), Some(1), 3), Time::from_us(11));
        assert_eq!(rlb.counters.echoes, 1);
        // Ports that are not uplinks and intra-ToR packets have no RTT.
        assert_eq!(rlb.rtt(Time::ZERO, Some(1), 0), Time::ZERO);
        assert_eq!(rlb.rtt(Time::ZERO, None, 3), Time::ZERO);
    }

    fn no_message(sw: &mut TestSwitch) {
        assert!(
            sw.actions
                .drain(..)
                .all(|a| matches!(a, LbAction::SetTimer { .. })),
            "piggybacking sends nothing"
        );
    }

    #[test]
    fn a_timestamp_rides_a_data_packet_out_and_any_packet_back_and_measures_the_rtt() {
        let mut src = leaf(&ecmp_inner());
        let mut dst = leaf(&ecmp_inner());
        dst.my_tor = Some(1);
        let mut sw = switch();
        // A data packet to ToR 1 leaves uplink 3: stamped (the send time), no message sent.
        let mut a = data(2, 0);
        let mut wa = 0u64;
        src.on_dequeue(&mut sw.ctx(1_000), 3, &mut a, &mut wa);
        assert_ne!(Stamps::of(wa).stamp, 0);
        assert_eq!(src.counters.stamps, 1);
        no_message(&mut sw);
        // Not again on that path within the period (one base RTT, 8 us); another path is due.
        let mut b = data(2, 1);
        let mut wb = 0u64;
        src.on_dequeue(&mut sw.ctx(2_000), 3, &mut b, &mut wb);
        assert_eq!(Stamps::of(wb).stamp, 0);
        src.on_dequeue(&mut sw.ctx(2_000), 4, &mut b, &mut wb);
        assert_ne!(Stamps::of(wb).stamp, 0);
        // Not on a host port, not for a local host, not on an ACK.
        let mut c = data(1, 2);
        let mut wc = 0u64;
        src.on_dequeue(&mut sw.ctx(3_000), 5, &mut c, &mut wc);
        let mut d = data(2, 3);
        let mut wd = 0u64;
        src.on_dequeue(&mut sw.ctx(3_000), 0, &mut d, &mut wd);
        let mut ack = Packet::new(PacketKind::Ack);
        let mut wack = 0u64;
        (ack.src, ack.dst) = (0, 2);
        src.on_dequeue(&mut sw.ctx(3_000), 5, &mut ack, &mut wack);
        assert_eq!(
            (
                Stamps::of(wc).stamp,
                Stamps::of(wd).stamp,
                Stamps::of(wack).stamp
            ),
            (0, 0, 0)
        );
        no_message(&mut sw);
        // The destination leaf holds them (b arrives first), clearing the header.
        dst.on_arrival(&mut sw.ctx(5_000), &b, &mut wb);
        dst.on_arrival(&mut sw.ctx(6_000), &a, &mut wa);
        assert_eq!((Stamps::of(wa).stamp, Stamps::of(wb).stamp), (0, 0));
        // Any packet towards ToR 0 takes one back, the longest held first: an ACK on
        // uplink 2 takes b's, a data packet on uplink 5 a's; a third gets nothing.
        let mut back = [Packet::new(PacketKind::Ack), data(0, 9), data(0, 10)];
        let mut wback = [0u64; 3];
        for p in back.iter_mut() {
            (p.src, p.dst) = (2, 0);
        }
        dst.on_dequeue(&mut sw.ctx(7_000), 2, &mut back[0], &mut wback[0]);
        dst.on_dequeue(&mut sw.ctx(7_000), 5, &mut back[1], &mut wback[1]);
        dst.on_dequeue(&mut sw.ctx(7_000), 5, &mut back[2], &mut wback[2]);
        let stamp_of = |up: u32, ns: u32| STAMP_VALID | up << TS_BITS | ns;
        assert_eq!(Stamps::of(wback[0]).echo, stamp_of(2, 2_000));
        assert_eq!(Stamps::of(wback[1]).echo, stamp_of(1, 1_000));
        assert_eq!(Stamps::of(wback[2]).echo, 0);
        no_message(&mut sw);
        // The source leaf: RTT = arrival - send time, per uplink.
        src.on_arrival(&mut sw.ctx(12_000), &back[1], &mut wback[1]);
        src.on_arrival(&mut sw.ctx(13_000), &back[0], &mut wback[0]);
        assert_eq!(Stamps::of(wback[0]).echo, 0);
        assert_eq!(src.measured_rtt(1, 3), Some(Time::from_us(11)));
        assert_eq!(src.measured_rtt(1, 4), Some(Time::from_us(11)));
        assert_eq!(src.measured_rtt(1, 2), None);
        assert_eq!(src.counters.stamp_returns, 2);
        // A timestamp held longer than half the wrap is dropped, not returned.
        let mut e = data(2, 4);
        let mut we = 0u64;
        src.on_dequeue(&mut sw.ctx(20_000), 2, &mut e, &mut we);
        dst.on_arrival(&mut sw.ctx(21_000), &e, &mut we);
        let mut late = data(0, 11);
        let mut wlate = 0u64;
        (late.src, late.dst) = (2, 0);
        dst.on_dequeue(&mut sw.ctx(21_000 + 2_200_000), 2, &mut late, &mut wlate);
        assert_eq!(Stamps::of(wlate).echo, 0);
    }

    /// `rtt_gain`: the first sample of a path stands alone, each later one moves the path's
    /// RTT by `rtt_gain` of the difference (10 us, then a 20 us sample). Fails with samples
    /// stored unsmoothed (the 0.5 and 0.25 cases), with the first sample averaged with the
    /// empty entry, and with the weight applied the wrong way round.
    #[test]
    fn a_path_rtt_is_the_ewma_of_its_samples_weighted_by_rtt_gain() {
        for (gain, expected_ns) in [(0.5, 15_000), (0.25, 12_500), (1.0, 20_000)] {
            let cfg = RlbConfig {
                rtt_gain: gain,
                ..ecmp_inner()
            };
            let mut src = leaf(&cfg);
            let mut sw = switch();
            let mut back = data(0, 0);
            (back.src, back.dst) = (2, 0);
            for (i, (sent, arrived)) in [(1_000u64, 11_000u64), (20_000, 40_000)]
                .into_iter()
                .enumerate()
            {
                let mut w = Stamps {
                    stamp: 0,
                    echo: stamp_word(1, Time::from_ns(sent)),
                }
                .word();
                src.on_arrival(&mut sw.ctx(arrived), &back, &mut w);
                if i == 0 {
                    assert_eq!(src.measured_rtt(1, 3), Some(Time::from_us(10)));
                }
            }
            assert_eq!(
                src.measured_rtt(1, 3),
                Some(Time::from_ns(expected_ns)),
                "rtt_gain = {gain}"
            );
        }
    }

    #[test]
    fn silence_slows_a_path_only_once_later_timestamps_came_back() {
        let mut src = leaf(&ecmp_inner());
        let mut sw = switch();
        let base = Time::from_us(8);
        // Uplink 3 stamped at 1 us, never answered: with nothing back from ToR 1 at all, no
        // evidence: it keeps the base RTT (a path without traffic back must not look slow).
        let mut a = data(2, 0);
        let mut wa = 0u64;
        src.on_dequeue(&mut sw.ctx(1_000), 3, &mut a, &mut wa);
        assert_eq!(src.rtt(Time::from_us(50), Some(1), 3), base);
        // Uplink 4 stamped at 2 us and answered at 12 us: ToR 1 does send packets back, so
        // uplink 3's stamp is overdue: its RTT is at least its age.
        let mut b = data(2, 1);
        let mut wb = 0u64;
        src.on_dequeue(&mut sw.ctx(2_000), 4, &mut b, &mut wb);
        let mut back = data(0, 0);
        (back.src, back.dst) = (2, 0);
        let mut wback = Stamps {
            stamp: 0,
            echo: Stamps::of(wb).stamp,
        }
        .word();
        src.on_arrival(&mut sw.ctx(12_000), &back, &mut wback);
        assert_eq!(src.rtt(Time::from_us(12), Some(1), 4), Time::from_us(10));
        assert_eq!(src.rtt(Time::from_us(50), Some(1), 3), Time::from_us(49));
        // Its own answer clears it.
        let mut back = data(0, 1);
        (back.src, back.dst) = (2, 0);
        let mut wback = Stamps {
            stamp: 0,
            echo: Stamps::of(wa).stamp,
        }
        .word();
        src.on_arrival(&mut sw.ctx(60_000), &back, &mut wback);
        assert_eq!(src.rtt(Time::from_us(70), Some(1), 3), Time::from_us(59));
    }
}
