//! What a run measures: one record per flow, one per port, and run-wide counters.
//!
//! The definitions here are the single source of truth for every number pfcsim reports: a
//! record written as a Parquet table is declared with `record!` (`table.rs`), which makes its
//! columns from its fields, and `docs/reference/metrics.md` must document every column (a test of
//! `output` compares them). The totals a results store takes over the ports are
//! [`PORT_TOTALS`].

mod coflows;
pub mod table;
pub use coflows::{coflow_records, coflow_stats, CoflowRecord, CoflowStats};
use table::record;

/// Picoseconds as microseconds, the unit of the `_us` columns and of the FCT summary.
pub fn ps_to_us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

record! {
    /// Everything measured about one flow.
    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct FlowRecord {
        /// Index of the flow in the run's flow table (0-based, in order of start time).
        pub flow_id: u32,
        /// Which traffic source made the flow (`poisson`, `incast`, `background`, `scripted`,
        /// `flow_file`, `coflow`, `permutation`).
        pub source: &'static str,
        /// Index of the `[[traffic]]` entry that made the flow.
        pub generator: u16,
        /// The flow's coflow (`None`: in no coflow).
        pub coflow: Option<u32>,
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
        /// `fct / ideal_fct`. At least 1 up to rounding when the representative path (the
        /// fastest link at every hop) is the fastest path, as in any fabric with uniform link
        /// rates.
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
        /// Data packets of the flow that reached the receiver: in order, out of order and
        /// duplicates, first transmissions and retransmitted copies.
        pub packets_received: u64,
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
        /// The flow's transport: `roce` (go-back-N), `irn` or `tcp`.
        pub transport: &'static str,
        /// TCP: segments sent again by fast retransmit and by NewReno's partial-ACK
        /// retransmissions during fast recovery (0 for RoCE flows, which count `nacks_received`).
        pub fast_retransmits: u32,
        /// TCP: duplicate ACKs the sender received (0 for RoCE flows).
        pub dup_acks: u32,
        /// IRN: the most payload bytes the receiver held out of order at once (0 for the
        /// other transports).
        pub ooo_buffer_max_bytes: u64,
    }
    /// The FCT in microseconds, `fct_ps / 10^6` (`None`: not finished).
    derived fct_us: Option<f64> = |f| f.fct_ps.map(ps_to_us);
}

record! {
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
        /// PFC PAUSE frames this port sent (because its node's ingress buffer for this port
        /// filled).
        pub pfc_pauses_sent: u64,
        /// PFC RESUME frames this port sent.
        pub pfc_resumes_sent: u64,
        /// PFC PAUSE frames received by this port (they stop its egress).
        pub pfc_pauses_received: u64,
        /// Total time during which at least one priority of this port's egress was paused.
        pub paused_time_ps: u64,
        /// Largest egress-queue occupancy seen, all priorities together, in bytes.
        pub peak_queue_bytes: u64,
        /// Time-average egress-queue occupancy from the first flow's start to the end of the
        /// run, all priorities together, in bytes.
        pub mean_queue_bytes: f64,
        /// Data packets marked with ECN CE at dequeue.
        pub ecn_marks: u64,
        /// Packets dropped on arrival because the buffer was full (lossy mode, or headroom
        /// overrun).
        pub drops: u64,
        /// Data packets dropped on arrival because this egress queue was at its drop-tail limit
        /// (`switch.egress_limit`).
        pub egress_drops: u64,
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
}

/// A run-wide total of a port column, which a results store adds to its `runs` table
/// (`python/pfcsim/store.py`): `aggregate(column)` over the run's ports, in microseconds
/// (divided by 10^6) when a total named `_us` folds a column in picoseconds (`_ps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortTotal {
    /// The total's column in `runs`.
    pub name: &'static str,
    /// The SQL aggregate: `sum` or `max`.
    pub aggregate: &'static str,
    /// The [`PortRecord`] field (column of `ports.parquet`) it folds.
    pub column: &'static str,
}

