//! Load-balancing schemes that run in the switches, and the interface they plug into.
//!
//! A scheme is one file in this folder: a config struct (deserialized from the spec's `[lb]`
//! table, every field with a documented default) and a state struct, one instance per switch.
//! The closed enums [`LbConfig`] and [`SwitchLb`] register and dispatch them; adding a scheme
//! means adding one variant to each (see `docs/adding-a-scheme.md`).
//!
//! What a scheme sees and may do, through [`LbCtx`]:
//! * read-only views of its switch's ports: per-priority queue bytes, PFC pause state, rate;
//! * the switch's own RNG stream;
//! * [`LbAction`]s applied by the switch after the call: send a scheme message to a neighbour
//!   (a real packet that is serialized and propagates on the link, in the strict-priority
//!   control queue), or set a timer.
//!
//! Hooks: `on_start` (once, at time zero), `choose` (a data packet needs an egress among
//! equal-cost candidates), `on_dequeue`
//! (a data packet leaves an egress queue; the scheme may stamp its `lb` header), `on_control`
//! (a scheme message from a neighbour arrived) and `on_timer`. Data packets carry the
//! [`LbHeader`] (a path tag chosen by a sender or source switch, and one scheme-defined
//! field) and a hop count. Control packets (ACK, NACK, CNP, PFC) are never routed by a scheme:
//! switches route them with ECMP, as the RDMA references do. A scheme whose
//! [`LbConfig::sees_acks`] is true (CONGA with `feedback_on_acks`) is also shown ACKs and
//! NACKs in `on_dequeue`, to piggyback on them or read what they carry; for every other scheme
//! the switch does not even test for it on the data path.
//!
//! What a scheme knows of the fabric is given once, at construction, in an [`LbFabric`]: the
//! node count, and for schemes that ask ([`LbConfig::needs_fabric`]) the ToR of every host and
//! the direction (up, down, host) of each of its ports, as a real switch is configured with
//! its tunnel endpoints and port roles.
//!
//! Recirculation: with `[switch.loopback]` every switch has a loopback link whose two ends are
//! two of its ports. `choose` may return `ctx.loopback` instead of a candidate; the packet is
//! then serialized on the loopback, charged to the buffer like any packet, and comes back in
//! at the other end (`ctx.loopback + 1`, visible as `pkt.ingress_port`) to be routed again.
//! A loopback egress does not count as a hop in `pkt.hop`.
//!
//! Wrapping: a scheme may wrap another (RLB wraps any switch-side scheme, `[lb.inner]`). The
//! wrapper's own messages travel as [`LbAction::SendOuterControl`] and
//! [`LbAction::SendOuterRouted`] and arrive at `on_outer_control`, so the inner scheme's
//! messages and the wrapper's never mix; its header fields are the packet's `outer` (RLB's
//! piggybacked timestamps, read at arrival by `on_outer_arrival`). A scheme whose [`LbConfig::sees_pinned`] is true is
//! asked to `choose` even for a data packet whose path the sender pinned (see
//! [`pinned_choice`]): the pinned candidate becomes its input instead of the switch's answer.
//! A wrapper's timer tokens have bit 63 set ([`OUTER_TIMER`]); inner schemes never set it.

pub mod clove;
pub mod conga;
pub mod conweave;
pub mod drb;
pub mod drill;
pub mod ecmp;
pub mod hermes;
pub mod host;
pub mod hula;
pub mod letflow;
pub mod presto;
#[cfg(test)]
pub mod probe;
pub mod rlb;
pub mod rps;

use crate::engine::Rng;
use crate::mmu::Mmu;
use crate::packet::{LbHeader, Packet};
use crate::port::PortState;
use crate::units::Time;
use serde::{Deserialize, Serialize};

pub use clove::{Clove, CloveConfig, CloveMode};
pub use conga::{Conga, CongaConfig};
pub use conweave::{ConWeave, ConWeaveConfig};
pub use drb::{Drb, DrbConfig, DrbOrder};
pub use drill::{Drill, DrillConfig, DrillQueue};
pub use ecmp::{Ecmp, EcmpConfig};
pub use hermes::{Hermes, HermesConfig};
pub use hula::{Hula, HulaConfig};
pub use letflow::{LetFlow, LetFlowConfig, LetFlowDecision};
pub use presto::{Presto, PrestoConfig, Resequencing};
pub use rlb::{Rlb, RlbConfig, RlbCounters, RttMeasurement, WarningEnd};
pub use rps::{Rps, RpsConfig};

