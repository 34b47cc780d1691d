//! Faults: each test fails if the fault it names is not applied, or if the transport does not
//! recover from the losses it causes.

use crate::testing::{self, assert_recovered, node_sum, poisson, retransmitted};
use pfcsim_core::sim::RunOutput;

/// 4 leaves x 4 spines x 4 hosts (hosts 0-15, leaves 16-19, spines 20-23), 100 Gbps and
/// 1 us links, PFC on, line-rate senders, drained to the end; then `extra`.
fn run(extra: &str) -> RunOutput {
    let text = testing::leaf_spine_spec(3, (4, 4, 4), "stop_when_done = false", extra);
    testing::run_text(&text, "faults.toml")
}

/// The tiny spec's web-search traffic at 50% load for 300 us.
fn poisson_traffic() -> String {
    poisson(0.5, "300us")
}

#[test]
fn silent_drops_at_a_spine_are_counted_and_recovered_from() {
    let healthy = run(&poisson_traffic());
    assert_eq!(healthy.stats.packets_dropped, 0);
    assert_eq!(retransmitted(&healthy), 0);

    let faulty = run(&format!(
        "{}\n[[faults]]\nkind = \"silent_drop\"\nswitch = \"spine:1\"\nprobability = 0.0035\n",
        poisson_traffic()
    ));
    let s = &faulty.stats;
    assert!(s.drops_silent > 0, "the spine drops packets");
    assert_eq!(s.packets_dropped, s.drops_silent, "the only losses");
    assert!(
        retransmitted(&faulty) > 0,
        "go-back-N resends what was lost"
    );
    assert_recovered(&faulty);
    // The drops are counted where they happen: ingress ports of spine 1 (node 21).
    let at_spine = node_sum(&faulty, 21, |p| p.fault_drops);
    assert_eq!(at_spine, s.drops_silent);
}

#[test]
fn silent_drops_only_from_chosen_neighbours() {
    let longer = poisson(0.5, "1ms");
    let out = run(&format!(
        "{longer}\n[[faults]]\nkind = \"silent_drop\"\nswitch = \"spine:1\"\nprobability = 0.05\nfrom = [\"leaf:2\"]\n"
    ));
    assert!(out.stats.drops_silent > 0);
    // Port k of a spine faces leaf k: only the port facing leaf 2 drops.
    for p in out.ports.iter().filter(|p| p.node == 21) {
        assert_eq!(p.fault_drops > 0, p.peer == 18, "port to node {}", p.peer);
    }
    assert_recovered(&out);
}

/// Two scripted flows leave leaf 0 for leaf 3: host 0 -> 12 (black-holed) and 1 -> 13.
const TWO_FLOWS: &str = r#"
    [[traffic]]
    kind = "scripted"
    flows = [
        { src = 0, dst = 12, size = "100KB", start = "0us" },
        { src = 1, dst = 13, size = "100KB", start = "0us" },
    ]
"#;

#[test]
fn a_black_hole_drops_only_its_pairs_and_the_flow_still_completes() {
    let out = run(&format!(
        "{TWO_FLOWS}\n[[faults]]\nkind = \"black_hole\"\nswitch = \"leaf:0\"\npairs = [[\"host:0\", \"host:12\"]]\nfraction = 0.5\n"
    ));
    let s = &out.stats;
    assert!(s.drops_black_hole > 0);
    assert_eq!(s.packets_dropped, s.drops_black_hole);
    let (hit, spared) = (&out.flows[0], &out.flows[1]);
    assert_eq!((hit.src, hit.dst), (0, 12));
    assert!(hit.retransmitted_bytes > 0 && hit.nacks_received + hit.timeouts > 0);
    assert_eq!(spared.retransmitted_bytes, 0, "other pairs pass");
    assert!(hit.fct_ps.unwrap() > 2 * spared.fct_ps.unwrap());
    assert_recovered(&out);
}

#[test]
fn a_link_down_from_the_start_carries_nothing_and_costs_nothing() {
    // Take down the uplink of leaf 0 (node 16) that carries the most without the fault.
    let healthy = run(&poisson_traffic());
    let busiest = healthy
        .ports
        .iter()
        .filter(|p| p.node == 16 && p.peer >= 20)
        .max_by_key(|p| p.tx_packets)
        .unwrap();
    assert!(busiest.tx_packets > 0);
    let spine = busiest.peer - 20;
    let out = run(&format!(
        "{}\n[[faults]]\nkind = \"link_down\"\nlink = [\"leaf:0\", \"spine:{spine}\"]\n",
        poisson_traffic()
    ));
    let link: Vec<_> = out
        .ports
        .iter()
        .filter(|p| {
            (p.node, p.peer) == (16, busiest.peer) || (p.node, p.peer) == (busiest.peer, 16)
        })
        .collect();
    assert_eq!(link.len(), 2);
    assert!(link.iter().all(|p| p.tx_packets == 0), "{link:?}");
    assert_eq!(out.stats.packets_dropped, 0);
    assert_recovered(&out);
}

