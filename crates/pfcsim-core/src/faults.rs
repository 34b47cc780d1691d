//! Faults: links that go down or slow down, switches that silently drop packets or black-hole
//! chosen source/destination pairs. The `[[faults]]` entries of a spec, checked against the
//! topology and resolved to node ids (`resolve`); the simulation applies them (`sim/faults.rs`).
//!
//! Modelled, each at a time `at` or from the start:
//! * `link_down`: a switch-to-switch link stops in both directions. Packets on the wire and
//!   queued for it are lost; its two switches stop routing over it at once, every other switch
//!   after `reconverge` (the routing protocol's convergence time). Meanwhile a switch left
//!   without a route to a destination drops the packet (cause `no_route`).
//! * `link_rate`: a switch-to-switch link's rate changes in both directions (a degraded optic
//!   or a lane down); the packet being serialized finishes at the old rate.
//! * `silent_drop`: a switch drops each arriving packet (data, ACK, NACK, CNP, scheme message)
//!   with probability `probability`, on all ports or only on those from the `from` neighbours.
//! * `black_hole`: a switch drops the packets whose (source host, destination host) is one of
//!   `pairs` (ordered: a flow's data from src to dst, and the ACKs of flows from dst to src),
//!   or of `random_pairs` pairs drawn by seed among the host pairs whose shortest paths can
//!   cross the switch; each such packet with probability `fraction`.
//!
//! Not modelled: PFC frames are never lost (they are link-layer frames, and a lost RESUME would
//! pause a port forever, since PAUSE has no quanta here); host links do not fail; links do not
//! come back up.
//!
//! Nodes are named as [`TopologySpec::node_named`] reads them: `"node:<id>"` in any
//! topology; in a leaf-spine also `"host:<i>"`, `"leaf:<i>"`, `"spine:<i>"`; in a fat-tree
//! `"host:<i>"`, `"edge:<i>"`, `"agg:<i>"`, `"core:<i>"` (pod-major, from 0).

use crate::check::check_range;
use crate::engine::{rng_stream, StreamKind};
use crate::topology::{Topology, TopologySpec};
use crate::units::{Rate, Time};
use serde::{Deserialize, Serialize};
use std::ops::Bound::{Excluded, Included};

/// One `[[faults]]` entry of a spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum FaultSpec {
    /// A switch-to-switch link goes down.
    LinkDown {
        /// The link's two switches.
        link: [String; 2],
        /// When (unset: from the start).
        at: Option<Time>,
        /// How long the switches not attached to the link keep routing over it.
        #[serde(default)]
        reconverge: Time,
    },
    /// A switch-to-switch link's rate changes.
    LinkRate {
        link: [String; 2],
        rate: Rate,
        at: Option<Time>,
    },
    /// A switch drops arriving packets at random.
    SilentDrop {
        switch: String,
        probability: f64,
        /// Only packets arriving from these neighbours (empty: from all).
        #[serde(default)]
        from: Vec<String>,
        at: Option<Time>,
    },
    /// A switch drops the packets of chosen (source, destination) host pairs.
    BlackHole {
        switch: String,
        #[serde(default)]
        pairs: Vec<[String; 2]>,
        /// Pairs drawn by seed, in addition to `pairs`.
        #[serde(default)]
        random_pairs: u32,
        /// Share of the pairs' packets dropped (each at random).
        #[serde(default = "all")]
        fraction: f64,
        at: Option<Time>,
    },
}

crate::tagged::internally_tagged!(FaultSpec, "kind");

fn all() -> f64 {
    1.0
}

/// A fault resolved to node ids.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    LinkDown {
        a: u32,
        b: u32,
        reconverge: Time,
    },
    LinkRate {
        a: u32,
        b: u32,
        rate: Rate,
    },
    SilentDrop {
        switch: u32,
        probability: f64,
        /// Neighbour node ids whose packets are affected (empty: all).
        from: Vec<u32>,
    },
    BlackHole {
        switch: u32,
        /// (source host, destination host), sorted.
        pairs: Vec<(u32, u32)>,
        fraction: f64,
    },
}

/// A fault and when it starts (`Time::ZERO`: from the start).
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledFault {
    pub at: Time,
    pub fault: Fault,
}

