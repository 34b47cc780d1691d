//! The scenario format: a TOML document (or the same structure from Python) describing the
//! topology, the fabric's parameters, the load balancer and the traffic of one run.
//!
//! Reading a spec rejects, before anything runs: unknown keys (with the valid ones listed),
//! values without or with wrong units, impossible values, unknown schemes and workloads.
//! Every message names the file (and line, for syntax and type errors), then the key path of
//! the offending value (inside the tagged tables `[topology]`, `[cc]`, `[lb]` and
//! `[[traffic]]` too, see `crate::tagged`), then what would be valid.
//! [`Spec::resolved_toml`] gives the spec with every default filled in; it is saved next to
//! every result.

use crate::budget::MemoryLimit;
use crate::cc::CcConfig;
use crate::cdf::FlowSizeCdf;
use crate::faults::{FaultSpec, ScheduledFault};
use crate::lb::LbConfig;
use crate::monitor::{Monitor, MonitorSpec, RunFacts};
use crate::sim::{CoflowConfig, FabricConfig, StopRule, SwitchConfig};
use crate::topology::{Topology, TopologySpec};
use crate::traffic::{FlowSpec, TrafficContext, TrafficSpec};
use crate::transport::{NicConfig, TcpCc, TransportConfig, TransportKind};
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A problem with a spec, found before any simulation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct SpecError {
    pub message: String,
}

impl From<String> for SpecError {
    fn from(message: String) -> Self {
        SpecError { message }
    }
}

fn err<T>(message: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError {
        message: message.into(),
    })
}

/// One run, as written in a spec file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Free-form name of the scenario.
    #[serde(default)]
    pub name: String,
    /// Seed of every random choice (topology degradation, traffic, ECN, load balancers).
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub topology: TopologySpec,
    #[serde(default)]
    pub switch: SwitchConfig,
    #[serde(default)]
    pub nic: NicConfig,
    #[serde(default)]
    pub cc: CcConfig,
    #[serde(default)]
    pub lb: LbConfig,
    /// The coflow scheduler (`[coflow]`; written out only when set).
    #[serde(default, skip_serializing_if = "CoflowConfig::is_default")]
    pub coflow: CoflowConfig,
    /// Transport of the flows (RoCE or TCP) and TCP's parameters (`transport.rs`); left out of
    /// the resolved spec when it is the default (every flow RoCE).
    #[serde(default, skip_serializing_if = "TransportConfig::is_default")]
    pub transport: TransportConfig,
    pub traffic: Vec<TrafficSpec>,
    #[serde(default)]
    pub run: RunSpec,
    /// Faults: links down or slowed, switches dropping packets (`faults.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultSpec>,
    /// Monitors: time series and event logs of the run (`[[monitor]]`, `monitor.rs`).
    #[serde(default, rename = "monitor", skip_serializing_if = "Vec::is_empty")]
    pub monitors: Vec<MonitorSpec>,
}

fn default_seed() -> u64 {
    1
}

/// `[run]`: when to stop and how to summarize.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct RunSpec {
    /// Hard stop in simulated time. Unset: 1 s after the last flow starts.
    pub stop_at: Option<Time>,
    /// Stop as soon as every flow has finished.
    pub stop_when_done: bool,
    /// Upper bounds of the flow-size buckets of the summary.
    pub size_buckets: Vec<Bytes>,
    /// The most bytes the monitors may write (unset: `monitor::DEFAULT_LIMIT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub monitor_limit: Option<Bytes>,
    /// The most memory the run may plan for, checked against estimates of the fabric and the
    /// flows before they are built (unset: half of the memory the process may use; see
    /// `crate::budget`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_memory: Option<Bytes>,
    /// The most events the run may process; a run that reaches it stops there, its results
    /// marked incomplete (unset: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_events: Option<u64>,
    /// The latest simulated time the run may reach; a run still going there (before
    /// `stop_at`) stops, its results marked incomplete (unset: no limit but `stop_at`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sim_time: Option<Time>,
    /// The no-progress watchdog: a run in which no flow finishes and no byte is delivered for
    /// this long while data waits (in switch buffers or at NICs) stops there, its results marked
    /// incomplete (unset: see [`Scenario::no_progress`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_progress: Option<Time>,
    /// PFC deadlock detection: how long a pause between switches must have lasted before a
    /// check looks at it, and how often the checks come while such pauses are held; a run
    /// with a deadlock stops at the check that finds it, its results marked incomplete
    /// (unset: [`DEFAULT_DEADLOCK_CHECK`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadlock_check: Option<Time>,
}

