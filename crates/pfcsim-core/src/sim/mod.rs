//! The fabric simulation: ports and links, the event loop, and the run's results.
//!
//! Layout of the state (all in one [`Simulation`] value, no globals):
//! * every node's ports are contiguous in `ports`; a port is one end of a full-duplex link
//!   and owns that end's egress: 8 priority queues, a PFC frame queue, the packet being
//!   serialized, and the FIFO of packets propagating on the wire towards the peer;
//! * `switches` hold the buffer (MMU), routing table and load-balancer instance of each
//!   switch (`switch.rs`); `hosts` the NIC state and `flows` the queue pairs (`host.rs`).
//!
//! Event discipline: a port has at most one pending `TxDone` (the wake-up when its serializer
//! frees up, scheduled only if something waits) and at most one pending `Arrival` (the head of
//! its in-flight FIFO), so the event queue grows
//! with the number of links and timers, not with packets in flight. Same-time events run in
//! the order they were scheduled.

mod faults;
mod hold;
mod host;
mod host_lb;
mod reseq;
#[cfg(test)]
mod rlb_rtt_tests;
mod switch;
#[cfg(test)]
mod tests;

use crate::dcqcn::DcqcnConfig;
use crate::engine::{rng_stream, EventQueue, Fingerprint, Rng, StreamKind};
use crate::lb::{LbAction, LbConfig};
use crate::metrics::{
    pfc_rates, AlertRecord, FlowRecord, OodHistogram, PortRecord, ReorderChange, RunStats,
};
use crate::mmu::{Mmu, Threshold};
use crate::packet::{Packet, PacketArena, PacketId, PacketKind};
use crate::topology::Topology;
use crate::units::{Rate, Time};
use std::collections::VecDeque;
use std::ops::ControlFlow;

pub use host::{ideal_fct, NicConfig};
pub use switch::{EcnConfig, EcnRateOverride, LoopbackConfig, PfcConfig, SwitchConfig};

use host::{FlowState, Host};
use switch::Switch;

/// Number of PFC priority classes (queues per port).
pub const N_PRIO: usize = 8;
/// The priority of the strict-priority control queue.
pub const CONTROL_PRIO: u8 = 0;

/// Congestion control run by the sender NICs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
// Written as a table with `kind = "<variant>"` (see `crate::tagged`).
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum CcConfig {
    /// DCQCN (Mellanox flavour).
    Dcqcn(DcqcnConfig),
    /// No congestion control: every flow sends at line rate.
    None,
}

crate::tagged::internally_tagged!(CcConfig, "kind");

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig::Dcqcn(DcqcnConfig::default())
    }
}

/// Everything about the fabric's behaviour that is not topology or traffic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FabricConfig {
    pub switch: SwitchConfig,
    pub nic: NicConfig,
    pub cc: CcConfig,
    pub lb: LbConfig,
}

/// A flow to simulate: who sends how much to whom, when.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start: Time,
    pub priority: u8,
    pub dport: u16,
    pub source: &'static str,
    /// Path pinned by the sender, stamped on every data packet (0: none); see
    /// [`crate::packet::LbHeader::path_tag`] for the encoding.
    pub path_tag: u32,
}

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
    #[error("flow {index}: priority {priority} is out of range; data priorities are 1..=7 (0 is the control class)")]
    BadPriority { index: usize, priority: u8 },
    #[error("switch {node}: scheme \"{scheme}\" recirculates packets but the switch has no loopback link; add [switch.loopback] (e.g. rate = \"40Gbps\", delay = \"500ns\") or set lb.recirculation = false")]
    NoLoopback { node: u32, scheme: &'static str },
    #[error("switch {node}: the buffer ({buffer} B) leaves no shared pool after its ports' headroom and reserve ({set_aside} B); raise switch.buffer or lower switch.pfc.headroom")]
    BufferTooSmall {
        node: u32,
        buffer: u64,
        set_aside: u64,
    },
}

/// One priority queue of an egress port, with everything an enqueue or dequeue touches.
#[derive(Default)]
struct PrioQueue {
    packets: VecDeque<PacketId>,
    bytes: u64,
    /// Total time this priority has been paused, up to `paused_since` of a current pause.
    pause_clock: u64,
    /// `pause_clock` in (wrapping) nanoseconds, as packets carry it: kept so that the
    /// division is done once per pause, not at every enqueue and dequeue.
    pause_clock_ns: u32,
    paused_since: Time,
}

