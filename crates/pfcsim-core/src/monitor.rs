//! Monitors: the `[[monitor]]` entries of a spec, time series and event logs of what happens
//! inside a run, checked against the topology and resolved to node and port ids (`resolve`);
//! the simulation records them (`sim/monitor.rs`) and the run folder gets one Parquet file per
//! kind (`docs/reference/metrics.md`).
//!
//! Kinds:
//! * `queue`: per (switch port, priority), the egress queue's bytes and the bytes the switch
//!   buffer charges to that ingress, with the XOFF level they are compared with;
//! * `pfc`: every PFC frame sent or received at the chosen ports, with the pause it ends;
//! * `rate`: a flow's (or every flow's) sending rate, DCQCN target rate and bytes
//!   acknowledged;
//! * `link_util`: the bytes each chosen port sent per interval;
//! * `scheme`: what the load-balancing scheme exposes at the switches (`SwitchScheme::samples`)
//!   and, for a scheme with a part at the hosts, at the hosts named (`HostScheme::samples`).
//!
//! Sampling: `interval = T` takes a sample every T from `start` (default 0) to `end`
//! (default the end of the run); `min_spacing = T` writes a row of a series only when its
//! value changed since the series' last row, looking every T (a value that changes and
//! changes back between two looks is not seen; rows of a series are at least T apart).
//! `pfc` logs every frame as it happens, between `start` and `end`, up to `max_events`.
//!
//! Monitors only observe: they change no packet, no decision and no event of the run (the
//! fingerprint is the same with and without them). A run without monitors does no monitor
//! work at all.
//!
//! Bounded: every monitor has a largest number of rows, known before the run (series x
//! samples, or `max_events`); a spec whose monitors could write more than `run.monitor_limit`
//! bytes (default [`DEFAULT_LIMIT`]) at the sizes of [`ROW_BYTES`] is refused.

use crate::check::check_range;
use crate::topology::{Topology, TopologySpec};
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};

/// Default of `run.monitor_limit`: the most bytes the monitors of a run may write.
pub const DEFAULT_LIMIT: Bytes = Bytes(100_000_000);

/// Default of a `pfc` monitor's `max_events`.
pub const DEFAULT_MAX_EVENTS: u64 = 100_000;

/// Bytes of one row of each kind (its columns' sizes, as held in memory and written before
/// compression; text columns at their longest value plus a 4-byte offset): queue, pfc, rate,
/// link_util, scheme.
pub const ROW_BYTES: [(MonitorKind, u64); 5] = [
    (MonitorKind::Queue, 41),
    (MonitorKind::Pfc, 56),
    (MonitorKind::Rate, 52),
    (MonitorKind::LinkUtil, 36),
    (MonitorKind::Scheme, 50),
];

/// One `[[monitor]]` entry of a spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum MonitorSpec {
    /// Egress and ingress-charged bytes per (switch port, priority).
    Queue {
        /// Switches (node selectors; default every switch).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<String>,
        /// Local port indices on those nodes (default every port).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ports: Vec<u16>,
        /// Only the ports leading to these nodes (selectors; default any).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        peers: Vec<String>,
        /// Priorities (default the data priorities of the run's flows).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        priorities: Vec<u8>,
        interval: Option<Time>,
        min_spacing: Option<Time>,
        start: Option<Time>,
        end: Option<Time>,
    },
    /// Every PFC frame sent or received at the chosen ports.
    Pfc {
        /// Nodes (selectors; default every node).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ports: Vec<u16>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        peers: Vec<String>,
        /// Priorities (default every priority).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        priorities: Vec<u8>,
        start: Option<Time>,
        end: Option<Time>,
        /// Most frames logged (default [`DEFAULT_MAX_EVENTS`]).
        max_events: Option<u64>,
    },
    /// A flow's sending rate and bytes acknowledged.
    Rate {
        /// Flow ids, as in `flows.parquet` (default every flow).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        flows: Vec<u32>,
        interval: Option<Time>,
        min_spacing: Option<Time>,
        start: Option<Time>,
        end: Option<Time>,
    },
    /// Bytes sent per port per interval.
    LinkUtil {
        /// Nodes (selectors; default every node).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ports: Vec<u16>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        peers: Vec<String>,
        interval: Option<Time>,
        start: Option<Time>,
        end: Option<Time>,
    },
    /// The values the scheme exposes at switches and, if it runs at the hosts, hosts.
    Scheme {
        /// Switches, and hosts for a scheme with a part at the hosts (selectors; default
        /// every switch).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        nodes: Vec<String>,
        interval: Option<Time>,
        min_spacing: Option<Time>,
        start: Option<Time>,
        end: Option<Time>,
    },
}

