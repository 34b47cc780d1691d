//! Coflows end to end: their completion times, and the Varys coordinator (SEBF + MADD) on
//! top of any scheme.

use crate::testing::{
    assert_lossless_and_conserved, drain, flow, leaf_spine, leaf_spine_spec, run_text, spec_error,
    with_lb,
};
use pfcsim_core::lb::LbConfig;
use pfcsim_core::metrics::CoflowRecord;
use pfcsim_core::sim::{CoflowConfig, FabricConfig, RunOutput, Scheduler};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::transport::{ideal_fct, NicConfig};
use pfcsim_core::units::{Rate, Time};

/// `flow` in coflow `c`.
fn member(c: u32, src: u32, dst: u32, size: u64) -> FlowSpec {
    FlowSpec {
        coflow: Some(c),
        ..flow(src, dst, size, Time::ZERO)
    }
}

/// ECMP and DCQCN, with Varys or without.
fn fabric(varys: bool) -> FabricConfig {
    FabricConfig {
        coflow: CoflowConfig {
            scheduler: if varys {
                Scheduler::Varys
            } else {
                Scheduler::None
            },
            ..CoflowConfig::default()
        },
        ..with_lb(LbConfig::default())
    }
}

/// 2 leaves x 2 spines x 4 hosts (hosts 0-3 under leaf 8, 4-7 under leaf 9), 100 Gbps.
fn run(varys: bool, flows: Vec<FlowSpec>) -> RunOutput {
    let out = drain(&leaf_spine(2, 2, 4), fabric(varys), flows, 1);
    assert_lossless_and_conserved(&out);
    out
}

/// The spread of the finish times of a run's flows, relative to the last one.
fn finish_spread(out: &RunOutput) -> f64 {
    let finish: Vec<u64> = out.flows.iter().map(|f| f.finish_ps.unwrap()).collect();
    let (lo, hi) = (*finish.iter().min().unwrap(), *finish.iter().max().unwrap());
    (hi - lo) as f64 / hi as f64
}

fn cct(out: &RunOutput, c: u32) -> u64 {
    let rec: &CoflowRecord = out.coflows.iter().find(|r| r.coflow_id == c).unwrap();
    rec.cct_ps.unwrap()
}

/// MADD: every flow of a coflow gets its remaining bytes over the coflow's bottleneck, so on
/// an idle fabric all its flows finish together, whether the bottleneck is the receiver's
/// downlink (an incast of 1, 2 and 3 MB) or the sender's uplink (the reverse). Without Varys
/// the smaller flows finish first.
#[test]
fn varys_finishes_the_flows_of_a_coflow_together() {
    let incast = || {
        vec![
            member(0, 4, 0, 1_000_000),
            member(0, 5, 0, 2_000_000),
            member(0, 6, 0, 3_000_000),
        ]
    };
    let broadcast = || {
        vec![
            member(0, 0, 4, 1_000_000),
            member(0, 0, 5, 2_000_000),
            member(0, 0, 6, 3_000_000),
        ]
    };
    for (name, flows) in [("incast", incast as fn() -> _), ("broadcast", broadcast)] {
        let with = run(true, flows());
        let spread = finish_spread(&with);
        assert!(spread < 0.01, "{name}: finishes spread by {spread}");
        // The 6 MB through one 100 Gbps port take about 6e6 x 1048/1000 x 8 / 1e11 = 503 us.
        let c = cct(&with, 0) as f64 / 1e6;
        assert!((503.0..530.0).contains(&c), "{name}: CCT {c} us");
        let without = run(false, flows());
        assert!(finish_spread(&without) > 0.2, "{name}: fair sharing");
    }
}

/// SEBF: of two coflows at one receiver, the one with the smaller bottleneck (A: one 2 MB
/// flow) goes first although it has the larger id, and finishes as if alone; B (four flows
/// of 600 KB, 2.4 MB in all) follows. Without Varys, fair sharing finishes B's small flows
/// first and A last.
#[test]
fn varys_serves_the_smaller_bottleneck_coflow_first() {
    let flows = || {
        vec![
            member(1, 4, 0, 2_000_000),
            member(0, 5, 0, 600_000),
            member(0, 6, 0, 600_000),
            member(0, 7, 0, 600_000),
            member(0, 1, 0, 600_000),
        ]
    };
    let with = run(true, flows());
    let (a, b) = (cct(&with, 1), cct(&with, 0));
    assert!(a < b, "A {a} B {b}");
    let link = (Rate::gbps(100), Time::from_us(1));
    let alone = ideal_fct(2_000_000, &[link; 4], &NicConfig::default().wire()).ps();
    assert!(
        (a as f64) < alone as f64 * 1.03,
        "A as if alone: {a} vs {alone}"
    );
    // Then B moves its 2.4 MB (plus headers) at the receiver's line rate.
    let b_alone = 2_400_000.0 * 1.048 * 8.0 / 1e11 * 1e12;
    assert!(
        (b as f64) > (a as f64 + b_alone) * 0.97,
        "B after A: {b} vs {a} + {b_alone}"
    );
    let without = run(false, flows());
    assert!(cct(&without, 1) > cct(&without, 0), "fair sharing: A last");
}

