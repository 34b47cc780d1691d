//! TCP (NewReno, DCTCP) and lossy drop-tail switches end to end: each test fails if the
//! mechanism it names is removed. Loss recovery with chosen packets dropped is tested in
//! `src/transport/tcp/tests.rs` (it needs a hook inside the simulation).

use crate::testing::{self, flow, port, sum_flows, until_done};
use pfcsim_core::cc::CcConfig;
use pfcsim_core::sim::{FabricConfig, RunOutput};
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::transport::{ideal_fct, Wire};
use pfcsim_core::transport::{TcpCc, TcpConfig, TransportConfig, TransportKind};
use pfcsim_core::units::{Bytes, Rate, Time};

/// 10 Gbps, 1 us links, as in the TCP-era papers' fabrics.
fn fabric_10g(leaves: u32, spines: u32, hosts_per_leaf: u32) -> Topology {
    Topology::leaf_spine(&LeafSpine::uniform(
        leaves,
        spines,
        hosts_per_leaf,
        Rate::gbps(10),
        Time::from_us(1),
    ))
}

/// Every flow TCP with `tcp`, no RoCE congestion control.
fn tcp_fabric(tcp: TcpConfig) -> FabricConfig {
    FabricConfig {
        cc: CcConfig::None,
        transport: TransportConfig {
            kind: TransportKind::Tcp,
            tcp,
        },
        ..Default::default()
    }
}

/// The wire sizes of TCP segments, as the ideal FCT reads them.
fn tcp_wire(tcp: &TcpConfig) -> Wire {
    Wire {
        payload: tcp.mss.0,
        header: tcp.header_bytes as u64,
        ack: tcp.ack_bytes as u64,
    }
}

/// FCT of `n` full segments alone on `path` under slow start from `w0` segments with one ACK
/// per segment, derived independently of the simulator: segment `j` (1-based) may leave once
/// `ceil((j - w0) / 2)` ACKs are back (each ACK opens the window by one segment and slides
/// it by one) and the NIC has finished segment `j - 1`; each segment's ACK is back one
/// unloaded round trip `d` after it starts (no queue anywhere: every link has the same rate).
fn slow_start_fct(n: u64, w0: u64, path: &[(Rate, Time)], tcp: &TcpConfig) -> Time {
    let wire = tcp_wire(tcp);
    let d = ideal_fct(tcp.mss.0, path, &wire).ps();
    let t = path[0].0.tx_time(tcp.mss.0 + tcp.header_bytes as u64).ps();
    let mut sent = vec![0u64; n as usize + 1]; // sent[j]: start of segment j
    for j in 2..=n {
        let acks_needed = j.saturating_sub(w0).div_ceil(2);
        let released = if acks_needed == 0 {
            0
        } else {
            sent[acks_needed as usize] + d
        };
        sent[j as usize] = (sent[j as usize - 1] + t).max(released);
    }
    Time(sent[n as usize] + d)
}

#[test]
fn a_lone_flow_follows_slow_start_then_runs_at_line_rate() {
    let topo = fabric_10g(2, 1, 1); // hosts 0 and 1 under leaves 2 and 3, spine 4
    let path = [(Rate::gbps(10), Time::from_us(1)); 4];
    for (w0, n) in [(1u32, 100u64), (10, 100), (2, 7_000)] {
        let tcp = TcpConfig {
            init_cwnd: w0,
            ..TcpConfig::default()
        };
        let mss = tcp.mss.0;
        let out = until_done(
            &topo,
            tcp_fabric(tcp.clone()),
            vec![flow(0, 1, n * mss, Time::ZERO)],
            1,
        );
        testing::assert_lossless_and_conserved(&out);
        let f = &out.flows[0];
        assert_eq!(f.transport, "tcp");
        let fct = f.fct_ps.unwrap();
        let expected = slow_start_fct(n, w0 as u64, &path, &tcp).ps();
        assert!(
            fct.abs_diff(expected) <= 1_000,
            "{w0}, {n} segments: fct {fct} ps vs slow start {expected} ps"
        );
        assert_eq!((f.fast_retransmits, f.timeouts, f.dup_acks), (0, 0, 0));
        if w0 == 1 {
            // Slow start from one segment costs round trips: without it the flow would take
            // its ideal FCT (a window open from the start).
            let ideal = f.ideal_fct_ps;
            let rtt = ideal_fct(mss, &path, &tcp_wire(&tcp)).ps();
            assert!(fct > ideal + 2 * rtt, "fct {fct} vs ideal {ideal}");
        }
    }
    let tcp = TcpConfig::default();
    let mss = tcp.mss.0;
    // A long flow ends at line rate: its goodput is within a few round trips of the link's.
    let n = 7_000u64;
    let out = until_done(
        &topo,
        tcp_fabric(tcp.clone()),
        vec![flow(0, 1, n * mss, Time::ZERO)],
        1,
    );
    let f = &out.flows[0];
    let line = Rate::gbps(10)
        .tx_time(n * (mss + tcp.header_bytes as u64))
        .ps();
    let fct = f.fct_ps.unwrap();
    assert!(
        (fct as f64) < 1.02 * line as f64,
        "fct {fct} vs {line} at line rate"
    );
}

