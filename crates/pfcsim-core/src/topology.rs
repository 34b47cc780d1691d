//! Fabric topologies: the `[topology]` table of a spec ([`TopologySpec`]), builders
//! (leaf-spine, k-ary fat-tree, ns-3 topology files) and shortest-path routing tables.
//!
//! A topology is a set of nodes (hosts and switches) and full-duplex links, each with one rate
//! and one propagation delay for both directions. Every host has exactly one link (one NIC
//! port); hosts never forward. Switches forward along all shortest paths (in hops); the
//! equal-cost choice among them is the load balancer's.

use crate::check::check_range;
use crate::engine::{rng_stream, StreamKind};
use crate::ns3::{self, Ns3Topology};
use crate::units::{Rate, Time};
use rand::seq::index::sample;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// One full-duplex link.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub a: u32,
    pub b: u32,
    pub rate: Rate,
    pub delay: Time,
}

/// Nodes and links, plus the facts traffic generators need.
#[derive(Clone, Debug)]
pub struct Topology {
    /// `is_switch[n]` for every node id `n`.
    pub is_switch: Vec<bool>,
    pub links: Vec<Link>,
    /// Host node ids in increasing order.
    pub hosts: Vec<u32>,
    /// For every node: the switch a host hangs off (its ToR); for switches, themselves.
    pub tor_of: Vec<u32>,
}

/// Why a topology cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    #[error("host {host} has {links} links; every host must have exactly one link (one NIC port)")]
    HostDegree { host: u32, links: usize },
    #[error("host {host} is linked to host {peer}; hosts must attach to a switch")]
    HostToHost { host: u32, peer: u32 },
    #[error("the topology is disconnected: host {to} cannot be reached from host {from}")]
    Disconnected { from: u32, to: u32 },
    #[error("the topology has {0} hosts; at least 2 are needed")]
    TooFewHosts(usize),
    #[error("link {index} joins host {node} to itself; only switches may have loopback links")]
    SelfLoop { index: usize, node: u32 },
    #[error("link {index} names node {node}, but the topology has only {nodes} nodes")]
    NodeOutOfRange { index: usize, node: u32, nodes: u32 },
}

/// The size of a fabric, known before it is built ([`TopologySpec::shape`]) or after
/// ([`Topology::shape`]): what the memory estimate of a run is computed from and what the
/// limits of node, link and port numbering are checked against. Counts are 64-bit (and
/// saturate), so that any spec's values fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub hosts: u64,
    pub switches: u64,
    /// Every link: host links, switch-to-switch links and loopbacks.
    pub links: u64,
    /// Links between two different switches.
    pub switch_links: u64,
    /// The most ports of one node (a loopback link gives its switch two).
    pub max_ports: u64,
}

/// The most ports a node may have: a node's ports are numbered in 16 bits.
pub const MAX_PORTS_PER_NODE: u64 = 1 << 16;

impl Shape {
    /// Nodes, hosts and switches together.
    pub fn nodes(&self) -> u64 {
        self.hosts.saturating_add(self.switches)
    }

    /// Checks the fabric against the widths of its numbering: node ids and port ids are 32-bit
    /// (`u32::MAX` is kept as "none"), a node's own ports 16-bit. The message says which limit
    /// is exceeded and by how much.
    pub fn check_numbering(&self) -> Result<(), String> {
        let max_ids = u64::from(u32::MAX) - 1;
        if self.nodes() > max_ids {
            return Err(format!(
                "{} nodes, more than the {max_ids} that 32-bit node ids can number",
                self.nodes()
            ));
        }
        if self.links.saturating_mul(2) > max_ids {
            return Err(format!(
                "{} links, more than the {} whose {} ports 32-bit port ids can number",
                self.links,
                max_ids / 2,
                max_ids / 2 * 2
            ));
        }
        if self.max_ports > MAX_PORTS_PER_NODE {
            return Err(format!(
                "a node with {} ports, more than the {MAX_PORTS_PER_NODE} a node may have",
                self.max_ports
            ));
        }
        Ok(())
    }
}

