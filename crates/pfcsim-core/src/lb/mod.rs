//! Load-balancing schemes, and the interface they plug into.
//!
//! A scheme is one file (or folder) here and one row of the registry ([`schemes!`] below):
//! a config struct, deserialized from the spec's `[lb]` table with every field defaulted and
//! documented, that implements [`SchemeConfig`]; and the per-switch state, one instance per
//! switch, that implements [`SwitchScheme`]. A scheme whose part runs at the hosts also has a
//! [`host::HostScheme`]. Every hook has a default that does nothing, so a scheme writes only
//! the hooks it uses, and the switch calls the optional ones only for schemes whose
//! [`Capabilities`] ask for them (the data path of every other scheme has no extra call or
//! test): a hook whose flag is off must do nothing, which `capability_tests.rs` checks for
//! every registered scheme. `docs/guides/adding-a-scheme.md` walks through adding one.
//!
//! What a scheme sees and may do, through [`LbCtx`]:
//! * read-only views of its switch's ports ([`PortState`]: per-priority queue bytes, PFC pause
//!   state, rate, delay, peer) and of its buffer ([`Mmu`]);
//! * the switch's own RNG stream;
//! * actions carried out by the switch after the hook: send a scheme message to a neighbour
//!   or to another ToR (real packets that take link time), set a timer, release held packets.
//!
//! Hooks ([`SwitchScheme`]): `on_start` (once, at time zero), `choose` (a data packet needs an
//! egress among equal-cost candidates), `on_dequeue` ([`Capabilities::dequeue`]: a data
//! packet, and with [`Capabilities::acks`] an ACK or NACK, leaves an egress queue; the scheme
//! may stamp its `lb` header), `on_ingress` ([`Capabilities::ingress`]: a data packet arrived; the scheme
//! may hold it in a reorder queue), `on_arrival` ([`Capabilities::scheme_word`]: a packet
//! carrying the scheme's own header word arrived), `on_control` (a scheme message arrived),
//! `on_timer`. Data packets carry the [`LbHeader`] (a path tag chosen by a sender or source
//! switch, and one scheme-defined field) and a hop count. Control packets (ACK, NACK, CNP,
//! PFC) are never routed by a scheme: switches route them with ECMP, as the RDMA references
//! do. A scheme's counters ([`SwitchScheme::counters`]) are summed over the switches and
//! written to the run's results under the scheme's name.
//!
//! What a scheme knows of the fabric is given once, at construction, in an [`LbFabric`]: the
//! node count, and for schemes that ask ([`Capabilities::fabric`]) the ToR of every host and
//! the direction (up, down, host) of each of its ports, as a real switch is configured with
//! its tunnel endpoints and port roles.
//!
//! Recirculation: with `[switch.loopback]` every switch has a loopback link whose two ends are
//! two of its ports. `choose` may return `ctx.loopback` instead of a candidate; the packet is
//! then serialized on the loopback, charged to the buffer like any packet, and comes back in
//! at the other end (`ctx.loopback + 1`, visible as `pkt.ingress_port()`) to be routed again.
//! A loopback egress does not count as a hop in `pkt.hop`.
//!
//! Wrapping ([`wrap`]): a scheme may wrap another (RLB wraps any switch-side scheme,
//! `[lb.inner]`) and hold it as an [`Inner`]. Scheme messages and timers carry the
//! [`Layer`] of the scheme that sent or set them, so the wrapper's and the inner scheme's
//! never mix: the switch hands those of the inner layer straight to the inner scheme. A
//! scheme may also keep a 64-bit header word of its own beside each packet
//! ([`Capabilities::scheme_word`]: RLB's piggybacked timestamps), which no other run carries.
//! A scheme whose [`Capabilities::pinned`] is true is asked to `choose` even for a data
//! packet whose path the sender pinned (see [`pinned_choice`]): the pinned candidate becomes
//! its input instead of the switch's answer.

#[cfg(test)]
mod capability_tests;
pub mod clb;
pub mod clove;
pub mod conga;
pub mod conweave;
pub mod drb;
pub mod dre;
pub mod drill;
pub mod ecmp;
pub mod flb;
pub mod hermes;
pub mod host;
pub mod hula;
pub mod lbodsn;
pub mod letflow;
pub mod plb;
pub mod presto;
#[cfg(test)]
pub mod probe;
pub mod reorder;
pub mod rlb;
pub mod rps;
pub mod stamps;

