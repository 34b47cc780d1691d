//! Load-balancing schemes that run at the hosts (the NIC or its vSwitch), and the interface
//! they plug into.
//!
//! A host-side scheme picks the path of each data packet at the sender by stamping a path tag
//! ([`crate::packet::LbHeader::path_tag`]: byte `h` is the choice at the packet's `h`-th switch
//! hop) that the switches honour before asking their own scheme. Switches need no logic of
//! their own for it: under a host-side scheme they run ECMP for anything untagged. A scheme is
//! one file in this folder (Presto, Hermes, Clove) implementing [`HostScheme`], and one
//! instance serves every host of the fabric, keeping per-host and per-flow tables indexed by
//! host and flow.
//!
//! What a scheme sees, through [`HostCtx`]:
//! * the paths between any two hosts' ToRs ([`HostFabric::paths`]), as a sender learns them
//!   from its controller or by probing (Clove's traceroute, Presto's spanning trees);
//! * the host's own RNG stream;
//! * [`HostAction`]s applied after the call: set a timer, send a probe.
//!
//! Hooks: `on_flow_start`, `path_tag` (every data packet sent, first transmissions and
//! retransmissions), `on_ack` (every ACK and NACK received, with what the receiver echoed:
//! the acknowledged packet's path tag and CE mark, and the RTT from its send time),
//! `on_timeout` (a flow's retransmission timer fired), `on_flow_end`, `on_timer` and
//! `on_probe_reply`.
//!
//! Probes ([`HostAction::SendProbe`]) are 64-byte packets in the data priority of the
//! sender's choosing: switches route them by their path tag, queue and ECN-mark them like
//! data, but never show them to their own scheme. The receiving host answers at once with a
//! reply that echoes the tag, the CE mark, the send time and the scheme's word (`meta`); the
//! reply returns like an ACK (ECMP, control queue).

use crate::engine::Rng;
use crate::units::{Rate, Time};
use std::any::Any;

/// Most paths kept per pair of ToRs (the first ones in tag order).
pub const MAX_PATHS: usize = 64;

/// The switches' part of a host-side scheme: they honour the senders' path tags and hash
/// (ECMP) whatever is untagged.
pub fn switch_side(fabric: &super::LbFabric) -> Box<dyn super::SwitchScheme> {
    Box::new(super::Ecmp::new(&super::EcmpConfig::default(), fabric.node))
}

/// The paths between ToRs, as path tags.
#[derive(Clone, Debug, Default)]
pub struct HostFabric {
    /// Node ids are `0..nodes`.
    pub nodes: u32,
    /// `tor_of[n]`: ToR index of host `n` (`super::NO_TOR` for switches).
    pub tor_of: Vec<u32>,
    /// Number of ToRs.
    pub tors: u32,
    /// `offsets[a * tors + b]..offsets[a * tors + b + 1]`: the tags in `tags` of the paths from
    /// ToR `a` to ToR `b`.
    offsets: Vec<u32>,
    tags: Vec<u32>,
    /// `timing[a * tors + b]`: the unloaded timing from a host of ToR `a` to a host of ToR
    /// `b` (zero until [`HostFabric::set_timing`]).
    timing: Vec<PairTiming>,
}

/// The unloaded timing of the fastest path between the hosts of two ToRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairTiming {
    /// RTT of a full-size data packet and its ACK with every queue empty: per link, store
    /// and forward serialization plus propagation, out with the data packet and back with the
    /// ACK (what an ACK's echoed RTT reads on an idle path).
    pub base_rtt: Time,
    /// Slowest link of that path, host links included.
    pub bottleneck: Rate,
}

impl Default for PairTiming {
    fn default() -> Self {
        PairTiming {
            base_rtt: Time::ZERO,
            bottleneck: Rate(1),
        }
    }
}

impl HostFabric {
    /// Builds the table from `paths(a, b)`, the tags of the paths from ToR `a` to ToR `b`.
    pub fn new(
        nodes: u32,
        tor_of: Vec<u32>,
        tors: u32,
        mut paths: impl FnMut(u32, u32) -> Vec<u32>,
    ) -> HostFabric {
        let mut offsets = Vec::with_capacity((tors * tors) as usize + 1);
        let mut tags = Vec::new();
        offsets.push(0);
        for a in 0..tors {
            for b in 0..tors {
                let mut p = paths(a, b);
                p.truncate(MAX_PATHS);
                tags.extend(p);
                offsets.push(tags.len() as u32);
            }
        }
        HostFabric {
            nodes,
            tor_of,
            tors,
            offsets,
            tags,
            timing: vec![PairTiming::default(); (tors * tors) as usize],
        }
    }

