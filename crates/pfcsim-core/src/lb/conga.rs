//! CONGA (Alizadeh et al., SIGCOMM'14): congestion-aware flowlet placement at the source leaf,
//! with the congestion of each leaf-to-leaf path measured in the data plane and fed back.
//!
//! * Every switch keeps a DRE (discounting rate estimator, [`super::dre`]) per fabric-facing
//!   egress: a register `X` that grows by the wire bytes of each data packet sent and is
//!   multiplied by `1 - alpha` every `t_dre` (at multiples of `t_dre` since time zero). Its
//!   quantized value, `floor(8 X / (C tau) 2^q_bits)` with `tau = t_dre / alpha` and `C` the
//!   port's rate, is the port's congestion metric (about `2^q_bits` at full utilization; not
//!   clamped, as in both reference codes, but saturating at 255 in the 8-bit header field).
//! * A data packet leaving its source leaf on an uplink gets the overlay fields: LBTag (the
//!   uplink's index, in byte 0 of `path_tag`), CE = the uplink's metric, and one feedback entry
//!   (FB_LBTag, FB_Metric) taken from the leaf's Congestion-From-Leaf table for the packet's
//!   destination leaf. Every later fabric hop folds CE := max(CE, its egress metric).
//! * Where the packet leaves the destination leaf towards the host (`on_dequeue` at a
//!   host-facing egress, after it crossed the fabric), the leaf stores CE in
//!   Congestion-From-Leaf[source leaf][LBTag] and the feedback in
//!   Congestion-To-Leaf[source leaf][FB_LBTag].
//! * The source leaf keeps a flowlet table (hash of the 5-tuple, as LetFlow); a new flowlet
//!   takes the candidate uplink with the least max(local metric, Congestion-To-Leaf metric),
//!   among `sampled_paths` consecutive candidates from a random offset, ties at random.
//! * Table entries older than `aging` count as 0 (To-Leaf) or absent (From-Leaf).
//!
//! Feedback rides on reverse-direction data packets, and also on ACKs and NACKs if
//! `feedback_on_acks` (switches then show them to `on_dequeue`). Not modelled: the overlay's
//! header bytes (the fields ride in `LbHeader`, which costs no wire bytes), CONGA in more than
//! two tiers (in a fat-tree the edge switch chooses its uplink and the upper tiers hash),
//! spines' DRE counting control packets (DREs count data packets only, as conweave-ns3).
//! Parameter defaults follow conweave-ns3, the RDMA reference; its implementation choices are
//! options (defaults: the paper's): a sampling window that does not wrap (`sample_window`),
//! random feedback entries (`feedback`), aging by a periodic sweep (`aging_sweep`), and every
//! step done as the packet is routed on arrival instead of as it leaves (`timing`, through
//! `on_ingress`; LBTag then rides in `meta`). `[lb] preset = "conweave-ns3"` sets them all;
//! `docs/schemes/conga.md` compares the sources.

use super::dre::PortDres;
use super::{
    flow_hash, pick_index, Capabilities, Ingress, LbCtx, LbFabric, PortDir, SchemeConfig,
    SwitchScheme, NO_TOR,
};
use crate::check::{check_positive_time, check_range};
use crate::engine::mix64;
use crate::packet::{Packet, PacketKind};
use crate::units::Time;
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// `[lb] preset = "conweave-ns3"`: CONGA as the RDMA reference simulator runs it
/// (`conga-routing.cc`, `network-load-balance.cc` at 100 Gbps; `docs/schemes/conga.md`).
pub const PRESET_CONWEAVE_NS3: &str = r#"
t_dre = "50us"
alpha = 0.2
q_bits = 3
flowlet_timeout = "100us"
aging = "500us"
sampled_paths = 4
feedback_on_acks = false
sample_window = "no_wrap"
feedback = "random"
aging_sweep = true
timing = "arrival"
"#;

/// CONGA parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CongaConfig {
    /// DRE decrement period T_dre (default 50 us, as conweave-ns3; ns3-load-balance uses
    /// 30 us at 10 Gbps). Valid: > 0.
    pub t_dre: Time,
    /// DRE decay factor: every `t_dre` the register is multiplied by `1 - alpha` (default 0.2,
    /// as both reference codes). Valid: 0 < alpha <= 1.
    pub alpha: f64,
    /// Bits of the quantized congestion metric (default 3, as the paper and both codes).
    /// Valid: 1..=8.
    pub q_bits: u32,
    /// A gap longer than this starts a new flowlet (default 100 us, as conweave-ns3; the paper
    /// and ns3-load-balance's driver use 500 us at 10 Gbps). Valid: > 0.
    pub flowlet_timeout: Time,
    /// Remote metrics not refreshed for this long are forgotten (default 500 us, as
    /// conweave-ns3; the paper and ns3-load-balance use 10 ms). Valid: > 0.
    pub aging: Time,
    /// Candidate uplinks compared per new flowlet: a window of this many consecutive
    /// candidates from a random offset (default 4, as conweave-ns3; all candidates if there
    /// are no more). Set it to 255 to compare all, as the paper and ns3-load-balance.
    /// Valid: 1..=255.
    pub sampled_paths: u32,
    /// Piggyback feedback on ACKs and NACKs too, not only on reverse-direction data (default
    /// false, as conweave-ns3, where RDMA ACKs bypass CONGA; the paper's overlay carries
    /// feedback on every packet between two leaves, ACKs included).
    pub feedback_on_acks: bool,
    /// Entries of the source leaf's flowlet table (default 65,536, the table size of the CONGA
    /// hardware design; the simulators use unbounded maps). Valid: 1..=16,777,216.
    pub table_size: u32,
    /// Where the window of `sampled_paths` candidates may start (default `wrap`: anywhere,
    /// wrapping around, so every candidate is sampled equally often; `no_wrap`: only where the
    /// window fits without wrapping, as conweave-ns3's `GetBestPath`, which samples the middle
    /// candidates more often than the first and last).
    pub sample_window: SampleWindow,
    /// How the destination leaf picks the From-Leaf entry it feeds back on a packet (default
    /// `round_robin`, preferring entries changed since last fed back, as the paper and
    /// ns3-load-balance; `random`: uniformly among the fresh entries, as conweave-ns3).
    pub feedback: FeedbackChoice,
    /// Age the remote tables by a sweep every `aging` (at multiples of `aging` since time
    /// zero), as both reference simulators do, instead of continuously (default false): an
    /// entry then lasts until the first sweep more than `aging` after its last write, i.e.
    /// between `aging` and twice `aging`.
    pub aging_sweep: bool,
    /// When a switch measures and stamps a data packet (default `dequeue`: as the packet leaves
    /// the egress, so the DRE counts bytes sent, as the paper's hardware does; `arrival`: when
    /// the packet is routed at its arrival, as conweave-ns3, so the DRE counts bytes routed to
    /// the egress, queued ones included, and the destination leaf reads the packet before its
    /// last queue).
    pub timing: CongaTiming,
}

