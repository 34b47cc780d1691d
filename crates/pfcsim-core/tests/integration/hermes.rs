//! Hermes end to end: each test fails if the mechanism it names is removed.
//!
//! Fabric: 2 leaves x 4 spines x 2 hosts (hosts 0-3, leaves 4-5, spines 6-9), 100 Gbps and
//! 1 us links, PFC on, line-rate senders (no congestion control), so that a congested path
//! shows in queueing delay and ECN marks at once.

use crate::testing::{self, assert_complete, poisson, port};
use pfcsim_core::metrics::PortRecord;
use pfcsim_core::sim::RunOutput;

const SPINE0: u32 = 6;
const LEAF0: u32 = 4;
const LEAF1: u32 = 5;

fn run(extra: &str) -> RunOutput {
    run_with("stop_at = \"100ms\"", extra)
}

/// A run with `run` inside its `[run]` section.
fn run_with(run: &str, extra: &str) -> RunOutput {
    let text = testing::leaf_spine_spec(7, (2, 4, 2), run, extra);
    testing::run_text(&text, "hermes.toml")
}

/// Full-size data packets (1048 B) among what a port sent; the rest are 64 B frames (probes,
/// ACKs, PFC).
fn data_packets(p: &PortRecord) -> u64 {
    (p.tx_bytes - 64 * p.tx_packets) / (1048 - 64)
}

/// Scripted flows: `flows` is the inside of `flows = [...]`.
fn scripted(flows: &str) -> String {
    format!("[[traffic]]\nkind = \"scripted\"\nflows = [{flows}]\n")
}