/// The port totals of a run, in the order of their columns in a results store's `runs` table
/// (`docs/guides/sweeps.md`).
pub const PORT_TOTALS: &[PortTotal] = &[
    PortTotal::new("pfc_pauses", "sum", "pfc_pauses_sent"),
    PortTotal::new("pfc_paused_time_us", "sum", "paused_time_ps"),
    PortTotal::new("ecn_marks", "sum", "ecn_marks"),
    PortTotal::new("port_drops", "sum", "drops"),
    PortTotal::new("lb_messages", "sum", "lb_messages_sent"),
    // The largest occupancy any egress reached (all its priorities together).
    PortTotal::new("peak_queue_bytes", "max", "peak_queue_bytes"),
    // Reorder queues (schemes that hold packets at the destination ToR): the most any egress
    // had in use at once, and the largest time average of an egress.
    PortTotal::new("reorder_queues_max", "max", "reorder_queues_max"),
    PortTotal::new("reorder_queues_mean", "max", "reorder_queues_mean"),
];

impl PortTotal {
    const fn new(name: &'static str, aggregate: &'static str, column: &'static str) -> Self {
        PortTotal {
            name,
            aggregate,
            column,
        }
    }
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

record! {
    /// A row of `reorder_queues.parquet`: a [`ReorderChange`] with its port's node and index.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ReorderRow {
        /// When the count changed.
        pub time_ps: u64,
        /// Global index of the port (its row in `ports.parquet`).
        pub port_id: u32,
        /// Node that owns the port.
        pub node: u32,
        /// Index of the port on its node.
        pub port: u16,
        /// Queues in use from `time_ps` on.
        pub in_use: u32,
    }
}

impl ReorderRow {
    /// The row of `change`, whose port is `ports[change.port_id]`.
    pub fn new(change: &ReorderChange, ports: &[PortRecord]) -> Self {
        let port = &ports[change.port_id as usize];
        ReorderRow {
            time_ps: change.time_ps,
            port_id: change.port_id,
            node: port.node,
            port: port.port,
            in_use: change.in_use,
        }
    }
}

record! {
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
}

record! {
    /// One egress of a PFC deadlock (`sim/stall.rs`): a switch's egress paused by the switch at
    /// the other end of its link, in a cycle of such egresses each of which waits on the next
    /// and none of which can ever resume. One row of `deadlocks.parquet` per egress.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct DeadlockRecord {
        /// Which deadlock of the run (0, 1, ...: several may be found at once).
        pub deadlock: u32,
        /// When the check that found it ran.
        pub detected_ps: u64,
        /// When it formed: the latest start of its egresses' pauses, from which on all of them
        /// were paused.
        pub formed_ps: u64,
        /// The switch of the paused egress.
        pub node: u32,
        /// Its local port index (as `ports.parquet`'s `port`).
        pub port: u16,
        /// The switch at the other end of the link, which paused it.
        pub peer: u32,
        /// The paused priority.
        pub priority: u8,
        /// When this egress's pause began.
        pub paused_since_ps: u64,
        /// Bytes the peer's ingress for this link holds that wait in other egresses of the
        /// deadlock (queued bytes, wire size).
        pub stuck_bytes: u64,
    }
}

/// What the monitors of a run (`[[monitor]]` entries) recorded, one list per kind; `None`: no
/// monitor of that kind. Every row names the monitor entry that made it (`monitor`, its index
/// among the spec's `[[monitor]]` entries). Rows are in time order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MonitorOutput {
    pub queue: Option<Vec<QueueSample>>,
    pub pfc: Option<Vec<PfcEvent>>,
    pub rate: Option<Vec<RateSample>>,
    pub link_util: Option<Vec<LinkUtilSample>>,
    pub scheme: Option<Vec<SchemeSample>>,
    /// PFC frames not logged because a `pfc` monitor had logged its `max_events`.
    pub pfc_events_dropped: u64,
}

record! {
    /// The buffer use of one (switch port, priority) at one time.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct QueueSample {
        pub monitor: u16,
        pub time_ps: u64,
        pub node: u32,
        pub port: u16,
        pub priority: u8,
        /// Bytes waiting in the port's egress queue of this priority (wire bytes).
        pub egress_bytes: u64,
        /// Bytes of this priority that arrived on this port and are still in the switch, as its
        /// buffer charges them to the port (reserve, shared pool and headroom).
        pub ingress_bytes: u64,
        /// The value of `ingress_bytes` at which the switch sends PAUSE out of this port: the
        /// reserve plus the current XOFF threshold (dynamic or static).
        pub xoff_bytes: u64,
    }
}