/// A link's rate and propagation delay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct LinkSpec {
    pub rate: Rate,
    pub delay: Time,
}

crate::tagged::table!(LinkSpec);

/// Fabric-link parameters of a leaf-spine: the rate may instead follow from
/// `oversubscription`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct FabricLinkSpec {
    pub rate: Option<Rate>,
    pub delay: Time,
}

crate::tagged::table!(FabricLinkSpec);

/// One leaf-spine link with other parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct LinkOverride {
    pub leaf: u32,
    pub spine: u32,
    pub rate: Option<Rate>,
    pub delay: Option<Time>,
}

crate::tagged::table!(LinkOverride);

/// Degrade a random fraction of the leaf-spine links (chosen by the seed).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct Degrade {
    pub fraction: f64,
    pub rate: Rate,
}

crate::tagged::table!(Degrade);

/// `[topology]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
// Written as a table with `kind = "<variant>"` (see `crate::tagged`).
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum TopologySpec {
    LeafSpine {
        leaves: u32,
        spines: u32,
        hosts_per_leaf: u32,
        host_link: LinkSpec,
        fabric_link: FabricLinkSpec,
        /// Host capacity of a leaf over its uplink capacity; sets the fabric rate when
        /// `fabric_link.rate` is not given.
        oversubscription: Option<f64>,
        #[serde(default)]
        overrides: Vec<LinkOverride>,
        degrade: Option<Degrade>,
    },
    FatTree {
        k: u32,
        host_link: LinkSpec,
        fabric_link: LinkSpec,
    },
    /// A topology file of the ns-3 RDMA simulators (relative to the spec file).
    Ns3File { path: String },
}

crate::tagged::internally_tagged!(TopologySpec, "kind");