/// Hosts 0 and 1 send long flows to host 2, all under one leaf (3), at 10 Gbps; lossy with a
/// drop-tail egress limit of 300 packets; `cc` on every flow. Returns the run and the
/// leaf's port towards host 2.
fn two_long_flows(cc: TcpCc) -> RunOutput {
    let topo = fabric_10g(1, 1, 3);
    let mut cfg = tcp_fabric(TcpConfig {
        cc,
        ..TcpConfig::default()
    });
    cfg.switch.pfc.enabled = false;
    cfg.switch.egress_limit = Some(pfcsim_core::sim::EgressLimit::Packets(300));
    // DCTCP's step marking at K = 65 full-size packets (DCTCP paper, 10 Gbps).
    let k = Bytes(65 * 1518);
    cfg.switch.ecn.kmin = k;
    cfg.switch.ecn.kmax = k;
    cfg.switch.ecn.pmax = 1.0;
    let size = 12_000_000;
    until_done(
        &topo,
        cfg,
        vec![flow(0, 2, size, Time::ZERO), flow(1, 2, size, Time::ZERO)],
        1,
    )
}

#[test]
fn dctcp_holds_the_queue_near_k_while_newreno_fills_the_buffer() {
    let k = 65.0 * 1518.0;
    let limit = 300.0 * 1518.0;
    let dctcp = two_long_flows(TcpCc::Dctcp);
    let newreno = two_long_flows(TcpCc::Newreno);
    for out in [&dctcp, &newreno] {
        testing::assert_complete(out);
        let s = &out.stats;
        assert_eq!(
            s.payload_sent,
            s.bytes_delivered + s.payload_dropped + s.payload_discarded
        );
        // Both keep the bottleneck busy: 24 MB at 10 Gbps is 19.2 ms of payload.
        let end = out
            .flows
            .iter()
            .map(|f| f.finish_ps.unwrap())
            .max()
            .unwrap();
        assert!(end < Time::from_us(21_500).ps(), "finished at {end} ps");
    }
    let q = |out: &RunOutput| port(out, 3, 2).mean_queue_bytes;
    let (qd, qn) = (q(&dctcp), q(&newreno));
    assert!(
        (0.5 * k..1.5 * k).contains(&qd),
        "DCTCP mean queue {qd} B, K = {k} B"
    );
    assert_eq!(dctcp.stats.drops_egress, 0, "DCTCP never reaches the limit");
    assert!(port(&dctcp, 3, 2).ecn_marks > 0);
    assert!(
        qn > 0.4 * limit && qn > 2.0 * qd,
        "NewReno mean queue {qn} B, limit {limit} B"
    );
    assert!(newreno.stats.drops_egress > 0, "NewReno fills the queue");
    assert_eq!(
        port(&newreno, 3, 2).egress_drops,
        newreno.stats.drops_egress
    );
    assert!(port(&newreno, 3, 2).peak_queue_bytes as f64 >= limit - 1518.0);
}

