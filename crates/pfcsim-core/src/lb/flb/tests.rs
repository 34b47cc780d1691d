use super::*;
use crate::lb::host::TestHost;

const US: u64 = 1_000;

fn flb(cfg: FlbConfig) -> (Flb, TestHost) {
    let host = TestHost::new(4);
    let flb = Flb::new(&cfg, &host.fabric, 4);
    (flb, host)
}

/// Starts flow `id` (host 0 to host 2) at `t_ns`: its pair's first probe round goes out.
fn start(f: &mut Flb, host: &mut TestHost, id: u32, t_ns: u64) -> FlowInfo {
    let flow = TestHost::flow(id, 10_000_000);
    f.on_flow_start(&mut host.ctx(t_ns), &flow);
    flow
}

/// The reply to round `round`'s probe on path index `i`, with that one-way delay, at `t_ns`.
fn reply(f: &mut Flb, host: &mut TestHost, t_ns: u64, round: u32, i: u32, one_way_us: u64) {
    let echo = ProbeEcho {
        to_host: 2,
        path_tag: i + 1,
        ce: false,
        rtt: Time::from_us(2 * one_way_us),
        one_way: Time::from_us(one_way_us),
        meta: round << 8 | i,
    };
    f.on_probe_reply(&mut host.ctx(t_ns), &echo);
}

/// Replies to round `round` on every path, with these one-way delays (µs).
fn replies(f: &mut Flb, host: &mut TestHost, t_ns: u64, round: u32, delays_us: [u64; 4]) {
    for (i, d) in delays_us.into_iter().enumerate() {
        reply(f, host, t_ns, round, i as u32, d);
    }
}

fn tag(f: &mut Flb, host: &mut TestHost, flow: &FlowInfo, t_ns: u64) -> u32 {
    f.path_tag(&mut host.ctx(t_ns), flow, 0, 1000)
}

