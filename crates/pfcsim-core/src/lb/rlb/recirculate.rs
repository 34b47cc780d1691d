//! Recirculation: t_rc, the limits on recirculating a packet and the table of recirculating
//! packets.

use super::Rlb;
use crate::engine::mix64;
use crate::lb::LbCtx;
use crate::packet::Packet;
use crate::units::Time;

/// A recirculating packet.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Recirc {
    used: bool,
    flow: u32,
    seq: u64,
    count: u8,
    first_at: Time,
    gap: Time,
}

impl Rlb {
    /// t_rc: the delay of a recirculation now, read from the recirculation queue.
    pub(super) fn t_rc(ctx: &LbCtx, lo: u16, pkt: &Packet) -> Time {
        let port = &ctx.ports[lo as usize];
        port.rate()
            .tx_time(port.total_queue_bytes() + pkt.wire_bytes as u64)
            + port.delay()
    }

    #[inline]
    fn slot(&self, pkt: &Packet) -> usize {
        (mix64((pkt.flow as u64) << 40 ^ pkt.seq) % self.table.len() as u64) as usize
    }

    /// The recirculation limits: `max_recirculations`, and with RLB* N_rc (eq. 5) and the
    /// cumulative-delay rule (eq. 6). Records the recirculation if admitted.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit_recirculation(
        &mut self,
        ctx: &mut LbCtx,
        lo: u16,
        pkt: &Packet,
        from_loop: bool,
        gap: Time,
        t_rc: Time,
        charged: Option<u16>,
    ) -> bool {
        let slot = self.slot(pkt);
        let mut e = self.table[slot];
        let mine = e.used && e.flow == pkt.flow && e.seq == pkt.seq;
        if !mine {
            // First recirculation (or its state was lost to a collision: counted once).
            e = Recirc {
                used: true,
                flow: pkt.flow,
                seq: pkt.seq,
                count: from_loop as u8,
                first_at: if from_loop {
                    ctx.now.saturating_sub(t_rc)
                } else {
                    ctx.now
                },
                gap,
            };
        }
        if self.adaptive && !self.round.active {
            self.start_round(ctx, lo, pkt);
        }
        let limit = if self.adaptive {
            self.round.n_rc.min(self.max_recirc)
        } else {
            self.max_recirc
        };
        // The recirculation ingress must stay below its XOFF threshold: what is queued for the
        // loopback will all arrive there.
        let loop_full = ctx.mmu.is_some_and(|m| {
            let queued = ctx.ports[lo as usize].total_queue_bytes();
            m.ingress_use(lo as usize + 1, pkt.priority) + queued + pkt.wire_bytes as u64
                >= m.threshold()
        });
        let refused = if loop_full || e.count as u32 >= limit {
            self.counters.refused_limit += 1;
            true
        } else if self.adaptive && ctx.now.saturating_sub(e.first_at) + t_rc > e.gap {
            self.counters.refused_delay += 1;
            true
        } else {
            false
        };
        if refused && !from_loop {
            return false; // never entered the loop: nothing to keep
        }
        if !self.table[slot].used {
            self.in_loop += 1;
        }
        if refused {
            // Kept until the packet leaves the loop (at once, through `leave_loop`).
            self.table[slot] = e;
            return false;
        }
        e.count += 1;
        self.table[slot] = e;
        self.counters.recirculations += 1;
        self.round.recirculated += 1;
        if let Some(ps) = charged {
            self.round.per_port[ps as usize] += 1;
        }
        true
    }

    /// A packet leaves the recirculation loop: its count goes to the round's statistics.
    pub(super) fn leave_loop(&mut self, pkt: &Packet) {
        if self.table.is_empty() {
            return;
        }
        let slot = self.slot(pkt);
        let e = &mut self.table[slot];
        let count = if e.used && e.flow == pkt.flow && e.seq == pkt.seq {
            e.used = false;
            self.in_loop -= 1;
            e.count as u64
        } else {
            1
        };
        self.round.finished += 1;
        self.round.finished_sum += count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::rlb::tests::{data, ecmp_inner, leaf, recirc_leaf, switch, warn};
    use crate::lb::{SwitchScheme, TestSwitch};
    use crate::mmu::{Mmu, Threshold};

    fn mmu(threshold: u64) -> Mmu {
        Mmu::new(
            9_000_000,
            4_000,
            3_000,
            Threshold::Static { bytes: threshold },
            true,
            vec![50_000; 8],
        )
    }

    /// Recirculations of one packet admitted in a row, one t_rc apart, at a switch whose
    /// loopback (ports 6 and 7) is empty: `gap` is the RTT gap that sent it round.
    fn recirculate(rlb: &mut Rlb, mmu: &Mmu, gap: Time) -> u32 {
        use crate::port::PortState;
        let ports: Vec<PortState> = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let pkt = data(2, 7);
        let mut sw = switch();
        let mut n = 0;
        let mut t = 0;
        loop {
            let mut ctx = sw.ctx(t);
            ctx.ports = &ports;
            ctx.loopback = Some(6);
            ctx.mmu = Some(mmu);
            let t_rc = Rlb::t_rc(&ctx, 6, &pkt);
            if !rlb.admit_recirculation(&mut ctx, 6, &pkt, n > 0, gap, t_rc, Some(3)) {
                return n;
            }
            n += 1;
            t += t_rc.ps() / 1_000;
            assert!(n < 100);
        }
    }

    /// Checked to fail with each limit disabled in turn: `max_recirculations` ignored, N_rc
    /// not applied, N_rc not computed from the buffer (always `max_recirculations`), the
    /// growth term of eq. 4 left out, eq. 6 not checked.
    #[test]
    fn max_recirculations_bounds_plain_rlb_and_n_rc_and_eq6_bound_rlb_star() {
        use crate::port::PortState;
        let roomy = mmu(100_000);
        // Plain RLB: max_recirculations, whatever the gap.
        let mut plain = recirc_leaf(false);
        assert_eq!(recirculate(&mut plain, &roomy, Time::from_ms(1)), 5);
        assert_eq!(plain.counters.refused_limit, 1);
        // RLB*: N_rc from the buffer room. Threshold 100 KB, empty queue, t_rc = 1048 B at
        // 40 Gbps + 200 ns = 409.6 ns, 2048 B per round: room for 48 rounds, capped at 5.
        let mut star = recirc_leaf(true);
        assert_eq!(recirculate(&mut star, &roomy, Time::from_ms(1)), 5);
        assert_eq!(star.round.n_rc, 5);
        // RLB*, eq. 6: a gap of 1 us allows the delays 0.41 + 0.41 (<= 1), not a third.
        let mut star = recirc_leaf(true);
        assert_eq!(recirculate(&mut star, &roomy, Time::from_us(1)), 2);
        assert_eq!(star.counters.refused_delay, 1);
        // Plain RLB has no eq. 6.
        let mut plain = recirc_leaf(false);
        assert_eq!(recirculate(&mut plain, &roomy, Time::from_us(1)), 5);
        // N_rc shrinks with the room: a threshold just above one round's bytes (2048 B)
        // allows one recirculation per packet; plain RLB is not bound by it.
        let tight = mmu(2_100);
        let mut star = recirc_leaf(true);
        assert_eq!(recirculate(&mut star, &tight, Time::from_ms(1)), 1);
        assert_eq!(star.round.n_rc, 1);
        assert_eq!(star.counters.refused_limit, 1);
        let mut plain = recirc_leaf(false);
        assert_eq!(recirculate(&mut plain, &tight, Time::from_ms(1)), 5);
        // Eq. 4: the queue's growth over the last round comes off the room. A round starts on
        // an empty loopback; at the next, 20 KB wait there: t_rc = 20 KB at 40 Gbps + 200 ns
        // = 4.2 us, 21 KB per round; room 100 KB - 20 KB - 20 KB of growth: N_rc = 2 (3
        // without the growth term).
        let mut ports = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let mut star = recirc_leaf(true);
        let mut sw = switch();
        let mut probe = data(2, 7);
        probe.wire_bytes = 0;
        {
            let mut ctx = sw.ctx(0);
            ctx.ports = &ports;
            ctx.loopback = Some(6);
            ctx.mmu = Some(&roomy);
            star.start_round(&mut ctx, 6, &probe);
        }
        ports[6].set_test_queue_bytes(20_000);
        let mut ctx = sw.ctx(1_000);
        ctx.ports = &ports;
        ctx.loopback = Some(6);
        ctx.mmu = Some(&roomy);
        star.start_round(&mut ctx, 6, &probe);
        assert_eq!(star.round.t_rc, Time::from_ns(4_200));
        assert_eq!(star.round.n_rc, 2);
    }

    /// t_rc is read from the recirculation queue: with the loopback busy, the same RTT gap
    /// that made the packet wait on an idle loopback makes it take p_s. Checked to fail with
    /// t_rc computed without the queue.
    #[test]
    fn t_rc_is_the_recirculation_queue_s_delay_and_decides_against_the_rtt_gap() {
        use crate::port::PortState;
        let roomy = mmu(100_000);
        let mut ports = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        // p_s is the next port (the other paths keep the base RTT, faster than p).
        let mut rlb = leaf(&crate::lb::rlb::RlbConfig {
            alternative: crate::lb::rlb::Alternative::NextPort,
            ..ecmp_inner()
        });
        let mut sw = switch();
        let pkt = data(2, 7);
        let cands = [2u16, 3, 4, 5];
        let mut choose = |rlb: &mut Rlb, ports: &[PortState]| {
            let mut ctx = sw.ctx(0);
            ctx.ports = ports;
            ctx.loopback = Some(6);
            ctx.mmu = Some(&roomy);
            let t_rc = Rlb::t_rc(&ctx, 6, &pkt);
            (rlb.choose(&mut ctx, &pkt, &cands), t_rc)
        };
        // The inner choice p, then p warned, and p_s (the next candidate) 700 ns slower.
        let (p, t_rc) = choose(&mut rlb, &ports);
        assert_eq!(t_rc, Time::from_ps(409_600));
        let ps = cands[(cands.iter().position(|&c| c == p).unwrap() + 1) % 4];
        warn(&mut rlb, &mut TestSwitch::new(10), p, 3);
        rlb.set_rtt(1, p, Time::from_us(10));
        rlb.set_rtt(1, ps, Time::from_ns(10_700));
        // Idle loopback: t_rc = 409.6 ns < 700 ns: the packet waits for p (recirculated).
        assert_eq!(choose(&mut rlb, &ports), (6, Time::from_ps(409_600)));
        // 2952 B queued at the loopback: t_rc = 4000 B at 40 Gbps + 200 ns = 1 us > 700 ns:
        // waiting costs more than the slower path, the packet takes p_s.
        ports[6].set_test_queue_bytes(2_952);
        assert_eq!(choose(&mut rlb, &ports), (ps, Time::from_us(1)));
        assert_eq!(rlb.counters.reroutes, 1);
    }
}