/// Read-only view of a port, also handed to load balancers.
///
/// The fields a packet's hop touches come first, packed into the first three cache lines
/// (checked by a test): a hop then touches few lines of its port.
#[repr(C)]
pub struct PortState {
    // Line 1: the serializer and the queue totals.
    /// The serializer is busy until this time (the last packet started ends then).
    busy_until: Time,
    /// Time of the pending `TxDone` wake-up (`Time::MAX`: none). A `TxDone` at another time
    /// is stale and ignored.
    wake_at: Time,
    total_queue_bytes: u64,
    /// Time of the last change of `total_queue_bytes`.
    queue_changed: Time,
    rate: Rate,
    delay: Time,
    tx_packets: u64,
    tx_bytes: u64,
    // Line 2: the wire and the PFC frames.
    in_flight: VecDeque<(Time, PacketId)>,
    /// PFC frames waiting to go out; they go before anything else.
    pfc_out: VecDeque<PacketId>,
    // Line 3: who is at either end, the scheduler's bits, the queue statistics.
    /// Integral of `total_queue_bytes` over time (byte-picoseconds) up to `queue_changed`.
    queue_integral: u128,
    /// The node owning this port, and the node at the far end of the link.
    owner: NodeRef,
    peer_ref: NodeRef,
    node: u32,
    peer: u32,
    /// Bit `q` set: the queue of priority `q` is not empty.
    nonempty: u8,
    /// Bit `q` set: priority `q` of this egress is paused by the peer.
    paused: u8,
    /// Data priority the round-robin tries first.
    rr_next: u8,
    peak_queue_bytes: u64,
    /// RED parameters of this egress: marking starts above `ecn_kmin` bytes (u64::MAX: off).
    ecn_kmin: u64,
    ecn_kmax: u64,
    ecn_pmax: f64,
    prio: [PrioQueue; N_PRIO],
    paused_any_since: Time,
    peer_node: u32,
    /// The counters not kept above.
    rec: PortRecord,
}

impl PortState {
    /// Bytes waiting in the egress queue of priority `prio`.
    pub fn queue_bytes(&self, prio: u8) -> u64 {
        self.prio[prio as usize].bytes
    }
    /// Bytes waiting in all egress queues.
    pub fn total_queue_bytes(&self) -> u64 {
        self.total_queue_bytes
    }
    /// Whether the peer has paused priority `prio` of this egress.
    pub fn is_paused(&self, prio: u8) -> bool {
        self.paused & (1 << prio) != 0
    }
    pub fn rate(&self) -> Rate {
        self.rate
    }
    pub fn delay(&self) -> Time {
        self.delay
    }
    /// Node id at the far end of the link.
    pub fn peer_node(&self) -> u32 {
        self.peer_node
    }

    /// Sets the bytes waiting in this egress (unit tests of schemes that read queue lengths).
    #[cfg(test)]
    pub(crate) fn set_test_queue_bytes(&mut self, bytes: u64) {
        self.total_queue_bytes = bytes;
    }

    /// `n` idle ports of one switch (node 0) with links of `rate_bps` and `delay`, the port
    /// `i` leading to node `100 + i`: views for unit tests of schemes.
    #[cfg(test)]
    pub(crate) fn test_ports(n: usize, rate_bps: u64, delay: Time) -> Vec<PortState> {
        (0..n)
            .map(|i| PortState {
                owner: NodeRef::Switch(0),
                peer_ref: NodeRef::Switch(1),
                node: 0,
                peer: 0,
                peer_node: 100 + i as u32,
                rate: Rate(rate_bps),
                delay,
                prio: Default::default(),
                tx_packets: 0,
                tx_bytes: 0,
                peak_queue_bytes: 0,
                pfc_out: VecDeque::new(),
                total_queue_bytes: 0,
                busy_until: Time::ZERO,
                wake_at: Time::MAX,
                rr_next: 1,
                paused: 0,
                nonempty: 0,
                paused_any_since: Time::ZERO,
                queue_integral: 0,
                queue_changed: Time::ZERO,
                in_flight: VecDeque::new(),
                ecn_kmin: u64::MAX,
                ecn_kmax: u64::MAX,
                ecn_pmax: 0.0,
                rec: PortRecord::default(),
            })
            .collect()
    }

    /// Total time priority `prio` has been paused up to `now`.
    #[inline]
    fn pause_clock(&self, prio: u8, now: Time) -> u64 {
        let q = &self.prio[prio as usize];
        if self.is_paused(prio) {
            q.pause_clock + (now - q.paused_since).ps()
        } else {
            q.pause_clock
        }
    }

    /// Accounts the queue occupancy since its last change, up to `now`.
    #[inline]
    fn integrate_queue(&mut self, now: Time) {
        self.queue_integral +=
            self.total_queue_bytes as u128 * (now - self.queue_changed).ps() as u128;
        self.queue_changed = now;
    }

