//! Monitors (`[[monitor]]`): what they record against what the run did, their sampling, and
//! that they change nothing of the run.

use crate::testing::{
    leaf_spine_spec, run_text, scenario, spec_error, tiny, tiny_dir, to_text, TINY,
};
use pfcsim_core::metrics::{MonitorOutput, PfcEvent, QueueSample, RateSample};
use pfcsim_core::run::{run_scenario, summarize, write_run_dir};
use pfcsim_core::sim::RunOutput;
use pfcsim_core::spec::Scenario;
use std::ops::ControlFlow;

const US: u64 = 1_000_000;

/// A 2-to-1 incast under one switch (hosts 0, 1 and 2 on leaf 3, spine 4): hosts 0 and 1 each
/// send `size` to host 2, from time 0, priority 3; `cc` is the `[cc]` kind; then `rest`.
fn incast(cc: &str, size: &str, rest: &str) -> String {
    let flows = format!(
        "[[traffic]]\nkind = \"scripted\"\nflows = [{{ src = 0, dst = 2, size = \"{size}\" }}, \
         {{ src = 1, dst = 2, size = \"{size}\" }}]\n"
    );
    leaf_spine_spec(1, (1, 1, 3), "", &format!("{flows}\n{rest}"))
        .replace("[cc]\nkind = \"none\"", &format!("[cc]\nkind = \"{cc}\""))
}

fn monitors(out: &RunOutput) -> &MonitorOutput {
    out.monitors.as_ref().expect("the run has monitors")
}

/// The queue series of (node, port, priority 3).
fn series(rows: &[QueueSample], node: u32, port: u16) -> Vec<QueueSample> {
    rows.iter()
        .filter(|r| (r.node, r.port, r.priority) == (node, port, 3))
        .copied()
        .collect()
}

fn first(events: &[PfcEvent], node: u32, direction: &str, frame: &str) -> PfcEvent {
    *events
        .iter()
        .find(|e| (e.node, e.direction, e.frame) == (node, direction, frame))
        .unwrap_or_else(|| panic!("no {direction} {frame} at node {node}"))
}

/// The leaf's buffer for what host 0 sends rises to XOFF exactly when the PAUSE is logged,
/// stays above it while paused, and is back below it after the RESUME; the host's port logs
/// the same pause as received, for the time its egress was stopped.
#[test]
fn an_incast_queue_reaches_xoff_when_the_pause_is_logged_and_falls_after_the_resume() {
    let text = incast(
        "none",
        "1MB",
        "[switch.pfc]\nstatic_threshold = \"100KB\"\n\
         [[monitor]]\nkind = \"queue\"\nnodes = [\"leaf:0\"]\npeers = [\"host:0\"]\ninterval = \"50ns\"\nend = \"1ms\"\n\
         [[monitor]]\nkind = \"pfc\"\nnodes = [\"leaf:0\", \"host:0\"]\n",
    );
    let out = run_text(&text, "incast.toml");
    let m = monitors(&out);
    let pfc = m.pfc.as_ref().unwrap();
    let pause = first(pfc, 3, "sent", "pause");
    assert_eq!((pause.port, pause.peer, pause.priority), (0, 0, 3));
    let resume = first(pfc, 3, "sent", "resume");
    assert_eq!(resume.duration_ps, Some(resume.time_ps - pause.time_ps));
    let queue = series(m.queue.as_ref().unwrap(), 3, 0);
    let xoff = queue[0].xoff_bytes;
    assert_eq!(xoff, 4_000 + 100_000, "reserve + static threshold");
    // Below XOFF before the PAUSE and within a packet of it at the looks around it (packets
    // come and go every 84 ns; the looks are 50 ns apart); above it, in the headroom, while
    // the PAUSE travels and what was on the wire arrives.
    let mtu = 1_048;
    let before = queue
        .iter()
        .rev()
        .find(|s| s.time_ps < pause.time_ps)
        .unwrap();
    let reached = queue.iter().find(|s| s.time_ps >= pause.time_ps).unwrap();
    assert!(queue
        .iter()
        .filter(|s| s.time_ps < pause.time_ps)
        .all(|s| s.ingress_bytes < xoff));
    assert!(before.ingress_bytes + 2 * mtu >= xoff, "{before:?}");
    assert!(reached.time_ps < pause.time_ps + 50_000);
    assert!(reached.ingress_bytes + mtu >= xoff, "{reached:?}");
    let peak = queue.iter().map(|s| s.ingress_bytes).max().unwrap();
    assert!(
        peak > xoff + 10 * mtu,
        "the headroom takes what was on its way: {peak}"
    );
    // While paused the buffer stays at XOFF less the resume offset or more; after the
    // RESUME it is below.
    assert!(queue
        .iter()
        .filter(|s| s.time_ps >= reached.time_ps && s.time_ps < resume.time_ps)
        .all(|s| s.ingress_bytes + 3_000 > xoff));
    let after = queue.iter().find(|s| s.time_ps >= resume.time_ps).unwrap();
    assert!(after.ingress_bytes + 3_000 <= xoff, "{after:?}");
    // The egress to the receiver holds what both senders queued.
    let egress = series(m.queue.as_ref().unwrap(), 3, 2);
    assert!(egress.is_empty(), "only the port to host 0 is watched");
    // Host 0 received the PAUSE one link later and was paused until the RESUME arrived.
    let got = first(pfc, 0, "received", "pause");
    let freed = first(pfc, 0, "received", "resume");
    assert!(got.time_ps > pause.time_ps && freed.time_ps > resume.time_ps);
    assert_eq!(freed.duration_ps, Some(freed.time_ps - got.time_ps));
    // The received pauses add up to the time ports.parquet says the egress was paused.
    let logged: u64 = pfc
        .iter()
        .filter(|e| (e.node, e.direction, e.frame) == (0, "received", "resume"))
        .map(|e| e.duration_ps.unwrap())
        .sum();
    assert_eq!(logged, crate::testing::port(&out, 0, 3).paused_time_ps);
    assert_eq!(out.stats.monitor_counters["monitor.pfc_events_dropped"], 0);
}

