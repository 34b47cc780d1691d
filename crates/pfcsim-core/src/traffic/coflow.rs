//! The `coflow` traffic generator: groups of flows that finish together or not at all, as a
//! shuffle or a partition-aggregate stage makes them (a coflow completes when its last flow
//! does; its completion time, CCT, is the metric of `coflows.parquet`).
//!
//! Every flow records its coflow in [`FlowSpec::coflow`]: a number local to the generator
//! here, made unique over the run by [`crate::spec::Scenario::prepare`] (generator after
//! generator, in spec order).
//!
//! How many coflows and when:
//! * `arrival = "together"`: `coflows` coflows, all of their flows starting at `start`
//!   (the small-scale experiment of the CLB paper, "n coflows at the same time").
//! * `arrival = "poisson_coflow"`: coflows arrive as a Poisson process of rate `lambda`; a
//!   coflow's flows start together, at its arrival.
//! * `arrival = "poisson_flow"`: flows arrive as one Poisson process of rate `lambda`, coflow
//!   after coflow (coflow `k`'s flows are consecutive arrivals); a coflow arrives with its
//!   first flow (the CLB paper's Map-Reduce and Cloud Storage workloads: "the flow arrival
//!   time following a Poisson distribution").
//!
//! With a Poisson arrival, `coflows` stops after that many coflows, or `duration` after the
//! coflows that arrive in `[start, start + duration)` (a coflow is made whole: with
//! `poisson_flow` its last flows may start after the window).
//!
//! Each coflow draws its number of flows (`flows_per_coflow`: a count, or `[lo, hi]` drawn
//! uniformly per coflow), then each flow draws a source uniformly among the hosts and a
//! destination uniformly among the other hosts (under another ToR with `cross_tor_only`);
//! two flows of a coflow may share endpoints. Sizes (`size`): a fixed size (`"16KB"`),
//! `{ kind = "uniform", min, max }` (whole bytes, both ends included), `{ kind = "pareto",
//! min, max, shape }` (bounded Pareto, drawn by inverting its CDF), or `{ kind = "total",
//! bytes }` split evenly over the coflow's flows (the first `bytes mod n` flows carry one
//! byte more, so the coflow carries exactly `bytes`).

use super::{FlowSpec, TrafficContext, TrafficError};
use crate::topology::Topology;
use crate::units::{Bytes, Time};
use rand::Rng;
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One `[[traffic]]` table with `kind = "coflow"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoflowSpec {
    /// Number of coflows (required with `arrival = "together"`; with a Poisson arrival,
    /// give it or `duration`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coflows: Option<u32>,
    /// Arrival rate of the Poisson process, as arrivals per time (`"2.5/us"`): coflows per
    /// time with `poisson_coflow`, flows per time with `poisson_flow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<PerTime>,
    /// With a Poisson arrival: coflows arrive in `[start, start + duration)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Time>,
    /// Start of the arrivals (with `together`: when every flow starts).
    #[serde(default)]
    pub start: Time,
    /// Flows per coflow: a count (`15`) or a range `[lo, hi]` drawn uniformly per coflow.
    pub flows_per_coflow: FlowsPerCoflow,
    /// Flow sizes: fixed, uniform, bounded Pareto, or a coflow total split evenly.
    pub size: CoflowSize,
    pub arrival: Arrival,
    /// Destinations only under another ToR than the source.
    #[serde(default)]
    pub cross_tor_only: bool,
    #[serde(default = "super::default_priority")]
    pub priority: u8,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<super::TransportKind>,
}

/// When a coflow's flows start (see the module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    Together,
    PoissonCoflow,
    PoissonFlow,
}

/// `flows_per_coflow`: a count or an inclusive range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    untagged,
    expecting = "a count (e.g. 15) or a range [lo, hi] (e.g. [5, 30])"
)]
pub enum FlowsPerCoflow {
    Count(u32),
    Range([u32; 2]),
}

impl FlowsPerCoflow {
    fn bounds(self) -> (u32, u32) {
        match self {
            FlowsPerCoflow::Count(n) => (n, n),
            FlowsPerCoflow::Range([lo, hi]) => (lo, hi),
        }
    }
}

