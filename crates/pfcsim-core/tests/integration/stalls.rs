//! Runs that stall: PFC deadlocks found and reported (`run.deadlock_check`), none reported
//! where pauses are long but form no cycle, and the no-progress watchdog
//! (`run.no_progress`).

use crate::testing::{assert_complete, leaf_spine_spec, ring_spec, run_text, spec_error};
use pfcsim_core::metrics::DeadlockRecord;
use pfcsim_core::sim::RunOutput;

/// The clockwise egresses of the ring, (switch, local port, peer): each switch's ports are
/// its host's link, then its links in the file's order.
const RING_CYCLE: [(u32, u16, u32); 5] = [(5, 1, 6), (6, 2, 7), (7, 2, 8), (8, 2, 9), (9, 2, 5)];

fn members(rows: &[DeadlockRecord]) -> Vec<(u32, u16, u32)> {
    rows.iter().map(|d| (d.node, d.port, d.peer)).collect()
}

/// The five flows of the ring wait on each other in a cycle of PAUSEs: the periodic check
/// finds it, with its five egresses and when it formed, and the run stops there instead of
/// going on to its stop rule (1 s after the flows start), marked incomplete.
#[test]
fn the_deadlock_of_a_routing_cycle_is_found_with_its_members() {
    let out = run_text(&ring_spec(&[0, 1, 2, 3, 4], "", ""), "ring.toml");
    let s = &out.stats;
    assert_eq!(members(&out.deadlocks), RING_CYCLE);
    let first = out.deadlocks[0];
    for d in &out.deadlocks {
        assert_eq!((d.deadlock, d.priority), (0, 3));
        assert_eq!(
            (d.detected_ps, d.formed_ps),
            (first.detected_ps, first.formed_ps)
        );
        assert!(d.paused_since_ps <= d.formed_ps);
        // Its peer's ingress holds a buffer's worth of the next flow's packets.
        assert!(d.stuck_bytes > 100_000, "{d:?}");
    }
    // Found by the first check that saw the pauses held for 1 ms (checks every 1 ms).
    let held = first.detected_ps - first.formed_ps;
    assert!((1_000_000_000..2_000_000_000).contains(&held), "{held}");
    assert_eq!(s.end_ps, first.detected_ps);
    assert_eq!(
        (s.deadlocks, s.deadlock_formed_ps),
        (1, Some(first.formed_ps))
    );
    let cycle = "priority 3: switch 5 port 1 -> 6, switch 6 port 2 -> 7, switch 7 port 2 -> 8, \
                 switch 8 port 2 -> 9, switch 9 port 2 -> 5, formed at ";
    assert!(s.deadlock_cycles.as_ref().unwrap().starts_with(cycle));
    let reason = s.incomplete.as_ref().unwrap();
    let found = format!(
        "run.deadlock_check (\"1ms\"): a PFC deadlock, found at {:.6} ms of simulated time, \
         with 0 of 5 flows finished: egresses that pause each other in a cycle and can never \
         resume ({cycle}",
        first.detected_ps as f64 / 1e9
    );
    assert!(reason.starts_with(&found), "{reason}");
    assert!(
        reason.ends_with(
            "; the run stopped there; what it measured up to there is in the results, marked \
             incomplete, and the cycle in deadlocks.parquet; routes whose buffer dependencies \
             form a cycle cause it (a routing loop, a ring, a route that turns down and up \
             again): change the routes or the topology"
        ),
        "{reason}"
    );
    assert_eq!(s.flows_finished, 0);
}

/// The watchdog and a run that runs out of events find the same deadlock when no periodic
/// check does, and say so.
#[test]
fn a_deadlock_is_found_by_the_watchdog_and_at_the_end_of_the_events() {
    let check = run_text(&ring_spec(&[0, 1, 2, 3, 4], "", ""), "ring.toml");
    // No periodic check before the stop rule: the watchdog looks every 125 us.
    let watched = run_text(
        &ring_spec(
            &[0, 1, 2, 3, 4],
            "deadlock_check = \"10s\"\nno_progress = \"1ms\"",
            "",
        ),
        "ring.toml",
    );
    assert_eq!(members(&watched.deadlocks), RING_CYCLE);
    assert_eq!(watched.deadlocks[0].formed_ps, check.deadlocks[0].formed_ps);
    let reason = watched.stats.incomplete.as_ref().unwrap();
    assert!(
        reason.starts_with(
            "run.no_progress (\"1ms\"): no flow finished and no byte was delivered since "
        ) && reason.contains(" ms while data waited in switch buffers; a PFC deadlock, found at "),
        "{reason}"
    );
    // Without a retransmission timer nothing is left to happen once the cycle formed.
    let drained = run_text(
        &ring_spec(
            &[0, 1, 2, 3, 4],
            "deadlock_check = \"10s\"",
            "[nic]\nrto = \"0s\"",
        ),
        "ring.toml",
    );
    assert_eq!(members(&drained.deadlocks), RING_CYCLE);
    let reason = drained.stats.incomplete.as_ref().unwrap();
    assert!(
        reason.starts_with(
            "run.deadlock_check (\"10s\"): the run had no event left while data waited in \
             switch buffers; a PFC deadlock, found at "
        ),
        "{reason}"
    );
    assert_eq!(drained.stats.end_ps, drained.deadlocks[0].detected_ps);
}

