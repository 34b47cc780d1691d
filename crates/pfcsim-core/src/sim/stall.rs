//! Stalls: the no-progress watchdog (`run.no_progress`) and PFC deadlock detection
//! (`run.deadlock_check`), both of which end a run that can no longer go anywhere, marked
//! incomplete, instead of letting it spin until its stop rule.
//!
//! **Deadlocks.** A switch egress (port, priority) paused by the switch at the other end of
//! its link waits on that switch's ingress buffer for the link (PAUSE lasts until RESUME,
//! and RESUME comes only once that ingress has drained below XON); the ingress's bytes wait
//! in the egress queues they were put in, some of which may be paused in turn. A deadlock is
//! a set of paused egresses none of which can ever be resumed: the check starts from the
//! egresses paused by a switch (a PAUSE outstanding at the peer, no RESUME on its way) and
//! drops every one whose peer ingress could still send RESUME, judged by
//! [`crate::mmu::Mmu::pause_is_stuck`] with the bytes that wait in the egresses still in the
//! set ("stuck" bytes), until nothing more drops. What is left can never move again: the
//! first of them to resume would need a release of a stuck byte, which waits behind a paused
//! egress of the set. Every egress left waits on another one (its ingress holds stuck bytes),
//! so the set holds cycles; each cycle of waits (a strongly connected component of the
//! wait-for graph, at least two egresses) is reported as one deadlock, with when it formed
//! (the latest start of its egresses' pauses: from then on all of them were paused) and
//! when it was found. Egresses that only wait on a cycle (victims) are not reported.
//!
//! Not modelled or not detected: a deadlock that some byte could still leave (held packets
//! of a reorder queue count as free to leave; a packet still on the paused link counts as
//! able to arrive and be released), faults that would later free a cycle, and any PFC
//! watchdog that drops packets to break a deadlock (switches never do here).
//!
//! **When.** A check runs `deadlock_check` after a PAUSE between switches takes effect,
//! and again every `deadlock_check` while any such pause is held; it looks only at pauses
//! held for at least `deadlock_check` (shorter ones are not stuck yet, and are nearly all
//! the pauses of a working fabric). It first drops every paused egress whose peer switch has
//! no paused egress of its own at that priority (so a pause held by a host-facing queue, as
//! in an incast, costs no more than a scan of the ports), then reads the queues of the
//! others. The watchdog and a run that runs out of events with data in its buffers check
//! every pause, whatever its age. A run without a PAUSE between switches never checks: the
//! only cost on its data path is one test per PFC frame.
//!
//! **The watchdog.** Every eighth of `no_progress` a look compares the bytes delivered in
//! order and the flows finished with the previous look. If neither moved for `no_progress`
//! while flows were in progress and data waited (in switch buffers, or at a NIC with data
//! ready to send: a NIC paused by its switch holds its flows' data), the run is stalled: it
//! stops there (no earlier than `no_progress`, at most an eighth later, after the last
//! progress), reporting a deadlock if the check above finds one. A run whose events run
//! out while data waits so and flows are unfinished has stalled for good and stops the
//! same way. Neither looks nor checks are counted or folded into the
//! fingerprint, and they change no state of the run (the same events at the same times).

use super::events::{Found, Look, Stop};
use super::Simulation;
use crate::metrics::DeadlockRecord;
use crate::packet::PacketKind;
use crate::port::{NodeRef, N_PRIO};
use crate::units::Time;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// The state of the watchdog and of deadlock detection in a run, and what they found.
#[derive(Debug, Default)]
pub(super) struct StallWatch {
    /// `bytes_delivered + flows_finished` at the last look of the watchdog.
    progress_mark: u64,
    /// The last look that saw progress, or no progress to wait for.
    last_moved: Time,
    /// A deadlock check is pending.
    check_pending: bool,
    /// What the deadlock checks did.
    pub(super) checks: DeadlockChecks,
    /// The egresses of the deadlocks found (rows of `deadlocks.parquet`).
    pub(super) found: Vec<DeadlockRecord>,
}

/// How much work the deadlock checks of a run did (tests; not written to the run folder).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeadlockChecks {
    /// Checks that found pauses between switches held for at least `run.deadlock_check`.
    pub looked: u64,
    /// Of those, the checks that got past the first cut (some paused egress whose peer
    /// switch has a paused egress of the same priority) and read the queues.
    pub read_queues: u64,
}