pub mod wrap;

use crate::check::check_range;
use crate::engine::Rng;
use crate::metrics::AlertRecord;
use crate::mmu::Mmu;
use crate::packet::{LbHeader, Packet};
use crate::port::PortState;
use crate::units::Time;
use host::{HostFabric, HostScheme};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;

pub use crate::packet::Layer;
pub use wrap::Inner;

pub use clb::{Clb, ClbConfig};
pub use clove::{Clove, CloveConfig, CloveMode};
pub use conga::{Conga, CongaConfig};
pub use conweave::{ConWeave, ConWeaveConfig};
pub use drb::{Drb, DrbConfig, DrbOrder};
pub use drill::{Drill, DrillConfig, DrillQueue};
pub use ecmp::{Ecmp, EcmpConfig};
pub use flb::{Flb, FlbConfig};
pub use hermes::{Hermes, HermesConfig};
pub use hula::{Hula, HulaConfig};
pub use lbodsn::{Lbodsn, LbodsnConfig};
pub use letflow::{LetFlow, LetFlowConfig, LetFlowDecision};
pub use plb::{Plb, PlbConfig};
pub use presto::{Presto, PrestoConfig, Resequencing};
pub use rlb::{Rlb, RlbConfig, RlbCounters, RttMeasurement, WarningEnd};
pub use rps::{Rps, RpsConfig};

/// Largest accepted `table_size` of a scheme's flow or flowlet table.
pub const MAX_TABLE_SIZE: u32 = 1 << 24;

/// Checks a scheme's `table_size` (entries of a fixed-size table indexed by flow hash).
fn check_table_size(size: u32) -> Result<(), String> {
    check_range(
        "lb.table_size",
        size,
        1..=MAX_TABLE_SIZE,
        "entries (e.g. 65536)",
    )
}

/// Something a scheme asks its switch to do once the hook returns (made by the methods of
/// [`LbCtx`], which tag it with the layer of the hook).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LbAction {
    /// Send a scheme message out of local port `port`; it arrives at the neighbour's
    /// `on_control` after serialization and propagation.
    SendControl {
        port: u16,
        header: LbHeader,
        layer: Layer,
    },
    /// Call `on_timer(token)` at time `at`.
    SetTimer { at: Time, token: u64, layer: Layer },
    /// Send a scheme message across the fabric to the ToR of a host.
    SendRouted {
        message: RoutedMessage,
        layer: Layer,
    },
    /// Move the packets held in reorder queue `queue` of local egress `port` (see
    /// [`Ingress::Hold`]) into that egress's queue, in the order they were held.
    Release { port: u16, queue: u16 },
}

/// A 64-byte scheme message routed to the ToR of host `to_host` (it reaches that switch's
/// `on_control`). It leaves through local port `via` if given, else by ECMP on its 5-tuple
/// (`src`, `to_host`, `sport`, `dport`), and by ECMP at every later hop, as an ACK is routed.
/// `src` is a node id: a probe may carry the addresses of the data packet it stands for. With
/// `priority` 0 it rides the strict-priority control queue, uncharged; with a data priority it
/// queues, is charged to the buffer and is paused like that priority's data (charged at the
/// sending switch to the ingress of its egress).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoutedMessage {
    pub via: Option<u16>,
    pub src: u32,
    pub to_host: u32,
    pub sport: u16,
    pub dport: u16,
    pub priority: u8,
    pub header: LbHeader,
}

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
    /// The layer of the scheme whose hook runs: messages and timers it sets are its own.
    pub layer: Layer,
    /// In `on_dequeue`, with [`Capabilities::sojourn`]: when the packet arrived at this switch
    /// (its sojourn here is `now - arrived`). `Time::ZERO` in every other hook and run.
    pub arrived: Time,
    /// What the hooks asked for, carried out by the switch after the call.
    pub actions: &'a mut Vec<LbAction>,
}

