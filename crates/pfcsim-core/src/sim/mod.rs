//! The fabric simulation: it ties the ports, switch buffers, load balancers, NICs and
//! congestion control together and runs a set of flows over a topology.
//!
//! Files: `setup.rs` builds a [`Simulation`], `events.rs` is the event loop, `links.rs` the
//! serializers, wires and PFC frames, `switch.rs` and `host.rs` the nodes, `results.rs`
//! collects the [`RunOutput`], `monitor.rs` records the monitors, `stall.rs` watches for runs
//! that stall (no progress, PFC deadlocks); `config.rs` holds the fabric's parameters and their checks.
//!
//! Layout of the state (all in one [`Simulation`] value, no globals):
//! * every node's ports ([`crate::port::PortState`]) are contiguous in `ports`; a port is one
//!   end of a full-duplex link and owns that end's egress: 8 priority queues, a PFC frame
//!   queue, the packet being serialized, and the FIFO of packets propagating on the wire
//!   towards the peer;
//! * `switches` hold the buffer (MMU), routing table and load-balancer instance of each
//!   switch (`switch.rs`); `hosts` the NIC state (`host.rs`), `flows` the state every
//!   transport shares per flow and `transports` the rest of each transport's
//!   (`crate::transport`).
//!
//! Event discipline: a port has at most one pending `TxDone` (the wake-up when its serializer
//! frees up, scheduled only if something waits) and at most one pending `Arrival` (the head of
//! its in-flight FIFO), so the event queue grows
//! with the number of links and timers, not with packets in flight. Same-time events run in
//! the order they were scheduled.

#[cfg(test)]
mod coflow_tests;
mod config;
mod events;
mod faults;
mod hold;
mod host;
mod host_lb;
mod links;
mod monitor;
mod reseq;
mod results;
#[cfg(test)]
mod rlb_rtt_tests;
mod routes;
mod setup;
mod stall;
mod switch;
#[cfg(test)]
mod tests;
mod varys;

use crate::engine::{EventQueue, Fingerprint};
use crate::lb::LbAction;
use crate::packet::PacketArena;
use crate::port::{FarArrivals, PortState};
use crate::units::Time;

pub use config::FabricConfig;
pub use events::{Guards, StopRule};
pub use results::RunOutput;
pub use stall::DeadlockChecks;
pub use switch::{EcnConfig, EcnRateOverride, EgressLimit, LoopbackConfig, SwitchConfig};
pub use varys::{CoflowConfig, Scheduler};

use crate::transport::{FlowState, NicTotals, Transports};
use events::Event;
use host::Host;
use routes::HostGroups;
use switch::Switch;

/// Why a simulation cannot be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetupError {
    #[error("flow {index}: {what} {node} is not a host of the topology (hosts are {hosts})")]
    NotAHost {
        index: usize,
        what: &'static str,
        node: u32,
        hosts: String,
    },
    #[error("flow {index}: source and destination are both host {node}")]
    SelfFlow { index: usize, node: u32 },
    #[error("flow {index}: size is 0 bytes; flows must carry at least one byte")]
    EmptyFlow { index: usize },
    #[error("traffic[{generator}]: flow {index} ({size} bytes from host {src} to host {dst}) would take longer alone on its path than pfcsim's clock can count (2^64 ps, about 213 days); make the flow smaller or the links of its path faster")]
    FlowBeyondClock {
        generator: u16,
        index: usize,
        size: u64,
        src: u32,
        dst: u32,
    },
    #[error("flow {index}: priority {priority} is out of range; data priorities are 1..=7 (0 is the control class)")]
    BadPriority { index: usize, priority: u8 },
    #[error("{key}: {rto} is not above the base RTT of flow {index} (host {src} to host {dst}), {:.3}us: a full packet out and its ACK back on the idle path; every packet would time out before its ACK could arrive, and be sent again without end; {advice}", rtt.as_secs_f64() * 1e6)]
    RtoBelowRtt {
        /// The spec key of the timeout, and what to do.
        key: &'static str,
        advice: &'static str,
        rto: Time,
        rtt: Time,
        index: usize,
        src: u32,
        dst: u32,
    },
    #[error("switch {node}: scheme \"{scheme}\" recirculates packets but the switch has no loopback link; add [switch.loopback] (e.g. rate = \"40Gbps\", delay = \"500ns\") or set lb.recirculation = false")]
    NoLoopback { node: u32, scheme: &'static str },
    #[error("switch {node}: the buffer ({buffer} B) leaves no shared pool after its ports' headroom and reserve ({set_aside} B); raise switch.buffer or lower switch.pfc.headroom")]
    BufferTooSmall {
        node: u32,
        buffer: u64,
        set_aside: u64,
    },
    #[error("topology: {hosts} hosts; a fabric may have at most {max} (a host's group and rank in the switches' routing tables are 16-bit numbers); split the study into smaller fabrics")]
    TooManyHosts { hosts: usize, max: usize },
}