/// A coflow's flow sizes: a fixed size (written as a size, `"16KB"`) or a distribution
/// (written as a table with `kind`).
#[derive(Clone, Debug, PartialEq)]
pub enum CoflowSize {
    Fixed(Bytes),
    Dist(SizeDist),
}

/// The distributions of [`CoflowSize`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SizeDist {
    /// Whole bytes drawn uniformly in `[min, max]`.
    Uniform { min: Bytes, max: Bytes },
    /// Bounded Pareto on `[min, max]` with shape `shape` (the CLB paper's Cloud Storage
    /// workload gives no shape; its issue proposes 1.1).
    Pareto { min: Bytes, max: Bytes, shape: f64 },
    /// `bytes` per coflow, split evenly over its flows (the CLB paper's Web Search workload:
    /// flows of 2MB/n).
    Total { bytes: Bytes },
}

impl Serialize for CoflowSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CoflowSize::Fixed(b) => b.serialize(s),
            CoflowSize::Dist(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CoflowSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> de::Visitor<'de> for V {
            type Value = CoflowSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"16KB\", or a table with kind = \"uniform\", \"pareto\" or \"total\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CoflowSize, E> {
                Bytes::deserialize(de::value::StrDeserializer::<E>::new(v)).map(CoflowSize::Fixed)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<CoflowSize, E> {
                Err(E::custom(format!(
                    "{v} has no unit; write it as a string with a unit, a size such as \"16KB\""
                )))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<CoflowSize, E> {
                self.visit_i64(v as i64)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<CoflowSize, A::Error> {
                SizeDist::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(CoflowSize::Dist)
            }
        }
        d.deserialize_any(V)
    }
}

/// A rate of arrivals, written `"<number>/<time unit>"` (`"2.5/us"`, `"1e6/s"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerTime {
    /// Arrivals per `unit`.
    pub count: f64,
    pub unit: Time,
    /// The unit as written (`us`), to write the value back as it was given.
    unit_name: &'static str,
}

impl PerTime {
    /// Arrivals per picosecond.
    pub fn per_ps(&self) -> f64 {
        self.count / self.unit.ps() as f64
    }
}

impl std::str::FromStr for PerTime {
    type Err = String;
    fn from_str(s: &str) -> Result<PerTime, String> {
        let hint = "write arrivals per time, such as \"2.5/us\" (units ps, ns, us, ms, s)";
        let Some((num, unit)) = s.split_once('/') else {
            return Err(format!("'{s}' has no time unit; {hint}"));
        };
        let count: f64 = num
            .trim()
            .parse()
            .map_err(|_| format!("'{s}': '{num}' is not a number; {hint}"))?;
        let (unit_name, unit) = match unit.trim() {
            "ps" => ("ps", Time(1)),
            "ns" => ("ns", Time::from_ns(1)),
            "us" | "µs" => ("us", Time::from_us(1)),
            "ms" => ("ms", Time::from_ms(1)),
            "s" => ("s", Time::from_ms(1_000)),
            other => return Err(format!("'{s}' has unknown time unit '{other}'; {hint}")),
        };
        Ok(PerTime {
            count,
            unit,
            unit_name,
        })
    }
}

impl fmt::Display for PerTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, self.unit_name)
    }
}

impl Serialize for PerTime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for PerTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = PerTime;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("arrivals per time such as \"2.5/us\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PerTime, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<PerTime, E> {
                Err(E::custom(format!(
                    "{v} has no time unit; write arrivals per time, such as \"{v}/us\""
                )))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PerTime, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PerTime, E> {
                self.visit_f64(v as f64)
            }
        }
        d.deserialize_any(V)
    }
}