#[test]
fn a_link_going_down_under_load_loses_packets_that_are_recovered() {
    let heavy = poisson(0.8, "300us");
    let out = run(&format!(
        "{heavy}\n[[faults]]\nkind = \"link_down\"\nlink = [\"leaf:0\", \"spine:0\"]\nat = \"100us\"\nreconverge = \"20us\"\n"
    ));
    let s = &out.stats;
    assert!(
        s.drops_link_down + s.drops_no_route > 0,
        "packets on or bound for the link are lost: {s:?}"
    );
    assert_eq!(
        s.packets_dropped,
        s.drops_link_down + s.drops_no_route,
        "the only losses"
    );
    assert!(retransmitted(&out) > 0);
    assert_recovered(&out);
    let tx = |a: u32, b: u32| {
        out.ports
            .iter()
            .find(|p| (p.node, p.peer) == (a, b))
            .unwrap()
            .tx_bytes
    };
    // Leaf 0's uplink to spine 0 works 100 us of a run whose arrivals last 300 us.
    assert!(
        tx(16, 20) < tx(16, 21) / 2,
        "{} vs {}",
        tx(16, 20),
        tx(16, 21)
    );
}

/// One flow of `size` from host 0 to host 12, pinned over spine 0 (equal-cost next hop 0 at
/// the source leaf); with `uplink_rate`, the link from leaf 0 to spine 0 runs at that rate
/// from the start (a `link_rate` fault).
fn pinned_flow(size: &str, uplink_rate: Option<&str>) -> RunOutput {
    let mut extra = format!(
        "[[traffic]]\nkind = \"scripted\"\n\
         flows = [{{ src = 0, dst = 12, size = \"{size}\", start = \"0us\", path = [0] }}]\n"
    );
    if let Some(rate) = uplink_rate {
        extra += &format!(
            "[[faults]]\nkind = \"link_rate\"\nlink = [\"leaf:0\", \"spine:0\"]\nrate = \"{rate}\"\n"
        );
    }
    run(&extra)
}

#[test]
fn a_degraded_link_serializes_at_its_new_rate() {
    let fast = pinned_flow("1MB", None).flows[0].fct_ps.unwrap() as f64;
    let slow = pinned_flow("1MB", Some("10Gbps")).flows[0].fct_ps.unwrap() as f64;
    // 1 MB of payload (1,000 packets of 1,000 B plus headers) at 10 Gbps: about 0.85 ms.
    let wire_bits = 1_000.0 * (1_000.0 + 64.0) * 8.0;
    let at_10g = wire_bits / 10e9 * 1e12;
    assert!((slow - at_10g).abs() < 0.05 * at_10g, "{slow} vs {at_10g}");
    assert!(slow > 8.0 * fast, "{slow} vs {fast}");
}

/// A link slowed to 1 Mbps serializes a packet in 8.4 ms, so each packet queued behind another
/// arrives more than the 4.29 ms after it that a packet on the wire can keep
/// (`port::FarArrivals`): each still arrives when its serialization ends. (The sender's
/// timeouts, shorter than that, send copies too; they are discarded at the receiver.)
#[test]
fn a_link_slowed_to_a_crawl_delivers_each_packet_when_its_serialization_ends() {
    let out = pinned_flow("6KB", Some("1Mbps"));
    // Six packets of 1,000 B plus 48 B of headers, back to back at 1 Mbps: 50.3 ms (each from
    // the second on is put on the wire while the one ahead still propagates, 8.4 ms behind
    // it); the rest of the path adds microseconds.
    let fct = out.flows[0].fct_ps.unwrap() as f64;
    let at_1m = 6.0 * (1_000.0 + 48.0) * 8.0 / 1e6 * 1e12;
    assert!(fct > at_1m && fct < at_1m + 20e6, "{fct} vs {at_1m}");
    assert!(out.flows[0].timeouts > 0);
    testing::assert_lossless_and_conserved(&out);
}

#[test]
fn same_faults_same_seed_same_fingerprint() {
    let spec = format!(
        "{}\n[[faults]]\nkind = \"silent_drop\"\nswitch = \"spine:1\"\nprobability = 0.01\n",
        poisson_traffic()
    );
    assert_eq!(run(&spec).stats.fingerprint, run(&spec).stats.fingerprint);
}
