//! The event loop: the events of a run, the stop rule, and the dispatch of each event to its
//! handler (in `links.rs`, `switch.rs`, `host.rs` and the other parts of the simulation).
//!
//! Every event popped is folded into the run fingerprint with its time and [`Event::code`].
//!
//! **Looks.** Observers (monitors, the no-progress watchdog, PFC deadlock checks) look at the
//! run at times of their own, and are not events: they wait in a small schedule of their own
//! ([`Looks`]), so that the loop pays nothing per event for them. Each look takes an insertion
//! number from the event queue when it is set ([`crate::engine::EventQueue::take_seq`]), so it
//! is taken exactly where it would lie among the events by `(time, insertion order)`: after
//! the events at its time scheduled before it was set, before those scheduled after. The
//! loop compares each popped event's time with one number, `next_stop` (the earliest look's
//! time, or just past the stop time): that comparison was there before looks existed (the
//! stop time's), so the loop's cost per event is that of a run without observers. Only an
//! event at or past `next_stop` goes out of line (`take_looks`), which takes every look due
//! before it, in order.

use super::{RunOutput, Simulation};
use crate::packet::PacketId;
use crate::units::Time;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::ControlFlow;

/// What can happen in a run; see the module doc of `sim` for the discipline.
#[derive(Clone, Copy, Debug)]
pub(super) enum Event {
    /// `port`'s serializer frees up and the port has something waiting.
    TxDone(u32),
    /// The head of `port`'s wire, packet `pid`, reaches the peer. (The packet is named so
    /// that it can be fetched from memory at once, while the port is.)
    Arrival { port: u32, pid: PacketId },
    /// A host NIC's pacing wake-up.
    NicWake(u32),
    /// The next flow of the (start-ordered) flow table starts.
    FlowStart,
    /// A host's transport timer (it checks the retransmission deadlines of the host's flows).
    TransportTimer(u32),
    /// A flow's congestion-control timer (`crate::cc::CongestionControl::on_timer`).
    CcTimer(u32),
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

/// Who looks at a run between its events: not an event, not counted, not in the
/// fingerprint, and changing nothing but what the observer records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Look {
    /// Monitor `i` (`monitor.rs`).
    Monitor(u32),
    /// The no-progress watchdog (`stall.rs`).
    Progress,
    /// A PFC deadlock check (`stall.rs`).
    Deadlock,
}

/// The looks pending, earliest first by `(time, insertion number)`, and what the event loop
/// compares each event's time with (see the module doc).
#[derive(Debug)]
pub(super) struct Looks {
    /// The looks, keyed by their time and the insertion number they took from the event
    /// queue (unique: the `Look` never decides). At most one per periodic monitor, one for
    /// the watchdog and one deadlock check, so its capacity stops growing at once.
    pending: BinaryHeap<Reverse<(Time, u64, Look)>>,
    /// The earliest look's time, or one picosecond past the run's horizon if that is
    /// earlier: an event at or past it goes out of line.
    pub(super) next_stop: Time,
    /// An event popped and not handled yet is in the hand of `take_looks`: it still counts
    /// as pending for the looks that ask whether any event is left.
    holding: bool,
}

impl Default for Looks {
    fn default() -> Self {
        Looks {
            pending: BinaryHeap::new(),
            next_stop: Time::MAX,
            holding: false,
        }
    }
}

