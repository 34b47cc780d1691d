//! Golden (snapshot) tests: the fingerprint, run-wide counters and FCT/slowdown summary of
//! canonical scenarios, recorded in `snapshots/` beside this file, so that any change of
//! behaviour shows in review as a changed snapshot.
//!
//! * `tiny_ecmp`: the canonical tiny spec (`tests/data/tiny.toml`) as it is (ECMP);
//! * `conweave_congested`: a small leaf-spine with a slow uplink and cross-leaf load under
//!   ConWeave (reorder queues in use, RTT requests and replies routed over the fabric);
//! * `rlb_drill_recirculation`: RLB around DRILL with `[switch.loopback]` and piggybacked
//!   RTTs, pinned flows on a warned path with a slow alternative, so that RLB warns and
//!   recirculates;
//! * `tiny_scheme_<name>`: the tiny spec under every scheme of `lb::registry()` with its
//!   defaults (and a loopback where the scheme needs one);
//! * `tiny_cc_<kind>`: the tiny spec under the RoCE congestion controls other than the
//!   default DCQCN (`[cc] kind = "timely"`, `"hpcc"`) with their defaults.
//!
//! Only deterministic numbers are recorded (never wall time or memory).
//!
//! Reviewing and updating: a mismatch fails the test; outside CI, insta writes the new
//! version next to the old one (`*.snap.new`). Review with `cargo insta review` (from
//! `cargo install cargo-insta`) or, without cargo-insta, read the diff the failing test
//! prints and accept every new version with
//! `INSTA_UPDATE=always cargo test --release -p pfcsim-core --test integration golden`,
//! then review `git diff` of the snapshots and commit them. Under `CI=true` (as `.ci/run`
//! runs) insta writes nothing and a mismatch or a missing snapshot fails: CI never accepts
//! a snapshot by itself.

use crate::rlb::{self, PINNED, SLOW_SPINE};
use crate::testing::{self, poisson, scenario, tiny, to_text};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, UInt64Type};
use arrow_schema::DataType;
use pfcsim_core::lb::registry;
use pfcsim_core::metrics::table::Table;
use pfcsim_core::metrics::{FlowRecord, PortRecord, RunStats};
use pfcsim_core::output::summary::SummaryRow;
use pfcsim_core::run::{run_scenario, summarize};
use pfcsim_core::sim::RunOutput;
use std::fmt::Write;
use std::ops::ControlFlow;

/// A number read in a port record.
type PortField = fn(&PortRecord) -> u64;
/// A number read in a flow record.
type FlowField = fn(&FlowRecord) -> u64;

/// Writes `name = value` for each field of `record`.
macro_rules! fields {
    ($text:ident, $record:expr; $($field:ident),* $(,)?) => {
        $( writeln!($text, "{} = {}", stringify!($field), $record.$field).unwrap(); )*
    };
}