/// One 1 MB flow from host 0 to host 2 over 2 leaves x 4 spines at 100 Gbps, spine 0's
/// uplink at a tenth of the rate (so that packets sprayed over it arrive late), `scheme`,
/// `transport`.
fn sprayed(scheme: &str, transport: &str) -> RunOutput {
    let text = testing::leaf_spine_spec(
        5,
        (2, 4, 2),
        "stop_when_done = false",
        &format!(
            r#"
            [transport]
            kind = "{transport}"

            [[traffic]]
            kind = "scripted"
            flows = [{{ src = 0, dst = 2, size = "1MB" }}]

            [[faults]]
            kind = "link_rate"
            link = ["leaf:0", "spine:0"]
            rate = "10Gbps"

            [lb]
            scheme = "{scheme}"
            "#
        ),
    );
    testing::run_text(&text, "tcp.toml")
}

#[test]
fn reordering_by_rps_triggers_spurious_fast_retransmits_and_go_back_n() {
    let tcp = sprayed("rps", "tcp");
    testing::assert_lossless_and_conserved(&tcp);
    let f = &tcp.flows[0];
    assert!(f.ooo_arrivals > 0);
    assert!(f.dup_acks >= 3, "reordering makes duplicate ACKs");
    assert!(f.fast_retransmits > 0, "and fast retransmits");
    assert!(f.retransmitted_bytes > 0, "spurious: nothing was lost");
    assert_eq!(f.timeouts, 0);
    // The same case under RoCE: NACKs and go-back-N.
    let roce = sprayed("rps", "roce");
    testing::assert_lossless_and_conserved(&roce);
    assert_eq!(roce.flows[0].transport, "roce");
    assert!(roce.flows[0].nacks_received > 0);
    assert!(roce.flows[0].retransmitted_bytes > 0);
    // ECMP keeps the flow on one path: no reordering, nothing sent twice.
    let ecmp = sprayed("ecmp", "tcp");
    let f = &ecmp.flows[0];
    assert_eq!((f.ooo_arrivals, f.dup_acks, f.fast_retransmits), (0, 0, 0));
    assert_eq!(f.retransmitted_bytes, 0);
}

#[test]
fn a_lossy_tcp_run_conserves_bytes_and_packets() {
    let text = testing::leaf_spine_spec(
        3,
        (2, 2, 4),
        "stop_when_done = true",
        &format!(
            r#"
            [transport]
            kind = "tcp"

            [switch.pfc]
            enabled = false

            [switch]
            egress_limit = {{ packets = 20 }}
            {}
            "#,
            testing::poisson(0.6, "200us")
        ),
    );
    let out = testing::run_text(&text, "tcp.toml");
    let s = &out.stats;
    assert!(s.drops_egress > 0, "the limit drops packets");
    assert_eq!(s.drops_buffer, 0);
    assert_eq!(s.flows_finished, s.flows_total, "every flow finishes");
    let total: u64 = out.flows.iter().map(|f| f.size_bytes).sum();
    assert_eq!(s.bytes_delivered, total, "bytes delivered = flow sizes");
    assert_eq!(s.bytes_offered, total);
    assert_eq!(
        s.payload_sent,
        s.bytes_delivered + s.payload_dropped + s.payload_discarded
    );
    // Every data packet sent was dropped or reached its receiver (only data is dropped).
    assert_eq!(
        sum_flows(&out, |f| f.packets_sent),
        sum_flows(&out, |f| f.packets_received) + s.packets_dropped
    );
    let egress: u64 = out.ports.iter().map(|p| p.egress_drops).sum();
    assert_eq!(egress, s.drops_egress, "drops are counted per port");
    assert!(s.loss_rate > 0.0 && s.loss_rate < 1.0);
    let recovered: u64 = sum_flows(&out, |f| f.fast_retransmits as u64 + f.timeouts as u64);
    assert!(recovered > 0, "losses are recovered");
    assert!(out.flows.iter().all(|f| f.transport == "tcp"));
    assert_eq!(out.live_packets, 0);
}