impl TopologySpec {
    /// Checks the values that the types alone cannot (an ns-3 file is checked when read).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            TopologySpec::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                fabric_link,
                oversubscription,
                overrides,
                degrade,
                ..
            } => {
                for (key, v) in [
                    ("leaves", leaves),
                    ("spines", spines),
                    ("hosts_per_leaf", hosts_per_leaf),
                ] {
                    if *v == 0 {
                        return Err(format!("topology.{key}: must be at least 1"));
                    }
                }
                if u64::from(*leaves) * u64::from(*hosts_per_leaf) < 2 {
                    return Err(
                        "topology: a fabric needs at least 2 hosts; raise leaves or hosts_per_leaf"
                            .into(),
                    );
                }
                match (fabric_link.rate, oversubscription) {
                    (None, None) => {
                        return Err("topology.fabric_link.rate: missing; give the leaf-spine link rate (e.g. \"100Gbps\") or topology.oversubscription".into())
                    }
                    (Some(_), Some(_)) => {
                        return Err("topology.oversubscription: give either it or topology.fabric_link.rate, not both".into())
                    }
                    (None, Some(os)) if !(*os > 0.0 && os.is_finite()) => {
                        return Err(format!(
                            "topology.oversubscription: {os} is not a positive ratio (e.g. 2.0 for 2:1)"
                        ))
                    }
                    _ => {}
                }
                for (i, o) in overrides.iter().enumerate() {
                    let key = format!("topology.overrides[{i}]");
                    check_range(&format!("{key}.leaf"), o.leaf, 0..*leaves, "(a leaf index)")?;
                    check_range(
                        &format!("{key}.spine"),
                        o.spine,
                        0..*spines,
                        "(a spine index)",
                    )?;
                }
                if let Some(d) = degrade {
                    let (key, note) = ("topology.degrade.fraction", "(a fraction of the links)");
                    check_range(key, d.fraction, 0.0..=1.0, note)?;
                }
            }
            TopologySpec::FatTree { k, .. } => {
                if *k < 2 || k % 2 != 0 {
                    return Err(format!(
                        "topology.k: {k} is not valid; a k-ary fat-tree needs an even k >= 2"
                    ));
                }
            }
            TopologySpec::Ns3File { .. } => {}
        }
        Ok(())
    }

    /// The shape of the fabric this spec builds, without building it (`loopbacks`: with a
    /// loopback link on every switch, `[switch.loopback]`). `None` for a topology file, whose
    /// shape is known once it is read.
    pub fn shape(&self, loopbacks: bool) -> Option<Shape> {
        let (hosts, switches, switch_links, max_ports) = match self {
            TopologySpec::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                ..
            } => {
                let (l, s, h) = (
                    u64::from(*leaves),
                    u64::from(*spines),
                    u64::from(*hosts_per_leaf),
                );
                (l * h, l + s, l * s, (h + s).max(l))
            }
            TopologySpec::FatTree { k, .. } => {
                let (k, half) = (u64::from(*k), u64::from(k / 2));
                // k pods of half edge and half aggregation switches, half^2 cores; every edge
                // and every core switch has k ports, as has every aggregation switch.
                let hosts = k.saturating_mul(half).saturating_mul(half);
                let switches = (2 * k * half).saturating_add(half * half);
                (hosts, switches, hosts.saturating_mul(2), k)
            }
            TopologySpec::Ns3File { .. } => return None,
        };
        let (loop_links, loop_ports) = if loopbacks { (switches, 2) } else { (0, 0) };
        Some(Shape {
            hosts,
            switches,
            links: hosts
                .saturating_add(switch_links)
                .saturating_add(loop_links),
            switch_links,
            max_ports: max_ports + loop_ports,
        })
    }

    /// The values that size the fabric, for messages: `leaves = 4, spines = 4,
    /// hosts_per_leaf = 8`, `k = 8`, or the topology file.
    pub fn size_keys(&self) -> String {
        match self {
            TopologySpec::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                ..
            } => format!("leaves = {leaves}, spines = {spines}, hosts_per_leaf = {hosts_per_leaf}"),
            TopologySpec::FatTree { k, .. } => format!("k = {k}"),
            TopologySpec::Ns3File { path } => format!("path = {path:?}"),
        }
    }

    /// Builds the topology; `seed` draws the degraded links, `read` reads a topology file
    /// (its path relative to the spec file). Errors name the key path.
    pub fn build(
        &self,
        seed: u64,
        read: &dyn Fn(&str) -> Result<String, String>,
    ) -> Result<Topology, String> {
        match self {
            TopologySpec::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                host_link,
                fabric_link,
                oversubscription,
                overrides,
                degrade,
            } => {
                let fabric_rate = match (fabric_link.rate, oversubscription) {
                    (Some(r), _) => r,
                    (None, Some(os)) => {
                        let bps = (*hosts_per_leaf as f64 * host_link.rate.bps() as f64)
                            / (*spines as f64 * os);
                        if bps < 1.0 {
                            return Err(
                                "topology.oversubscription: gives a fabric rate below 1 bit/s"
                                    .into(),
                            );
                        }
                        Rate(bps.round() as u64)
                    }
                    (None, None) => unreachable!("validated"),
                };
                Ok(Topology::leaf_spine(&LeafSpine {
                    leaves: *leaves,
                    spines: *spines,
                    hosts_per_leaf: *hosts_per_leaf,
                    host_rate: host_link.rate,
                    host_delay: host_link.delay,
                    fabric_rate,
                    fabric_delay: fabric_link.delay,
                    overrides: overrides
                        .iter()
                        .map(|o| (o.leaf, o.spine, o.rate, o.delay))
                        .collect(),
                    degrade: degrade.as_ref().map(|d| (d.fraction, d.rate)),
                    seed,
                }))
            }
            TopologySpec::FatTree {
                k,
                host_link,
                fabric_link,
            } => Ok(Topology::fat_tree(
                *k,
                (host_link.rate, host_link.delay),
                (fabric_link.rate, fabric_link.delay),
            )),
            TopologySpec::Ns3File { path } => {
                let text = read(path).map_err(|e| format!("topology.path: {e}"))?;
                let t = ns3::parse_topology(&text)
                    .map_err(|e| format!("topology.path: {path}: {e}"))?;
                if let Some(l) = t.links.iter().find(|l| l.error_rate != 0.0) {
                    return Err(format!(
                        "topology.path: {path}: link {}-{} has error rate {}; random link errors are not modelled, set it to 0",
                        l.a, l.b, l.error_rate
                    ));
                }
                Topology::from_ns3(&t).map_err(|e| format!("topology.path: {path}: {e}"))
            }
        }
    }
}