crate::tagged::internally_tagged!(MonitorSpec, "kind");

/// The kinds of monitors, each with its own file `monitor_<kind>.parquet`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorKind {
    Queue,
    Pfc,
    Rate,
    LinkUtil,
    Scheme,
}

impl MonitorKind {
    /// The kind as the spec writes it.
    pub fn name(self) -> &'static str {
        match self {
            MonitorKind::Queue => "queue",
            MonitorKind::Pfc => "pfc",
            MonitorKind::Rate => "rate",
            MonitorKind::LinkUtil => "link_util",
            MonitorKind::Scheme => "scheme",
        }
    }

    /// Bytes of one row (see [`ROW_BYTES`]).
    pub fn row_bytes(self) -> u64 {
        ROW_BYTES
            .iter()
            .find(|(k, _)| *k == self)
            .map(|(_, b)| *b)
            .expect("every kind has a row size")
    }
}

/// A monitor resolved against the topology and the flows.
#[derive(Clone, Debug, PartialEq)]
pub struct Monitor {
    pub kind: MonitorKind,
    /// Time between two looks (`Time::ZERO` for `pfc`, which logs as frames come).
    pub period: Time,
    /// Write a series' row only when its value changed (`min_spacing`).
    pub on_change: bool,
    pub start: Time,
    /// Last time a sample may be taken (`Time::MAX`: to the end of the run).
    pub end: Time,
    /// Watched ports as (node, local port index), in node then port order (queue, pfc,
    /// link_util).
    pub ports: Vec<(u32, u16)>,
    /// Watched switches, and hosts if the scheme runs at the hosts (scheme).
    pub nodes: Vec<u32>,
    /// Watched priorities, bit `q` for priority `q` (queue, pfc).
    pub priorities: u8,
    /// Watched flows (rate).
    pub flows: Vec<u32>,
    /// Most rows it can write.
    pub max_rows: u64,
}

/// Checks the values of the `[[monitor]]` entries that the types alone cannot (before the
/// topology is built): sampling keys, times, priorities.
pub fn validate(specs: &[MonitorSpec]) -> Result<(), String> {
    for (i, spec) in specs.iter().enumerate() {
        let key = |k: &str| format!("monitor[{i}].{k}");
        let (interval, min_spacing, start, end) = match spec {
            MonitorSpec::Queue {
                interval,
                min_spacing,
                start,
                end,
                ..
            }
            | MonitorSpec::Rate {
                interval,
                min_spacing,
                start,
                end,
                ..
            }
            | MonitorSpec::Scheme {
                interval,
                min_spacing,
                start,
                end,
                ..
            } => (*interval, *min_spacing, *start, *end),
            MonitorSpec::LinkUtil {
                interval,
                start,
                end,
                ..
            } => {
                if interval.is_none() {
                    return Err(format!(
                        "{}: missing; a link_util monitor counts the bytes sent per interval: \
                         give one (e.g. interval = \"10us\")",
                        key("interval")
                    ));
                }
                (*interval, None, *start, *end)
            }
            MonitorSpec::Pfc {
                start,
                end,
                max_events,
                ..
            } => {
                if let Some(n) = max_events {
                    check_range(&key("max_events"), *n, 1.., "frames logged at most")?;
                }
                (None, None, *start, *end)
            }
        };
        let periodic = !matches!(spec, MonitorSpec::Pfc { .. });
        match (interval, min_spacing) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "monitor[{i}]: give interval (a sample every interval) or min_spacing (a row \
                     when a value changes, at most one per min_spacing), not both"
                ))
            }
            (None, None) if periodic => {
                return Err(format!(
                    "monitor[{i}]: no sampling; give interval (e.g. interval = \"1us\": a \
                     sample every microsecond) or min_spacing (e.g. min_spacing = \"1us\": a row \
                     when a value changes, at most one per microsecond)"
                ))
            }
            _ => {}
        }
        for (k, t) in [("interval", interval), ("min_spacing", min_spacing)] {
            if t == Some(Time::ZERO) {
                return Err(format!(
                    "{}: must be above 0; give a time such as \"1us\"",
                    key(k)
                ));
            }
        }
        if let (Some(s), Some(e)) = (start, end) {
            if e <= s {
                return Err(format!(
                    "{}: {e} is not after start ({s}); give an end later than the start",
                    key("end")
                ));
            }
        }
        if let MonitorSpec::Queue { priorities, .. } | MonitorSpec::Pfc { priorities, .. } = spec {
            for (j, &p) in priorities.iter().enumerate() {
                check_range(
                    &key(&format!("priorities[{j}]")),
                    p,
                    0..=7,
                    "(PFC priorities; data uses 1..=7)",
                )?;
            }
        }
    }
    Ok(())
}