/// A look at the time of an event is taken where an event scheduled when the look was set
/// would run (the event queue's order): after the events at that time scheduled before it,
/// before those scheduled after. Host 0 starts a packet every 83.84 ns from time 0 (1,048 B at
/// 100 Gbps), each start set when the one before it began: a look at the tenth start set
/// 10 ns before it (by the look before it) counts that packet, and one set 100 ns before it,
/// before that start was set, does not (it counts the one before).
#[test]
fn a_look_at_an_events_time_comes_where_an_event_set_with_it_would() {
    let t = 10 * 83_840;
    let util = |every: u64| {
        format!(
            "[[monitor]]\nkind = \"link_util\"\nnodes = [\"host:0\"]\ninterval = \"{every}ps\"\n\
             start = \"{}ps\"\nend = \"{t}ps\"\n",
            t - every
        )
    };
    let text = incast("none", "1MB", &format!("{}{}", util(10_000), util(100_000)));
    let out = run_text(&text, "incast.toml");
    let rows = monitors(&out).link_util.as_ref().unwrap();
    let sent = |monitor: u16| {
        let rows = rows.iter().filter(|r| r.monitor == monitor);
        rows.map(|r| (r.time_ps, r.tx_bytes)).collect::<Vec<_>>()
    };
    assert_eq!(sent(0), vec![(t, 1_048)], "set after the start at t was");
    assert_eq!(sent(1), vec![(t, 1_048)], "set before the start at t was");
}