/// Host 1 pushes 5 MB to host 3 pinned through spine 0, whose uplink from leaf 0 runs at a
/// quarter rate: the path through spine 0 is congested (deep queue, PFC, every packet
/// marked). From 300 us on, host 0 starts 20 small flows to host 2.
#[test]
fn new_small_flows_avoid_a_path_that_turned_bad() {
    let mut flows = vec![r#"{ src = 1, dst = 3, size = "5MB", path = [0] }"#.to_string()];
    for k in 0..20 {
        flows.push(format!(
            r#"{{ src = 0, dst = 2, size = "50KB", start = "{}us" }}"#,
            300 + 20 * k
        ));
    }
    let traffic = scripted(&flows.join(", "));
    let fault =
        "[[faults]]\nkind = \"link_rate\"\nlink = [\"leaf:0\", \"spine:0\"]\nrate = \"25Gbps\"\n";
    let small_on_spine0 = |out: &RunOutput| {
        let hog = out.flows.iter().find(|f| f.src == 1).unwrap();
        data_packets(port(out, SPINE0, LEAF1)) - hog.packets_sent
    };

    let hermes = run(&format!("{traffic}{fault}[lb]\nscheme = \"hermes\"\n"));
    assert_complete(&hermes);
    assert_eq!(
        small_on_spine0(&hermes),
        0,
        "the probes showed spine 0 bad before the small flows started"
    );
    // Probes do cross spine 0 (and cost link time): 64 B packets beside the data.
    let p = port(&hermes, SPINE0, LEAF1);
    assert!(p.tx_packets > data_packets(p));

    // Presto, blind to congestion, puts about a quarter of them there.
    let presto = run(&format!("{traffic}{fault}[lb]\nscheme = \"presto\"\n"));
    assert_complete(&presto);
    assert!(
        small_on_spine0(&presto) >= 100,
        "{}",
        small_on_spine0(&presto)
    );
    // Without probes host 0 learns only from its own flows: the first one there finds out.
    let blind = run(&format!(
        "{traffic}{fault}[lb]\nscheme = \"hermes\"\nprobe = false\n"
    ));
    assert_complete(&blind);
    assert!(small_on_spine0(&blind) >= 50, "{}", small_on_spine0(&blind));
    let fct = |out: &RunOutput| -> u64 {
        out.flows
            .iter()
            .filter(|f| f.src == 0)
            .map(|f| f.fct_ps.unwrap())
            .max()
            .unwrap()
    };
    assert!(fct(&hermes) < fct(&presto));
}

/// A 4 MB flow from host 0 to host 2 is joined, 50 us in, by a hog from host 1 pinned to the
/// same spine: the path turns bad. At full uplink rate the two share it, so the large flow
/// still runs at about half line rate, above R = 30 %: Hermes leaves it alone. With the
/// uplink at 40 Gbps it gets about 20 Gbps, below R, and has sent more than S: it moves.
#[test]
fn a_large_flow_moves_off_a_bad_path_only_when_slow() {
    let large = r#"{ src = 0, dst = 2, size = "4MB" }"#;
    // Where the large flow goes on its own (the run is the same up to the hog's start).
    let alone = run(&format!("{}[lb]\nscheme = \"hermes\"\n", scripted(large)));
    let spine = (0..4u32)
        .max_by_key(|s| data_packets(port(&alone, LEAF0, SPINE0 + s)))
        .unwrap();
    assert!(data_packets(port(&alone, LEAF0, SPINE0 + spine)) >= 4000);
    let with_hog = |rate: &str| {
        let traffic = scripted(&format!(
            r#"{large}, {{ src = 1, dst = 3, size = "4MB", start = "50us", path = [{spine}] }}"#
        ));
        let fault = format!(
            "[[faults]]\nkind = \"link_rate\"\nlink = [\"leaf:0\", \"spine:{spine}\"]\nrate = \"{rate}\"\n"
        );
        let out = run(&format!("{traffic}{fault}[lb]\nscheme = \"hermes\"\n"));
        assert_complete(&out);
        out
    };

    let fast = with_hog("100Gbps");
    let f = fast.flows.iter().find(|f| f.src == 0).unwrap();
    assert_eq!(f.path_changes, 0, "large and fast: it stays");
    assert_eq!(f.paths_used, 1);

    let slow = with_hog("40Gbps");
    let f = slow.flows.iter().find(|f| f.src == 0).unwrap();
    assert!(f.path_changes >= 1, "large and slow: it moves");
}

/// Spine 0 black-holes packets from host 0 to host 2. Host 0 sends 30 flows of 100 KB to
/// host 2, one every 200 us. Flows that land on spine 0 before Hermes knows lose packets and
/// move (at their timeout, or when the path fails); the losses of data and of probes (host 0
/// is its rack's agent and probes host 2) fail the path, and later flows avoid it.
fn black_hole(fraction: f64) -> (RunOutput, String) {
    let flows: Vec<String> = (0..30)
        .map(|k| {
            format!(
                r#"{{ src = 0, dst = 2, size = "100KB", start = "{}us" }}"#,
                200 * k
            )
        })
        .collect();
    let traffic = scripted(&flows.join(", "));
    let fault = format!(
        "[[faults]]\nkind = \"black_hole\"\nswitch = \"spine:0\"\npairs = [[\"host:0\", \"host:2\"]]\nfraction = {fraction}\n"
    );
    let out = run(&format!("{traffic}{fault}[lb]\nscheme = \"hermes\"\n"));
    assert_complete(&out);
    assert!(
        out.stats.drops_black_hole > 0,
        "some packets went there first"
    );
    // Flows that started once the path had failed never lost a packet.
    let late: Vec<_> = out
        .flows
        .iter()
        .filter(|f| f.start_ps >= 3_000_000_000)
        .collect();
    assert!(late.len() >= 14);
    for f in &late {
        assert_eq!(
            (f.timeouts, f.retransmitted_bytes),
            (0, 0),
            "flow {} avoided spine 0",
            f.flow_id
        );
    }
    (out, format!("{traffic}{fault}"))
}

#[test]
fn hermes_stops_using_a_black_holed_path() {
    // Everything dropped: no reply ever comes back on that path, so it is never good.
    let (whole, spec) = black_hole(1.0);
    let timed_out = whole.flows.iter().filter(|f| f.timeouts > 0).count();
    assert!(timed_out <= 6, "{timed_out} flows timed out");
    // ECMP keeps hashing some of them into the hole: they never finish.
    let ecmp = run(&spec);
    assert!(ecmp.stats.flows_finished < ecmp.stats.flows_total);

    // Half dropped: what gets through looks fast, so only the failure detection (losses of
    // data and probes) keeps later flows away.
    let (half, _) = black_hole(0.5);
    assert!(half.flows.iter().any(|f| f.nacks_received > 0));
}

#[test]
fn hermes_runs_are_deterministic_and_lossless_under_load() {
    let loaded = format!(
        "{}{}",
        poisson(0.6, "3ms"),
        r#"
        [[faults]]
        kind = "link_rate"
        link = ["leaf:0", "spine:0"]
        rate = "50Gbps"
        [lb]
        scheme = "hermes"
    "#
    );
    let a = run(&loaded);
    let b = run(&loaded);
    assert_complete(&a);
    assert_eq!(a.stats.packets_dropped, 0);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert!(a.flows.len() > 20);
}

/// The probing agent of a rack runs while the rack has flows. Host 0 sends two 10 MB flows
/// to host 2, the second 5 ms after the first: its agent (host 0) probes during each, stops
/// in between and after, so a run that drains (`stop_when_done = false`, no `stop_at`) ends
/// right after the last flow, not at the default stop one second after the last start.
#[test]
fn probing_lasts_while_the_rack_has_flows_and_runs_drain() {
    let traffic = scripted(
        r#"{ src = 0, dst = 2, size = "10MB" }, { src = 0, dst = 2, size = "10MB", start = "5ms" }"#,
    );
    let drain = |lb: &str| run_with("stop_when_done = false", &format!("{traffic}[lb]\n{lb}\n"));
    let out = drain("scheme = \"hermes\"");
    assert_complete(&out);
    // The run ends with its last event: without probes, the senders' retransmission timer
    // (armed 4 ms after the last start, finding nothing to resend); probing adds at most a
    // round after the last flow.
    let interval = 100_000_000; // probe_interval, ps
    let last_end = out
        .flows
        .iter()
        .map(|f| f.finish_ps.unwrap())
        .max()
        .unwrap();
    let quiet = drain("scheme = \"hermes\"\nprobe = false");
    assert!(
        out.stats.end_ps <= quiet.stats.end_ps.max(last_end + interval + interval / 2),
        "ends at {} ps, last flow done at {last_end} ps, without probes at {} ps",
        out.stats.end_ps,
        quiet.stats.end_ps
    );
    assert!(out.stats.end_ps < 10_000_000_000, "{}", out.stats.end_ps);
    // Host 0 sends data and probes only: it gets no data to acknowledge, and host 2's rack
    // has no flow, so its agent never probes host 0. One round per probe interval while a
    // flow runs, two or three probes a round (two random paths and the best).
    let (mut min_rounds, mut max_rounds) = (0, 0);
    for f in &out.flows {
        let d = f.finish_ps.unwrap() - f.start_ps;
        min_rounds += d / interval;
        max_rounds += d.div_ceil(interval);
    }
    assert!(min_rounds >= 12, "{min_rounds}");
    let data: u64 = out.flows.iter().map(|f| f.packets_sent).sum();
    let probes = port(&out, 0, LEAF0).tx_packets - data;
    assert!(
        (2 * min_rounds..=3 * max_rounds).contains(&probes),
        "{probes} probes in {min_rounds}..={max_rounds} rounds"
    );
}
