//! The `permutation` traffic generator: every host sends one flow of `size` bytes to another
//! host, all starting at `start`, the destinations a random permutation of the hosts without
//! fixed points (a derangement), so that every host also receives exactly one flow. The
//! pattern of the permutation benchmarks of datacenter simulators (htsim's 2 MB permutation,
//! for one): every host link is loaded in both directions, and only the fabric's core can
//! collide flows.
//!
//! The derangement is drawn uniformly among all derangements of the hosts, by rejection:
//! shuffle (Fisher-Yates, from the entry's RNG stream) until no host is mapped to itself;
//! the share of permutations that are derangements tends to 1/e, so this takes e shuffles on
//! average. Not modelled: destinations restricted to other ToRs (a uniform derangement sends
//! about `hosts_per_tor / hosts` of its flows under the source's own ToR).

use super::{FlowSpec, TrafficContext, TrafficError};
use crate::units::{Bytes, Time};
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

/// One `[[traffic]]` table with `kind = "permutation"`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermutationSpec {
    /// Bytes of every flow.
    pub size: Bytes,
    /// When every flow starts.
    #[serde(default)]
    pub start: Time,
    #[serde(default = "super::default_priority")]
    pub priority: u8,
    /// Transport of this entry's flows (unset: `[transport] kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<super::TransportKind>,
}

impl PermutationSpec {
    /// The flows of generator number `index`: one per host, in the order of the topology's
    /// hosts, each to the host the derangement drawn from `rng` maps it to.
    pub fn generate(
        &self,
        index: usize,
        ctx: &TrafficContext,
        rng: &mut crate::engine::Rng,
    ) -> Result<Vec<FlowSpec>, TrafficError> {
        let key = format!("traffic[{index}]");
        super::check_priority(&format!("{key}.priority"), self.priority)?;
        if self.size.0 == 0 {
            return Err(TrafficError(format!(
                "{key}.size: permutation flows need a size above 0 (e.g. \"2MB\")"
            )));
        }
        let hosts = &ctx.topo.hosts;
        if hosts.len() < 2 {
            return Err(TrafficError(format!(
                "{key}: a permutation needs at least 2 hosts (the topology has {}); use another \
                 traffic kind or a larger topology",
                hosts.len()
            )));
        }
        ctx.budget.check(
            &format!("{key}.size"),
            hosts.len() as f64,
            &format!("one per host of {}", hosts.len()),
            "use a smaller topology",
        )?;
        let dst = derangement(hosts.len(), rng);
        Ok(hosts
            .iter()
            .zip(&dst)
            .map(|(&src, &d)| FlowSpec {
                src,
                dst: hosts[d],
                size: self.size.0,
                start: self.start,
                priority: self.priority,
                dport: 100,
                source: "permutation",
                generator: index as u16,
                path_tag: 0,
                coflow: None,
            })
            .collect())
    }
}