/// Looks of the watchdog per `no_progress`: the run stops at most this fraction of it late.
const LOOKS_PER_WATCH: u64 = 8;

/// A candidate member of a deadlock: a switch egress paused by the switch behind it.
struct Paused {
    /// Global id of the egress port.
    port: u32,
    prio: u8,
    /// The switch at each end (indices in `switches`): the egress's and the peer's.
    owner: u32,
    peer: u32,
    /// Its bytes charged to the peer's ingress that wait behind members still in the set.
    stuck: u64,
    member: bool,
}

impl Simulation {
    /// Schedules the watchdog's first look (with `run.no_progress`).
    pub(super) fn start_watchdog(&mut self) {
        if let Some(watch) = self.guards.no_progress {
            let next = self.now + watch_step(watch);
            if next <= self.stop.at {
                self.schedule_look(next, Look::Progress);
            }
        }
    }

    /// A PAUSE took effect on egress `p`: with deadlock detection, check in `deadlock_check`
    /// if the pause is between switches and no check is pending.
    #[inline]
    pub(super) fn pause_taken(&mut self, p: u32) {
        let Some(period) = self.guards.deadlock_check else {
            return;
        };
        let port = &self.ports[p as usize];
        let between_switches = matches!(
            (port.owner, port.peer_ref),
            (NodeRef::Switch(_), NodeRef::Switch(_))
        );
        if between_switches && !self.stall.check_pending && self.now + period <= self.stop.at {
            self.stall.check_pending = true;
            self.schedule_look(self.now + period, Look::Deadlock);
        }
    }

    /// The watchdog looks at time `t`.
    #[cold]
    #[inline(never)]
    pub(super) fn progress_look(&mut self, t: Time) -> ControlFlow<Stop> {
        let watch = self
            .guards
            .no_progress
            .expect("watchdog looks only with no_progress");
        let mark = self.totals.bytes_delivered + self.flows_finished;
        if mark != self.stall.progress_mark || !self.data_waits() {
            self.stall.progress_mark = mark;
            self.stall.last_moved = t;
        } else if t - self.stall.last_moved >= watch {
            return ControlFlow::Break(self.stalled(t, self.stall.last_moved));
        }
        let next = t + watch_step(watch);
        if next <= self.stop.at && self.events_left() > 0 {
            self.schedule_look(next, Look::Progress);
        }
        ControlFlow::Continue(())
    }

    /// Started flows are unfinished and data waits for the fabric: in some switch buffer, or
    /// at a NIC with data ready to send (a NIC paused by its switch holds its flows' data
    /// there, and no switch buffer need hold any): progress is due.
    fn data_waits(&self) -> bool {
        self.flows_finished < self.next_flow as u64
            && (self.switches.iter().any(|s| s.mmu.bytes_in_use() > 0)
                || self.hosts.iter().any(|h| !h.is_idle()))
    }

    /// NICs with data ready to send.
    fn hosts_waiting(&self) -> usize {
        self.hosts.iter().filter(|h| !h.is_idle()).count()
    }

    /// The run made no progress since `since` while data waited: the reason it stops, a
    /// deadlock if there is one.
    fn stalled(&mut self, t: Time, since: Time) -> Stop {
        let (found, _) = self.find_deadlocks(t, Time::ZERO);
        if found.is_empty() {
            Stop::NoProgress { since: Some(since) }
        } else {
            self.stall.found = found;
            Stop::Deadlock(Found::Watchdog(since))
        }
    }

    /// A periodic deadlock check at time `t`.
    #[cold]
    #[inline(never)]
    pub(super) fn deadlock_look(&mut self, t: Time) -> ControlFlow<Stop> {
        self.stall.check_pending = false;
        let period = self
            .guards
            .deadlock_check
            .expect("checks only with deadlock_check");
        let (found, held) = self.find_deadlocks(t, period);
        if !found.is_empty() {
            self.stall.found = found;
            return ControlFlow::Break(Stop::Deadlock(Found::Check));
        }
        if held && t + period <= self.stop.at && self.events_left() > 0 {
            self.stall.check_pending = true;
            self.schedule_look(t + period, Look::Deadlock);
        }
        ControlFlow::Continue(())
    }