    /// The pause clock in (wrapping) nanoseconds, as packets carry it.
    #[inline]
    fn pause_clock_ns(&self, prio: u8, now: Time) -> u32 {
        if self.is_paused(prio) {
            (self.pause_clock(prio, now) / 1_000) as u32
        } else {
            self.prio[prio as usize].pause_clock_ns
        }
    }

    #[inline]
    fn enqueue(&mut self, prio: u8, pid: PacketId, pkt: &mut Packet, now: Time) {
        self.integrate_queue(now);
        pkt.pause_mark = self.pause_clock_ns(prio, now);
        let q = &mut self.prio[prio as usize];
        q.packets.push_back(pid);
        q.bytes += pkt.wire_bytes as u64;
        self.nonempty |= 1 << prio;
        self.total_queue_bytes += pkt.wire_bytes as u64;
        self.peak_queue_bytes = self.peak_queue_bytes.max(self.total_queue_bytes);
    }

    /// Removes the head of queue `prio`, charging its PFC wait to the packet.
    #[inline]
    fn dequeue(&mut self, prio: u8, arena: &mut PacketArena, now: Time) -> PacketId {
        self.integrate_queue(now);
        let q = &mut self.prio[prio as usize];
        let pid = q
            .packets
            .pop_front()
            .expect("dequeue from a non-empty queue");
        let pkt = arena.get_mut(pid);
        q.bytes -= pkt.wire_bytes as u64;
        if q.packets.is_empty() {
            self.nonempty &= !(1 << prio);
        }
        self.total_queue_bytes -= pkt.wire_bytes as u64;
        let waited = self.pause_clock_ns(prio, now).wrapping_sub(pkt.pause_mark);
        pkt.pfc_wait_ns = pkt.pfc_wait_ns.saturating_add(waited);
        pid
    }
}

/// Which node a node id is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeRef {
    Host(u32),
    Switch(u32),
}

#[derive(Clone, Copy, Debug)]
enum Event {
    /// `port`'s serializer frees up and the port has something waiting.
    TxDone(u32),
    /// The head of `port`'s in-flight FIFO, packet `pid`, reaches the peer. (The packet is
    /// named so that it can be fetched from memory at once, while the port is.)
    Arrival { port: u32, pid: PacketId },
    /// A host NIC's pacing wake-up.
    NicWake(u32),
    /// The next flow of the (start-ordered) flow table starts.
    FlowStart,
    /// A host's retransmission timer (it checks the deadlines of the host's flows).
    Rto(u32),
    /// A flow's DCQCN decrease check.
    DcqcnDecrease(u32),
    /// A load balancer's timer on a switch.
    LbTimer(u32, u64),
    /// Fault `i` of the run's fault plan starts.
    Fault(u32),
    /// Routing has reconverged after the link failure of fault `i`.
    Reconverge(u32),
    /// A host-side load balancer's timer on host `h` (host index).
    HostLbTimer(u32, u64),
    /// The resequencing timer of flow `f` at its receiver.
    ReseqTimeout(u32),
}

impl Event {
    /// A compact code for the run fingerprint.
    fn code(self) -> u64 {
        match self {
            Event::TxDone(p) => 1 << 60 | p as u64,
            Event::Arrival { port, .. } => 2 << 60 | port as u64,
            Event::NicWake(h) => 3 << 60 | h as u64,
            Event::FlowStart => 4 << 60,
            Event::Rto(h) => 5 << 60 | h as u64,
            Event::DcqcnDecrease(f) => 6 << 60 | f as u64,
            Event::LbTimer(s, t) => 7 << 60 | (s as u64) << 40 ^ t,
            Event::Fault(i) => 8 << 60 | i as u64,
            Event::Reconverge(i) => 9 << 60 | i as u64,
            Event::HostLbTimer(h, t) => 10 << 60 | (h as u64) << 40 ^ t,
            Event::ReseqTimeout(f) => 11 << 60 | f as u64,
        }
    }
}

/// When to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopRule {
    /// Stop at this simulated time at the latest.
    pub at: Time,
    /// Stop as soon as every flow has finished (otherwise: run until no event is left, which
    /// drains the network).
    pub when_flows_done: bool,
}