#[test]
fn a_flow_start_probes_every_path_and_the_timer_repeats_while_flows_last() {
    let (mut f, mut host) = flb(FlbConfig::default());
    let flow = start(&mut f, &mut host, 0, 0);
    let probes = |host: &TestHost| {
        host.actions
            .iter()
            .filter_map(|a| match *a {
                HostAction::SendProbe { path_tag, meta, .. } => Some((path_tag, meta)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(probes(&host), [(1, 0), (2, 1), (3, 2), (4, 3)]);
    assert!(host.actions.contains(&HostAction::SetTimer {
        host: 0,
        at: Time::from_us(100),
        token: 0
    }));
    // A second flow to the same ToR adds no round.
    host.actions.clear();
    let second = start(&mut f, &mut host, 1, 10 * US);
    assert!(host.actions.is_empty());
    // The tick sends round 1 and sets the next one.
    host.actions.clear();
    f.on_timer(&mut host.ctx(100 * US), 0);
    assert_eq!(probes(&host), [(1, 256), (2, 257), (3, 258), (4, 259)]);
    // Once both flows end, the next tick stops the timer.
    f.on_flow_end(&mut host.ctx(150 * US), &flow);
    f.on_flow_end(&mut host.ctx(160 * US), &second);
    host.actions.clear();
    f.on_timer(&mut host.ctx(200 * US), 0);
    assert!(host.actions.is_empty());
}

#[test]
fn a_flowlet_ends_after_two_aging_sweeps_without_packets() {
    let (mut f, mut host) = flb(FlbConfig::default());
    let flow = start(&mut f, &mut host, 0, 0);
    // No probe data: the first flowlet draws a random offset.
    let first = tag(&mut f, &mut host, &flow, 100 * US);
    assert_eq!(f.stats.random_offsets, 1);
    // Path 2 (tag 3) is now the fastest, but the flowlet goes on while at most one aging
    // sweep (at multiples of 250 µs) passes between two packets: 100 → 499 µs (the sweep at
    // 250 µs sets age = 1), 499 → 749 (500), 749 → 999 (750) ...
    replies(&mut f, &mut host, 90 * US, 0, [300, 300, 100, 300]);
    for t in [499, 749, 999] {
        replies(&mut f, &mut host, (t - 1) * US, 0, [300, 300, 100, 300]);
        assert_eq!(tag(&mut f, &mut host, &flow, t * US), first, "at {t} us");
    }
    assert_eq!(f.stats.choices_gap, 0);
    // ... but between 999 and 1250 µs the sweeps at 1000 and 1250 µs both pass: the entry is
    // invalid and a new flowlet starts, on the fastest path.
    replies(&mut f, &mut host, 1240 * US, 0, [300, 300, 100, 300]);
    assert_eq!(tag(&mut f, &mut host, &flow, 1250 * US), 3);
    assert_eq!(f.stats.choices_gap, 1);
}

#[test]
fn a_burst_above_burst_bytes_within_a_monitor_period_cuts_the_flowlet() {
    for cut_over in [true, false] {
        let (mut f, mut host) = flb(FlbConfig {
            cut_over,
            reorder_filter: ReorderFilter::Off,
            ..FlbConfig::default()
        });
        let flow = start(&mut f, &mut host, 0, 0);
        replies(&mut f, &mut host, 0, 0, [100, 100, 100, 100]);
        // 1000-byte packets every 100 ns from 1000 µs on (in one 25 µs window): after the
        // 16th, 16,000 bytes are above 15,625, so the 17th starts a new flowlet.
        let t0 = 1000 * US;
        for k in 0..15 {
            tag(&mut f, &mut host, &flow, t0 + k * 100);
        }
        assert_eq!(f.stats.choices_burst, 0);
        let before = tag(&mut f, &mut host, &flow, t0 + 1500);
        let after = tag(&mut f, &mut host, &flow, t0 + 1600);
        // The cut-over moves the burst to another path (all four are equally fast).
        assert_eq!(after != before, cut_over);
        assert_eq!(
            f.stats.choices_burst,
            u64::from(cut_over),
            "cut_over {cut_over}"
        );
        // The count restarts after a cut-over (with the cutting packet's bytes): the 16th
        // packet after it cuts again.
        for k in 17..32 {
            tag(&mut f, &mut host, &flow, t0 + k * 100);
        }
        assert_eq!(f.stats.choices_burst, u64::from(cut_over));
        tag(&mut f, &mut host, &flow, t0 + 3200);
        assert_eq!(f.stats.choices_burst, 2 * u64::from(cut_over));
        // A new window starts the count again: 15 packets in the next one cut nothing.
        let t1 = t0 + 25 * US;
        for k in 0..15 {
            tag(&mut f, &mut host, &flow, t1 + k * 100);
        }
        assert_eq!(f.stats.choices_burst, 2 * u64::from(cut_over));
    }
}

/// A flow on path index 0 (one-way 300 µs) when paths 1-3 run at 100, 150 and 295 µs: the
/// path (tag) of its next packet, `gap_us` after its last one, which starts a new flowlet by a
/// burst cut-over (`burst`, with the default 250 µs flowlet period) or after a gap (a 50 µs
/// flowlet period, so that a gap of 100 µs or more starts a flowlet).
fn next_path(reorder_filter: ReorderFilter, burst: bool, gap_us: u64) -> u32 {
    let flowlet_period = Time::from_us(if burst { 250 } else { 50 });
    let (mut f, mut host) = flb(FlbConfig {
        reorder_filter,
        flowlet_period,
        ..FlbConfig::default()
    });
    let flow = start(&mut f, &mut host, 0, 0);
    // The bases; then paths 1-3 congested, so that the first flowlet takes path 0.
    replies(&mut f, &mut host, 10 * US, 0, [300, 100, 150, 295]);
    replies(&mut f, &mut host, 20 * US, 0, [300, 400, 400, 400]);
    assert_eq!(tag(&mut f, &mut host, &flow, 30 * US), 1);
    // Its last packet at 1000 µs (with a full monitor window for a cut-over), and paths 1-3
    // back at base.
    let (last, now) = (1000 * US, (1000 + gap_us) * US);
    f.flows[0].last_packet = Time::from_ns(last);
    f.flows[0].window = now / (25 * US);
    f.flows[0].window_bytes = if burst { 1_000_000 } else { 0 };
    replies(&mut f, &mut host, now - 1, 0, [300, 100, 150, 295]);
    let path = tag(&mut f, &mut host, &flow, now);
    assert_eq!(f.stats.choices_burst, u64::from(burst));
    assert_eq!(f.stats.choices_gap, u64::from(!burst));
    path
}

#[test]
fn the_reorder_filter_refuses_a_path_that_would_overtake_packets_in_flight() {
    use ReorderFilter::*;
    // A cut-over 10 µs after the last packet: only path 3 (295 µs, 5 µs faster than 300 µs)
    // cannot overtake.
    assert_eq!(next_path(EveryFlowlet, true, 10), 4);
    // 160 µs after: path 2 (150 µs) qualifies, path 1 (100 µs) still not.
    assert_eq!(next_path(EveryFlowlet, true, 160), 3);
    // 200 µs after: the fastest, path 1.
    assert_eq!(next_path(EveryFlowlet, true, 200), 2);
    // Without the filter the fastest is taken at once.
    assert_eq!(next_path(Off, true, 10), 2);
    // Screening only flowlets after a gap: the cut-over takes the fastest at once ...
    assert_eq!(next_path(AfterGap, true, 10), 2);
    // ... and a flowlet 100 µs after the last packet is screened: path 3 only.
    assert_eq!(next_path(AfterGap, false, 100), 4);
    assert_eq!(next_path(EveryFlowlet, false, 100), 4);
    assert_eq!(next_path(Off, false, 100), 2);
}

#[test]
fn congested_and_lost_paths_are_not_chosen() {
    let (mut f, mut host) = flb(FlbConfig {
        reorder_filter: ReorderFilter::Off,
        ..FlbConfig::default()
    });
    let flow = start(&mut f, &mut host, 0, 0);
    replies(&mut f, &mut host, 10 * US, 0, [100, 100, 100, 100]);
    // Path 0 61 µs above its base: congested (d_cong 60 µs); path 1 at 150: not usable
    // either; path 2 lowest of the rest.
    replies(&mut f, &mut host, 20 * US, 0, [161, 170, 120, 130]);
    assert_eq!(tag(&mut f, &mut host, &flow, 30 * US), 3);
    let pair = f.pair_index(0, 1);
    assert_eq!(f.state(pair, 0, Time::from_us(30)), PathState::Congested);
    assert_eq!(
        f.state(pair, 2, Time::from_us(30)),
        PathState::Usable(Time::from_us(120))
    );
    // Round 1 goes out at 100 µs; path 2 never answers it, the others do.
    f.on_timer(&mut host.ctx(100 * US), 0);
    for i in [0, 1, 3] {
        reply(&mut f, &mut host, 200 * US, 1, i, 100);
    }
    // Lost once 1.2 ms have passed since round 1 with no later answer ...
    assert_ne!(f.state(pair, 2, Time::from_us(1299)), PathState::Congested);
    assert_eq!(f.state(pair, 2, Time::from_us(1300)), PathState::Congested);
    // ... which makes the flow leave it at its next packet (its current path is congested).
    f.flows[0].last_packet = Time::from_us(1299);
    assert_ne!(tag(&mut f, &mut host, &flow, 1300 * US), 3);
    assert_eq!(f.stats.choices_congested, 1);
    // A later round answered on path 2 clears the loss.
    for r in 2..=12 {
        f.on_timer(&mut host.ctx(r as u64 * 100 * US), 0);
    }
    reply(&mut f, &mut host, 1310 * US, 12, 2, 100);
    assert_eq!(
        f.state(pair, 2, Time::from_us(1310)),
        PathState::Usable(Time::from_us(100))
    );
}

#[test]
fn replies_older_than_the_probe_timeout_are_not_used() {
    let (mut f, mut host) = flb(FlbConfig::default());
    start(&mut f, &mut host, 0, 0);
    replies(&mut f, &mut host, 10 * US, 0, [100, 100, 100, 100]);
    let pair = f.pair_index(0, 1);
    assert_eq!(
        f.state(pair, 0, Time::from_us(1209)),
        PathState::Usable(Time::from_us(100))
    );
    assert_eq!(f.state(pair, 0, Time::from_us(1210)), PathState::Unknown);
}

#[test]
fn within_one_tor_there_is_nothing_to_choose_or_probe() {
    let (mut f, mut host) = flb(FlbConfig::default());
    let flow = FlowInfo {
        dst: 1,
        ..TestHost::flow(0, 1_000_000)
    };
    f.on_flow_start(&mut host.ctx(0), &flow);
    assert!(host.actions.is_empty());
    assert_eq!(tag(&mut f, &mut host, &flow, 0), 0);
}

#[test]
fn bad_settings_are_refused_with_the_key() {
    let bad = FlbConfig {
        flowlet_period: Time::ZERO,
        ..Default::default()
    };
    assert_eq!(
        bad.validate().unwrap_err(),
        "lb.flowlet_period: must be above 0; give a time such as \"250us\" (valid: > 0s)"
    );
    let bad = FlbConfig {
        burst_bytes: Bytes(0),
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().starts_with("lb.burst_bytes: "));
    let bad = FlbConfig {
        probe_interval: Time::from_ns(1),
        probe_timeout: Time::from_ms(1),
        ..Default::default()
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .starts_with("lb.probe_timeout: "));
}

fn probe_clocked() -> (Flb, TestHost) {
    flb(FlbConfig {
        mode: FlbMode::ProbeClocked,
        ..FlbConfig::default()
    })
}

fn may_send(f: &mut Flb, host: &mut TestHost, flow: &FlowInfo, t_ns: u64) -> bool {
    f.may_send(&mut host.ctx(t_ns), flow)
}

#[test]
fn probe_clocked_a_flow_waits_for_a_probe_reply_and_sends_on_its_path() {
    let (mut f, mut host) = probe_clocked();
    assert!(f.clocks_sending());
    assert!(!flb(FlbConfig::default()).0.clocks_sending());
    let flow = start(&mut f, &mut host, 0, 0);
    host.actions.clear();
    // No reply yet: the flow is held.
    assert!(!may_send(&mut f, &mut host, &flow, US));
    assert_eq!(f.stats.holds, 1);
    // Asked again (its transport lists it again), it waits once in its pair's queue.
    assert!(!may_send(&mut f, &mut host, &flow, 2 * US));
    // The first reply, on path index 2, releases it, for one packet on that path.
    reply(&mut f, &mut host, 60 * US, 0, 2, 50);
    assert_eq!(host.actions, vec![HostAction::Release { flow: 0 }]);
    assert!(may_send(&mut f, &mut host, &flow, 60 * US));
    assert_eq!(tag(&mut f, &mut host, &flow, 60 * US), 3);
    assert_eq!(f.stats.clocked_packets, 1);
    // Its next packet waits for the next reply.
    assert!(!may_send(&mut f, &mut host, &flow, 61 * US));
}

#[test]
fn probe_clocked_unused_replies_are_used_in_arrival_order_one_per_path() {
    let (mut f, mut host) = probe_clocked();
    let flow = start(&mut f, &mut host, 0, 0);
    host.actions.clear();
    // Replies on paths 3 then 1 (path 3 twice: one credit), none on 0 and 2 (lost probes).
    reply(&mut f, &mut host, 50 * US, 0, 3, 50);
    reply(&mut f, &mut host, 55 * US, 0, 1, 55);
    reply(&mut f, &mut host, 56 * US, 0, 3, 50);
    assert!(host.actions.is_empty());
    let mut sent = Vec::new();
    while may_send(&mut f, &mut host, &flow, 60 * US) {
        sent.push(tag(&mut f, &mut host, &flow, 60 * US));
    }
    assert_eq!(sent, vec![4, 2]);
}

#[test]
fn probe_clocked_waiting_flows_are_released_first_come_first_served() {
    let (mut f, mut host) = probe_clocked();
    let a = start(&mut f, &mut host, 0, 0);
    let b = start(&mut f, &mut host, 1, 0);
    host.actions.clear();
    assert!(!may_send(&mut f, &mut host, &b, US));
    assert!(!may_send(&mut f, &mut host, &a, 2 * US));
    reply(&mut f, &mut host, 50 * US, 0, 0, 50);
    reply(&mut f, &mut host, 51 * US, 0, 1, 51);
    reply(&mut f, &mut host, 52 * US, 0, 2, 52);
    assert_eq!(
        host.actions,
        vec![
            HostAction::Release { flow: 1 },
            HostAction::Release { flow: 0 }
        ]
    );
    // Each on its own reply's path; the third reply waits for the next packet.
    assert_eq!(tag(&mut f, &mut host, &b, 53 * US), 1);
    assert_eq!(tag(&mut f, &mut host, &a, 53 * US), 2);
    assert!(may_send(&mut f, &mut host, &a, 54 * US));
    assert_eq!(tag(&mut f, &mut host, &a, 54 * US), 3);
}
