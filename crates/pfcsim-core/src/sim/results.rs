//! What a run returns: [`RunOutput`], collected from the simulation's state when it stops.

use super::Simulation;
use crate::lb::Counters;
use crate::metrics::{
    coflow_records, coflow_stats, pfc_rates, AlertRecord, CoflowRecord, DeadlockRecord, FlowRecord,
    MonitorOutput, PortRecord, ReorderChange, RunStats,
};

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
    /// What the monitors recorded (`None`: the run has no monitor).
    pub monitors: Option<MonitorOutput>,
    /// One record per coflow (empty: the run has no coflow).
    pub coflows: Vec<CoflowRecord>,
    /// The egresses of the PFC deadlocks that ended the run (empty: none).
    pub deadlocks: Vec<DeadlockRecord>,
    /// What the deadlock checks did (not written to the run folder).
    pub deadlock_checks: super::DeadlockChecks,
}

impl Simulation {
    /// Turns the state into results.
    pub(super) fn finish(self, wall_seconds: f64) -> RunOutput {
        let now = self.now;
        let flows: Vec<FlowRecord> = self
            .flows
            .iter()
            .map(|f| self.transports.record(f))
            .collect();
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
        let ooo_arrivals = self.totals.ood.count();
        let is_switch = |node: u32| self.host_index[node as usize] == u32::MAX;
        let measured_ps = now.saturating_sub(self.measure_from).ps();
        let (pfc_pause_rate, pfc_pauses_per_port_s) =
            pfc_rates(&ports, |p| is_switch(p.peer), measured_ps);
        let mut counters = Counters::new(self.cfg.lb.name());
        let mut alerts = Vec::new();
        for sw in &self.switches {
            sw.lb.counters(&mut counters);
            alerts.extend_from_slice(sw.lb.alerts());
        }
        if let Some(side) = &self.host_side {
            side.counters(&mut counters);
        }
        alerts.sort_by_key(|a: &AlertRecord| (a.time_ps, a.node, a.port));
        let monitors = self.monitors.map(|m| m.finish());
        let mut monitor_counters = std::collections::BTreeMap::new();
        if let Some(m) = monitors.as_ref().filter(|m| m.pfc.is_some()) {
            monitor_counters.insert("monitor.pfc_events_dropped".into(), m.pfc_events_dropped);
        }
        let coflows = coflow_records(&flows);
        let deadlocks = self.stall.found;
        let stats = RunStats {
            events: self.events_done,
            end_ps: now.ps(),
            wall_seconds,
            bytes_offered: self.totals.bytes_offered,
            bytes_delivered: self.totals.bytes_delivered,
            payload_sent: self.totals.payload_sent,
            payload_dropped: self.payload_dropped,
            payload_discarded: self.totals.payload_discarded,
            packets_dropped: self.drops
                + self.drops_egress
                + self.faults.drops.silent
                + self.faults.drops.black_hole
                + self.faults.drops.link_down
                + self.faults.drops.no_route,
            drops_buffer: self.drops,
            drops_egress: self.drops_egress,
            drops_silent: self.faults.drops.silent,
            drops_black_hole: self.faults.drops.black_hole,
            drops_link_down: self.faults.drops.link_down,
            drops_no_route: self.faults.drops.no_route,
            loss_rate: if self.totals.payload_sent > 0 {
                self.payload_dropped as f64 / self.totals.payload_sent as f64
            } else {
                0.0
            },
            resequenced_packets: self.reseq.as_ref().map_or(0, |r| r.resequenced),
            reseq_flushed_packets: self.reseq.as_ref().map_or(0, |r| r.flushed),
            data_packets_delivered: self.totals.data_packets_delivered,
            alerts: alerts.len() as u64,
            scheme_counters: counters.into_map(),
            monitor_counters,
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
            ood_p50: self.totals.ood.quantile(0.5),
            ood_p99: self.totals.ood.quantile(0.99),
            ood_max: self.totals.ood.max(),
            pfc_pause_rate,
            pfc_pauses_per_port_s,
            coflows: coflow_stats(&coflows),
            deadlocks: deadlocks.last().map_or(0, |d| d.deadlock as u64 + 1),
            deadlock_formed_ps: deadlocks.iter().map(|d| d.formed_ps).min(),
            deadlock_cycles: (!deadlocks.is_empty()).then(|| super::stall::describe(&deadlocks)),
            incomplete: None,
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
            monitors,
            coflows,
            deadlocks,
            deadlock_checks: self.stall.checks,
        }
    }
}