/// Where a window of sampled candidates may start (see [`CongaConfig::sample_window`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleWindow {
    /// Anywhere among the candidates, wrapping around: uniform.
    #[default]
    Wrap,
    /// Only where the window fits without wrapping (conweave-ns3).
    NoWrap,
}

/// How a destination leaf picks the feedback entry (see [`CongaConfig::feedback`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedbackChoice {
    /// Round robin, entries changed since last fed back first (paper, ns3-load-balance).
    #[default]
    RoundRobin,
    /// Uniformly at random among the fresh entries (conweave-ns3).
    Random,
}

/// When CONGA measures and stamps a data packet at a switch (see [`CongaConfig::timing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CongaTiming {
    /// As the packet leaves the egress queue (paper).
    #[default]
    Dequeue,
    /// As the packet is routed on arrival (conweave-ns3).
    Arrival,
}

impl Default for CongaConfig {
    fn default() -> Self {
        CongaConfig {
            t_dre: Time::from_us(50),
            alpha: 0.2,
            q_bits: 3,
            flowlet_timeout: Time::from_us(100),
            aging: Time::from_us(500),
            sampled_paths: 4,
            feedback_on_acks: false,
            table_size: 65_536,
            sample_window: SampleWindow::Wrap,
            feedback: FeedbackChoice::RoundRobin,
            aging_sweep: false,
            timing: CongaTiming::Dequeue,
        }
    }
}

impl SchemeConfig for CongaConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        for (key, t, example) in [
            ("t_dre", self.t_dre, "50us"),
            ("flowlet_timeout", self.flowlet_timeout, "100us"),
            ("aging", self.aging, "500us"),
        ] {
            check_positive_time(&format!("lb.{key}"), t, example)?;
        }
        let unit = (Excluded(0.0), Included(1.0));
        check_range("lb.alpha", self.alpha, unit, "(CONGA default 0.2)")?;
        check_range("lb.q_bits", self.q_bits, 1..=8, "bits (CONGA default 3)")?;
        let paths = "paths (CONGA default 4)";
        check_range("lb.sampled_paths", self.sampled_paths, 1..=255, paths)?;
        super::check_table_size(self.table_size)
    }

    fn capabilities(&self) -> Capabilities {
        let arrival = self.timing == CongaTiming::Arrival;
        Capabilities {
            fabric: true,
            dequeue: !arrival,
            ingress: arrival,
            acks: self.feedback_on_acks,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Conga::new(self, fabric))
    }
}

// `LbHeader.meta` of a data packet: bits 0..8 CE, 8..16 FB_Metric, 16..24 FB_LBTag + 1
// (0: no feedback); with `timing = "arrival"` also bits 24..32 LBTag + 1 (with `dequeue`
// LBTag rides in byte 0 of `path_tag`). ACKs carrying feedback use the same layout with
// CE = 0.
const CE_MASK: u32 = 0xff;
const TAG_SHIFT: u32 = 24;

/// Packs CE and an optional feedback entry (LBTag, metric) into `meta`.
pub fn pack_meta(ce: u8, feedback: Option<(u8, u8)>) -> u32 {
    let fb = match feedback {
        Some((tag, metric)) => (tag as u32 + 1) << 16 | (metric as u32) << 8,
        None => 0,
    };
    fb | ce as u32
}

/// CE of a packed `meta`.
pub fn meta_ce(meta: u32) -> u8 {
    (meta & CE_MASK) as u8
}

/// Feedback entry (LBTag, metric) of a packed `meta`, if any.
pub fn meta_feedback(meta: u32) -> Option<(u8, u8)> {
    let tag = (meta >> 16) & 0xff;
    (tag != 0).then(|| ((tag - 1) as u8, (meta >> 8) as u8))
}

/// A remote metric with the time it was last written (`u64::MAX`: never).
#[derive(Clone, Copy, Debug)]
struct Remote {
    metric: u8,
    /// Not yet fed back since last written (From-Leaf only).
    changed: bool,
    stamp: u64,
}

const NEVER: Remote = Remote {
    metric: 0,
    changed: false,
    stamp: u64::MAX,
};