impl LbCtx<'_> {
    /// Calls `on_timer(token)` of this scheme at time `at`. Tokens are the scheme's own
    /// (below 2^63: the switch keeps the top bit for the layer).
    #[inline]
    pub fn set_timer(&mut self, at: Time, token: u64) {
        debug_assert!(token < 1 << 63, "timer tokens are below 2^63");
        self.actions.push(LbAction::SetTimer {
            at,
            token,
            layer: self.layer,
        });
    }

    /// Sends a scheme message to the neighbour on local port `port` (strict-priority control
    /// queue); it arrives at that switch's `on_control` of this scheme.
    #[inline]
    pub fn send_control(&mut self, port: u16, header: LbHeader) {
        self.actions.push(LbAction::SendControl {
            port,
            header,
            layer: self.layer,
        });
    }

    /// Sends a scheme message across the fabric to a ToR (see [`RoutedMessage`]).
    #[inline]
    pub fn send_routed(&mut self, message: RoutedMessage) {
        self.actions.push(LbAction::SendRouted {
            message,
            layer: self.layer,
        });
    }

    /// Releases the packets held in reorder queue `queue` of local egress `port`.
    #[inline]
    pub fn release(&mut self, port: u16, queue: u16) {
        self.actions.push(LbAction::Release { port, queue });
    }

    /// Runs `hook` as the scheme of `layer` (a wrapper calling its inner scheme).
    #[inline]
    pub fn as_layer<R>(&mut self, layer: Layer, hook: impl FnOnce(&mut Self) -> R) -> R {
        let mine = std::mem::replace(&mut self.layer, layer);
        let result = hook(self);
        self.layer = mine;
        result
    }
}

/// What a scheme asks of the switches and hosts that run it. The switch makes a call or a
/// test on the data path only for a scheme that asks for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The ToR map, port directions, rates and delays of [`LbFabric`] (computing them costs a
    /// pass over the fabric per switch).
    pub fabric: bool,
    /// `choose` is called even for data packets whose path the sender pinned, the pinned
    /// candidate being the scheme's input (RLB, which may override it on a PFC warning);
    /// otherwise the switch honours the pin itself.
    pub pinned: bool,
    /// The scheme recirculates packets and needs `[switch.loopback]`.
    pub loopback: bool,
    /// `on_ingress` is called for every data packet (ConWeave).
    pub ingress: bool,
    /// `on_dequeue` is called for every data packet leaving an egress (a scheme that writes
    /// headers or counts bytes as packets leave: LetFlow's `source_tor`, CONGA, HULA, RLB).
    pub dequeue: bool,
    /// ACKs and NACKs are shown to `on_dequeue` too (CONGA's `feedback_on_acks`).
    pub acks: bool,
    /// Every packet carries a 64-bit header word of the scheme's own, handed to `on_dequeue`,
    /// and `on_arrival` is called for every packet that arrives with a non-zero word (RLB's
    /// piggybacked timestamps).
    pub scheme_word: bool,
    /// Reorder queues the scheme may hold packets in, per host-facing egress of a ToR (0: it
    /// never holds packets, and no reorder-queue records are kept).
    pub reorder_queues_per_port: u32,
    /// Part of the scheme runs at the hosts ([`SchemeConfig::host_scheme`]).
    pub hosts: bool,
    /// The scheme wraps an inner one ([`Inner`]): its hooks run as [`Layer::Wrapper`].
    pub wrapper: bool,
    /// The scheme reports faulty switches ([`SwitchScheme::alerts`]): its runs write the
    /// alerts table, even when empty.
    pub alerts: bool,
    /// The switch notes when each packet arrives and `on_dequeue` reads it as
    /// [`LbCtx::arrived`] (PLB's sojourn times; a programmable switch's enqueue timestamp).
    pub sojourn: bool,
    /// The sending NIC writes `coflow id + 1` into `lb.meta` of every data packet of a flow
    /// in a coflow (0 for flows outside coflows), so that switches can tell a packet's
    /// coflow (CLB's coflow spreading); without it `meta` leaves the NIC as 0.
    pub coflow_tag: bool,
}

/// A scheme's config, the value of the spec's `[lb]` table: checks its parameters and builds
/// the scheme's instances.
pub trait SchemeConfig {
    /// Checks the parameters that their types alone cannot, before any simulation. The
    /// message names the key (`lb.<key>`) and the valid range.
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }

    /// What the scheme asks of the switches and hosts.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// The instance of the scheme for switch `fabric.node` (node ids are `0..fabric.nodes`;
    /// schemes with per-destination state size their tables with it). Host-side schemes
    /// return ECMP: switches honour the senders' path tags and hash the rest.
    ///
    /// Panics if the config is invalid ([`SchemeConfig::validate`]; specs are validated
    /// first).
    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme>;

    /// The host-side part of the scheme for a run of `flows` flows over `fabric` (`None`: the
    /// scheme runs in the switches only; see [`Capabilities::hosts`]).
    fn host_scheme(&self, flows: usize, fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        let _ = (flows, fabric);
        None
    }

    /// The resequencing buffer the scheme puts in front of the receivers' transport, if any.
    fn resequencing(&self) -> Option<Resequencing> {
        None
    }

    /// The config of the scheme this one wraps, if it is a wrapper.
    fn inner(&self) -> Option<&LbConfig> {
        None
    }
}