    /// The run has no event left: if data waits in its buffers with flows unfinished, it
    /// has stalled for good. The reason it stops: a deadlock (with deadlock detection or the
    /// watchdog), or no progress (with the watchdog).
    pub(super) fn drained(&mut self) -> Option<Stop> {
        let guards = self.guards;
        if guards.no_progress.is_none() && guards.deadlock_check.is_none() || !self.data_waits() {
            return None;
        }
        let (found, _) = self.find_deadlocks(self.now, Time::ZERO);
        if !found.is_empty() {
            self.stall.found = found;
            return Some(Stop::Deadlock(Found::Drained));
        }
        guards.no_progress.map(|_| Stop::NoProgress { since: None })
    }

    /// The deadlocks at time `t` among the pauses between switches held for at least
    /// `min_age` (see the module doc), as the rows of `deadlocks.parquet`; and whether any
    /// pause between switches is held at all.
    fn find_deadlocks(&mut self, t: Time, min_age: Time) -> (Vec<DeadlockRecord>, bool) {
        let mut held = false;
        let mut set = Vec::new();
        for (p, port) in self.ports.iter().enumerate() {
            let (NodeRef::Switch(owner), NodeRef::Switch(peer)) = (port.owner, port.peer_ref)
            else {
                continue;
            };
            if port.paused == 0 {
                continue;
            }
            held = true;
            let peer_sw = &self.switches[peer as usize];
            let ingress = (port.peer - peer_sw.ports.start) as usize;
            for prio in 1..N_PRIO as u8 {
                if port.is_paused(prio)
                    && t - port.prio[prio as usize].paused_since >= min_age
                    && peer_sw.mmu.is_pausing(ingress, prio)
                {
                    set.push(Paused {
                        port: p as u32,
                        prio,
                        owner,
                        peer,
                        stuck: 0,
                        member: true,
                    });
                }
            }
        }
        if set.is_empty() {
            return (Vec::new(), held);
        }
        self.stall.checks.looked += 1;
        // An egress can be stuck only if its peer switch has a paused egress of the same
        // priority for its bytes to wait in.
        let n_sw = self.switches.len();
        let mut paused_at = vec![0u32; n_sw * N_PRIO];
        for m in &set {
            paused_at[m.owner as usize * N_PRIO + m.prio as usize] += 1;
        }
        let mut changed = true;
        while changed {
            changed = false;
            for m in set.iter_mut().filter(|m| m.member) {
                if paused_at[m.peer as usize * N_PRIO + m.prio as usize] == 0 {
                    m.member = false;
                    paused_at[m.owner as usize * N_PRIO + m.prio as usize] -= 1;
                    changed = true;
                }
            }
        }
        set.retain(|m| m.member);
        if set.is_empty() {
            return (Vec::new(), held);
        }
        self.stall.checks.read_queues += 1;
        // Who waits on whom, and with how many bytes: member `e` (its peer's ingress) has
        // `bytes` queued in member `f`.
        let by_ingress: HashMap<(u32, u8), usize> = (set.iter().enumerate())
            .map(|(e, m)| ((self.ports[m.port as usize].peer, m.prio), e))
            .collect();
        let mut waits: HashMap<(usize, usize), u64> = HashMap::new();
        for (f, m) in set.iter().enumerate() {
            let first = self.switches[m.owner as usize].ports.start;
            for pid in self.ports[m.port as usize].prio[m.prio as usize].iter(&self.arena) {
                let pkt = self.arena.get(pid);
                let ingress = first + pkt.ingress_port() as u32;
                if let Some(&e) = by_ingress.get(&(ingress, m.prio)) {
                    *waits.entry((e, f)).or_default() += pkt.wire_bytes as u64;
                }
            }
        }
        let mut waits: Vec<(usize, usize, u64)> =
            waits.into_iter().map(|((e, f), b)| (e, f, b)).collect();
        waits.sort_unstable();
        // A packet on the wire towards the peer could still arrive and be released.
        let on_wire: Vec<bool> = (set.iter())
            .map(|m| {
                let port = &self.ports[m.port as usize];
                port.wire.iter(&self.arena).any(|on| {
                    let pkt = self.arena.get(on);
                    pkt.priority == m.prio
                        && !matches!(pkt.kind, PacketKind::Pause | PacketKind::Resume)
                })
            })
            .collect();
        let mut changed = true;
        while changed {
            changed = false;
            for m in &mut set {
                m.stuck = 0;
            }
            for &(e, f, bytes) in &waits {
                if set[f].member {
                    set[e].stuck += bytes;
                }
            }
            for (e, m) in set.iter_mut().enumerate() {
                let peer = &self.switches[m.peer as usize];
                let ingress = (self.ports[m.port as usize].peer - peer.ports.start) as usize;
                if m.member
                    && !peer
                        .mmu
                        .pause_is_stuck(ingress, m.prio, m.stuck, on_wire[e])
                {
                    m.member = false;
                    changed = true;
                }
            }
        }
        let edges: Vec<(usize, usize)> = (waits.iter())
            .filter(|&&(e, f, _)| set[e].member && set[f].member)
            .map(|&(e, f, _)| (e, f))
            .collect();
        let mut rows = Vec::new();
        for (d, cycle) in cycles(set.len(), &edges).into_iter().enumerate() {
            let since =
                |e: usize| self.ports[set[e].port as usize].prio[set[e].prio as usize].paused_since;
            let formed = (cycle.iter().map(|&e| since(e)).max()).expect("a cycle has members");
            for e in cycle {
                let m = &set[e];
                let port = &self.ports[m.port as usize];
                rows.push(DeadlockRecord {
                    deadlock: d as u32,
                    detected_ps: t.ps(),
                    formed_ps: formed.ps(),
                    node: port.node,
                    port: port.rec.port,
                    peer: port.peer_node,
                    priority: m.prio,
                    paused_since_ps: since(e).ps(),
                    stuck_bytes: m.stuck,
                });
            }
        }
        (rows, held)
    }
}