/// What the resolution needs to know of the run besides the topology.
pub struct RunFacts {
    /// Number of flows (ids `0..flows`).
    pub flows: u32,
    /// The priorities the flows' data uses (bit `q` for priority `q`).
    pub flow_priorities: u8,
    /// The run stops at this time at the latest.
    pub stop_at: Time,
    /// `run.monitor_limit`: the most bytes the monitors may write.
    pub limit: Bytes,
    /// The name of the run's scheme, and whether part of it runs at the hosts (whose values
    /// a `scheme` monitor may then sample).
    pub scheme: &'static str,
    pub scheme_at_hosts: bool,
}

/// Resolves the `[[monitor]]` entries against the topology and the run: node selectors to
/// node ids, ports, priorities, flows; and refuses monitors that could write more than the
/// limit. Errors name the entry and key (`monitor[1].nodes[0]: ...`) and what would be valid.
pub fn resolve(
    specs: &[MonitorSpec],
    topology_spec: &TopologySpec,
    topology: &Topology,
    run: &RunFacts,
) -> Result<Vec<Monitor>, String> {
    let adj = topology.adjacency();
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        let key = |k: &str| format!("monitor[{i}].{k}");
        let select = |names: &[String], k: &str| -> Result<Vec<u32>, String> {
            let mut ids = Vec::new();
            for (j, name) in names.iter().enumerate() {
                ids.extend(topology_spec.nodes_selected(
                    name,
                    topology,
                    &key(&format!("{k}[{j}]")),
                )?);
            }
            ids.sort_unstable();
            ids.dedup();
            Ok(ids)
        };
        let switches_only = |ids: Vec<u32>, names: &[String]| -> Result<Vec<u32>, String> {
            if names.is_empty() {
                return Ok(ids
                    .into_iter()
                    .filter(|&n| topology.is_switch[n as usize])
                    .collect());
            }
            match ids.iter().find(|&&n| !topology.is_switch[n as usize]) {
                Some(&host) => Err(format!(
                    "{}: node {host} is a host; this monitor samples switches (name switches, \
                     e.g. \"leaf:0\" or \"spine:*\")",
                    key("nodes")
                )),
                None => Ok(ids),
            }
        };
        let nodes_or_all = |names: &[String]| -> Result<Vec<u32>, String> {
            if names.is_empty() {
                Ok((0..topology.nodes() as u32).collect())
            } else {
                select(names, "nodes")
            }
        };
        let ports_of = |nodes: &[u32], ports: &[u16], peers: &[String]| {
            let peers = if peers.is_empty() {
                None
            } else {
                Some(select(peers, "peers")?)
            };
            let mut chosen = Vec::new();
            for &n in nodes {
                let links = &adj[n as usize];
                for (j, &p) in ports.iter().enumerate() {
                    if p as usize >= links.len() {
                        return Err(format!(
                            "{}: node {n} has no port {p}; its ports are 0..={}",
                            key(&format!("ports[{j}]")),
                            links.len().saturating_sub(1)
                        ));
                    }
                }
                for (local, &(peer, _)) in links.iter().enumerate() {
                    let wanted = ports.is_empty() || ports.contains(&(local as u16));
                    let towards = peers.as_ref().is_none_or(|ps| ps.contains(&peer));
                    if wanted && towards {
                        chosen.push((n, local as u16));
                    }
                }
            }
            if chosen.is_empty() {
                return Err(format!(
                    "monitor[{i}]: the nodes, ports and peers given select no port; widen them"
                ));
            }
            Ok(chosen)
        };
        let mask = |priorities: &[u8], default: u8| {
            if priorities.is_empty() {
                default
            } else {
                priorities.iter().fold(0u8, |m, &p| m | 1 << p)
            }
        };
        let timing = |interval: Option<Time>, min_spacing: Option<Time>, start, end| {
            let start: Option<Time> = start;
            let end: Option<Time> = end;
            (
                interval.or(min_spacing).unwrap_or(Time::ZERO),
                min_spacing.is_some(),
                start.unwrap_or(Time::ZERO),
                end.unwrap_or(Time::MAX),
            )
        };
        let mut m = match spec {
            MonitorSpec::Queue {
                nodes,
                ports,
                peers,
                priorities,
                interval,
                min_spacing,
                start,
                end,
            } => {
                let chosen = switches_only(nodes_or_all(nodes)?, nodes)?;
                let (period, on_change, start, end) = timing(*interval, *min_spacing, *start, *end);
                Monitor {
                    kind: MonitorKind::Queue,
                    ports: ports_of(&chosen, ports, peers)?,
                    priorities: mask(priorities, run.flow_priorities),
                    ..blank(period, on_change, start, end)
                }
            }
            MonitorSpec::Pfc {
                nodes,
                ports,
                peers,
                priorities,
                start,
                end,
                max_events,
            } => {
                let (_, _, start, end) = timing(None, None, *start, *end);
                Monitor {
                    kind: MonitorKind::Pfc,
                    ports: ports_of(&nodes_or_all(nodes)?, ports, peers)?,
                    priorities: mask(priorities, 0xff),
                    max_rows: max_events.unwrap_or(DEFAULT_MAX_EVENTS),
                    ..blank(Time::ZERO, false, start, end)
                }
            }
            MonitorSpec::Rate {
                flows,
                interval,
                min_spacing,
                start,
                end,
            } => {
                for (j, &f) in flows.iter().enumerate() {
                    if f >= run.flows {
                        return Err(format!(
                            "{}: {f} is not a flow of this run; flow ids are 0..={} (as in \
                             flows.parquet: flows in order of start time)",
                            key(&format!("flows[{j}]")),
                            run.flows.saturating_sub(1)
                        ));
                    }
                }
                let mut flows = if flows.is_empty() {
                    (0..run.flows).collect()
                } else {
                    flows.clone()
                };
                flows.sort_unstable();
                flows.dedup();
                let (period, on_change, start, end) = timing(*interval, *min_spacing, *start, *end);
                Monitor {
                    kind: MonitorKind::Rate,
                    flows,
                    ..blank(period, on_change, start, end)
                }
            }
            MonitorSpec::LinkUtil {
                nodes,
                ports,
                peers,
                interval,
                start,
                end,
            } => {
                let (period, _, start, end) = timing(*interval, None, *start, *end);
                Monitor {
                    kind: MonitorKind::LinkUtil,
                    ports: ports_of(&nodes_or_all(nodes)?, ports, peers)?,
                    ..blank(period, false, start, end)
                }
            }
            MonitorSpec::Scheme {
                nodes,
                interval,
                min_spacing,
                start,
                end,
            } => {
                let (period, on_change, start, end) = timing(*interval, *min_spacing, *start, *end);
                let chosen = if run.scheme_at_hosts && !nodes.is_empty() {
                    select(nodes, "nodes")?
                } else {
                    switches_only(nodes_or_all(nodes)?, nodes).map_err(|e| {
                        format!(
                            "{e}; scheme `{}` runs in the switches only (hosts are watched with \
                             a scheme that runs at the hosts, e.g. hermes)",
                            run.scheme
                        )
                    })?
                };
                Monitor {
                    kind: MonitorKind::Scheme,
                    nodes: chosen,
                    ..blank(period, on_change, start, end)
                }
            }
        };
        if m.kind != MonitorKind::Pfc {
            m.max_rows = series(&m).saturating_mul(samples(&m, run.stop_at));
        }
        out.push(m);
    }
    check_budget(&out, run.limit)?;
    Ok(out)
}

