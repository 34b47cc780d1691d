//! The PFC models (`switch.pfc.model`) on a 2-to-1 incast under one switch: where the PAUSE
//! is sent, at which byte count (the model's threshold), and that RESUME follows, the run
//! lossless and conserved. The default model's test of the same incast is in `monitors.rs`
//! (`an_incast_queue_reaches_xoff_when_the_pause_is_logged_and_falls_after_the_resume`).

use crate::testing::{assert_lossless_and_conserved, leaf_spine_spec, run_text, spec_error};
use pfcsim_core::metrics::{PfcEvent, QueueSample};
use pfcsim_core::sim::RunOutput;

/// Wire bytes of a data packet (1000 B payload and 48 B of headers).
const MTU: u64 = 1_048;

/// Hosts 0 and 1 each send `size` to host 2, all three on leaf 3 (node 4 is the spine), from
/// time 0 at line rate (no congestion control), priority 3; the leaf's `[switch.pfc]` is
/// `pfc`. Monitors: the leaf's ports to hosts 0 and 2 every 50 ns (less than a packet's 84
/// ns), and every PFC frame of the leaf.
fn incast(size: &str, pfc: &str) -> RunOutput {
    let rest = format!(
        "[[traffic]]\nkind = \"scripted\"\nflows = [{{ src = 0, dst = 2, size = \"{size}\" }}, \
         {{ src = 1, dst = 2, size = \"{size}\" }}]\n\
         [switch.pfc]\n{pfc}\n\
         [[monitor]]\nkind = \"queue\"\nnodes = [\"leaf:0\"]\npeers = [\"host:0\", \"host:2\"]\n\
         interval = \"50ns\"\nend = \"2ms\"\n\
         [[monitor]]\nkind = \"pfc\"\nnodes = [\"leaf:0\"]\n"
    );
    let out = run_text(&leaf_spine_spec(1, (1, 1, 3), "", &rest), "incast.toml");
    assert_lossless_and_conserved(&out);
    out
}

fn pfc(out: &RunOutput) -> &[PfcEvent] {
    out.monitors.as_ref().unwrap().pfc.as_ref().unwrap()
}

/// The samples of leaf port `port`, priority 3.
fn series(out: &RunOutput, port: u16) -> Vec<QueueSample> {
    let rows = out.monitors.as_ref().unwrap().queue.as_ref().unwrap();
    rows.iter()
        .filter(|r| (r.node, r.port, r.priority) == (3, port, 3))
        .copied()
        .collect()
}

/// The frames the leaf sent, as (time, port, pause).
fn sent(out: &RunOutput) -> Vec<(u64, u16, bool)> {
    pfc(out)
        .iter()
        .filter(|e| e.direction == "sent")
        .map(|e| (e.time_ps, e.port, e.frame == "pause"))
        .collect()
}

/// The last sample before `t` and the first at or after it.
fn around(samples: &[QueueSample], t: u64) -> (QueueSample, QueueSample) {
    let before = *samples.iter().rev().find(|s| s.time_ps < t).unwrap();
    let after = *samples.iter().find(|s| s.time_ps >= t).unwrap();
    (before, after)
}

