//! FLB end to end on the fabric of the FLB paper's Fig. 6 (`experiments/flb/fig6-setting.toml`:
//! 8 leaves, 4 spines, spine 3's links 150 µs and the others 50 µs each way, lossy TCP with a
//! 250-packet drop-tail limit; two 50 MB flows and four 1 MB bursts). Each test fails if the
//! mechanism it names is removed: the reorder filter, the burst cut-over, the probed path
//! choice. At FLB's defaults (the filter screening every new flowlet), whether it beats LetFlow
//! there depends on the seed (docs/results/flb/fig6-8.md); with the filter screening only flowlets
//! after a gap it does on every seed, and that is what the comparison test checks.

use crate::testing::{self, sum_flows};
use pfcsim_core::sim::RunOutput;

const FIG6: &str = include_str!("../../../../experiments/flb/fig6-setting.toml");

/// The Fig. 6 setting with `lb` as its `[lb]` table's body.
fn fig6(lb: &str) -> String {
    FIG6.replace("scheme = \"flb\"", lb)
}

fn run(text: &str) -> RunOutput {
    let out = testing::run_text(text, "fig6.toml");
    testing::assert_complete(&out);
    out
}

/// The Fig. 6 fabric with one 1.4 MB flow alone, sent at line rate from its first packet (an
/// initial window above its size).
fn alone(lb: &str, seed: u64) -> RunOutput {
    run(&alone_text(lb, seed))
}

/// The spec of [`alone`].
fn alone_text(lb: &str, seed: u64) -> String {
    let text = fig6(lb)
        .replace("seed = 1", &format!("seed = {seed}"))
        .replace(
            "kind = \"tcp\"\n",
            "kind = \"tcp\"\n\n[transport.tcp]\ninit_cwnd = 1000\n",
        );
    let start = text.find("[[traffic]]").expect("a traffic table");
    format!(
        "{}[[traffic]]\nkind = \"scripted\"\nflows = [{{ src = 1, dst = 15, size = \"1400KB\" }}]\n",
        &text[..start]
    )
}

#[test]
fn without_the_reorder_filter_flb_makes_spurious_fast_retransmits() {
    // Alone, the flow loses nothing; its cut-overs move it between a 100 µs and a 300 µs
    // path. With the filter it never moves to a path that overtakes its packets in flight.
    let fast_retransmits = |out: &RunOutput| sum_flows(out, |f| f.fast_retransmits as u64);
    let (mut with, mut without) = (0, 0);
    for seed in 1..=4 {
        let a = alone("scheme = \"flb\"", seed);
        let b = alone("scheme = \"flb\"\nreorder_filter = \"off\"", seed);
        assert_eq!(a.stats.packets_dropped + b.stats.packets_dropped, 0);
        assert!(a.stats.scheme_counters["flb.refused_by_reorder_filter"] > 0);
        assert_eq!(b.stats.scheme_counters["flb.refused_by_reorder_filter"], 0);
        with += fast_retransmits(&a);
        without += fast_retransmits(&b);
    }
    assert_eq!(with, 0);
    assert!(without > 100, "{without}");
}

#[test]
fn losses_under_flb_are_repaired() {
    // Seed 2 puts the 1 MB bursts on the path of the 50 MB flow from their leaf: drop-tail
    // losses, repaired by TCP.
    let out = run(&fig6("scheme = \"flb\"").replace("seed = 1", "seed = 2"));
    assert!(out.stats.packets_dropped > 0);
    assert!(sum_flows(&out, |f| f.fast_retransmits as u64) > 0);
    assert_eq!(out.stats.bytes_delivered, out.stats.bytes_offered);
}