/// Largest accepted `table_size` of a scheme's flow or flowlet table.
pub const MAX_TABLE_SIZE: u32 = 1 << 24;

/// Checks a scheme's `table_size` (entries of a fixed-size table indexed by flow hash).
fn check_table_size(size: u32) -> Result<(), String> {
    if (1..=MAX_TABLE_SIZE).contains(&size) {
        Ok(())
    } else {
        Err(format!(
            "lb.table_size: {size} is out of range; use 1..={MAX_TABLE_SIZE} entries (e.g. 65536)"
        ))
    }
}

/// Something a scheme asks its switch to do once the hook returns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LbAction {
    /// Send a scheme message out of local port `port`; it arrives at the neighbour's
    /// `on_control` after serialization and propagation.
    SendControl { port: u16, header: LbHeader },
    /// Call `on_timer(token)` at time `at`.
    SetTimer { at: Time, token: u64 },
    /// Send a scheme message across the fabric to the ToR of host `to_host` (it reaches that
    /// switch's `on_control`): a 64-byte packet routed like an ACK (ECMP hash of `sport`,
    /// `dport` at every hop, strict-priority control queue), taking link time at every hop.
    SendRouted {
        to_host: u32,
        sport: u16,
        dport: u16,
        header: LbHeader,
    },
    /// Move the packets held in reorder queue `queue` of local egress `port` (see
    /// [`Ingress::Hold`]) into that egress's queue, in the order they were held.
    Release { port: u16, queue: u16 },
    /// Like `SendControl`, but a message of the wrapping scheme (RLB): it arrives at the
    /// neighbour's `on_outer_control`, never at the inner scheme.
    SendOuterControl { port: u16, header: LbHeader },
    /// A 64-byte message of the wrapping scheme routed to the ToR of host `to_host` (it
    /// arrives at that switch's `on_outer_control`). It leaves through local port `via` if
    /// given (then ECMP at every later hop, as `SendRouted`), with source address `src` (a
    /// node id: a probe may carry the addresses of the data packet it stands for). With
    /// `priority` 0 it rides the strict-priority control queue, uncharged; with a data
    /// priority it queues, is charged to the buffer and is paused like that priority's data
    /// (charged at the sending switch to the ingress of `via`).
    SendOuterRouted {
        via: Option<u16>,
        src: u32,
        to_host: u32,
        sport: u16,
        dport: u16,
        priority: u8,
        header: LbHeader,
    },
}

/// Bit of the timer tokens of a wrapping scheme (RLB); an inner scheme's tokens never have it.
pub const OUTER_TIMER: u64 = 1 << 63;

/// The candidate the sender pinned for a data packet at its current hop, if any: byte `hop`
/// of `path_tag` (first four hops only), `c + 1` for candidate `c` modulo their number.
#[inline]
pub fn pinned_choice(pkt: &Packet, candidates: &[u16]) -> Option<u16> {
    let pinned = (pkt.lb.path_tag >> (8 * pkt.hop.min(3) as u32)) & 0xff;
    if pinned != 0 && pkt.hop < 4 {
        Some(candidates[(pinned as usize - 1) % candidates.len()])
    } else {
        None
    }
}

/// What `on_ingress` decides for a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ingress {
    /// Route and enqueue it as usual.
    Forward,
    /// Admit it to the buffer (charged to its ingress as usual) but hold it in reorder queue
    /// `queue` of its egress until an [`LbAction::Release`] of that queue.
    Hold { queue: u16 },
}

/// What a hook can see and do.
pub struct LbCtx<'a> {
    pub now: Time,
    /// Node id of the switch.
    pub node: u32,
    /// The switch's ports, by local index.
    pub ports: &'a [PortState],
    /// Local index of the switch's loopback egress, if it has one: a scheme may return it
    /// from `choose` to recirculate the packet, which comes back in at the loopback's other
    /// end (`loopback + 1`) after the link's serialization and delay.
    pub loopback: Option<u16>,
    /// Read-only view of the switch's buffer: ingress occupancy per (port, priority) and the
    /// PFC XOFF threshold (`None` only in unit tests without a switch).
    pub mmu: Option<&'a Mmu>,
    pub rng: &'a mut Rng,
    pub actions: &'a mut Vec<LbAction>,
}