/// One switch's instance of a scheme. Only `choose` is required.
pub trait SwitchScheme: Any + std::fmt::Debug {
    /// Picks the egress (a local port index) of a data packet among `candidates` (never
    /// empty; in the order of the switch's ports), or the loopback to recirculate it.
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16;

    /// Called once per switch at time zero, before any event (periodic work starts here).
    fn on_start(&mut self, ctx: &mut LbCtx) {
        let _ = ctx;
    }

    /// With [`Capabilities::dequeue`], a data packet (and, with [`Capabilities::acks`], an ACK
    /// or NACK) leaves egress `port`;
    /// the scheme may stamp its `lb` header, and with [`Capabilities::scheme_word`] its own
    /// header word `word` (otherwise `word` is scratch).
    fn on_dequeue(&mut self, ctx: &mut LbCtx, port: u16, pkt: &mut Packet, word: &mut u64) {
        let _ = (ctx, port, pkt, word);
    }

    /// A data packet arrived at this switch ([`Capabilities::ingress`]); `candidates` are its
    /// equal-cost egresses. The scheme may rewrite the packet's `lb` header (which routing
    /// then honours) and hold it.
    fn on_ingress(&mut self, ctx: &mut LbCtx, pkt: &mut Packet, candidates: &[u16]) -> Ingress {
        let _ = (ctx, pkt, candidates);
        Ingress::Forward
    }

    /// A packet whose scheme word `word` is not zero arrived ([`Capabilities::scheme_word`]):
    /// the scheme reads and clears what is meant for this switch.
    fn on_arrival(&mut self, ctx: &mut LbCtx, pkt: &Packet, word: &mut u64) {
        let _ = (ctx, pkt, word);
    }

    /// A message of this scheme arrived: from the neighbour on local port `port`, or routed
    /// to this ToR.
    fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        let _ = (ctx, port, header);
    }

    /// A timer this scheme set fired.
    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        let _ = (ctx, token);
    }

    /// A wrapping scheme sent the data packet `pkt` out of `port` instead of this scheme's
    /// choice: a scheme that remembers ports (DRILL, LetFlow) remembers `port` as if it had
    /// chosen it. Nothing for a scheme without memory.
    fn adopt(&mut self, pkt: &Packet, port: u16) {
        let _ = (pkt, port);
    }

    /// The scheme this one wraps, if it is a wrapper (the switch hands it the messages and
    /// timers of [`Layer::Base`]).
    fn inner(&mut self) -> Option<&mut Inner> {
        None
    }

    /// Adds the scheme's counters at this switch to `out` (summed over switches).
    fn counters(&self, out: &mut Counters) {
        let _ = out;
    }

    /// The values the scheme measures or decides on at this switch at `now` (path RTTs,
    /// congestion estimates, path states), for `scheme` monitors: `emit(signal, key, value)`
    /// once per value, `key` telling instances of a signal apart (a port, a path) as the
    /// scheme's page documents. Called between events, only in runs with such a monitor; it
    /// must not change the scheme's state. Nothing by default.
    fn samples(&self, now: Time, emit: &mut dyn FnMut(&'static str, u32, f64)) {
        let _ = (now, emit);
    }

    /// Switches the scheme reported faulty at this switch, in time order.
    fn alerts(&self) -> &[AlertRecord] {
        &[]
    }
}

/// Runs a timer of `layer` set by `scheme`'s switch: the inner scheme's go to it.
pub fn on_timer(scheme: &mut dyn SwitchScheme, ctx: &mut LbCtx, layer: Layer, token: u64) {
    ctx.layer = layer;
    match (layer, scheme.inner()) {
        (Layer::Base, Some(inner)) => inner.on_timer(ctx, token),
        _ => scheme.on_timer(ctx, token),
    }
}

