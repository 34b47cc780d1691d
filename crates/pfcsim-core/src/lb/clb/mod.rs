//! CLB (Wang et al., HCIS 2021, "A Novel Load Balancing Scheme based on PFC Prediction in
//! Lossless Datacenter Networks"): every switch ranks its equal-cost egresses by how likely a
//! PFC pause is soon, from the egress queue's size and growth, and breaks ties by spreading a
//! coflow's packets over the ports, so that one PAUSE stalls few of its flows.
//!
//! What is modelled (each reading is in `docs/schemes/clb.md`):
//! * **Tables** (Fig. 6), per (egress port, priority): T1 the live queue bytes `Q`, read at
//!   the decision; T2 the growth `G = Q(t) - Q(t - Δt)`, sampled every `interval` (`Δt`) by a
//!   timer started in `on_start` at every switch with fabric-facing ports (kept as bytes per
//!   interval: with one `Δt` for all ports, comparing growths is comparing rates); T3 `Tr`, a
//!   decaying byte count per (port, coflow slot): `X ← X (1 - a)` every `tr_period`, plus the
//!   bytes of each data packet of the coflow sent to the port (the paper: "the traffic
//!   distribution of coflows in each port"); T4 the class, recomputed at each decision from T1
//!   and T2.
//! * **Classes** (Algorithm 1, [`choice::classify`]) against `Q_thr` (`q_thr`, or
//!   `q_thr_fraction` of the switch's current PFC XOFF threshold).
//! * **Choice** (Algorithm 2, [`choice::decide`]) for every data packet with two or more
//!   candidates: the best class present, within it the least `Q` (A, C) or `G` (B, D); if two
//!   or more remain, the least `Tr` of the packet's coflow; then the switch's RNG. A packet's
//!   coflow is `pkt.lb.meta - 1`, written by its sender's NIC (0: not in a coflow, no `Tr`).
//! * **Granularity**: per packet (Algorithm 2 as written), or per flowlet or flow through a
//!   hashed table (`granularity`).
//!
//! Not modelled: the egress-side PFC threshold of the paper (pfcsim pauses at ingress, see
//! `docs/reference/fabric.md`), the tables' memory limits, the cost of sampling.

mod choice;
mod config;
#[cfg(test)]
mod tests;

pub use choice::{classify, decide, Class, Decision, Settled};
pub use config::{ClbConfig, Granularity, TieBreak};

use super::dre::Dre;
use super::{flow_hash, Counters, LbCtx, LbFabric, PortDir, SwitchScheme};
use crate::engine::mix64;
use crate::mmu::Mmu;
use crate::packet::Packet;
use crate::port::N_PRIO;
use crate::units::Time;

/// The token of the sampling timer.
const SAMPLE: u64 = 1;

/// What CLB counted at one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClbCounters {
    /// Decisions of Algorithm 2, by the class of the chosen port (A, B, C, D).
    pub chosen: [u64; 4],
    /// Decisions settled by the least `Tr` of the coflow, and by the RNG.
    pub by_tr: u64,
    pub by_rng: u64,
    /// Packets that followed their flowlet's or flow's port without a decision.
    pub followed: u64,
}

/// One switch's CLB state.
#[derive(Debug)]
pub struct Clb {
    /// `Q_thr` in bytes, or 0 to take `fraction` of the XOFF threshold.
    q_thr: u64,
    fraction: f64,
    interval: Time,
    tr_period: u64,
    keep: f64,
    slots: u64,
    granularity: Granularity,
    flowlet_timeout: u64,
    tie_break: TieBreak,
    salt: u64,
    /// Local ports whose queues are sampled (the fabric-facing ones: only they can be
    /// candidates of a choice).
    sampled: Vec<u16>,
    /// `prev[port * N_PRIO + prio]`: `Q` at the last sample (T1 as sampled).
    prev: Vec<u64>,
    /// `growth[port * N_PRIO + prio]`: `G`, bytes over the last interval (T2).
    growth: Vec<i64>,
    /// `Q_thr` at the last sample (monitors).
    q_thr_sampled: u64,
    /// Per port, bit `q` set once priority `q` had a queue at a sample (monitors).
    used: Vec<u8>,
    /// `tr[port * slots + slot]` (T3); empty with `tie_break = "random"`.
    tr: Vec<Dre>,
    /// Flowlet or flow table: bits 0..64 the time of the entry's last packet (ps), 64..80
    /// the port + 1 (0: empty), 80..112 the flow's signature. Empty with `packet`.
    table: Vec<u128>,
    counters: ClbCounters,
}