record! {
    /// A PFC frame sent or received at a port.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct PfcEvent {
        pub monitor: u16,
        pub time_ps: u64,
        pub node: u32,
        pub port: u16,
        /// The node at the far end of the port's link.
        pub peer: u32,
        pub priority: u8,
        /// `"sent"`: the switch queued the frame out of this port (its buffer for traffic arriving
        /// on the port crossed XOFF or came back to XON); `"received"`: the frame arrived and
        /// stops (PAUSE) or restarts (RESUME) this port's egress.
        pub direction: &'static str,
        /// `"pause"` or `"resume"`.
        pub frame: &'static str,
        /// For a RESUME: the time since the PAUSE it ends (sent: since that PAUSE was queued;
        /// received: the time the egress was paused). `None` for a PAUSE.
        pub duration_ps: Option<u64>,
    }
}

record! {
    /// A flow's sending rate and progress at one time.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct RateSample {
        pub monitor: u16,
        pub time_ps: u64,
        pub flow_id: u32,
        /// RoCE: the rate the queue pair paces at (DCQCN's current rate; the line rate without
        /// congestion control). TCP: the rate its window allows, cwnd over the smoothed RTT (at
        /// most the line rate). Bit/s.
        pub rate_bps: f64,
        /// DCQCN's target rate, bit/s (`None` without congestion control, and for TCP).
        pub target_bps: Option<f64>,
        /// TCP's congestion window, bytes (`None` for RoCE).
        pub cwnd_bytes: Option<u64>,
        /// Bytes acknowledged so far (the sender's first unacknowledged byte).
        pub acked_bytes: u64,
        /// CNP-flagged ACKs and NACKs received so far.
        pub cnps: u32,
    }
}

record! {
    /// The bytes a port sent over one interval.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct LinkUtilSample {
        pub monitor: u16,
        /// End of the interval.
        pub time_ps: u64,
        pub node: u32,
        pub port: u16,
        pub peer: u32,
        /// Wire bytes of the packets whose transmission started in the interval.
        pub tx_bytes: u64,
        /// `tx_bytes` over what the link's rate could send in the interval.
        pub utilization: f64,
    }
}

