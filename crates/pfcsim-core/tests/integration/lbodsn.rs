//! LBoDSN end to end: prediction before the PAUSE, the stale-CNP filter, reordering and the
//! placement of new flows (`docs/schemes/lbodsn.md`). Each test names the mechanism whose
//! removal it catches.

use crate::testing::{
    self, assert_lossless_and_conserved, flow, node_sum, sum_flows as sum, with_lb,
};
use pfcsim_core::lb::{LbConfig, LbodsnConfig};
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

/// Six 1 MB flows from three leaves into one host, all starting on the first spine, DCQCN.
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