impl Clb {
    pub fn new(cfg: &ClbConfig, fabric: &LbFabric) -> Clb {
        use crate::lb::SchemeConfig;
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let n_ports = fabric.port_dir.len();
        let sampled = fabric
            .port_dir
            .iter()
            .enumerate()
            .filter(|(_, d)| matches!(d, PortDir::Up | PortDir::Down | PortDir::Flat))
            .map(|(p, _)| p as u16)
            .collect();
        let tr_len = match cfg.tie_break {
            TieBreak::Coflow => n_ports * cfg.coflow_slots as usize,
            TieBreak::Random => 0,
        };
        let table_len = match cfg.granularity {
            Granularity::Packet => 0,
            Granularity::Flowlet | Granularity::Flow => cfg.table_size as usize,
        };
        Clb {
            q_thr: cfg.q_thr.0,
            fraction: cfg.q_thr_fraction,
            interval: cfg.interval,
            tr_period: cfg.tr_period.ps(),
            keep: 1.0 - cfg.a,
            slots: cfg.coflow_slots as u64,
            granularity: cfg.granularity,
            flowlet_timeout: cfg.flowlet_timeout.ps(),
            tie_break: cfg.tie_break,
            salt: mix64(fabric.node as u64 ^ 0xc1b),
            sampled,
            prev: vec![0; n_ports * N_PRIO],
            growth: vec![0; n_ports * N_PRIO],
            q_thr_sampled: 0,
            used: vec![0; n_ports],
            tr: vec![Dre::default(); tr_len],
            table: vec![0; table_len],
            counters: ClbCounters::default(),
        }
    }

    /// What CLB counted at this switch.
    pub fn clb_counters(&self) -> ClbCounters {
        self.counters
    }

    /// `G` of (`port`, `prio`): bytes the queue grew by over the last sampling interval.
    pub fn growth(&self, port: u16, prio: u8) -> i64 {
        self.growth[port as usize * N_PRIO + prio as usize]
    }

    /// `Tr` of `coflow` (as carried in `meta`, id + 1) at `port` at `now`: its bytes sent
    /// there, decayed.
    pub fn tr(&self, now: Time, port: u16, meta: u32) -> f64 {
        if self.tr.is_empty() || meta == 0 {
            return 0.0;
        }
        let mut dre = self.tr[self.tr_index(port, meta)];
        dre.value(now.ps(), self.tr_period, self.keep)
    }

    /// `Q_thr` in bytes given the switch's buffer (`None` only in unit tests without a switch,
    /// which then set `q_thr`).
    #[inline]
    fn q_thr(&self, mmu: Option<&Mmu>) -> u64 {
        if self.q_thr > 0 {
            return self.q_thr;
        }
        let xoff = mmu
            .expect("CLB's q_thr_fraction reads the switch's MMU")
            .threshold();
        (self.fraction * xoff as f64) as u64
    }

    #[inline]
    fn tr_index(&self, port: u16, meta: u32) -> usize {
        port as usize * self.slots as usize + (mix64(meta as u64) % self.slots) as usize
    }

    /// Algorithm 2 for `pkt` among `candidates`, counted.
    fn place(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let (ports, prio, now) = (ctx.ports, pkt.priority, ctx.now.ps());
        let q_thr = self.q_thr(ctx.mmu);
        let growth = &self.growth;
        let view = |p: u16| {
            (
                ports[p as usize].queue_bytes(prio),
                growth[p as usize * N_PRIO + prio as usize],
            )
        };
        let meta = pkt.lb.meta;
        let tr_of = |p: u16| {
            let mut dre = self.tr[self.tr_index(p, meta)];
            dre.value(now, self.tr_period, self.keep)
        };
        let tr: Option<&dyn Fn(u16) -> f64> =
            (meta != 0 && self.tie_break == TieBreak::Coflow).then_some(&tr_of);
        let d = decide(candidates, view, q_thr, tr, ctx.rng);
        self.counters.chosen[d.class.index()] += 1;
        match d.settled {
            Settled::Class => {}
            Settled::Tr => self.counters.by_tr += 1,
            Settled::Random => self.counters.by_rng += 1,
        }
        d.port
    }
}

