//! Host-side schemes end to end: each test fails if the mechanism it names is removed.

use crate::testing::{self, poisson, retransmitted};
use pfcsim_core::sim::RunOutput;

/// 2 leaves x 4 spines x 2 hosts (hosts 0-3, leaves 4-5, spines 6-9), 100 Gbps and 1 us
/// links, PFC on, line-rate senders, drained to the end; then `extra`.
fn run(extra: &str) -> RunOutput {
    let text = testing::leaf_spine_spec(5, (2, 4, 2), "stop_when_done = false", extra);
    testing::run_text(&text, "host_schemes.toml")
}

/// One 1 MB flow from host 0 to host 2 (16 flowcells of 64 KB).
const ONE_FLOW: &str = r#"
    [[traffic]]
    kind = "scripted"
    flows = [{ src = 0, dst = 2, size = "1MB" }]
"#;

/// The path through spine 0 runs at half rate, so a flowcell sent on it arrives later than
/// the start of the next one, sent right after it on another spine.
const SLOW_SPINE: &str = r#"
    [[faults]]
    kind = "link_rate"
    link = ["leaf:0", "spine:0"]
    rate = "50Gbps"
"#;

/// [`testing::assert_complete`], nothing lost, nothing held.
fn assert_complete(out: &RunOutput) {
    testing::assert_complete(out);
    assert_eq!(out.stats.packets_dropped, 0);
    assert_eq!(out.held_packets, 0, "nothing left in resequencing buffers");
}

#[test]
fn presto_sends_successive_flowcells_on_successive_paths() {
    let out = run(&format!("{ONE_FLOW}\n[lb]\nscheme = \"presto\"\n"));
    assert_complete(&out);
    let f = &out.flows[0];
    assert_eq!(f.paths_used, 4, "the flowcells cover the 4 spines");
    // 16 flowcells, each on the next path: the path changes at every cell boundary only.
    assert_eq!(f.path_changes, 15);
    assert_eq!(retransmitted(&out), 0, "equal paths: no reordering");

    // Smaller flowcells: more changes, same paths.
    let out = run(&format!(
        "{ONE_FLOW}\n[lb]\nscheme = \"presto\"\nflowcell = \"16KB\"\n"
    ));
    assert_eq!(
        out.flows[0].path_changes,
        1_000_000u64.div_ceil(16_000) as u32 - 1
    );
    // ECMP keeps the flow on one path.
    let ecmp = run(ONE_FLOW);
    assert_eq!(
        (ecmp.flows[0].paths_used, ecmp.flows[0].path_changes),
        (1, 0)
    );
}

#[test]
fn the_resequencing_buffer_hides_reordering_between_flowcells() {
    let presto = |keys: &str| {
        run(&format!(
            "{ONE_FLOW}{SLOW_SPINE}\n[lb]\nscheme = \"presto\"\n{keys}\n"
        ))
    };

    // Without the buffer, the later flowcell overtakes the slow one and go-back-N resends.
    let bare = presto("resequence = false");
    assert_complete(&bare);
    assert!(bare.flows[0].ooo_arrivals > 0);
    assert!(bare.flows[0].nacks_received > 0);
    assert!(retransmitted(&bare) > 0);
    assert_eq!(bare.stats.resequenced_packets, 0);

    // With it, the receiver holds the early flowcell until the slow one is complete.
    let held = presto("");
    assert_complete(&held);
    assert!(held.stats.resequenced_packets > 0, "packets were held back");
    assert_eq!(held.stats.reseq_flushed_packets, 0);
    assert_eq!(
        held.flows[0].ooo_arrivals, 0,
        "the transport saw everything in order"
    );
    assert_eq!(held.flows[0].nacks_received, 0);
    assert_eq!(retransmitted(&held), 0);
    assert!(held.flows[0].fct_ps < bare.flows[0].fct_ps);

    // A timeout shorter than the reordering lets it leak through to go-back-N.
    let leaky = presto("reorder_timeout = \"100ns\"");
    assert_complete(&leaky);
    assert!(
        leaky.stats.reseq_flushed_packets > 0,
        "the timeout flushed held packets"
    );
    assert!(leaky.flows[0].nacks_received > 0);
    assert!(retransmitted(&leaky) > 0);

    // So does a buffer too small for the gap.
    let small = presto("reorder_buffer = 2");
    assert_complete(&small);
    assert!(
        small.stats.reseq_flushed_packets > 0,
        "overflow flushed held packets"
    );
    assert!(retransmitted(&small) > 0);
}

#[test]
fn presto_runs_are_deterministic_and_lossless_under_load() {
    let loaded = format!(
        "{}\n[lb]\nscheme = \"presto\"\n{SLOW_SPINE}",
        poisson(0.6, "3ms")
    );
    let a = run(&loaded);
    let b = run(&loaded);
    assert_complete(&a);
    assert_eq!(a.stats.drops_buffer, 0);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert!(a.flows.len() > 20);
}