/// `out` found no deadlock, stopped by nothing, and finished every flow.
fn assert_no_deadlock(out: &RunOutput) {
    assert!(out.deadlocks.is_empty(), "{:?}", out.deadlocks);
    assert_eq!(out.stats.deadlocks, 0);
    assert_eq!(out.stats.incomplete, None);
    assert_complete(out);
}

/// Long pauses between switches that form no cycle are not a deadlock, checked every 10 us:
/// four of the ring's five flows (a chain of pauses, not a cycle: the first cut of every
/// check drops them all); and two incasts on a leaf-spine, 16 senders to host 0 and 15 to
/// host 8 on another leaf (pauses from both receivers' leaves to the spines and back from
/// the spines to every leaf: each paused egress has a paused egress behind it, so the checks
/// read the queues, where the bytes wait for the receivers' host links, which are never
/// paused). The checks change nothing: the same events as with checks every 1 ms.
#[test]
fn long_pauses_without_a_cycle_are_no_deadlock() {
    let chain = |run: &str| run_text(&ring_spec(&[0, 1, 2, 3], run, ""), "ring.toml");
    let often = chain("deadlock_check = \"10us\"");
    assert_no_deadlock(&often);
    assert!(
        often.deadlock_checks.looked > 0,
        "{:?}",
        often.deadlock_checks
    );
    assert_eq!(
        often.deadlock_checks.read_queues, 0,
        "the first cut drops a chain"
    );
    assert_eq!(often.stats.fingerprint, chain("").stats.fingerprint);

    let flows: Vec<String> = ((8..24).map(|src| (src, 0)))
        .chain((1..8).chain(16..24).map(|src| (src, 8)))
        .map(|(src, dst)| format!("{{ src = {src}, dst = {dst}, size = \"1.5MB\" }}"))
        .collect();
    let incasts = |run: &str| {
        let traffic = format!(
            "[[traffic]]\nkind = \"scripted\"\nflows = [{}]",
            flows.join(", ")
        );
        run_text(&leaf_spine_spec(1, (3, 2, 8), run, &traffic), "incast.toml")
    };
    let often = incasts("deadlock_check = \"1us\"");
    assert_no_deadlock(&often);
    assert!(
        often.deadlock_checks.read_queues > 0,
        "{:?}",
        often.deadlock_checks
    );
    assert_eq!(often.stats.fingerprint, incasts("").stats.fingerprint);
}

/// A run whose data stops moving without a deadlock (both links of the sender's leaf slowed
/// to 1 kbps: a packet takes 8 s) ends after `no_progress` of no progress, with the cause;
/// its results measure it up to there.
#[test]
fn the_watchdog_ends_a_run_that_stops_moving() {
    let slow = "[[traffic]]\nkind = \"scripted\"\nflows = [{ src = 0, dst = 2, size = \"1MB\" }]\n\n\
                [[faults]]\nkind = \"link_rate\"\nlink = [\"leaf:0\", \"spine:0\"]\nrate = \"1Kbps\"\nat = \"5us\"\n\n\
                [[faults]]\nkind = \"link_rate\"\nlink = [\"leaf:0\", \"spine:1\"]\nrate = \"1Kbps\"\nat = \"5us\"\n";
    let out = run_text(
        &leaf_spine_spec(1, (2, 2, 2), "no_progress = \"1ms\"", slow),
        "slow.toml",
    );
    let s = &out.stats;
    assert!(out.deadlocks.is_empty());
    assert_eq!(s.flows_finished, 0);
    assert!(
        s.bytes_delivered > 0,
        "the packets sent before the fault arrived"
    );
    // Stopped at the first look 1 ms or more after the last progress (looks every 125 us).
    assert!(
        (1_000_000_000..1_200_000_000).contains(&s.end_ps),
        "{}",
        s.end_ps
    );
    let reason = s.incomplete.as_ref().unwrap();
    assert!(
        reason.starts_with(
            "run.no_progress (\"1ms\"): no flow finished and no byte was delivered from "
        ) && reason.contains(" ms of simulated time while data waited (")
            && reason.ends_with(
                " B in switch buffers, 1 NICs with data to send), with 0 of 1 flows finished, \
                 and no PFC deadlock holds it; the run stopped there; what it \
                 measured up to there is in the results, marked incomplete; look for what \
                 holds the data (a link too slow, a pause that never ends: paused_time_ps and \
                 peak_queue_bytes in ports.parquet), or raise run.no_progress if the run needs \
                 longer"
            ),
        "{reason}"
    );
}

/// Both times must be above 0; left out, they take their defaults.
#[test]
fn a_watch_of_zero_is_refused() {
    for (run, message) in [
        (
            "no_progress = \"0s\"",
            "ring.toml: run.no_progress: must be above 0 (e.g. \"100ms\"), or left out for the \
             default (\"100ms\", or ten times the time the slowest link takes to carry a full \
             switch buffer if that is longer)",
        ),
        (
            "deadlock_check = \"0s\"",
            "ring.toml: run.deadlock_check: must be above 0 (e.g. \"100us\"), or left out for \
             the default \"1ms\"",
        ),
    ] {
        assert_eq!(spec_error(&ring_spec(&[0], run, ""), "ring.toml"), message);
    }
}