/// DCQCN's first cut after the first CNP (a decrease check one `decrease_interval` later)
/// leaves `rate x (1 - alpha / 2)` with alpha just below 1: the rate series halves, and the
/// target rate stays at line rate.
#[test]
fn a_dcqcn_flows_rate_halves_after_its_first_cnp() {
    let text = incast(
        "dcqcn",
        "2MB",
        "[[monitor]]\nkind = \"rate\"\nflows = [0]\ninterval = \"1us\"\n",
    );
    let out = run_text(&text, "incast.toml");
    let rates: Vec<RateSample> = monitors(&out).rate.clone().unwrap();
    let line = 100e9;
    let cnp = rates
        .iter()
        .find(|r| r.cnps > 0)
        .expect("the incast marks ECN");
    assert!(rates
        .iter()
        .take_while(|r| r.time_ps < cnp.time_ps)
        .all(|r| r.rate_bps == line && r.cnps == 0));
    let cut = rates.iter().find(|r| r.rate_bps < line).unwrap();
    // The check is due 4 us + 1 ns after the first CNP, which came within the last look.
    let (earliest, latest) = (cnp.time_ps - US, cnp.time_ps + 4 * US + 1_000 + US);
    assert!(
        (earliest..=latest).contains(&cut.time_ps),
        "cut at {} ps, first CNP seen at {} ps",
        cut.time_ps,
        cnp.time_ps
    );
    let ratio = cut.rate_bps / line;
    assert!(
        (0.5..0.51).contains(&ratio),
        "rate after the first cut: {ratio} x line"
    );
    assert_eq!(cut.target_bps, Some(line));
    assert!(
        rates.iter().all(|r| r.cwnd_bytes.is_none()),
        "RoCE has no window"
    );
    // Bytes acknowledged never go back; the flow is sampled only while it sends.
    assert!(rates
        .windows(2)
        .all(|w| w[0].acked_bytes <= w[1].acked_bytes));
    let finish = out.flows[0].finish_ps.unwrap();
    assert!(rates.iter().all(|r| r.time_ps < finish && r.flow_id == 0));
}

/// A TCP flow's rate series is its congestion window over its smoothed RTT: the line rate
/// until the first RTT sample, then, on an idle path in slow start, a window that only grows
/// and a rate that it divides to an RTT between the base RTT (two 100 Gbps, 1 us links: about
/// 4.2 us) and twice it.
#[test]
fn a_tcp_flows_rate_is_its_window_over_its_rtt() {
    let text = leaf_spine_spec(
        1,
        (1, 1, 2),
        "",
        "[transport]\nkind = \"tcp\"\n\
         [[traffic]]\nkind = \"scripted\"\nflows = [{ src = 0, dst = 1, size = \"1MB\" }]\n\
         [[monitor]]\nkind = \"rate\"\nflows = [0]\ninterval = \"500ns\"\nend = \"1ms\"\n",
    );
    let out = run_text(&text, "tcp-rate.toml");
    let rates: Vec<RateSample> = monitors(&out).rate.clone().unwrap();
    let line = 100e9;
    assert!(rates
        .iter()
        .all(|r| r.target_bps.is_none() && r.rate_bps <= line));
    let windows: Vec<u64> = rates.iter().map(|r| r.cwnd_bytes.unwrap()).collect();
    assert_eq!(windows[0], 10 * 1460, "the initial window");
    assert!(windows.windows(2).all(|w| w[0] <= w[1]), "no loss, no cut");
    let limited: Vec<&RateSample> = rates.iter().filter(|r| r.rate_bps < line).collect();
    assert!(!limited.is_empty(), "slow start is window-limited at first");
    for r in limited {
        let rtt_us = r.cwnd_bytes.unwrap() as f64 * 8.0 / r.rate_bps * 1e6;
        assert!(
            (4.0..8.5).contains(&rtt_us),
            "window over rate: {rtt_us} us"
        );
    }
}