impl CoflowSpec {
    /// Checks the keys against each other and the topology; `key` is `traffic[i]`.
    fn check(&self, key: &str, topo: &Topology) -> Result<(), TrafficError> {
        let e = |m: String| TrafficError(m);
        super::check_priority(&format!("{key}.priority"), self.priority)?;
        let (lo, hi) = self.flows_per_coflow.bounds();
        if lo == 0 || lo > hi {
            return Err(e(format!(
                "{key}.flows_per_coflow: {:?} is not a valid count; give a count of at least 1 (e.g. 15) or a range [lo, hi] with 1 <= lo <= hi (e.g. [5, 30])",
                self.flows_per_coflow.bounds()
            )));
        }
        if self.coflows == Some(0) {
            return Err(e(format!("{key}.coflows: 0 coflows; give at least 1")));
        }
        match self.arrival {
            Arrival::Together => {
                if self.coflows.is_none() {
                    return Err(e(format!(
                        "{key}.coflows: missing; arrival = \"together\" needs the number of coflows (e.g. coflows = 8)"
                    )));
                }
                for (name, given) in [
                    ("lambda", self.lambda.is_some()),
                    ("duration", self.duration.is_some()),
                ] {
                    if given {
                        return Err(e(format!(
                            "{key}.{name}: arrival = \"together\" starts every coflow at `start`; remove {name}, or use arrival = \"poisson_coflow\" or \"poisson_flow\""
                        )));
                    }
                }
            }
            Arrival::PoissonCoflow | Arrival::PoissonFlow => {
                let Some(lambda) = self.lambda else {
                    return Err(e(format!(
                        "{key}.lambda: missing; a Poisson arrival needs its rate (e.g. lambda = \"2.5/us\")"
                    )));
                };
                if !(lambda.count.is_finite() && lambda.count > 0.0) {
                    return Err(e(format!(
                        "{key}.lambda: {lambda} is not a valid rate; give a positive number of arrivals per time (e.g. \"2.5/us\")"
                    )));
                }
                match (self.coflows, self.duration) {
                    (None, None) => {
                        return Err(e(format!(
                            "{key}.coflows: missing; a Poisson arrival stops after `coflows` coflows or after `duration`: give one of them"
                        )))
                    }
                    (Some(_), Some(_)) => {
                        return Err(e(format!(
                            "{key}.duration: both coflows and duration are given; keep one (coflows: a count; duration: a window of arrivals)"
                        )))
                    }
                    (None, Some(d)) if d == Time::ZERO => {
                        return Err(e(format!(
                            "{key}.duration: must be above 0 (e.g. \"1ms\")"
                        )))
                    }
                    _ => {}
                }
            }
        }
        match &self.size {
            CoflowSize::Fixed(b) if b.0 == 0 => {
                return Err(e(format!(
                    "{key}.size: a flow needs at least one byte (e.g. \"16KB\")"
                )))
            }
            CoflowSize::Fixed(_) => {}
            CoflowSize::Dist(SizeDist::Uniform { min, max }) => {
                if min.0 == 0 || min > max {
                    return Err(e(format!(
                        "{key}.size: uniform from {min} to {max} is not valid; give 0 < min <= max (e.g. min = \"10KB\", max = \"100KB\")"
                    )));
                }
            }
            CoflowSize::Dist(SizeDist::Pareto { min, max, shape }) => {
                if min.0 == 0 || min > max {
                    return Err(e(format!(
                        "{key}.size: pareto from {min} to {max} is not valid; give 0 < min <= max (e.g. min = \"10KB\", max = \"2MB\")"
                    )));
                }
                if !(shape.is_finite() && *shape > 0.0) {
                    return Err(e(format!(
                        "{key}.size.shape: {shape} is out of range; use shape > 0 (e.g. 1.1)"
                    )));
                }
            }
            CoflowSize::Dist(SizeDist::Total { bytes }) => {
                if bytes.0 < hi as u64 {
                    return Err(e(format!(
                        "{key}.size: a total of {bytes} cannot give each of up to {hi} flows a byte; give bytes >= {hi}B"
                    )));
                }
            }
        }
        if self.cross_tor_only {
            super::check_cross_tor(topo, key)?;
        }
        if topo.hosts.len() < 2 {
            return Err(e(format!(
                "{key}: a coflow needs at least two hosts; the topology has {}",
                topo.hosts.len()
            )));
        }
        Ok(())
    }