/// Results of a run.
#[derive(Clone, Debug)]
pub struct RunOutput {
    pub flows: Vec<FlowRecord>,
    pub ports: Vec<PortRecord>,
    pub stats: RunStats,
    /// Bytes still held in switch buffers when the run stopped (0 once drained).
    pub buffered_bytes: u64,
    /// Packets alive in the arena when the run stopped, and the most ever alive at once.
    pub live_packets: usize,
    pub peak_packets: usize,
    /// The progress callback stopped the run before its stop rule.
    pub interrupted: bool,
    /// Changes of the number of reorder queues in use per port, in time order (only for
    /// schemes that hold packets).
    pub reorder_log: Option<Vec<ReorderChange>>,
    /// Packets held in reorder queues when the run ended.
    pub held_packets: usize,
    /// Faulty switches reported by RLB* (Algorithm 2), in time order (empty otherwise).
    pub alerts: Vec<AlertRecord>,
}

/// A simulation of one fabric with one set of flows.
pub struct Simulation {
    now: Time,
    events: EventQueue<Event>,
    fingerprint: Fingerprint,
    events_done: u64,
    arena: PacketArena,
    ports: Vec<PortState>,
    /// `host_index[node]`: position of a host in `hosts` (u32::MAX for switches).
    host_index: Vec<u32>,
    switches: Vec<Switch>,
    hosts: Vec<Host>,
    flows: Vec<FlowState>,
    next_flow: usize,
    flows_finished: u64,
    /// Every flow has finished (`flows_finished` reached the number of flows).
    all_finished: bool,
    cfg: FabricConfig,
    stop: StopRule,
    /// Start of the first flow: time averages are taken from here.
    measure_from: Time,
    bytes_offered: u64,
    bytes_delivered: u64,
    data_packets_delivered: u64,
    payload_sent: u64,
    payload_dropped: u64,
    payload_discarded: u64,
    /// Out-of-order degrees of every out-of-order data arrival at a receiver.
    ood: OodHistogram,
    drops: u64,
    lb_actions: Vec<LbAction>,
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
}

