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
//! Hooks: `choose` (a data packet needs an egress among equal-cost candidates), `on_dequeue`
//! (a data packet leaves an egress queue; the scheme may stamp its `lb` header), `on_control`
//! (a scheme message from a neighbour arrived) and `on_timer`. Data packets carry the
//! [`LbHeader`] (a path tag chosen by a sender or source switch, and one scheme-defined
//! field) and a hop count. Control packets (ACK, NACK, CNP, PFC) are never given to a scheme:
//! switches route them with ECMP, as the RDMA references do.
//!
//! Recirculation: with `[switch.loopback]` every switch has a loopback link whose two ends are
//! two of its ports. `choose` may return `ctx.loopback` instead of a candidate; the packet is
//! then serialized on the loopback, charged to the buffer like any packet, and comes back in
//! at the other end (`ctx.loopback + 1`, visible as `pkt.ingress_port`) to be routed again.
//! A loopback egress does not count as a hop in `pkt.hop`.

pub mod ecmp;
#[cfg(test)]
pub mod probe;
pub mod rps;

use crate::engine::Rng;
use crate::packet::{LbHeader, Packet};
use crate::sim::PortState;
use crate::units::Time;
use serde::{Deserialize, Serialize};

pub use ecmp::{Ecmp, EcmpConfig};
pub use rps::{Rps, RpsConfig};

/// Something a scheme asks its switch to do once the hook returns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LbAction {
    /// Send a scheme message out of local port `port`; it arrives at the neighbour's
    /// `on_control` after serialization and propagation.
    SendControl { port: u16, header: LbHeader },
    /// Call `on_timer(token)` at time `at`.
    SetTimer { at: Time, token: u64 },
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
    pub rng: &'a mut Rng,
    pub actions: &'a mut Vec<LbAction>,
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
    ]
}

impl LbConfig {
    pub fn name(&self) -> &'static str {
        match self {
            LbConfig::Ecmp(_) => "ecmp",
            LbConfig::Rps(_) => "rps",
            #[cfg(test)]
            LbConfig::Probe(_) => "probe",
        }
    }

    /// The instance of the scheme for switch `node`.
    pub fn instantiate(&self, node: u32) -> SwitchLb {
        match self {
            LbConfig::Ecmp(c) => SwitchLb::Ecmp(Ecmp::new(c, node)),
            LbConfig::Rps(_) => SwitchLb::Rps(Rps),
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
    #[cfg(test)]
    Probe(probe::Probe),
}

impl SwitchLb {
    /// Picks the egress (a local port index) of a data packet among `candidates` (never
    /// empty; in the order of the switch's ports).
    #[inline]
    pub fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        match self {
            SwitchLb::Ecmp(s) => s.choose(pkt, candidates),
            SwitchLb::Rps(s) => s.choose(ctx.rng, candidates),
            #[cfg(test)]
            SwitchLb::Probe(s) => s.choose(ctx, pkt, candidates),
        }
    }

    /// A data packet leaves egress `port`; the scheme may stamp its `lb` header.
    #[inline]
    pub fn on_dequeue(&mut self, _ctx: &mut LbCtx, _port: u16, _pkt: &mut Packet) {
        match self {
            SwitchLb::Ecmp(_) | SwitchLb::Rps(_) => {}
            #[cfg(test)]
            SwitchLb::Probe(_) => {}
        }
    }

    /// A scheme message from the neighbour on local port `port` arrived.
    pub fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        match self {
            SwitchLb::Ecmp(_) | SwitchLb::Rps(_) => {
                let _ = (ctx, port, header);
            }
            #[cfg(test)]
            SwitchLb::Probe(s) => s.on_control(ctx, port, header),
        }
    }

    /// A timer set with [`LbAction::SetTimer`] fired.
    pub fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        match self {
            SwitchLb::Ecmp(_) | SwitchLb::Rps(_) => {
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