/// Checks the `[[faults]]` entries against the topology and resolves them. Errors name the
/// entry and key (`faults[2].link: ...`) and say what would be valid.
pub fn resolve(
    specs: &[FaultSpec],
    topology_spec: &TopologySpec,
    topology: &Topology,
    seed: u64,
) -> Result<Vec<ScheduledFault>, String> {
    let mut out = Vec::with_capacity(specs.len());
    let mut down: Vec<(u32, u32)> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let key = |k: &str| format!("faults[{i}].{k}");
        let node = |k: &str, name: &str| topology_spec.node_named(name, topology, &key(k));
        let switch = |k: &str, name: &str| {
            let n = node(k, name)?;
            if topology.is_switch[n as usize] {
                Ok(n)
            } else {
                Err(format!("{}: {name} is a host; name a switch", key(k)))
            }
        };
        let link = |names: &[String; 2]| -> Result<(u32, u32), String> {
            let (a, b) = (switch("link", &names[0])?, switch("link", &names[1])?);
            if a == b || !linked(topology, a, b) {
                return Err(format!(
                    "{}: there is no link between {} and {}",
                    key("link"),
                    names[0],
                    names[1]
                ));
            }
            Ok((a, b))
        };
        let (at, fault) = match spec {
            FaultSpec::LinkDown {
                link: names,
                at,
                reconverge,
            } => {
                let (a, b) = link(names)?;
                down.push((a, b));
                if let Some((from, to)) = disconnected(topology, &down) {
                    return Err(format!(
                        "{}: with {} - {} down, host {from} cannot reach host {to}; \
                         pfcsim models link failures that leave the hosts connected",
                        key("link"),
                        names[0],
                        names[1]
                    ));
                }
                let reconverge = *reconverge;
                (*at, Fault::LinkDown { a, b, reconverge })
            }
            FaultSpec::LinkRate {
                link: names,
                rate,
                at,
            } => {
                let (a, b) = link(names)?;
                if rate.0 == 0 {
                    return Err(format!(
                        "{}: a rate must be above 0; to take the link out use kind = \"link_down\"",
                        key("rate")
                    ));
                }
                (*at, Fault::LinkRate { a, b, rate: *rate })
            }
            FaultSpec::SilentDrop {
                switch: name,
                probability,
                from,
                at,
            } => {
                let s = switch("switch", name)?;
                let example = "(a probability, e.g. 0.0035 for 0.35%)";
                check_range(&key("probability"), *probability, 0.0..=1.0, example)?;
                let mut neighbours = Vec::with_capacity(from.len());
                for (j, n) in from.iter().enumerate() {
                    let id = node(&format!("from[{j}]"), n)?;
                    if !linked(topology, s, id) {
                        return Err(format!(
                            "{}: {n} is not a neighbour of {name}",
                            key(&format!("from[{j}]"))
                        ));
                    }
                    neighbours.push(id);
                }
                let fault = Fault::SilentDrop {
                    switch: s,
                    probability: *probability,
                    from: neighbours,
                };
                (*at, fault)
            }
            FaultSpec::BlackHole {
                switch: name,
                pairs,
                random_pairs,
                fraction,
                at,
            } => {
                let s = switch("switch", name)?;
                let unit = (Excluded(0.0), Included(1.0));
                let example = "(a fraction of packets, e.g. 0.5 for half)";
                check_range(&key("fraction"), *fraction, unit, example)?;
                let mut chosen = Vec::new();
                for (j, [src, dst]) in pairs.iter().enumerate() {
                    let k = format!("pairs[{j}]");
                    let (a, b) = (node(&k, src)?, node(&k, dst)?);
                    if topology.is_switch[a as usize] || topology.is_switch[b as usize] || a == b {
                        return Err(format!(
                            "{}: [{src}, {dst}] is not a pair of two different hosts",
                            key(&k)
                        ));
                    }
                    chosen.push((a, b));
                }
                if *random_pairs > 0 {
                    let eligible = pairs_through(topology, s);
                    let want = *random_pairs as usize;
                    if want > eligible.len() {
                        return Err(format!(
                            "{}: {want} pairs asked, but only {} host pairs can cross {name}",
                            key("random_pairs"),
                            eligible.len()
                        ));
                    }
                    let mut rng = rng_stream(seed, StreamKind::Fault, i as u64);
                    for idx in rand::seq::index::sample(&mut rng, eligible.len(), want) {
                        chosen.push(eligible[idx]);
                    }
                }
                if chosen.is_empty() {
                    return Err(format!(
                        "{}: no pair to black-hole; give pairs = [[\"host:0\", \"host:9\"]] or \
                         random_pairs = N",
                        key("pairs")
                    ));
                }
                chosen.sort_unstable();
                chosen.dedup();
                let fault = Fault::BlackHole {
                    switch: s,
                    pairs: chosen,
                    fraction: *fraction,
                };
                (*at, fault)
            }
        };
        out.push(ScheduledFault {
            at: at.unwrap_or(Time::ZERO),
            fault,
        });
    }
    Ok(out)
}