record! {
    /// One value a switch's load-balancing scheme exposes (`SwitchScheme::samples`).
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct SchemeSample {
        pub monitor: u16,
        pub time_ps: u64,
        pub node: u32,
        /// The signal's name, chosen by the scheme (each scheme's page lists its own).
        pub signal: &'static str,
        /// Which instance of the signal (a port, a path), as the scheme numbers them.
        pub key: u32,
        pub value: f64,
    }
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
    /// Packets dropped because their egress queue was at its drop-tail limit
    /// (`switch.egress_limit`).
    pub drops_egress: u64,
    /// Packets dropped by a `black_hole` fault.
    pub drops_black_hole: u64,
    /// Packets on the wire or queued for a link when it went down (`link_down`).
    pub drops_link_down: u64,
    /// Packets a switch had no route for (a failed link not yet routed around).
    pub drops_no_route: u64,
    /// Loss rate: `payload_dropped / payload_sent` (payload bytes lost, all causes, over
    /// payload bytes put on the wire; 0 when nothing was sent).
    pub loss_rate: f64,
    /// Data packets a receiver's resequencing buffer held back and then passed to the
    /// transport in order (schemes with one: Presto).
    pub resequenced_packets: u64,
    /// Data packets a resequencing buffer pushed to the transport out of order, after its
    /// timeout or when full (go-back-N then discards them and NACKs).
    pub reseq_flushed_packets: u64,
    /// Data packets delivered in order to receivers.
    pub data_packets_delivered: u64,
    /// Switches reported faulty by the scheme (RLB*'s Algorithm 2; rows of `alerts.parquet`).
    pub alerts: u64,
    /// The scheme's own counters, summed over switches (and hosts), as `<scheme>.<counter>`
    /// (e.g. `rlb.recirculations`, `conweave.reroutes`; each scheme's page lists its own).
    /// Written to `stats.json` as top-level keys.
    #[serde(flatten)]
    pub scheme_counters: std::collections::BTreeMap<String, u64>,
    /// What the monitors could not record (`monitor.pfc_events_dropped`), only in runs with
    /// such monitors. Written to `stats.json` as top-level keys.
    #[serde(flatten)]
    pub monitor_counters: std::collections::BTreeMap<String, u64>,
    pub flows_total: u64,
    pub flows_finished: u64,
    /// Start of the measured interval `[measure_from_ps, end_ps]`: the start of the first flow
    /// (time averages and the PFC rates below are taken over this interval).
    pub measure_from_ps: u64,
    /// Data packets that reached a receiver (in order, out of order, duplicates): the sum of
    /// the flows' `packets_received`.
    pub data_packets_received: u64,
    /// Data packets that reached a receiver ahead of the next expected sequence number: the
    /// sum of the flows' `ooo_arrivals`.
    pub ooo_arrivals: u64,
    /// `ooo_arrivals / data_packets_received` (0 when no data packet arrived): the RLB
    /// paper's "ratio of out-of-order packets".
    pub ooo_ratio: f64,
    /// Median out-of-order degree over the out-of-order arrivals (see [`OodHistogram`]; 0 if
    /// there were none).
    pub ood_p50: u64,
    /// 99th-percentile out-of-order degree over the out-of-order arrivals: the RLB paper's
    /// "99th percentile of OOD" (see [`OodHistogram`]; 0 if there were none).
    pub ood_p99: u64,
    /// Largest out-of-order degree (exact; the largest of the flows' `max_ooo_degree`).
    pub ood_max: u64,
    /// PFC pause rate: the fraction of (pausable port x measured time) during which the
    /// port's egress was paused by PFC, `sum(paused_time_ps) / (ports x (end_ps -
    /// measure_from_ps))` over the pausable ports, those whose peer is a switch (host NICs
    /// and switch-to-switch ports; the only ports a PAUSE can reach, since hosts send none).
    /// 0 without pausable ports or with an empty interval.
    pub pfc_pause_rate: f64,
    /// PAUSE frames sent per pausable port per second of measured time: `sum(pfc_pauses_sent)
    /// / (ports x (end_ps - measure_from_ps) in seconds)`, same ports and interval as
    /// `pfc_pause_rate`.
    pub pfc_pauses_per_port_s: f64,
    /// Coflow completion times and the stalled-flow ratio, only in runs with coflows (rows
    /// of `coflows.parquet`). Written to `stats.json` as top-level keys.
    #[serde(flatten)]
    pub coflows: Option<CoflowStats>,
    /// PFC deadlocks found (rows of `deadlocks.parquet` by their `deadlock`): 0, or the
    /// deadlocks that ended the run.
    pub deadlocks: u64,
    /// When the first of them formed, only in runs with a deadlock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadlock_formed_ps: Option<u64>,
    /// Each deadlock's priority and egresses, `priority 3: switch 5 port 2 -> 6, ...`
    /// (deadlocks separated by `; `), only in runs with a deadlock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadlock_cycles: Option<String>,
    /// Why the run stopped early, if a guard of `[run]` (`max_events`, `max_sim_time`) or a
    /// stall (`no_progress`, `deadlock_check`) ended it: the key, where the run stood and what
    /// to do. Everything else measures the run up to that point. Written to `stats.json` only
    /// in such runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// Hash of the event trajectory: equal for equal specs and seeds.
    pub fingerprint: u64,
}

impl RunStats {
    /// The scheme counter `key` (`<scheme>.<counter>`, e.g. `rlb.recirculations`), 0 if the
    /// run's scheme has no such counter.
    pub fn counter(&self, key: &str) -> u64 {
        self.scheme_counters.get(key).copied().unwrap_or(0)
    }
}

/// The 1-based rank of the `q`-quantile among `n > 0` sorted values by the nearest-rank
/// method: `ceil(q * n)` kept within `1..=n`, `q` clamped to `[0, 1]`, and a `q * n` within
/// floating-point rounding of an integer counted as that integer (0.07 of 100 values is rank
/// 7, although `0.07 * 100.0` is 7.000000000000001). A NaN `q` gives rank 1.
pub fn nearest_rank(n: usize, q: f64) -> usize {
    let exact = q.clamp(0.0, 1.0) * n as f64;
    let nearest = exact.round();
    let rank = if (exact - nearest).abs() <= 1e-9 * nearest.max(1.0) {
        nearest
    } else {
        exact.ceil()
    };
    // A NaN `q` gives rank 0 here (float-to-int casts saturate), hence rank 1.
    (rank as usize).clamp(1, n)
}