#[test]
fn without_the_cut_over_a_line_rate_burst_stays_on_one_path() {
    // No gap, no congestion: only the cut-over starts new flowlets.
    let with = alone("scheme = \"flb\"", 1);
    let without = alone("scheme = \"flb\"\ncut_over = false", 1);
    assert_eq!(without.flows[0].paths_used, 1);
    assert_eq!(without.stats.scheme_counters["flb.choices_burst"], 0);
    assert!(with.stats.scheme_counters["flb.choices_burst"] > 10);
    assert!(
        with.flows[0].paths_used >= 2,
        "{}",
        with.flows[0].paths_used
    );
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let text = fig6("scheme = \"flb\"");
    let a = run(&text);
    let b = run(&text);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    let other = run(&text.replace("seed = 1", "seed = 2"));
    assert_ne!(a.stats.fingerprint, other.stats.fingerprint);
}

/// Bytes sent over the 150 µs links (those of spine 3, both directions), all packets.
fn slow_path_bytes(out: &RunOutput) -> u64 {
    out.ports
        .iter()
        .filter(|p| p.delay_ps == 150_000_000)
        .map(|p| p.tx_bytes)
        .sum()
}

#[test]
fn screening_only_flowlets_after_a_gap_flb_avoids_the_slow_spine_and_loses_less_than_letflow() {
    // Seeds 1-5, against LetFlow at each of Fig. 6's four flowlet timeouts: FLB sends less over
    // the slow spine, drops less and finishes sooner on average.
    let mean_fct =
        |out: &RunOutput| sum_flows(out, |f| f.fct_ps.expect("finished")) / out.flows.len() as u64;
    let mut flb = (0, 0, 0);
    let mut letflow = [(0, 0, 0); 4];
    for seed in 1..=5 {
        let seeded = |lb: &str| run(&fig6(lb).replace("seed = 1", &format!("seed = {seed}")));
        let out = seeded("scheme = \"flb\"\nreorder_filter = \"after_gap\"");
        flb.0 += out.stats.packets_dropped;
        flb.1 += mean_fct(&out);
        flb.2 += slow_path_bytes(&out);
        for (i, timeout) in ["500us", "250us", "100us", "50us"].iter().enumerate() {
            let out = seeded(&format!(
                "scheme = \"letflow\"\nflowlet_timeout = \"{timeout}\""
            ));
            letflow[i].0 += out.stats.packets_dropped;
            letflow[i].1 += mean_fct(&out);
            letflow[i].2 += slow_path_bytes(&out);
        }
    }
    for l in letflow {
        assert!(flb.0 < l.0, "drops: FLB {flb:?}, LetFlow {l:?}");
        assert!(flb.1 < l.1, "mean FCT: FLB {flb:?}, LetFlow {l:?}");
        assert!(flb.2 < l.2, "slow-spine bytes: FLB {flb:?}, LetFlow {l:?}");
    }
}

#[test]
fn probe_clocked_a_flow_sends_one_packet_per_probe_reply() {
    // The Fig. 6 fabric without its slow spine (every path 100 µs leaf to leaf), the 1.4 MB
    // flow alone with a window that never binds: its packets go out as probe replies come
    // back, one per path of each 100 µs round (four), so it takes packets / 4 rounds (plus
    // the first reply's round trip and the last packet's way, about 300 µs).
    let lb = "scheme = \"flb\"\nmode = \"probe_clocked\"\nprobe_interval = \"100us\"";
    let out = run(&alone_text(lb, 1).replace("\"150us\"", "\"50us\""));
    let flow = &out.flows[0];
    let counters = &out.stats.scheme_counters;
    assert_eq!(counters["flb.clocked_packets"], flow.packets_sent);
    assert!(counters["flb.holds"] > 0);
    assert_eq!(flow.paths_used, 4);
    assert_eq!(out.stats.bytes_delivered, out.stats.bytes_offered);
    let rounds = flow.packets_sent.div_ceil(4);
    let expected_us = rounds as f64 * 100.0;
    let fct_us = flow.fct_ps.expect("finished") as f64 / 1e6;
    assert!(
        (fct_us - expected_us).abs() < 500.0,
        "FCT {fct_us} µs, {rounds} rounds of 100 µs"
    );
}