impl Event {
    /// A compact code for the run fingerprint (looks are not folded into it).
    fn code(self) -> u64 {
        match self {
            Event::TxDone(p) => 1 << 60 | p as u64,
            Event::Arrival { port, .. } => 2 << 60 | port as u64,
            Event::NicWake(h) => 3 << 60 | h as u64,
            Event::FlowStart => 4 << 60,
            Event::TransportTimer(h) => 5 << 60 | h as u64,
            Event::CcTimer(f) => 6 << 60 | f as u64,
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

/// Limits that end a run before its stop rule when it goes on longer than it should (a
/// retransmission storm, a PFC deadlock, a spec that asks for more than was meant), and the
/// watches that end a run that can no longer go anywhere (`stall.rs`): the run stops there,
/// its results measure it up to there, and `RunStats::incomplete` says which one ended it.
/// Unset, nothing is checked (a run from a spec has `no_progress` and `deadlock_check` at
/// their defaults when the spec leaves them out).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Guards {
    /// The most events the run may process (`run.max_events`).
    pub max_events: Option<u64>,
    /// The latest simulated time the run may reach (`run.max_sim_time`); unlike the stop
    /// rule's time, reaching it before the stop rule ends the run marks it incomplete.
    pub max_sim_time: Option<Time>,
    /// The no-progress watchdog (`run.no_progress`): no byte delivered and no flow finished
    /// for this long while data waits in switch buffers or at NICs ends the run.
    pub no_progress: Option<Time>,
    /// PFC deadlock detection (`run.deadlock_check`): the age of the pauses a check looks at
    /// and the time between checks while pauses between switches are held.
    pub deadlock_check: Option<Time>,
}

/// What ended a run before its stop rule.
#[derive(Clone, Copy, Debug)]
pub(super) enum Stop {
    MaxEvents,
    MaxSimTime,
    /// Nothing moved since `since` while data waited (`None`: no event was left).
    NoProgress {
        since: Option<Time>,
    },
    /// Deadlocks were found (`StallWatch::found`).
    Deadlock(Found),
}

/// What found the deadlocks that ended a run.
#[derive(Clone, Copy, Debug)]
pub(super) enum Found {
    /// A periodic check.
    Check,
    /// The watchdog, nothing having moved since this time.
    Watchdog(Time),
    /// The end of the run's events, with data in its buffers.
    Drained,
}

/// Events between two calls of the progress callback.
const PROGRESS_EVERY: u64 = 1 << 18;

impl Simulation {
    /// Sets the run's guards (and schedules the watchdog's first look).
    pub fn with_guards(mut self, guards: Guards) -> Simulation {
        self.guards = guards;
        self.start_watchdog();
        self
    }

    /// Runs to the stop rule.
    pub fn run_to_end(self) -> RunOutput {
        self.run(&mut |_| ControlFlow::Continue(()))
    }

    /// Runs to the stop rule or a guard; `progress(now)` is called every 2^18 events and at
    /// the end. If it returns `Break`, the run stops there and its output is marked
    /// `interrupted`; a guard or a stall (`stall.rs`) that ends the run says so in
    /// `RunStats::incomplete`.
    pub fn run(mut self, progress: &mut dyn FnMut(Time) -> ControlFlow<()>) -> RunOutput {
        let wall = std::time::Instant::now();
        let mut interrupted = false;
        // The guards: the run stops at `horizon` (the stop rule's time, or the guard's if it
        // is earlier) and after `max_events` events.
        let time_guard = self.guards.max_sim_time.filter(|&t| t < self.stop.at);
        let horizon = time_guard.unwrap_or(self.stop.at);
        let max_events = self.guards.max_events.unwrap_or(u64::MAX);
        // The counts of events at which to report progress next, and to look at all (one
        // comparison per event, as the progress check alone made).
        let mut next_progress = PROGRESS_EVERY;
        let mut next_check = next_progress.min(max_events);
        let mut stopped_by = None;
        // Whether the run ran out of events (every `break` below clears it).
        let mut drained = true;
        self.set_next_stop(horizon);

        loop {
            // When the queue reaches a new slot, the packets arriving in it (each names the
            // next packet on its wire and when that one arrives) and their ports' wires are
            // asked for at once (prefetched): in a large fabric each is a cache miss (written
            // a propagation delay ago), and misses started early overlap with the work of the
            // events before them. A serializer freeing up has its port's first line asked for
            // (under load most departures come from a queue, by `TxDone`). Only hints:
            // nothing changes.
            let (ports, arena) = (&self.ports, &self.arena);
            let Some((t, ev)) = self.events.pop_with(|e| match *e {
                Event::Arrival { port, pid } => {
                    crate::engine::prefetch(arena.get(pid));
                    crate::engine::prefetch(&ports[port as usize].wire);
                }
                Event::TxDone(port) => crate::engine::prefetch(&ports[port as usize]),
                _ => {}
            }) else {
                break;
            };
            // One comparison per event for the looks and the horizon (the module doc).
            if t >= self.looks.next_stop {
                if let ControlFlow::Break((at, stop)) = self.take_looks(Some(t), horizon) {
                    self.now = at;
                    stopped_by = Some(stop);
                    drained = false;
                    break;
                }
                if t > horizon {
                    self.now = horizon;
                    if time_guard.is_some() {
                        stopped_by = Some(Stop::MaxSimTime);
                    }
                    drained = false;
                    break;
                }
            }
            self.now = t;
            self.events_done += 1;
            self.fingerprint.add(t, ev.code());
            self.handle(ev);
            if self.events_done == next_check {
                let done = self.flows_done_stop;
                if self.events_done == max_events && !done {
                    stopped_by = Some(Stop::MaxEvents);
                    drained = false;
                    break;
                }
                if self.events_done == next_progress {
                    if progress(self.now).is_break() {
                        interrupted = true;
                        drained = false;
                        break;
                    }
                    next_progress += PROGRESS_EVERY;
                }
                // Past `max_events` only if every flow finished: the loop ends below.
                next_check = next_progress.min(max_events);
            }
            if self.flows_done_stop {
                drained = false;
                break;
            }
        }
        if drained {
            // No event left: the looks still due are taken (none sets another), then a run
            // with data in its buffers has stalled for good.
            match self.take_looks(None, horizon) {
                ControlFlow::Break((at, stop)) => {
                    self.now = at;
                    stopped_by = Some(stop);
                }
                ControlFlow::Continue(()) => stopped_by = self.drained(),
            }
        }
        if !interrupted {
            interrupted = progress(self.now).is_break();
        }
        let incomplete = stopped_by.map(|stop| self.incomplete(stop));
        let mut out = self.finish(wall.elapsed().as_secs_f64());
        out.interrupted = interrupted;
        out.stats.incomplete = incomplete;
        out
    }

    /// What a run that `stop` ended says: the key and its value, where the run stood and
    /// what to do.
    fn incomplete(&self, stop: Stop) -> String {
        let (key, limit, reached) = match stop {
            Stop::MaxEvents => (
                "max_events",
                self.guards.max_events.unwrap_or_default().to_string(),
                format!("stopped after {} events", self.events_done),
            ),
            Stop::MaxSimTime => (
                "max_sim_time",
                format!("\"{}\"", self.guards.max_sim_time.unwrap_or_default()),
                "reached it".to_string(),
            ),
            Stop::NoProgress { since } => return self.no_progress_reason(since),
            Stop::Deadlock(found) => return self.deadlock_reason(found),
        };
        format!(
            "run.{key} ({limit}): the run {reached}, at {:.6} ms of simulated time, with {} of {} \
             flows finished; what it measured up to there is in the results, marked incomplete; \
             raise run.{key} if the run needs more, or look for what keeps it going (a \
             retransmission storm, a PFC deadlock)",
            self.now.as_secs_f64() * 1e3,
            self.flows_finished,
            self.flows.len()
        )
    }

    /// Schedules a look of the run's observers (monitors, watchdog, deadlock checks) at `at`.
    pub(super) fn schedule_look(&mut self, at: Time, look: Look) {
        let seq = self.events.take_seq();
        self.looks.pending.push(Reverse((at, seq, look)));
        self.looks.next_stop = self.looks.next_stop.min(at);
    }

    /// Events pending: the run goes on while there are some (looks are not events).
    pub(super) fn events_left(&self) -> usize {
        self.events.len() + self.looks.holding as usize
    }

    /// Sets `next_stop` from the earliest look and `horizon`.
    fn set_next_stop(&mut self, horizon: Time) {
        let first = self.looks.pending.peek().map_or(Time::MAX, |l| l.0 .0);
        self.looks.next_stop = first.min(Time(horizon.0.saturating_add(1)));
    }

    /// Takes, in order, every look due before the event just popped at `t` (`None`: the
    /// events have run out, every look left) up to `horizon`; looks past `horizon` are
    /// dropped with the run. `Break` (a stall) ends the run at the look's time. Out of line:
    /// the event loop comes here only for an event at or past `next_stop`.
    #[cold]
    #[inline(never)]
    fn take_looks(&mut self, t: Option<Time>, horizon: Time) -> ControlFlow<(Time, Stop)> {
        // The event in hand, by its key in the event queue.
        let event = t.map(|t| (t, self.events.last_seq()));
        self.looks.holding = event.is_some();
        let mut stop = ControlFlow::Continue(());
        while let Some(&Reverse((at, seq, look))) = self.looks.pending.peek() {
            if at > horizon || event.is_some_and(|e| (at, seq) > e) {
                break;
            }
            self.looks.pending.pop();
            if let ControlFlow::Break(s) = self.look(at, look) {
                stop = ControlFlow::Break((at, s));
                break;
            }
        }
        self.looks.holding = false;
        self.set_next_stop(horizon);
        stop
    }

    /// An observer looks at time `t`; `Break` ends the run (a stall, `stall.rs`).
    fn look(&mut self, t: Time, look: Look) -> ControlFlow<Stop> {
        match look {
            Look::Monitor(i) => {
                self.monitor_look(t, i);
                ControlFlow::Continue(())
            }
            Look::Progress => self.progress_look(t),
            Look::Deadlock => self.deadlock_look(t),
        }
    }

    /// Runs the next event (tests that watch the state between events), after the looks due
    /// before it; `None` when no event is left. A stall a look finds does not stop the steps.
    #[cfg(test)]
    pub(crate) fn step(&mut self) -> Option<Time> {
        let Some((t, ev)) = self.events.pop() else {
            let _ = self.take_looks(None, self.stop.at);
            return None;
        };
        let _ = self.take_looks(Some(t), self.stop.at);
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

    /// Runs one event. Always inlined into the loop of `run`, its only caller outside tests:
    /// out of line, its call, prologue and epilogue cost about 15 instructions per event
    /// (`benches/HISTORY.md`, "The scheme interface").
    #[inline(always)]
    fn handle(&mut self, ev: Event) {
        match ev {
            Event::TxDone(p) => self.tx_done(p),
            Event::Arrival { port, pid } => self.arrival(port, pid),
            Event::NicWake(h) => self.nic_wake(h),
            Event::FlowStart => self.flow_start(),
            Event::TransportTimer(h) => self.transport_timer(h),
            Event::CcTimer(f) => self.cc_timer(f),
            Event::LbTimer(s, token) => self.lb_timer(s, token),
            Event::Fault(i) => self.fault_starts(i),
            Event::Reconverge(i) => self.reconverge(i),
            Event::HostLbTimer(h, token) => self.host_lb_timer(h, token),
            Event::ReseqTimeout(f) => self.reseq_timeout(f),
        }
    }
}