impl SwitchScheme for Clb {
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let port = if self.table.is_empty() {
            self.place(ctx, pkt, candidates)
        } else {
            let now = ctx.now.ps();
            let hash = flow_hash(pkt, self.salt);
            let slot = (hash % self.table.len() as u64) as usize;
            let signature = hash >> 32;
            let entry = self.table[slot];
            let (last, stored) = (entry as u64, (entry >> 64) as u16);
            let follows = stored != 0
                && (entry >> 80) as u64 == signature
                && candidates.contains(&(stored - 1))
                && (self.granularity == Granularity::Flow
                    || now.saturating_sub(last) <= self.flowlet_timeout);
            let port = if follows {
                self.counters.followed += 1;
                stored - 1
            } else {
                self.place(ctx, pkt, candidates)
            };
            self.table[slot] = now as u128 | (port as u128 + 1) << 64 | (signature as u128) << 80;
            port
        };
        if pkt.lb.meta != 0 && !self.tr.is_empty() {
            let i = self.tr_index(port, pkt.lb.meta);
            let bytes = pkt.wire_bytes as f64;
            self.tr[i].add(ctx.now.ps(), self.tr_period, self.keep, bytes);
        }
        port
    }

    fn on_start(&mut self, ctx: &mut LbCtx) {
        if !self.sampled.is_empty() {
            ctx.set_timer(ctx.now + self.interval, SAMPLE);
        }
    }

    /// T2: every `interval`, `G = Q(t) - Q(t - Δt)` of every sampled (port, priority).
    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        if token != SAMPLE {
            return;
        }
        for &p in &self.sampled {
            let port = &ctx.ports[p as usize];
            for prio in 0..N_PRIO {
                let i = p as usize * N_PRIO + prio;
                let q = port.queue_bytes(prio as u8);
                self.growth[i] = q as i64 - self.prev[i] as i64;
                self.prev[i] = q;
                if q > 0 {
                    self.used[p as usize] |= 1 << prio;
                }
            }
        }
        self.q_thr_sampled = self.q_thr(ctx.mmu);
        ctx.set_timer(ctx.now + self.interval, SAMPLE);
    }

    fn counters(&self, out: &mut Counters) {
        let c = &self.counters;
        for (name, value) in [
            ("class_a", c.chosen[0]),
            ("class_b", c.chosen[1]),
            ("class_c", c.chosen[2]),
            ("class_d", c.chosen[3]),
            ("by_tr", c.by_tr),
            ("by_rng", c.by_rng),
            ("followed", c.followed),
        ] {
            out.add(name, value);
        }
    }

    /// Per sampled (port, priority) that has had a queue at a sample, key
    /// `port << 3 | priority`, as of the last sample: `queue_bytes` (T1), `growth_gbps` (T2,
    /// `G / Δt` in Gbit/s), `class` (T4, 0 = A ... 3 = D, against `Q_thr` of that sample).
    fn samples(&self, _now: Time, emit: &mut dyn FnMut(&'static str, u32, f64)) {
        let gbps = 8.0 / self.interval.ps() as f64 * 1_000.0;
        for &p in &self.sampled {
            for prio in 0..N_PRIO {
                if self.used[p as usize] & 1 << prio == 0 {
                    continue;
                }
                let i = p as usize * N_PRIO + prio;
                let (q, g) = (self.prev[i], self.growth[i]);
                let key = (p as u32) << 3 | prio as u32;
                emit("queue_bytes", key, q as f64);
                emit("growth_gbps", key, g as f64 * gbps);
                let class = classify(q, g, self.q_thr_sampled);
                emit("class", key, class.index() as f64);
            }
        }
    }
}