impl Simulation {
    /// What a run that stalled without a deadlock says (`RunStats::incomplete`).
    pub(super) fn no_progress_reason(&self, since: Option<Time>) -> String {
        let watch = self.guards.no_progress.unwrap_or_default();
        let ms = |t: Time| t.as_secs_f64() * 1e3;
        let flows = format!(
            "{} of {} flows finished",
            self.flows_finished,
            self.flows.len()
        );
        let what = match since {
            Some(since) => format!(
                "no flow finished and no byte was delivered from {:.6} ms to {:.6} ms of \
                 simulated time while data waited ({} B in switch buffers, {} NICs with data \
                 to send), with {flows}, and no PFC deadlock holds it",
                ms(since),
                ms(self.now),
                self.buffered(),
                self.hosts_waiting()
            ),
            None => format!(
                "the run had no event left at {:.6} ms of simulated time while data waited \
                 ({} B in switch buffers, {} NICs with data to send), with {flows}, and no \
                 PFC deadlock holds it",
                ms(self.now),
                self.buffered(),
                self.hosts_waiting()
            ),
        };
        format!(
            "run.no_progress (\"{watch}\"): {what}; the run stopped there; what it measured up \
             to there is in the results, marked incomplete; look for what holds the data (a \
             link too slow, a pause that never ends: paused_time_ps and peak_queue_bytes in \
             ports.parquet){}",
            if since.is_some() {
                ", or raise run.no_progress if the run needs longer"
            } else {
                ""
            }
        )
    }

    /// What a run that a deadlock ended says (`RunStats::incomplete`).
    pub(super) fn deadlock_reason(&self, found: Found) -> String {
        let ms = |t: Time| t.as_secs_f64() * 1e3;
        let check = self.guards.deadlock_check.map(|t| ("deadlock_check", t));
        let watch = self.guards.no_progress.map(|t| ("no_progress", t));
        let (key, before) = match found {
            Found::Check => (check, String::new()),
            Found::Watchdog(since) => (
                watch,
                format!(
                    "no flow finished and no byte was delivered since {:.6} ms while data \
                     waited in switch buffers; ",
                    ms(since)
                ),
            ),
            Found::Drained => (
                check.or(watch),
                "the run had no event left while data waited in switch buffers; ".to_string(),
            ),
        };
        let (key, value) = key.expect("a deadlock is found by a watch");
        format!(
            "run.{key} (\"{value}\"): {before}a PFC deadlock, found at {:.6} ms of simulated \
             time, with {} of {} flows finished: egresses that pause each other in a cycle and \
             can never resume ({}); the run stopped there; what it measured up to there is in \
             the results, marked incomplete, and the cycle in deadlocks.parquet; routes whose \
             buffer dependencies form a cycle cause it (a routing loop, a ring, a route that \
             turns down and up again): change the routes or the topology",
            ms(self.now),
            self.flows_finished,
            self.flows.len(),
            describe(&self.stall.found)
        )
    }

