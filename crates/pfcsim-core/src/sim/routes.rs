//! The switches' routing tables: every switch's next hops towards every host, the ports on
//! its shortest paths (the candidates an ECMP-style scheme chooses among).
//!
//! Every packet forwarded reads its switch's table once, at a place that depends on its
//! destination, so in a large fabric the tables compete for the cache with the flows and
//! packets. They are kept small by what shortest paths have in common: a switch sends every
//! host behind another ToR the same way (hosts have one link, to their ToR), so a table has
//! one entry per group of hosts (the hosts behind one ToR), and single hosts' entries only for
//! a group whose hosts it sends different ways: its own hosts, each on its own port. (A failed
//! link between switches changes how a switch reaches a ToR, and so all of its hosts alike;
//! the table takes any split of a group all the same.) At 1,024 hosts behind 64 leaves, a
//! leaf's table is 64 group entries and 17 routes (the uplinks and its 16 hosts), 440 bytes
//! with its next hops, where one entry per host took 2 KB.

use crate::topology::Topology;
use std::collections::HashMap;

/// Most hosts a fabric may have: a host's group and its rank in the group ([`RouteKey`]) are
/// 16-bit numbers, and there are at most as many groups as hosts.
pub(super) const MAX_HOSTS: usize = 1 << 16;

/// Where the next hops towards a host are in every switch's table: the group of the host (the
/// hosts behind its ToR) and its rank in the group. Looked up by destination node in
/// [`HostGroups::key`] before every table read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RouteKey {
    group: u16,
    rank: u16,
}

/// The key of a node that is not a host: no table has its group.
const NOT_A_HOST: RouteKey = RouteKey {
    group: u16::MAX,
    rank: u16::MAX,
};

/// The fabric's hosts in groups by the switch they hang off, and every host's [`RouteKey`].
#[derive(Debug)]
pub(super) struct HostGroups {
    /// By node id: a host's key ([`NOT_A_HOST`] for a switch).
    keys: Vec<RouteKey>,
    /// The host indices of each group, by rank.
    members: Vec<Vec<u32>>,
}

impl HostGroups {
    /// Groups the hosts of `topo` by their ToR, in the order of the hosts (host index `i` is
    /// `topo.hosts[i]`). At most 2^16 hosts (checked at setup, [`MAX_HOSTS`]), so that
    /// groups and ranks fit 16 bits.
    pub(super) fn new(topo: &Topology) -> HostGroups {
        let mut keys = vec![NOT_A_HOST; topo.nodes()];
        let mut members: Vec<Vec<u32>> = Vec::new();
        let mut group_of_tor: HashMap<u32, u16> = HashMap::new();
        for (h, &node) in topo.hosts.iter().enumerate() {
            let group = *group_of_tor
                .entry(topo.tor_of[node as usize])
                .or_insert_with(|| {
                    members.push(Vec::new());
                    u16::try_from(members.len() - 1).expect("at most MAX_HOSTS hosts")
                });
            let list = &mut members[group as usize];
            let rank = u16::try_from(list.len()).expect("at most MAX_HOSTS hosts");
            list.push(h as u32);
            keys[node as usize] = RouteKey { group, rank };
        }
        HostGroups { keys, members }
    }

    /// The key of host node `node`.
    #[inline]
    pub(super) fn key(&self, node: u32) -> RouteKey {
        let key = self.keys[node as usize];
        debug_assert!(
            key != NOT_A_HOST,
            "node {node} is not a host: no route to it"
        );
        key
    }

    /// The key of node `node`, for a hint only: a switch's asks for no line of a table (or,
    /// in a fabric of 65,536 groups, for a line it does not need).
    #[inline]
    pub(super) fn hint_key(&self, node: u32) -> RouteKey {
        self.keys[node as usize]
    }
}

/// Marks an entry of [`RoutingTable::by_group`] whose group's hosts have one route each.
const PER_HOST: u32 = 1 << 31;

/// One switch's next hops towards every host.
#[derive(Debug)]
pub(super) struct RoutingTable {
    /// Per group ([`RouteKey::group`]): the index in `routes` of the route of all its hosts;
    /// or, with [`PER_HOST`] set, of its first host's route, the others following by rank.
    by_group: Vec<u32>,
    /// Sets of next hops: (offset, count) in `next_hops`.
    routes: Vec<(u32, u16)>,
    /// Local port indices, grouped per set, each set once.
    pub(super) next_hops: Vec<u16>,
}

