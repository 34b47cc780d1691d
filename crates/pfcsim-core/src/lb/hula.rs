//! HULA (Katta et al., SOSR'16): hop-by-hop flowlet routing on the best next hop towards each
//! destination ToR, learnt from periodic utilization probes (a distance-vector protocol over
//! the maximum link utilization of a path).
//!
//! * Every switch estimates the transmit utilization of each fabric-facing port:
//!   `U := bytes + U (1 - dt / tau)` at each data packet sent (`dt` since the last update,
//!   the factor floored at 0), read as `floor(256 U / (C tau))` saturated to 255, `C` the
//!   port's line rate.
//! * Every ToR sends, every `probe_period` from time zero, a probe (destination ToR = itself,
//!   utilization 0) on each uplink: a real scheme message of `nic.control_bytes` that crosses
//!   the link in the strict-priority queue.
//! * A switch receiving a probe for ToR `t` on port `p` takes `u = max(probe util, transmit
//!   util of p)` (the direction data towards `t` will travel) and updates its best hop for `t`
//!   if `p` already is the best hop (refresh), if `u` is lower than the stored best (better),
//!   or if the entry was last updated more than `keepalive` ago (aged). It then sends the probe
//!   on with the utilization of its best path to `t`: a probe that came from below goes to all
//!   uplinks and all other downlinks to switches, one from above only to downlinks to
//!   switches (up-down replication, loop-free), at most once per `probe_period / 2` per ToR
//!   (the rate limit of the RDMA ns-3 port of HULA).
//! * Data: a flowlet table per switch (5-tuple hash, as LetFlow); a new flowlet takes the best
//!   hop towards its destination ToR, or the ECMP hash while no probe has set one.
//!
//! No reference code by HULA's authors exists for RDMA; the algorithm follows the paper and the
//! third-party RDMA ns-3 port. Every default is chosen relative to the fabric's RTT (about 8 us
//! on 100 Gbps leaf-spines with 1 us links); `docs/schemes/hula.md` gives the reasoning. Not
//! modelled: control packets in the utilization estimate (data only), probes on links to hosts,
//! failure detection beyond aging.

use super::{
    flow_hash, pick_index, Capabilities, LbCtx, LbFabric, PortDir, SchemeConfig, SwitchScheme,
    NO_TOR,
};
use crate::check::{check_positive_time, check_range};
use crate::engine::mix64;
use crate::packet::{LbHeader, Packet, PacketKind};
use crate::units::Time;
use serde::{Deserialize, Serialize};

/// HULA parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HulaConfig {
    /// Period of each ToR's probes (default 10 us, about one base RTT of a 100 Gbps fabric with
    /// 1 us links; the paper probes on the order of an RTT). Valid: 1 us..=10 ms.
    pub probe_period: Time,
    /// Time constant of the utilization estimator (default 40 us, four probe periods: the paper
    /// and its ns-3 port ask for at least two). Valid: > 0.
    pub tau: Time,
    /// A best-hop entry not refreshed for this long is replaced by the next probe for its ToR,
    /// whatever its utilization (default 30 us, three probe periods). Valid: > 0.
    pub keepalive: Time,
    /// A gap longer than this starts a new flowlet (default 100 us, the flowlet timeout of the
    /// RDMA reference for LetFlow and CONGA). Valid: > 0.
    pub flowlet_timeout: Time,
    /// Entries of each switch's flowlet table (default 65,536, as LetFlow and CONGA).
    /// Valid: 1..=16,777,216.
    pub table_size: u32,
}

impl Default for HulaConfig {
    fn default() -> Self {
        HulaConfig {
            probe_period: Time::from_us(10),
            tau: Time::from_us(40),
            keepalive: Time::from_us(30),
            flowlet_timeout: Time::from_us(100),
            table_size: 65_536,
        }
    }
}

impl SchemeConfig for HulaConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        check_range(
            "lb.probe_period",
            self.probe_period,
            Time::from_us(1)..=Time::from_ms(10),
            "(HULA default 10us)",
        )?;
        for (key, t, example) in [
            ("tau", self.tau, "40us"),
            ("keepalive", self.keepalive, "30us"),
            ("flowlet_timeout", self.flowlet_timeout, "100us"),
        ] {
            check_positive_time(&format!("lb.{key}"), t, example)?;
        }
        super::check_table_size(self.table_size)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            fabric: true,
            dequeue: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Hula::new(self, fabric))
    }
}