/// The least `run.no_progress` when unset (see [`Scenario::no_progress`]).
pub const MIN_NO_PROGRESS: Time = Time::from_ms(100);

/// `run.deadlock_check` when unset: a deadlock is found within 2 ms of forming, and pauses
/// shorter than 1 ms (nearly all pauses of a working fabric) are never looked at.
pub const DEFAULT_DEADLOCK_CHECK: Time = Time::from_ms(1);

crate::tagged::table!(RunSpec);

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            stop_at: None,
            stop_when_done: true,
            size_buckets: vec![
                Bytes(10_000),
                Bytes(100_000),
                Bytes(1_000_000),
                Bytes(10_000_000),
            ],
            monitor_limit: None,
            max_memory: None,
            max_events: None,
            max_sim_time: None,
            no_progress: None,
            deadlock_check: None,
        }
    }
}

impl Spec {
    /// Reads and validates a spec from TOML text. `origin` names it in messages.
    pub fn from_toml(text: &str, origin: &str) -> Result<Spec, SpecError> {
        let de = toml::Deserializer::new(text);
        let spec: Spec = serde_path_to_error::deserialize(de).map_err(|e| {
            let mut path = e.path().to_string();
            let inner = e.into_inner();
            let mut msg = inner.message().trim_end().to_string();
            let mut offset = inner.span().map(|s| s.start);
            // An error inside a tagged table carries its key path inside the table and the
            // position of its key.
            if let Some((rest, at, located)) = crate::tagged::split_located(&msg) {
                path = crate::tagged::join(&path, rest);
                offset = at.or(offset);
                msg = located.to_string();
            }
            // What the TOML reader says of a number, array or table where a name is expected.
            if msg == "invalid type: unit variant, expected string only" {
                msg = "expected a name in quotes (a string); docs/reference/spec.md lists the \
                       names this key takes"
                    .to_string();
            }
            let location = offset
                .filter(|&o| o <= text.len())
                .map(|o| {
                    let line = text[..o].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
            SpecError {
                message: if path == "." || path.is_empty() {
                    format!("{origin}{location}: {msg}")
                } else {
                    format!("{origin}{location}: {path}: {msg}")
                },
            }
        })?;
        spec.validate().map_err(|e| SpecError {
            message: format!("{origin}: {}", e.message),
        })?;
        Ok(spec)
    }

    /// The spec with every default written out.
    pub fn resolved_toml(&self) -> String {
        toml::to_string(self).expect("a spec always serializes")
    }

    /// Checks the values that the types alone cannot.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.topology.validate()?;
        self.switch.validate()?;
        self.nic.validate()?;
        self.cc.validate()?;
        self.lb.validate()?;
        self.transport.validate()?;
        self.validate_transport()?;
        if self.cc.carries_int() && self.lb.scheme().resequencing().is_some() {
            return err(format!(
                "cc.kind: \"{}\" echoes each data packet's telemetry on its ACK, and scheme \"{}\" resequences packets at the receiver, where the telemetry is not kept; set lb.resequence = false, or use another cc.kind (\"dcqcn\", \"timely\")",
                self.cc.name(),
                self.lb.name()
            ));
        }
        if self.lb.capabilities().loopback && self.switch.loopback.is_none() {
            return err(format!(
                "switch.loopback: missing; scheme \"{}\" recirculates packets through a loopback link: add [switch.loopback] with rate and delay (e.g. rate = \"40Gbps\", delay = \"500ns\"), or set lb.recirculation = false",
                self.lb.name()
            ));
        }
        if self.traffic.is_empty() {
            return err("traffic: no traffic generator; add at least one [[traffic]] table");
        }
        let b = &self.run.size_buckets;
        if b.windows(2).any(|w| w[0] >= w[1]) {
            return err(
                "run.size_buckets: bounds must increase (e.g. [\"10KB\", \"100KB\", \"1MB\"])",
            );
        }
        if self.run.max_events == Some(0) {
            return err("run.max_events: must be at least 1, or left out for no limit");
        }
        if self.run.max_sim_time == Some(Time::ZERO) {
            return err(
                "run.max_sim_time: must be above 0 (e.g. \"100ms\"), or left out for no limit",
            );
        }
        if self.run.no_progress == Some(Time::ZERO) {
            return err(format!(
                "run.no_progress: must be above 0 (e.g. \"100ms\"), or left out for the default (\"{MIN_NO_PROGRESS}\", or ten times the time the slowest link takes to carry a full switch buffer if that is longer)"
            ));
        }
        if self.run.deadlock_check == Some(Time::ZERO) {
            return err(format!(
                "run.deadlock_check: must be above 0 (e.g. \"100us\"), or left out for the default \"{DEFAULT_DEADLOCK_CHECK}\""
            ));
        }
        crate::monitor::validate(&self.monitors)?;
        Ok(())
    }
}

impl Spec {
    /// The transport of each `[[traffic]]` entry's flows, by entry.
    pub fn traffic_transports(&self) -> Vec<TransportKind> {
        self.traffic
            .iter()
            .map(|t| t.transport().unwrap_or(self.transport.kind))
            .collect()
    }