impl Simulation {
    /// Builds the simulation. Flows may be given in any order; they are sorted by start time
    /// (ties keep their given order) and numbered in that order.
    pub fn new(
        topo: &Topology,
        cfg: FabricConfig,
        mut flows: Vec<FlowSpec>,
        seed: u64,
        stop: StopRule,
    ) -> Result<Simulation, SetupError> {
        let n = topo.nodes();
        let mut host_index = vec![u32::MAX; n];
        let mut node_ref = Vec::with_capacity(n);
        let (mut n_sw, mut n_host) = (0u32, 0u32);
        for (node, &sw) in topo.is_switch.iter().enumerate() {
            if sw {
                node_ref.push(NodeRef::Switch(n_sw));
                n_sw += 1;
            } else {
                host_index[node] = n_host;
                node_ref.push(NodeRef::Host(n_host));
                n_host += 1;
            }
        }

        // Ports: contiguous per node, in link order.
        let adj = topo.adjacency();
        let mut first_port = vec![0u32; n + 1];
        for node in 0..n {
            first_port[node + 1] = first_port[node] + adj[node].len() as u32;
        }
        let mut ports = Vec::with_capacity(first_port[n] as usize);
        for (node, neighbours) in adj.iter().enumerate() {
            for (local, &(peer_node, link)) in neighbours.iter().enumerate() {
                let l = &topo.links[link];
                // The peer's port for this link: its position in the peer's adjacency (for a
                // loopback link, which appears twice in its switch's list, the other one).
                let peer_local = adj[peer_node as usize]
                    .iter()
                    .enumerate()
                    .position(|(i, &(_, li))| {
                        li == link && (peer_node as usize != node || i != local)
                    })
                    .expect("links appear at both ends");
                let is_switch = topo.is_switch[node];
                let (ecn_kmin, ecn_kmax, ecn_pmax) = cfg.switch.ecn.red_for(l.rate);
                ports.push(PortState {
                    owner: node_ref[node],
                    peer_ref: node_ref[peer_node as usize],
                    node: node as u32,
                    peer: first_port[peer_node as usize] + peer_local as u32,
                    peer_node,
                    rate: l.rate,
                    delay: l.delay,
                    prio: Default::default(),
                    tx_packets: 0,
                    tx_bytes: 0,
                    peak_queue_bytes: 0,
                    pfc_out: VecDeque::new(),
                    total_queue_bytes: 0,
                    busy_until: Time::ZERO,
                    wake_at: Time::MAX,
                    rr_next: 1,
                    paused: 0,
                    nonempty: 0,
                    paused_any_since: Time::ZERO,
                    queue_integral: 0,
                    queue_changed: Time::ZERO,
                    in_flight: VecDeque::new(),
                    ecn_kmin,
                    ecn_kmax,
                    ecn_pmax,
                    rec: PortRecord {
                        node: node as u32,
                        port: local as u16,
                        peer: peer_node,
                        is_switch,
                        rate_bps: l.rate.bps(),
                        delay_ps: l.delay.ps(),
                        ..Default::default()
                    },
                });
            }
        }

        // Hop distance from every node to every host, computed once for routing and ideal FCTs.
        let to_host: Vec<Vec<u32>> = topo
            .hosts
            .iter()
            .map(|&h| topo.hop_distances_with(&adj, h))
            .collect();
        let mut switches = Vec::with_capacity(n_sw as usize);
        let mut hosts = Vec::with_capacity(n_host as usize);
        for node in 0..n {
            let range = first_port[node]..first_port[node + 1];
            match node_ref[node] {
                NodeRef::Switch(_) => {
                    let sw = Switch::new(node as u32, range, &adj, &to_host, &ports, &cfg, seed)?;
                    switches.push(sw);
                }
                NodeRef::Host(_) => hosts.push(Host::new(node as u32, range.start)),
            }
        }

        // Flows, sorted by start time.
        for (index, f) in flows.iter().enumerate() {
            for (what, node) in [("source", f.src), ("destination", f.dst)] {
                if node as usize >= n || topo.is_switch[node as usize] {
                    return Err(SetupError::NotAHost {
                        index,
                        what,
                        node,
                        hosts: crate::traffic::describe_hosts(&topo.hosts),
                    });
                }
            }
            if f.src == f.dst {
                return Err(SetupError::SelfFlow { index, node: f.src });
            }
            if f.size == 0 {
                return Err(SetupError::EmptyFlow { index });
            }
            if f.priority == CONTROL_PRIO || f.priority as usize >= N_PRIO {
                return Err(SetupError::BadPriority {
                    index,
                    priority: f.priority,
                });
            }
        }
        flows.sort_by_key(|f| f.start);
        let flows: Vec<FlowState> = flows
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let dist = &to_host[host_index[f.dst as usize] as usize];
                let path = representative_path(topo, &adj, dist, f.src, f.dst);
                let ideal = ideal_fct(f.size, &path, &cfg.nic);
                let line = ports[hosts[host_index[f.src as usize] as usize].port as usize].rate;
                FlowState::new(i as u32, f, ideal, line, &cfg.cc)
            })
            .collect();

        let mut sim = Simulation {
            now: Time::ZERO,
            events: EventQueue::default(),
            fingerprint: Fingerprint::default(),
            events_done: 0,
            arena: PacketArena::with_scheme_words(cfg.lb.capabilities().scheme_word),
            ports,
            host_index,
            switches,
            hosts,
            flows,
            next_flow: 0,
            flows_finished: 0,
            all_finished: false,
            cfg,
            stop,
            measure_from: Time::ZERO,
            bytes_offered: 0,
            bytes_delivered: 0,
            data_packets_delivered: 0,
            payload_sent: 0,
            payload_discarded: 0,
            payload_dropped: 0,
            ood: OodHistogram::default(),
            drops: 0,
            lb_actions: Vec::new(),
            seed,
            faults: faults::FaultState::default(),
            held: None,
            host_side: None,
            reseq: None,
        };
        let n_flows = sim.flows.len();
        let lb_caps = sim.cfg.lb.capabilities();
        if lb_caps.hosts {
            let host_nodes: Vec<u32> = sim.hosts.iter().map(|h| h.node).collect();
            sim.host_side = host_lb::HostSide::new(
                &sim.cfg.lb,
                n_flows,
                &sim.switches,
                &sim.ports,
                &host_nodes,
                n,
                seed,
                &sim.cfg.nic,
            )
            .map(Box::new);
        }
        if let Some(rule) = sim.cfg.lb.scheme().resequencing() {
            sim.reseq = Some(Box::new(reseq::Resequencer::new(rule, n_flows)));
        }
        let per_port = lb_caps.reorder_queues_per_port;
        if per_port > 0 {
            let host = |p: &PortState| sim.host_index[p.peer_node as usize] != u32::MAX;
            let leads = sim.ports.iter().map(|p| p.rec.is_switch && host(p));
            sim.held = Some(Box::new(hold::HeldQueues::new(per_port, leads)));
        }
        if let Some(f) = sim.flows.first() {
            sim.measure_from = f.spec.start;
            sim.events.schedule(f.spec.start, Event::FlowStart);
        }
        sim.lb_start();
        sim.host_lb_start();
        Ok(sim)
    }

    /// Simulated time now.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Runs to the stop rule.
    pub fn run_to_end(self) -> RunOutput {
        self.run(&mut |_| ControlFlow::Continue(()))
    }

    /// Runs to the stop rule; `progress(now)` is called every 2^18 events and at the end. If
    /// it returns `Break`, the run stops there and its output is marked `interrupted`.
    pub fn run(mut self, progress: &mut dyn FnMut(Time) -> ControlFlow<()>) -> RunOutput {
        let wall = std::time::Instant::now();
        let mut interrupted = false;

        while let Some((t, ev)) = self.events.pop() {
            if t > self.stop.at {
                self.now = self.stop.at;
                break;
            }
            self.now = t;
            self.events_done += 1;
            self.fingerprint.add(t, ev.code());
            self.handle(ev);
            if self.events_done & ((1 << 18) - 1) == 0 && progress(self.now).is_break() {
                interrupted = true;
                break;
            }
            if self.stop.when_flows_done && self.all_finished {
                break;
            }
        }
        if !interrupted {
            interrupted = progress(self.now).is_break();
        }
        let mut out = self.finish(wall.elapsed().as_secs_f64());
        out.interrupted = interrupted;
        out
    }

    /// Runs the next event (tests that watch the state between events); `None` when no
    /// event is left.
    #[cfg(test)]
    pub(crate) fn step(&mut self) -> Option<Time> {
        let (t, ev) = self.events.pop()?;
        if t > self.stop.at {
            self.now = self.stop.at;
            return None;
        }
        self.now = t;
        self.events_done += 1;
        self.fingerprint.add(t, ev.code());
        self.handle(ev);
        Some(t)
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::TxDone(p) => self.tx_done(p),
            Event::Arrival { port, pid } => self.arrival(port, pid),
            Event::NicWake(h) => self.nic_wake(h),
            Event::FlowStart => self.flow_start(),
            Event::Rto(h) => self.rto_fired(h),
            Event::DcqcnDecrease(f) => self.dcqcn_decrease(f),
            Event::LbTimer(s, token) => self.lb_timer(s, token),
            Event::Fault(i) => self.fault_starts(i),
            Event::Reconverge(i) => self.reconverge(i),
            Event::HostLbTimer(h, token) => self.host_lb_timer(h, token),
            Event::ReseqTimeout(f) => self.reseq_timeout(f),
        }
    }

    /// Puts `pid` on port `p`'s serializer (the port must be idle). The packet joins the
    /// link's in-flight FIFO at once, since its arrival time at the peer is already known; the
    /// port asks to be woken when the serializer frees up only if more is waiting then.
    #[inline]
    fn start_tx(&mut self, p: u32, pid: PacketId) {
        let port = &mut self.ports[p as usize];
        debug_assert!(port.busy_until <= self.now);
        let wire = self.arena.get(pid).wire_bytes as u64;
        port.tx_packets += 1;
        port.tx_bytes += wire;
        let done = self.now + port.rate.tx_time(wire);
        port.busy_until = done;
        let arrival = done + port.delay;
        port.in_flight.push_back((arrival, pid));
        if port.in_flight.len() == 1 {
            self.events
                .schedule(arrival, Event::Arrival { port: p, pid });
        }
        let more = port.total_queue_bytes > 0
            || !port.pfc_out.is_empty()
            || matches!(port.owner, NodeRef::Host(h) if !self.hosts[h as usize].is_idle());
        if more {
            port.wake_at = done;
            self.events.schedule(done, Event::TxDone(p));
        }
    }

    /// Port `p`'s serializer is free again.
    fn tx_done(&mut self, p: u32) {
        let port = &mut self.ports[p as usize];
        if port.wake_at != self.now {
            return; // stale: the port was restarted before this wake-up ran
        }
        port.wake_at = Time::MAX;
        self.try_send(p);
    }

    fn arrival(&mut self, p: u32, pid: PacketId) {
        let port = &mut self.ports[p as usize];
        // Empty only when the link went down with this packet on the wire (a fault).
        let Some((_, head)) = port.in_flight.pop_front() else {
            return;
        };
        debug_assert_eq!(head, pid);
        let kind = self.arena.get(pid).kind;
        if let Some(&(next, next_pid)) = port.in_flight.front() {
            self.events.schedule(
                next,
                Event::Arrival {
                    port: p,
                    pid: next_pid,
                },
            );
        }
        let to = port.peer;
        let peer = port.peer_ref;
        if matches!(kind, PacketKind::Pause | PacketKind::Resume) {
            self.receive_pfc(to, pid);
            return;
        }
        match peer {
            NodeRef::Switch(s) => self.switch_receive(s, to, pid),
            NodeRef::Host(h) => self.host_receive(h, pid),
        }
    }

    /// Starts the next transmission on port `p` if it is idle and has something eligible; if
    /// it is busy, makes sure it is woken when it frees up.
    fn try_send(&mut self, p: u32) {
        let port = &mut self.ports[p as usize];
        if port.busy_until > self.now {
            if port.wake_at != port.busy_until {
                port.wake_at = port.busy_until;
                self.events.schedule(port.busy_until, Event::TxDone(p));
            }
            return;
        }
        let owner = port.owner;
        match owner {
            NodeRef::Switch(s) => self.switch_dequeue(s, p),
            NodeRef::Host(h) => self.host_send(h),
        }
    }

    /// A PFC frame arrived on port `p`: pause or resume `p`'s own egress.
    fn receive_pfc(&mut self, p: u32, pid: PacketId) {
        let pkt = *self.arena.get(pid);
        self.arena.free(pid);
        let now = self.now;
        let port = &mut self.ports[p as usize];
        let q = pkt.priority as usize;
        let bit = 1u8 << q;
        match pkt.kind {
            PacketKind::Pause => {
                port.rec.pfc_pauses_received += 1;
                if port.paused & bit == 0 {
                    if port.paused == 0 {
                        port.paused_any_since = now;
                    }
                    port.paused |= bit;
                    port.prio[q].paused_since = now;
                }
            }
            PacketKind::Resume => {
                if port.paused & bit != 0 {
                    let pq = &mut port.prio[q];
                    pq.pause_clock += (now - pq.paused_since).ps();
                    pq.pause_clock_ns = (pq.pause_clock / 1_000) as u32;
                    port.paused &= !bit;
                    if port.paused == 0 {
                        port.rec.paused_time_ps += (now - port.paused_any_since).ps();
                    }
                }
                self.try_send(p);
            }
            _ => unreachable!("receive_pfc gets PFC frames only"),
        }
    }

    /// Queues a PFC frame for priority `prio` out of port `p`.
    fn send_pfc(&mut self, p: u32, prio: u8, kind: PacketKind) {
        if self.faults.port_down.get(p as usize) == Some(&true) {
            return; // the link is down: nobody to tell
        }
        let mut pkt = Packet::new(kind);
        pkt.priority = prio;
        pkt.wire_bytes = self.cfg.nic.control_bytes;
        let pid = self.arena.alloc(pkt);
        let port = &mut self.ports[p as usize];
        match kind {
            PacketKind::Pause => port.rec.pfc_pauses_sent += 1,
            _ => port.rec.pfc_resumes_sent += 1,
        }
        port.pfc_out.push_back(pid);
        self.try_send(p);
    }

    /// Turns the state into results.
    fn finish(self, wall_seconds: f64) -> RunOutput {
        let now = self.now;
        let flows: Vec<FlowRecord> = self.flows.iter().map(|f| f.record()).collect();
        let mut ports: Vec<PortRecord> = self
            .ports
            .iter()
            .map(|p| {
                let mut rec = p.rec.clone();
                rec.tx_packets = p.tx_packets;
                rec.tx_bytes = p.tx_bytes;
                rec.peak_queue_bytes = p.peak_queue_bytes;
                let integral = p.queue_integral
                    + p.total_queue_bytes as u128 * (now - p.queue_changed).ps() as u128;
                let span = now.saturating_sub(self.measure_from).ps();
                rec.mean_queue_bytes = if span > 0 {
                    integral as f64 / span as f64
                } else {
                    0.0
                };
                if p.paused != 0 {
                    rec.paused_time_ps += (now - p.paused_any_since).ps();
                }
                rec
            })
            .collect();
        let held_packets = self.held.as_ref().map_or(0, |h| h.packets_held())
            + self.reseq.as_ref().map_or(0, |r| r.packets_held());
        let reorder_log = self
            .held
            .map(|h| h.finish(&mut ports, now, self.measure_from));
        let buffered_bytes = self.switches.iter().map(|s| s.mmu.bytes_in_use()).sum();
        let data_packets_received: u64 = flows.iter().map(|f| f.packets_received).sum();
        let ooo_arrivals = self.ood.count();
        let is_switch = |node: u32| self.host_index[node as usize] == u32::MAX;
        let measured_ps = now.saturating_sub(self.measure_from).ps();
        let (pfc_pause_rate, pfc_pauses_per_port_s) =
            pfc_rates(&ports, |p| is_switch(p.peer), measured_ps);
        let mut counters = crate::lb::Counters::new(self.cfg.lb.name());
        let mut alerts = Vec::new();
        for sw in &self.switches {
            sw.lb.counters(&mut counters);
            alerts.extend_from_slice(sw.lb.alerts());
        }
        if let Some(side) = &self.host_side {
            side.counters(&mut counters);
        }
        alerts.sort_by_key(|a: &AlertRecord| (a.time_ps, a.node, a.port));
        let stats = RunStats {
            events: self.events_done,
            end_ps: now.ps(),
            wall_seconds,
            bytes_offered: self.bytes_offered,
            bytes_delivered: self.bytes_delivered,
            payload_sent: self.payload_sent,
            payload_dropped: self.payload_dropped,
            payload_discarded: self.payload_discarded,
            packets_dropped: self.drops
                + self.faults.drops.silent
                + self.faults.drops.black_hole
                + self.faults.drops.link_down
                + self.faults.drops.no_route,
            drops_buffer: self.drops,
            drops_silent: self.faults.drops.silent,
            drops_black_hole: self.faults.drops.black_hole,
            drops_link_down: self.faults.drops.link_down,
            drops_no_route: self.faults.drops.no_route,
            resequenced_packets: self.reseq.as_ref().map_or(0, |r| r.resequenced),
            reseq_flushed_packets: self.reseq.as_ref().map_or(0, |r| r.flushed),
            data_packets_delivered: self.data_packets_delivered,
            alerts: alerts.len() as u64,
            scheme_counters: counters.into_map(),
            flows_total: self.flows.len() as u64,
            flows_finished: self.flows_finished,
            measure_from_ps: self.measure_from.ps(),
            data_packets_received,
            ooo_arrivals,
            ooo_ratio: if data_packets_received > 0 {
                ooo_arrivals as f64 / data_packets_received as f64
            } else {
                0.0
            },
            ood_p50: self.ood.quantile(0.5),
            ood_p99: self.ood.quantile(0.99),
            ood_max: self.ood.max(),
            pfc_pause_rate,
            pfc_pauses_per_port_s,
            fingerprint: self.fingerprint.value(),
        };
        RunOutput {
            flows,
            ports,
            stats,
            buffered_bytes,
            live_packets: self.arena.live(),
            peak_packets: self.arena.high_water(),
            interrupted: false,
            reorder_log,
            held_packets,
            alerts,
        }
    }
}