/// Delivers a scheme message of `layer` that arrived on local port `port`: the inner
/// scheme's go to it.
pub fn on_control(
    scheme: &mut dyn SwitchScheme,
    ctx: &mut LbCtx,
    layer: Layer,
    port: u16,
    header: &LbHeader,
) {
    ctx.layer = layer;
    match (layer, scheme.inner()) {
        (Layer::Base, Some(inner)) => inner.on_control(ctx, port, header),
        _ => scheme.on_control(ctx, port, header),
    }
}

/// Named counters of a run's schemes, summed over switches, as `<scheme>.<counter>`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    scheme: &'static str,
    values: BTreeMap<String, u64>,
}

impl Counters {
    /// An empty set, for the counters of scheme `scheme`.
    pub fn new(scheme: &'static str) -> Counters {
        Counters {
            scheme,
            values: BTreeMap::new(),
        }
    }

    /// Adds `value` to the counter `name` of the scheme being asked.
    pub fn add(&mut self, name: &str, value: u64) {
        let key = format!("{}.{name}", self.scheme);
        *self.values.entry(key).or_default() += value;
    }

    /// Asks `scheme` (a wrapped scheme) for its counters, under its own name.
    pub fn of(&mut self, scheme: &'static str, ask: impl FnOnce(&mut Counters)) {
        let mine = std::mem::replace(&mut self.scheme, scheme);
        ask(self);
        self.scheme = mine;
    }