    /// Sets the timing of every pair of ToRs to `timing(a, b)`.
    pub fn set_timing(&mut self, mut timing: impl FnMut(u32, u32) -> PairTiming) {
        for a in 0..self.tors {
            for b in 0..self.tors {
                self.timing[(a * self.tors + b) as usize] = timing(a, b);
            }
        }
    }

    /// The unloaded timing between the hosts of ToRs `a` and `b` (ToR indices).
    pub fn timing(&self, a: u32, b: u32) -> PairTiming {
        self.timing[(a * self.tors + b) as usize]
    }

    /// The path tags from ToR `a` to ToR `b` (ToR indices; `[0]` within one ToR).
    pub fn tor_paths(&self, a: u32, b: u32) -> &[u32] {
        let i = (a * self.tors + b) as usize;
        let range = self.offsets[i] as usize..self.offsets[i + 1] as usize;
        if range.is_empty() {
            &[0]
        } else {
            &self.tags[range]
        }
    }

    /// The path tags from host `src`'s ToR to host `dst`'s ToR (`[0]` within one ToR: the
    /// only path). Never empty.
    pub fn paths(&self, src: u32, dst: u32) -> &[u32] {
        self.tor_paths(self.tor_of[src as usize], self.tor_of[dst as usize])
    }

    /// ToR index of host `n`.
    pub fn tor(&self, n: u32) -> u32 {
        self.tor_of[n as usize]
    }
}

/// What a host-side hook sees of the flow it is called for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowInfo {
    /// Index of the flow (`0..flows`, in start order).
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start: Time,
    /// First byte not yet acknowledged.
    pub snd_una: u64,
    /// Highest byte ever sent.
    pub high_sent: u64,
    pub priority: u8,
}

/// What an ACK or NACK tells the sender's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckEcho {
    /// A NACK (the receiver saw a gap) rather than an ACK.
    pub nack: bool,
    /// Path tag of the data packet that made the receiver answer.
    pub path_tag: u32,
    /// An ACK: one of the packets it acknowledges was ECN-marked; a NACK: the out-of-order
    /// packet that made the receiver answer was.
    pub ce: bool,
    /// Now minus that packet's send time.
    pub rtt: Time,
    /// Bytes this ACK acknowledged for the first time.
    pub newly_acked: u64,
}

/// A probe's reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeEcho {
    /// The host the probe was sent to.
    pub to_host: u32,
    pub path_tag: u32,
    /// The probe was ECN-marked on its way.
    pub ce: bool,
    /// Now minus the probe's send time.
    pub rtt: Time,
    /// The probe's arrival at `to_host` minus its send time: the one-way delay of its path
    /// (the reply's way back, ECMP-routed, left out; host clocks are exact in the model).
    pub one_way: Time,
    /// The scheme's word, as sent.
    pub meta: u32,
}

/// Something a host-side scheme asks its host to do once the hook returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostAction {
    /// Call `on_timer(token)` on host `host` (a node id: this host, or another one, e.g. the
    /// probing agent of its rack) at time `at`.
    SetTimer { host: u32, at: Time, token: u64 },
    /// Send a probe to host `to_host` on path `path_tag`, in data priority `priority`.
    SendProbe {
        to_host: u32,
        path_tag: u32,
        priority: u8,
        meta: u32,
    },
    /// Flow `flow` of this host, held by [`HostScheme::may_send`], may send again: its
    /// sender looks at it at once.
    Release { flow: u32 },
}

/// What a host-side hook can see and do.
pub struct HostCtx<'a> {
    pub now: Time,
    /// Node id of the host.
    pub host: u32,
    pub fabric: &'a HostFabric,
    pub rng: &'a mut Rng,
    pub actions: &'a mut Vec<HostAction>,
}

