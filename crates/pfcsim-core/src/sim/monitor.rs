//! Monitors in the run (`crate::monitor` has the spec side): periodic looks at queues, flows,
//! ports and schemes, and the log of PFC frames.
//!
//! A periodic monitor is one pending `Look::Monitor(i)` at a time, in the run's schedule of
//! looks (`events.rs`), not an event: the event loop neither counts it nor folds it into the
//! fingerprint, and a look changes nothing but the monitor's own rows, so a run with monitors
//! makes the same events at the same times as without. A monitor stops looking after its
//! `end`, after the run's stop time, at its row limit, and when no event is pending (the
//! network has drained: a look would keep a drained run alive).
//! PFC frames are logged where they are sent and received (`links.rs`), a test per frame only
//! in runs with monitors.

use super::events::Look;
use super::Simulation;
use crate::metrics::{
    LinkUtilSample, MonitorOutput, PfcEvent, QueueSample, RateSample, SchemeSample,
};
use crate::monitor::{Monitor, MonitorKind};
use crate::port::{NodeRef, N_PRIO};
use crate::units::Time;
use std::collections::HashMap;

/// The monitors of a run and what they recorded.
pub(super) struct Monitors {
    list: Vec<Running>,
    /// Per global port: the `pfc` monitors watching it (positions in `list`).
    pfc_watch: Vec<Vec<u16>>,
    /// Per (global port, priority): when the last PAUSE was queued out of it.
    pause_sent_at: Vec<Time>,
    out: MonitorOutput,
}

/// One monitor and its state.
struct Running {
    m: Monitor,
    /// Its position among the spec's monitors.
    index: u16,
    /// What it watches by global id: ports (queue, pfc, link_util), or switch positions and
    /// hosts (`HOST_TARGET | node`) (scheme).
    targets: Vec<u32>,
    /// Per series, the last value written (on change) or the last byte count (link_util).
    last: Vec<(u64, u64)>,
    /// Per (target, signal, key), the last value written (scheme, on change).
    last_signal: HashMap<(u32, &'static str, u32), u64>,
    rows: u64,
    /// Looks taken so far.
    looks: u64,
}

/// A value never written: every first look of a series writes it.
const NONE_YET: (u64, u64) = (u64::MAX, u64::MAX);
/// A scheme monitor's target that is a host: this bit set on its node id (other targets are
/// switch indices).
const HOST_TARGET: u32 = 1 << 31;

impl Simulation {
    /// Adds the run's monitors (none: the run is unchanged and does no monitor work).
    pub fn with_monitors(mut self, monitors: Vec<Monitor>) -> Simulation {
        if monitors.is_empty() {
            return self;
        }
        let mut first_port = vec![u32::MAX; self.host_index.len()];
        for (i, p) in self.ports.iter().enumerate().rev() {
            first_port[p.node as usize] = i as u32;
        }
        // A scheme monitor's targets: switch indices, and hosts as `HOST_TARGET | node`.
        let scheme_target = |node: u32| match self.switches.iter().position(|s| s.node == node) {
            Some(s) => s as u32,
            None => HOST_TARGET | node,
        };
        let mut out = MonitorOutput::default();
        let mut pfc_watch = Vec::new();
        let mut list = Vec::with_capacity(monitors.len());
        for (index, m) in monitors.into_iter().enumerate() {
            let targets: Vec<u32> = match m.kind {
                MonitorKind::Scheme => m.nodes.iter().map(|&n| scheme_target(n)).collect(),
                MonitorKind::Rate => m.flows.clone(),
                _ => m
                    .ports
                    .iter()
                    .map(|&(n, local)| first_port[n as usize] + local as u32)
                    .collect(),
            };
            let series = match m.kind {
                MonitorKind::Queue => targets.len() * N_PRIO,
                MonitorKind::Pfc | MonitorKind::Scheme => 0,
                MonitorKind::Rate | MonitorKind::LinkUtil => targets.len(),
            };
            match m.kind {
                MonitorKind::Queue => out.queue = Some(Vec::new()),
                MonitorKind::Pfc => {
                    out.pfc = Some(Vec::new());
                    pfc_watch.resize(self.ports.len(), Vec::new());
                    for &p in &targets {
                        pfc_watch[p as usize].push(index as u16);
                    }
                }
                MonitorKind::Rate => out.rate = Some(Vec::new()),
                MonitorKind::LinkUtil => out.link_util = Some(Vec::new()),
                MonitorKind::Scheme => out.scheme = Some(Vec::new()),
            }
            list.push(Running {
                m,
                index: index as u16,
                targets,
                last: vec![NONE_YET; series],
                last_signal: HashMap::new(),
                rows: 0,
                looks: 0,
            });
        }
        for (i, r) in list.iter().enumerate() {
            if r.m.kind != MonitorKind::Pfc && r.m.start <= self.stop.at && r.m.max_rows > 0 {
                self.schedule_look(r.m.start, Look::Monitor(i as u32));
            }
        }
        let pause_sent_at = if pfc_watch.is_empty() {
            Vec::new()
        } else {
            vec![Time::ZERO; self.ports.len() * N_PRIO]
        };
        self.monitors = Some(Box::new(Monitors {
            list,
            pfc_watch,
            pause_sent_at,
            out,
        }));
        self
    }

