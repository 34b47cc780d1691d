//! LBoDSN end to end: prediction before the PAUSE, the stale-CNP filter, reordering and the
//! placement of new flows (`docs/schemes/lbodsn.md`). Each test names the mechanism whose
//! removal it catches.

use crate::testing::{
    self, assert_complete, assert_lossless_and_conserved, flow, node_sum, run_text,
    sum_flows as sum, with_lb,
};
use pfcsim_core::lb::{LbConfig, LbodsnConfig};
use pfcsim_core::metrics::FlowRecord;
use pfcsim_core::sim::{FabricConfig, RunOutput};
use pfcsim_core::topology::{LeafSpine, Topology};
use pfcsim_core::traffic::FlowSpec;
use pfcsim_core::units::{Rate, Time};

/// Destination leaf of the incasts (hosts 0..4 are its hosts).
const DST_LEAF: u32 = 16;

/// Four leaves of four hosts on 25 Gbps links, three spines, 100 Gbps / 1 us fabric links:
/// hosts 0..16, leaves 16..20, spines 20..23. A leaf's ingress from a spine fills when more
/// than one host's worth arrives for one of its hosts.
fn incast_fabric() -> Topology {
    Topology::leaf_spine(&LeafSpine {
        host_rate: Rate::gbps(25),
        ..LeafSpine::uniform(4, 3, 4, Rate::gbps(100), Time::from_us(1))
    })
}

/// `n` senders on leaves 1..3 (hosts 4..16) to host 0, each `size` bytes, all pinned on the
/// first spine (path tag 1: the source leaf's first uplink), starting 100 ns apart.
fn incast(n: u32, size: u64) -> Vec<FlowSpec> {
    (0..n)
        .map(|i| FlowSpec {
            path_tag: 1,
            ..flow(4 + i, 0, size, Time::from_ns(100 * i as u64))
        })
        .collect()
}

fn lbodsn(cfg: LbodsnConfig) -> LbConfig {
    LbConfig::Lbodsn(cfg)
}

fn run(cfg: FabricConfig, flows: Vec<FlowSpec>) -> RunOutput {
    testing::drain(&incast_fabric(), cfg, flows, 1)
}

fn report(name: &str, out: &RunOutput) {
    eprintln!(
        "{name}: pauses(dst) {} ooo {} changes {} fct {:?} counters {:?}",
        node_sum(out, DST_LEAF, |p| p.pfc_pauses_sent),
        sum(out, |f| f.ooo_arrivals),
        sum(out, |f| f.path_changes as u64),
        out.flows
            .iter()
            .map(|f| f.fct_ps.unwrap_or(0) / 1_000_000)
            .collect::<Vec<_>>(),
        out.stats.scheme_counters,
    );
}

fn counter(out: &RunOutput, name: &str) -> u64 {
    out.stats.counter(&format!("lbodsn.{name}"))
}

/// Six 1 MB flows from two leaves into one host, all starting on the first spine, DCQCN.
fn dcqcn_incast(cfg: LbodsnConfig) -> RunOutput {
    let out = run(with_lb(lbodsn(cfg)), incast(6, 1_000_000));
    assert_lossless_and_conserved(&out);
    assert_eq!(out.held_packets, 0, "no packet is left in a reorder queue");
    out
}

/// CNPs received by the senders of the flows that changed path.
fn moved_cnps(out: &RunOutput) -> u64 {
    let moved = out.flows.iter().filter(|f| f.path_changes > 0);
    moved.map(|f| f.cnps_received as u64).sum()
}

/// The destination leaf sends its first FCN before its first PAUSE: the ingress from the
/// spine fills at 75 Gbps and eq. 1 fires below the XOFF threshold. Without prediction
/// (`predict = false`: an FCN only once the ingress is pausing) the PAUSE comes first.
/// Fails if the prediction is removed or never fires.
#[test]
fn the_first_fcn_leaves_before_the_first_pause() {
    let on = dcqcn_incast(LbodsnConfig::default());
    report("predict", &on);
    assert!(counter(&on, "fcns") >= 1);
    assert!(
        counter(&on, "fcns_before_pause") >= 1,
        "the first FCN came after a PAUSE"
    );
    assert!(counter(&on, "moves") >= 1);
    let off = dcqcn_incast(LbodsnConfig {
        predict: false,
        ..Default::default()
    });
    report("no predict", &off);
    assert!(counter(&off, "fcns") >= 1);
    assert_eq!(counter(&off, "fcns_before_pause"), 0);
    assert!(node_sum(&off, DST_LEAF, |p| p.pfc_pauses_sent) >= 1);
}