/// Looks come every `interval` from `start` to `end`; `min_spacing` writes a series only when
/// it changed, never closer than the spacing; link_util counts the bytes of each interval.
#[test]
fn samples_come_as_configured() {
    let text = incast(
        "none",
        "1MB",
        "[[monitor]]\nkind = \"queue\"\nnodes = [\"leaf:0\"]\nports = [2]\ninterval = \"1us\"\n\
         start = \"10us\"\nend = \"50us\"\n\
         [[monitor]]\nkind = \"queue\"\nnodes = [\"leaf:0\"]\nports = [2]\nmin_spacing = \"500ns\"\nend = \"1ms\"\n\
         [[monitor]]\nkind = \"link_util\"\nnodes = [\"host:0\"]\ninterval = \"2us\"\nend = \"1ms\"\n",
    );
    let out = run_text(&text, "incast.toml");
    let m = monitors(&out);
    let rows = m.queue.as_ref().unwrap();
    let periodic: Vec<u64> = rows
        .iter()
        .filter(|r| r.monitor == 0)
        .map(|r| r.time_ps)
        .collect();
    assert_eq!(periodic, (10..=50).map(|t| t * US).collect::<Vec<_>>());
    let changes: Vec<&QueueSample> = rows.iter().filter(|r| r.monitor == 1).collect();
    assert!(changes.len() > 10);
    for w in changes.windows(2) {
        assert!(w[1].time_ps - w[0].time_ps >= 500_000, "{w:?}");
        assert_eq!(w[1].time_ps % 500_000, 0, "looks every 500 ns from 0");
        assert_ne!(
            (w[0].egress_bytes, w[0].ingress_bytes),
            (w[1].egress_bytes, w[1].ingress_bytes),
            "a row only on a change"
        );
    }
    // The queue to the receiver at 10 us as both monitors saw it.
    let at = |t: u64| changes.iter().rev().find(|r| r.time_ps <= t).unwrap();
    let first = rows.iter().find(|r| r.monitor == 0).unwrap();
    assert_eq!(at(10 * US).egress_bytes, first.egress_bytes);
    // link_util: host 0's NIC, one row per 2 us after the first look, at line rate until PFC
    // pauses it (after 17 us; a packet counts in the interval its transmission starts in, so
    // an interval may carry a little more than its capacity), every byte counted once.
    let util = m.link_util.as_ref().unwrap();
    assert!(util
        .windows(2)
        .all(|w| w[1].time_ps - w[0].time_ps == 2 * US));
    assert_eq!(util[0].time_ps, 2 * US);
    let sent: u64 = util.iter().map(|r| r.tx_bytes).sum();
    let host0 = out.ports.iter().find(|p| p.node == 0).unwrap();
    assert!(sent <= host0.tx_bytes && host0.tx_bytes - sent < 2 * 1_048);
    assert!(
        util.iter()
            .take(8)
            .all(|r| r.utilization > 0.95 && r.utilization < 1.05),
        "{util:?}"
    );
}