    /// Bytes charged in the switch buffers.
    fn buffered(&self) -> u64 {
        self.switches.iter().map(|s| s.mmu.bytes_in_use()).sum()
    }
}

/// The deadlocks of `rows` in words: per deadlock, `priority 3: switch 5 port 2 -> 6, ...,
/// formed at 0.104000 ms`, deadlocks separated by `; `.
pub(super) fn describe(rows: &[DeadlockRecord]) -> String {
    let mut text = String::new();
    for (i, r) in rows.iter().enumerate() {
        let first = i == 0 || rows[i - 1].deadlock != r.deadlock;
        let last = !matches!(rows.get(i + 1), Some(n) if n.deadlock == r.deadlock);
        if first {
            if i > 0 {
                text.push_str("; ");
            }
            text.push_str(&format!("priority {}: ", r.priority));
        } else {
            text.push_str(", ");
        }
        text.push_str(&format!("switch {} port {} -> {}", r.node, r.port, r.peer));
        if last {
            text.push_str(&format!(", formed at {:.6} ms", r.formed_ps as f64 / 1e9));
        }
    }
    text
}

/// The time between two looks of a watchdog of `watch`.
fn watch_step(watch: Time) -> Time {
    Time(watch.ps().div_ceil(LOOKS_PER_WATCH))
}

/// The cycles of the directed graph of `n` nodes and `edges`: its strongly connected
/// components of two or more nodes, each sorted, in the order of their smallest node
/// (Kosaraju's algorithm, iterative).
fn cycles(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut out_edges = vec![Vec::new(); n];
    let mut in_edges = vec![Vec::new(); n];
    for &(a, b) in edges {
        out_edges[a].push(b);
        in_edges[b].push(a);
    }
    // Nodes in order of completion of a depth-first search along the edges.
    let mut done = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0)];
        while let Some((v, i)) = stack.pop() {
            if let Some(&w) = out_edges[v].get(i) {
                stack.push((v, i + 1));
                if !seen[w] {
                    seen[w] = true;
                    stack.push((w, 0));
                }
            } else {
                done.push(v);
            }
        }
    }
    // Against the edges, in reverse completion order: each search finds one component.
    let mut component = vec![usize::MAX; n];
    let mut found = Vec::new();
    for &root in done.iter().rev() {
        if component[root] != usize::MAX {
            continue;
        }
        let mut members = vec![root];
        component[root] = root;
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for &w in &in_edges[v] {
                if component[w] == usize::MAX {
                    component[w] = root;
                    members.push(w);
                    stack.push(w);
                }
            }
        }
        if members.len() > 1 {
            members.sort_unstable();
            found.push(members);
        }
    }
    found.sort_unstable();
    found
}

#[cfg(test)]
mod tests {
    use super::cycles;
    use crate::cc::CcConfig;
    use crate::packet::{Packet, PacketKind};
    use crate::sim::{FabricConfig, Guards, Simulation, StopRule};
    use crate::topology::{Link, Topology};
    use crate::traffic::FlowSpec;
    use crate::units::{Rate, Time};

    /// A 100 Gbps, 1 us link between nodes `a` and `b`.
    fn link(a: u32, b: u32) -> Link {
        Link {
            a,
            b,
            rate: Rate::gbps(100),
            delay: Time::from_us(1),
        }
    }

    /// The ring of `tests/data/ring5.topo` (hosts 0..4, switch `5 + i` behind host `i`, the
    /// switches in a ring) with its five two-hop flows of 10 MB, run to 0.5 ms: its PFC
    /// deadlock formed at 0.18 ms.
    fn deadlocked_ring() -> Simulation {
        let links = ((0..5).map(|i| link(i, 5 + i)))
            .chain((0..5).map(|i| link(5 + i, 5 + (i + 1) % 5)))
            .collect();
        let is_switch = (0..10).map(|n| n >= 5).collect();
        let topo = Topology::assemble(is_switch, links).unwrap();
        let flows = (0..5)
            .map(|i| FlowSpec::scripted(i, (i + 2) % 5, 10_000_000, Time::ZERO))
            .collect();
        let cfg = FabricConfig {
            cc: CcConfig::None,
            ..Default::default()
        };
        let stop = StopRule {
            at: Time::from_ms(10),
            when_flows_done: true,
        };
        let mut sim = Simulation::new(&topo, cfg, flows, 1, stop).unwrap();
        while sim.step().is_some_and(|t| t < Time::from_us(500)) {}
        sim
    }