    /// The flows of generator number `index`, each with its coflow (0, 1, ... in arrival
    /// order, local to this generator).
    pub fn generate(
        &self,
        index: usize,
        ctx: &TrafficContext,
        rng: &mut crate::engine::Rng,
    ) -> Result<Vec<FlowSpec>, TrafficError> {
        let key = format!("traffic[{index}]");
        let topo = ctx.topo;
        self.check(&key, topo)?;
        let (lo, hi) = self.flows_per_coflow.bounds();
        let mean_gap_ps = self.lambda.map(|l| 1.0 / l.per_ps());
        let end = self.duration.map(|d| self.start + d);
        let mut t = self.start.ps() as f64;
        let exp_gap = |rng: &mut crate::engine::Rng| {
            let u: f64 = rng.gen();
            -mean_gap_ps.expect("a Poisson arrival has lambda") * (1.0 - u).ln()
        };
        let (count_key, fix) = self.check_budget(&key, ctx)?;
        let mut flows = Vec::new();
        for c in 0u32.. {
            if self.coflows.is_some_and(|n| c >= n) {
                break;
            }
            // The coflow's arrival.
            match self.arrival {
                Arrival::Together => {}
                Arrival::PoissonCoflow | Arrival::PoissonFlow => t += exp_gap(rng),
            }
            if end.is_some_and(|end| t >= end.ps() as f64) {
                break;
            }
            let n = rng.gen_range(lo..=hi);
            for k in 0..n {
                ctx.budget.check_made(&count_key, flows.len(), fix)?;
                if k > 0 && self.arrival == Arrival::PoissonFlow {
                    t += exp_gap(rng);
                }
                let (src, dst) = super::random_pair(topo, self.cross_tor_only, rng);
                let size = match &self.size {
                    CoflowSize::Fixed(b) => b.0,
                    CoflowSize::Dist(SizeDist::Uniform { min, max }) => {
                        rng.gen_range(min.0..=max.0)
                    }
                    CoflowSize::Dist(SizeDist::Pareto { min, max, shape }) => {
                        bounded_pareto(rng.gen(), min.0 as f64, max.0 as f64, *shape)
                    }
                    CoflowSize::Dist(SizeDist::Total { bytes }) => {
                        bytes.0 / n as u64 + u64::from((k as u64) < bytes.0 % n as u64)
                    }
                };
                flows.push(FlowSpec {
                    src,
                    dst,
                    size,
                    start: Time(t as u64),
                    priority: self.priority,
                    dport: 100,
                    source: "coflow",
                    generator: index as u16,
                    path_tag: 0,
                    coflow: Some(c),
                });
            }
        }
        Ok(flows)
    }
}

impl CoflowSpec {
    /// Estimates the flows of the entry at `key` (checked by `check`) and checks them against
    /// the budget; the key the count depends on and what to change, for a refusal while the
    /// flows are made.
    fn check_budget(
        &self,
        key: &str,
        ctx: &TrafficContext,
    ) -> Result<(String, &'static str), TrafficError> {
        let (lo, hi) = self.flows_per_coflow.bounds();
        let per_coflow = (f64::from(lo) + f64::from(hi)) / 2.0;
        let (field, fix) = match self.coflows {
            Some(_) => ("coflows", "lower coflows or flows_per_coflow"),
            None => ("duration", "shorten the duration or lower lambda"),
        };
        let (flows, how) = match (self.coflows, self.duration, self.lambda) {
            (Some(n), _, _) => (
                f64::from(n) * per_coflow,
                format!("{n} coflows of {per_coflow} flows on average"),
            ),
            (None, Some(d), Some(l)) => {
                let arrivals = l.per_ps() * d.ps() as f64;
                let flows = match self.arrival {
                    Arrival::PoissonFlow => arrivals,
                    Arrival::Together | Arrival::PoissonCoflow => arrivals * per_coflow,
                };
                (flows, format!("Poisson arrivals at {l} for {d}"))
            }
            _ => unreachable!("checked: a count, or a Poisson arrival with a duration"),
        };
        let count_key = format!("{key}.{field}");
        ctx.budget.check(&count_key, flows, &how, fix)?;
        Ok((count_key, fix))
    }
}

