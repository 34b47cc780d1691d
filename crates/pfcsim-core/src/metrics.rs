//! What a run measures: one record per flow, one per port, and run-wide counters.
//!
//! The definitions here are the single source of truth for every number pfcsim reports; the
//! column documentation in `docs/metrics.md` is written from them.

/// Everything measured about one flow.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowRecord {
    /// Index of the flow in the run's flow table (0-based, in order of start time).
    pub flow_id: u32,
    /// Which traffic source made the flow (`poisson`, `incast`, `background`, `scripted`, `flow_file`).
    pub source: &'static str,
    pub src: u32,
    pub dst: u32,
    /// UDP ports of the queue pair (the entropy ECMP hashes on).
    pub sport: u16,
    pub dport: u16,
    pub priority: u8,
    pub size_bytes: u64,
    /// When the sender's NIC was handed the flow.
    pub start_ps: u64,
    /// When the sender received the acknowledgement of the last byte (`None`: not finished
    /// when the run ended).
    pub finish_ps: Option<u64>,
    /// Flow completion time: `finish - start` (as measured by the ns-3 RDMA simulators).
    pub fct_ps: Option<u64>,
    /// FCT of the same flow alone in the fabric on its shortest path: store-and-forward
    /// pipeline of its packets plus the return of the final ACK.
    pub ideal_fct_ps: u64,
    /// `fct / ideal_fct`. At least 1 up to rounding when the representative path (the fastest
    /// link at every hop) is the fastest path, as in any fabric with uniform link rates.
    pub slowdown: Option<f64>,
    /// Data packets put on the wire by the sender, first transmissions and retransmissions.
    pub packets_sent: u64,
    /// Payload bytes sent again after a go-back-N or a timeout.
    pub retransmitted_bytes: u64,
    /// NACKs the sender received.
    pub nacks_received: u32,
    /// Retransmission timeouts that fired.
    pub timeouts: u32,
    /// ACKs/NACKs with the congestion-notification flag the sender received.
    pub cnps_received: u32,
    /// Data packets that reached the receiver ahead of the next expected sequence number.
    pub ooo_arrivals: u64,
    /// Largest distance, in packets, between an out-of-order arrival and the expected sequence.
    pub max_ooo_degree: u32,
    /// Data packets of the flow that reached the receiver after waiting at least once in a
    /// queue paused by PFC.
    pub pfc_paused_packets: u64,
    /// Sum, over the flow's data packets that reached the receiver (in order or not), of the
    /// time each waited in PFC-paused queues (to the nanosecond). At the sender's NIC this
    /// counts the time the NIC port was paused for the flow's priority since its previous
    /// packet, an upper bound when the flow was also held back by pacing.
    pub pfc_wait_total_ps: u64,
    /// Longest time a single data packet of the flow waited in PFC-paused queues.
    pub pfc_wait_max_ps: u64,
    /// `pfc_paused_packets > 0`: the flow was held up by PFC at least once.
    pub stalled: bool,
    /// Distinct paths (sequences of egress ports) the flow's data packets took, counted exactly
    /// up to 8 and saturating there.
    pub paths_used: u8,
    /// Data packets that arrived over a different path than the previous one of the flow.
    pub path_changes: u32,
}