    /// The counters, by `<scheme>.<counter>`.
    pub fn into_map(self) -> BTreeMap<String, u64> {
        self.values
    }
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
    /// Filled only if the scheme asks for it ([`Capabilities::fabric`]) (empty otherwise):
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

/// Declares the registered schemes: one row per scheme, `"name" => Variant(Config),
/// "one-line summary";`. Generates [`LbConfig`] (the `[lb]` table, `scheme = "name"`), its
/// dispatch to [`SchemeConfig`], and [`registry`].
macro_rules! schemes {
    ($($(#[cfg($cfg:meta)])? $name:literal => $variant:ident($config:ty), $summary:literal;)*) => {
        /// The `[lb]` table of a spec: which scheme, with its parameters.
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        // Written as a table with `scheme = "<name>"` (see `crate::tagged`).
        #[serde(remote = "Self", deny_unknown_fields)]
        pub enum LbConfig {
            $($(#[cfg($cfg)])? #[doc = $summary] #[serde(rename = $name)] $variant($config),)*
        }

        impl LbConfig {
            /// The scheme's name, as the spec writes it.
            pub fn name(&self) -> &'static str {
                match self {
                    $($(#[cfg($cfg)])? LbConfig::$variant(_) => $name,)*
                }
            }

            /// The scheme's config behind the interface every scheme implements.
            pub fn scheme(&self) -> &dyn SchemeConfig {
                match self {
                    $($(#[cfg($cfg)])? LbConfig::$variant(c) => c,)*
                }
            }
        }

        /// Every registered scheme: name, one-line summary and defaults.
        pub fn registry() -> Vec<Registered> {
            vec![$($(#[cfg($cfg)])? Registered {
                name: $name,
                summary: $summary,
                defaults: LbConfig::$variant(<$config>::default()),
            },)*]
        }
    };
}

schemes! {
    "ecmp" => Ecmp(EcmpConfig),
        "per-flow 5-tuple hash over equal-cost next hops, salted per switch";
    "rps" => Rps(RpsConfig),
        "random packet spraying: a uniformly random equal-cost next hop per packet";
    "drb" => Drb(DrbConfig),
        "per-packet round robin over equal-cost next hops, one counter per destination";
    "letflow" => LetFlow(LetFlowConfig),
        "flowlet switching: a new uniformly random next hop after a gap longer than the timeout";
    "drill" => Drill(DrillConfig),
        "per packet, the least-loaded egress queue among d random samples and m remembered";
    "conga" => Conga(CongaConfig),
        "flowlets placed by the source leaf on the least congested path (DRE utilization, max along the path, fed back leaf to leaf)";
    "hula" => Hula(HulaConfig),
        "flowlets routed hop by hop on the best next hop towards the destination ToR, learnt from periodic utilization probes";
    "conweave" => ConWeave(ConWeaveConfig),
        "the source ToR reroutes a flow when its RTT probe is late (epochs, TAIL/CLEAR, ECN-filtered paths); the destination ToR restores order in bounded reorder queues";
    "presto" => Presto(PrestoConfig),
        "host-side: 64 KB flowcells sent round robin over the paths; the receiver resequences between flowcells";
    "hermes" => Hermes(HermesConfig),
        "host-side: paths sensed from ACK echoes (RTT, ECN) and rack probes, classed good/gray/bad/failed; flows move only off bad paths when small gains are clear, or at once off failed ones";
    "rlb" => Rlb(RlbConfig),
        "wraps a switch-side scheme ([lb.inner]): predicts PFC from ingress queue growth and warns the upstream switch, which reroutes or recirculates packets bound for a warned path (RLB; adaptive = true: RLB*)";
    "plb" => Plb(PlbConfig),
        "the source ToR classes paths non-congested, congested or undetermined (paused) from piggybacked RTT and utilization samples; a per-packet delay budget decides when a PFC pause kicks a path out";
    "lbodsn" => Lbodsn(LbodsnConfig),
        "the destination ToR predicts a PFC pause of an ingress queue, picks the flows filling it and tells their source ToR which flow to move and where (FCN); stale CNPs of the old path are filtered and the destination ToR restores order";
    "clove" => Clove(CloveConfig),
        "host-side: flowlets on paths drawn by weight; a path's weight is cut by a third on an ECN echo, spread over the others (or uniform: edge_flowlet)";
    "clb" => Clb(ClbConfig),
        "per packet, the egress least likely to pause soon: classes from the queue's size against Q_thr and its growth (A-D), the least queue or growth within the best class, ties to the port that carried least of the packet's coflow";
    "flb" => Flb(FlbConfig),
        "host-side: flowlets from an aging table, cut short when a flow bursts; a new flowlet takes the least-delay probed path that is not congested and cannot overtake the flow's packets in flight";
    #[cfg(test)]
    "probe" => Probe(probe::ProbeConfig),
        "test-only scheme exercising recirculation, timers and scheme messages";
}

crate::tagged::internally_tagged!(LbConfig, "scheme", expand_preset);

/// The named presets of each scheme that has some: `(scheme, preset, keys)`, the keys written
/// as the lines of a TOML table.
pub const PRESETS: &[(&str, &str, &str)] = &[
    ("letflow", "conweave-ns3", letflow::PRESET_CONWEAVE_NS3),
    ("conga", "conweave-ns3", conga::PRESET_CONWEAVE_NS3),
];

/// Expands `preset = "<name>"` in the `[lb]` table of scheme `scheme`: every key of the
/// preset that the table does not set is added with the preset's value (keys written in the
/// table win), and `preset` itself is removed, so the resolved spec lists the values. The
/// error names the key and the valid presets.
pub fn expand_preset(scheme: &str, table: &mut toml::Table) -> Result<(), (&'static str, String)> {
    let Some(value) = table.remove("preset") else {
        return Ok(());
    };
    let names: Vec<&str> = PRESETS
        .iter()
        .filter(|(s, _, _)| *s == scheme)
        .map(|(_, name, _)| *name)
        .collect();
    let valid = if names.is_empty() {
        format!("scheme \"{scheme}\" has no presets; remove the key")
    } else {
        let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        format!("use one of {}", quoted.join(", "))
    };
    let toml::Value::String(name) = &value else {
        return Err(("preset", format!("{value} is not a preset name; {valid}")));
    };
    let Some((_, _, keys)) = PRESETS.iter().find(|(s, n, _)| *s == scheme && n == name) else {
        return Err((
            "preset",
            format!("\"{name}\" is not a preset of \"{scheme}\"; {valid}"),
        ));
    };
    let preset: toml::Table = keys.parse().expect("the presets are valid TOML");
    for (key, value) in preset {
        table.entry(key).or_insert(value);
    }
    Ok(())
}

impl Default for LbConfig {
    fn default() -> Self {
        LbConfig::Ecmp(EcmpConfig::default())
    }
}

/// A row of the registry.
#[derive(Clone, Debug)]
pub struct Registered {
    pub name: &'static str,
    pub summary: &'static str,
    pub defaults: LbConfig,
}

impl Registered {
    /// The scheme's keys with their default values, as TOML `key = value` in the config's
    /// order (a nested table such as RLB's `inner` written inline).
    pub fn default_keys(&self) -> Vec<String> {
        let text = toml::to_string(&self.defaults).expect("scheme defaults serialize");
        let mut keys: Vec<String> = Vec::new();
        let mut nested: Option<(String, Vec<String>)> = None;
        for line in text.lines().filter(|l| !l.is_empty()) {
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                keys.extend(nested.take().map(inline));
                nested = Some((name.to_string(), Vec::new()));
            } else if let Some((_, fields)) = &mut nested {
                fields.push(line.to_string());
            } else if !line.starts_with("scheme = ") {
                keys.push(line.to_string());
            }
        }
        keys.extend(nested.map(inline));
        keys
    }
}

/// A nested table's lines as one inline table.
fn inline((name, fields): (String, Vec<String>)) -> String {
    format!("{name} = {{ {} }}", fields.join(", "))
}

/// The `[lb]` table of `docs/reference/spec.md`, made from the registry (a test keeps the page in
/// step; `pfcsim-rs schemes --markdown` prints it).
pub fn registry_markdown() -> String {
    markdown_table(&registry())
}

/// A Markdown table of `schemes`: name, summary, keys with defaults, page.
fn markdown_table(schemes: &[Registered]) -> String {
    let mut out = String::from("| `scheme` | what it does | keys and their defaults | page |\n");
    out.push_str("|---|---|---|---|\n");
    for scheme in schemes {
        let keys: Vec<String> = scheme
            .default_keys()
            .iter()
            .map(|k| format!("`{}`", k.replace('|', "\\|")))
            .collect();
        let keys = if keys.is_empty() {
            "none".to_string()
        } else {
            keys.join(", ")
        };
        out.push_str(&format!(
            "| `\"{name}\"` | {summary} | {keys} | [schemes/{name}.md](../schemes/{name}.md) |\n",
            name = scheme.name,
            summary = scheme.summary.replace('|', "\\|"),
        ));
    }
    out
}

impl LbConfig {
    /// Checks the parameters before any simulation (see [`SchemeConfig::validate`]).
    pub fn validate(&self) -> Result<(), String> {
        self.scheme().validate()
    }

    /// What the scheme asks of the switches and hosts.
    pub fn capabilities(&self) -> Capabilities {
        self.scheme().capabilities()
    }

    /// The scheme's instance for switch `fabric.node`.
    pub fn instantiate(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        self.scheme().switch_scheme(fabric)
    }

    /// The innermost scheme: this one, or the one a wrapper wraps (the scheme whose host
    /// side runs at the hosts, under which its counters are written).
    pub fn innermost(&self) -> &LbConfig {
        match self.scheme().inner() {
            Some(inner) => inner.innermost(),
            None => self,
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

/// `hash % n`: the candidate of `n` that a hash picks. For a power of two (a leaf's uplinks
/// to 8 spines) a mask gives the same index without a division (tens of cycles each).
#[inline]
pub fn pick_index(hash: u64, n: usize) -> usize {
    if n.is_power_of_two() {
        hash as usize & (n - 1)
    } else {
        (hash % n as u64) as usize
    }
}

#[cfg(test)]
mod pick_index_tests {
    use super::pick_index;
    use crate::engine::mix64;

    /// The mask taken for a power of two picks what the remainder picks, for every count.
    #[test]
    fn pick_index_is_the_remainder() {
        let hashes = (0..2_000u64)
            .map(|i| mix64(i) ^ i << 40)
            .chain([0, u64::MAX, 1 << 63]);
        for h in hashes {
            for n in 1..=70usize {
                assert_eq!(pick_index(h, n), (h % n as u64) as usize, "{h} % {n}");
            }
        }
    }
}

/// A switch's surroundings for unit tests of a scheme's hooks: its RNG stream and the actions
/// the hooks ask for.
#[cfg(test)]
pub(crate) struct TestSwitch {
    pub node: u32,
    pub rng: Rng,
    /// The layer the hooks run as (a wrapper's tests set [`Layer::Wrapper`]).
    pub layer: Layer,
    pub actions: Vec<LbAction>,
}

#[cfg(test)]
impl TestSwitch {
    pub fn new(node: u32) -> TestSwitch {
        TestSwitch {
            node,
            rng: crate::engine::rng_stream(3, crate::engine::StreamKind::Switch, 1),
            layer: Layer::Base,
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
            layer: self.layer,
            arrived: Time::ZERO,
            actions: &mut self.actions,
        }
    }
}

#[cfg(test)]
mod registry_tests {
    /// `docs/reference/spec.md`'s `[lb]` table is the registry's: a scheme added, renamed or given
    /// a new key changes the page too.
    #[test]
    fn the_spec_page_lists_the_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/reference/spec.md");
        let page = std::fs::read_to_string(path).expect("docs/reference/spec.md");
        let (begin, end) = ("<!-- schemes: begin -->\n", "<!-- schemes: end -->");
        let start = page.find(begin).expect("the schemes table's begin marker") + begin.len();
        let stop = page.find(end).expect("the schemes table's end marker");
        // The test-only scheme (`probe`) is registered in unit tests only.
        let shipped: Vec<_> = super::registry()
            .into_iter()
            .filter(|s| s.name != "probe")
            .collect();
        let expected = super::markdown_table(&shipped);
        assert!(
            page[start..stop] == expected,
            "docs/reference/spec.md's [lb] table is out of date; replace it with the output of \
             `cargo run -p pfcsim-cli -- schemes --markdown`:\n{expected}"
        );
    }

    /// Every scheme has a page, and the registry names each once.
    #[test]
    fn every_registered_scheme_has_a_page_and_one_name() {
        let mut names: Vec<&str> = super::registry().iter().map(|s| s.name).collect();
        for name in &names {
            let page = format!(
                "{}/../../docs/schemes/{name}.md",
                env!("CARGO_MANIFEST_DIR")
            );
            if *name != "probe" {
                assert!(std::path::Path::new(&page).exists(), "{page} is missing");
            }
        }
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a scheme name is registered twice");
    }
}

#[cfg(test)]
mod preset_tests {
    use super::{CongaConfig, LbConfig, LetFlowConfig, LetFlowDecision};
    use crate::lb::conga::{CongaTiming, FeedbackChoice, SampleWindow};
    use crate::units::Time;

    fn lb(text: &str) -> Result<LbConfig, String> {
        toml::from_str::<LbConfig>(text).map_err(|e| e.message().to_string())
    }

    /// `preset` fills the keys the table leaves out; keys written in the table win; the
    /// resolved config lists the values, not the preset.
    #[test]
    fn a_preset_sets_the_keys_the_table_does_not() {
        let conga = lb("scheme = \"conga\"\npreset = \"conweave-ns3\"\nsampled_paths = 2").unwrap();
        let expected = CongaConfig {
            sample_window: SampleWindow::NoWrap,
            feedback: FeedbackChoice::Random,
            aging_sweep: true,
            timing: CongaTiming::Arrival,
            sampled_paths: 2,
            ..CongaConfig::default()
        };
        assert_eq!(conga, LbConfig::Conga(expected));
        let text = toml::to_string(&conga).unwrap();
        assert!(
            !text.contains("preset") && text.contains("timing = \"arrival\""),
            "{text}"
        );
        assert_eq!(lb(&text).unwrap(), conga);
        let letflow = lb("scheme = \"letflow\"\npreset = \"conweave-ns3\"").unwrap();
        let expected = LetFlowConfig {
            decision: LetFlowDecision::SourceTor,
            flowlet_timeout: Time::from_us(100),
            ..LetFlowConfig::default()
        };
        assert_eq!(letflow, LbConfig::LetFlow(expected));
        // A nested scheme (RLB's inner) takes presets too.
        let rlb = lb("scheme = \"rlb\"\n[inner]\nscheme = \"letflow\"\npreset = \"conweave-ns3\"");
        assert!(format!("{:?}", rlb.unwrap()).contains("SourceTor"));
    }

    #[test]
    fn a_bad_preset_names_the_key_and_the_valid_ones() {
        let unknown = lb("scheme = \"conga\"\npreset = \"ns3\"").unwrap_err();
        assert!(
            unknown.contains("preset")
                && unknown
                    .ends_with("\"ns3\" is not a preset of \"conga\"; use one of \"conweave-ns3\""),
            "{unknown}"
        );
        let none = lb("scheme = \"ecmp\"\npreset = \"conweave-ns3\"").unwrap_err();
        assert!(
            none.ends_with("\"conweave-ns3\" is not a preset of \"ecmp\"; scheme \"ecmp\" has no presets; remove the key"),
            "{none}"
        );
        let number = lb("scheme = \"letflow\"\npreset = 3").unwrap_err();
        assert!(
            number.ends_with("3 is not a preset name; use one of \"conweave-ns3\""),
            "{number}"
        );
    }
}