/// Runs the spec `text` and returns its output with its golden text: the fingerprint (hex),
/// every deterministic run-wide counter (the scheme's own included), sums and maxima of the port and flow records, and
/// the summary rows.
fn golden(text: &str, name: &str) -> (RunOutput, String) {
    let sc = scenario(text, name);
    let spec = sc.spec.clone();
    let out = run_scenario(sc, &mut |_| ControlFlow::Continue(())).unwrap();
    let mut g = String::new();
    let s: &RunStats = &out.stats;
    writeln!(g, "fingerprint = {:016x}", s.fingerprint).unwrap();
    fields!(g, s;
        events, end_ps, flows_total, flows_finished, measure_from_ps,
        bytes_offered, bytes_delivered, payload_sent, payload_dropped, payload_discarded,
        data_packets_delivered, data_packets_received,
        packets_dropped, drops_buffer, drops_silent, drops_black_hole, drops_link_down,
        drops_no_route,
        ooo_arrivals, ooo_ratio, ood_p50, ood_p99, ood_max,
        pfc_pause_rate, pfc_pauses_per_port_s,
        resequenced_packets, reseq_flushed_packets,
        alerts,
    );
    for (counter, value) in &s.scheme_counters {
        writeln!(g, "{counter} = {value}").unwrap();
    }
    let port_sums: [(&str, PortField); 7] = [
        ("pfc_pauses_sent", |p| p.pfc_pauses_sent),
        ("pfc_resumes_sent", |p| p.pfc_resumes_sent),
        ("paused_time_ps", |p| p.paused_time_ps),
        ("ecn_marks", |p| p.ecn_marks),
        ("lb_messages_sent", |p| p.lb_messages_sent),
        ("tx_packets", |p| p.tx_packets),
        ("tx_bytes", |p| p.tx_bytes),
    ];
    for (name, f) in port_sums {
        let sum: u64 = out.ports.iter().map(f).sum();
        writeln!(g, "ports.{name} = {sum}").unwrap();
    }
    let reorder_max = out.ports.iter().map(|p| p.reorder_queues_max).max();
    writeln!(g, "ports.reorder_queues_max = {}", reorder_max.unwrap_or(0)).unwrap();
    let reorder_log = out.reorder_log.as_ref().map_or(0, |l| l.len());
    writeln!(g, "reorder_log.len = {reorder_log}").unwrap();
    let flow_sums: [(&str, FlowField); 8] = [
        ("packets_sent", |f| f.packets_sent),
        ("retransmitted_bytes", |f| f.retransmitted_bytes),
        ("nacks_received", |f| f.nacks_received.into()),
        ("timeouts", |f| f.timeouts.into()),
        ("cnps_received", |f| f.cnps_received.into()),
        ("path_changes", |f| f.path_changes.into()),
        ("paths_used", |f| f.paths_used.into()),
        ("stalled", |f| f.stalled.into()),
    ];
    for (name, f) in flow_sums {
        writeln!(g, "flows.{name} = {}", testing::sum_flows(&out, f)).unwrap();
    }
    writeln!(g, "held_packets = {}", out.held_packets).unwrap();
    writeln!(g, "live_packets = {}", out.live_packets).unwrap();
    writeln!(g, "buffered_bytes = {}", out.buffered_bytes).unwrap();
    for row in summarize(&spec, &out).rows {
        summary_row(&mut g, &row);
    }
    (out, g)
}

/// One summary row under its bucket, each column of `summary.parquet` as the row's table
/// definition gives it (FCTs in microseconds). A group without finished flows has no FCT or
/// slowdown statistics (the Float64 columns: they would be NaN).
fn summary_row(g: &mut String, r: &SummaryRow) {
    writeln!(g, "[summary.{}]", r.bucket).unwrap();
    let arrays = SummaryRow::arrays(std::slice::from_ref(r));
    for (field, array) in SummaryRow::schema().fields().iter().zip(&arrays) {
        let value = match field.data_type() {
            DataType::Utf8 => continue, // the bucket, in the heading
            DataType::UInt64 => array.as_primitive::<UInt64Type>().value(0).to_string(),
            DataType::Float64 if r.finished > 0 => {
                array.as_primitive::<Float64Type>().value(0).to_string()
            }
            DataType::Float64 => continue,
            other => panic!("summary column {} of type {other}", field.name()),
        };
        writeln!(g, "{} = {value}", field.name()).unwrap();
    }
}

#[test]
fn golden_tiny_ecmp() {
    let (out, text) = golden(testing::TINY, "tiny.toml");
    assert_eq!(out.stats.flows_finished, out.stats.flows_total);
    insta::assert_snapshot!("tiny_ecmp", text);
}

#[test]
fn golden_conweave_congested() {
    // 2 leaves x 4 spines x 4 hosts (hosts 0-7, leaves 8-9, spines 10-13), DCQCN, leaf 0's
    // uplink to spine 0 at 10 Gbps; four 1 MB flows from leaf 0 to leaf 1 beside web-search
    // traffic at 50% load.
    let mut spec = tiny();
    spec.remove("traffic");
    spec.insert("seed".into(), 11i64.into());
    let rest = format!(
        r#"{}
        [[topology.overrides]]
        leaf = 0
        spine = 0
        rate = "10Gbps"
        [[traffic]]
        kind = "scripted"
        flows = [
            {{ src = 0, dst = 4, size = "1MB", start = "0us" }},
            {{ src = 1, dst = 5, size = "1MB", start = "2us" }},
            {{ src = 2, dst = 6, size = "1MB", start = "4us" }},
            {{ src = 3, dst = 7, size = "1MB", start = "6us" }},
        ]
        [lb]
        scheme = "conweave"
        "#,
        poisson(0.5, "200us")
    );
    let topology = spec["topology"].as_table_mut().unwrap();
    topology.insert("spines".into(), 4i64.into());
    topology.insert("hosts_per_leaf".into(), 4i64.into());
    let (out, text) = golden(&format!("{}{rest}", to_text(&spec)), "conweave.toml");
    assert_eq!(out.stats.flows_finished, out.stats.flows_total);
    assert!(out.ports.iter().any(|p| p.reorder_queues_max > 0), "held");
    assert!(out.ports.iter().any(|p| p.lb_messages_sent > 0), "messages");
    insta::assert_snapshot!("conweave_congested", text);
}