fn linked(topology: &Topology, a: u32, b: u32) -> bool {
    topology
        .links
        .iter()
        .any(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
}

/// A pair of hosts that cannot reach each other once the links `down` are gone, if any.
fn disconnected(topology: &Topology, down: &[(u32, u32)]) -> Option<(u32, u32)> {
    let adj = adjacency_without(topology, down);
    let from = topology.hosts[0];
    let dist = topology.hop_distances_with(&adj, from);
    topology
        .hosts
        .iter()
        .find(|&&h| dist[h as usize] == u32::MAX)
        .map(|&to| (from, to))
}

fn adjacency_without(topology: &Topology, down: &[(u32, u32)]) -> Vec<Vec<(u32, usize)>> {
    let mut adj = topology.adjacency();
    for (node, list) in adj.iter_mut().enumerate() {
        list.retain(|&(peer, _)| {
            !down
                .iter()
                .any(|&(a, b)| (a, b) == (node as u32, peer) || (b, a) == (node as u32, peer))
        });
    }
    adj
}

/// The ordered host pairs (src, dst on different ToRs) whose shortest paths can cross switch
/// `s`: dist(src, s) + dist(s, dst) = dist(src, dst). For a ToR `s`, the pairs from or to its
/// hosts.
fn pairs_through(topology: &Topology, s: u32) -> Vec<(u32, u32)> {
    let adj = topology.adjacency();
    let via = topology.hop_distances_with(&adj, s);
    let mut out = Vec::new();
    for &src in &topology.hosts {
        let from_src = topology.hop_distances_with(&adj, src);
        for &dst in &topology.hosts {
            if src == dst || topology.tor_of[src as usize] == topology.tor_of[dst as usize] {
                if src != dst && topology.tor_of[src as usize] == s {
                    out.push((src, dst));
                }
                continue;
            }
            let (a, b, direct) = (via[src as usize], via[dst as usize], from_src[dst as usize]);
            if a != u32::MAX && b != u32::MAX && a + b == direct {
                out.push((src, dst));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::topology::test_leaf_spine as fabric;

    fn parse(toml_text: &str) -> Vec<FaultSpec> {
        #[derive(Deserialize)]
        struct Faults {
            faults: Vec<FaultSpec>,
        }
        toml::from_str::<Faults>(toml_text).unwrap().faults
    }

    fn resolved(toml_text: &str) -> Result<Vec<ScheduledFault>, String> {
        let (spec, topo) = fabric();
        resolve(&parse(toml_text), &spec, &topo, 7)
    }

    #[test]
    fn names_resolve_to_the_builder_node_ids() {
        let faults = resolved(
            r#"
            [[faults]]
            kind = "link_rate"
            link = ["leaf:1", "spine:0"]
            rate = "10Gbps"
            at = "1ms"
            [[faults]]
            kind = "silent_drop"
            switch = "node:7"
            probability = 0.0035
            from = ["leaf:0"]
            "#,
        )
        .unwrap();
        assert_eq!(faults[0].at, Time::from_ms(1));
        assert_eq!(
            faults[0].fault,
            Fault::LinkRate {
                a: 5,
                b: 6,
                rate: Rate::gbps(10)
            }
        );
        assert_eq!(faults[1].at, Time::ZERO);
        assert_eq!(
            faults[1].fault,
            Fault::SilentDrop {
                switch: 7,
                probability: 0.0035,
                from: vec![4]
            }
        );
    }

    #[test]
    fn random_pairs_are_drawn_by_seed_among_pairs_crossing_the_switch() {
        let text = r#"
            [[faults]]
            kind = "black_hole"
            switch = "spine:1"
            random_pairs = 8
            fraction = 0.5
        "#;
        let Fault::BlackHole {
            pairs, fraction, ..
        } = resolved(text).unwrap()[0].fault.clone()
        else {
            panic!("a black hole")
        };
        assert_eq!(fraction, 0.5);
        // Every inter-leaf ordered pair (8 of them) crosses a spine: all are taken.
        assert_eq!(
            pairs,
            vec![
                (0, 2),
                (0, 3),
                (1, 2),
                (1, 3),
                (2, 0),
                (2, 1),
                (3, 0),
                (3, 1)
            ]
        );
        let (spec, topo) = fabric();
        let few = parse(&text.replace("random_pairs = 8", "random_pairs = 3"));
        let a = resolve(&few, &spec, &topo, 1).unwrap();
        let b = resolve(&few, &spec, &topo, 1).unwrap();
        let c = resolve(&few, &spec, &topo, 2).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c, "another seed draws other pairs (almost surely)");
        // A leaf is crossed by the pairs from or to its hosts.
        assert_eq!(pairs_through(&topo, 4).len(), 2 * 2 + 2 + 2 * 2);
    }

    #[test]
    fn bad_faults_name_the_key_and_the_fix() {
        let cases = [
            (
                "kind = \"link_down\"\nlink = [\"leaf:0\", \"leaf:1\"]",
                "faults[0].link: there is no link between leaf:0 and leaf:1",
            ),
            (
                "kind = \"link_down\"\nlink = [\"host:0\", \"leaf:0\"]",
                "faults[0].link: host:0 is a host; name a switch",
            ),
            (
                "kind = \"link_rate\"\nlink = [\"leaf:0\", \"spine:9\"]\nrate = \"1Gbps\"",
                "faults[0].link: \"spine:9\" names no node of this topology; use node:<id>, \
                 host:0..3, leaf:0..1, spine:0..1",
            ),
            (
                "kind = \"silent_drop\"\nswitch = \"spine:0\"\nprobability = 1.5",
                "faults[0].probability: 1.5 is out of range; use 0..=1 (a probability",
            ),
            (
                "kind = \"silent_drop\"\nswitch = \"spine:0\"\nprobability = 0.1\nfrom = [\"spine:1\"]",
                "faults[0].from[0]: spine:1 is not a neighbour of spine:0",
            ),
            (
                "kind = \"black_hole\"\nswitch = \"spine:0\"",
                "faults[0].pairs: no pair to black-hole",
            ),
            (
                "kind = \"black_hole\"\nswitch = \"spine:0\"\npairs = [[\"host:0\", \"host:0\"]]",
                "faults[0].pairs[0]: [host:0, host:0] is not a pair of two different hosts",
            ),
            (
                "kind = \"black_hole\"\nswitch = \"spine:0\"\nrandom_pairs = 9",
                "faults[0].random_pairs: 9 pairs asked, but only 8 host pairs can cross spine:0",
            ),
            (
                "kind = \"black_hole\"\nswitch = \"spine:0\"\nrandom_pairs = 1\nfraction = 0",
                "faults[0].fraction: 0 is out of range; use 0 < fraction <= 1 (a fraction of packets",
            ),
        ];
        for (body, message) in cases {
            let err = resolved(&format!("[[faults]]\n{body}")).unwrap_err();
            assert!(err.starts_with(message), "{err}\n  expected: {message}");
        }
    }

    #[test]
    fn a_link_failure_that_cuts_hosts_off_is_refused() {
        let text = r#"
            [[faults]]
            kind = "link_down"
            link = ["leaf:0", "spine:0"]
            at = "1ms"
            [[faults]]
            kind = "link_down"
            link = ["leaf:0", "spine:1"]
            at = "2ms"
        "#;
        let err = resolved(text).unwrap_err();
        assert!(
            err.starts_with(
                "faults[1].link: with leaf:0 - spine:1 down, host 0 cannot reach host 2"
            ),
            "{err}"
        );
        let one = text
            .split("[[faults]]")
            .take(2)
            .collect::<Vec<_>>()
            .join("[[faults]]");
        assert_eq!(resolved(&one).unwrap().len(), 1);
    }
}