/// ns3-rdma, static: the leaf pauses host 0's port once that ingress holds more than 20
/// cells (20,600 B), every byte counted (no reserve): at its 20th packet in the switch,
/// 20,960 B; RESUME once it holds less than 18 cells (18,540 B).
#[test]
fn ns3_rdma_static_pauses_an_ingress_past_20_cells() {
    let out = incast(
        "300KB",
        "model = \"ns3-rdma\"\nns3_rdma = { dynamic = false }",
    );
    let frames = sent(&out);
    let (pause_t, _, _) = *frames.iter().find(|f| f.1 == 0 && f.2).unwrap();
    let (resume_t, _, _) = *frames.iter().find(|f| f.1 == 0 && !f.2).unwrap();
    assert!(resume_t > pause_t);
    // Both senders' ports are paused, the receiver's never.
    assert!(frames.iter().any(|f| f.1 == 1 && f.2));
    assert!(frames.iter().all(|f| f.1 != 2));
    let host0 = series(&out, 0);
    assert_eq!(host0[0].xoff_bytes, 20_600, "the limit, with no reserve");
    assert!(host0
        .iter()
        .filter(|s| s.time_ps < pause_t)
        .all(|s| s.ingress_bytes <= 20_600));
    let (before, at) = around(&host0, pause_t);
    assert_eq!(before.ingress_bytes, 19 * MTU);
    assert!(at.ingress_bytes >= 19 * MTU && at.time_ps < pause_t + 50_000);
    assert!(host0.iter().any(|s| s.ingress_bytes == 20 * MTU));
    // While paused it stays at 18,540 B or more; just after the RESUME it is below.
    assert!(host0
        .iter()
        .filter(|s| s.time_ps >= at.time_ps && s.time_ps < resume_t)
        .all(|s| s.ingress_bytes >= 18_540));
    let (_, after) = around(&host0, resume_t);
    assert!(after.ingress_bytes < 18_540, "{after:?}");
    for p in &out.ports {
        assert_eq!(p.pfc_pauses_sent, p.pfc_resumes_sent, "{p:?}");
    }
}

/// ns3-rdma, dynamic (the code's default: alpha 16 on a pool of 4000 cells): an ingress
/// pauses once `bytes - 2,060 > 16 x (4,120,000 - pool use)`, i.e. the monitor's XOFF level
/// `2,060 + 16 x (4,120,000 - pool use)` at that time: only when the pool is nearly full
/// (with both ingresses equal, each past 1,997,638 B: 3,995,276 B in the pool).
#[test]
fn ns3_rdma_dynamic_pauses_only_when_the_pool_is_nearly_full() {
    let out = incast("5MB", "model = \"ns3-rdma\"");
    let frames = sent(&out);
    let (pause_t, _, _) = *frames.iter().find(|f| f.1 == 0 && f.2).unwrap();
    let host0 = series(&out, 0);
    let egress = series(&out, 2);
    // Below the level at every look before the PAUSE, at or above it at the look after
    // (within a packet: the look is up to 50 ns late).
    assert!(host0
        .iter()
        .filter(|s| s.time_ps < pause_t)
        .all(|s| s.ingress_bytes <= s.xoff_bytes));
    let (_, at) = around(&host0, pause_t);
    assert!(at.ingress_bytes + MTU > at.xoff_bytes, "{at:?}");
    // The pool (what both ingresses hold, queued for host 2) is then near 3,995,276 B:
    // b - 2,060 > 16 x (4,120,000 - 2 b) with b the bytes of each ingress, within a packet.
    let (before, queued) = around(&egress, pause_t);
    assert!(before.egress_bytes < 3_995_276 + 2 * MTU, "{before:?}");
    assert!(queued.egress_bytes > 3_995_276 - 4 * MTU, "{queued:?}");
    assert!(frames.iter().any(|f| f.1 == 0 && !f.2 && f.0 > pause_t));
    assert!(out.stats.packets_dropped == 0);
}