/// Where a switch port leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortDir {
    /// To a host: this switch is the host's ToR.
    Host,
    /// To a switch farther from the hosts (a leaf's uplink to a spine).
    Up,
    /// To a switch nearer the hosts (a spine's downlink to a leaf).
    Down,
    /// To a switch as far from the hosts as this one (irregular topologies only).
    Flat,
    /// One end of this switch's loopback link.
    Loopback,
}

/// Marks "no ToR" in [`LbFabric::tor_of`].
pub const NO_TOR: u32 = u32::MAX;

/// What a scheme knows of the fabric when it is built for one switch.
#[derive(Clone, Debug, Default)]
pub struct LbFabric {
    /// Node id of the switch.
    pub node: u32,
    /// Node ids are `0..nodes`.
    pub nodes: u32,
    /// Filled only if the scheme [`LbConfig::needs_fabric`] (empty otherwise):
    /// `tor_of[n]` is the ToR index (`0..tors`, in node order) of the switch host `n` is
    /// attached to, [`NO_TOR`] for switches.
    pub tor_of: Vec<u32>,
    /// Number of ToRs (switches with at least one host).
    pub tors: u32,
    /// This switch's ToR index, if hosts are attached to it.
    pub my_tor: Option<u32>,
    /// Direction of each local port, by hop distance to the nearest host.
    pub port_dir: Vec<PortDir>,
    /// Line rate of each local port, bits per second.
    pub port_rate_bps: Vec<u64>,
    /// Propagation delay of each local port's link, picoseconds.
    pub port_delay_ps: Vec<u64>,
    /// `tor_hops[t]`: switch hops from this switch to ToR `t` (0 for itself).
    pub tor_hops: Vec<u32>,
}

/// The `[lb]` table of a spec: which scheme, with its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
// Written as a table with `scheme = "<variant>"` (see `crate::tagged`).
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum LbConfig {
    /// Per-flow hashing of the 5-tuple with a per-switch salt.
    Ecmp(EcmpConfig),
    /// Random packet spraying over equal-cost next hops.
    Rps(RpsConfig),
    /// Per-packet round robin per destination (DRB).
    Drb(DrbConfig),
    /// Flowlet switching with a random egress per flowlet (LetFlow).
    #[serde(rename = "letflow")]
    LetFlow(LetFlowConfig),
    /// Per-packet least-loaded of d samples and m remembered egresses (DRILL).
    Drill(DrillConfig),
    /// Congestion-aware flowlet placement at the source leaf with leaf-to-leaf feedback (CONGA).
    Conga(CongaConfig),
    /// Hop-by-hop flowlet routing on the best next hop learnt from utilization probes (HULA).
    Hula(HulaConfig),
    /// RTT-probed rerouting at the source ToR with reordering at the destination ToR (ConWeave).
    #[serde(rename = "conweave")]
    ConWeave(ConWeaveConfig),
    /// Host-side: flowcells round robin over the paths, resequenced at the receiver (Presto).
    Presto(PrestoConfig),
    /// Host-side: paths sensed from ACK echoes and probes (RTT, ECN, losses), classified good,
    /// gray, bad or failed; cautious rerouting (Hermes).
    Hermes(HermesConfig),
    /// Reordering-robust building block around another switch-side scheme (RLB/RLB*): PFC
    /// prediction with warnings to the upstream switch, reroute or recirculate on a warning.
    Rlb(RlbConfig),
    /// Host-side: flowlets on paths drawn by weights that ECN echoes lower (Clove).
    Clove(CloveConfig),
    /// Test-only scheme exercising recirculation, timers and scheme messages.
    #[cfg(test)]
    Probe(probe::ProbeConfig),
}

crate::tagged::internally_tagged!(LbConfig, "scheme");

impl Default for LbConfig {
    fn default() -> Self {
        LbConfig::Ecmp(EcmpConfig::default())
    }
}