    /// Checks that the switches suit the transports of the flows: DCTCP needs ECN marking;
    /// a drop-tail egress limit needs a lossy fabric.
    fn validate_transport(&self) -> Result<(), SpecError> {
        let tcp = self.traffic_transports().contains(&TransportKind::Tcp);
        if tcp && self.transport.tcp.cc == TcpCc::Dctcp && !self.switch.ecn.enabled {
            return err("transport.tcp.cc: \"dctcp\" reacts to ECN marks but switch.ecn.enabled is false; enable marking (DCTCP: step marking at K, e.g. kmin = kmax = \"97KB\", pmax = 1.0) or use cc = \"newreno\"");
        }
        Ok(())
    }
}

/// A spec turned into everything the simulator needs.
pub struct Scenario {
    pub spec: Spec,
    pub topology: Topology,
    pub flows: Vec<FlowSpec>,
    pub fabric: FabricConfig,
    pub stop: StopRule,
    /// The spec's faults, checked against the topology and resolved to node ids.
    pub faults: Vec<ScheduledFault>,
    /// The spec's monitors, resolved likewise (empty: none).
    pub monitors: Vec<Monitor>,
}

impl Scenario {
    /// The no-progress watchdog's time: `run.no_progress`, or when unset the larger of
    /// [`MIN_NO_PROGRESS`] and ten times the time the slowest link takes to carry a full
    /// switch buffer. Far longer than data waits without moving in a working fabric: queues
    /// drain at their link's rate, a PFC pause lasts until the queue behind it drains, a
    /// flow waiting for its retransmission timeout has nothing in the buffers (which the
    /// watchdog does not count), and a buffer of packets that a go-back-N receiver discards
    /// drains in a tenth of it.
    pub fn no_progress(&self) -> Time {
        self.spec.run.no_progress.unwrap_or_else(|| {
            let slowest = self.topology.links.iter().map(|l| l.rate).min();
            let full = slowest.map_or(Time::ZERO, |r| r.tx_time(self.fabric.switch.buffer.0));
            MIN_NO_PROGRESS.max(Time(full.ps().saturating_mul(10)))
        })
    }