/// Node names, as `[[faults]]` and `[[monitor]]` entries write them: `"node:<id>"` in any
/// topology; by role and index in a leaf-spine (`"host:<i>"`, `"leaf:<i>"`, `"spine:<i>"`) and
/// a fat-tree (`"host:<i>"`, `"edge:<i>"`, `"agg:<i>"`, `"core:<i>"`), numbered from 0 as the
/// builders number them. A selector may also name every node of a role, `"<role>:*"`
/// (`"node:*"`: every node).
impl TopologySpec {
    /// The named roles of the topology kind: (role, first node id, count).
    fn roles(&self) -> Vec<(&'static str, u32, u32)> {
        match self {
            TopologySpec::LeafSpine {
                leaves,
                spines,
                hosts_per_leaf,
                ..
            } => {
                let hosts = leaves * hosts_per_leaf;
                vec![
                    ("host", 0, hosts),
                    ("leaf", hosts, *leaves),
                    ("spine", hosts + leaves, *spines),
                ]
            }
            TopologySpec::FatTree { k, .. } => {
                let (half, hosts) = (k / 2, k * k * k / 4);
                vec![
                    ("host", 0, hosts),
                    ("edge", hosts, k * half),
                    ("agg", hosts + k * half, k * half),
                    ("core", hosts + 2 * k * half, half * half),
                ]
            }
            TopologySpec::Ns3File { .. } => Vec::new(),
        }
    }

    /// The valid node names, for messages: `node:<id>, host:0..3, leaf:0..1, ...`.
    fn node_forms(&self) -> String {
        let mut forms = vec!["node:<id>".to_string()];
        forms.extend(
            self.roles()
                .iter()
                .map(|(r, _, n)| format!("{r}:0..{}", n.saturating_sub(1))),
        );
        forms.join(", ")
    }

    /// The node id of `name` in `topology` (built from this spec); the message of an error
    /// starts with `key` and lists the valid names.
    pub fn node_named(&self, name: &str, topology: &Topology, key: &str) -> Result<u32, String> {
        let not_a_name = || {
            format!(
                "{key}: {name:?} is not a node name; use {}",
                self.node_forms()
            )
        };
        let (role, index) = name.split_once(':').ok_or_else(not_a_name)?;
        let index = index.parse::<u32>().map_err(|_| not_a_name())?;
        let id = if role == "node" {
            Some(index)
        } else {
            self.roles()
                .iter()
                .find(|(r, _, _)| *r == role)
                .filter(|(_, _, count)| index < *count)
                .map(|(_, first, _)| first + index)
        };
        match id {
            Some(id) if (id as usize) < topology.nodes() => Ok(id),
            _ => Err(format!(
                "{key}: {name:?} names no node of this topology; use {}",
                self.node_forms()
            )),
        }
    }

    /// The node ids a selector names, in increasing order: one node name (see
    /// [`TopologySpec::node_named`]), or `"<role>:*"` for every node of a role (`"node:*"`:
    /// every node of the topology).
    pub fn nodes_selected(
        &self,
        selector: &str,
        topology: &Topology,
        key: &str,
    ) -> Result<Vec<u32>, String> {
        let Some(role) = selector.strip_suffix(":*") else {
            return self.node_named(selector, topology, key).map(|id| vec![id]);
        };
        if role == "node" {
            return Ok((0..topology.nodes() as u32).collect());
        }
        match self.roles().iter().find(|(r, _, _)| *r == role) {
            Some(&(_, first, count)) => Ok((first..first + count).collect()),
            None => Err(format!(
                "{key}: {selector:?} names no role of this topology; use {}, or <role>:* for \
                 every node of a role",
                self.node_forms()
            )),
        }
    }
}