/// Name, one-line description and defaults of every registered scheme.
pub fn registry() -> Vec<(&'static str, &'static str, LbConfig)> {
    vec![
        (
            "ecmp",
            "per-flow 5-tuple hash over equal-cost next hops, salted per switch",
            LbConfig::Ecmp(EcmpConfig::default()),
        ),
        (
            "rps",
            "random packet spraying: a uniformly random equal-cost next hop per packet",
            LbConfig::Rps(RpsConfig::default()),
        ),
        (
            "drb",
            "per-packet round robin over equal-cost next hops, one counter per destination",
            LbConfig::Drb(DrbConfig::default()),
        ),
        (
            "letflow",
            "flowlet switching: a new uniformly random next hop after a gap longer than the timeout",
            LbConfig::LetFlow(LetFlowConfig::default()),
        ),
        (
            "drill",
            "per packet, the least-loaded egress queue among d random samples and m remembered",
            LbConfig::Drill(DrillConfig::default()),
        ),
        (
            "conga",
            "flowlets placed by the source leaf on the least congested path (DRE utilization, max along the path, fed back leaf to leaf)",
            LbConfig::Conga(CongaConfig::default()),
        ),
        (
            "hula",
            "flowlets routed hop by hop on the best next hop towards the destination ToR, learnt from periodic utilization probes",
            LbConfig::Hula(HulaConfig::default()),
        ),
        (
            "conweave",
            "the source ToR reroutes a flow when its RTT probe is late (epochs, TAIL/CLEAR, ECN-filtered paths); the destination ToR restores order in bounded reorder queues",
            LbConfig::ConWeave(ConWeaveConfig::default()),
        ),
        (
            "presto",
            "host-side: 64 KB flowcells sent round robin over the paths; the receiver resequences between flowcells",
            LbConfig::Presto(PrestoConfig::default()),
        ),
        (
            "hermes",
            "host-side: paths sensed from ACK echoes (RTT, ECN) and rack probes, classed good/gray/bad/failed; flows move only off bad paths when small gains are clear, or at once off failed ones",
            LbConfig::Hermes(HermesConfig::default()),
        ),
        (
            "rlb",
            "wraps a switch-side scheme ([lb.inner]): predicts PFC from ingress queue growth and warns the upstream switch, which reroutes or recirculates packets bound for a warned path (RLB; adaptive = true: RLB*)",
            LbConfig::Rlb(RlbConfig::default()),
        ),
        (
            "clove",
            "host-side: flowlets on paths drawn by weight; a path's weight is cut by a third on an ECN echo, spread over the others (or uniform: edge_flowlet)",
            LbConfig::Clove(CloveConfig::default()),
        ),
    ]
}

