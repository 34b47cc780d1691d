//! The plug-in interface end to end, with the test-only `probe` scheme: recirculation through
//! a loopback port, timers, and scheme messages that cross links.

use super::*;
use crate::cc::CcConfig;
use crate::lb::probe::ProbeConfig;
use crate::lb::LbConfig;
use crate::topology::{LeafSpine, Topology};
use crate::traffic::FlowSpec;
use crate::transport::ideal_fct;
use crate::units::Rate;

#[test]
fn recirculation_timers_and_messages_work_end_to_end() {
    let link = (Rate::gbps(100), Time::from_us(1));
    let loopback = (Rate::gbps(100), Time::from_ns(100));
    // Hosts 0..4, leaves 4 and 5, spines 6 and 7; every switch gets a loopback link.
    let topo = Topology::leaf_spine(&LeafSpine::uniform(2, 2, 2, link.0, link.1))
        .with_loopbacks(loopback.0, loopback.1);
    let cfg = FabricConfig {
        cc: CcConfig::None,
        lb: LbConfig::Probe(ProbeConfig {}),
        ..Default::default()
    };
    let flow = FlowSpec::scripted(0, 2, 10_000, Time::ZERO);
    let stop = StopRule {
        at: Time::from_ms(100),
        when_flows_done: false,
    };
    let out = Simulation::new(&topo, cfg.clone(), vec![flow], 1, stop)
        .unwrap()
        .run_to_end();
    let s = &out.stats;
    assert_eq!(
        (s.flows_finished, s.bytes_delivered, s.packets_dropped),
        (1, 10_000, 0)
    );
    assert_eq!((out.buffered_bytes, out.live_packets), (0, 0));

    // Only the source leaf has a choice to make, so only its loopback carries the 10 packets.
    let port = |node: u32, peer: u32| out.ports.iter().find(|p| p.node == node && p.peer == peer);
    let leaf_loop: Vec<_> = out
        .ports
        .iter()
        .filter(|p| p.node == 4 && p.peer == 4)
        .collect();
    assert_eq!(
        leaf_loop.len(),
        2,
        "a loopback link is two ports of the switch"
    );
    assert_eq!(leaf_loop.iter().map(|p| p.tx_packets).sum::<u64>(), 10);
    for other in [5, 6, 7] {
        let used: u64 = out
            .ports
            .iter()
            .filter(|p| p.node == other && p.peer == other)
            .map(|p| p.tx_packets)
            .sum();
        assert_eq!(used, 0, "switch {other} had no choice to make");
    }

    // The recirculation is one more store-and-forward hop in the data path; the ACK, which
    // no scheme handles, comes back over the four links only.
    let path = [link, link, loopback, link, link];
    let ack_on_loopback = loopback.0.tx_time(64).ps() + loopback.1.ps();
    let expected = ideal_fct(10_000, &path, &cfg.nic.wire()).ps() - ack_on_loopback;
    let fct = out.flows[0].fct_ps.unwrap();
    assert!(fct.abs_diff(expected) <= 1_000, "fct {fct} vs {expected}");
    assert_eq!(out.flows[0].paths_used, 1);

    // The timer fired and sent one message to spine 6 (the first candidate), which answered.
    assert_eq!(port(4, 6).unwrap().lb_messages_sent, 1);
    assert_eq!(port(6, 4).unwrap().lb_messages_sent, 1);
    let total: u64 = out.ports.iter().map(|p| p.lb_messages_sent).sum();
    assert_eq!(total, 2);
}

/// A simulation of a spec (leaf-spine with RLB, scripted flows) whose state the test can
/// watch between events.
pub(super) fn rlb_sim(spec: &str) -> Simulation {
    let spec = crate::spec::Spec::from_toml(spec, "rlb.toml").unwrap_or_else(|e| panic!("{e}"));
    let sc = crate::spec::Scenario::prepare(spec, std::path::Path::new("."))
        .unwrap_or_else(|e| panic!("{e}"));
    crate::run::build_simulation(sc).unwrap_or_else(|e| panic!("{e}"))
}

/// 3 leaves x 3 spines x 2 hosts (hosts 0-5, leaves 6-8, spines 9-11), 100 Gbps and 1 us
/// links, line-rate senders, loopbacks of 100 Gbps and 100 ns; then `extra`.
pub(super) fn rlb_spec(lb: &str, extra: &str) -> String {
    format!(
        r#"
        seed = 5
        [topology]
        kind = "leaf_spine"
        leaves = 3
        spines = 3
        hosts_per_leaf = 2
        host_link = {{ rate = "100Gbps", delay = "1us" }}
        fabric_link = {{ rate = "100Gbps", delay = "1us" }}
        [switch.loopback]
        rate = "100Gbps"
        delay = "100ns"
        [cc]
        kind = "none"
        [run]
        stop_when_done = false
        [lb]
        scheme = "rlb"
        {lb}
        {extra}
        "#
    )
}