/// Parameters of a two-tier leaf-spine (Clos) fabric.
#[derive(Clone, Debug)]
pub struct LeafSpine {
    pub leaves: u32,
    pub spines: u32,
    pub hosts_per_leaf: u32,
    pub host_rate: Rate,
    pub host_delay: Time,
    pub fabric_rate: Rate,
    pub fabric_delay: Time,
    /// Explicit (leaf, spine, rate, delay) overrides of single leaf-spine links.
    pub overrides: Vec<(u32, u32, Option<Rate>, Option<Time>)>,
    /// Degrade this fraction of the leaf-spine links (rounded to the nearest count), chosen
    /// uniformly at random from the topology RNG stream of `seed`, to the given rate.
    pub degrade: Option<(f64, Rate)>,
    pub seed: u64,
}

impl LeafSpine {
    /// A leaf-spine whose every link has the same rate and delay, with no overrides or
    /// degradation.
    pub fn uniform(leaves: u32, spines: u32, hosts_per_leaf: u32, rate: Rate, delay: Time) -> Self {
        LeafSpine {
            leaves,
            spines,
            hosts_per_leaf,
            host_rate: rate,
            host_delay: delay,
            fabric_rate: rate,
            fabric_delay: delay,
            overrides: vec![],
            degrade: None,
            seed: 0,
        }
    }
}

impl Topology {
    /// Builds a leaf-spine fabric. Node ids: hosts first (leaf-major), then leaves, then spines.
    pub fn leaf_spine(p: &LeafSpine) -> Topology {
        let hosts = p.leaves * p.hosts_per_leaf;
        let leaf_id = |l: u32| hosts + l;
        let spine_id = |s: u32| hosts + p.leaves + s;
        let n = hosts + p.leaves + p.spines;
        let mut links = Vec::new();
        for h in 0..hosts {
            links.push(Link {
                a: h,
                b: leaf_id(h / p.hosts_per_leaf),
                rate: p.host_rate,
                delay: p.host_delay,
            });
        }
        let first_fabric = links.len();
        for l in 0..p.leaves {
            for s in 0..p.spines {
                links.push(Link {
                    a: leaf_id(l),
                    b: spine_id(s),
                    rate: p.fabric_rate,
                    delay: p.fabric_delay,
                });
            }
        }
        if let Some((fraction, rate)) = p.degrade {
            let fabric = (p.leaves * p.spines) as usize;
            let count = ((fabric as f64) * fraction).round() as usize;
            let mut rng = rng_stream(p.seed, StreamKind::Topology, 0);
            for i in sample(&mut rng, fabric, count.min(fabric)).into_iter() {
                links[first_fabric + i].rate = rate;
            }
        }
        for &(l, s, rate, delay) in &p.overrides {
            let link = &mut links[first_fabric + (l * p.spines + s) as usize];
            if let Some(r) = rate {
                link.rate = r;
            }
            if let Some(d) = delay {
                link.delay = d;
            }
        }
        let mut is_switch = vec![false; n as usize];
        for s in is_switch.iter_mut().skip(hosts as usize) {
            *s = true;
        }
        Topology::assemble(is_switch, links).expect("leaf-spine builder makes a valid topology")
    }