/// Every kind of monitor at once leaves the run as it was (same fingerprint, events and
/// flows); a run without monitors writes no monitor file (and removes those an earlier run
/// left), nor any monitor key in its spec or stats.
#[test]
fn monitors_change_nothing_and_no_monitor_writes_no_monitor_file() {
    let plain = {
        let mut spec = tiny();
        spec.insert("lb".into(), toml::toml! { scheme = "conga" }.into());
        to_text(&spec)
    };
    let watched = format!(
        "{plain}\n[[monitor]]\nkind = \"queue\"\ninterval = \"1us\"\nend = \"2ms\"\n\
         [[monitor]]\nkind = \"pfc\"\n\
         [[monitor]]\nkind = \"rate\"\nmin_spacing = \"1us\"\nend = \"2ms\"\n\
         [[monitor]]\nkind = \"link_util\"\ninterval = \"5us\"\nend = \"2ms\"\n\
         [[monitor]]\nkind = \"scheme\"\ninterval = \"10us\"\nend = \"2ms\"\n"
    );
    let run = |text: &str| {
        let sc: Scenario = scenario(text, "tiny.toml");
        let spec = sc.spec.clone();
        let out = run_scenario(sc, &mut |_| ControlFlow::Continue(())).unwrap();
        (spec, out)
    };
    let (plain_spec, a) = run(&plain);
    let (watched_spec, b) = run(&watched);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(
        (a.stats.events, a.stats.end_ps),
        (b.stats.events, b.stats.end_ps)
    );
    assert_eq!(a.flows, b.flows);
    assert!(a.monitors.is_none() && a.stats.monitor_counters.is_empty());
    let m = monitors(&b);
    for (kind, rows) in [
        ("queue", m.queue.as_ref().map(Vec::len)),
        ("pfc", m.pfc.as_ref().map(Vec::len)),
        ("rate", m.rate.as_ref().map(Vec::len)),
        ("link_util", m.link_util.as_ref().map(Vec::len)),
        ("scheme", m.scheme.as_ref().map(Vec::len)),
    ] {
        assert!(rows.is_some(), "{kind} table");
        assert!(kind == "pfc" || rows > Some(0), "{kind} rows");
    }
    let dre = m.scheme.as_ref().unwrap();
    assert!(dre
        .iter()
        .any(|s| s.signal == "dre_metric" && s.value > 0.0));
    assert!(dre.iter().any(|s| s.signal == "path_metric"));

    let dir = std::env::temp_dir().join(format!("pfcsim-monitors-{}", std::process::id()));
    let files = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("monitor"))
            .collect();
        names.sort();
        names
    };
    write_run_dir(&dir, &watched_spec, &b, &summarize(&watched_spec, &b)).unwrap();
    assert_eq!(
        files(&dir),
        [
            "monitor_link_util.parquet",
            "monitor_pfc.parquet",
            "monitor_queue.parquet",
            "monitor_rate.parquet",
            "monitor_scheme.parquet"
        ]
    );
    write_run_dir(&dir, &plain_spec, &a, &summarize(&plain_spec, &a)).unwrap();
    assert!(files(&dir).is_empty());
    let spec = std::fs::read_to_string(dir.join("spec.toml")).unwrap();
    let stats = std::fs::read_to_string(dir.join("stats.json")).unwrap();
    assert!(!spec.contains("monitor") && !stats.contains("monitor"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// RLB exposes the path RTTs it decides on, and its inner scheme's values after its own.
#[test]
fn rlb_exposes_its_path_rtts_through_the_scheme_monitor() {
    let mut spec = tiny();
    spec.insert(
        "lb".into(),
        toml::toml! { scheme = "rlb"
        recirculation = false
        inner = { scheme = "conga" } }
        .into(),
    );
    let text = format!(
        "{}\n[[monitor]]\nkind = \"scheme\"\nnodes = [\"leaf:0\"]\nmin_spacing = \"5us\"\nend = \"1ms\"\n",
        to_text(&spec)
    );
    let out = run_text(&text, "tiny.toml");
    let rows = monitors(&out).scheme.clone().unwrap();
    assert!(rows.iter().all(|r| r.node == 4));
    let rtts: Vec<f64> = rows
        .iter()
        .filter(|r| r.signal == "path_rtt_us")
        .map(|r| r.value)
        .collect();
    // Leaf 0 to leaf 1 over either spine: the base RTT (4 link delays, 4 us) until samples
    // come back, then measured RTTs of at least that.
    assert!(rtts.contains(&4.0), "{rtts:?}");
    assert!(rtts.iter().any(|&r| r > 4.0));
    assert!(
        rows.iter().any(|r| r.signal == "dre_metric"),
        "the inner CONGA's"
    );
    let keys: std::collections::BTreeSet<u32> = rows
        .iter()
        .filter(|r| r.signal == "path_rtt_us")
        .map(|r| r.key)
        .collect();
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        [1 << 16 | 2, 1 << 16 | 3]
    );
}

/// PLB exposes its path RTTs, classes and kicks through the same hook.
#[test]
fn plb_exposes_its_path_rtts_and_classes_through_the_scheme_monitor() {
    let mut spec = tiny();
    spec.insert("lb".into(), toml::toml! { scheme = "plb" }.into());
    let text = format!(
        "{}\n[[monitor]]\nkind = \"scheme\"\nnodes = [\"leaf:*\"]\ninterval = \"10us\"\nend = \"1ms\"\n",
        to_text(&spec)
    );
    let out = run_text(&text, "tiny.toml");
    let rows = monitors(&out).scheme.clone().unwrap();
    let of = |signal: &'static str| rows.iter().filter(move |r| r.signal == signal);
    // Each leaf has one other ToR and two uplinks (its ports 2 and 3): three signals per path
    // per look, every 10 us from 0 to 1 ms.
    assert_eq!(rows.len(), 2 * 2 * 3 * 101);
    assert!(of("path_rtt_us").all(|r| r.value >= 4.0));
    assert!(
        of("path_rtt_us").any(|r| r.value > 4.0),
        "samples come back"
    );
    assert!(of("path_class").all(|r| [0.0, 1.0, 2.0].contains(&r.value)));
    assert!(of("kicked").all(|r| r.value == 0.0 || r.value == 1.0));
    let keys: std::collections::BTreeSet<(u32, u32)> =
        of("path_class").map(|r| (r.node, r.key)).collect();
    let expected = [(4, 1 << 16 | 2), (4, 1 << 16 | 3), (5, 2), (5, 3)];
    assert_eq!(keys.into_iter().collect::<Vec<_>>(), expected);
}

/// Hermes runs at the hosts: a scheme monitor naming a host samples what that host knows of
/// each path (its classes, RTTs and flows), through the host-side hook.
#[test]
fn hermes_exposes_each_hosts_path_states_through_the_scheme_monitor() {
    let mut spec = tiny();
    spec.insert("lb".into(), toml::toml! { scheme = "hermes" }.into());
    let text = format!(
        "{}\n[[monitor]]\nkind = \"scheme\"\nnodes = [\"host:0\", \"leaf:0\"]\ninterval = \"10us\"\nend = \"1ms\"\n",
        to_text(&spec)
    );
    let out = run_text(&text, "tiny.toml");
    let rows = monitors(&out).scheme.clone().unwrap();
    let of = |signal: &'static str| rows.iter().filter(move |r| r.signal == signal);
    // Host 0 (node 0) towards the other ToR (index 1) over its two paths; the leaf's switch
    // part (ECMP) exposes nothing.
    let keys: std::collections::BTreeSet<(u32, u32)> =
        of("path_class").map(|r| (r.node, r.key)).collect();
    assert_eq!(
        keys.into_iter().collect::<Vec<_>>(),
        [(0, 1 << 16), (0, 1 << 16 | 1)]
    );
    assert_eq!(of("path_class").count(), 2 * 101);
    assert!(of("path_class").all(|r| [0.0, 1.0, 2.0, 3.0].contains(&r.value)));
    let rtts: Vec<f64> = of("path_rtt_us").map(|r| r.value).collect();
    assert!(
        rtts.windows(2).any(|w| w[0] != w[1]),
        "probes and ACKs update the RTTs: {rtts:?}"
    );
    assert!(of("path_flows").any(|r| r.value > 0.0), "host 0 sends");
    assert!(of("path_ecn").all(|r| (0.0..=1.0).contains(&r.value)));
    // A scheme that runs in the switches only cannot be watched at a host (refused when the
    // scenario is prepared, before anything runs).
    let text = format!(
        "{TINY}\n[[monitor]]\nkind = \"scheme\"\nnodes = [\"host:0\"]\ninterval = \"1us\"\n"
    );
    let spec = pfcsim_core::spec::Spec::from_toml(&text, "s.toml").unwrap();
    let e = Scenario::prepare(spec, &tiny_dir()).err().expect("refused");
    assert!(
        e.to_string()
            .contains("scheme `ecmp` runs in the switches only"),
        "{e}"
    );
}

/// A bad monitor is refused before anything runs, with the key and what would be valid.
#[test]
fn bad_monitors_are_refused_with_the_key_and_the_fix() {
    let e = spec_error(
        &format!("{TINY}\n[[monitor]]\nkind = \"queue\"\nintervall = \"1us\"\n"),
        "s.toml",
    );
    assert!(
        e.starts_with("s.toml (line 19): monitor[0].intervall: unknown field `intervall`, expected one of `nodes`, `ports`, `peers`, `priorities`, `interval`, `min_spacing`, `start`, `end`"),
        "{e}"
    );
    let e = spec_error(
        &format!("{TINY}\n[[monitor]]\nkind = \"queues\"\n"),
        "s.toml",
    );
    assert!(
        e.contains("monitor[0].kind: unknown variant `queues`, expected one of `queue`, `pfc`, `rate`, `link_util`, `scheme`"),
        "{e}"
    );
    let e = spec_error(&format!("{TINY}\n[[monitor]]\nkind = \"rate\"\n"), "s.toml");
    assert!(
        e.starts_with("s.toml: monitor[0]: no sampling; give interval"),
        "{e}"
    );
    // Refused against the run: the rows the monitors could write over the run's length
    // (the tiny spec stops at the last flow start + 1 s at the latest).
    let text = format!("{TINY}\n[[monitor]]\nkind = \"queue\"\ninterval = \"1us\"\n");
    let spec = pfcsim_core::spec::Spec::from_toml(&text, "s.toml").unwrap();
    let e = Scenario::prepare(spec, &crate::testing::tiny_dir())
        .err()
        .unwrap()
        .message;
    assert!(
        e.starts_with("monitor: the monitors could write") && e.contains("raise run.monitor_limit"),
        "{e}"
    );
    let raised = text.replace("[[monitor]]", "[run]\nmonitor_limit = \"2GB\"\n[[monitor]]");
    scenario(&raised, "s.toml");
}