/// Token of the ToR's probe timer.
const PROBE_TIMER: u64 = 0x4855_4c41;

/// A probe's `LbHeader.meta`: bits 8..32 the destination ToR index, 0..8 the path utilization
/// (as the P4 version: 24-bit ToR id, 8-bit utilization).
pub fn probe_header(tor: u32, util: u8) -> LbHeader {
    LbHeader {
        path_tag: 0,
        meta: tor << 8 | util as u32,
    }
}

/// (ToR, utilization) of a probe header.
pub fn probe_fields(h: &LbHeader) -> (u32, u8) {
    (h.meta >> 8, h.meta as u8)
}

/// Transmit utilization estimator of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UtilEstimator {
    /// Bytes (discounted).
    u: f64,
    last: u64,
}

impl UtilEstimator {
    /// The register at `now`, decayed by `1 - dt / tau` (at least 0).
    pub fn value(&self, now: u64, tau: u64) -> f64 {
        let dt = now.saturating_sub(self.last);
        self.u * (1.0 - dt as f64 / tau as f64).max(0.0)
    }

    pub fn add(&mut self, now: u64, tau: u64, bytes: u64) {
        self.u = bytes as f64 + self.value(now, tau);
        self.last = now;
    }
}

/// Best hop towards one ToR.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Best {
    /// Local port (`NONE`: no probe yet).
    port: u16,
    util: u8,
    stamp: u64,
}

const NONE: u16 = u16::MAX;

/// One switch's HULA state.
#[derive(Clone, Debug)]
pub struct Hula {
    period: u64,
    tau: u64,
    keepalive: u64,
    timeout: u64,
    salt: u64,
    tor_of: Vec<u32>,
    my_tor: Option<u32>,
    port_dir: Vec<PortDir>,
    /// `256 / (C tau)` per port, in 1/byte: util = U * norm.
    norm: Vec<f64>,
    est: Vec<UtilEstimator>,
    /// Per destination ToR.
    best: Vec<Best>,
    /// Per destination ToR: when its probe was last sent on (`u64::MAX`: never).
    last_sent: Vec<u64>,
    /// Flowlet table as in LetFlow: bits 0..64 last packet time, 64..80 port + 1.
    flowlets: Vec<u128>,
}

impl Hula {
    pub fn new(cfg: &HulaConfig, fabric: &LbFabric) -> Hula {
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let tau_s = cfg.tau.as_secs_f64();
        let tors = fabric.tors as usize;
        Hula {
            period: cfg.probe_period.ps(),
            tau: cfg.tau.ps(),
            keepalive: cfg.keepalive.ps(),
            timeout: cfg.flowlet_timeout.ps(),
            salt: mix64(fabric.node as u64 ^ 0x4a1a_0000),
            tor_of: fabric.tor_of.clone(),
            my_tor: fabric.my_tor,
            port_dir: fabric.port_dir.clone(),
            norm: fabric
                .port_rate_bps
                .iter()
                .map(|&r| 256.0 * 8.0 / (r as f64 * tau_s))
                .collect(),
            est: vec![UtilEstimator::default(); fabric.port_dir.len()],
            best: vec![
                Best {
                    port: NONE,
                    util: 0,
                    stamp: 0
                };
                tors
            ],
            last_sent: vec![u64::MAX; tors],
            flowlets: vec![0u128; cfg.table_size as usize],
        }
    }

    /// Transmit utilization of local `port` at `now`, 0..=255 (255: line rate or more).
    fn util(&self, now: u64, port: u16) -> u8 {
        let u = self.est[port as usize].value(now, self.tau) * self.norm[port as usize];
        u.min(255.0) as u8
    }
}

impl SwitchScheme for Hula {
    fn on_start(&mut self, ctx: &mut LbCtx) {
        if self.my_tor.is_some() {
            self.on_timer(ctx, PROBE_TIMER);
        }
    }

