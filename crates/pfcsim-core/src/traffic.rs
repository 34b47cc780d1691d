//! Traffic: the flows a run simulates, made by the generators of a spec's `[[traffic]]`
//! tables.
//!
//! * `poisson`: flows arrive as one Poisson process over the whole fabric; each picks a
//!   source uniformly among the hosts and a destination uniformly among the other hosts (or
//!   the hosts under other ToRs with `cross_tor_only`), and a size from a flow-size CDF.
//!   **Load** is the offered payload rate divided by a capacity: with `load_of = "host"` the
//!   sum of host-link rates, with `load_of = "core"` the sum of ToR-uplink rates (the fabric
//!   core, as in the ConWeave scripts). At 2:1 oversubscription, core load 0.5 is host load
//!   0.25. The arrival rate is `load x capacity / (8 x mean flow size)`.
//! * `incast`: `senders` hosts (random, never the receiver) each send `total_size / senders`
//!   bytes to one receiver at the same instant, repeated `repeat` times every `period`.
//! * `background`: long flows between given host pairs.
//! * `scripted`: flows listed one by one.
//! * `flow_file`: the flow list of an ns-3 RDMA simulator (see `ns3.rs`), start times as in
//!   the file.
//! * `coflow`: groups of flows that complete together (`traffic/coflow.rs`); each flow
//!   records its coflow.
//! * `permutation`: every host sends one flow to another, the destinations a random
//!   derangement of the hosts (`traffic/permutation.rs`).
//!
//! Every random choice comes from the traffic RNG stream of generator `i` (its position in
//! the spec), so adding a generator does not change the flows of the others.

use crate::cdf::FlowSizeCdf;
use crate::check::check_range;
use crate::engine::{rng_stream, StreamKind};
use crate::topology::Topology;
use crate::units::{human_bytes, Bytes, Time};
use rand::seq::SliceRandom;
use rand::Rng;
use serde::{Deserialize, Serialize};

mod coflow;
mod permutation;
pub use coflow::{Arrival, CoflowSize, CoflowSpec, FlowsPerCoflow, PerTime, SizeDist};
pub use permutation::PermutationSpec;

/// The transport a traffic entry's flows use (`transport = "..."` in a `[[traffic]]` entry,
/// `[transport] kind` for the run's default). Defined here, below the transports themselves
/// (`crate::transport`), because the traffic entries name it; what each kind runs is there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportKind {
    /// RoCEv2 reliable connection: go-back-N, rate-based congestion control (`[cc]`).
    #[default]
    Roce,
    /// TCP: window-based, cumulative ACKs, receiver out-of-order buffer (`[transport.tcp]`).
    Tcp,
}

/// A flow to simulate: who sends how much to whom, when.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start: Time,
    pub priority: u8,
    pub dport: u16,
    pub source: &'static str,
    /// Index of the `[[traffic]]` entry that made the flow (0 for flows built in code).
    pub generator: u16,
    /// Path pinned by the sender, stamped on every data packet (0: none); see
    /// [`crate::packet::LbHeader::path_tag`] for the encoding.
    pub path_tag: u32,
    /// The flow's coflow, unique over the run (`None`: the flow is in no coflow).
    pub coflow: Option<u32>,
}

impl FlowSpec {
    /// A flow built in code (tests, examples): `size` bytes from host `src` to host `dst` at
    /// `start`, at priority 3 and UDP port 100, from no `[[traffic]]` entry (generator 0), left
    /// to the switches' scheme (no path tag) and in no coflow.
    pub fn scripted(src: u32, dst: u32, size: u64, start: Time) -> FlowSpec {
        FlowSpec {
            src,
            dst,
            size,
            start,
            priority: 3,
            dport: 100,
            source: "scripted",
            generator: 0,
            path_tag: 0,
            coflow: None,
        }
    }
}

/// Which capacity a Poisson generator's load is a fraction of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadOf {
    /// Sum of the host links' rates.
    Host,
    /// Sum of the ToR uplinks' rates (the fabric core).
    Core,
}

