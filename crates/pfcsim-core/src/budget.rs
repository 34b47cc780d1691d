//! The memory a run may plan for (`[run] max_memory`), and the checks of a spec against it
//! before anything large is built: the fabric by its shape (nodes, links, and the routing
//! state that grows with hosts × nodes), then the traffic by the number of flows each
//! generator would make (see [`FlowBudget`]). A spec over the limit is refused with the
//! estimate, the limit and what to change, instead of taking the machine's memory.
//!
//! The estimates count the main structures of a run at their real sizes
//! ([`Simulation::estimated_fabric_bytes`], [`Simulation::estimated_bytes_per_flow`]); the
//! schemes' own tables, the packets in flight and the monitors' rows (bounded by
//! `run.monitor_limit`) come on top. Unset, the limit is half of the memory this process may
//! use: the least of the machine's memory, the memory limit of its cgroup and its
//! address-space limit.

use crate::sim::Simulation;
use crate::topology::Shape;
use crate::traffic::FlowBudget;
use crate::units::{human_bytes, Bytes};

/// The memory assumed where it cannot be read (not Linux).
const ASSUMED_MEMORY: u64 = 8_000_000_000;

/// The most bytes a run may plan for, and how it was set (for messages).
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryLimit {
    /// The limit, in bytes.
    pub bytes: u64,
    /// `run.max_memory (4GB)`, or for the default, how it was derived.
    pub origin: String,
}

impl MemoryLimit {
    /// The limit of a run: `max_memory` (`run.max_memory`) if set, else half of the memory
    /// this process may use.
    pub fn new(max_memory: Option<Bytes>) -> MemoryLimit {
        match max_memory {
            Some(b) => MemoryLimit {
                bytes: b.0,
                origin: format!("run.max_memory ({b})"),
            },
            None => {
                let (available, what) = match memory_available() {
                    Some(b) => (b, "this process may use"),
                    None => (ASSUMED_MEMORY, "assumed (the memory could not be read)"),
                };
                let bytes = available / 2;
                MemoryLimit {
                    bytes,
                    origin: format!(
                        "run.max_memory (unset: {}, half of the {} {what})",
                        human_bytes(bytes as f64),
                        human_bytes(available as f64)
                    ),
                }
            }
        }
    }

    /// Checks a fabric of shape `shape` against the limit and the widths of node and port ids;
    /// `key` starts a refusal and `size_keys` gives the values that size the fabric (see
    /// `TopologySpec::size_keys`). On success, what the limit leaves for flows.
    pub fn check_fabric(
        &self,
        key: &str,
        size_keys: &str,
        shape: &Shape,
    ) -> Result<FlowBudget, String> {
        let fabric_bytes = Simulation::estimated_fabric_bytes(shape);
        let fabric = || {
            format!(
                "{key}: a fabric of {} hosts, {} switches and {} links ({size_keys})",
                shape.hosts, shape.switches, shape.links
            )
        };
        if fabric_bytes > self.bytes as f64 {
            return Err(format!(
                "{}: about {} to simulate, above {}; make the fabric smaller, or raise \
                 run.max_memory",
                fabric(),
                human_bytes(fabric_bytes),
                self.origin
            ));
        }
        shape
            .check_numbering()
            .map_err(|e| format!("{}: {e}; make the fabric smaller", fabric()))?;
        let bytes_per_flow = Simulation::estimated_bytes_per_flow();
        let room = (self.bytes as f64 - fabric_bytes) / bytes_per_flow;
        Ok(FlowBudget {
            max_flows: (room as u64).min(FlowBudget::unlimited().max_flows),
            bytes_per_flow,
            fabric_bytes,
            limit: self.origin.clone(),
        })
    }
}

/// The memory this process may use, in bytes: the least of the machine's memory
/// (`/proc/meminfo`), the memory limit of the cgroup mounted at `/sys/fs/cgroup` (v2 or v1)
/// and the address-space limit of the process (`/proc/self/limits`). `None` if the machine's
/// memory cannot be read.
fn memory_available() -> Option<u64> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let total = read("/proc/meminfo").and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    })?;
    // "max" (v2) or a huge number (v1) where no limit is set: either way the minimum holds.
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| read(path)?.trim().parse::<u64>().ok())
    .min();
    let address_space = read("/proc/self/limits").and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("Max address space"))?;
        line.split_whitespace().nth(3)?.parse::<u64>().ok()
    });
    Some(
        [Some(total), cgroup, address_space]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(total),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::TopologySpec;

    fn leaf_spine(leaves: u32, spines: u32, hosts_per_leaf: u32) -> TopologySpec {
        toml::from_str(&format!(
            "kind = \"leaf_spine\"\nleaves = {leaves}\nspines = {spines}\n\
             hosts_per_leaf = {hosts_per_leaf}\n\
             host_link = {{ rate = \"100Gbps\", delay = \"1us\" }}\n\
             fabric_link = {{ rate = \"100Gbps\", delay = \"1us\" }}\n"
        ))
        .unwrap()
    }

    fn check(spec: &TopologySpec, limit: &str) -> Result<FlowBudget, String> {
        let limit = MemoryLimit::new(Some(limit.parse().unwrap()));
        let shape = spec.shape(false).unwrap();
        limit.check_fabric("topology", &spec.size_keys(), &shape)
    }

    #[test]
    fn a_small_fabric_leaves_room_for_flows() {
        let budget = check(&leaf_spine(8, 8, 16), "1GB").unwrap();
        let flows = budget.max_flows as f64;
        let expected = (1e9 - budget.fabric_bytes) / budget.bytes_per_flow;
        assert!((flows - expected).abs() <= 1.0, "{flows} vs {expected}");
        assert!(budget.fabric_bytes < 2e6, "{}", budget.fabric_bytes);
        assert_eq!(budget.limit, "run.max_memory (1GB)");
    }

    /// A leaf-spine of 10^10 hosts is refused by its estimate, before anything is built.
    #[test]
    fn a_huge_fabric_is_refused_with_its_estimate() {
        let e = check(&leaf_spine(100_000, 4, 100_000), "8GB").unwrap_err();
        assert!(
            e.starts_with(
                "topology: a fabric of 10000000000 hosts, 100004 switches and 10000400000 links \
                 (leaves = 100000, spines = 4, hosts_per_leaf = 100000): about "
            ),
            "{e}"
        );
        assert!(
            e.ends_with(
                " to simulate, above run.max_memory (8GB); make the fabric smaller, or raise \
                 run.max_memory"
            ),
            "{e}"
        );
    }

    /// Within the memory limit, a fabric is still refused if a node would have more ports
    /// than 16-bit port numbers allow.
    #[test]
    fn port_numbering_is_checked() {
        let e = check(&leaf_spine(2, 70_000, 1), "8GB").unwrap_err();
        assert_eq!(
            e,
            "topology: a fabric of 2 hosts, 70002 switches and 140002 links (leaves = 2, \
             spines = 70000, hosts_per_leaf = 1): a node with 70001 ports, more than the 65536 \
             a node may have; make the fabric smaller"
        );
    }

    #[test]
    fn the_default_limit_is_a_share_of_the_memory() {
        let limit = MemoryLimit::new(None);
        assert!(limit.bytes > 0);
        assert!(
            limit.origin.starts_with("run.max_memory (unset: ")
                && limit.origin.contains(", half of the "),
            "{}",
            limit.origin
        );
    }
}