impl RoutingTable {
    /// The next hops of switch `node` towards every host: the local ports (in `neighbours`
    /// order) whose peer is one hop closer to the host in `to_host[i]` (hop distances to host
    /// index `i`), skipping links for which `down(link index)` is true.
    pub(super) fn shortest_paths(
        node: u32,
        neighbours: &[(u32, usize)],
        to_host: &[Vec<u32>],
        groups: &HostGroups,
        down: impl Fn(usize) -> bool,
    ) -> RoutingTable {
        // Each host's set of next hops, as an index into the distinct sets.
        let mut set_of = Vec::with_capacity(to_host.len());
        let mut sets: Vec<(u32, u16)> = Vec::new();
        let mut index: HashMap<Vec<u16>, usize> = HashMap::new();
        let mut next_hops = Vec::new();
        let mut hops = Vec::new();
        for dist in to_host {
            hops.clear();
            let here = dist[node as usize];
            for (local, &(peer, link)) in neighbours.iter().enumerate() {
                let d = dist[peer as usize];
                if d != u32::MAX && d + 1 == here && !down(link) {
                    hops.push(local as u16);
                }
            }
            let set = *index.entry(hops.clone()).or_insert_with(|| {
                sets.push((next_hops.len() as u32, hops.len() as u16));
                next_hops.extend_from_slice(&hops);
                sets.len() - 1
            });
            set_of.push(set);
        }
        // A group whose hosts share a set takes one route, shared with every other group of
        // that set; any other group takes one route per host.
        let mut routes = Vec::new();
        let mut route_of_set: HashMap<usize, u32> = HashMap::new();
        let by_group = groups
            .members
            .iter()
            .map(|hosts| {
                let first = set_of[hosts[0] as usize];
                if hosts.iter().all(|&h| set_of[h as usize] == first) {
                    *route_of_set.entry(first).or_insert_with(|| {
                        routes.push(sets[first]);
                        routes.len() as u32 - 1
                    })
                } else {
                    let start = routes.len() as u32;
                    routes.extend(hosts.iter().map(|&h| sets[set_of[h as usize]]));
                    start | PER_HOST
                }
            })
            .collect();
        RoutingTable {
            by_group,
            routes,
            next_hops,
        }
    }

    /// Where the route towards the host of `key` is in `routes`. Without a branch: a switch
    /// forwards to its own hosts and to other groups in no predictable order.
    #[inline]
    fn index(&self, key: RouteKey) -> usize {
        let entry = self.by_group[key.group as usize];
        // All ones with PER_HOST set, else zero.
        let rank_mask = (entry / PER_HOST).wrapping_neg();
        ((entry & !PER_HOST) + (key.rank as u32 & rank_mask)) as usize
    }

    /// (offset, count) of the next hops towards the host of `key` in `next_hops`.
    #[inline]
    pub(super) fn route(&self, key: RouteKey) -> (u32, u16) {
        self.routes[self.index(key)]
    }

    /// Asks for the group entry of `key` (see [`crate::engine::prefetch`]; a switch's key
    /// asks for nothing).
    #[inline]
    pub(super) fn prefetch(&self, key: RouteKey) {
        if let Some(entry) = self.by_group.get(key.group as usize) {
            crate::engine::prefetch(entry);
        }
    }

    /// Bytes of the table (unit tests of its size).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.by_group.len() * 4 + self.routes.len() * 8 + self.next_hops.len() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::{HostGroups, RoutingTable};
    use crate::topology::{LeafSpine, Topology};
    use crate::units::{Rate, Time};

    /// Each host's next hops at switch `node`, computed host by host (the table's meaning).
    fn plain_routes(
        node: u32,
        neighbours: &[(u32, usize)],
        to_host: &[Vec<u32>],
        down: &dyn Fn(usize) -> bool,
    ) -> Vec<Vec<u16>> {
        to_host
            .iter()
            .map(|dist| {
                let here = dist[node as usize];
                neighbours
                    .iter()
                    .enumerate()
                    .filter(|&(_, &(peer, link))| {
                        let d = dist[peer as usize];
                        d != u32::MAX && d + 1 == here && !down(link)
                    })
                    .map(|(local, _)| local as u16)
                    .collect()
            })
            .collect()
    }