#[test]
fn golden_rlb_drill_recirculation() {
    // The pinned flows of `rlb` with spine 11 far slower: RLB warns and recirculates.
    let lb = "scheme = \"rlb\"\nrecirculation = true\nrtt_measurement = \"piggyback\"\n\
              [lb.inner]\nscheme = \"drill\"";
    let text = rlb::spec(lb, &format!("{SLOW_SPINE}{PINNED}"));
    let (out, text) = golden(&text, "rlb.toml");
    let s = &out.stats;
    assert_eq!(s.flows_finished, s.flows_total);
    assert!(
        s.counter("rlb.cnm_warnings") > 0 && s.counter("rlb.recirculations") > 0,
        "{s:?}"
    );
    insta::assert_snapshot!("rlb_drill_recirculation", text);
}

#[test]
fn golden_tiny_every_cc() {
    for kind in ["timely", "hpcc"] {
        let spec = format!("{}\n[cc]\nkind = \"{kind}\"\n", testing::TINY);
        let (out, text) = golden(&spec, &format!("{kind}.toml"));
        assert_eq!(out.stats.flows_finished, out.stats.flows_total, "{kind}");
        insta::assert_snapshot!(format!("tiny_cc_{kind}"), text);
    }
}

#[test]
fn golden_tiny_every_scheme() {
    let (_, plain) = golden(testing::TINY, "tiny.toml");
    for scheme in registry() {
        let (name, lb) = (scheme.name, scheme.defaults);
        let mut spec = tiny();
        spec.insert("lb".into(), toml::Value::try_from(&lb).unwrap());
        if lb.capabilities().loopback {
            let loopback: toml::Table = toml::from_str(rlb::LOOPBACK).unwrap();
            spec.insert("switch".into(), loopback["switch"].clone());
        }
        let (out, text) = golden(&to_text(&spec), &format!("{name}.toml"));
        assert_eq!(out.stats.flows_finished, out.stats.flows_total, "{name}");
        if name == "ecmp" {
            assert_eq!(text, plain, "ECMP is the default");
        }
        insta::assert_snapshot!(format!("tiny_scheme_{name}"), text);
    }
}

/// The tiny spec under each RoCE transport other than the default (go-back-N, `tiny_ecmp`),
/// at 80% load: IRN with PFC off and a buffer small enough to drop, IRN with PFC on, and IRN
/// under HPCC with PFC off.
#[test]
fn golden_tiny_every_transport() {
    let cases = [
        (
            "irn_lossy",
            "[nic]\nrecovery = \"irn\"\n[switch]\nbuffer = \"200KB\"\n[switch.pfc]\nenabled = false\n",
        ),
        ("irn_pfc", "[nic]\nrecovery = \"irn\"\n"),
        (
            "irn_hpcc",
            "[nic]\nrecovery = \"irn\"\n[cc]\nkind = \"hpcc\"\n[switch.pfc]\nenabled = false\n",
        ),
    ];
    for (name, tables) in cases {
        let mut spec = tiny();
        spec["traffic"][0]
            .as_table_mut()
            .expect("the tiny spec's traffic is a table")
            .insert("load".into(), 0.8.into());
        spec.extend(tables.parse::<toml::Table>().unwrap());
        let (out, text) = golden(&to_text(&spec), &format!("{name}.toml"));
        let s = &out.stats;
        assert_eq!(s.flows_finished, s.flows_total, "{name}");
        assert!(out.flows.iter().all(|f| f.transport == "irn"), "{name}");
        if name == "irn_lossy" {
            assert!(s.drops_buffer > 0, "the small buffer drops");
        }
        insta::assert_snapshot!(format!("tiny_transport_{name}"), text);
    }
}