/// Work conservation: B (1 MB 3->0 and 3 MB 4->1) has the larger bottleneck, and A (2 MB
/// 2->0) fills host 0's downlink, so MADD gives B nothing; with work conservation B's flow to
/// host 1, whose ports are free, moves during A and B ends at about 3 MB of link time,
/// without it B starts after A and ends at about 5 MB of link time. (All under one leaf, the
/// non-blocking fabric Varys assumes: across 2:1 leaves, two line-rate flows could share an
/// uplink.)
#[test]
fn varys_hands_leftover_capacity_to_skipped_coflows() {
    let flows = || {
        vec![
            member(0, 2, 0, 2_000_000),
            member(1, 3, 0, 1_000_000),
            member(1, 4, 1, 3_000_000),
        ]
    };
    let run_with = |work_conserving| {
        let cfg = FabricConfig {
            coflow: CoflowConfig {
                scheduler: Scheduler::Varys,
                work_conserving,
            },
            ..with_lb(LbConfig::default())
        };
        let out = drain(&leaf_spine(2, 2, 6), cfg, flows(), 1);
        assert_lossless_and_conserved(&out);
        (cct(&out, 0), cct(&out, 1))
    };
    let mb = 1e6 * 1.048 * 8.0 / 1e11 * 1e12; // ps of link time per MB
    let (a, b) = run_with(true);
    assert!(
        (a as f64) < 2.1 * mb && (b as f64) < 3.2 * mb,
        "A {a} B {b}"
    );
    let (a, b) = run_with(false);
    assert!(
        (a as f64) < 2.1 * mb && (b as f64) > 4.8 * mb,
        "A {a} B {b}"
    );
}

/// A coflow's CCT is its last flow's finish minus its first flow's start: a 1 MB flow at 0
/// and a 10 KB flow at 10 us on disjoint paths (pinned to different spines, line rate) finish
/// at their ideal FCTs, so the CCT is the 1 MB flow's ideal FCT. The record counts the
/// flows, bytes and stalls; the run's ACCT is that one CCT. Scripted flows name their
/// coflow, and a second entry's coflows are numbered after the first's.
#[test]
fn the_cct_is_the_last_finish_minus_the_arrival() {
    let text = leaf_spine_spec(
        1,
        (2, 2, 2),
        "",
        r#"
        [[traffic]]
        kind = "scripted"
        flows = [
            { src = 0, dst = 2, size = "1MB", path = [0], coflow = 0 },
            { src = 1, dst = 3, size = "10KB", start = "10us", path = [1], coflow = 0 },
            { src = 2, dst = 0, size = "1KB", start = "5ms" },
        ]
        [[traffic]]
        kind = "scripted"
        flows = [{ src = 3, dst = 1, size = "3KB", start = "6ms", coflow = 0 }]
        "#,
    );
    let out = run_text(&text, "cct.toml");
    assert_lossless_and_conserved(&out);
    let coflows: Vec<Option<u32>> = out.flows.iter().map(|f| f.coflow).collect();
    assert_eq!(coflows, vec![Some(0), Some(0), None, Some(1)]);
    let link = (Rate::gbps(100), Time::from_us(1));
    let ideal = ideal_fct(1_000_000, &[link; 4], &NicConfig::default().wire()).ps();
    let c = &out.coflows[0];
    assert_eq!(
        (
            c.coflow_id,
            c.flows,
            c.finished_flows,
            c.bytes,
            c.arrival_ps
        ),
        (0, 2, 2, 1_010_000, 0)
    );
    assert_eq!(c.finish_ps, out.flows[0].finish_ps);
    assert!(
        c.cct_ps.unwrap().abs_diff(ideal) <= 1_000,
        "{c:?} vs {ideal}"
    );
    assert_eq!(c.stalled_flows, 0);
    let stats = out.stats.coflows.as_ref().unwrap();
    assert_eq!((stats.coflows_total, stats.coflows_finished), (2, 2));
    let second = out.coflows[1].cct_ps.unwrap() as f64 / 1e6;
    let acct = (c.cct_ps.unwrap() as f64 / 1e6 + second) / 2.0;
    assert!(
        (stats.acct_us - acct).abs() < 1e-9,
        "{} vs {acct}",
        stats.acct_us
    );
    assert_eq!(stats.stalled_flow_ratio, 0.0);
}