/// PFC prediction end to end. Checked to fail with prediction disabled (no CNM before the
/// PAUSE).
#[test]
fn rlb_warns_the_upstream_switch_strictly_before_the_pause_at_that_ingress() {
    // Incast: four senders on leaves 6 and 8 to host 2 on leaf 7, at line rate: leaf 7's
    // ingress queues from the spines fill up to PFC.
    let flows = r#"
        [[traffic]]
        kind = "scripted"
        flows = [
            { src = 0, dst = 2, size = "2MB" },
            { src = 1, dst = 2, size = "2MB" },
            { src = 4, dst = 2, size = "2MB" },
            { src = 5, dst = 2, size = "2MB" },
        ]
    "#;
    let mut sim = rlb_sim(&rlb_spec("", flows));
    let leaf = 7usize;
    let sw_index = sim
        .switches
        .iter()
        .position(|s| s.node == leaf as u32)
        .unwrap();
    let first = sim.switches[sw_index].ports.start;
    let uplinks: Vec<u16> = (0..(sim.switches[sw_index].ports.len() as u16))
        .filter(|&l| {
            let p = &sim.ports[(first + l as u32) as usize];
            (9..=11).contains(&p.peer_node)
        })
        .collect();
    assert_eq!(uplinks.len(), 3);
    let mut warned_at = [None; 3];
    let mut paused_at = [None; 3];
    while let Some(t) = sim.step() {
        let sw = &sim.switches[sw_index];
        let rlb = sw.scheme::<crate::lb::Rlb>().unwrap();
        for (i, &l) in uplinks.iter().enumerate() {
            if warned_at[i].is_none() && rlb.warning_sent(l, 3) {
                warned_at[i] = Some(t);
            }
            if paused_at[i].is_none()
                && sim.ports[(first + l as u32) as usize].rec.pfc_pauses_sent > 0
            {
                paused_at[i] = Some(t);
            }
        }
    }
    let mut paused = 0;
    for i in 0..3 {
        if let Some(pause) = paused_at[i] {
            paused += 1;
            let warn = warned_at[i].expect("a CNM preceded the PAUSE");
            assert!(warn < pause, "uplink {i}: CNM at {warn}, PAUSE at {pause}");
        }
    }
    assert!(paused > 0, "the incast pauses the spines");
    let out = sim.finish(0.0);
    assert!(out.stats.counter("rlb.cnm_warnings") > 0);
    assert_eq!(out.stats.bytes_delivered, out.stats.bytes_offered);
    assert_eq!(out.stats.drops_buffer, 0);
}