impl LbConfig {
    pub fn name(&self) -> &'static str {
        match self {
            LbConfig::Ecmp(_) => "ecmp",
            LbConfig::Rps(_) => "rps",
            LbConfig::Drb(_) => "drb",
            LbConfig::LetFlow(_) => "letflow",
            LbConfig::Drill(_) => "drill",
            LbConfig::Conga(_) => "conga",
            LbConfig::Hula(_) => "hula",
            LbConfig::ConWeave(_) => "conweave",
            LbConfig::Presto(_) => "presto",
            LbConfig::Hermes(_) => "hermes",
            LbConfig::Rlb(_) => "rlb",
            LbConfig::Clove(_) => "clove",
            #[cfg(test)]
            LbConfig::Probe(_) => "probe",
        }
    }

    /// Checks the parameters that their types alone cannot, before any simulation. The
    /// message names the key (`lb.<key>`) and the valid range.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            LbConfig::LetFlow(c) => c.validate(),
            LbConfig::Drill(c) => c.validate(),
            LbConfig::Conga(c) => c.validate(),
            LbConfig::Hula(c) => c.validate(),
            LbConfig::ConWeave(c) => c.validate(),
            LbConfig::Presto(c) => c.validate(),
            LbConfig::Hermes(c) => c.validate(),
            LbConfig::Rlb(c) => c.validate(),
            LbConfig::Clove(c) => c.validate(),
            _ => Ok(()),
        }
    }

    /// Whether instances need the ToR map and port directions of [`LbFabric`] (computing
    /// them costs a pass over the fabric per switch, so other schemes skip it).
    pub fn needs_fabric(&self) -> bool {
        matches!(
            self,
            LbConfig::Conga(_) | LbConfig::Hula(_) | LbConfig::ConWeave(_) | LbConfig::Rlb(_)
        )
    }

    /// Whether switches ask the scheme to `choose` for data packets whose path the sender
    /// pinned, the pinned candidate being the scheme's input (RLB, which may override it on a
    /// PFC warning). False for every other scheme: the switch honours the pin itself.
    pub fn sees_pinned(&self) -> bool {
        matches!(self, LbConfig::Rlb(_))
    }

    /// Whether the scheme recirculates packets and so needs `[switch.loopback]` (RLB with
    /// `recirculation = true`).
    pub fn needs_loopback(&self) -> bool {
        matches!(self, LbConfig::Rlb(c) if c.recirculation)
    }

    /// Whether switches call the scheme's `on_ingress` for every data packet (ConWeave).
    /// False for every other scheme: their data path has no extra call.
    pub fn uses_ingress(&self) -> bool {
        match self {
            LbConfig::ConWeave(_) => true,
            LbConfig::Rlb(c) => c.inner.uses_ingress(),
            _ => false,
        }
    }

    /// Reorder queues the scheme may hold packets in, per host-facing egress of a ToR (0: the
    /// scheme never holds packets, and no reorder-queue records are kept).
    pub fn reorder_queues_per_port(&self) -> u32 {
        match self {
            LbConfig::ConWeave(c) => c.reorder_queues,
            LbConfig::Rlb(c) => c.inner.reorder_queues_per_port(),
            _ => 0,
        }
    }

    /// Whether switches show ACKs and NACKs to the scheme's `on_dequeue` (CONGA with
    /// `feedback_on_acks`). False for every other scheme: their data path has no extra test.
    pub fn sees_acks(&self) -> bool {
        match self {
            LbConfig::Conga(c) => c.feedback_on_acks,
            LbConfig::Rlb(c) => c.inner.sees_acks() || c.piggybacks(),
            _ => false,
        }
    }

    /// Whether switches show the scheme every data packet, ACK and NACK that arrives carrying
    /// an [`crate::packet::OuterHeader`] field (`on_outer_arrival`): RLB with piggybacked RTT
    /// timestamps. False for every other scheme: their data path has no extra test.
    pub fn reads_outer_header(&self) -> bool {
        matches!(self, LbConfig::Rlb(c) if c.piggybacks())
    }

    /// Whether part of the scheme runs at the hosts ([`LbConfig::host_side`]).
    pub fn runs_at_hosts(&self) -> bool {
        match self {
            LbConfig::Presto(_) | LbConfig::Hermes(_) | LbConfig::Clove(_) => true,
            LbConfig::Rlb(c) => c.inner.runs_at_hosts(),
            _ => false,
        }
    }

    /// The host-side part of the scheme for a run of `flows` flows over `fabric` (`None`: the
    /// scheme runs in the switches only).
    pub fn host_side(&self, flows: usize, fabric: &host::HostFabric) -> Option<host::HostLb> {
        match self {
            LbConfig::Presto(c) => Some(host::HostLb::Presto(Box::new(Presto::new(c, flows)))),
            LbConfig::Hermes(c) => Some(host::HostLb::Hermes(Box::new(Hermes::new(
                c, fabric, flows,
            )))),
            // RLB over a host-side scheme: the hosts run it, RLB takes their paths as input.
            LbConfig::Rlb(c) => c.inner.host_side(flows, fabric),
            LbConfig::Clove(c) => Some(host::HostLb::Clove(Box::new(Clove::new(c, flows)))),
            _ => None,
        }
    }

    /// The resequencing buffer the scheme puts in front of the receivers' transport, if any.
    pub fn resequencing(&self) -> Option<Resequencing> {
        match self {
            LbConfig::Presto(c) => c.resequencing(),
            LbConfig::Rlb(c) => c.inner.resequencing(),
            _ => None,
        }
    }

    /// The instance of the scheme for switch `fabric.node` (node ids are `0..fabric.nodes`;
    /// schemes with per-destination state size their tables with it).
    ///
    /// Panics if the config is invalid ([`LbConfig::validate`]; specs are validated first).
    pub fn instantiate(&self, fabric: &LbFabric) -> SwitchLb {
        let (node, nodes) = (fabric.node, fabric.nodes);
        match self {
            LbConfig::Ecmp(c) => SwitchLb::Ecmp(Ecmp::new(c, node)),
            LbConfig::Rps(_) => SwitchLb::Rps(Rps),
            LbConfig::Drb(c) => SwitchLb::Drb(Drb::new(c, nodes)),
            LbConfig::LetFlow(c) => SwitchLb::LetFlow(LetFlow::new(c, node)),
            LbConfig::Drill(c) => SwitchLb::Drill(Drill::new(c, nodes)),
            LbConfig::Conga(c) => SwitchLb::Conga(Box::new(Conga::new(c, fabric))),
            LbConfig::Hula(c) => SwitchLb::Hula(Box::new(Hula::new(c, fabric))),
            LbConfig::ConWeave(c) => SwitchLb::ConWeave(Box::new(ConWeave::new(c, fabric))),
            // Host-side schemes: switches honour the senders' path tags and hash the rest.
            LbConfig::Presto(_) | LbConfig::Hermes(_) | LbConfig::Clove(_) => {
                SwitchLb::Ecmp(Ecmp::new(&EcmpConfig::default(), node))
            }
            LbConfig::Rlb(c) => SwitchLb::Rlb(Box::new(Rlb::new(c, fabric))),
            #[cfg(test)]
            LbConfig::Probe(_) => SwitchLb::Probe(probe::Probe::default()),
        }
    }
}