/// One switch's CONGA state.
#[derive(Clone, Debug)]
pub struct Conga {
    timeout: u64,
    aging: u64,
    sampled: usize,
    /// `sample_window = "no_wrap"`.
    no_wrap: bool,
    /// `feedback = "random"`.
    random_feedback: bool,
    aging_sweep: bool,
    /// `timing = "arrival"`.
    arrival: bool,
    /// `feedback_on_acks`.
    acks: bool,
    salt: u64,
    tor_of: Vec<u32>,
    my_tor: Option<u32>,
    port_dir: Vec<PortDir>,
    /// Per local port: its index among the uplinks (`u8::MAX`: not an uplink).
    up_index: Vec<u8>,
    /// Per uplink index: its local port.
    up_port: Vec<u16>,
    /// Uplinks of this leaf (entries per leaf in the remote tables).
    width: usize,
    /// The DRE of each local port.
    dres: PortDres,
    /// `to_leaf[tor * width + uplink]`: congestion of my path via `uplink` to leaf `tor`.
    to_leaf: Vec<Remote>,
    /// `from_leaf[tor * width + tag]`: congestion of leaf `tor`'s path `tag` towards me.
    from_leaf: Vec<Remote>,
    /// Round-robin pointer of the feedback to each leaf.
    fb_next: Vec<u8>,
    /// Flowlet table as in LetFlow: bits 0..64 last packet time, 64..80 port + 1.
    flowlets: Vec<u128>,
}

impl Conga {
    pub fn new(cfg: &CongaConfig, fabric: &LbFabric) -> Conga {
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        let mut up_index = vec![u8::MAX; fabric.port_dir.len()];
        let mut up_port = Vec::new();
        for (i, d) in fabric.port_dir.iter().enumerate() {
            if *d == PortDir::Up && up_port.len() < u8::MAX as usize - 1 {
                up_index[i] = up_port.len() as u8;
                up_port.push(i as u16);
            }
        }
        let width = up_port.len();
        let is_leaf = fabric.my_tor.is_some();
        let tables = if is_leaf {
            fabric.tors as usize * width
        } else {
            0
        };
        Conga {
            timeout: cfg.flowlet_timeout.ps(),
            aging: cfg.aging.ps(),
            sampled: cfg.sampled_paths as usize,
            no_wrap: cfg.sample_window == SampleWindow::NoWrap,
            random_feedback: cfg.feedback == FeedbackChoice::Random,
            aging_sweep: cfg.aging_sweep,
            arrival: cfg.timing == CongaTiming::Arrival,
            acks: cfg.feedback_on_acks,
            salt: mix64(fabric.node as u64 ^ 0xc0a9_a000),
            tor_of: fabric.tor_of.clone(),
            my_tor: fabric.my_tor,
            port_dir: fabric.port_dir.clone(),
            up_index,
            up_port,
            width,
            dres: PortDres::new(cfg.t_dre, cfg.alpha, cfg.q_bits, &fabric.port_rate_bps),
            to_leaf: vec![NEVER; tables],
            from_leaf: vec![NEVER; tables],
            fb_next: vec![0; if is_leaf { fabric.tors as usize } else { 0 }],
            flowlets: if is_leaf {
                vec![0u128; cfg.table_size as usize]
            } else {
                Vec::new()
            },
        }
    }

    #[inline]
    fn tor(&self, node: u32) -> u32 {
        self.tor_of.get(node as usize).copied().unwrap_or(NO_TOR)
    }

    /// Whether a remote entry still counts at `now`: written within `aging`, or, with
    /// `aging_sweep`, not yet older than `aging` at the last sweep (the multiples of `aging`).
    #[inline]
    fn fresh(&self, r: &Remote, now: u64) -> bool {
        let checked = if self.aging_sweep {
            now / self.aging * self.aging
        } else {
            now
        };
        r.stamp != u64::MAX && checked.saturating_sub(r.stamp) <= self.aging
    }

    /// Quantized congestion metric of local egress `port` at `now`.
    fn local_metric(&mut self, now: u64, port: u16) -> u32 {
        self.dres.metric(now, port)
    }

    /// Congestion of the path to leaf `tor` via local `port`: the max of the local metric and
    /// the fed-back remote one (0 once aged).
    fn path_metric(&mut self, now: u64, tor: u32, port: u16) -> u32 {
        let local = self.local_metric(now, port);
        let up = self.up_index[port as usize];
        if up == u8::MAX {
            return local;
        }
        let r = self.to_leaf[tor as usize * self.width + up as usize];
        let remote = if self.fresh(&r, now) {
            r.metric as u32
        } else {
            0
        };
        local.max(remote)
    }

    /// The candidate with the least path metric among a window of `sampled` consecutive
    /// candidates from a random offset (all if there are no more); ties at random. The window
    /// wraps around the candidates, or with `no_wrap` starts only where it fits.
    fn least_congested(&mut self, ctx: &mut LbCtx, dst_tor: u32, candidates: &[u16]) -> u16 {
        let n = candidates.len();
        let k = self.sampled.min(n);
        let start = match (k < n, self.no_wrap) {
            (false, _) => 0,
            (true, false) => ctx.rng.gen_range(0..n),
            (true, true) => ctx.rng.gen_range(0..=n - k),
        };
        let (mut best, mut ties, mut choice) = (u32::MAX, 0u32, candidates[start]);
        for i in 0..k {
            let port = candidates[(start + i) % n];
            let m = self.path_metric(ctx.now.ps(), dst_tor, port);
            if m < best {
                (best, ties, choice) = (m, 1, port);
            } else if m == best {
                ties += 1;
                if ctx.rng.gen_range(0..ties) == 0 {
                    choice = port;
                }
            }
        }
        choice
    }