    /// The ToR's probe round: a probe on every uplink, and the next round's timer.
    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        let Some(me) = self.my_tor else { return };
        if token != PROBE_TIMER {
            return;
        }
        for (p, d) in self.port_dir.iter().enumerate() {
            if *d == PortDir::Up {
                ctx.send_control(p as u16, probe_header(me, 0));
            }
        }
        ctx.set_timer(ctx.now + Time::from_ps(self.period), PROBE_TIMER);
    }

    /// A probe arrived on `port`: update the best hop, then replicate up-down.
    fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        let now = ctx.now.ps();
        let (tor, probe_util) = probe_fields(header);
        let from = self.port_dir[port as usize];
        if Some(tor) == self.my_tor || tor as usize >= self.best.len() {
            return;
        }
        let u = probe_util.max(self.util(now, port));
        let b = &mut self.best[tor as usize];
        if b.port == NONE || b.port == port || u < b.util || now - b.stamp > self.keepalive {
            *b = Best {
                port,
                util: u,
                stamp: now,
            };
        }
        let carried = b.util;
        let last = self.last_sent[tor as usize];
        if last != u64::MAX && now - last < self.period / 2 {
            return;
        }
        let mut sent = false;
        for (p, d) in self.port_dir.iter().enumerate() {
            let send = match (from, *d) {
                (PortDir::Down, PortDir::Up) => true,
                (PortDir::Down | PortDir::Up, PortDir::Down) => p != port as usize,
                _ => false,
            };
            if send {
                ctx.send_control(p as u16, probe_header(tor, carried));
                sent = true;
            }
        }
        if sent {
            self.last_sent[tor as usize] = now;
        }
    }

    #[inline]
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let now = ctx.now.ps();
        let hash = flow_hash(pkt, self.salt);
        let slot = (hash % self.flowlets.len() as u64) as usize;
        let entry = self.flowlets[slot];
        let (last, stored) = (entry as u64, (entry >> 64) as u16);
        let port =
            if stored != 0 && now - last <= self.timeout && candidates.contains(&(stored - 1)) {
                stored - 1
            } else {
                let tor = self.tor_of.get(pkt.dst as usize).copied().unwrap_or(NO_TOR);
                match self.best.get(tor as usize) {
                    Some(b) if b.port != NONE && candidates.contains(&b.port) => b.port,
                    // No probe yet: ECMP.
                    _ => candidates[pick_index(hash, candidates.len())],
                }
            };
        self.flowlets[slot] = now as u128 | ((port as u128 + 1) << 64);
        port
    }

    /// Counts a data packet's bytes in its egress's transmit utilization.
    #[inline]
    fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet, _word: &mut u64) {
        if pkt.kind == PacketKind::Data
            && matches!(
                self.port_dir[port as usize],
                PortDir::Up | PortDir::Down | PortDir::Flat
            )
        {
            self.est[port as usize].add(ctx.now.ps(), self.tau, pkt.wire_bytes as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::TestSwitch;
    use crate::lb::{Layer, LbAction};

    /// (port, tor, util) of the probes sent since the last call.
    fn sent(w: &mut TestSwitch) -> Vec<(u16, u32, u8)> {
        let out = w
            .actions
            .iter()
            .filter_map(|a| match a {
                LbAction::SendControl { port, header, .. } => {
                    let (t, u) = probe_fields(header);
                    Some((*port, t, u))
                }
                _ => None,
            })
            .collect();
        w.actions.clear();
        out
    }

    #[test]
    fn estimator_decays_linearly_within_tau() {
        let tau = 40_000_000u64;
        let mut e = UtilEstimator::default();
        e.add(0, tau, 1000);
        assert_eq!(e.value(0, tau), 1000.0);
        assert!((e.value(tau / 4, tau) - 750.0).abs() < 1e-9);
        e.add(tau / 2, tau, 1000);
        assert!((e.value(tau / 2, tau) - 1500.0).abs() < 1e-9);
        assert_eq!(e.value(2 * tau, tau), 0.0);
        // Line rate for long: U settles near C tau, util near 256 (saturated to 255).
        let mut h = Hula::new(&HulaConfig::default(), &spine(2));
        let pkt_ps = 83_840; // 1048 B at 100 Gbps
        for i in 0..2_000u64 {
            h.est[0].add(i * pkt_ps, h.tau, 1048);
        }
        assert!(
            h.util(2_000 * pkt_ps, 0) >= 200,
            "{}",
            h.util(2_000 * pkt_ps, 0)
        );
    }

    #[test]
    fn validation_names_the_key_and_range() {
        let bad = |c: HulaConfig| c.validate().unwrap_err();
        assert_eq!(
            bad(HulaConfig {
                probe_period: Time::from_ns(10),
                ..Default::default()
            }),
            "lb.probe_period: 10ns is out of range; use 1us..=10ms (HULA default 10us)"
        );
        assert!(bad(HulaConfig {
            tau: Time::ZERO,
            ..Default::default()
        })
        .starts_with("lb.tau: must be above 0"));
        assert!(bad(HulaConfig {
            table_size: 0,
            ..Default::default()
        })
        .starts_with("lb.table_size: 0 is out of range"));
        assert!(HulaConfig::default().validate().is_ok());
    }

    /// Leaf (ToR 0 of 3): ports 0, 1 to hosts, 2..4 up.
    fn leaf() -> LbFabric {
        LbFabric {
            node: 10,
            nodes: 20,
            tor_of: (0..20)
                .map(|n| if n < 6 { n / 2 } else { NO_TOR })
                .collect(),
            tors: 3,
            my_tor: Some(0),
            port_dir: vec![
                PortDir::Host,
                PortDir::Host,
                PortDir::Up,
                PortDir::Up,
                PortDir::Up,
            ],
            port_rate_bps: vec![100_000_000_000; 5],
            ..Default::default()
        }
    }

    /// A switch with `down` downlinks (ports 0..down) and, in a fat-tree's aggregation tier,
    /// two uplinks after them.
    fn spine(down: usize) -> LbFabric {
        LbFabric {
            my_tor: None,
            port_dir: vec![PortDir::Down; down],
            port_rate_bps: vec![100_000_000_000; down],
            ..leaf()
        }
    }

    fn agg() -> LbFabric {
        let mut f = spine(2);
        f.port_dir.extend([PortDir::Up, PortDir::Up]);
        f.port_rate_bps.extend([100_000_000_000; 2]);
        f
    }

    #[test]
    fn tors_probe_every_uplink_every_period() {
        let mut h = Hula::new(&HulaConfig::default(), &leaf());
        let mut w = TestSwitch::new(0);
        h.on_start(&mut w.ctx(0));
        assert_eq!(
            w.actions.last(),
            Some(&LbAction::SetTimer {
                at: Time::from_us(10),
                token: PROBE_TIMER,
                layer: Layer::Base,
            })
        );
        assert_eq!(sent(&mut w), vec![(2, 0, 0), (3, 0, 0), (4, 0, 0)]);
        // Spines do not probe.
        let mut s = Hula::new(&HulaConfig::default(), &spine(4));
        s.on_start(&mut w.ctx(0));
        assert!(w.actions.is_empty());
    }

    #[test]
    fn best_hop_follows_refresh_better_and_aged_rules() {
        let mut h = Hula::new(&HulaConfig::default(), &leaf());
        let mut w = TestSwitch::new(0);
        let probe = |h: &mut Hula, w: &mut TestSwitch, ns: u64, port: u16, util: u8| {
            h.on_control(&mut w.ctx(ns), port, &probe_header(2, util));
            h.best[2]
        };
        // First probe sets the entry.
        assert_eq!(probe(&mut h, &mut w, 0, 2, 50).port, 2);
        // Worse on another port: ignored.
        assert_eq!(probe(&mut h, &mut w, 1_000, 3, 60).port, 2);
        // Better on another port: taken.
        let b = probe(&mut h, &mut w, 2_000, 3, 40);
        assert_eq!((b.port, b.util), (3, 40));
        // Refresh on the best port, even if worse: the entry tracks the current best path.
        let b = probe(&mut h, &mut w, 3_000, 3, 90);
        assert_eq!((b.port, b.util, b.stamp), (3, 90, 3_000_000));
        // Equal on another port: kept.
        assert_eq!(probe(&mut h, &mut w, 4_000, 4, 90).port, 3);
        // Aged (no refresh for more than keepalive = 30 us): any probe replaces it.
        assert_eq!(probe(&mut h, &mut w, 33_001, 2, 200).port, 2);
        // The port's own transmit utilization counts: port 4 is busy, so its probe with a
        // lower path utilization still loses to the refreshed best.
        h.est[4].add(33_100_000, h.tau, 1_000_000);
        let b = probe(&mut h, &mut w, 33_200, 4, 0);
        assert_eq!(b.port, 2);
    }

    #[test]
    fn probes_replicate_up_down_without_loops_and_rate_limited() {
        let cfg = HulaConfig::default();
        let mut w = TestSwitch::new(0);
        // Spine: a probe from below (leaf on port 1) goes to every other downlink, carrying
        // the best path's utilization.
        let mut s = Hula::new(&cfg, &spine(4));
        s.on_control(&mut w.ctx(0), 1, &probe_header(1, 7));
        assert_eq!(sent(&mut w), vec![(0, 1, 7), (2, 1, 7), (3, 1, 7)]);
        // Within half a period the same ToR's probe is not sent on again.
        s.on_control(&mut w.ctx(4_000), 1, &probe_header(1, 3));
        assert!(sent(&mut w).is_empty());
        s.on_control(&mut w.ctx(10_000), 1, &probe_header(1, 3));
        assert_eq!(sent(&mut w).len(), 3);
        // Aggregation switch: from below to all uplinks and the other downlink; from above
        // only to downlinks.
        let mut a = Hula::new(&cfg, &agg());
        a.on_control(&mut w.ctx(0), 0, &probe_header(1, 0));
        assert_eq!(sent(&mut w), vec![(1, 1, 0), (2, 1, 0), (3, 1, 0)]);
        a.on_control(&mut w.ctx(0), 3, &probe_header(2, 9));
        assert_eq!(sent(&mut w), vec![(0, 2, 9), (1, 2, 9)]);
        // A leaf sends nothing on (from above, and its only downlinks are to hosts) and
        // ignores its own probes.
        let mut l = Hula::new(&cfg, &leaf());
        l.on_control(&mut w.ctx(0), 2, &probe_header(1, 9));
        l.on_control(&mut w.ctx(0), 2, &probe_header(0, 9));
        assert!(sent(&mut w).is_empty());
        assert_eq!(l.best[0].port, NONE);
    }

    fn data(dst: u32, sport: u16) -> Packet {
        let mut p = Packet::new(PacketKind::Data);
        (p.src, p.dst, p.sport, p.dport, p.wire_bytes) = (0, dst, sport, 100, 1048);
        p
    }

    #[test]
    fn flowlets_take_the_best_hop_and_fall_back_to_ecmp_before_probes() {
        let mut h = Hula::new(&HulaConfig::default(), &leaf());
        let mut w = TestSwitch::new(0);
        let cands = [2u16, 3, 4];
        // No probe for ToR 2 (hosts 4, 5) yet: hashed, so flows spread.
        let spread: std::collections::BTreeSet<u16> = (0..60)
            .map(|s| h.choose(&mut w.ctx(0), &data(4, s), &cands))
            .collect();
        assert_eq!(spread.len(), 3);
        // Best hop for ToR 2 is port 4: every new flowlet takes it.
        // (Past the flowlet timeout, so no earlier entry can be hit by a colliding hash.)
        h.on_control(&mut w.ctx(150_000), 4, &probe_header(2, 5));
        for s in 100..160 {
            assert_eq!(h.choose(&mut w.ctx(150_000), &data(5, s), &cands), 4);
        }
        // A running flowlet keeps its port while the best hop changes; after a gap it moves.
        h.on_control(&mut w.ctx(151_000), 3, &probe_header(2, 1));
        assert_eq!(h.choose(&mut w.ctx(151_000), &data(5, 100), &cands), 4);
        assert_eq!(h.choose(&mut w.ctx(151_000), &data(5, 999), &cands), 3);
        assert_eq!(h.choose(&mut w.ctx(400_000), &data(5, 100), &cands), 3);
    }
}