/// One switch's instance of the configured scheme.
#[derive(Clone, Debug)]
pub enum SwitchLb {
    Ecmp(Ecmp),
    Rps(Rps),
    Drb(Drb),
    LetFlow(LetFlow),
    Drill(Drill),
    Conga(Box<Conga>),
    Hula(Box<Hula>),
    ConWeave(Box<ConWeave>),
    Rlb(Box<Rlb>),
    #[cfg(test)]
    Probe(probe::Probe),
}

impl SwitchLb {
    /// A wrapping scheme (RLB with `inner_follows`) sent the data packet `pkt` out of `port`
    /// instead of this scheme's choice: the scheme remembers `port` as if it had chosen it.
    /// Only DRILL and LetFlow remember a port (RLB's validation admits no other).
    pub fn adopt(&mut self, pkt: &Packet, port: u16) {
        match self {
            SwitchLb::Drill(s) => s.adopt(pkt.dst, port),
            SwitchLb::LetFlow(s) => s.adopt(pkt, port),
            _ => unreachable!("RLB lets only DRILL and LetFlow follow a reroute"),
        }
    }

    /// Picks the egress (a local port index) of a data packet among `candidates` (never
    /// empty; in the order of the switch's ports).
    #[inline]
    pub fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        match self {
            SwitchLb::Ecmp(s) => s.choose(pkt, candidates),
            SwitchLb::Rps(s) => s.choose(ctx.rng, candidates),
            SwitchLb::Drb(s) => s.choose(ctx, pkt, candidates),
            SwitchLb::LetFlow(s) => s.choose(ctx, pkt, candidates),
            SwitchLb::Drill(s) => s.choose(ctx, pkt, candidates),
            SwitchLb::Conga(s) => s.choose(ctx, pkt, candidates),
            SwitchLb::Hula(s) => s.choose(ctx, pkt, candidates),
            SwitchLb::ConWeave(s) => s.choose(pkt, candidates),
            SwitchLb::Rlb(s) => s.choose(ctx, pkt, candidates),
            #[cfg(test)]
            SwitchLb::Probe(s) => s.choose(ctx, pkt, candidates),
        }
    }

    /// A data packet (and, if the scheme [`LbConfig::sees_acks`], an ACK or NACK) leaves
    /// egress `port`; the scheme may stamp its `lb` header.
    #[inline]
    pub fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet) {
        match self {
            SwitchLb::LetFlow(s) => s.on_dequeue(port, pkt),
            SwitchLb::Conga(s) => s.on_dequeue(ctx, port, pkt),
            SwitchLb::Hula(s) => s.on_dequeue(ctx, port, pkt),
            SwitchLb::Rlb(s) => s.on_dequeue(ctx, port, pkt),
            SwitchLb::Ecmp(_)
            | SwitchLb::Rps(_)
            | SwitchLb::Drb(_)
            | SwitchLb::Drill(_)
            | SwitchLb::ConWeave(_) => {}
            #[cfg(test)]
            SwitchLb::Probe(_) => {}
        }
    }

    /// A data packet arrived at this switch (only for schemes whose
    /// [`LbConfig::uses_ingress`] is true); `candidates` are its equal-cost egresses. The
    /// scheme may rewrite the packet's `lb` header (which routing then honours) and hold it.
    pub fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        match self {
            SwitchLb::ConWeave(s) => s.on_ingress(ctx, pkt, candidates),
            SwitchLb::Rlb(s) => s.inner.on_ingress(ctx, pkt, candidates),
            _ => Ingress::Forward,
        }
    }

    /// A packet carrying an [`crate::packet::OuterHeader`] field arrived
    /// (only for schemes whose [`LbConfig::reads_outer_header`] is true): the wrapper reads
    /// and clears what is meant for this switch.
    #[inline]
    pub fn on_outer_arrival(&mut self, ctx: &mut LbCtx, pkt: &mut Packet) {
        if let SwitchLb::Rlb(s) = self {
            s.on_arrival(ctx, pkt);
        }
    }

    /// A scheme message from the neighbour on local port `port` arrived.
    pub fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        match self {
            SwitchLb::Hula(s) => s.on_control(ctx, port, header),
            SwitchLb::ConWeave(s) => s.on_control(ctx, port, header),
            SwitchLb::Rlb(s) => s.inner.on_control(ctx, port, header),
            SwitchLb::Conga(_)
            | SwitchLb::Ecmp(_)
            | SwitchLb::Rps(_)
            | SwitchLb::Drb(_)
            | SwitchLb::LetFlow(_)
            | SwitchLb::Drill(_) => {
                let _ = (ctx, port, header);
            }
            #[cfg(test)]
            SwitchLb::Probe(s) => s.on_control(ctx, port, header),
        }
    }

    /// A message of the wrapping scheme ([`LbAction::SendOuterControl`] from the neighbour on
    /// local port `port`, or [`LbAction::SendOuterRouted`]) arrived.
    pub fn on_outer_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        if let SwitchLb::Rlb(s) = self {
            s.on_own_control(ctx, port, header);
        }
    }

    /// Called once per switch at time zero, before any event (periodic work starts here).
    pub fn on_start(&mut self, ctx: &mut LbCtx) {
        match self {
            SwitchLb::Hula(s) => s.on_start(ctx),
            SwitchLb::Rlb(s) => s.on_start(ctx),
            _ => {
                let _ = ctx;
            }
        }
    }

    /// A timer set with [`LbAction::SetTimer`] fired.
    pub fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        match self {
            SwitchLb::Hula(s) => s.on_timer(ctx, token),
            SwitchLb::ConWeave(s) => s.on_timer(ctx, token),
            SwitchLb::Rlb(s) => s.on_timer(ctx, token),
            SwitchLb::Conga(_)
            | SwitchLb::Ecmp(_)
            | SwitchLb::Rps(_)
            | SwitchLb::Drb(_)
            | SwitchLb::LetFlow(_)
            | SwitchLb::Drill(_) => {
                let _ = (ctx, token);
            }
            #[cfg(test)]
            SwitchLb::Probe(s) => s.on_timer(ctx, token),
        }
    }
}