    /// Monitor `i` looks at time `t` (the state is that after the last event), then sets its
    /// next look. Kept out of line: the event loop of a run without monitors stays as it was.
    #[cold]
    #[inline(never)]
    pub(super) fn monitor_look(&mut self, t: Time, i: u32) {
        let mut mons = self
            .monitors
            .take()
            .expect("monitor events only with monitors");
        let Monitors { list, out, .. } = &mut *mons;
        let r = &mut list[i as usize];
        match r.m.kind {
            MonitorKind::Queue => self.look_queues(t, r, out),
            MonitorKind::Rate => self.look_rates(t, r, out),
            MonitorKind::LinkUtil => self.look_links(t, r, out),
            MonitorKind::Scheme => self.look_schemes(t, r, out),
            MonitorKind::Pfc => unreachable!("pfc monitors log frames, they do not look"),
        }
        r.looks += 1;
        let next = t + r.m.period;
        if next <= r.m.end
            && next <= self.stop.at
            && self.events_left() > 0
            && r.rows < r.m.max_rows
        {
            self.schedule_look(next, Look::Monitor(i));
        }
        self.monitors = Some(mons);
    }

    fn look_queues(&self, t: Time, r: &mut Running, out: &mut MonitorOutput) {
        let rows = out.queue.as_mut().expect("a queue monitor has its table");
        for (k, &p) in r.targets.iter().enumerate() {
            let port = &self.ports[p as usize];
            let NodeRef::Switch(s) = port.owner else {
                unreachable!("queue monitors watch switch ports")
            };
            let mmu = &self.switches[s as usize].mmu;
            let local = port.rec.port;
            let xoff = mmu.reserve() + mmu.threshold();
            for q in (0..N_PRIO as u8).filter(|q| r.m.priorities & 1 << q != 0) {
                let value = (port.queue_bytes(q), mmu.charged(local as usize, q));
                let last = &mut r.last[k * N_PRIO + q as usize];
                if r.m.on_change && *last == value {
                    continue;
                }
                *last = value;
                if r.rows == r.m.max_rows {
                    return;
                }
                r.rows += 1;
                rows.push(QueueSample {
                    monitor: r.index,
                    time_ps: t.ps(),
                    node: port.node,
                    port: local,
                    priority: q,
                    egress_bytes: value.0,
                    ingress_bytes: value.1,
                    xoff_bytes: xoff,
                });
            }
        }
    }

    fn look_rates(&self, t: Time, r: &mut Running, out: &mut MonitorOutput) {
        let rows = out.rate.as_mut().expect("a rate monitor has its table");
        for (k, &f) in r.targets.iter().enumerate() {
            if f as usize >= self.next_flow {
                break; // not started (flows start in id order), nor are the next ones
            }
            let flow = &self.flows[f as usize];
            if !flow.is_unfinished() {
                continue;
            }
            let seen = self.transports.observe(flow, t);
            let (rate, acked) = (seen.rate, flow.snd_una);
            let value = (rate.to_bits(), acked);
            if r.m.on_change && r.last[k] == value {
                continue;
            }
            r.last[k] = value;
            if r.rows == r.m.max_rows {
                return;
            }
            r.rows += 1;
            rows.push(RateSample {
                monitor: r.index,
                time_ps: t.ps(),
                flow_id: f,
                rate_bps: rate,
                target_bps: seen.target,
                cwnd_bytes: seen.cwnd,
                acked_bytes: acked,
                cnps: flow.cnps_received,
            });
        }
    }