#[test]
fn clove_keeps_a_flowlet_on_one_path_and_redraws_after_the_timeout() {
    // A line-rate flow's packets leave 80 ns apart: one flowlet under the 50 us default.
    for mode in ["ecn", "edge_flowlet"] {
        let out = run(&format!(
            "{ONE_FLOW}\n[lb]\nscheme = \"clove\"\nmode = \"{mode}\"\n"
        ));
        assert_complete(&out);
        assert_eq!(
            (out.flows[0].paths_used, out.flows[0].path_changes),
            (1, 0),
            "{mode}"
        );
    }
    // A timeout below the packet gap makes every packet a flowlet of its own.
    let out = run(&format!(
        "{ONE_FLOW}\n[lb]\nscheme = \"clove\"\nflowlet_timeout = \"50ns\"\n"
    ));
    assert_complete(&out);
    assert_eq!(out.flows[0].paths_used, 4);
    assert!(out.flows[0].path_changes > 500, "3 in 4 packets move");
}

/// Host 1 sends a 4 MB hog to host 3 pinned on spine 0, whose link from leaf 0 runs at half
/// rate, so the queue there stays deep and ECN-marks; host 0 sends 60 flows of 30 KB to
/// host 2, one every 10 us, each a flowlet of its own. Returns the share of host 0's data
/// packets that went through spine 0.
fn share_on_the_marking_path(lb: &str, extra: &str) -> f64 {
    let mut flows = vec![r#"{ src = 1, dst = 3, size = "4MB", path = [0] }"#.to_string()];
    for k in 0..60 {
        flows.push(format!(
            r#"{{ src = 0, dst = 2, size = "30KB", start = "{}us" }}"#,
            20 + 10 * k
        ));
    }
    let out = run(&format!(
        "[[traffic]]\nkind = \"scripted\"\nflows = [{}]\n{SLOW_SPINE}\n[lb]\n{lb}\n{extra}\n",
        flows.join(", ")
    ));
    assert_complete(&out);
    let hog = out.flows.iter().find(|f| f.src == 1).unwrap();
    let ours: u64 = out
        .flows
        .iter()
        .filter(|f| f.src == 0)
        .map(|f| f.packets_sent)
        .sum();
    // Leaf 0 (node 4) towards spine 0 (node 6) carries the hog and host 0's packets there.
    let uplink = out
        .ports
        .iter()
        .find(|p| p.node == 4 && p.peer == 6)
        .unwrap();
    assert!(uplink.ecn_marks > 0 || extra.contains("enabled = false"));
    (uplink.tx_packets - hog.packets_sent) as f64 / ours as f64
}

#[test]
fn clove_ecn_steers_new_flowlets_away_from_a_marking_path() {
    let ecn = share_on_the_marking_path("scheme = \"clove\"", "");
    let edge = share_on_the_marking_path("scheme = \"clove\"\nmode = \"edge_flowlet\"", "");
    let unmarked = share_on_the_marking_path("scheme = \"clove\"", "[switch.ecn]\nenabled = false");
    eprintln!("share on spine 0: ecn {ecn:.3}, edge_flowlet {edge:.3}, no marks {unmarked:.3}");
    // Uniform choices put about a quarter of the flowlets on spine 0 ...
    assert!((0.12..0.4).contains(&edge), "edge_flowlet {edge}");
    assert!((0.12..0.4).contains(&unmarked), "no ECN marks {unmarked}");
    // ... Clove-ECN, cutting the marked path's weight, far fewer.
    assert!(ecn < edge / 2.0, "ecn {ecn} vs edge_flowlet {edge}");
    assert!(ecn < unmarked / 2.0, "ecn {ecn} vs no marks {unmarked}");
}

#[test]
fn clove_runs_are_deterministic_and_lossless_under_load() {
    // A 2 us timeout, so that flows at line rate split into flowlets (PFC pauses and the
    // slow spine's queue open such gaps) and reordering between them reaches go-back-N.
    for mode in ["ecn", "edge_flowlet"] {
        let loaded = format!(
            r#"{}
            [lb]
            scheme = "clove"
            mode = "{mode}"
            flowlet_timeout = "2us"
            {SLOW_SPINE}"#,
            poisson(0.6, "3ms")
        );
        let a = run(&loaded);
        let b = run(&loaded);
        assert_complete(&a);
        assert_eq!(a.stats.drops_buffer, 0);
        assert_eq!(a.stats.fingerprint, b.stats.fingerprint, "{mode}");
        assert!(a.flows.len() > 20);
        assert!(
            a.flows.iter().any(|f| f.paths_used > 1),
            "{mode}: some flow changed path between flowlets"
        );
    }
}
