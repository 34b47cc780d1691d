//! PLB end to end on its paper's motivation fabric (`experiments/plb/motivation/`, made by
//! `make_settings.py`): f1 from S1 to R1 beside background flows pinned on Path1 and bursts
//! that pause Path2. Each test names the mechanism it would catch removed
//! (`docs/schemes/plb.md`, `docs/results/plb/fig2-5.md`).

use crate::testing::{self, assert_lossless_and_conserved};
use pfcsim_core::metrics::FlowRecord;
use pfcsim_core::sim::RunOutput;

const FIG2: &str = include_str!("../../../../experiments/plb/motivation/fig2.toml");

/// Runs `spec` with `[lb]` replaced by `lb` (inline-table body) and f1 pinned to `pin`.
fn run(spec: &str, lb: &str, pin: Option<u32>) -> RunOutput {
    let mut table: toml::Table = spec.parse().expect("the motivation spec parses");
    table.insert(
        "lb".into(),
        toml::Value::Table(lb.parse().expect("an [lb] body")),
    );
    if let Some(spine) = pin {
        let f1 = &mut table["traffic"][0]["flows"][0];
        f1.as_table_mut().unwrap().insert(
            "path".into(),
            toml::Value::Array(vec![(spine as i64).into()]),
        );
    }
    testing::run_text(&testing::to_text(&table), "plb.toml")
}

/// f1: the only flow of the first `[[traffic]]` entry.
fn f1(out: &RunOutput) -> &FlowRecord {
    out.flows.iter().find(|f| f.generator == 0).expect("f1")
}

fn f1_fct_us(out: &RunOutput) -> f64 {
    f1(out).fct_ps.expect("f1 finished") as f64 / 1e6
}