    /// Builds a k-ary fat-tree (k even): k pods of k/2 edge and k/2 aggregation switches,
    /// (k/2)^2 core switches, k/2 hosts per edge switch, k^3/4 hosts. Node ids: hosts, edge,
    /// aggregation, core.
    pub fn fat_tree(k: u32, host: (Rate, Time), fabric: (Rate, Time)) -> Topology {
        let half = k / 2;
        let hosts = k * k * k / 4;
        let edge = |pod: u32, i: u32| hosts + pod * half + i;
        let agg = |pod: u32, i: u32| hosts + k * half + pod * half + i;
        let core = |i: u32| hosts + 2 * k * half + i;
        let n = hosts + 2 * k * half + half * half;
        let mut links = Vec::new();
        for h in 0..hosts {
            let (pod, e) = (h / (half * half), (h / half) % half);
            links.push(Link {
                a: h,
                b: edge(pod, e),
                rate: host.0,
                delay: host.1,
            });
        }
        for pod in 0..k {
            for e in 0..half {
                for a in 0..half {
                    links.push(Link {
                        a: edge(pod, e),
                        b: agg(pod, a),
                        rate: fabric.0,
                        delay: fabric.1,
                    });
                }
            }
            for a in 0..half {
                for c in 0..half {
                    links.push(Link {
                        a: agg(pod, a),
                        b: core(a * half + c),
                        rate: fabric.0,
                        delay: fabric.1,
                    });
                }
            }
        }
        let mut is_switch = vec![true; n as usize];
        for s in is_switch.iter_mut().take(hosts as usize) {
            *s = false;
        }
        Topology::assemble(is_switch, links).expect("fat-tree builder makes a valid topology")
    }

    /// Uses a topology read from an ns-3 RDMA simulator file. The per-link error rate is
    /// not modelled and must be 0 (the caller checks it).
    pub fn from_ns3(t: &Ns3Topology) -> Result<Topology, TopologyError> {
        let mut is_switch = vec![false; t.nodes as usize];
        for &s in &t.switches {
            is_switch[s as usize] = true;
        }
        let links = t
            .links
            .iter()
            .map(|l| Link {
                a: l.a,
                b: l.b,
                rate: l.rate,
                delay: l.delay,
            })
            .collect();
        Topology::assemble(is_switch, links)
    }

    /// Checks the structural rules and fills in the derived fields.
    pub fn assemble(is_switch: Vec<bool>, links: Vec<Link>) -> Result<Topology, TopologyError> {
        let n = is_switch.len() as u32;
        let mut degree = vec![0usize; n as usize];
        let mut tor_of: Vec<u32> = (0..n).collect();
        for (index, l) in links.iter().enumerate() {
            for node in [l.a, l.b] {
                if node >= n {
                    return Err(TopologyError::NodeOutOfRange {
                        index,
                        node,
                        nodes: n,
                    });
                }
            }
            if l.a == l.b && !is_switch[l.a as usize] {
                return Err(TopologyError::SelfLoop { index, node: l.a });
            }
            degree[l.a as usize] += 1;
            degree[l.b as usize] += 1;
            for (x, y) in [(l.a, l.b), (l.b, l.a)] {
                if !is_switch[x as usize] {
                    if !is_switch[y as usize] {
                        return Err(TopologyError::HostToHost { host: x, peer: y });
                    }
                    tor_of[x as usize] = y;
                }
            }
        }
        let hosts: Vec<u32> = (0..n).filter(|&i| !is_switch[i as usize]).collect();
        for &h in &hosts {
            if degree[h as usize] != 1 {
                return Err(TopologyError::HostDegree {
                    host: h,
                    links: degree[h as usize],
                });
            }
        }
        if hosts.len() < 2 {
            return Err(TopologyError::TooFewHosts(hosts.len()));
        }
        let topo = Topology {
            is_switch,
            links,
            hosts,
            tor_of,
        };
        // Every host must reach every other: one search from the first host covers it.
        let dist = topo.hop_distances(topo.hosts[0]);
        if let Some(&to) = topo.hosts.iter().find(|&&h| dist[h as usize] == u32::MAX) {
            return Err(TopologyError::Disconnected {
                from: topo.hosts[0],
                to,
            });
        }
        Ok(topo)
    }