/// Unit tests: which data packets to drop at their receiver.
#[cfg(test)]
pub(crate) type DropFilter = dyn FnMut(&crate::packet::Packet) -> bool;

/// Unit tests: a [`DropFilter`] that drops the first `times` transmissions of the data packet
/// starting at byte `seq` (of any flow).
#[cfg(test)]
pub(crate) fn drop_first(seq: u64, times: u32) -> impl FnMut(&crate::packet::Packet) -> bool {
    let mut left = times;
    move |p| {
        let hit = p.seq == seq && left > 0;
        left -= hit as u32;
        hit
    }
}

/// A simulation of one fabric with one set of flows.
pub struct Simulation {
    now: Time,
    events: EventQueue<Event>,
    fingerprint: Fingerprint,
    events_done: u64,
    arena: PacketArena,
    ports: Vec<PortState>,
    /// The arrival times the packets on the wires cannot keep (`port::FarArrivals`).
    far_arrivals: FarArrivals,
    /// `host_index[node]`: position of a host in `hosts` (u32::MAX for switches).
    host_index: Vec<u32>,
    /// Every host's key to the switches' routing tables.
    host_groups: HostGroups,
    switches: Vec<Switch>,
    hosts: Vec<Host>,
    flows: Vec<FlowState>,
    next_flow: usize,
    flows_finished: u64,
    /// Every flow has finished (`flows_finished` reached the number of flows) and the stop
    /// rule ends the run then: one flag for the event loop to test after each event.
    flows_done_stop: bool,
    cfg: FabricConfig,
    stop: StopRule,
    /// Limits that end the run early, marked incomplete (none by default).
    guards: Guards,
    /// Start of the first flow: time averages are taken from here.
    measure_from: Time,
    /// What the NICs sent and delivered.
    totals: NicTotals,
    /// Payload bytes and packets dropped by the switches' buffers.
    payload_dropped: u64,
    drops: u64,
    /// Packets dropped by drop-tail egress limits (`switch.egress_limit`).
    drops_egress: u64,
    lb_actions: Vec<LbAction>,
    /// The PFC frames of one MMU decision being sent (kept for its memory: `send_mmu_frames`).
    mmu_frames: Vec<crate::mmu::Frame>,
    /// Seed of the run (fault streams are derived from it when faults start).
    seed: u64,
    /// Faults of the run and the drops they caused (empty without `[[faults]]`).
    faults: faults::FaultState,
    /// Reorder queues, if the scheme holds packets (`hold.rs`).
    held: Option<Box<hold::HeldQueues>>,
    /// The host-side part of the scheme, if it has one (`host_lb.rs`).
    host_side: Option<Box<host_lb::HostSide>>,
    /// The receivers' resequencing buffer, if the scheme has one (`reseq.rs`).
    reseq: Option<Box<reseq::Resequencer>>,
    /// The run's monitors, if it has any (`monitor.rs`).
    monitors: Option<Box<monitor::Monitors>>,
    /// Data packets carry their coflow in `lb.meta` ([`crate::lb::Capabilities::coflow_tag`]).
    tag_coflows: bool,
    /// The coflow scheduler, with `[coflow] scheduler = "varys"` (`varys.rs`).
    varys: Option<Box<varys::Varys>>,
    /// Each transport's state beyond `flows` (`crate::transport`), with the parameters of
    /// the congestion controls.
    transports: Transports,
    /// The congestion control reads every ACK and NACK (`CcConfig::reads_acks`).
    cc_reads_acks: bool,
    /// In a run whose packets carry in-band telemetry (`PacketArena::carries_int`), that of
    /// the packet a host is taking in: a data packet's, for its ACK to echo; an ACK's, for
    /// the sender's congestion control.
    int_rx: crate::cc::IntStack,
    /// Unit tests: drops the data packets it returns `true` for on arrival at the receiver,
    /// before the transport sees them (as if lost on the last link).
    #[cfg(test)]
    drop_data: Option<Box<DropFilter>>,
    /// The looks pending (monitors, watchdog, deadlock checks), apart from the events.
    looks: events::Looks,
    /// The no-progress watchdog and PFC deadlock detection (`stall.rs`).
    stall: stall::StallWatch,
}

impl Simulation {
    /// Simulated time now.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Unit tests: drops the data packets `filter` returns `true` for on arrival at their
    /// receiver, before the transport sees them (as if lost on the last link).
    #[cfg(test)]
    pub(crate) fn drop_data_at_receiver(&mut self, filter: Box<DropFilter>) {
        self.drop_data = Some(filter);
    }

    /// Unit tests: the base RTT the host-side scheme reads for the ToRs of index `a` and `b`.
    #[cfg(test)]
    pub(crate) fn host_pair_base_rtt(&self, a: u32, b: u32) -> Time {
        let side = self.host_side.as_ref().expect("a host-side scheme");
        side.fabric.timing(a, b).base_rtt
    }
}