/// A monitor of no kind yet with this timing, watching nothing.
fn blank(period: Time, on_change: bool, start: Time, end: Time) -> Monitor {
    Monitor {
        kind: MonitorKind::Queue,
        period,
        on_change,
        start,
        end,
        ports: Vec::new(),
        nodes: Vec::new(),
        priorities: 0,
        flows: Vec::new(),
        max_rows: 0,
    }
}

/// The series a periodic monitor writes per sample, at most. A scheme writes as many values
/// as it exposes, which only the run tells: counted as 256 per switch, and the run stops
/// sampling a monitor at its `max_rows`.
fn series(m: &Monitor) -> u64 {
    match m.kind {
        MonitorKind::Queue => m.ports.len() as u64 * m.priorities.count_ones() as u64,
        MonitorKind::Rate => m.flows.len() as u64,
        MonitorKind::LinkUtil => m.ports.len() as u64,
        MonitorKind::Scheme => m.nodes.len() as u64 * SCHEME_VALUES_PER_NODE,
        MonitorKind::Pfc => 0,
    }
}

/// How many values per watched node a scheme monitor budgets for.
pub const SCHEME_VALUES_PER_NODE: u64 = 256;

/// The looks a periodic monitor takes at most: at `start`, `start + period`, ... up to its
/// end or the run's stop.
fn samples(m: &Monitor, stop_at: Time) -> u64 {
    let last = m.end.min(stop_at);
    if last < m.start {
        return 0;
    }
    (last - m.start).ps() / m.period.ps() + 1
}