    /// One feedback entry for leaf `tor`: round robin over its From-Leaf entries, preferring
    /// those changed since they were last fed back (the paper, ns3-load-balance), or with
    /// `feedback = "random"` one of the fresh entries uniformly (conweave-ns3).
    fn pick_feedback(
        &mut self,
        rng: &mut crate::engine::Rng,
        now: u64,
        tor: u32,
    ) -> Option<(u8, u8)> {
        if tor == NO_TOR || self.width == 0 {
            return None;
        }
        let base = tor as usize * self.width;
        if self.random_feedback {
            let fresh = |tag: &usize| self.fresh(&self.from_leaf[base + tag], now);
            let count = (0..self.width).filter(fresh).count();
            if count == 0 {
                return None;
            }
            let tag = (0..self.width).filter(fresh).nth(rng.gen_range(0..count))?;
            return Some((tag as u8, self.from_leaf[base + tag].metric));
        }
        let start = self.fb_next[tor as usize] as usize;
        let mut any = None;
        let mut pick = None;
        for i in 0..self.width {
            let tag = (start + i) % self.width;
            let r = self.from_leaf[base + tag];
            if self.fresh(&r, now) {
                if r.changed {
                    pick = Some(tag);
                    break;
                }
                any = any.or(Some(tag));
            }
        }
        let tag = pick.or(any)?;
        self.fb_next[tor as usize] = ((tag + 1) % self.width) as u8;
        let r = &mut self.from_leaf[base + tag];
        r.changed = false;
        Some((tag as u8, r.metric))
    }

    /// Stores a feedback entry from leaf `tor` about my uplink `tag`.
    fn store_feedback(&mut self, now: u64, tor: u32, (tag, metric): (u8, u8)) {
        if tor != NO_TOR && (tag as usize) < self.width {
            self.to_leaf[tor as usize * self.width + tag as usize] = Remote {
                metric,
                changed: false,
                stamp: now,
            };
        }
    }
}

impl Conga {
    /// The egress of a data packet at a switch that is not its source leaf: a hash.
    #[inline]
    fn hashed(&self, pkt: &Packet, candidates: &[u16]) -> u16 {
        candidates[pick_index(flow_hash(pkt, self.salt), candidates.len())]
    }

    /// The source leaf's flowlet decision towards leaf `dst_tor`: the flowlet's port if the
    /// packet continues one, else the least congested candidate; the entry is refreshed.
    fn decide(&mut self, ctx: &mut LbCtx, pkt: &Packet, dst_tor: u32, candidates: &[u16]) -> u16 {
        let now = ctx.now.ps();
        let slot = (flow_hash(pkt, self.salt) % self.flowlets.len() as u64) as usize;
        let entry = self.flowlets[slot];
        let (last, stored) = (entry as u64, (entry >> 64) as u16);
        let port =
            if stored != 0 && now - last <= self.timeout && candidates.contains(&(stored - 1)) {
                stored - 1
            } else {
                self.least_congested(ctx, dst_tor, candidates)
            };
        self.flowlets[slot] = now as u128 | ((port as u128 + 1) << 64);
        port
    }

    /// The destination leaf reads a data packet that crossed the fabric from leaf `src_tor`
    /// on its path `tag` (LBTag + 1, 0 if none): CE into Congestion-From-Leaf, the feedback
    /// it carries into Congestion-To-Leaf.
    fn receive(&mut self, now: u64, src_tor: u32, tag: usize, meta: u32) {
        if src_tor != NO_TOR && tag != 0 && tag <= self.width {
            self.from_leaf[src_tor as usize * self.width + tag - 1] = Remote {
                metric: meta_ce(meta),
                changed: true,
                stamp: now,
            };
        }
        if let Some(fb) = meta_feedback(meta) {
            self.store_feedback(now, src_tor, fb);
        }
    }
}