/// Generated coflows under DCQCN, with and without Varys, across the fabric of the CLB
/// paper's small-scale test (2 leaves x 2 spines x 3 hosts, 40 Gbps, 6 MB buffers): lossless,
/// every byte delivered once, every coflow complete, the same fingerprint on a rerun; the
/// stalled flows counted per coflow sum to the stalled flows in coflows.
#[test]
fn coflow_runs_are_lossless_conserved_and_deterministic() {
    for coflow in ["", "[coflow]\nscheduler = \"varys\"\n"] {
        let text = format!(
            r#"
            [topology]
            kind = "leaf_spine"
            leaves = 2
            spines = 2
            hosts_per_leaf = 3
            host_link = {{ rate = "40Gbps", delay = "5us" }}
            fabric_link = {{ rate = "40Gbps", delay = "5us" }}
            [switch]
            buffer = "6MB"
            {coflow}
            [[traffic]]
            kind = "coflow"
            coflows = 12
            flows_per_coflow = 6
            size = {{ kind = "uniform", min = "10KB", max = "100KB" }}
            arrival = "together"
            [[traffic]]
            kind = "coflow"
            lambda = "0.05/us"
            coflows = 10
            flows_per_coflow = [2, 5]
            size = {{ kind = "total", bytes = "400KB" }}
            arrival = "poisson_flow"
            cross_tor_only = true
            "#
        );
        let out = run_text(&text, "coflows.toml");
        assert_lossless_and_conserved(&out);
        assert_eq!(out.coflows.len(), 22, "{coflow}");
        assert!(out.coflows.iter().all(|c| c.cct_ps.is_some()));
        let stalled = out.flows.iter().filter(|f| f.stalled).count() as u32;
        assert_eq!(
            out.coflows.iter().map(|c| c.stalled_flows).sum::<u32>(),
            stalled
        );
        assert_eq!(
            out.stats.fingerprint,
            run_text(&text, "coflows.toml").stats.fingerprint
        );
    }
}

/// Varys needs coflows to schedule: a spec asking for it without coflow traffic is refused
/// before it runs.
#[test]
fn varys_without_coflows_is_refused() {
    let text = leaf_spine_spec(
        1,
        (2, 2, 2),
        "",
        "[coflow]\nscheduler = \"varys\"\n[[traffic]]\nkind = \"scripted\"\nflows = [{ src = 0, dst = 2, size = \"1KB\" }]\n",
    );
    let spec = pfcsim_core::spec::Spec::from_toml(&text, "v.toml").unwrap();
    let e = pfcsim_core::spec::Scenario::prepare(spec, std::path::Path::new("."))
        .err()
        .unwrap();
    assert_eq!(
        e.message,
        "coflow.scheduler: \"varys\" schedules coflows, but no [[traffic]] entry makes any; add one with kind = \"coflow\", or remove [coflow]"
    );
    assert!(spec_error(&text.replace("varys", "sebf"), "v.toml")
        .contains("coflow.scheduler: unknown variant `sebf`, expected `none` or `varys`"));
}

/// Varys paces RoCE senders: coflows sent over TCP are refused with it, naming the entry.
#[test]
fn varys_over_tcp_coflows_is_refused() {
    let text = leaf_spine_spec(
        1,
        (2, 2, 2),
        "[switch.pfc]\nenabled = false\n",
        "[coflow]\nscheduler = \"varys\"\n[[traffic]]\nkind = \"scripted\"\ntransport = \"tcp\"\nflows = [{ src = 0, dst = 2, size = \"1KB\", coflow = 0 }]\n",
    );
    let spec = pfcsim_core::spec::Spec::from_toml(&text, "v.toml").unwrap();
    let e = pfcsim_core::spec::Scenario::prepare(spec, std::path::Path::new("."))
        .err()
        .unwrap();
    assert_eq!(
        e.message,
        "coflow.scheduler: Varys paces RoCE senders only, but traffic[0] sends its coflows over TCP; give that entry transport = \"roce\", or remove [coflow]"
    );
}