/// A permutation `p` of `0..n` with `p[i] != i` for every `i`, uniform among all such
/// permutations (`n >= 2`, else there is none).
fn derangement(n: usize, rng: &mut crate::engine::Rng) -> Vec<usize> {
    debug_assert!(n >= 2, "no derangement of {n} elements");
    let mut p: Vec<usize> = (0..n).collect();
    loop {
        p.shuffle(rng);
        if p.iter().enumerate().all(|(i, &d)| i != d) {
            return p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::UNLIMITED;
    use super::super::{FlowBudget, TrafficSpec};
    use super::*;
    use crate::cdf::FlowSizeCdf;
    use crate::engine::{rng_stream, StreamKind};
    use crate::topology::{LeafSpine, Topology};
    use crate::units::Rate;

    fn ctx<'a>(t: &'a Topology, seed: u64, budget: &'a FlowBudget) -> TrafficContext<'a> {
        TrafficContext {
            topo: t,
            seed,
            load_cdf: &|name| FlowSizeCdf::builtin(name).ok_or_else(|| format!("no {name}")),
            read_file: &|p| Err(format!("no file {p}")),
            budget,
        }
    }

    fn spec(size: u64) -> TrafficSpec {
        TrafficSpec::Permutation(PermutationSpec {
            size: Bytes(size),
            start: Time::from_us(5),
            priority: 4,
            transport: None,
        })
    }

    fn leaf_spine(leaves: u32, hosts_per_leaf: u32) -> Topology {
        Topology::leaf_spine(&LeafSpine::uniform(
            leaves,
            2,
            hosts_per_leaf,
            Rate::gbps(100),
            Time::from_us(1),
        ))
    }

    #[test]
    fn derangements_have_no_fixed_point_and_cover_every_index() {
        for n in [2, 3, 5, 64] {
            for stream in 0..50 {
                let p = derangement(n, &mut rng_stream(7, StreamKind::Traffic, stream));
                assert!(p.iter().enumerate().all(|(i, &d)| i != d), "{p:?}");
                let mut sorted = p.clone();
                sorted.sort();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>());
            }
        }
        // Two elements have one derangement; three have two, and both are drawn.
        assert_eq!(
            derangement(2, &mut rng_stream(1, StreamKind::Traffic, 0)),
            [1, 0]
        );
        let drawn: std::collections::BTreeSet<Vec<usize>> = (0..50)
            .map(|s| derangement(3, &mut rng_stream(1, StreamKind::Traffic, s)))
            .collect();
        assert_eq!(drawn.len(), 2, "{drawn:?}");
    }

    #[test]
    fn every_host_sends_once_and_receives_once() {
        let t = leaf_spine(4, 8);
        let flows = spec(2_000_000)
            .generate(1, &ctx(&t, 1, &UNLIMITED))
            .unwrap();
        assert_eq!(flows.len(), 32);
        let srcs: Vec<u32> = flows.iter().map(|f| f.src).collect();
        assert_eq!(srcs, t.hosts, "one flow per host, in host order");
        let mut dsts: Vec<u32> = flows.iter().map(|f| f.dst).collect();
        dsts.sort();
        assert_eq!(dsts, t.hosts, "every host receives once");
        for f in &flows {
            assert_ne!(f.src, f.dst);
            assert_eq!(
                (f.size, f.start, f.priority, f.generator, f.source),
                (2_000_000, Time::from_us(5), 4, 1, "permutation")
            );
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_permutation() {
        let t = leaf_spine(4, 8);
        let dsts = |seed, index| -> Vec<u32> {
            spec(1000)
                .generate(index, &ctx(&t, seed, &UNLIMITED))
                .unwrap()
                .iter()
                .map(|f| f.dst)
                .collect()
        };
        assert_eq!(dsts(1, 0), dsts(1, 0));
        assert_ne!(dsts(1, 0), dsts(2, 0), "another seed");
        assert_ne!(dsts(1, 0), dsts(1, 1), "another entry's stream");
    }

    #[test]
    fn bad_values_name_their_key() {
        let t = leaf_spine(4, 8);
        let c = ctx(&t, 1, &UNLIMITED);
        assert_eq!(
            spec(0).generate(2, &c).unwrap_err().0,
            "traffic[2].size: permutation flows need a size above 0 (e.g. \"2MB\")"
        );
        let mut zero_priority = spec(10);
        if let TrafficSpec::Permutation(p) = &mut zero_priority {
            p.priority = 0;
        }
        assert!(zero_priority
            .generate(0, &c)
            .unwrap_err()
            .0
            .starts_with("traffic[0].priority: 0 is out of range"));
        // One host: built by hand, since the topology builders refuse it.
        let mut one = leaf_spine(1, 2);
        one.hosts.truncate(1);
        assert_eq!(
            spec(10)
                .generate(0, &ctx(&one, 1, &UNLIMITED))
                .unwrap_err()
                .0,
            "traffic[0]: a permutation needs at least 2 hosts (the topology has 1); use another \
             traffic kind or a larger topology"
        );
        let small = UNLIMITED.with_max_flows(31);
        assert!(spec(10)
            .generate(0, &ctx(&t, 1, &small))
            .unwrap_err()
            .0
            .starts_with("traffic[0].size: about 32 flows (one per host of 32)"));
    }
}