    fn look_links(&self, t: Time, r: &mut Running, out: &mut MonitorOutput) {
        let rows = out
            .link_util
            .as_mut()
            .expect("a link_util monitor has its table");
        for (k, &p) in r.targets.iter().enumerate() {
            let port = &self.ports[p as usize];
            let before = std::mem::replace(&mut r.last[k].0, port.tx_bytes);
            // The first look only takes the count the first interval starts from.
            if r.looks == 0 || r.rows == r.m.max_rows {
                continue;
            }
            r.rows += 1;
            let bytes = port.tx_bytes - before;
            let capacity = port.rate().bps() as f64 * r.m.period.ps() as f64 / 8e12;
            rows.push(LinkUtilSample {
                monitor: r.index,
                time_ps: t.ps(),
                node: port.node,
                port: port.rec.port,
                peer: port.peer_node,
                tx_bytes: bytes,
                utilization: bytes as f64 / capacity,
            });
        }
    }

    fn look_schemes(&self, t: Time, r: &mut Running, out: &mut MonitorOutput) {
        let rows = out.scheme.as_mut().expect("a scheme monitor has its table");
        for &target in &r.targets {
            let mut emit = |node: u32, signal: &'static str, key: u32, value: f64| {
                if r.m.on_change {
                    let last = r.last_signal.insert((target, signal, key), value.to_bits());
                    if last == Some(value.to_bits()) {
                        return;
                    }
                }
                if r.rows == r.m.max_rows {
                    return;
                }
                r.rows += 1;
                rows.push(SchemeSample {
                    monitor: r.index,
                    time_ps: t.ps(),
                    node,
                    signal,
                    key,
                    value,
                });
            };
            if target & HOST_TARGET != 0 {
                let host = target & !HOST_TARGET;
                if let Some(side) = &self.host_side {
                    side.samples(t, host, &mut |signal, key, value| {
                        emit(host, signal, key, value)
                    });
                }
            } else {
                let sw = &self.switches[target as usize];
                sw.lb.samples(t, &mut |signal, key, value| {
                    emit(sw.node, signal, key, value)
                });
            }
        }
    }

    /// A PFC frame for priority `prio` was queued out of (`sent`) or arrived at (not `sent`)
    /// global port `p`; `paused_for`: for a received RESUME, how long the egress was paused.
    #[cold]
    #[inline(never)]
    pub(super) fn monitor_pfc(
        &mut self,
        p: u32,
        prio: u8,
        pause: bool,
        sent: bool,
        paused_for: Option<Time>,
    ) {
        let now = self.now;
        let Some(mons) = self.monitors.as_mut() else {
            return;
        };
        let Monitors {
            list,
            pfc_watch,
            pause_sent_at,
            out,
            ..
        } = &mut **mons;
        let Some(watchers) = pfc_watch.get(p as usize) else {
            return;
        };
        let slot = p as usize * N_PRIO + prio as usize;
        let duration = match (pause, sent) {
            (true, true) => {
                pause_sent_at[slot] = now;
                None
            }
            (true, false) => None,
            (false, true) => Some(now - pause_sent_at[slot]),
            (false, false) => paused_for,
        };
        let port = &self.ports[p as usize];
        for &i in watchers {
            let r = &mut list[i as usize];
            if r.m.priorities & 1 << prio == 0 || now < r.m.start || now > r.m.end {
                continue;
            }
            if r.rows == r.m.max_rows {
                out.pfc_events_dropped += 1;
                continue;
            }
            r.rows += 1;
            out.pfc
                .as_mut()
                .expect("a pfc monitor has its table")
                .push(PfcEvent {
                    monitor: r.index,
                    time_ps: now.ps(),
                    node: port.node,
                    port: port.rec.port,
                    peer: port.peer_node,
                    priority: prio,
                    direction: if sent { "sent" } else { "received" },
                    frame: if pause { "pause" } else { "resume" },
                    duration_ps: duration.map(Time::ps),
                });
        }
    }
}

impl Monitors {
    /// What the monitors recorded, with the counter of what they could not.
    pub(super) fn finish(self) -> MonitorOutput {
        self.out
    }
}