    /// Every switch's table gives every host the next hops of a host-by-host computation;
    /// returns the tables.
    fn check_tables(topo: &Topology, down: &dyn Fn(usize) -> bool) -> Vec<RoutingTable> {
        let groups = HostGroups::new(topo);
        let mut adj = topo.adjacency();
        let full = adj.clone();
        for list in &mut adj {
            list.retain(|&(_, link)| !down(link));
        }
        let to_host: Vec<Vec<u32>> = topo
            .hosts
            .iter()
            .map(|&h| topo.hop_distances_with(&adj, h))
            .collect();
        let mut tables = Vec::new();
        for node in (0..topo.nodes() as u32).filter(|&n| topo.is_switch[n as usize]) {
            let neighbours = &full[node as usize];
            let table = RoutingTable::shortest_paths(node, neighbours, &to_host, &groups, down);
            let plain = plain_routes(node, neighbours, &to_host, down);
            for (h, &host) in topo.hosts.iter().enumerate() {
                let (offset, count) = table.route(groups.key(host));
                let hops = &table.next_hops[offset as usize..(offset + count as u32) as usize];
                assert_eq!(hops, &plain[h][..], "switch {node}, host {host}");
            }
            tables.push(table);
        }
        tables
    }

    fn leaf_spine(leaves: u32, spines: u32, hosts_per_leaf: u32) -> Topology {
        let uniform = LeafSpine::uniform(leaves, spines, hosts_per_leaf, LINK.0, LINK.1);
        Topology::leaf_spine(&uniform)
    }

    const LINK: (Rate, Time) = (Rate::gbps(100), Time::from_us(1));

    #[test]
    fn tables_by_group_route_every_host_as_host_by_host_routes_do() {
        check_tables(&leaf_spine(4, 2, 3), &|_| false);
        check_tables(&Topology::fat_tree(4, LINK, LINK), &|_| false);
    }

    /// A failed link between switches changes the routes of whole groups: the spines keep one
    /// route per group. A group split at a switch far from it (here by a failed host link,
    /// which faults do not make, `crate::faults`) takes one route per host there.
    #[test]
    fn failed_links_change_groups_whole_and_split_groups_take_routes_per_host() {
        let topo = leaf_spine(4, 2, 3);
        // Link h joins host h to leaf h / 3; link 12 + 2 * l + s joins leaf l to spine s.
        let leaf_3_spine_1 = 12 + 2 * 3 + 1;
        let tables = check_tables(&topo, &|link| link == leaf_3_spine_1);
        let groups = HostGroups::new(&topo);
        // Spine 1 (tables 4 and 5 are the spines) reaches leaf 3's hosts through the other
        // leaves, with one route for the group.
        let spine = &tables[5];
        assert_eq!(spine.route(groups.key(9)).1, 3);
        assert_eq!((spine.by_group.len(), spine.routes.len()), (4, 4));
        let tables = check_tables(&topo, &|link| link == 1 || link == leaf_3_spine_1);
        // Spine 0 still reaches every host of leaf 0 but host 1.
        let spine = &tables[4];
        assert_eq!(spine.route(groups.key(1)).1, 0);
        assert_eq!(spine.route(groups.key(0)).1, 1);
        assert_eq!(spine.routes.len(), 3 + 3);
    }

    /// The table of a leaf of a 1,024-host leaf-spine: one entry per group (64 leaves), one
    /// route for every remote host, and one per host of its own.
    #[test]
    fn a_leaf_keeps_one_entry_per_group_and_one_route_per_own_host() {
        let topo = leaf_spine(64, 8, 16);
        let tables = check_tables(&topo, &|_| false);
        let leaf = &tables[0];
        assert_eq!((leaf.by_group.len(), leaf.routes.len()), (64, 17));
        assert_eq!(leaf.bytes(), 64 * 4 + 17 * 8 + (8 + 16) * 2);
        let spine = &tables[64];
        assert_eq!((spine.by_group.len(), spine.routes.len()), (64, 64));
    }
}