/// On the Fig. 2 fabric, PLB takes f1 off Path2 when the bursts pause it: switches past the
/// source leaf send KICKs, the source leaf moves the flow, and f1 finishes well before it does
/// under DRILL (which keeps spraying onto the paused path) and CONGA. Fails if KICKs, the
/// classes or Algorithm 2 are removed (`kick = "never"` sends no KICK), and if PLB stops
/// beating either baseline.
#[test]
fn plb_moves_f1_off_the_paused_path_of_fig2() {
    let plb = run(FIG2, r#"scheme = "plb""#, None);
    assert_lossless_and_conserved(&plb);
    assert!(
        plb.stats.counter("plb.kick_messages") >= 1,
        "{:?}",
        plb.stats.scheme_counters
    );
    assert!(plb.stats.counter("plb.path_changes") >= 1);
    let never = run(FIG2, "scheme = \"plb\"\nkick = \"never\"", None);
    assert_eq!(never.stats.counter("plb.kick_messages"), 0);
    let drill = run(FIG2, r#"scheme = "drill""#, None);
    let conga = run(FIG2, r#"scheme = "conga""#, None);
    let (p, d, c) = (f1_fct_us(&plb), f1_fct_us(&drill), f1_fct_us(&conga));
    assert!(p < 0.8 * d, "PLB {p:.0} us against DRILL {d:.0} us");
    assert!(p < 0.8 * c, "PLB {p:.0} us against CONGA {c:.0} us");
    // DRILL's f1 waits behind the pauses; PLB's does not.
    assert!(f1(&drill).pfc_wait_total_ps > 10 * f1(&plb).pfc_wait_total_ps.max(1_000_000));
}

/// The scripted pin reproduces the paper's "ideal": f1 via C1 avoids every pause and beats
/// DRILL (the paper: by 49%).
#[test]
fn the_ideal_of_fig2_avoids_the_pauses() {
    let ideal = run(FIG2, r#"scheme = "drill""#, Some(0));
    let drill = run(FIG2, r#"scheme = "drill""#, None);
    assert_eq!(f1(&ideal).pfc_wait_total_ps, 0);
    assert_eq!(f1(&ideal).paths_used, 1);
    assert!(f1_fct_us(&ideal) < 0.8 * f1_fct_us(&drill));
}

/// Same seed, same run: PLB's samples, kicks and choices are deterministic.
#[test]
fn plb_runs_are_deterministic() {
    let a = run(FIG2, r#"scheme = "plb""#, None);
    let b = run(FIG2, r#"scheme = "plb""#, None);
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
    assert_eq!(a.stats.scheme_counters, b.stats.scheme_counters);
}

/// Bad PLB keys are refused before any simulation, naming the key and the range.
#[test]
fn bad_plb_keys_are_refused() {
    for (body, expected) in [
        (
            "u_full = 0.0",
            "lb.u_full: 0 is out of range; use 0 < u_full <= 4",
        ),
        ("alpha = 1.5", "lb.alpha: 1.5 is out of range"),
        ("q_bits = 8", "lb.q_bits: 8 is out of range; use 1..=7"),
        ("flow_idle = \"0s\"", "lb.flow_idle"),
        ("kick = \"sometimes\"", "kick"),
        ("rtt_from = \"host\"", "rtt_from"),
    ] {
        let mut table: toml::Table = FIG2.parse().unwrap();
        let lb = format!("scheme = \"plb\"\n{body}");
        table.insert("lb".into(), toml::Value::Table(lb.parse().unwrap()));
        let e = testing::spec_error(&testing::to_text(&table), "plb.toml");
        assert!(e.contains(expected), "{body}: {e}");
    }
}

/// Algorithm 1 on a fabric where the budget and the pauses are known in advance. Two leaves,
/// two spines, 40 Gbps links of 1 us, but the links of spine 0 are `slow` long. f1 (4 MB from
/// host 0 under leaf 0 to host 4 under leaf 1) is pinned via spine 1. From 400 us an incast
/// of 3 x 100 KB to host 5 (one flow from host 1 pinned via spine 1, two from hosts 6 and 7
/// under leaf 1) makes leaf 1 pause spine 1 (static PFC threshold 20 KB); its 300 KB drain
/// through host 5's link in 60 us, so no pause outlasts about 60 us after 400 us, and each
/// lasts a few us.
///
/// f1's budget is the RTT gap to spine 0's path, which carries no flow and keeps the base RTT
/// `4 x slow`, against f1's own sample: at most `4 x 1 + 2 x (slow + 1)` us (the echo may come
/// back over either spine). With `slow` = 100 us the budget is at least 196 us, above any
/// wait the incast can cause: packets wait (`waits`) and no KICK is sent; `kick = "on_pause"`
/// kicks on the same run. With `slow` = 1 us the paths are equal, the budget is 0, and the
/// first packet that meets a pause behind another kicks the path out.
#[test]
fn a_pause_within_the_budget_is_waited_out_and_one_beyond_it_kicks() {
    let spec = |slow: &str, lb: &str| {
        format!(
            r#"
name = "plb-pause-budget"
seed = 1
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 4
host_link = {{ rate = "40Gbps", delay = "1us" }}
fabric_link = {{ rate = "40Gbps", delay = "1us" }}
overrides = [{{ leaf = 0, spine = 0, delay = "{slow}" }}, {{ leaf = 1, spine = 0, delay = "{slow}" }}]
[switch]
buffer = "9MB"
[switch.pfc]
enabled = true
static_threshold = "20KB"
[cc]
kind = "dcqcn"
[lb]
scheme = "plb"
{lb}
[[traffic]]
kind = "scripted"
flows = [{{ src = 0, dst = 4, size = "4MB", path = [1] }}]
[[traffic]]
kind = "scripted"
flows = [
    {{ src = 1, dst = 5, size = "100KB", start = "400us", path = [1] }},
    {{ src = 6, dst = 5, size = "100KB", start = "400us" }},
    {{ src = 7, dst = 5, size = "100KB", start = "400us" }},
]
"#
        )
    };
    let run = |slow: &str, lb: &str| testing::run_text(&spec(slow, lb), "plb-pause.toml");
    let covered = run("100us", "");
    assert_lossless_and_conserved(&covered);
    assert!(f1(&covered).pfc_wait_total_ps > 0, "f1 meets the pauses");
    assert!(covered.stats.counter("plb.waits") >= 1);
    assert_eq!(covered.stats.counter("plb.kick_messages"), 0);
    assert_eq!(covered.stats.counter("plb.kicks"), 0);
    let on_pause = run("100us", r#"kick = "on_pause""#);
    assert!(on_pause.stats.counter("plb.kick_messages") >= 1);
    let equal = run("1us", "");
    assert!(f1(&equal).pfc_wait_total_ps > 0, "f1 meets the pauses");
    assert!(equal.stats.counter("plb.kick_messages") >= 1);
    assert!(equal.stats.counter("plb.kicks") >= 1);
}