/// The links (rate, delay) of the unloaded reference path from `src` to `dst`: a shortest
/// path that, at every hop, takes the fastest equal-cost link (first one on ties).
fn representative_path(
    topo: &Topology,
    adj: &[Vec<(u32, usize)>],
    dist: &[u32],
    src: u32,
    dst: u32,
) -> Vec<(Rate, Time)> {
    let mut path = Vec::new();
    let mut at = src;
    while at != dst {
        let (next, link) = adj[at as usize]
            .iter()
            .filter(|&&(y, _)| dist[y as usize] + 1 == dist[at as usize])
            .max_by_key(|&&(_, li)| (topo.links[li].rate, std::cmp::Reverse(li)))
            .copied()
            .expect("connected topology");
        path.push((topo.links[link].rate, topo.links[link].delay));
        at = next;
    }
    path
}

/// The RNG stream of a switch's load balancer.
fn switch_rng(seed: u64, node: u32) -> Rng {
    rng_stream(seed, StreamKind::Switch, node as u64)
}

/// The RNG stream of a switch's ECN marking, separate from the load balancer's so that two
/// schemes compared on the same seed see the same marking draws (common random numbers).
fn ecn_rng(seed: u64, node: u32) -> Rng {
    rng_stream(seed, StreamKind::Ecn, node as u64)
}