/// The ECMP hash used for control packets and by hash-based schemes: the 5-tuple (addresses
/// are node ids, the protocol is always UDP) mixed with a per-switch salt.
#[inline]
pub fn flow_hash(pkt: &Packet, salt: u64) -> u64 {
    use crate::engine::mix64;
    let tuple = (pkt.src as u64) << 32 | pkt.dst as u64;
    let ports = (pkt.sport as u64) << 16 | pkt.dport as u64;
    mix64(mix64(tuple ^ salt.rotate_left(17)) ^ ports)
}

/// A switch's surroundings for unit tests of a scheme's hooks: its RNG stream and the actions
/// the hooks ask for.
#[cfg(test)]
pub(crate) struct TestSwitch {
    pub node: u32,
    pub rng: Rng,
    pub actions: Vec<LbAction>,
}

#[cfg(test)]
impl TestSwitch {
    pub fn new(node: u32) -> TestSwitch {
        TestSwitch {
            node,
            rng: crate::engine::rng_stream(3, crate::engine::StreamKind::Switch, 1),
            actions: Vec::new(),
        }
    }

    /// The context of a hook called at `now_ns` nanoseconds, with no port views.
    pub fn ctx(&mut self, now_ns: u64) -> LbCtx<'_> {
        LbCtx {
            now: Time::from_ns(now_ns),
            node: self.node,
            ports: &[],
            loopback: None,
            mmu: None,
            rng: &mut self.rng,
            actions: &mut self.actions,
        }
    }
}