/// The bounded Pareto size (shape `a` on `[lo, hi]`) at quantile `u` in `[0, 1)`, rounded to
/// whole bytes and kept in `[lo, hi]`.
fn bounded_pareto(u: f64, lo: f64, hi: f64, a: f64) -> u64 {
    let x = lo / (1.0 - u * (1.0 - (lo / hi).powf(a))).powf(1.0 / a);
    x.round().clamp(lo, hi) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdf::FlowSizeCdf;
    use crate::spec::Spec;
    use crate::topology::LeafSpine;
    use crate::traffic::TrafficSpec;
    use crate::units::Rate;

    fn topo() -> Topology {
        Topology::leaf_spine(&LeafSpine::uniform(
            4,
            2,
            4,
            Rate::gbps(40),
            Time::from_us(5),
        ))
    }

    fn ctx(t: &Topology) -> TrafficContext<'_> {
        TrafficContext {
            topo: t,
            seed: 7,
            load_cdf: &|name| FlowSizeCdf::builtin(name).ok_or_else(|| format!("no {name}")),
            read_file: &|p| Err(format!("no file {p}")),
            budget: &crate::traffic::tests::UNLIMITED,
        }
    }

    /// The traffic table `table` (TOML keys after `kind = "coflow"`), read as a spec reads it.
    fn spec(table: &str) -> TrafficSpec {
        let text = format!(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4\nhost_link = {{ rate = \"40Gbps\", delay = \"5us\" }}\nfabric_link = {{ rate = \"40Gbps\", delay = \"5us\" }}\n[[traffic]]\nkind = \"coflow\"\n{table}\n"
        );
        let spec = Spec::from_toml(&text, "s.toml").unwrap();
        // The resolved spec reads back to the same spec.
        assert_eq!(
            Spec::from_toml(&spec.resolved_toml(), "r.toml").unwrap(),
            spec
        );
        spec.traffic[0].clone()
    }

    fn error(table: &str) -> String {
        let t = topo();
        let text = format!(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 4\nspines = 2\nhosts_per_leaf = 4\nhost_link = {{ rate = \"40Gbps\", delay = \"5us\" }}\nfabric_link = {{ rate = \"40Gbps\", delay = \"5us\" }}\n[[traffic]]\nkind = \"coflow\"\n{table}\n"
        );
        match Spec::from_toml(&text, "s.toml") {
            Err(e) => e.message,
            Ok(s) => s.traffic[0].generate(0, &ctx(&t)).unwrap_err().0,
        }
    }

    fn by_coflow(flows: &[FlowSpec]) -> std::collections::BTreeMap<u32, Vec<&FlowSpec>> {
        let mut m = std::collections::BTreeMap::<u32, Vec<&FlowSpec>>::new();
        for f in flows {
            m.entry(f.coflow.unwrap()).or_default().push(f);
        }
        m
    }

    #[test]
    fn together_makes_the_asked_coflows_at_start() {
        let t = topo();
        let s = spec("coflows = 6\nflows_per_coflow = 4\nsize = \"16KB\"\narrival = \"together\"\nstart = \"10us\"");
        let flows = s.generate(0, &ctx(&t)).unwrap();
        assert_eq!(flows.len(), 24);
        let m = by_coflow(&flows);
        assert_eq!(
            m.keys().copied().collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4, 5]
        );
        assert!(m.values().all(|v| v.len() == 4));
        assert!(flows.iter().all(|f| f.size == 16_000
            && f.start == Time::from_us(10)
            && f.src != f.dst
            && f.source == "coflow"));
    }

    #[test]
    fn flows_per_coflow_ranges_cover_their_bounds_and_total_is_split_exactly() {
        let t = topo();
        let s = spec("coflows = 400\nflows_per_coflow = [5, 30]\nsize = { kind = \"total\", bytes = \"2MB\" }\narrival = \"together\"");
        let flows = s.generate(0, &ctx(&t)).unwrap();
        let m = by_coflow(&flows);
        assert_eq!(m.len(), 400);
        let counts: Vec<usize> = m.values().map(|v| v.len()).collect();
        assert_eq!(*counts.iter().min().unwrap(), 5);
        assert_eq!(*counts.iter().max().unwrap(), 30);
        for v in m.values() {
            assert_eq!(v.iter().map(|f| f.size).sum::<u64>(), 2_000_000);
            let (a, b) = (
                v.iter().map(|f| f.size).min().unwrap(),
                v.iter().map(|f| f.size).max().unwrap(),
            );
            assert!(b - a <= 1, "split evenly: {a}..{b}");
        }
    }

    #[test]
    fn uniform_and_pareto_sizes_stay_in_bounds_with_their_means() {
        let t = topo();
        let s = spec("coflows = 2000\nflows_per_coflow = 5\nsize = { kind = \"uniform\", min = \"10KB\", max = \"100KB\" }\narrival = \"together\"");
        let flows = s.generate(0, &ctx(&t)).unwrap();
        assert!(flows.iter().all(|f| (10_000..=100_000).contains(&f.size)));
        let mean = flows.iter().map(|f| f.size as f64).sum::<f64>() / flows.len() as f64;
        assert!((mean - 55_000.0).abs() < 1_000.0, "{mean}");

        let s = spec("coflows = 4000\nflows_per_coflow = 5\nsize = { kind = \"pareto\", min = \"10KB\", max = \"2MB\", shape = 1.1 }\narrival = \"together\"");
        let flows = s.generate(0, &ctx(&t)).unwrap();
        assert!(flows.iter().all(|f| (10_000..=2_000_000).contains(&f.size)));
        // Mean of the bounded Pareto: a L^a (H^(1-a) - L^(1-a)) / ((1-a) (1 - (L/H)^a)).
        let (a, l, h) = (1.1f64, 1e4f64, 2e6f64);
        let expected = a * l.powf(a) * (h.powf(1.0 - a) - l.powf(1.0 - a))
            / ((1.0 - a) * (1.0 - (l / h).powf(a)));
        let mean = flows.iter().map(|f| f.size as f64).sum::<f64>() / flows.len() as f64;
        assert!(
            (mean - expected).abs() / expected < 0.08,
            "{mean} vs {expected}"
        );
        // The median: L (1 - 0.5 (1 - (L/H)^a))^(-1/a).
        let mut sizes: Vec<u64> = flows.iter().map(|f| f.size).collect();
        sizes.sort();
        let median = sizes[sizes.len() / 2] as f64;
        let expected = bounded_pareto(0.5, l, h, a) as f64;
        assert!(
            (median - expected).abs() / expected < 0.05,
            "{median} vs {expected}"
        );
    }

    #[test]
    fn poisson_coflow_arrivals_have_the_asked_rate_and_flows_start_together() {
        let t = topo();
        let s = spec("lambda = \"0.5/us\"\nduration = \"2ms\"\nflows_per_coflow = 3\nsize = \"1KB\"\narrival = \"poisson_coflow\"\nstart = \"1ms\"");
        let flows = s.generate(0, &ctx(&t)).unwrap();
        let m = by_coflow(&flows);
        // 0.5 per us over 2000 us: 1000 coflows, sd ~32.
        assert!((900..1100).contains(&m.len()), "{}", m.len());
        for v in m.values() {
            assert!(v.iter().all(|f| f.start == v[0].start));
            assert!(v[0].start >= Time::from_ms(1) && v[0].start < Time::from_ms(3));
        }
        let starts: Vec<Time> = m.values().map(|v| v[0].start).collect();
        assert!(starts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn poisson_flow_arrivals_space_every_flow() {
        let t = topo();
        let s = spec("lambda = \"2.5/us\"\ncoflows = 30\nflows_per_coflow = 10\nsize = \"16KB\"\narrival = \"poisson_flow\"");
        let flows = s.generate(0, &ctx(&t)).unwrap();
        assert_eq!(flows.len(), 300);
        assert!(flows.windows(2).all(|w| w[0].start <= w[1].start));
        // 300 gaps of mean 0.4 us: 120 us, sd ~7 us.
        let last = flows.last().unwrap().start;
        assert!(
            last > Time::from_us(95) && last < Time::from_us(145),
            "{last}"
        );
        // Coflows are consecutive arrivals.
        let ids: Vec<u32> = flows.iter().map(|f| f.coflow.unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[1] == w[0] || w[1] == w[0] + 1));
        let distinct_starts: std::collections::BTreeSet<Time> =
            flows.iter().map(|f| f.start).collect();
        assert!(distinct_starts.len() > 290);
    }

    #[test]
    fn cross_tor_only_and_determinism() {
        let t = topo();
        let s = spec("coflows = 50\nflows_per_coflow = [2, 8]\nsize = \"1KB\"\narrival = \"together\"\ncross_tor_only = true");
        let a = s.generate(0, &ctx(&t)).unwrap();
        assert!(a
            .iter()
            .all(|f| t.tor_of[f.src as usize] != t.tor_of[f.dst as usize]));
        assert_eq!(a, s.generate(0, &ctx(&t)).unwrap(), "same seed, same flows");
        let other_seed = TrafficContext { seed: 8, ..ctx(&t) };
        assert_ne!(a, s.generate(0, &other_seed).unwrap());
    }

    #[test]
    fn bad_values_name_their_key() {
        let base = "flows_per_coflow = 4\nsize = \"16KB\"";
        assert_eq!(
            error(&format!("{base}\narrival = \"together\"")),
            "traffic[0].coflows: missing; arrival = \"together\" needs the number of coflows (e.g. coflows = 8)"
        );
        assert_eq!(
            error(&format!("{base}\narrival = \"together\"\ncoflows = 2\nlambda = \"1/us\"")),
            "traffic[0].lambda: arrival = \"together\" starts every coflow at `start`; remove lambda, or use arrival = \"poisson_coflow\" or \"poisson_flow\""
        );
        assert_eq!(
            error(&format!("{base}\narrival = \"poisson_flow\"\ncoflows = 2")),
            "traffic[0].lambda: missing; a Poisson arrival needs its rate (e.g. lambda = \"2.5/us\")"
        );
        assert_eq!(
            error(&format!("{base}\narrival = \"poisson_flow\"\nlambda = \"1/us\"")),
            "traffic[0].coflows: missing; a Poisson arrival stops after `coflows` coflows or after `duration`: give one of them"
        );
        assert_eq!(
            error(&format!("{base}\narrival = \"poisson_flow\"\nlambda = \"0/us\"\ncoflows = 3")),
            "traffic[0].lambda: 0/us is not a valid rate; give a positive number of arrivals per time (e.g. \"2.5/us\")"
        );
        assert!(error(&format!(
            "{base}\narrival = \"poisson_flow\"\nlambda = 2.5\ncoflows = 3"
        ))
        .starts_with("s.toml (line 13): traffic[0].lambda: 2.5 has no time unit"));
        assert_eq!(
            error("flows_per_coflow = [30, 5]\nsize = \"16KB\"\narrival = \"together\"\ncoflows = 1"),
            "traffic[0].flows_per_coflow: (30, 5) is not a valid count; give a count of at least 1 (e.g. 15) or a range [lo, hi] with 1 <= lo <= hi (e.g. [5, 30])"
        );
        assert_eq!(
            error("flows_per_coflow = 4\nsize = { kind = \"pareto\", min = \"10KB\", max = \"2MB\", shape = 0.0 }\narrival = \"together\"\ncoflows = 1"),
            "traffic[0].size.shape: 0 is out of range; use shape > 0 (e.g. 1.1)"
        );
        assert_eq!(
            error("flows_per_coflow = [5, 30]\nsize = { kind = \"total\", bytes = \"20B\" }\narrival = \"together\"\ncoflows = 1"),
            "traffic[0].size: a total of 20B cannot give each of up to 30 flows a byte; give bytes >= 30B"
        );
        assert!(
            error("flows_per_coflow = 4\nsize = 16\narrival = \"together\"\ncoflows = 1")
                .contains("traffic[0].size: 16 has no unit")
        );
        assert!(error("flows_per_coflow = 4\nsize = \"16KB\"\narrival = \"sometimes\"\ncoflows = 1")
            .contains("traffic[0].arrival: unknown variant `sometimes`, expected one of `together`, `poisson_coflow`, `poisson_flow`"));
    }
}