/// ns3-rdma, dynamic: the XON of an ingress depends on the pool it shares. Hosts 1-7 send
/// 1 MB each to host 9, so the pool passes its limit (4,000 cells) by the bytes in flight
/// after each round of PAUSEs; meanwhile hosts 0 and 8 send 4 KB flows to host 1 (an idle
/// downlink) every 3 us. An ingress of these that holds more than 2,060 B while the pool is
/// over its limit is paused, then forwards its few bytes at once, its last release finding
/// the pool still too full for its XON (`pg - 2,060 < 16 x (free - 16)`). It must resume
/// when later releases from hosts 1-7 empty the pool: checked only at its own releases, it
/// stayed paused for good (19 of 181 flows finished, the run ending with hosts 0 and 8
/// paused and nothing in the buffer).
#[test]
fn ns3_rdma_dynamic_resumes_an_ingress_when_the_pool_drains() {
    let mut flows: Vec<String> = (1..=7)
        .map(|h| format!("{{ src = {h}, dst = 9, size = \"1MB\" }}"))
        .collect();
    for t in (40..300).step_by(3) {
        for h in [0, 8] {
            flows.push(format!(
                "{{ src = {h}, dst = 1, size = \"4KB\", start = \"{t}us\" }}"
            ));
        }
    }
    let rest = format!(
        "[[traffic]]\nkind = \"scripted\"\nflows = [{}]\n\
         [switch.pfc]\nmodel = \"ns3-rdma\"\n\
         [[monitor]]\nkind = \"pfc\"\nnodes = [\"leaf:0\"]\n",
        flows.join(", ")
    );
    let out = run_text(
        &leaf_spine_spec(1, (1, 1, 10), "stop_at = \"5ms\"", &rest),
        "pool.toml",
    );
    assert_lossless_and_conserved(&out);
    let frames = sent(&out);
    for host in [0, 8] {
        let pause = frames.iter().position(|f| f.1 == host && f.2);
        let pause = pause.expect("the small senders are paused");
        assert!(frames[pause..].iter().any(|f| f.1 == host && !f.2));
    }
    for p in &out.ports {
        assert_eq!(p.pfc_pauses_sent, p.pfc_resumes_sent, "{p:?}");
    }
}

/// Egress-triggered: the packet that takes the egress to host 2 to 50 KB (its 48th queued
/// packet, 50,304 B) pauses its own ingress, the other sender's next packet (within a packet
/// time, 83.84 ns) pauses the other ingress; both resume together once the egress has drained
/// to 40 KB.
#[test]
fn egress_model_pauses_the_senders_to_a_long_egress_queue() {
    let out = incast(
        "300KB",
        "model = \"egress\"\negress = { xoff = \"50KB\", resume_offset = \"10KB\" }",
    );
    let frames = sent(&out);
    let first = frames[0];
    assert!(first.2, "the first frame is a PAUSE");
    let second = frames[1];
    assert!(
        second.2 && second.1 != first.1 && second.1 < 2,
        "{frames:?}"
    );
    assert!(second.0 - first.0 <= 83_840, "{frames:?}");
    assert!(
        frames.iter().all(|f| f.1 != 2),
        "the receiver's port is never paused"
    );
    let resumed: Vec<(u64, u16)> = frames
        .iter()
        .filter(|f| !f.2)
        .map(|f| (f.0, f.1))
        .take(2)
        .collect();
    assert_eq!(resumed.len(), 2);
    assert_eq!(resumed[0].0, resumed[1].0, "both resume together");
    let egress = series(&out, 2);
    assert!(egress
        .iter()
        .filter(|s| s.time_ps < first.0)
        .all(|s| s.egress_bytes < 50_000));
    assert!(egress.iter().any(|s| s.egress_bytes == 48 * MTU));
    let (before, at) = around(&egress, first.0);
    assert!(before.egress_bytes >= 50_000 - 2 * MTU, "{before:?}");
    assert!(at.egress_bytes + MTU >= 50_000, "{at:?}");
    // Paused until the queue is at 40,000 B or less.
    assert!(egress
        .iter()
        .filter(|s| s.time_ps >= at.time_ps && s.time_ps < resumed[0].0)
        .all(|s| s.egress_bytes + MTU > 40_000));
    let (_, after) = around(&egress, resumed[0].0);
    assert!(after.egress_bytes <= 40_000, "{after:?}");
    // The monitor's per-ingress XOFF level: none in this model.
    assert_eq!(series(&out, 0)[0].xoff_bytes, u64::MAX);
    for p in &out.ports {
        assert_eq!(p.pfc_pauses_sent, p.pfc_resumes_sent, "{p:?}");
    }
}

