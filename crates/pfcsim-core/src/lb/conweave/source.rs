//! The source-ToR side of ConWeave: per flow ([`TxFlow`], a table indexed by the 5-tuple
//! hash) the epoch, the phase and the path; INIT at the start of an epoch, TAIL when the reply
//! is late, after which the flow moves to a sampled path; path sampling away from paths that
//! NOTIFY marked congested; and the REPLY, CLEAR and NOTIFY messages of the destination ToR.

use super::header::{
    pack_data, ts, FLAG_DATA, FLAG_INIT, FLAG_TAIL, MSG_CLEAR, MSG_NOTIFY, MSG_REPLY,
};
use super::ConWeave;
use crate::lb::LbCtx;
use crate::packet::{LbHeader, Packet};
use crate::units::Time;
use rand::Rng as _;

/// Source-ToR state of one flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TxFlow {
    /// Low 32 bits of the 5-tuple hash (0: empty slot).
    pub key: u32,
    pub active: Time,
    /// `Time::MAX`: no deadline (waiting for CLEAR).
    pub deadline: Time,
    pub epoch: u8,
    pub phase: u8,
    /// Uplink index among the candidates.
    pub path: u8,
    pub stabilized: bool,
    pub tail_ts: u32,
}

pub(super) const TX_EMPTY: TxFlow = TxFlow {
    key: 0,
    active: Time::ZERO,
    deadline: Time::MAX,
    epoch: 0,
    phase: 0,
    path: 0,
    stabilized: false,
    tail_ts: 0,
};

impl ConWeave {
    /// Two random paths, the first not congested; else `current` (or the first draw).
    fn sample_path(&mut self, ctx: &mut LbCtx, dst_tor: u32, n: usize, current: Option<u8>) -> u8 {
        let a = ctx.rng.gen_range(0..n) as u8;
        if !self.cfg.path_aware {
            return a;
        }
        let b = ctx.rng.gen_range(0..n) as u8;
        let base = dst_tor as usize * self.n_paths;
        for p in [a, b] {
            if self.congested_until[base + p as usize] <= ctx.now {
                return p;
            }
        }
        current.unwrap_or(a)
    }

    /// Source-ToR rule for one data packet: stamps path and `meta`.
    pub(super) fn source(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, n: usize, dst_tor: u32) {
        let n = n.min(self.n_paths).max(1);
        let now = ctx.now;
        let (key, slot) = self.key(pkt);
        let mut f = self.tx[slot];
        let deadline = now + self.base_rtt[dst_tor as usize] + self.cfg.reply_extra;
        let flag;
        let mut pkt_phase = f.phase;
        let mut pkt_path = f.path;
        let mut stamp = ts(now);
        if f.key != key || now.saturating_sub(f.active) > self.cfg.inactive {
            // Expired (or new): new epoch on a fresh path.
            let current = (f.key == key).then_some(f.path.min(n as u8 - 1));
            f = TxFlow {
                key,
                epoch: f.epoch.wrapping_add(1),
                path: self.sample_path(ctx, dst_tor, n, current),
                deadline,
                ..TX_EMPTY
            };
            flag = FLAG_INIT;
            pkt_phase = 0;
            pkt_path = f.path;
        } else if f.stabilized {
            f.epoch = f.epoch.wrapping_add(1);
            f.phase = 0;
            f.stabilized = false;
            f.deadline = deadline;
            f.tail_ts = 0;
            flag = FLAG_INIT;
            pkt_phase = 0;
        } else if f.deadline != Time::MAX && now > f.deadline {
            // Reply timeout: this packet is the TAIL of the old path.
            flag = FLAG_TAIL;
            pkt_phase = 0;
            f.tail_ts = stamp;
            f.phase = 1;
            let old = f.path.min(n as u8 - 1);
            f.path = self.sample_path(ctx, dst_tor, n, Some(old));
            f.deadline = Time::MAX;
            self.counters.tails += 1;
            if f.path != old {
                self.counters.reroutes += 1;
            }
        } else {
            flag = FLAG_DATA;
            if f.phase == 1 {
                stamp = f.tail_ts;
            }
        }
        if flag == FLAG_INIT {
            self.counters.inits += 1;
        }
        f.active = now;
        self.tx[slot] = f;
        let path = pkt_path.min(n as u8 - 1);
        pkt.lb.path_tag = (pkt.lb.path_tag & !0xff) | (path as u32 + 1);
        pkt.lb.meta = pack_data(flag, pkt_phase, f.epoch, stamp);
    }