/// Run-wide distribution of the out-of-order degree (OOD): for every data packet that reaches
/// its receiver ahead of the next expected sequence number, `ceil((seq - expected) /
/// payload)` packets (the RLB paper: "the difference between the sequence numbers of an
/// out-of-order packet and the expected one").
///
/// Resolution: degrees below 4096 are counted exactly; above, in log-spaced buckets of 64
/// per power of two (bucket width 2^(k-6) for degrees in `[2^k, 2^(k+1))`, at most 1/64 of
/// the degree). A quantile that falls in such a bucket is reported as the bucket's largest
/// degree, capped by the exact maximum: at most 1.6% above the true value, never below it.
/// The table is allocated once (7424 counters); recording is an index computation and an add.
#[derive(Clone, Debug)]
pub struct OodHistogram {
    counts: Box<[u64]>,
    max: u64,
}

impl Default for OodHistogram {
    fn default() -> Self {
        OodHistogram {
            counts: vec![0; Self::BUCKETS].into_boxed_slice(),
            max: 0,
        }
    }
}

impl OodHistogram {
    /// Degrees below `2^EXACT_BITS` have a counter each.
    const EXACT_BITS: u32 = 12;
    /// Buckets per power of two above that: `2^SUB_BITS`.
    const SUB_BITS: u32 = 6;
    const BUCKETS: usize =
        (1 << Self::EXACT_BITS) + ((64 - Self::EXACT_BITS as usize) << Self::SUB_BITS);

    /// The bucket of degree `v`.
    #[inline]
    fn index(v: u64) -> usize {
        if v < 1 << Self::EXACT_BITS {
            v as usize
        } else {
            let k = 63 - v.leading_zeros();
            let sub = (v >> (k - Self::SUB_BITS)) as usize & ((1 << Self::SUB_BITS) - 1);
            (1 << Self::EXACT_BITS) + (((k - Self::EXACT_BITS) as usize) << Self::SUB_BITS) + sub
        }
    }

    /// The largest degree that falls in bucket `i`.
    fn upper(i: usize) -> u64 {
        if i < 1 << Self::EXACT_BITS {
            return i as u64;
        }
        let j = i - (1 << Self::EXACT_BITS);
        let k = (j >> Self::SUB_BITS) as u32 + Self::EXACT_BITS;
        let sub = (j & ((1 << Self::SUB_BITS) - 1)) as u64;
        let width = 1u64 << (k - Self::SUB_BITS);
        ((1 << Self::SUB_BITS) + sub) * width + (width - 1)
    }

    /// Counts one out-of-order arrival of degree `v`.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[Self::index(v)] += 1;
        self.max = self.max.max(v);
    }

    /// Out-of-order arrivals counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The largest degree counted (exact; 0 if none).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The `q`-quantile of the degrees counted, by the nearest rank ([`nearest_rank`]), to the
    /// resolution above; 0 if nothing was counted.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.count();
        if n == 0 {
            return 0;
        }
        let rank = nearest_rank(n as usize, q) as u64;
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        unreachable!("rank <= count")
    }
}