    /// Adds one loopback link to every switch: a link from the switch to itself, whose two
    /// ends are two ports of the switch. A load balancer can send a packet out of one end to
    /// have it come back in at the other (recirculation), paying the link's serialization and
    /// delay and the switch's buffer like any other packet.
    pub fn with_loopbacks(mut self, rate: Rate, delay: Time) -> Topology {
        for node in 0..self.nodes() as u32 {
            if self.is_switch[node as usize] {
                self.links.push(Link {
                    a: node,
                    b: node,
                    rate,
                    delay,
                });
            }
        }
        self
    }

    pub fn nodes(&self) -> usize {
        self.is_switch.len()
    }

    /// The fabric's [`Shape`].
    pub fn shape(&self) -> Shape {
        let mut ports = vec![0u64; self.nodes()];
        let mut switch_links = 0;
        for l in &self.links {
            ports[l.a as usize] += 1;
            ports[l.b as usize] += 1;
            if l.a != l.b && self.is_switch[l.a as usize] && self.is_switch[l.b as usize] {
                switch_links += 1;
            }
        }
        let hosts = self.hosts.len() as u64;
        Shape {
            hosts,
            switches: self.nodes() as u64 - hosts,
            links: self.links.len() as u64,
            switch_links,
            max_ports: ports.into_iter().max().unwrap_or(0),
        }
    }

    /// Neighbour lists: for each node, `(peer, link index)` in link order.
    pub fn adjacency(&self) -> Vec<Vec<(u32, usize)>> {
        let mut adj = vec![Vec::new(); self.nodes()];
        for (i, l) in self.links.iter().enumerate() {
            adj[l.a as usize].push((l.b, i));
            adj[l.b as usize].push((l.a, i));
        }
        adj
    }

    /// Hop distance from every node to `target`, moving only through switches (hosts are
    /// path end points, never transit). `u32::MAX` where unreachable.
    pub fn hop_distances(&self, target: u32) -> Vec<u32> {
        let adj = self.adjacency();
        self.hop_distances_with(&adj, target)
    }

    pub(crate) fn hop_distances_with(&self, adj: &[Vec<(u32, usize)>], target: u32) -> Vec<u32> {
        let mut dist = vec![u32::MAX; self.nodes()];
        dist[target as usize] = 0;
        let mut frontier = VecDeque::from([target]);
        while let Some(x) = frontier.pop_front() {
            if x != target && !self.is_switch[x as usize] {
                continue;
            }
            for &(y, _) in &adj[x as usize] {
                if dist[y as usize] == u32::MAX {
                    dist[y as usize] = dist[x as usize] + 1;
                    frontier.push_back(y);
                }
            }
        }
        dist
    }

    /// Total host-link capacity (one direction), bits/s.
    pub fn host_capacity_bps(&self) -> u128 {
        self.links
            .iter()
            .filter(|l| !self.is_switch[l.a as usize] || !self.is_switch[l.b as usize])
            .map(|l| l.rate.bps() as u128)
            .sum()
    }

    /// Capacity of the fabric core (one direction), bits/s: the links from ToR switches
    /// (switches with hosts attached) to other switches. For a leaf-spine this is every
    /// leaf-spine link; for a fat-tree, every edge-aggregation link.
    pub fn core_capacity_bps(&self) -> u128 {
        let mut is_tor = vec![false; self.nodes()];
        for &h in &self.hosts {
            is_tor[self.tor_of[h as usize] as usize] = true;
        }
        self.links
            .iter()
            .filter(|l| l.a != l.b && self.is_switch[l.a as usize] && self.is_switch[l.b as usize])
            .filter(|l| is_tor[l.a as usize] || is_tor[l.b as usize])
            .map(|l| l.rate.bps() as u128)
            .sum()
    }
}