/// Refuses monitors whose rows could take more than `limit` bytes.
fn check_budget(monitors: &[Monitor], limit: Bytes) -> Result<(), String> {
    let bytes: Vec<u64> = monitors
        .iter()
        .map(|m| m.max_rows.saturating_mul(m.kind.row_bytes()))
        .collect();
    let total = bytes.iter().fold(0u64, |a, &b| a.saturating_add(b));
    if total <= limit.0 {
        return Ok(());
    }
    let (i, largest) = bytes
        .iter()
        .enumerate()
        .max_by_key(|(_, b)| **b)
        .expect("over the limit, so there is a monitor");
    let m = &monitors[i];
    let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
    Err(format!(
        "monitor: the monitors could write {} (above run.monitor_limit, {limit}); the largest, \
         monitor[{i}] ({}), up to {} rows of {} B ({}): sample less often (interval, \
         min_spacing), watch fewer nodes, ports, priorities or flows, bound it with start and \
         end, or raise run.monitor_limit (e.g. \"1GB\")",
        mb(total),
        m.kind.name(),
        m.max_rows,
        m.kind.row_bytes(),
        mb(*largest),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::topology::test_leaf_spine as fabric;

    fn parse(text: &str) -> Vec<MonitorSpec> {
        #[derive(Deserialize)]
        struct Monitors {
            monitor: Vec<MonitorSpec>,
        }
        toml::from_str::<Monitors>(text).unwrap().monitor
    }

    fn facts() -> RunFacts {
        RunFacts {
            flows: 10,
            flow_priorities: 1 << 3,
            stop_at: Time::from_ms(1),
            limit: DEFAULT_LIMIT,
            scheme: "ecmp",
            scheme_at_hosts: false,
        }
    }

    fn resolved(text: &str) -> Result<Vec<Monitor>, String> {
        let specs = parse(text);
        validate(&specs)?;
        let (spec, topo) = fabric();
        resolve(&specs, &spec, &topo, &facts())
    }

    #[test]
    fn a_scheme_monitor_watches_hosts_only_with_a_scheme_that_runs_there() {
        let specs = parse(
            "[[monitor]]\nkind = \"scheme\"\ninterval = \"1us\"\nnodes = [\"host:*\", \"leaf:0\"]",
        );
        let (spec, topo) = fabric();
        let err = resolve(&specs, &spec, &topo, &facts()).unwrap_err();
        assert!(
            err.starts_with("monitor[0].nodes: node 0 is a host; this monitor samples switches")
                && err.ends_with("scheme `ecmp` runs in the switches only (hosts are watched with a scheme that runs at the hosts, e.g. hermes)"),
            "{err}"
        );
        let hermes = RunFacts {
            scheme: "hermes",
            scheme_at_hosts: true,
            ..facts()
        };
        let m = resolve(&specs, &spec, &topo, &hermes).unwrap();
        let hosts: Vec<u32> = (0..topo.is_switch.len() as u32)
            .filter(|&n| !topo.is_switch[n as usize])
            .collect();
        assert_eq!(m[0].nodes.len(), hosts.len() + 1);
        assert!(hosts.iter().all(|h| m[0].nodes.contains(h)));
        // Without names: every switch, hosts not included.
        let all = parse("[[monitor]]\nkind = \"scheme\"\ninterval = \"1us\"");
        let m = resolve(&all, &spec, &topo, &hermes).unwrap();
        assert!(m[0].nodes.iter().all(|&n| topo.is_switch[n as usize]));
    }

    #[test]
    fn selectors_ports_and_peers_pick_the_ports_and_rows_are_counted() {
        let m = resolved(
            r#"
            [[monitor]]
            kind = "queue"
            nodes = ["leaf:1", "spine:*"]
            peers = ["leaf:*"]
            interval = "1us"
            "#,
        )
        .unwrap();
        // Leaf 5's ports lead to hosts 2, 3 and spines 6, 7: none to a leaf. Each spine's
        // port 0 leads to leaf 4, port 1 to leaf 5.
        assert_eq!(m[0].ports, [(6, 0), (6, 1), (7, 0), (7, 1)]);
        assert_eq!(m[0].priorities, 1 << 3, "the flows' priority by default");
        // Looks at 0, 1us, ..., 1ms: 1001 of 4 series.
        assert_eq!(m[0].max_rows, 4 * 1_001);
        let m = resolved(
            "[[monitor]]\nkind = \"pfc\"\nnodes = [\"host:0\"]\n[[monitor]]\nkind = \"rate\"\n\
             min_spacing = \"10us\"\nend = \"100us\"\nflows = [3, 1, 3]",
        )
        .unwrap();
        assert_eq!(
            (m[0].ports.clone(), m[0].priorities, m[0].max_rows),
            (vec![(0, 0)], 0xff, DEFAULT_MAX_EVENTS)
        );
        assert_eq!((m[1].flows.clone(), m[1].on_change), (vec![1, 3], true));
        assert_eq!(m[1].max_rows, 2 * 11);
    }

    #[test]
    fn bad_monitors_name_the_key_and_the_fix() {
        let cases = [
            ("kind = \"queue\"", "monitor[0]: no sampling; give interval"),
            (
                "kind = \"queue\"\ninterval = \"1us\"\nmin_spacing = \"1us\"",
                "monitor[0]: give interval (a sample every interval) or min_spacing",
            ),
            (
                "kind = \"rate\"\ninterval = \"0us\"",
                "monitor[0].interval: must be above 0",
            ),
            (
                "kind = \"link_util\"",
                "monitor[0].interval: missing; a link_util monitor counts",
            ),
            (
                "kind = \"queue\"\ninterval = \"1us\"\nstart = \"2us\"\nend = \"1us\"",
                "monitor[0].end: 1us is not after start (2us)",
            ),
            (
                "kind = \"pfc\"\npriorities = [8]",
                "monitor[0].priorities[0]: 8 is out of range; use 0..=7",
            ),
            (
                "kind = \"queue\"\ninterval = \"1us\"\nnodes = [\"host:1\"]",
                "monitor[0].nodes: node 1 is a host; this monitor samples switches",
            ),
            (
                "kind = \"queue\"\ninterval = \"1us\"\nnodes = [\"spine:2\"]",
                "monitor[0].nodes[0]: \"spine:2\" names no node of this topology; use node:<id>, \
                 host:0..3, leaf:0..1, spine:0..1",
            ),
            (
                "kind = \"link_util\"\ninterval = \"1us\"\nnodes = [\"tor:*\"]",
                "monitor[0].nodes[0]: \"tor:*\" names no role of this topology",
            ),
            (
                "kind = \"link_util\"\ninterval = \"1us\"\nnodes = [\"leaf:0\"]\nports = [4]",
                "monitor[0].ports[0]: node 4 has no port 4; its ports are 0..=3",
            ),
            (
                "kind = \"pfc\"\nnodes = [\"host:0\"]\npeers = [\"spine:0\"]",
                "monitor[0]: the nodes, ports and peers given select no port",
            ),
            (
                "kind = \"rate\"\ninterval = \"1us\"\nflows = [10]",
                "monitor[0].flows[0]: 10 is not a flow of this run; flow ids are 0..=9",
            ),
            (
                "kind = \"link_util\"\ninterval = \"1ns\"",
                "monitor: the monitors could write 576.0 MB (above run.monitor_limit, 100MB); \
                 the largest, monitor[0] (link_util), up to 16000016 rows of 36 B (576.0 MB)",
            ),
        ];
        for (body, message) in cases {
            let err = resolved(&format!("[[monitor]]\n{body}")).unwrap_err();
            assert!(err.starts_with(message), "{err}\n  expected: {message}");
        }
    }
}