/// Headroom of a port: what arrives after the switch decides to pause the link's far end.
/// The PAUSE waits for one packet on our egress and its own serialization, travels the link
/// (one delay) while the peer keeps sending; the peer then finishes the packet it is sending,
/// and everything already on the wire still arrives (one delay). So 2 x rate x delay plus
/// three maximum-size packets.
pub fn auto_headroom(rate: Rate, delay: Time, mtu_wire: u64) -> u64 {
    2 * rate.bytes_in(delay) + 3 * mtu_wire
}

/// The MMU of a switch with these ports.
fn build_mmu(cfg: &SwitchConfig, ports: &[PortState], mtu_wire: u64) -> Mmu {
    let headroom = ports
        .iter()
        .map(|p| {
            cfg.pfc
                .headroom
                .map(|b| b.0)
                .unwrap_or_else(|| auto_headroom(p.rate, p.delay, mtu_wire))
        })
        .collect();
    let threshold = match cfg.pfc.static_threshold {
        Some(b) => Threshold::Static { bytes: b.0 },
        None => Threshold::Dynamic {
            alpha: cfg.pfc.alpha,
        },
    };
    Mmu::new(
        cfg.buffer.0,
        cfg.pfc.reserve.0,
        cfg.pfc.resume_offset.0,
        threshold,
        cfg.pfc.enabled,
        headroom,
    )
}