/// 2 leaves x 2 spines x 2 hosts per leaf, 100 Gbps and 1 us links, as a spec and built:
/// hosts 0-3, leaves 4-5, spines 6-7 (unit tests of what names nodes: faults, monitors).
#[cfg(test)]
pub(crate) fn test_leaf_spine() -> (TopologySpec, Topology) {
    let rate = Rate::gbps(100);
    let delay = Time::from_us(1);
    let spec = TopologySpec::LeafSpine {
        leaves: 2,
        spines: 2,
        hosts_per_leaf: 2,
        host_link: LinkSpec { rate, delay },
        fabric_link: FabricLinkSpec {
            rate: Some(rate),
            delay,
        },
        oversubscription: None,
        overrides: Vec::new(),
        degrade: None,
    };
    let topo = Topology::leaf_spine(&LeafSpine::uniform(2, 2, 2, rate, delay));
    (spec, topo)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r1_like() -> LeafSpine {
        LeafSpine::uniform(8, 8, 16, Rate::gbps(100), Time::from_us(1))
    }

    #[test]
    fn leaf_spine_shape_and_capacities() {
        let t = Topology::leaf_spine(&r1_like());
        assert_eq!(t.nodes(), 144);
        assert_eq!(t.hosts.len(), 128);
        assert_eq!(t.links.len(), 128 + 64);
        assert_eq!(t.tor_of[17], 129);
        assert_eq!(t.host_capacity_bps(), 128 * 100_000_000_000);
        // 2:1 oversubscribed: the core is half the host capacity.
        assert_eq!(t.core_capacity_bps() * 2, t.host_capacity_bps());
        let d = t.hop_distances(0);
        assert_eq!(d[1], 2); // same leaf
        assert_eq!(d[16], 4); // other leaf
    }

    #[test]
    fn degradation_is_seeded_and_counts_right() {
        let mut p = r1_like();
        p.degrade = Some((0.25, Rate::gbps(40)));
        let slow = |t: &Topology| -> Vec<usize> {
            (0..t.links.len())
                .filter(|&i| t.links[i].rate == Rate::gbps(40))
                .collect()
        };
        let a = slow(&Topology::leaf_spine(&p));
        assert_eq!(a.len(), 16);
        assert_eq!(a, slow(&Topology::leaf_spine(&p)));
        p.seed = 2;
        assert_ne!(a, slow(&Topology::leaf_spine(&p)));
    }

    #[test]
    fn overrides_apply_to_one_link() {
        let mut p = r1_like();
        p.overrides = vec![(2, 3, Some(Rate::gbps(10)), Some(Time::from_us(5)))];
        let t = Topology::leaf_spine(&p);
        let l = &t.links[128 + 2 * 8 + 3];
        assert_eq!((l.a, l.b), (128 + 2, 136 + 3));
        assert_eq!((l.rate, l.delay), (Rate::gbps(10), Time::from_us(5)));
    }

    #[test]
    fn fat_tree_shape() {
        let t = Topology::fat_tree(
            4,
            (Rate::gbps(100), Time::from_us(1)),
            (Rate::gbps(100), Time::from_us(1)),
        );
        assert_eq!(t.hosts.len(), 16);
        assert_eq!(t.nodes(), 16 + 8 + 8 + 4);
        assert_eq!(t.links.len(), 16 + 16 + 16);
        let d = t.hop_distances(0);
        assert_eq!(d[1], 2); // same edge switch
        assert_eq!(d[2], 4); // same pod
        assert_eq!(d[15], 6); // other pod
    }

    #[test]
    fn rejects_disconnected_and_bad_hosts() {
        let r = (Rate::gbps(10), Time::from_us(1));
        let link = |a, b| Link {
            a,
            b,
            rate: r.0,
            delay: r.1,
        };
        let sw = vec![false, false, true, true];
        let e = Topology::assemble(sw.clone(), vec![link(0, 2), link(1, 3)]).unwrap_err();
        assert_eq!(e, TopologyError::Disconnected { from: 0, to: 1 });
        let e = Topology::assemble(sw.clone(), vec![link(0, 1), link(0, 2)]).unwrap_err();
        assert_eq!(e, TopologyError::HostToHost { host: 0, peer: 1 });
        let e = Topology::assemble(sw, vec![link(0, 2), link(0, 3), link(1, 2)]).unwrap_err();
        assert_eq!(e, TopologyError::HostDegree { host: 0, links: 2 });
    }
}