/// Everything measured about one egress port (one direction of a link).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortRecord {
    /// Node that owns the port.
    pub node: u32,
    /// Index of the port on its node.
    pub port: u16,
    /// Node at the far end of the link.
    pub peer: u32,
    /// `true` if the node is a switch, `false` for a host NIC.
    pub is_switch: bool,
    pub rate_bps: u64,
    pub delay_ps: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// PFC PAUSE frames this port sent (because its node's ingress buffer for this port filled).
    pub pfc_pauses_sent: u64,
    /// PFC RESUME frames this port sent.
    pub pfc_resumes_sent: u64,
    /// PFC PAUSE frames received by this port (they stop its egress).
    pub pfc_pauses_received: u64,
    /// Total time during which at least one priority of this port's egress was paused.
    pub paused_time_ps: u64,
    /// Largest egress-queue occupancy seen, all priorities together, in bytes.
    pub peak_queue_bytes: u64,
    /// Time-average egress-queue occupancy from the first flow's start to the end of the run,
    /// all priorities together, in bytes.
    pub mean_queue_bytes: f64,
    /// Data packets marked with ECN CE at dequeue.
    pub ecn_marks: u64,
    /// Packets dropped on arrival because the buffer was full (lossy mode, or headroom overrun).
    pub drops: u64,
    /// Packets lost to faults here: for a switch port, those that arrived on it and were
    /// dropped silently, black-holed or found no route, and those on the wire or queued when
    /// its link went down (see `faults.rs`).
    pub fault_drops: u64,
    /// Load-balancing scheme messages (warnings, feedback, probes) this port sent.
    pub lb_messages_sent: u64,
    /// Most reorder queues in use at once at this egress (schemes that hold packets at the
    /// destination ToR, ConWeave; 0 elsewhere).
    pub reorder_queues_max: u32,
    /// Time average of the reorder queues in use at this egress, from the first flow's start
    /// to the end of the run.
    pub reorder_queues_mean: f64,
}

/// A change of the number of reorder queues in use at one egress port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReorderChange {
    pub time_ps: u64,
    /// Global index of the port (its row in `ports.parquet`).
    pub port_id: u32,
    /// Queues in use from `time_ps` on.
    pub in_use: u32,
}

/// A switch found one of its egresses faulty and reported the switch behind it (RLB*'s
/// failure detection, Algorithm 2 of the RLB paper); the egress is no longer chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlertRecord {
    /// When the port was found faulty.
    pub time_ps: u64,
    /// The switch that raised the alert.
    pub node: u32,
    /// Its local egress port found faulty.
    pub port: u16,
    /// The node behind that port, reported as faulty.
    pub downstream: u32,
}

/// Run-wide counters.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct RunStats {
    /// Events processed by the engine.
    pub events: u64,
    /// Simulated time at which the run stopped.
    pub end_ps: u64,
    /// Wall-clock duration of the run in seconds (not part of the fingerprint).
    pub wall_seconds: f64,
    /// Payload bytes handed to the network by senders for the first time.
    pub bytes_offered: u64,
    /// Payload bytes delivered in order to receivers.
    pub bytes_delivered: u64,
    /// Payload bytes put on the wire by senders, retransmissions included.
    pub payload_sent: u64,
    /// Payload bytes of data packets dropped by switches.
    pub payload_dropped: u64,
    /// Payload bytes that reached a receiver out of order or twice and were discarded.
    pub payload_discarded: u64,
    /// Packets lost, all causes: the sum of the `drops_*` counters.
    pub packets_dropped: u64,
    /// Packets dropped because a switch buffer was full (lossy mode, or headroom overrun).
    pub drops_buffer: u64,
    /// Packets dropped at random by a `silent_drop` fault.
    pub drops_silent: u64,
    /// Packets dropped by a `black_hole` fault.
    pub drops_black_hole: u64,
    /// Packets on the wire or queued for a link when it went down (`link_down`).
    pub drops_link_down: u64,
    /// Packets a switch had no route for (a failed link not yet routed around).
    pub drops_no_route: u64,
    /// Data packets delivered in order to receivers.
    pub data_packets_delivered: u64,
    /// RLB: recirculations of data packets through a switch's loopback (0 for other schemes).
    pub recirculations: u64,
    /// RLB: `recirculations / data_packets_delivered` (0 when nothing was delivered).
    pub recirculations_per_packet: f64,
    /// RLB: PFC warnings (congestion notification messages) sent to upstream switches,
    /// refreshes in `expiry` mode included; clearing messages are not counted.
    pub cnm_warnings: u64,
    /// RLB: clearing messages that ended a warning (`warning_end = "clear"`).
    pub cnm_clears: u64,
    /// RLB: data packets sent to another path than the inner scheme's choice because of a
    /// warning (Algorithm 1's replace step).
    pub rlb_reroutes: u64,
    /// RLB*: switches reported faulty (rows of `alerts.parquet`).
    pub alerts: u64,
    pub flows_total: u64,
    pub flows_finished: u64,
    /// Hash of the event trajectory: equal for equal specs and seeds.
    pub fingerprint: u64,
}