    /// The fixpoint keeps only pauses that can never lift: once one ingress of the cycle
    /// holds a byte that may leave (charged but in no paused queue, as a packet held in a
    /// reorder queue), that ingress may send RESUME, and then every other egress of the
    /// cycle may move: no deadlock. Without that byte, the deadlock again.
    #[test]
    fn a_cycle_of_pauses_that_one_release_could_lift_is_no_deadlock() {
        let mut sim = deadlocked_ring();
        let (found, held) = sim.find_deadlocks(sim.now, Time::ZERO);
        assert!(held);
        assert_eq!(found.len(), 5, "{found:?}");
        // Switch 7 (index 2): its ingress from switch 6 is its port 1.
        let mmu = &mut sim.switches[2].mmu;
        assert!(mmu.is_pausing(1, 3));
        mmu.arrive(1, 0, 3, 1_000);
        let (found, _) = sim.find_deadlocks(sim.now, Time::ZERO);
        assert!(found.is_empty(), "{found:?}");
        sim.switches[2].mmu.release(1, 0, 3, 1_000);
        assert_eq!(sim.find_deadlocks(sim.now, Time::ZERO).0.len(), 5);
        // Pauses younger than the age a check asks for are not looked at.
        let young = sim.find_deadlocks(sim.now, sim.now);
        assert_eq!(young, (Vec::new(), true));
    }

    /// A NIC that its switch paused and never resumed holds its flow's data while no switch
    /// buffer holds any: the watchdog ends the run there, with the cause (counting only
    /// switch buffers, it let such a run go on to its stop rule, complete in name).
    #[test]
    fn the_watchdog_ends_a_run_whose_data_waits_at_a_paused_nic() {
        // Hosts 0 and 1 behind switch 2.
        let topo =
            Topology::assemble(vec![false, false, true], vec![link(0, 2), link(1, 2)]).unwrap();
        let flows = vec![FlowSpec::scripted(0, 1, 1_000_000, Time::ZERO)];
        let cfg = FabricConfig {
            cc: CcConfig::None,
            ..Default::default()
        };
        let stop = StopRule {
            at: Time::from_ms(20),
            when_flows_done: true,
        };
        let guards = Guards {
            no_progress: Some(Time::from_ms(1)),
            ..Default::default()
        };
        let mut sim = Simulation::new(&topo, cfg, flows, 1, stop)
            .unwrap()
            .with_guards(guards);
        while sim.step().is_some_and(|t| t < Time::from_us(10)) {}
        // The switch pauses the sender's NIC at the flow's priority, for good.
        let mut pause = Packet::new(PacketKind::Pause);
        pause.priority = sim.flows[0].spec.priority;
        let pid = sim.arena.alloc(pause);
        sim.receive_pfc(sim.hosts[0].port, pid);
        let out = sim.run_to_end();
        let reason = out
            .stats
            .incomplete
            .expect("a stalled run is marked incomplete");
        assert!(
            reason.starts_with("run.no_progress (\"1ms\"): no flow finished")
                && reason.contains("(0 B in switch buffers, 1 NICs with data to send)"),
            "{reason}"
        );
        // The last progress: the packets on the wire when the pause came, at about 10 us;
        // the watchdog looks every 125 us.
        assert!(out.stats.end_ps < 1_200_000_000, "{}", out.stats.end_ps);
    }

    #[test]
    fn cycles_are_the_components_of_two_or_more_nodes() {
        // 0 -> 1 -> 2 -> 0, 3 -> 0 (waits on the cycle), 4 <-> 5, 6 alone.
        let edges = [(0, 1), (1, 2), (2, 0), (3, 0), (4, 5), (5, 4)];
        assert_eq!(cycles(7, &edges), vec![vec![0, 1, 2], vec![4, 5]]);
        assert!(cycles(3, &[(0, 1), (1, 2)]).is_empty());
        // Two cycles through one node form one component.
        let edges = [(0, 1), (1, 0), (1, 2), (2, 1)];
        assert_eq!(cycles(3, &edges), vec![vec![0, 1, 2]]);
    }
}