    /// Builds the topology and the traffic. Relative paths are resolved against `base_dir`
    /// (the spec file's folder).
    pub fn prepare(spec: Spec, base_dir: &Path) -> Result<Scenario, SpecError> {
        let resolve = |p: &str| -> PathBuf {
            let path = Path::new(p);
            if path.is_absolute() {
                path.to_path_buf()
            } else {
                base_dir.join(path)
            }
        };
        let read = |p: &str| -> Result<String, String> {
            let full = resolve(p);
            std::fs::read_to_string(&full)
                .map_err(|e| format!("cannot read {}: {e}", full.display()))
        };
        // The fabric is checked against the memory limit before it is built (a topology file
        // once it is read: its size is its own), and the flows before they are made.
        let limit = MemoryLimit::new(spec.run.max_memory);
        let loopbacks = spec.switch.loopback.is_some();
        let size_keys = spec.topology.size_keys();
        if let Some(shape) = spec.topology.shape(loopbacks) {
            limit.check_fabric("topology", &size_keys, &shape)?;
        }
        let mut topology = spec.topology.build(spec.seed, &read)?;
        if let Some(lo) = &spec.switch.loopback {
            topology = topology.with_loopbacks(lo.rate, lo.delay);
        }
        let budget = limit.check_fabric("topology", &size_keys, &topology.shape())?;
        let load_cdf = |name: &str| -> Result<FlowSizeCdf, String> {
            if let Some(c) = FlowSizeCdf::builtin(name) {
                return Ok(c);
            }
            if !name.contains('/') && !name.ends_with(".cdf") {
                return Err(format!(
                    "'{name}' is not a shipped workload ({}) nor a path to a .cdf file",
                    FlowSizeCdf::builtin_names().join(", ")
                ));
            }
            let text = read(name)?;
            FlowSizeCdf::parse(name, &text).map_err(|e| format!("{name}: {e}"))
        };
        if spec.traffic.len() > u16::MAX as usize {
            return err("traffic: more than 65,535 [[traffic]] entries; merge scripted flows into fewer entries");
        }
        let mut flows = Vec::new();
        // Coflows are numbered over the run: a generator's follow the previous ones'.
        let mut coflows = 0u32;
        for (i, t) in spec.traffic.iter().enumerate() {
            // What the flows of the generators before leave of the budget.
            let left = budget.with_max_flows(budget.max_flows.saturating_sub(flows.len() as u64));
            let ctx = TrafficContext {
                topo: &topology,
                seed: spec.seed,
                load_cdf: &load_cdf,
                read_file: &read,
                budget: &left,
            };
            let mut made = t
                .generate(i, &ctx)
                .map_err(|e| SpecError { message: e.0 })?;
            if let Some(late) = made.iter().find(|f| f.start > Time::SPEC_MAX) {
                return err(format!(
                    "traffic[{i}]: a flow would start at {:.6} s, after {}, the latest start a \
                     run may have (the simulated clock counts picoseconds in 64 bits); start the \
                     traffic earlier",
                    late.start.as_secs_f64(),
                    Time::SPEC_MAX
                ));
            }
            let mut last = None;
            for c in made.iter_mut().filter_map(|f| f.coflow.as_mut()) {
                *c += coflows;
                last = last.max(Some(*c));
            }
            coflows = last.map_or(coflows, |c| c + 1);
            flows.extend(made);
        }
        if flows.is_empty() {
            return err("traffic: the generators made no flow (is a duration or a count zero?)");
        }
        if spec.coflow.scheduler != crate::sim::Scheduler::None
            && flows.iter().all(|f| f.coflow.is_none())
        {
            return err("coflow.scheduler: \"varys\" schedules coflows, but no [[traffic]] entry makes any; add one with kind = \"coflow\", or remove [coflow]");
        }
        if spec.coflow.scheduler != crate::sim::Scheduler::None {
            let transports = spec.traffic_transports();
            let over_tcp = |f: &FlowSpec| {
                f.coflow.is_some()
                    && transports.get(f.generator as usize) == Some(&TransportKind::Tcp)
            };
            if let Some(f) = flows.iter().find(|f| over_tcp(f)) {
                return err(format!(
                    "coflow.scheduler: Varys paces RoCE senders only, but traffic[{}] sends its \
                     coflows over TCP; give that entry transport = \"roce\", or remove [coflow]",
                    f.generator
                ));
            }
        }
        let last_start = flows.iter().map(|f| f.start).max().unwrap_or(Time::ZERO);
        let stop = StopRule {
            at: spec
                .run
                .stop_at
                .unwrap_or(last_start + Time::from_ms(1_000)),
            when_flows_done: spec.run.stop_when_done,
        };
        let fabric = FabricConfig {
            switch: spec.switch.clone(),
            nic: spec.nic.clone(),
            cc: spec.cc.clone(),
            lb: spec.lb.clone(),
            coflow: spec.coflow.clone(),
            transport: spec.transport.clone(),
            traffic_transports: spec.traffic_transports(),
        };
        let faults = crate::faults::resolve(&spec.faults, &spec.topology, &topology, spec.seed)?;
        let facts = RunFacts {
            flows: flows.len() as u32,
            flow_priorities: flows.iter().fold(0u8, |m, f| m | 1 << f.priority.min(7)),
            stop_at: stop.at,
            limit: spec
                .run
                .monitor_limit
                .unwrap_or(crate::monitor::DEFAULT_LIMIT),
            scheme: spec.lb.name(),
            scheme_at_hosts: spec.lb.scheme().capabilities().hosts,
        };
        let monitors = crate::monitor::resolve(&spec.monitors, &spec.topology, &topology, &facts)?;
        Ok(Scenario {
            spec,
            topology,
            flows,
            fabric,
            stop,
            faults,
            monitors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        [topology]
        kind = "leaf_spine"
        leaves = 2
        spines = 2
        hosts_per_leaf = 4
        host_link = { rate = "100Gbps", delay = "1us" }
        fabric_link = { rate = "100Gbps", delay = "1us" }

        [[traffic]]
        kind = "poisson"
        cdf = "web_search"
        load = 0.3
        duration = "1ms"
    "#;

    fn error_of(text: &str) -> String {
        Spec::from_toml(text, "s.toml").unwrap_err().message
    }

    #[test]
    fn minimal_spec_resolves_with_every_default() {
        let spec = Spec::from_toml(MINIMAL, "s.toml").unwrap();
        let resolved = spec.resolved_toml();
        for key in [
            "buffer = \"9MB\"",
            "alpha = 0.0625",
            "scheme = \"ecmp\"",
            "kind = \"dcqcn\"",
        ] {
            assert!(resolved.contains(key), "{key} missing in:\n{resolved}");
        }
        // The resolved spec reads back to the same spec.
        assert_eq!(Spec::from_toml(&resolved, "r.toml").unwrap(), spec);
    }

    #[test]
    fn unknown_keys_name_the_path_and_the_valid_keys() {
        let e = error_of(&format!("{MINIMAL}\n[switch]\nbufer = \"9MB\"\n"));
        assert_eq!(
            e,
            "s.toml (line 17): switch.bufer: unknown field `bufer`, expected one of `buffer`, `control_strict_priority`, `pfc`, `ecn`, `loopback`, `egress_limit`"
        );
    }

    #[test]
    fn units_are_checked_with_the_key_path() {
        let e = error_of(&format!("{MINIMAL}\n[switch]\nbuffer = \"9\"\n"));
        assert!(e.contains("switch.buffer: '9' has no size unit"), "{e}");
        let e = error_of(&format!("{MINIMAL}\n[nic]\nrto = 4\n"));
        assert!(e.contains("nic.rto: 4 has no unit"), "{e}");
    }

    #[test]
    fn impossible_values_are_rejected() {
        let e = error_of(&format!(
            "{MINIMAL}\n[switch]\nbuffer = \"9007199254740993B\"\n"
        ));
        assert_eq!(
            e,
            "s.toml: switch.buffer: 9007199254740993B is above the largest buffer pfcsim models, 2^53 bytes (about 9 PB); give a switch's buffer (e.g. \"9MB\")"
        );
        let largest = format!("{MINIMAL}\n[switch]\nbuffer = \"9007199254740992B\"\n");
        assert_eq!(
            Spec::from_toml(&largest, "s.toml").unwrap().switch.buffer.0,
            crate::mmu::MAX_BUFFER
        );
        let e = error_of(&format!("{MINIMAL}\n[switch.ecn]\nkmin = \"500KB\"\n"));
        assert_eq!(
            e,
            "s.toml: switch.ecn: kmin (500KB) is above kmax (400KB); kmin must be <= kmax"
        );
        let e = error_of(
            &MINIMAL
                .replace("scheme", "x")
                .replace("[[traffic]]", "[lb]\nscheme = \"magic\"\n[[traffic]]"),
        );
        // (The list of valid schemes in the message includes a test-only scheme here.)
        assert!(
            e.contains("lb.scheme: unknown variant `magic`, expected one of `ecmp`, `rps`"),
            "{e}"
        );
    }

    #[test]
    fn scheme_parameters_are_validated_with_key_and_range() {
        let with_lb = |lb: &str| {
            MINIMAL
                .replace("scheme", "x")
                .replace("[[traffic]]", &format!("[lb]\n{lb}\n[[traffic]]"))
        };
        let e = error_of(&with_lb("scheme = \"letflow\"\nflowlet_timeout = \"0us\""));
        assert_eq!(
            e,
            "s.toml: lb.flowlet_timeout: must be above 0; give a time such as \"100us\" (valid: > 0s)"
        );
        let e = error_of(&with_lb("scheme = \"drill\"\nd = 0"));
        assert_eq!(
            e,
            "s.toml: lb.d: 0 is out of range; use 1..=16 random samples per packet (DRILL default 2)"
        );
        let e = error_of(&with_lb("scheme = \"drb\"\norder = \"zigzag\""));
        assert!(e.contains("unknown variant `zigzag`"), "{e}");
        let e = error_of(&with_lb("scheme = \"conga\"\nalpha = 0.0"));
        assert_eq!(
            e,
            "s.toml: lb.alpha: 0 is out of range; use 0 < alpha <= 1 (CONGA default 0.2)"
        );
        let e = error_of(&with_lb("scheme = \"hula\"\nprobe_period = \"100ns\""));
        assert_eq!(
            e,
            "s.toml: lb.probe_period: 100ns is out of range; use 1us..=10ms (HULA default 10us)"
        );
        for lb in ["drb", "letflow", "drill", "conga", "hula"] {
            let spec = Spec::from_toml(&with_lb(&format!("scheme = \"{lb}\"")), "s.toml").unwrap();
            assert_eq!(spec.lb.name(), lb);
            // Defaults are written out and read back.
            let resolved = spec.resolved_toml();
            assert_eq!(Spec::from_toml(&resolved, "r.toml").unwrap(), spec);
        }
        // A preset: located at its key, named with the valid ones; expanded in the resolved
        // spec, which reads back to the same spec.
        let e = error_of(&with_lb("scheme = \"conga\"\npreset = \"ns3\""));
        assert!(
            e.starts_with("s.toml (line ")
                && e.ends_with(
                    "): lb.preset: \"ns3\" is not a preset of \"conga\"; use one of \"conweave-ns3\""
                ),
            "{e}"
        );
        let spec = Spec::from_toml(
            &with_lb("scheme = \"conga\"\npreset = \"conweave-ns3\""),
            "s.toml",
        )
        .unwrap();
        let resolved = spec.resolved_toml();
        assert!(resolved.contains("timing = \"arrival\"") && !resolved.contains("preset"));
        assert_eq!(Spec::from_toml(&resolved, "r.toml").unwrap(), spec);
    }

    #[test]
    fn errors_inside_tagged_tables_name_the_full_key_path() {
        // A bad unit in a traffic entry: the key, its line, the value and what is valid.
        let e = error_of(&MINIMAL.replace("duration = \"1ms\"", "duration = 1"));
        assert_eq!(
            e,
            "s.toml (line 14): traffic[0].duration: 1 has no unit; write it as a string with a unit, a time such as \"2us\""
        );
        // Nested inside the topology table (an inline table).
        let e = error_of(&MINIMAL.replace(
            "rate = \"100Gbps\", delay = \"1us\" }\n        fabric",
            "rate = \"100GB\", delay = \"1us\" }\n        fabric",
        ));
        assert!(
            e.starts_with(
                "s.toml (line 7): topology.host_link.rate: '100GB' has unknown rate unit 'GB'"
            ),
            "{e}"
        );
        // A scheme's parameter, in the second traffic entry, and in [cc].
        let e = error_of(&format!(
            "{MINIMAL}\n[lb]\nscheme = \"ecmp\"\nsalt = \"x\"\n"
        ));
        assert!(
            e.starts_with("s.toml (line 18): lb.salt: invalid type: string \"x\", expected u64"),
            "{e}"
        );
        let e = error_of(&format!(
            "{MINIMAL}\n[[traffic]]\nkind = \"incast\"\nreceiver = 0\nsenders = 2\ntotal_size = \"1MB\"\nperiod = \"3\"\n"
        ));
        assert!(
            e.starts_with("s.toml (line 21): traffic[1].period: '3' has no time unit"),
            "{e}"
        );
        let e = error_of(&format!(
            "{MINIMAL}\n[cc]\nkind = \"dcqcn\"\nmin_rate = 5\n"
        ));
        assert!(
            e.starts_with("s.toml (line 18): cc.min_rate: 5 has no unit"),
            "{e}"
        );
        // Unknown keys inside a variant, including one of a variant without parameters.
        let e = error_of(&format!("{MINIMAL}\n[cc]\nkind = \"none\"\ng = 0.5\n"));
        assert_eq!(
            e,
            "s.toml (line 18): cc.g: unknown field `g`, there are no fields"
        );
        let e = error_of(&MINIMAL.replace("load = 0.3", "lod = 0.3"));
        assert!(e.starts_with("s.toml (line 13): traffic[0].lod: unknown field `lod`, expected one of `cdf`, `load`"), "{e}");
        let e = error_of(&MINIMAL.replace("leaves = 2", "leafs = 2"));
        assert!(
            e.starts_with(
                "s.toml (line 4): topology.leafs: unknown field `leafs`, expected one of `leaves`"
            ),
            "{e}"
        );
        // Deeper: an element of a list inside a variant.
        let e = error_of(&format!(
            "{MINIMAL}\n[[traffic]]\nkind = \"background\"\npairs = [[0, 1], [2, \"x\"]]\nsize = \"1MB\"\n"
        ));
        assert!(e.starts_with("s.toml (line 18): traffic[1].pairs[1][1]: invalid type: string \"x\", expected u32"), "{e}");
        // A number or a list where a name is expected, inside a tagged table and in a plain one.
        for (bad, line, key) in [
            (
                "duration = \"1ms\"\ntransport = [\"tcp\"]",
                15,
                "traffic[0].transport",
            ),
            ("duration = \"1ms\"\nload_of = 3", 15, "traffic[0].load_of"),
        ] {
            let e = error_of(&MINIMAL.replace("duration = \"1ms\"", bad));
            assert_eq!(
                e,
                format!(
                    "s.toml (line {line}): {key}: expected a name in quotes (a string); \
                     docs/reference/spec.md lists the names this key takes"
                )
            );
        }
        // Unknown and missing tags, and missing fields of a variant.
        let e = error_of(&MINIMAL.replace("\"poisson\"", "\"poison\""));
        assert!(e.starts_with("s.toml (line 11): traffic[0].kind: unknown variant `poison`, expected one of `poisson`, `incast`"), "{e}");
        let e = error_of(&MINIMAL.replace("kind = \"poisson\"", ""));
        assert_eq!(e, "s.toml (line 10): traffic[0]: missing field `kind`");
        let e = error_of(&MINIMAL.replace("duration = \"1ms\"", ""));
        assert_eq!(e, "s.toml (line 10): traffic[0]: missing field `duration`");
    }

    /// The keys of TIMELY and HPCC are checked, with errors that name the key and the fix.
    #[test]
    fn timely_and_hpcc_keys_are_checked() {
        let cc = |table: &str| error_of(&format!("{MINIMAL}\n[cc]\n{table}\n"));
        assert_eq!(
            cc("kind = \"timely\"\nt_low = \"600us\""),
            "s.toml: cc.t_low: 600us is not below cc.t_high (500us); give t_low < t_high (e.g. \"50us\" and \"500us\")"
        );
        assert_eq!(
            cc("kind = \"timely\"\nbeta = 1.5"),
            "s.toml: cc.beta: 1.5 is out of range; use 0 < beta <= 1 (the decrease factor, e.g. 0.8)"
        );
        assert_eq!(
            cc("kind = \"timely\"\nmin_rtt = \"0us\""),
            "s.toml: cc.min_rtt: must be above 0; give a time such as \"20us\" (valid: > 0s)"
        );
        let e = cc("kind = \"timely\"\ng = 0.5");
        assert!(
            e.starts_with("s.toml (line 18): cc.g: unknown field `g`, expected one of `alpha`"),
            "{e}"
        );
        assert_eq!(
            cc("kind = \"hpcc\"\neta = 0"),
            "s.toml: cc.eta: 0 is out of range; use 0 < eta <= 1 (the target utilisation, e.g. 0.95)"
        );
        assert_eq!(
            cc("kind = \"hpcc\"\nwindow = false"),
            "s.toml: cc.variable_window: true needs cc.window = true (a window to vary); set window = true or variable_window = false"
        );
        let e = cc("kind = \"hpcc\"\ng = 0.5");
        assert!(
            e.starts_with("s.toml (line 18): cc.g: unknown field `g`, expected one of `eta`"),
            "{e}"
        );
        assert_eq!(
            error_of(&format!("{MINIMAL}\n[cc]\nkind = \"hpcc\"\n[lb]\nscheme = \"presto\"\n")),
            "s.toml: cc.kind: \"hpcc\" echoes each data packet's telemetry on its ACK, and scheme \"presto\" resequences packets at the receiver, where the telemetry is not kept; set lb.resequence = false, or use another cc.kind (\"dcqcn\", \"timely\")"
        );
        // Valid tables are taken, and written back with every default.
        for kind in ["timely", "hpcc"] {
            let text = format!("{MINIMAL}\n[cc]\nkind = \"{kind}\"\n");
            let spec = Spec::from_toml(&text, "s.toml").unwrap();
            let resolved = spec.resolved_toml();
            assert!(
                resolved.contains(&format!("[cc]\nkind = \"{kind}\"\n")),
                "{resolved}"
            );
            assert_eq!(Spec::from_toml(&resolved, "r.toml").unwrap(), spec);
        }
    }

    #[test]
    fn tagged_tables_are_written_tag_first_and_read_back() {
        let text = format!("{MINIMAL}\n[cc]\nkind = \"none\"\n[lb]\nscheme = \"rps\"\n");
        let spec = Spec::from_toml(&text, "s.toml").unwrap();
        let resolved = spec.resolved_toml();
        for table in [
            "[topology]\nkind = \"leaf_spine\"\nleaves = 2",
            "[cc]\nkind = \"none\"\n",
            "[lb]\nscheme = \"rps\"\n",
            "[[traffic]]\nkind = \"poisson\"\ncdf = \"web_search\"",
        ] {
            assert!(resolved.contains(table), "{table} missing in:\n{resolved}");
        }
        assert_eq!(Spec::from_toml(&resolved, "r.toml").unwrap(), spec);
        let lb = toml::to_string(&LbConfig::default()).unwrap();
        assert!(lb.starts_with("scheme = \"ecmp\"\n"), "{lb}");
    }

    #[test]
    fn prepare_builds_topology_and_flows() {
        let spec = Spec::from_toml(MINIMAL, "s.toml").unwrap();
        let sc = Scenario::prepare(spec, Path::new(".")).unwrap();
        assert_eq!(sc.topology.hosts.len(), 8);
        assert!(!sc.flows.is_empty());
        let bad = Spec::from_toml(&MINIMAL.replace("web_search", "nope"), "s.toml").unwrap();
        let e = Scenario::prepare(bad, Path::new("."))
            .err()
            .unwrap()
            .message;
        assert!(
            e.starts_with("traffic[0].cdf: 'nope' is not a shipped workload (alistorage, "),
            "{e}"
        );
    }
}
