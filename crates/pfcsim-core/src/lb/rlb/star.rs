//! RLB* (section IV): rounds of one t_rc that set N_rc (eq. 4-5), and failure detection
//! (Algorithm 2) at the end of each round.

use super::{Rlb, ROUND};
use crate::lb::LbCtx;
use crate::metrics::AlertRecord;
use crate::packet::Packet;
use crate::units::Time;

/// State of the current RLB* round.
#[derive(Clone, Debug, Default)]
pub(super) struct Round {
    pub(super) active: bool,
    pub(super) n_rc: u32,
    pub(super) t_rc: Time,
    /// Loopback queue bytes at the round's start (its growth sets N_rc).
    pub(super) queue_at_start: u64,
    /// Packets that left the recirculation loop this round, and their recirculations.
    pub(super) finished: u64,
    pub(super) finished_sum: u64,
    /// Recirculations this round, and those charged to each egress.
    pub(super) recirculated: u64,
    pub(super) per_port: Vec<u32>,
    pub(super) suspect: Option<u16>,
    pub(super) suspect_rounds: u32,
    /// Rounds started since the run began.
    pub(super) started: u64,
}

impl Rlb {
    /// Whether egress `port` was found faulty (Algorithm 2) and is no longer chosen.
    pub fn is_removed(&self, port: u16) -> bool {
        self.removed[port as usize]
    }

    /// RLB*'s rounds as a test sees them: rounds started so far, the current round's t_rc
    /// (its length), and Algorithm 2's suspect egress with the rounds in a row it has topped.
    pub fn round_view(&self) -> (u64, Time, Option<(u16, u32)>) {
        let r = &self.round;
        (r.started, r.t_rc, r.suspect.map(|p| (p, r.suspect_rounds)))
    }

    /// Starts an RLB* round of one t_rc and sets its N_rc (eq. 4-5): the room left below the
    /// PFC threshold for the recirculation queue, minus its growth over the last round, in
    /// units of what the loopback carries in one t_rc.
    pub(super) fn start_round(&mut self, ctx: &mut LbCtx, lo: u16, pkt: &Packet) {
        let t_rc = Self::t_rc(ctx, lo, pkt);
        let port = &ctx.ports[lo as usize];
        let queued = port.total_queue_bytes();
        let growth = if self.round.active {
            queued.saturating_sub(self.round.queue_at_start)
        } else {
            0
        };
        let threshold = ctx.mmu.map_or(u64::MAX, |m| m.threshold());
        let per_round = port.rate().bytes_in(t_rc).max(1);
        let room = threshold.saturating_sub(queued).saturating_sub(growth);
        self.round.n_rc = (room / per_round).min(self.max_recirc as u64) as u32;
        self.round.t_rc = t_rc;
        self.round.queue_at_start = queued;
        self.round.active = true;
        self.round.started += 1;
        ctx.set_timer(ctx.now + t_rc, ROUND);
    }

    /// The end of an RLB* round: Algorithm 2, then the next round if packets still
    /// recirculate.
    pub(super) fn end_round(&mut self, ctx: &mut LbCtx) {
        let r = &mut self.round;
        let recirculated = r.recirculated;
        r.recirculated = 0;
        // A round in which no packet left the loop brings no evidence either way.
        if r.finished == 0 {
        } else if r.finished_sum as f64 / r.finished as f64 > self.fault_threshold {
            // The egress charged with the most recirculations (lowest index on ties).
            let top = (0..r.per_port.len())
                .filter(|&p| r.per_port[p] > 0)
                .max_by_key(|&p| (r.per_port[p], std::cmp::Reverse(p)))
                .map(|p| p as u16);
            if let Some(top) = top {
                if r.suspect == Some(top) {
                    r.suspect_rounds += 1;
                } else {
                    r.suspect = Some(top);
                    r.suspect_rounds = 1;
                }
                if r.suspect_rounds >= 2 && !self.removed[top as usize] {
                    self.removed[top as usize] = true;
                    self.any_removed = true;
                    self.alerts.push(AlertRecord {
                        time_ps: ctx.now.ps(),
                        node: self.node,
                        port: top,
                        downstream: ctx
                            .ports
                            .get(top as usize)
                            .map_or(u32::MAX, |p| p.peer_node()),
                    });
                    r.suspect = None;
                    r.suspect_rounds = 0;
                }
            }
        } else {
            r.suspect = None;
            r.suspect_rounds = 0;
        }
        r.finished = 0;
        r.finished_sum = 0;
        r.per_port.iter_mut().for_each(|c| *c = 0);
        let still = recirculated > 0 || self.in_loop > 0;
        if still {
            // The next round: N_rc from the queue now (the packet size of an MTU stands in).
            let lo = ctx.loopback.expect("rounds run only with recirculation");
            let mut probe = Packet::new(crate::packet::PacketKind::Data);
            probe.wire_bytes = 0;
            self.start_round(ctx, lo, &probe);
        } else {
            self.round.active = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::rlb::tests::{data, recirc_leaf, switch};
    use crate::lb::SwitchScheme;

    /// Algorithm 2. Checked to fail with detection disabled, with a port flagged after one
    /// round and only after three, with a flagged port not removed, and with a round below
    /// the threshold not resetting the suspicion.
    #[test]
    fn algorithm2_removes_the_port_that_tops_two_rounds_in_a_row() {
        use crate::port::PortState;
        let ports: Vec<PortState> = PortState::test_ports(8, 40_000_000_000, Time::from_ns(200));
        let mut rlb = recirc_leaf(true);
        let mut sw = switch();
        let mut round = |rlb: &mut Rlb, sum: u64, top: usize| {
            rlb.round.active = true;
            rlb.round.finished = 2;
            rlb.round.finished_sum = sum;
            rlb.round.per_port[top] = 9;
            rlb.round.per_port[2] = 1;
            let mut ctx = sw.ctx(1_000);
            ctx.ports = &ports;
            ctx.loopback = Some(6);
            rlb.end_round(&mut ctx);
        };
        // Average 4 > 3 twice in a row, port 4 on top both times: removed, alert raised.
        round(&mut rlb, 8, 4);
        assert!(rlb.alerts.is_empty());
        round(&mut rlb, 8, 4);
        assert!(rlb.is_removed(4));
        assert_eq!(rlb.alerts.len(), 1);
        assert_eq!((rlb.alerts[0].node, rlb.alerts[0].port), (10, 4));
        // A round below the threshold in between resets the suspicion.
        let mut rlb = recirc_leaf(true);
        round(&mut rlb, 8, 5);
        round(&mut rlb, 4, 5);
        round(&mut rlb, 8, 5);
        assert!(!rlb.is_removed(5) && rlb.alerts.is_empty());
        round(&mut rlb, 8, 5);
        assert!(rlb.is_removed(5));
        // A removed port is never chosen again, by the inner scheme or by Algorithm 1.
        let cands = [2u16, 3, 4, 5];
        for seq in 0..64 {
            let mut p = data(2, seq);
            p.sport = seq as u16;
            let mut ctx = sw.ctx(2_000);
            ctx.ports = &ports;
            assert_ne!(rlb.choose(&mut ctx, &p, &cands), 5);
        }
    }
}