#[test]
fn roce_and_tcp_flows_share_a_fabric() {
    let text = testing::leaf_spine_spec(
        3,
        (2, 2, 4),
        "stop_when_done = true",
        r#"
        [[traffic]]
        kind = "background"
        pairs = [[0, 4], [1, 5]]
        size = "2MB"
        priority = 3

        [[traffic]]
        kind = "background"
        pairs = [[2, 6], [3, 7]]
        size = "2MB"
        priority = 4
        transport = "tcp"
        "#,
    );
    let out = testing::run_text(&text, "mixed.toml");
    testing::assert_lossless_and_conserved(&out);
    let kinds: Vec<(u16, &str)> = out
        .flows
        .iter()
        .map(|f| (f.generator, f.transport))
        .collect();
    for (generator, transport) in kinds {
        assert_eq!(transport, if generator == 1 { "tcp" } else { "roce" });
    }
}

#[test]
fn transport_settings_are_checked_before_the_run() {
    let base = testing::leaf_spine_spec(1, (2, 2, 2), "", &testing::poisson(0.3, "200us"));
    let e = testing::spec_error(&format!("{base}\n[transport]\nkind = \"udp\"\n"), "t.toml");
    assert!(e.contains("transport.kind") && e.contains("`roce`"), "{e}");
    let e = testing::spec_error(
        &format!("{base}\n[transport]\nkind = \"tcp\"\n[transport.tcp]\ncc = \"dctcp\"\n[switch.ecn]\nenabled = false\n"),
        "t.toml",
    );
    assert!(
        e.contains("transport.tcp.cc") && e.contains("switch.ecn"),
        "{e}"
    );
    let e = testing::spec_error(
        &format!("{base}\n[switch]\negress_limit = {{ packets = 50 }}\n"),
        "t.toml",
    );
    assert!(
        e.contains("switch.egress_limit") && e.contains("pfc.enabled = false"),
        "{e}"
    );
    let e = testing::spec_error(
        &format!("{base}\n[transport.tcp]\nrto_min = \"20ms\"\n"),
        "t.toml",
    );
    assert!(e.contains("rto_min <= rto_initial"), "{e}");
    let e = testing::spec_error(
        &format!("{base}\n[transport.tcp]\nmss = \"0B\"\n"),
        "t.toml",
    );
    assert!(e.contains("transport.tcp.mss"), "{e}");
    // A spec that does not mention the transport resolves as before TCP existed.
    let sc = testing::scenario(&base, "t.toml");
    let resolved = sc.spec.resolved_toml();
    assert!(!resolved.contains("transport"), "{resolved}");
    assert!(!resolved.contains("egress_limit"), "{resolved}");
}

#[test]
fn every_scheme_carries_tcp_flows_to_the_end_over_a_lossy_fabric() {
    // Host-side schemes read TCP's signals (ECN echoes, RTTs, fast retransmits, timeouts);
    // Presto's resequencing buffer hands TCP in-order data or, after its timeout, what it
    // holds (TCP buffers it). Switch-side schemes see TCP data like any data.
    for scheme in [
        "ecmp", "presto", "hermes", "clove", "letflow", "drill", "conga",
    ] {
        let text = testing::leaf_spine_spec(
            7,
            (2, 2, 4),
            "stop_when_done = true",
            &format!(
                r#"
                [transport]
                kind = "tcp"
                [transport.tcp]
                cc = "dctcp"

                [switch.pfc]
                enabled = false
                [switch.ecn]
                kmin = "100KB"
                kmax = "100KB"
                pmax = 1.0

                [lb]
                scheme = "{scheme}"
                {}
                "#,
                testing::poisson(0.5, "100us")
            ),
        );
        let out = testing::run_text(&text, "schemes.toml");
        let s = &out.stats;
        assert_eq!(
            s.flows_finished, s.flows_total,
            "{scheme}: every flow finishes"
        );
        let total: u64 = out.flows.iter().map(|f| f.size_bytes).sum();
        assert_eq!(s.bytes_delivered, total, "{scheme}");
        assert_eq!(
            s.payload_sent,
            s.bytes_delivered + s.payload_dropped + s.payload_discarded,
            "{scheme}"
        );
        assert!(out.flows.iter().all(|f| f.transport == "tcp"));
    }
}