/// One `[[traffic]]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
// Written as a table with `kind = "<variant>"` (see `crate::tagged`).
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum TrafficSpec {
    Poisson(PoissonSpec),
    Incast(IncastSpec),
    Background(BackgroundSpec),
    Scripted(ScriptedSpec),
    FlowFile(FlowFileSpec),
    Coflow(CoflowSpec),
    Permutation(PermutationSpec),
}

crate::tagged::internally_tagged!(TrafficSpec, "kind");

fn default_priority() -> u8 {
    3
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoissonSpec {
    /// A shipped workload name (`pfcsim workloads` lists them) or a path to a CDF file.
    pub cdf: String,
    /// Offered load, strictly between 0 and 1.
    pub load: f64,
    #[serde(default = "default_load_of")]
    pub load_of: LoadOf,
    /// First possible arrival.
    #[serde(default)]
    pub start: Time,
    /// Arrivals happen in `[start, start + duration)`.
    pub duration: Time,
    /// Destinations only under another ToR than the source.
    #[serde(default)]
    pub cross_tor_only: bool,
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
}

fn default_load_of() -> LoadOf {
    LoadOf::Host
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncastSpec {
    /// Receiving host (node id).
    pub receiver: u32,
    /// Number of senders, drawn at random among the other hosts at each repetition.
    pub senders: u32,
    /// Bytes of one incast, split evenly over the senders.
    pub total_size: Bytes,
    #[serde(default)]
    pub start: Time,
    /// Time between repetitions.
    #[serde(default)]
    pub period: Time,
    #[serde(default = "one")]
    pub repeat: u32,
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
}

fn one() -> u32 {
    1
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackgroundSpec {
    /// `[src, dst]` host pairs, one long flow each.
    pub pairs: Vec<[u32; 2]>,
    pub size: Bytes,
    #[serde(default)]
    pub start: Time,
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedSpec {
    pub flows: Vec<ScriptedFlow>,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ScriptedFlow {
    pub src: u32,
    pub dst: u32,
    pub size: Bytes,
    #[serde(default)]
    pub start: Time,
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Pinned path: at the flow's `h`-th switch hop take equal-cost next hop `path[h]`
    /// (0-based, in port order; at most 4 hops). Empty: the switches' scheme decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<u8>,
    /// The flow's coflow, a number shared by the flows of one coflow of this entry (made
    /// unique over the run as the `coflow` generator's are). Unset: in no coflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coflow: Option<u32>,
}

crate::tagged::table!(ScriptedFlow);

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowFileSpec {
    /// Path of the flow file (relative paths are relative to the spec file).
    pub path: String,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportKind>,
}

/// A problem with a traffic generator, found before the run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TrafficError(pub String);

/// Everything a generator needs besides its own spec.
pub struct TrafficContext<'a> {
    pub topo: &'a Topology,
    pub seed: u64,
    /// Resolves `cdf` names and paths.
    pub load_cdf: &'a dyn Fn(&str) -> Result<FlowSizeCdf, String>,
    /// Reads a flow file.
    pub read_file: &'a dyn Fn(&str) -> Result<String, String>,
    /// How many flows the generator may make.
    pub budget: &'a FlowBudget,
}

/// How many flows a generator may make: what the run's memory limit leaves for flows once
/// the fabric is counted (`crate::budget`), less the flows of the generators before it. A
/// generator estimates its flows before making any and refuses more than this (naming its
/// key, the estimate and the limit), and stops with the same refusal if it makes more than
/// it estimated.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowBudget {
    /// The most flows the generator may make (below 2^32 - 1 in any case: flow ids are 32-bit
    /// and the largest is kept as "none").
    pub max_flows: u64,
    /// The estimated bytes of one flow, for messages.
    pub bytes_per_flow: f64,
    /// The estimated bytes of the fabric, for messages.
    pub fabric_bytes: f64,
    /// The limit, as a message names it: `run.max_memory (4GB)`.
    pub limit: String,
}

impl FlowBudget {
    /// No limit but the width of flow ids.
    pub fn unlimited() -> FlowBudget {
        FlowBudget {
            max_flows: u64::from(u32::MAX) - 1,
            bytes_per_flow: 0.0,
            fabric_bytes: 0.0,
            limit: "32-bit flow ids".into(),
        }
    }

    /// The same budget with `max_flows` flows left.
    pub fn with_max_flows(&self, max_flows: u64) -> FlowBudget {
        FlowBudget {
            max_flows,
            ..self.clone()
        }
    }

    /// Checks an estimate of `flows` flows (made as `how` says) of the spec key `key`;
    /// `fix` says what to change besides the limit.
    fn check(&self, key: &str, flows: f64, how: &str, fix: &str) -> Result<(), TrafficError> {
        // Written so that a NaN estimate is refused too.
        if flows <= self.max_flows as f64 {
            return Ok(());
        }
        Err(self.refuse(key, &format!("about {flows:.0} flows ({how})"), flows, fix))
    }

    /// Stops a generator that has made `made` flows of the spec key `key` when it would make
    /// one more than its budget (an estimate can fall short).
    fn check_made(&self, key: &str, made: usize, fix: &str) -> Result<(), TrafficError> {
        if (made as u64) < self.max_flows {
            return Ok(());
        }
        let more = self.max_flows as f64 + 1.0;
        Err(self.refuse(
            key,
            &format!("more than {} flows", self.max_flows),
            more,
            fix,
        ))
    }

    fn refuse(&self, key: &str, count: &str, flows: f64, fix: &str) -> TrafficError {
        let bytes = self.fabric_bytes + flows * self.bytes_per_flow;
        TrafficError(format!(
            "{key}: {count}, about {} to simulate with the fabric, above {}, which leaves room \
             for about {} more flows; {fix}, or raise run.max_memory",
            human_bytes(bytes),
            self.limit,
            self.max_flows
        ))
    }
}

impl TrafficSpec {
    /// The transport this entry asks for its flows (`None`: the run's default).
    pub fn transport(&self) -> Option<TransportKind> {
        match self {
            TrafficSpec::Poisson(s) => s.transport,
            TrafficSpec::Incast(s) => s.transport,
            TrafficSpec::Background(s) => s.transport,
            TrafficSpec::Scripted(s) => s.transport,
            TrafficSpec::FlowFile(s) => s.transport,
            TrafficSpec::Coflow(s) => s.transport,
            TrafficSpec::Permutation(s) => s.transport,
        }
    }

    /// The flows of generator number `index` (its position among the spec's generators).
    pub fn generate(
        &self,
        index: usize,
        ctx: &TrafficContext,
    ) -> Result<Vec<FlowSpec>, TrafficError> {
        let key = format!("traffic[{index}]");
        let mut rng = rng_stream(ctx.seed, StreamKind::Traffic, index as u64);
        let topo = ctx.topo;
        let check_host = |field: &str, node: u32| -> Result<(), TrafficError> {
            if (node as usize) < topo.nodes() && !topo.is_switch[node as usize] {
                Ok(())
            } else {
                Err(TrafficError(format!(
                    "{key}.{field}: {node} is not a host of the topology; hosts are {}",
                    describe_hosts(&topo.hosts)
                )))
            }
        };
        let check_priority = |field: &str, p: u8| check_priority(&format!("{key}.{field}"), p);
        let flow = |src, dst, size, start, priority, source| FlowSpec {
            src,
            dst,
            size,
            start,
            priority,
            dport: 100,
            source,
            generator: index as u16,
            path_tag: 0,
            coflow: None,
        };
        match self {
            TrafficSpec::Poisson(p) => {
                check_priority("priority", p.priority)?;
                if !(p.load > 0.0 && p.load < 1.0) {
                    return Err(TrafficError(format!(
                        "{key}.load: {} is not a valid load; give a fraction strictly between 0 and 1 (e.g. 0.5)",
                        p.load
                    )));
                }
                let cdf =
                    (ctx.load_cdf)(&p.cdf).map_err(|e| TrafficError(format!("{key}.cdf: {e}")))?;
                let capacity = match p.load_of {
                    LoadOf::Host => topo.host_capacity_bps(),
                    LoadOf::Core => topo.core_capacity_bps(),
                } as f64;
                if capacity == 0.0 {
                    return Err(TrafficError(format!(
                        "{key}.load_of: the topology has no core links (every host is under one switch); use load_of = \"host\""
                    )));
                }
                if p.cross_tor_only {
                    check_cross_tor(topo, &key)?;
                }
                let per_second = p.load * capacity / (8.0 * cdf.mean());
                let (duration_key, fix) = (
                    format!("{key}.duration"),
                    "shorten the duration or lower the load",
                );
                ctx.budget.check(
                    &duration_key,
                    per_second * p.duration.as_secs_f64(),
                    &format!(
                        "Poisson arrivals at {per_second:.3e} per second for {}",
                        p.duration
                    ),
                    fix,
                )?;
                let mean_gap_ps = 1e12 / per_second;
                let end = p.start + p.duration;
                let mut t = p.start.ps() as f64;
                let mut flows = Vec::new();
                loop {
                    // Exponential inter-arrival time.
                    let u: f64 = rng.gen();
                    t += -mean_gap_ps * (1.0 - u).ln();
                    if t >= end.ps() as f64 {
                        break;
                    }
                    ctx.budget.check_made(&duration_key, flows.len(), fix)?;
                    let (src, dst) = random_pair(topo, p.cross_tor_only, &mut rng);
                    let size = cdf.sample(rng.gen());
                    flows.push(flow(src, dst, size, Time(t as u64), p.priority, "poisson"));
                }
                Ok(flows)
            }
            TrafficSpec::Incast(s) => {
                check_host("receiver", s.receiver)?;
                check_priority("priority", s.priority)?;
                let others: Vec<u32> = topo
                    .hosts
                    .iter()
                    .copied()
                    .filter(|&h| h != s.receiver)
                    .collect();
                if s.senders == 0 || s.senders as usize > others.len() {
                    return Err(TrafficError(format!(
                        "{key}.senders: {} senders asked for, but there are {} hosts besides the receiver; use 1..={}",
                        s.senders,
                        others.len(),
                        others.len()
                    )));
                }
                let each = s.total_size.0 / s.senders as u64;
                if each == 0 {
                    return Err(TrafficError(format!(
                        "{key}.total_size: {} split over {} senders is less than a byte each",
                        s.total_size, s.senders
                    )));
                }
                if s.repeat > 1 && s.period == Time::ZERO {
                    return Err(TrafficError(format!(
                        "{key}.period: repeat = {} needs a period greater than 0 (e.g. \"500us\")",
                        s.repeat
                    )));
                }
                ctx.budget.check(
                    &format!("{key}.repeat"),
                    f64::from(s.repeat) * f64::from(s.senders),
                    &format!("{} repetitions of {} senders", s.repeat, s.senders),
                    "lower repeat or senders",
                )?;
                let mut flows = Vec::new();
                for r in 0..s.repeat as u64 {
                    // Saturating: a start past the clock's end is refused with the others
                    // past `Time::SPEC_MAX` (`Scenario::prepare`).
                    let start = Time(s.start.ps().saturating_add(r.saturating_mul(s.period.ps())));
                    for &src in others.choose_multiple(&mut rng, s.senders as usize) {
                        flows.push(flow(src, s.receiver, each, start, s.priority, "incast"));
                    }
                }
                Ok(flows)
            }
            TrafficSpec::Background(b) => {
                check_priority("priority", b.priority)?;
                if b.size.0 == 0 {
                    return Err(TrafficError(format!(
                        "{key}.size: background flows need a size above 0 (e.g. \"100MB\")"
                    )));
                }
                let mut flows = Vec::new();
                for (i, &[src, dst]) in b.pairs.iter().enumerate() {
                    check_host(&format!("pairs[{i}][0]"), src)?;
                    check_host(&format!("pairs[{i}][1]"), dst)?;
                    if src == dst {
                        return Err(TrafficError(format!(
                            "{key}.pairs[{i}]: source and destination are both {src}"
                        )));
                    }
                    flows.push(flow(src, dst, b.size.0, b.start, b.priority, "background"));
                }
                Ok(flows)
            }
            TrafficSpec::Scripted(s) => {
                let mut flows = Vec::new();
                for (i, f) in s.flows.iter().enumerate() {
                    check_host(&format!("flows[{i}].src"), f.src)?;
                    check_host(&format!("flows[{i}].dst"), f.dst)?;
                    check_priority(&format!("flows[{i}].priority"), f.priority)?;
                    if f.src == f.dst {
                        return Err(TrafficError(format!(
                            "{key}.flows[{i}]: source and destination are both {}",
                            f.src
                        )));
                    }
                    if f.size.0 == 0 {
                        return Err(TrafficError(format!(
                            "{key}.flows[{i}].size: a flow needs at least one byte"
                        )));
                    }
                    if f.path.len() > 4 || f.path.contains(&u8::MAX) {
                        return Err(TrafficError(format!(
                            "{key}.flows[{i}].path: {:?} is not a valid path; give at most 4 next-hop choices, each 0..=254",
                            f.path
                        )));
                    }
                    let mut pinned = flow(f.src, f.dst, f.size.0, f.start, f.priority, "scripted");
                    pinned.coflow = f.coflow;
                    pinned.path_tag = f
                        .path
                        .iter()
                        .enumerate()
                        .map(|(hop, &c)| (c as u32 + 1) << (8 * hop))
                        .sum();
                    flows.push(pinned);
                }
                Ok(flows)
            }
            TrafficSpec::FlowFile(f) => {
                let text = (ctx.read_file)(&f.path)
                    .map_err(|e| TrafficError(format!("{key}.path: {e}")))?;
                let parsed = crate::ns3::parse_flows(&text)
                    .map_err(|e| TrafficError(format!("{key}.path: {}: {e}", f.path)))?;
                ctx.budget.check(
                    &format!("{key}.path"),
                    parsed.len() as f64,
                    &format!("the flows of {}", f.path),
                    "use a shorter flow file",
                )?;
                let mut flows = Vec::with_capacity(parsed.len());
                for (i, fl) in parsed.iter().enumerate() {
                    for (what, node) in [("source", fl.src), ("destination", fl.dst)] {
                        if (node as usize) >= topo.nodes() || topo.is_switch[node as usize] {
                            return Err(TrafficError(format!(
                                "{key}.path: {}: flow {} (line {}): {what} {node} is not a host of the topology; hosts are {}",
                                f.path,
                                i,
                                fl.line,
                                describe_hosts(&topo.hosts)
                            )));
                        }
                    }
                    // The flow's place is spelt out only if the check fails (a flow file may
                    // hold 100,000 flows).
                    check_range("priority", fl.priority, 1..=7, "").map_err(|e| {
                        TrafficError(format!(
                            "{key}.path: {}: flow {i} (line {}): {e}",
                            f.path, fl.line
                        ))
                    })?;
                    flows.push(FlowSpec {
                        src: fl.src,
                        dst: fl.dst,
                        size: fl.size_bytes,
                        start: fl.start,
                        priority: fl.priority,
                        dport: fl.dport.unwrap_or(100),
                        source: "flow_file",
                        generator: index as u16,
                        path_tag: 0,
                        coflow: None,
                    });
                }
                Ok(flows)
            }
            TrafficSpec::Coflow(c) => c.generate(index, ctx, &mut rng),
            TrafficSpec::Permutation(p) => p.generate(index, ctx, &mut rng),
        }
    }
}

/// Refuses `cross_tor_only` (of the entry at `key`) on a topology whose hosts all hang under
/// one switch: no flow could cross ToRs.
/// A flow's PFC priority: a data class, 1..=7 (`key` names it in the error).
pub(crate) fn check_priority(key: &str, priority: u8) -> Result<(), TrafficError> {
    check_range(key, priority, 1..=7, "(0 is the control class)").map_err(TrafficError)
}

pub(crate) fn check_cross_tor(topo: &Topology, key: &str) -> Result<(), TrafficError> {
    let tors: std::collections::BTreeSet<u32> = topo
        .hosts
        .iter()
        .map(|&h| topo.tor_of[h as usize])
        .collect();
    if tors.len() < 2 {
        return Err(TrafficError(format!(
            "{key}.cross_tor_only: every host is under one switch, so no flow can cross ToRs; set it to false"
        )));
    }
    Ok(())
}

/// A random source and a random other destination among the hosts, under another ToR with
/// `cross_tor_only` (checked possible by [`check_cross_tor`]).
pub(crate) fn random_pair<R: Rng>(
    topo: &Topology,
    cross_tor_only: bool,
    rng: &mut R,
) -> (u32, u32) {
    let src = *topo.hosts.choose(rng).expect("at least two hosts");
    loop {
        let dst = *topo.hosts.choose(rng).expect("at least two hosts");
        let same_tor = topo.tor_of[dst as usize] == topo.tor_of[src as usize];
        if dst != src && !(cross_tor_only && same_tor) {
            return (src, dst);
        }
    }
}

/// "0..=127" style description of host ids for messages.
pub fn describe_hosts(hosts: &[u32]) -> String {
    let contiguous = hosts.windows(2).all(|w| w[1] == w[0] + 1);
    match (hosts.first(), hosts.last()) {
        (Some(a), Some(b)) if contiguous => format!("{a}..={b}"),
        _ => format!("the {} nodes that are not switches", hosts.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::LeafSpine;
    use crate::units::Rate;

    fn topo() -> Topology {
        Topology::leaf_spine(&LeafSpine::uniform(
            8,
            8,
            16,
            Rate::gbps(100),
            Time::from_us(1),
        ))
    }

    /// The budget of the unit tests' generators: no limit but the width of flow ids.
    pub(super) static UNLIMITED: std::sync::LazyLock<FlowBudget> =
        std::sync::LazyLock::new(FlowBudget::unlimited);

    fn ctx(t: &Topology) -> TrafficContext<'_> {
        TrafficContext {
            topo: t,
            seed: 1,
            load_cdf: &|name| FlowSizeCdf::builtin(name).ok_or_else(|| format!("no {name}")),
            read_file: &|p| Err(format!("no file {p}")),
            budget: &UNLIMITED,
        }
    }

    fn poisson(load: f64, load_of: LoadOf) -> TrafficSpec {
        TrafficSpec::Poisson(PoissonSpec {
            cdf: "alistorage".into(),
            load,
            load_of,
            start: Time::ZERO,
            duration: Time::from_ms(10),
            cross_tor_only: false,
            priority: 3,
            transport: None,
        })
    }

    #[test]
    fn poisson_offers_the_asked_load() {
        let t = topo();
        let flows = poisson(0.5, LoadOf::Core).generate(0, &ctx(&t)).unwrap();
        let bytes: u64 = flows.iter().map(|f| f.size).sum();
        // 50% of the 6.4 Tbps core = 25% of the 12.8 Tbps of host links, for 10 ms.
        let expected = 0.25 * 12.8e12 / 8.0 * 0.010;
        let rel = (bytes as f64 - expected).abs() / expected;
        assert!(rel < 0.03, "{bytes} bytes vs {expected}");
        // About 97,900 flows at a 40.87 KB mean (the reference file has 97,737).
        assert!((95_000..101_000).contains(&flows.len()), "{}", flows.len());
        assert!(flows.iter().all(|f| f.src != f.dst));
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        let same = poisson(0.25, LoadOf::Host).generate(0, &ctx(&t)).unwrap();
        assert_eq!(same, flows, "core 0.5 = host 0.25 at 2:1");
    }

    /// The flows a generator may make are checked before it makes any (by its estimate) and
    /// as it makes them (the count of a Poisson process can exceed its mean).
    #[test]
    fn generators_keep_to_their_budget() {
        let t = topo();
        let spec = poisson(0.5, LoadOf::Core);
        assert_eq!(spec.generate(0, &ctx(&t)).unwrap().len(), 98_228);
        let budget = FlowBudget {
            max_flows: 90_000,
            bytes_per_flow: 1000.0,
            fabric_bytes: 1e6,
            limit: "run.max_memory (91MB)".into(),
        };
        let refused = |max_flows| {
            let budget = budget.with_max_flows(max_flows);
            let c = TrafficContext {
                budget: &budget,
                ..ctx(&t)
            };
            spec.generate(3, &c).unwrap_err().0
        };
        // The estimate, 97,872 flows, is over 90,000.
        assert_eq!(
            refused(90_000),
            "traffic[3].duration: about 97872 flows (Poisson arrivals at 9.787e6 per second for \
             10ms), about 98.9 MB to simulate with the fabric, above run.max_memory (91MB), \
             which leaves room for about 90000 more flows; shorten the duration or lower the \
             load, or raise run.max_memory"
        );
        // The estimate is not, the flows are.
        assert_eq!(
            refused(98_000),
            "traffic[3].duration: more than 98000 flows, about 99.0 MB to simulate with the \
             fabric, above run.max_memory (91MB), which leaves room for about 98000 more flows; \
             shorten the duration or lower the load, or raise run.max_memory"
        );
    }

    #[test]
    fn cross_tor_only_never_stays_under_one_tor() {
        let t = topo();
        let mut spec = poisson(0.1, LoadOf::Host);
        if let TrafficSpec::Poisson(p) = &mut spec {
            p.cross_tor_only = true;
        }
        let flows = spec.generate(0, &ctx(&t)).unwrap();
        assert!(flows
            .iter()
            .all(|f| t.tor_of[f.src as usize] != t.tor_of[f.dst as usize]));
    }

    #[test]
    fn incast_repeats_with_distinct_senders() {
        let t = topo();
        let spec = TrafficSpec::Incast(IncastSpec {
            receiver: 5,
            senders: 16,
            total_size: Bytes(1_600_000),
            start: Time::from_us(10),
            period: Time::from_us(500),
            repeat: 3,
            priority: 3,
            transport: None,
        });
        let flows = spec.generate(0, &ctx(&t)).unwrap();
        assert_eq!(flows.len(), 48);
        for r in 0..3 {
            let batch = &flows[r * 16..(r + 1) * 16];
            let mut srcs: Vec<u32> = batch.iter().map(|f| f.src).collect();
            srcs.sort();
            srcs.dedup();
            assert_eq!(srcs.len(), 16);
            assert!(batch.iter().all(|f| f.dst == 5 && f.size == 100_000));
            assert!(batch
                .iter()
                .all(|f| f.start == Time::from_us(10 + 500 * r as u64)));
        }
    }

    #[test]
    fn scripted_paths_encode_one_byte_per_hop() {
        let t = topo();
        let scripted = |path: Vec<u8>| {
            TrafficSpec::Scripted(ScriptedSpec {
                flows: vec![ScriptedFlow {
                    src: 0,
                    dst: 20,
                    size: Bytes(10),
                    start: Time::ZERO,
                    priority: 3,
                    path,
                    coflow: None,
                }],
                transport: None,
            })
            .generate(0, &ctx(&t))
        };
        assert_eq!(scripted(vec![]).unwrap()[0].path_tag, 0);
        assert_eq!(scripted(vec![2, 0]).unwrap()[0].path_tag, 0x0103);
        let e = scripted(vec![0; 5]).unwrap_err();
        assert!(e
            .0
            .starts_with("traffic[0].flows[0].path: [0, 0, 0, 0, 0] is not a valid path"));
    }

    /// A flow file's priority out of range names the file, the flow and its line (the message
    /// is built only then).
    #[test]
    fn a_flow_file_priority_out_of_range_names_the_flow() {
        let t = topo();
        let read = |_: &str| Ok("2\n0 20 3 1000 2.0\n1 20 0 1000 2.000001\n".to_string());
        let c = TrafficContext {
            read_file: &read,
            ..ctx(&t)
        };
        let spec = TrafficSpec::FlowFile(FlowFileSpec {
            path: "flows.txt".into(),
            transport: None,
        });
        assert_eq!(
            spec.generate(0, &c).unwrap_err().0,
            "traffic[0].path: flows.txt: flow 1 (line 3): priority: 0 is out of range; use 1..=7"
        );
    }

    #[test]
    fn bad_values_name_their_key() {
        let t = topo();
        let e = poisson(1.0, LoadOf::Host)
            .generate(2, &ctx(&t))
            .unwrap_err();
        assert_eq!(
            e.0,
            "traffic[2].load: 1 is not a valid load; give a fraction strictly between 0 and 1 (e.g. 0.5)"
        );
        let spec = TrafficSpec::Scripted(ScriptedSpec {
            flows: vec![ScriptedFlow {
                src: 0,
                dst: 130,
                size: Bytes(10),
                start: Time::ZERO,
                priority: 3,
                path: vec![],
                coflow: None,
            }],
            transport: None,
        });
        let e = spec.generate(0, &ctx(&t)).unwrap_err();
        assert_eq!(
            e.0,
            "traffic[0].flows[0].dst: 130 is not a host of the topology; hosts are 0..=127"
        );
    }
}
