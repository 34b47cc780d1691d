//! PLB end to end on its paper's motivation fabric (`experiments/plb/motivation/`, made by
//! `make_settings.py`): f1 from S1 to R1 beside background flows pinned on Path1 and bursts
//! that pause Path2. Each test names the mechanism it would catch removed
//! (`docs/schemes/plb.md`, `docs/plb-fig2-5.md`).

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
    ] {
        let mut table: toml::Table = FIG2.parse().unwrap();
        let lb = format!("scheme = \"plb\"\n{body}");
        table.insert("lb".into(), toml::Value::Table(lb.parse().unwrap()));
        let e = testing::spec_error(&testing::to_text(&table), "plb.toml");
        assert!(e.contains(expected), "{body}: {e}");
    }
}