/// Algorithm 2 end to end: a black-holed spine is found faulty within two of RLB*'s rounds
/// (one t_rc each) and then avoided.
///
/// The two rounds are counted from the start of the first round whose evidence pointed at
/// the spine (mean recirculation count above `fault_threshold`, spine 11 charged with the
/// most recirculations): Algorithm 2 decides on nothing else, and any round below the
/// threshold resets it. Counting from the fault's start or from the first recirculation
/// charged to spine 11 would measure the traffic, not Algorithm 2: the black hole costs
/// nothing until packets are warned off spine 10 and wait for spine 11 (its lost probes make
/// it look ever slower), and the first waits are short, so their rounds stay below the
/// threshold (in this run the first recirculation charged to spine 11 is at 295.3 us, the
/// alert at 309.1 us, 37 rounds later; rounds are 0.1 to 1.6 us long).
///
/// Checked to fail with Algorithm 2 disabled (no alert), with a port flagged after one round
/// or only after three (the alert is not at the end of the second round), with the faulty
/// egress not removed (packets still sent to spine 11 after the alert), with PFC prediction
/// disabled, with Algorithm 1's gap test disabled either way, with no RTT probes, with a
/// lost probe not making its path look slower, and with echoes ignored.
#[test]
fn rlb_star_detects_a_black_holed_spine_and_stops_sending_to_it() {
    // Leaf 6 sends four ECMP flows to leaf 7; host 4 (leaf 8) floods spine 10's link to leaf
    // 7 on a pinned path, so spine 10 warns leaf 6. Spine 11 black-holes leaf 6's hosts to
    // leaf 7's: its timestamps are lost, its RTT grows, and packets warned off spine 10 wait for
    // it by recirculating, charged to spine 11.
    let flows = r#"
        [[traffic]]
        kind = "scripted"
        flows = [
            { src = 4, dst = 2, size = "3MB", path = [1] },
            { src = 0, dst = 3, size = "1MB" },
            { src = 0, dst = 3, size = "1MB" },
            { src = 0, dst = 3, size = "1MB" },
            { src = 1, dst = 3, size = "1MB" },
            { src = 1, dst = 3, size = "1MB" },
            { src = 1, dst = 3, size = "1MB" },
            { src = 0, dst = 2, size = "1MB" },
            { src = 0, dst = 2, size = "1MB" },
            { src = 1, dst = 2, size = "1MB" },
            { src = 1, dst = 2, size = "1MB" },
        ]
        [[faults]]
        kind = "black_hole"
        switch = "spine:2"
        pairs = [["host:0", "host:2"], ["host:0", "host:3"], ["host:1", "host:2"], ["host:1", "host:3"]]
    "#;
    let lb = "adaptive = true\n[lb.inner]\nscheme = \"ecmp\"";
    let mut sim = rlb_sim(&rlb_spec(lb, flows));
    let leaf = sim.switches.iter().position(|s| s.node == 6).unwrap();
    let first = sim.switches[leaf].ports.start;
    let to_spine11 = (first..sim.switches[leaf].ports.end)
        .find(|&p| sim.ports[p as usize].peer_node == 11)
        .unwrap() as usize;
    let local11 = (to_spine11 as u32 - first) as u16;
    let mut at_alert = None;
    // Leaf 6's RLB* rounds as (start, t_rc), and the round at whose end spine 11 became
    // suspect (the last time before the alert).
    let mut rounds: Vec<(u64, u64)> = Vec::new();
    let mut suspected_after = None;
    while let Some(t) = sim.step() {
        let rlb = sim.switches[leaf].scheme::<crate::lb::Rlb>().unwrap();
        let (started, t_rc, suspect) = rlb.round_view();
        if started as usize > rounds.len() {
            assert_eq!(
                started as usize,
                rounds.len() + 1,
                "one round starts at a time"
            );
            rounds.push((t.ps(), t_rc.ps()));
        }
        if at_alert.is_none() {
            if suspect == Some((local11, 1)) {
                // Set at the end of a round, when the next one starts: the one before it.
                suspected_after = Some(rounds.len() - 2);
            }
            if !rlb.alerts.is_empty() {
                let port = &sim.ports[to_spine11];
                let waiting: usize = port.prio.iter().map(|q| q.len as usize).sum();
                at_alert = Some((t.ps(), port.tx_packets + waiting as u64));
            }
        }
    }
    let (alert_ps, limit) = at_alert.expect("leaf 6 raised an alert");
    let out = sim.finish(0.0);
    // The first alert names spine 11, from leaf 6 (later ones can be false alarms raised by
    // congestion alone: see docs/schemes/rlb.md).
    let alert = out.alerts[0];
    assert_eq!((alert.node, alert.downstream), (6, 11), "{:?}", out.alerts);
    assert_eq!(alert.time_ps, alert_ps);
    // Algorithm 2 within two rounds: spine 11 topped the round `e` that first pointed at it
    // and the round after it, and the alert came at the end of that second round, t_rc(e) +
    // t_rc(e + 1) after the start of round `e`.
    let e = suspected_after.expect("spine 11 was suspect for one round before the alert");
    let end = |r: usize| rounds[r].0 + rounds[r].1;
    assert_eq!(rounds[e + 1].0, end(e), "the rounds are back to back");
    assert_eq!(
        alert.time_ps,
        end(e + 1),
        "alert at the end of round {} of {}; rounds {:?}",
        e + 1,
        rounds.len(),
        &rounds[e.saturating_sub(3)..(e + 4).min(rounds.len())]
    );
    assert_eq!(out.stats.alerts as usize, out.alerts.len());
    assert!(out.stats.counter("rlb.recirculations") > 0);
    // Only what was already queued for spine 11 left after the alert.
    assert!(out.ports[to_spine11].tx_packets <= limit);
    // Every flow recovers over the other spines.
    assert_eq!(out.stats.flows_finished, out.stats.flows_total);
    assert_eq!(out.stats.bytes_delivered, out.stats.bytes_offered);
    assert_eq!(out.stats.drops_buffer, 0);
}