#[test]
fn a_models_parameters_are_refused_under_another_model() {
    let spec = |pfc: &str| {
        leaf_spine_spec(
            1,
            (1, 1, 3),
            "",
            &format!(
                "[[traffic]]\nkind = \"scripted\"\nflows = [{{ src = 0, dst = 2, size = \"1KB\" }}]\n[switch.pfc]\n{pfc}\n"
            ),
        )
    };
    let e = spec_error(&spec("egress = { xoff = \"50KB\" }"), "s.toml");
    assert!(
        e.ends_with("switch.pfc.egress: parameters of the \"egress\" PFC model, but switch.pfc.model is \"ingress\"; set switch.pfc.model = \"egress\", or remove the table"),
        "{e}"
    );
    let e = spec_error(&spec("model = \"egress\""), "s.toml");
    assert!(
        e.contains("switch.pfc.model: \"egress\" needs switch.pfc.egress.xoff"),
        "{e}"
    );
    let e = spec_error(&spec("model = \"ns3-rdma\"\nalpha = 0.125"), "s.toml");
    assert!(
        e.ends_with("switch.pfc.alpha: a parameter of the \"ingress\" PFC model, which switch.pfc.model = \"ns3-rdma\" does not use; remove it (this model's parameters are in [switch.pfc.ns3_rdma])"),
        "{e}"
    );
    let e = spec_error(&spec("model = \"ns3-rdma\"\nenabled = false"), "s.toml");
    assert!(
        e.contains(
            "switch.pfc.model: \"ns3-rdma\" is a PFC model and needs switch.pfc.enabled = true"
        ),
        "{e}"
    );
    let e = spec_error(
        &spec("model = \"egress\"\negress = { xoff = \"5KB\", resume_offset = \"6KB\" }"),
        "s.toml",
    );
    assert!(
        e.contains("switch.pfc.egress.resume_offset (6KB) is above switch.pfc.egress.xoff (5KB)"),
        "{e}"
    );
    let e = spec_error(
        &spec("model = \"ns3-rdma\"\nns3_rdma = { static_limit = \"2KB\" }"),
        "s.toml",
    );
    assert!(
        e.contains("switch.pfc.ns3_rdma.static_limit (2KB): must be above 2060B"),
        "{e}"
    );
    // A threshold no queue can reach: PFC would never pause.
    let e = spec_error(
        &spec("model = \"egress\"\negress = { xoff = \"10MB\" }"),
        "s.toml",
    );
    assert!(
        e.contains("switch.pfc.egress.xoff (10MB) is above switch.buffer (9MB): no egress queue can reach it"),
        "{e}"
    );
    let e = spec_error(&spec("static_threshold = \"10MB\""), "s.toml");
    assert!(
        e.contains("switch.pfc.static_threshold (10MB) is above switch.buffer (9MB): no ingress can hold that much"),
        "{e}"
    );
    // A parameter the chosen threshold does not use.
    let e = spec_error(
        &spec("static_threshold = \"256KB\"\nalpha = 0.125"),
        "s.toml",
    );
    assert!(
        e.ends_with("switch.pfc.alpha: the dynamic threshold's factor, which switch.pfc.static_threshold replaces; remove alpha, or static_threshold for the dynamic threshold"),
        "{e}"
    );
    let e = spec_error(
        &spec("model = \"ns3-rdma\"\nns3_rdma = { static_limit = \"30KB\" }"),
        "s.toml",
    );
    assert!(
        e.contains(
            "switch.pfc.ns3_rdma.static_limit: the static limit, unused by the dynamic threshold"
        ),
        "{e}"
    );
    let e = spec_error(
        &spec("model = \"ns3-rdma\"\nns3_rdma = { dynamic = false, alpha = 8.0 }"),
        "s.toml",
    );
    assert!(
        e.contains("switch.pfc.ns3_rdma.alpha: the dynamic threshold's factor, unused with dynamic = false"),
        "{e}"
    );
    let e = spec_error(&spec("model = \"pfc\""), "s.toml");
    assert!(e.contains("switch.pfc.model: unknown variant `pfc`, expected one of `ingress`, `ns3-rdma`, `egress`"), "{e}");
}