/// The PFC pause rate and PAUSE frame rate of a run (see [`RunStats::pfc_pause_rate`] and
/// [`RunStats::pfc_pauses_per_port_s`]) from its port records, given which ports are pausable
/// (their peer is a switch) and the measured interval in picoseconds.
pub fn pfc_rates(
    ports: &[PortRecord],
    pausable: impl Fn(&PortRecord) -> bool,
    interval_ps: u64,
) -> (f64, f64) {
    let mut count = 0u64;
    let mut paused_ps = 0u128;
    let mut pauses = 0u64;
    for p in ports {
        pauses += p.pfc_pauses_sent;
        if pausable(p) {
            count += 1;
            paused_ps += p.paused_time_ps as u128;
        }
    }
    if count == 0 || interval_ps == 0 {
        return (0.0, 0.0);
    }
    let port_time_ps = count as f64 * interval_ps as f64;
    (
        paused_ps as f64 / port_time_ps,
        pauses as f64 / (port_time_ps * 1e-12),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ood_quantiles_are_nearest_rank_over_exact_counts() {
        let mut h = OodHistogram::default();
        assert_eq!((h.count(), h.quantile(0.99), h.max()), (0, 0, 0));
        for v in 1..=100 {
            h.record(v);
        }
        h.record(4095);
        // 101 values: rank ceil(50.5) = 51 and ceil(99.99) = 100.
        assert_eq!(h.count(), 101);
        assert_eq!(
            (h.quantile(0.5), h.quantile(0.99), h.max()),
            (51, 100, 4095)
        );
        assert_eq!((h.quantile(0.0), h.quantile(1.0)), (1, 4095));
    }

    #[test]
    fn ood_buckets_beyond_the_exact_range_are_tight_upper_bounds() {
        let max = OodHistogram::BUCKETS - 1;
        let mut values: Vec<u64> = (4000..70_000).collect();
        for k in 12..64 {
            let p = 1u64 << k;
            values.extend([p - 1, p, p + 1, p + p / 3]);
        }
        values.push(u64::MAX);
        values.sort_unstable();
        let mut last = 0;
        for v in values {
            let i = OodHistogram::index(v);
            assert!(i >= last && i <= max, "{v}: bucket {i}");
            last = i;
            let up = OodHistogram::upper(i);
            assert!(up >= v && up - v <= v / 64, "{v}: upper bound {up}");
            // `upper` is the last degree of its bucket: the next one starts the next bucket.
            assert_eq!(OodHistogram::index(up), i);
            if up < u64::MAX {
                assert_eq!(OodHistogram::index(up + 1), i + 1, "{v}");
            }
        }
        assert_eq!(last, max, "the largest degree uses the last counter");
        // Below 4096 every degree has its own counter.
        assert!((0..4096).all(|v| OodHistogram::index(v) == v as usize));
    }

    #[test]
    fn an_ood_quantile_in_a_wide_bucket_reports_its_upper_bound_capped_by_the_maximum() {
        let mut h = OodHistogram::default();
        // 10,000 is in [9,984, 10,111] (width 128 between 8,192 and 16,383).
        h.record(10_000);
        assert_eq!(h.quantile(0.5), 10_000, "capped by the exact maximum");
        h.record(10_100);
        h.record(3);
        // Rank 2 of 3 is in that bucket: its last degree, 10,111, capped by the maximum.
        assert_eq!((h.quantile(0.5), h.quantile(0.33)), (10_100, 3));
        h.record(20_000);
        // Rank 2 of 4 is in the 10,000 bucket, whose last degree is 10,111.
        assert_eq!((h.quantile(0.5), h.max()), (10_111, 20_000));
    }

    #[test]
    fn port_totals_fold_numeric_port_columns_keeping_their_unit() {
        use table::Table;
        let schema = PortRecord::schema();
        for total in PORT_TOTALS {
            let field = schema
                .field_with_name(total.column)
                .unwrap_or_else(|_| panic!("{}: {} is no port column", total.name, total.column));
            assert!(field.data_type().is_numeric(), "{}", total.column);
            assert!(["sum", "max"].contains(&total.aggregate), "{total:?}");
            // `_ps` columns make `_us` totals (the store divides them by 10^6), and only they.
            assert_eq!(
                total.column.ends_with("_ps"),
                total.name.ends_with("_us"),
                "{total:?}"
            );
        }
        let mut names: Vec<&str> = PORT_TOTALS.iter().map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PORT_TOTALS.len(), "a total is named twice");
    }

    fn port(peer: u32, paused_time_ps: u64, pfc_pauses_sent: u64) -> PortRecord {
        PortRecord {
            peer,
            paused_time_ps,
            pfc_pauses_sent,
            ..Default::default()
        }
    }

    #[test]
    fn pfc_rates_divide_by_pausable_port_time() {
        // Peers 10 and 11 are switches; 0 is a host (its port is never paused).
        let ports = [port(10, 300, 2), port(11, 100, 1), port(0, 0, 3)];
        let (rate, frames) = pfc_rates(&ports, |p| p.peer >= 10, 1_000);
        assert_eq!(rate, 400.0 / 2_000.0);
        // 6 frames over 2 ports x 1 ns.
        assert_eq!(frames, 6.0 / 2e-9);
        assert_eq!(pfc_rates(&ports, |p| p.peer >= 10, 0), (0.0, 0.0));
        assert_eq!(pfc_rates(&ports, |_| false, 1_000), (0.0, 0.0));
    }
}