/// The host-side part of a scheme: one instance serves every host of the run. Only
/// `path_tag` is required; every other hook does nothing by default.
pub trait HostScheme: Any + std::fmt::Debug {
    /// The path tag of the data packet of `flow` carrying `payload` bytes from `seq` on.
    fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, seq: u64, payload: u32) -> u32;

    /// The scheme decides when its flows send ([`HostScheme::may_send`] is called); asked
    /// once, when the run is built. No by default: the transport alone decides.
    fn clocks_sending(&self) -> bool {
        false
    }

    /// Whether `flow`, which its transport is ready to send a data packet of (window and
    /// pacing allow it), may send it now; called just before [`HostScheme::path_tag`], only
    /// if [`HostScheme::clocks_sending`]. A flow refused is held (its sender skips it) until
    /// the scheme releases it with [`HostAction::Release`] from another hook. The sender is
    /// choosing its next packet: push no action here.
    fn may_send(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) -> bool {
        let _ = (ctx, flow);
        true
    }

    /// Called once per host at time zero (periodic work starts here).
    fn on_start(&mut self, ctx: &mut HostCtx) {
        let _ = ctx;
    }

    /// Flow `flow` starts at its sender.
    fn on_flow_start(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let _ = (ctx, flow);
    }

    /// An ACK or NACK of `flow` arrived at its sender.
    fn on_ack(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, echo: &AckEcho) {
        let _ = (ctx, flow, echo);
    }

    /// The retransmission timer of `flow` fired (it goes back to `snd_una`).
    fn on_timeout(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let _ = (ctx, flow);
    }

    /// Every byte of `flow` was acknowledged.
    fn on_flow_end(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let _ = (ctx, flow);
    }

    /// A timer set with [`HostAction::SetTimer`] fired.
    fn on_timer(&mut self, ctx: &mut HostCtx, token: u64) {
        let _ = (ctx, token);
    }

    /// The reply to a probe this host sent arrived.
    fn on_probe_reply(&mut self, ctx: &mut HostCtx, echo: &ProbeEcho) {
        let _ = (ctx, echo);
    }

    /// Adds the scheme's counters over all hosts to `out`.
    fn counters(&self, out: &mut super::Counters) {
        let _ = out;
    }

    /// What the scheme knows or decides on at host node `host` at `now` (path states, RTTs),
    /// for `scheme` monitors that watch hosts, as [`super::SwitchScheme::samples`] does at a
    /// switch: `emit(signal, key, value)`, `key` as the scheme's page documents. Called between
    /// events, only in runs with such a monitor; it must not change the scheme's state.
    /// Nothing by default.
    fn samples(
        &self,
        now: Time,
        host: u32,
        fabric: &HostFabric,
        emit: &mut dyn FnMut(&'static str, u32, f64),
    ) {
        let _ = (now, host, fabric, emit);
    }
}

/// A host's surroundings for unit tests of a host-side scheme.
#[cfg(test)]
pub(crate) struct TestHost {
    pub host: u32,
    pub fabric: HostFabric,
    pub rng: Rng,
    pub actions: Vec<HostAction>,
}

#[cfg(test)]
impl TestHost {
    /// Host 0 under ToR 0 sending to hosts under ToR 1, over `paths` paths tagged 1..=paths
    /// (hosts 0 and 1 under ToR 0, 2 and 3 under ToR 1).
    pub fn new(paths: u32) -> TestHost {
        let tor_of = vec![0, 0, 1, 1];
        let mut fabric = HostFabric::new(4, tor_of, 2, |a, b| {
            if a == b {
                vec![0]
            } else {
                (1..=paths).collect()
            }
        });
        // Four 100 Gbps links of 1 us each way.
        fabric.set_timing(|_, _| PairTiming {
            base_rtt: Time::from_us(8),
            bottleneck: Rate::gbps(100),
        });
        TestHost {
            host: 0,
            fabric,
            rng: crate::engine::rng_stream(3, crate::engine::StreamKind::Host, 0),
            actions: Vec::new(),
        }
    }

    /// The context of a hook called at `now_ns` nanoseconds.
    pub fn ctx(&mut self, now_ns: u64) -> HostCtx<'_> {
        HostCtx {
            now: Time::from_ns(now_ns),
            host: self.host,
            fabric: &self.fabric,
            rng: &mut self.rng,
            actions: &mut self.actions,
        }
    }

    /// A flow of `size` bytes from host 0 to host 2.
    pub fn flow(id: u32, size: u64) -> FlowInfo {
        FlowInfo {
            id,
            src: 0,
            dst: 2,
            size,
            start: Time::ZERO,
            snd_una: 0,
            high_sent: 0,
            priority: 3,
        }
    }
}