/// `cnp_t = 1` drops every stale CNP; `max_p = 0` (with `cnp_t` beyond the stale CNPs of a
/// move) drops none; `cnp_filter = false` sees none. Fails if the filter's rule (eq. 6-7) or
/// its staleness (NEW and its reply) is removed.
#[test]
fn the_stale_cnp_filter_follows_t_and_max_p() {
    let all = dcqcn_incast(LbodsnConfig {
        cnp_t: 1,
        ..Default::default()
    });
    report("T = 1", &all);
    assert!(counter(&all, "stale_cnps") >= 1);
    assert_eq!(
        counter(&all, "stale_cnps_dropped"),
        counter(&all, "stale_cnps")
    );
    let none = dcqcn_incast(LbodsnConfig {
        max_p: 0.0,
        cnp_t: 1_000_000,
        ..Default::default()
    });
    report("max_p = 0", &none);
    assert!(counter(&none, "stale_cnps") >= 1);
    assert_eq!(counter(&none, "stale_cnps_dropped"), 0);
    let off = dcqcn_incast(LbodsnConfig {
        cnp_filter: false,
        ..Default::default()
    });
    assert_eq!(counter(&off, "stale_cnps"), 0);
    // Every move is answered: staleness ends with the reply to the NEW packet.
    assert_eq!(counter(&all, "new_replies"), counter(&all, "tails"));
}

/// The filter acts on the moved flows' senders: with `cnp_t = 1` they receive fewer CNPs than
/// with `cnp_filter = false` (the flag is cleared at the source leaf's host-facing egress
/// before the ACK reaches the NIC). Their rate is not measurably higher in this incast: the
/// only queue that fills the destination leaf's ingress is the receiver's egress, shared by
/// the old and the new path (`docs/schemes/lbodsn.md`). Fails if dropping a stale CNP does not
/// reach the sender.
#[test]
fn the_moved_flows_senders_see_fewer_cnps_with_the_filter_on() {
    let on = dcqcn_incast(LbodsnConfig {
        cnp_t: 1,
        ..Default::default()
    });
    let off = dcqcn_incast(LbodsnConfig {
        cnp_filter: false,
        ..Default::default()
    });
    let (c_on, c_off) = (moved_cnps(&on), moved_cnps(&off));
    assert!(counter(&on, "stale_cnps_dropped") >= 1);
    assert!(c_on < c_off, "filter {c_on} CNPs, none {c_off}");
}

/// Moved flows arrive in order with the reorder queues (the TAIL holds the new path's
/// packets), and out of order without them (`reorder_queues = 0`). Fails if the TAIL, the
/// epochs or the holding are removed.
#[test]
fn reordering_hides_the_moves_from_the_receivers() {
    let with = dcqcn_incast(LbodsnConfig::default());
    assert!(counter(&with, "moves") >= 1);
    assert!(counter(&with, "held") >= 1);
    assert_eq!(sum(&with, |f| f.ooo_arrivals), 0);
    let without = dcqcn_incast(LbodsnConfig {
        reorder_queues: 0,
        ..Default::default()
    });
    assert!(counter(&without, "moves") >= 1);
    assert!(sum(&without, |f| f.ooo_arrivals) > 0);
}

/// Same seed, same run.
#[test]
fn lbodsn_runs_are_deterministic() {
    let a = dcqcn_incast(LbodsnConfig::default());
    let b = dcqcn_incast(LbodsnConfig::default());
    assert_eq!(a.stats.fingerprint, b.stats.fingerprint);
}

/// The fabric of [`incast_fabric`] as a spec (hosts 0..16, leaves 16..20, spines 20..23), with
/// a static XOFF threshold of 100 KB (`Q_th` about 60 KB) and no congestion control, so that
/// the senders keep their line rate; LBoDSN with the body `lb` added to its `[lb]` table and
/// at most one FCN per ingress queue in the run (`fcn_gap = "1ms"`), so that each ingress
/// queue's first trigger is its only decision. Three flows into host 0, each pinned on a
/// spine: A (host 4, leaf 1) and C (host 8, leaf 2) of 1 MB from the start, on spines 0 and
/// 1, and B (host 12, leaf 3) of `b_size` on spine 0 from 33 us. Host 0's link takes a third
/// of what arrives for it, so its ingress from spine 0 fills: by A alone at first, at 1.56
/// B/ns, then from 33 us by A and B at once; it reaches `Q_th` about 2 us after B's first
/// packets arrive, when A holds about nine tenths of it and B the rest. `more` adds flows
/// to the scripted list, `rest` further tables.
fn two_flows_spec(lb: &str, b_size: &str, more: &str, rest: &str) -> String {
    format!(
        "seed = 1\n\
         [topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 3\nhosts_per_leaf = 4\n\
         host_link = {{ rate = \"25Gbps\", delay = \"1us\" }}\n\
         fabric_link = {{ rate = \"100Gbps\", delay = \"1us\" }}\n\
         [switch.pfc]\nstatic_threshold = \"100KB\"\n\
         [cc]\nkind = \"none\"\n\
         [lb]\nscheme = \"lbodsn\"\nfcn_gap = \"1ms\"\n{lb}\n\
         [[traffic]]\nkind = \"scripted\"\nflows = [\n\
         {{ src = 4, dst = 0, size = \"1MB\", path = [0] }},\n\
         {{ src = 8, dst = 0, size = \"1MB\", path = [1] }},\n\
         {{ src = 12, dst = 0, size = \"{b_size}\", start = \"33us\", path = [0] }},\n\
         {more}]\n{rest}\n"
    )
}