    /// A routed scheme message reached this (source) ToR: NOTIFY marks its path congested
    /// towards the ToR that sent it, a timely RTT_REPLY or the CLEAR of a reroute stabilizes its
    /// flow.
    pub(super) fn on_message(&mut self, ctx: &mut LbCtx, header: &LbHeader) {
        if self.my_tor.is_none() {
            return;
        }
        let meta = header.meta;
        let kind = meta & 3;
        if kind == MSG_NOTIFY {
            let path = (meta >> 8 & 0xff) as usize;
            let tor = (meta >> 16) as usize;
            if path < self.n_paths && tor * self.n_paths < self.congested_until.len() {
                self.congested_until[tor * self.n_paths + path] = ctx.now + self.cfg.path_busy;
            }
            return;
        }
        let key = header.path_tag;
        let slot = key as usize % self.cfg.table_size as usize;
        let f = &mut self.tx[slot];
        let (phase, epoch) = ((meta >> 2 & 1) as u8, (meta >> 3 & 3) as u8);
        if f.key != key || f.epoch & 3 != epoch {
            return;
        }
        // A timely RTT_REPLY for the current epoch and phase, or the CLEAR of a reroute.
        let timely = f.phase == phase && f.deadline != Time::MAX && ctx.now <= f.deadline;
        if (kind == MSG_REPLY && timely) || (kind == MSG_CLEAR && f.phase == 1) {
            f.stabilized = true;
        }
    }