impl SwitchScheme for Conga {
    #[inline]
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let dst_tor = self.tor(pkt.dst);
        if self.my_tor.is_none() || dst_tor == NO_TOR || self.width == 0 {
            // Not a source leaf (a spine, or an upper tier of a fat-tree): hash.
            return self.hashed(pkt, candidates);
        }
        // With `timing = "arrival"` the decision was taken in `on_ingress`.
        let tag = pkt.lb.meta >> TAG_SHIFT;
        if self.arrival && pkt.hop == 0 && tag != 0 {
            let port = self.up_port[tag as usize - 1];
            if candidates.contains(&port) {
                return port;
            }
        }
        self.decide(ctx, pkt, dst_tor, candidates)
    }

    /// With `timing = "arrival"` (conweave-ns3), all of CONGA's work on a data packet happens
    /// as it is routed: the source leaf decides, counts the packet in the uplink's DRE and
    /// stamps LBTag, CE and feedback; a later fabric hop counts it in its egress's DRE and
    /// folds CE; the destination leaf reads it. Nothing with `timing = "dequeue"` (the switch
    /// does not call it then: [`Capabilities::ingress`] is off).
    fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        if !self.arrival {
            return Ingress::Forward;
        }
        let now = ctx.now.ps();
        if self.my_tor.is_some() && pkt.hop == 0 {
            let dst_tor = self.tor(pkt.dst);
            if dst_tor == NO_TOR || Some(dst_tor) == self.my_tor || self.width == 0 {
                return Ingress::Forward;
            }
            let port = self.decide(ctx, pkt, dst_tor, candidates);
            let up = self.up_index[port as usize];
            if up != u8::MAX {
                self.dres.add(now, port, pkt.wire_bytes as u64);
                let q = self.local_metric(now, port).min(255) as u8;
                let fb = self.pick_feedback(ctx.rng, now, dst_tor);
                pkt.lb.meta = pack_meta(q, fb) | (up as u32 + 1) << TAG_SHIFT;
            }
        } else if self.my_tor.is_some() {
            let tag = (pkt.lb.meta >> TAG_SHIFT) as usize;
            self.receive(now, self.tor(pkt.src), tag, pkt.lb.meta);
        } else {
            let port = self.hashed(pkt, candidates);
            if matches!(
                self.port_dir[port as usize],
                PortDir::Up | PortDir::Down | PortDir::Flat
            ) {
                self.dres.add(now, port, pkt.wire_bytes as u64);
                let ce = meta_ce(pkt.lb.meta).max(self.local_metric(now, port).min(255) as u8);
                pkt.lb.meta = (pkt.lb.meta & !CE_MASK) | ce as u32;
            }
        }
        Ingress::Forward
    }

    /// `dre_metric`: per switch-facing egress `port` (key), the quantized congestion metric of
    /// its DRE (utilization x 2^q_bits; what new flowlets are placed by). At a leaf also
    /// `path_metric`: per (destination leaf `t`, uplink `port`), key `t << 16 | port`, the
    /// path's metric as a new flowlet sees it (the larger of the local one and the fed-back
    /// one, which counts 0 once aged).
    fn samples(&self, now: Time, emit: &mut dyn FnMut(&'static str, u32, f64)) {
        let now = now.ps();
        let local = |port: usize| self.dres.metric_at(now, port as u16);
        for (port, dir) in self.port_dir.iter().enumerate() {
            if matches!(dir, PortDir::Up | PortDir::Down | PortDir::Flat) {
                emit("dre_metric", port as u32, local(port) as f64);
            }
        }
        let Some(me) = self.my_tor else { return };
        for t in (0..self.fb_next.len() as u32).filter(|&t| t != me) {
            for (port, &up) in self.up_index.iter().enumerate() {
                if up == u8::MAX {
                    continue;
                }
                let r = self.to_leaf[t as usize * self.width + up as usize];
                let remote = if self.fresh(&r, now) {
                    r.metric as u32
                } else {
                    0
                };
                emit(
                    "path_metric",
                    t << 16 | port as u32,
                    local(port).max(remote) as f64,
                );
            }
        }
    }

    /// With `timing = "dequeue"`, all of CONGA's work on a data packet happens as it leaves
    /// (as `on_ingress` describes for `"arrival"`); with `feedback_on_acks`, ACKs and NACKs
    /// carry feedback. Nothing for a data packet with `timing = "arrival"`, nor for an ACK or
    /// NACK without `feedback_on_acks` (the switch does not show them then:
    /// [`Capabilities::dequeue`], [`Capabilities::acks`]).
    #[inline]
    fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet, _word: &mut u64) {
        let shown = if pkt.kind == PacketKind::Data {
            !self.arrival
        } else {
            self.acks
        };
        if !shown {
            return;
        }
        let now = ctx.now.ps();
        let dir = self.port_dir[port as usize];
        let leaf = self.my_tor.is_some();
        match (pkt.kind, dir) {
            (PacketKind::Data, PortDir::Up | PortDir::Down | PortDir::Flat) => {
                self.dres.add(now, port, pkt.wire_bytes as u64);
                let q = self.local_metric(now, port).min(255) as u8;
                let up = self.up_index[port as usize];
                if leaf && pkt.hop == 0 && up != u8::MAX {
                    // Source leaf: LBTag, CE and one feedback entry for the destination leaf.
                    let fb = self.pick_feedback(ctx.rng, now, self.tor(pkt.dst));
                    pkt.lb.meta = pack_meta(q, fb);
                    pkt.lb.path_tag = (pkt.lb.path_tag & !0xff) | (up as u32 + 1);
                } else {
                    let ce = meta_ce(pkt.lb.meta).max(q);
                    pkt.lb.meta = (pkt.lb.meta & !CE_MASK) | ce as u32;
                }
            }
            (PacketKind::Data, PortDir::Host) if leaf && pkt.hop > 0 => {
                // Destination leaf: the packet crossed the fabric.
                let tag = (pkt.lb.path_tag & 0xff) as usize;
                self.receive(now, self.tor(pkt.src), tag, pkt.lb.meta);
            }
            (PacketKind::Ack | PacketKind::Nack, PortDir::Up) if leaf => {
                let fb = self.pick_feedback(ctx.rng, now, self.tor(pkt.dst));
                pkt.lb.meta = pack_meta(0, fb);
            }
            (PacketKind::Ack | PacketKind::Nack, PortDir::Host) if leaf => {
                if let Some(fb) = meta_feedback(pkt.lb.meta) {
                    self.store_feedback(now, self.tor(pkt.src), fb);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::TestSwitch;

    #[test]
    fn meta_packs_ce_and_feedback() {
        assert_eq!(meta_feedback(pack_meta(5, None)), None);
        let m = pack_meta(200, Some((3, 7)));
        assert_eq!((meta_ce(m), meta_feedback(m)), (200, Some((3, 7))));
        let m = pack_meta(0, Some((0, 0)));
        assert_eq!(meta_feedback(m), Some((0, 0)));
    }

    #[test]
    fn validation_names_the_key_and_range() {
        let bad = |c: CongaConfig| c.validate().unwrap_err();
        assert!(bad(CongaConfig {
            t_dre: Time::ZERO,
            ..Default::default()
        })
        .starts_with("lb.t_dre: must be above 0"));
        assert!(bad(CongaConfig {
            aging: Time::ZERO,
            ..Default::default()
        })
        .starts_with("lb.aging: must be above 0"));
        assert_eq!(
            bad(CongaConfig {
                alpha: 1.5,
                ..Default::default()
            }),
            "lb.alpha: 1.5 is out of range; use 0 < alpha <= 1 (CONGA default 0.2)"
        );
        assert_eq!(
            bad(CongaConfig {
                q_bits: 0,
                ..Default::default()
            }),
            "lb.q_bits: 0 is out of range; use 1..=8 bits (CONGA default 3)"
        );
        assert!(bad(CongaConfig {
            sampled_paths: 0,
            ..Default::default()
        })
        .starts_with("lb.sampled_paths: 0 is out of range"));
        assert!(CongaConfig::default().validate().is_ok());
    }

    /// A two-leaf, four-spine fabric seen from one leaf: hosts 0..2 under leaf 4 (ToR 0),
    /// hosts 2..4 under leaf 5 (ToR 1); ports 0, 1 to hosts, 2..6 up to spines.
    fn leaf_fabric(node: u32, my_tor: u32) -> LbFabric {
        LbFabric {
            node,
            nodes: 10,
            tor_of: vec![0, 0, 1, 1, NO_TOR, NO_TOR, NO_TOR, NO_TOR, NO_TOR, NO_TOR],
            tors: 2,
            my_tor: Some(my_tor),
            port_dir: vec![
                PortDir::Host,
                PortDir::Host,
                PortDir::Up,
                PortDir::Up,
                PortDir::Up,
                PortDir::Up,
            ],
            port_rate_bps: vec![100_000_000_000; 6],
            ..Default::default()
        }
    }

    /// A spine: four downlinks.
    fn spine_fabric() -> LbFabric {
        LbFabric {
            my_tor: None,
            port_dir: vec![PortDir::Down; 4],
            port_rate_bps: vec![100_000_000_000; 4],
            ..leaf_fabric(6, 0)
        }
    }

    fn data(src: u32, dst: u32, sport: u16) -> Packet {
        let mut p = Packet::new(PacketKind::Data);
        (p.src, p.dst, p.sport, p.dport, p.wire_bytes) = (src, dst, sport, 100, 1048);
        p
    }

    /// 100 Gbps, tau = 250 us: 8 * 2^3 / (1e11 * 250e-6) = 2.56e-6 per byte.
    fn bytes_for_metric(m: f64) -> u64 {
        (m / 8.0 * 1e11 * 250e-6 / 8.0) as u64
    }

    #[test]
    fn ce_is_the_max_along_the_path_and_the_source_leaf_stamps_tag_and_feedback() {
        let cfg = CongaConfig::default();
        let mut src = Conga::new(&cfg, &leaf_fabric(4, 0));
        let mut spine = Conga::new(&cfg, &spine_fabric());
        let mut w = TestSwitch::new(0);
        // Load spine port 1 to a metric of about 5: 5/8 of tau's worth of bytes at line rate.
        spine.dres.set_bytes(1, bytes_for_metric(5.2) as f64);
        let mut p = data(0, 2, 1);
        src.on_dequeue(&mut w.ctx(0), 3, &mut p, &mut 0);
        // Source leaf: LBTag = uplink index 1 (port 3) + 1 in byte 0, CE = its own metric (0),
        // no feedback known yet.
        assert_eq!(p.lb.path_tag & 0xff, 2);
        assert_eq!((meta_ce(p.lb.meta), meta_feedback(p.lb.meta)), (0, None));
        p.hop = 1;
        spine.on_dequeue(&mut w.ctx(100), 1, &mut p, &mut 0);
        assert_eq!(meta_ce(p.lb.meta), 5, "spine folds its larger metric");
        // A hop with a smaller metric does not lower CE.
        spine.on_dequeue(&mut w.ctx(200), 2, &mut p, &mut 0);
        assert_eq!(meta_ce(p.lb.meta), 5);
    }

    #[test]
    fn feedback_round_trip_steers_new_flowlets_and_ages_out() {
        let cfg = CongaConfig::default();
        let mut a = Conga::new(&cfg, &leaf_fabric(4, 0));
        let mut b = Conga::new(&cfg, &leaf_fabric(5, 1));
        let mut w = TestSwitch::new(0);
        // A packet from leaf A (host 0) to leaf B (host 2) went up A's uplink 2 (port 4) and
        // arrived with CE 6: B records it.
        let mut p = data(0, 2, 1);
        a.on_dequeue(&mut w.ctx(0), 4, &mut p, &mut 0);
        p.lb.meta = pack_meta(6, None);
        p.hop = 2;
        b.on_dequeue(&mut w.ctx(3_000), 0, &mut p, &mut 0);
        // B's next packet to A (reverse data) carries the entry back: tag 2, metric 6.
        let mut r = data(2, 0, 9);
        b.on_dequeue(&mut w.ctx(4_000), 2, &mut r, &mut 0);
        assert_eq!(meta_feedback(r.lb.meta), Some((2, 6)));
        // Fed back once: the next packet falls back to round robin over fresh entries, which is
        // the same (only) entry, now unchanged.
        let mut r2 = data(2, 0, 9);
        b.on_dequeue(&mut w.ctx(4_100), 2, &mut r2, &mut 0);
        assert_eq!(meta_feedback(r2.lb.meta), Some((2, 6)));
        // A receives it at its host-facing egress and stores it.
        r.hop = 2;
        a.on_dequeue(&mut w.ctx(7_000), 0, &mut r, &mut 0);
        assert_eq!(a.to_leaf[a.width + 2].metric, 6);
        // New flowlets from A to B now avoid uplink 2 (port 4); all others have metric 0.
        let cands = [2u16, 3, 4, 5];
        for s in 0..200 {
            let port = a.choose(&mut w.ctx(8_000), &data(0, 2, 100 + s), &cands);
            assert_ne!(port, 4);
        }
        // After the aging time the entry counts as 0 again and port 4 is chosen sometimes.
        let later = 8_000 + 501_000;
        let hits = (0..200)
            .filter(|s| a.choose(&mut w.ctx(later), &data(0, 2, 1000 + s), &cands) == 4)
            .count();
        assert!(hits > 20, "{hits}");
        // Aged From-Leaf entries are not fed back.
        let mut r3 = data(2, 0, 9);
        b.on_dequeue(&mut w.ctx(3_000 + 501_000), 2, &mut r3, &mut 0);
        assert_eq!(meta_feedback(r3.lb.meta), None);
    }

    #[test]
    fn feedback_prefers_changed_entries_in_round_robin() {
        let cfg = CongaConfig::default();
        let mut b = Conga::new(&cfg, &leaf_fabric(5, 1));
        let mut w = TestSwitch::new(0);
        for (tag, ce) in [(1u32, 3u8), (3, 4)] {
            let mut p = data(0, 2, 1);
            p.lb.path_tag = tag + 1;
            p.lb.meta = pack_meta(ce, None);
            p.hop = 2;
            b.on_dequeue(&mut w.ctx(0), 0, &mut p, &mut 0);
        }
        let fb = |b: &mut Conga, w: &mut TestSwitch| {
            let mut r = data(2, 0, 9);
            b.on_dequeue(&mut w.ctx(30), 2, &mut r, &mut 0);
            meta_feedback(r.lb.meta)
        };
        assert_eq!(fb(&mut b, &mut w), Some((1, 3)));
        assert_eq!(fb(&mut b, &mut w), Some((3, 4)));
        // Both fed back: plain round robin.
        assert_eq!(fb(&mut b, &mut w), Some((1, 3)));
        // Tag 1 changes: it goes next, ahead of tag 3, which the pointer reaches first.
        let mut p = data(0, 2, 1);
        (p.lb.path_tag, p.lb.meta, p.hop) = (2, pack_meta(7, None), 2);
        b.on_dequeue(&mut w.ctx(20), 0, &mut p, &mut 0);
        assert_eq!(fb(&mut b, &mut w), Some((1, 7)));
        assert_eq!(fb(&mut b, &mut w), Some((3, 4)));
    }

    /// A leaf with eight uplinks (ports 2..10) and two hosts, ToR 0 of two.
    fn wide_leaf(node: u32, my_tor: u32) -> LbFabric {
        let mut f = leaf_fabric(node, my_tor);
        f.port_dir = [vec![PortDir::Host; 2], vec![PortDir::Up; 8]].concat();
        f.port_rate_bps = vec![100_000_000_000; 10];
        f
    }

    #[test]
    fn a_window_that_does_not_wrap_favours_the_middle_candidates() {
        // All paths idle: a new flowlet takes a random one of its window of 4. Wrapping
        // windows pick each of 8 candidates with probability 1/8; windows starting only at
        // 0..=4 (conweave-ns3) pick the first with 1/20 and the fourth with 1/5.
        let counts = |window| {
            let cfg = CongaConfig {
                sample_window: window,
                ..Default::default()
            };
            let mut a = Conga::new(&cfg, &wide_leaf(4, 0));
            let mut w = TestSwitch::new(0);
            let cands: Vec<u16> = (2..10).collect();
            let mut counts = [0u32; 10];
            for s in 0..4000 {
                counts[a.choose(&mut w.ctx(0), &data(0, 2, s), &cands) as usize] += 1;
            }
            counts
        };
        let wrap = counts(SampleWindow::Wrap);
        assert!(wrap[2..].iter().all(|c| (400..600).contains(c)), "{wrap:?}");
        let no_wrap = counts(SampleWindow::NoWrap);
        for (port, expected) in [(2, 200), (3, 400), (4, 600), (5, 800), (6, 800), (9, 200)] {
            let c = no_wrap[port] as i32;
            assert!((c - expected).abs() < 100, "port {port}: {no_wrap:?}");
        }
    }

    #[test]
    fn random_feedback_draws_among_fresh_entries() {
        let cfg = CongaConfig {
            feedback: FeedbackChoice::Random,
            ..Default::default()
        };
        let mut b = Conga::new(&cfg, &leaf_fabric(5, 1));
        let mut w = TestSwitch::new(0);
        let record = |b: &mut Conga, w: &mut TestSwitch, tag: u32, ce: u8, t: u64| {
            let mut p = data(0, 2, 1);
            (p.lb.path_tag, p.lb.meta, p.hop) = (tag + 1, pack_meta(ce, None), 2);
            b.on_dequeue(&mut w.ctx(t), 0, &mut p, &mut 0);
        };
        record(&mut b, &mut w, 1, 3, 0);
        record(&mut b, &mut w, 3, 4, 0);
        // At 400 us the entries of tags 1 and 3 are fresh: round robin would alternate them;
        // random draws repeat one about every other time.
        let picks: Vec<_> = (0..200)
            .map(|_| {
                let mut r = data(2, 0, 9);
                b.on_dequeue(&mut w.ctx(400_000), 2, &mut r, &mut 0);
                meta_feedback(r.lb.meta).unwrap()
            })
            .collect();
        let ones = picks.iter().filter(|f| **f == (1, 3)).count();
        assert!((70..130).contains(&ones), "{picks:?}");
        assert!(picks.iter().all(|f| *f == (1, 3) || *f == (3, 4)));
        assert!(picks.windows(2).filter(|w| w[0] == w[1]).count() > 60);
        // At 700 us those two have aged out: only tag 0 (written at 600 us) is fed back.
        record(&mut b, &mut w, 0, 5, 600_000);
        let mut r = data(2, 0, 9);
        b.on_dequeue(&mut w.ctx(700_000), 2, &mut r, &mut 0);
        assert_eq!(meta_feedback(r.lb.meta), Some((0, 5)));
    }

    #[test]
    fn an_aging_sweep_keeps_entries_until_the_first_sweep_past_their_age() {
        let fed_back = |sweep: bool, now_us: u64| {
            let cfg = CongaConfig {
                aging_sweep: sweep,
                ..Default::default()
            };
            let mut b = Conga::new(&cfg, &leaf_fabric(5, 1));
            let mut w = TestSwitch::new(0);
            let mut p = data(0, 2, 1);
            (p.lb.path_tag, p.lb.meta, p.hop) = (2, pack_meta(6, None), 2);
            b.on_dequeue(&mut w.ctx(100_000), 0, &mut p, &mut 0);
            let mut r = data(2, 0, 9);
            b.on_dequeue(&mut w.ctx(now_us * 1000), 2, &mut r, &mut 0);
            meta_feedback(r.lb.meta).is_some()
        };
        // Written at 100 us, aging 500 us: continuously aged after 600 us; swept (every
        // 500 us) only at 1000 us, the first sweep more than 500 us after the write.
        assert!(fed_back(false, 600) && !fed_back(false, 601));
        assert!(fed_back(true, 999) && !fed_back(true, 1000));
    }

    #[test]
    fn at_arrival_the_dre_counts_routed_bytes_and_the_packet_is_stamped_at_once() {
        let cfg = CongaConfig {
            timing: CongaTiming::Arrival,
            ..Default::default()
        };
        assert_eq!(
            (cfg.capabilities().ingress, cfg.capabilities().dequeue),
            (true, false)
        );
        let mut a = Conga::new(&cfg, &leaf_fabric(4, 0));
        let mut spine = Conga::new(&cfg, &spine_fabric());
        let mut b = Conga::new(&cfg, &leaf_fabric(5, 1));
        let mut w = TestSwitch::new(0);
        let cands = [2u16, 3, 4, 5];
        // A burst of one flow arrives at once: routed, none sent yet.
        let mut first = None;
        for _ in 0..2000 {
            let mut p = data(0, 2, 1);
            a.on_ingress(&mut w.ctx(10), &mut p, &cands);
            let port = a.choose(&mut w.ctx(10), &p, &cands);
            assert_eq!(*first.get_or_insert(port), port, "one flowlet, one port");
            // LBTag (uplink index + 1) rides in meta; the path tag stays free.
            assert_eq!((p.lb.meta >> TAG_SHIFT) as u16, port - 2 + 1);
            assert_eq!(p.lb.path_tag, 0);
        }
        let busy = first.unwrap();
        // The uplink's DRE counted the routed (queued) bytes: 2000 * 1048 B of the 3.125 MB
        // that 250 us (tau) at 100 Gbps hold, metric 5; new flowlets avoid it.
        assert_eq!(a.local_metric(20_000, busy), 5);
        for s in 0..100 {
            let mut p = data(1, 3, 100 + s);
            a.on_ingress(&mut w.ctx(20), &mut p, &cands);
            assert_ne!(a.choose(&mut w.ctx(20), &p, &cands), busy);
        }
        // A spine folds its routed metric into CE as the packet arrives; the destination
        // leaf reads LBTag and CE as it arrives.
        spine.dres.set_bytes(1, bytes_for_metric(6.5) as f64);
        let mut p = data(0, 2, 1);
        a.on_ingress(&mut w.ctx(30), &mut p, &cands);
        p.hop = 1;
        spine.on_ingress(&mut w.ctx(40), &mut p, &[1]);
        assert_eq!(meta_ce(p.lb.meta), 6);
        p.hop = 2;
        b.on_ingress(&mut w.ctx(50), &mut p, &[0]);
        let tag = (busy - 2) as usize;
        assert_eq!(b.from_leaf[tag].metric, 6, "From-Leaf[leaf 0][LBTag]");
    }

    #[test]
    fn flowlets_stick_and_local_congestion_is_avoided() {
        let cfg = CongaConfig::default();
        let mut a = Conga::new(&cfg, &leaf_fabric(4, 0));
        let mut w = TestSwitch::new(0);
        // Uplink port 2 carries traffic: its metric is about 4; the others are idle.
        a.dres.set_bytes(2, bytes_for_metric(4.5) as f64);
        let cands = [2u16, 3, 4, 5];
        for s in 0..100 {
            assert_ne!(a.choose(&mut w.ctx(10), &data(0, 2, s), &cands), 2);
        }
        // A flowlet keeps its port while packets come within the timeout.
        let first = a.choose(&mut w.ctx(20), &data(1, 3, 7), &cands);
        a.dres.set_bytes(first, bytes_for_metric(7.5) as f64);
        for t in 1..50 {
            assert_eq!(
                a.choose(&mut w.ctx(20 + t * 1_000), &data(1, 3, 7), &cands),
                first
            );
        }
        // Spines (not a ToR) hash.
        let mut s = Conga::new(&cfg, &spine_fabric());
        let p = s.choose(&mut w.ctx(0), &data(0, 2, 1), &cands);
        for t in 0..10 {
            assert_eq!(
                s.choose(&mut w.ctx(t * 1_000_000), &data(0, 2, 1), &cands),
                p
            );
        }
    }
}
