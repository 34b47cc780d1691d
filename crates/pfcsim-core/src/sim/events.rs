//! The event loop: the events of a run, the stop rule, and the dispatch of each event to its
//! handler (in `links.rs`, `switch.rs`, `host.rs` and the other parts of the simulation).
//!
//! Every event popped is folded into the run fingerprint with its time and [`Event::code`].

use super::{RunOutput, Simulation};
use crate::packet::PacketId;
use crate::units::Time;
use std::ops::ControlFlow;

/// What can happen in a run; see the module doc of `sim` for the discipline.
#[derive(Clone, Copy, Debug)]
pub(super) enum Event {
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
    /// An observer looks at the run: not counted, not in the fingerprint, and changing
    /// nothing but what the observer records.
    Look(Look),
}

/// Who looks at a run between its events.
#[derive(Clone, Copy, Debug)]
pub(super) enum Look {
    /// Monitor `i` (`monitor.rs`).
    Monitor(u32),
    /// The no-progress watchdog (`stall.rs`).
    Progress,
    /// A PFC deadlock check (`stall.rs`).
    Deadlock,
}

impl Event {
    /// A compact code for the run fingerprint (looks are not folded into it).
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
            Event::Look(_) => unreachable!("looks are not part of the run"),
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
    /// for this long while data waits in switch buffers ends the run.
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

        while let Some((t, ev)) = self.events.pop() {
            if let Event::Look(look) = ev {
                // Observes the run without being part of it; none is set past the stop rule,
                // and one past a guard's time is dropped.
                self.looks_pending -= 1;
                if t <= horizon {
                    if let ControlFlow::Break(stop) = self.look(t, look) {
                        self.now = t;
                        stopped_by = Some(stop);
                        drained = false;
                        break;
                    }
                }
                continue;
            }
            if t > horizon {
                self.now = horizon;
                if time_guard.is_some() {
                    stopped_by = Some(Stop::MaxSimTime);
                }
                drained = false;
                break;
            }
            self.now = t;
            self.events_done += 1;
            self.fingerprint.add(t, ev.code());
            self.handle(ev);
            if self.events_done == next_check {
                let done = self.stop.when_flows_done && self.all_finished;
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
            if self.stop.when_flows_done && self.all_finished {
                drained = false;
                break;
            }
        }
        if drained {
            // No event left: a run with data in its buffers has stalled for good.
            stopped_by = self.drained();
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

    /// An observer looks at time `t`; `Break` ends the run (a stall, `stall.rs`). Kept out
    /// of line: the event loop stays as it was.
    #[cold]
    #[inline(never)]
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

    /// Runs the next event (tests that watch the state between events); `None` when no
    /// event is left. A look is taken, but a stall it finds does not stop the steps.
    #[cfg(test)]
    pub(crate) fn step(&mut self) -> Option<Time> {
        let (t, ev) = self.events.pop()?;
        if t > self.stop.at {
            self.now = self.stop.at;
            return None;
        }
        if let Event::Look(look) = ev {
            self.looks_pending -= 1;
            let _ = self.look(t, look);
            return Some(t);
        }
        self.now = t;
        self.events_done += 1;
        self.fingerprint.add(t, ev.code());
        self.handle(ev);
        Some(t)
    }

    /// Runs one event. Always inlined into the loop of `run`, its only caller outside tests:
    /// out of line, its call, prologue and epilogue cost about 15 instructions per event
    /// (`benches/README.md`, "The scheme interface").
    #[inline(always)]
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
            Event::Look(_) => unreachable!("the event loop takes looks itself"),
        }
    }
}