/// The scripted flow from host `src` to host `dst` (there is one in these tests).
fn flow_of(out: &RunOutput, src: u32, dst: u32) -> &FlowRecord {
    let mut it = out.flows.iter().filter(|f| f.src == src && f.dst == dst);
    let f = it.next().expect("the flow");
    assert!(it.next().is_none(), "one flow from {src} to {dst}");
    f
}

/// Of the two flows in the destination leaf's ingress queue from spine 0, only A, which holds
/// most of its bytes (about nine tenths), is named and moves, although an FCN may name two
/// (`flows_per_fcn = 2`); B keeps its path. Without `F_cc` (`f_cc = false`: every flow with
/// bytes is congested) the same trigger names both and both move. Fails if `F_cc` (eq. 3) is
/// removed, or if the trigger fires before B is in the queue (then B moves in neither run).
#[test]
fn of_two_flows_in_an_ingress_queue_only_the_one_with_most_bytes_moves() {
    let run = |f_cc: bool| {
        let text = two_flows_spec(&format!("flows_per_fcn = 2\nf_cc = {f_cc}"), "1MB", "", "");
        let out = run_text(&text, "lbodsn-f_cc.toml");
        assert_complete(&out);
        report(&format!("f_cc = {f_cc}"), &out);
        out
    };
    let on = run(true);
    let (a, b) = (flow_of(&on, 4, 0), flow_of(&on, 12, 0));
    assert!(a.path_changes > 0, "A moves");
    assert_eq!(b.path_changes, 0, "B keeps its path");
    let off = run(false);
    let (a, b) = (flow_of(&off, 4, 0), flow_of(&off, 12, 0));
    assert!(a.path_changes > 0, "A moves without F_cc");
    assert!(b.path_changes > 0, "B moves too without F_cc");
}

/// Bytes leaf 1 (node 17) sent to spine 0 (node 20) in `[from, to)`, from a `link_util`
/// monitor of 10 us intervals.
fn leaf1_to_spine0(out: &RunOutput, from: Time, to: Time) -> u64 {
    let rows = out.monitors.as_ref().and_then(|m| m.link_util.as_ref());
    let rows = rows.expect("the run has a link_util monitor");
    let interval = Time::from_us(10).ps();
    rows.iter()
        .filter(|r| r.node == 17 && r.peer == 20)
        .filter(|r| r.time_ps - interval >= from.ps() && r.time_ps <= to.ps())
        .map(|r| r.tx_bytes)
        .sum()
}

/// New flows avoid a path their source leaf holds a tag-1 FCN for, and take it again once a
/// tag-0 FCN clears it. The first trigger of the destination leaf's ingress queue from spine
/// 0 names A (leaf 1) and flags (destination leaf, uplink 0) at leaf 1; A moves off it, and
/// the queue stays above `Q_th` while the incast lasts; when it drains, the episode ends and
/// its tag 0 clears the flag, which would otherwise outlive the run (`fcn_ttl = "10ms"`).
/// Nine 20 KB flows from leaf 1's other hosts to the destination leaf's other hosts start at
/// 100 us, while the flag is up: none takes uplink 0 (leaf 1 sends nothing to spine 0 from
/// 80 to 300 us). Nine more start at 1.2 ms, after the clear: some take it. Fails if new
/// flows ignore the tag-1 classes (each of the first nine would take uplink 0 with
/// probability 1/3) or if tag 0 does not clear the path.
#[test]
fn new_flows_avoid_a_tag_1_path_until_tag_0_clears_it() {
    let mut more = String::new();
    for start in ["100us", "1200us"] {
        for src in 5..8 {
            for dst in 1..4 {
                more += &format!(
                    "{{ src = {src}, dst = {dst}, size = \"20KB\", start = \"{start}\" }},\n"
                );
            }
        }
    }
    let text = two_flows_spec(
        "fcn_ttl = \"10ms\"",
        "300KB",
        &more,
        "[[monitor]]\nkind = \"link_util\"\nnodes = [\"leaf:1\"]\npeers = [\"spine:0\"]\n\
         interval = \"10us\"\nend = \"2ms\"\n",
    );
    let out = run_text(&text, "lbodsn-new-flows.toml");
    assert_complete(&out);
    report("new flows", &out);
    let us = Time::from_us;
    let busy: Vec<(u64, u64)> = (0..150)
        .map(|i| (10 * i, leaf1_to_spine0(&out, us(10 * i), us(10 * i + 10))))
        .filter(|&(_, bytes)| bytes > 0)
        .collect();
    eprintln!("leaf 1 -> spine 0 (us, bytes): {busy:?}");
    assert!(counter(&out, "moves") >= 1);
    assert!(counter(&out, "clears_received") >= 1);
    assert_eq!(leaf1_to_spine0(&out, us(80), us(300)), 0);
    assert!(leaf1_to_spine0(&out, us(1200), us(1500)) > 0);
}