    /// Source-ToR state of the flow of `pkt` (tests and diagnostics).
    pub fn tx_flow(&self, pkt: &Packet) -> Option<TxFlow> {
        let (key, slot) = self.key(pkt);
        self.tx.get(slot).filter(|f| f.key == key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::conweave::header::unpack_data;
    use crate::lb::conweave::tests::{data, leaf};
    use crate::lb::conweave::ConWeaveConfig;
    use crate::lb::{Ingress, SwitchScheme, TestSwitch};

    const UP: [u16; 4] = [2, 3, 4, 5];

    /// Sends one packet through the source ToR; returns (flag, phase, epoch, path).
    fn send(cw: &mut ConWeave, w: &mut TestSwitch, now_ns: u64) -> (u32, u8, u8, u32) {
        let mut p = data(now_ns);
        assert_eq!(
            cw.on_ingress(&mut w.ctx(now_ns), &mut p, &UP),
            Ingress::Forward
        );
        let (flag, phase, epoch, _) = unpack_data(p.lb.meta);
        (flag, phase, epoch, p.lb.path_tag & 0xff)
    }

    fn control(kind: u32, phase: u8, epoch: u8) -> LbHeader {
        let (key, _) = ConWeave::new(&ConWeaveConfig::default(), &leaf(0)).key(&data(0));
        LbHeader {
            path_tag: key,
            meta: kind | (phase as u32) << 2 | (epoch as u32 & 3) << 3,
        }
    }

    #[test]
    fn source_tor_expiry_stabilize_timeout_and_clear() {
        let cfg = ConWeaveConfig::default();
        let mut cw = ConWeave::new(&cfg, &leaf(0));
        let mut w = TestSwitch::new(20);
        // A new flow: INIT, epoch 1, phase 0, some path.
        let (flag, phase, e1, path) = send(&mut cw, &mut w, 1_000);
        assert_eq!((flag, phase), (FLAG_INIT, 0));
        assert!((1..=4).contains(&path));
        let f = cw.tx_flow(&data(0)).unwrap();
        assert_eq!(f.deadline, Time::from_ns(1_000) + Time::from_us(8));
        // Before the deadline, without a reply: DATA on the same path.
        assert_eq!(send(&mut cw, &mut w, 2_000), (FLAG_DATA, 0, e1, path));
        // A timely RTT_REPLY stabilizes: the next packet opens a new epoch on the same path.
        cw.on_control(&mut w.ctx(6_000), 2, &control(MSG_REPLY, 0, e1));
        assert!(cw.tx_flow(&data(0)).unwrap().stabilized);
        let (flag, phase, e2, p2) = send(&mut cw, &mut w, 7_000);
        assert_eq!((flag, phase, p2), (FLAG_INIT, 0, path));
        assert_eq!(e2, e1.wrapping_add(1) & 3);
        // A late reply is ignored; the deadline passes: this packet is the TAIL, on the old
        // path, phase 0; the flow moves to phase 1 on a sampled path, with no deadline.
        cw.on_control(&mut w.ctx(15_001), 2, &control(MSG_REPLY, 0, e2));
        assert!(!cw.tx_flow(&data(0)).unwrap().stabilized);
        let (flag, phase, e, p) = send(&mut cw, &mut w, 15_002);
        assert_eq!((flag, phase, e, p), (FLAG_TAIL, 0, e2, path));
        let f = cw.tx_flow(&data(0)).unwrap();
        assert_eq!((f.phase, f.deadline), (1, Time::MAX));
        assert_eq!(cw.counters.tails, 1);
        // Later packets: DATA, phase 1, on the new path, carrying the TAIL's timestamp.
        let mut p = data(1);
        cw.on_ingress(&mut w.ctx(16_000), &mut p, &UP);
        let (flag, phase, e, stamp) = unpack_data(p.lb.meta);
        assert_eq!((flag, phase, e), (FLAG_DATA, 1, e2));
        assert_eq!(stamp, 15_002);
        assert_eq!(p.lb.path_tag & 0xff, f.path as u32 + 1);
        // No second reroute before CLEAR, however long it takes.
        assert_eq!(send(&mut cw, &mut w, 100_000).0, FLAG_DATA);
        // CLEAR stabilizes: next packet starts a new epoch on the new path.
        cw.on_control(&mut w.ctx(101_000), 2, &control(MSG_CLEAR, 1, e2));
        let (flag, phase, e3, p3) = send(&mut cw, &mut w, 102_000);
        assert_eq!((flag, phase, p3), (FLAG_INIT, 0, f.path as u32 + 1));
        assert_eq!(e3, e2.wrapping_add(1) & 3);
        // Idle longer than θ_inactive: expired, new epoch with an INIT.
        let (flag, _, e4, _) = send(&mut cw, &mut w, 102_000 + 300_001);
        assert_eq!(flag, FLAG_INIT);
        assert_eq!(e4, e3.wrapping_add(1) & 3);
    }

    #[test]
    fn path_sampling_skips_paths_marked_congested_by_notify() {
        let mut cw = ConWeave::new(&ConWeaveConfig::default(), &leaf(0));
        let mut w = TestSwitch::new(20);
        for path in 0..3u32 {
            let h = LbHeader {
                path_tag: 0,
                meta: MSG_NOTIFY | path << 8 | 1 << 16,
            };
            cw.on_control(&mut w.ctx(0), 2, &h);
        }
        // Only path 3 (tag 4) is free: new flows take it unless both samples are congested.
        let mut free = 0;
        for i in 0..200u16 {
            let mut p = data(0);
            p.sport = i;
            cw.on_ingress(&mut w.ctx(1_000), &mut p, &UP);
            free += u32::from(p.lb.path_tag & 0xff == 4);
        }
        // P(at least one of two samples is path 3) = 7/16.
        assert!((60..120).contains(&free), "{free}");
        // After θ_path_busy the marks are gone.
        assert!(cw.congested_until.iter().all(|&t| t <= Time::from_us(17)));
    }
}
