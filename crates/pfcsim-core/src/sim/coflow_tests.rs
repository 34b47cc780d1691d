//! Coflows in the data path: the sending NIC's coflow tag in `lb.meta`.

use super::tests::rlb_sim;
use crate::packet::PacketKind;
use std::collections::BTreeMap;

/// 2 leaves x 2 spines x 2 hosts (hosts 0-3), ECMP, line-rate senders: two coflows of two
/// flows and a flow outside coflows.
const SPEC: &str = r#"
    [topology]
    kind = "leaf_spine"
    leaves = 2
    spines = 2
    hosts_per_leaf = 2
    host_link = { rate = "100Gbps", delay = "1us" }
    fabric_link = { rate = "100Gbps", delay = "1us" }
    [cc]
    kind = "none"
    [[traffic]]
    kind = "scripted"
    flows = [{ src = 0, dst = 3, size = "20KB" }]
    [[traffic]]
    kind = "coflow"
    coflows = 2
    flows_per_coflow = 2
    size = "20KB"
    arrival = "together"
"#;

/// The `lb.meta` of the data packets each flow's NIC put on the wire, by flow (every packet of
/// a flow carries the same value, or the test fails).
fn metas(spec: &str, tag: bool) -> (BTreeMap<u32, u32>, Vec<Option<u32>>) {
    let mut sim = rlb_sim(spec);
    sim.tag_coflows = tag;
    let mut seen = BTreeMap::new();
    while sim.step().is_some() {
        for h in &sim.hosts {
            for on in sim.ports[h.port as usize].wire.iter(&sim.arena) {
                let p = sim.arena.get(on);
                if p.kind == PacketKind::Data {
                    let m = *seen.entry(p.flow).or_insert(p.lb.meta);
                    assert_eq!(m, p.lb.meta, "flow {}", p.flow);
                }
            }
        }
    }
    let coflows = sim.flows.iter().map(|f| f.spec.coflow).collect();
    (seen, coflows)
}

#[test]
fn the_nic_tags_data_packets_with_their_coflow_only_when_asked() {
    // The same over TCP (its own sender, lossy fabric): the tag is the NIC's, not RoCE's.
    let tcp = format!("{SPEC}\n[transport]\nkind = \"tcp\"\n[switch.pfc]\nenabled = false\n");
    for spec in [SPEC, tcp.as_str()] {
        let (tagged, coflows) = metas(spec, true);
        assert_eq!(tagged.len(), 5);
        // Flow ids follow start times (all at 0: spec order), coflows are numbered over the
        // run.
        assert_eq!(coflows, vec![None, Some(0), Some(0), Some(1), Some(1)]);
        for (flow, meta) in &tagged {
            assert_eq!(*meta, coflows[*flow as usize].map_or(0, |c| c + 1));
        }
        let (untagged, _) = metas(spec, false);
        assert!(untagged.values().all(|&m| m == 0), "{untagged:?}");
    }
}
