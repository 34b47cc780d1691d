//! Building a [`Simulation`]: ports from the topology's links, switches and hosts, the flow
//! table (checked, sorted by start time, with each flow's ideal FCT), and the optional parts
//! of the load-balancing scheme.

use super::host::Host;
use super::routes::{HostGroups, MAX_HOSTS};
use super::switch::Switch;
use super::{
    faults, hold, host_lb, reseq, varys, Event, FabricConfig, Guards, SetupError, Simulation,
    StopRule,
};
use crate::cc::{FabricRtt, IntStack};
use crate::engine::{EventQueue, Fingerprint};
use crate::metrics::{FlowRecord, PortRecord};
use crate::packet::PacketArena;
use crate::port::{FarArrivals, NodeRef, PortState, CONTROL_PRIO, N_PRIO};
use crate::topology::{Shape, Topology};
use crate::traffic::{describe_hosts, FlowSpec};
use crate::transport::{ideal_fct, FixedTimeout, FlowState, NicTotals, Transports};
use crate::units::{Rate, Time};

impl Simulation {
    /// Builds the simulation. Flows may be given in any order; they are sorted by start time
    /// (ties keep their given order) and numbered in that order.
    pub fn new(
        topo: &Topology,
        cfg: FabricConfig,
        mut flows: Vec<FlowSpec>,
        seed: u64,
        stop: StopRule,
    ) -> Result<Simulation, SetupError> {
        let n = topo.nodes();
        let mut host_index = vec![u32::MAX; n];
        let mut node_ref = Vec::with_capacity(n);
        let (mut n_sw, mut n_host) = (0u32, 0u32);
        for (node, &sw) in topo.is_switch.iter().enumerate() {
            if sw {
                node_ref.push(NodeRef::Switch(n_sw));
                n_sw += 1;
            } else {
                host_index[node] = n_host;
                node_ref.push(NodeRef::Host(n_host));
                n_host += 1;
            }
        }
        if n_host as usize > MAX_HOSTS {
            return Err(SetupError::TooManyHosts {
                hosts: n_host as usize,
                max: MAX_HOSTS,
            });
        }

        // Ports: contiguous per node, in link order.
        let adj = topo.adjacency();
        let mut first_port = vec![0u32; n + 1];
        for node in 0..n {
            first_port[node + 1] = first_port[node] + adj[node].len() as u32;
        }
        let mut ports = Vec::with_capacity(first_port[n] as usize);
        for (node, neighbours) in adj.iter().enumerate() {
            for (local, &(peer_node, link)) in neighbours.iter().enumerate() {
                let l = &topo.links[link];
                // The peer's port for this link: its position in the peer's adjacency (for a
                // loopback link, which appears twice in its switch's list, the other one).
                let peer_local = adj[peer_node as usize]
                    .iter()
                    .enumerate()
                    .position(|(i, &(_, li))| {
                        li == link && (peer_node as usize != node || i != local)
                    })
                    .expect("links appear at both ends");
                let is_switch = topo.is_switch[node];
                ports.push(PortState::new(
                    (node_ref[node], node as u32),
                    (
                        node_ref[peer_node as usize],
                        peer_node,
                        first_port[peer_node as usize] + peer_local as u32,
                    ),
                    l.rate,
                    l.delay,
                    cfg.switch.ecn.red_for(l.rate),
                    PortRecord {
                        node: node as u32,
                        port: local as u16,
                        peer: peer_node,
                        is_switch,
                        rate_bps: l.rate.bps(),
                        delay_ps: l.delay.ps(),
                        ..Default::default()
                    },
                ));
            }
        }

        // Hop distance from every node to every host, computed once for routing and ideal FCTs.
        let to_host: Vec<Vec<u32>> = topo
            .hosts
            .iter()
            .map(|&h| topo.hop_distances_with(&adj, h))
            .collect();
        let host_groups = HostGroups::new(topo);
        let mut switches = Vec::with_capacity(n_sw as usize);
        let mut hosts = Vec::with_capacity(n_host as usize);
        for node in 0..n {
            let range = first_port[node]..first_port[node + 1];
            match node_ref[node] {
                NodeRef::Switch(_) => {
                    let sw = Switch::new(
                        node as u32,
                        range,
                        &adj,
                        (&to_host, &host_groups),
                        &ports,
                        &cfg,
                        seed,
                    )?;
                    switches.push(sw);
                }
                NodeRef::Host(_) => hosts.push(Host::new(node as u32, range.start)),
            }
        }

        // Flows, sorted by start time.
        for (index, f) in flows.iter().enumerate() {
            for (what, node) in [("source", f.src), ("destination", f.dst)] {
                if node as usize >= n || topo.is_switch[node as usize] {
                    return Err(SetupError::NotAHost {
                        index,
                        what,
                        node,
                        hosts: describe_hosts(&topo.hosts),
                    });
                }
            }
            if f.src == f.dst {
                return Err(SetupError::SelfFlow { index, node: f.src });
            }
            if f.size == 0 {
                return Err(SetupError::EmptyFlow { index });
            }
            if f.priority == CONTROL_PRIO || f.priority as usize >= N_PRIO {
                return Err(SetupError::BadPriority {
                    index,
                    priority: f.priority,
                });
            }
        }
        flows.sort_by_key(|f| f.start);
        let mut transports = cfg.transports();
        if transports.needs_fabric_rtt() {
            transports.fabric_rtt = Some(fabric_rtt(topo, &adj, &to_host, cfg.nic.payload.0));
        }
        // Of the flows whose transport has a fixed timeout, the one whose base RTT comes
        // closest to it (the first of the longest RTT, with one such transport), with how far
        // the RTT passes the timeout: every timeout must exceed its flows' RTTs.
        let mut tightest: Option<(i128, Time, FixedTimeout, usize, u32, u32)> = None;
        // Allocated at its final size. Collecting the `Result`s (no length known in advance)
        // grew it by doubling, copying it into fresh memory at each step: on R1 (97,737 flows
        // of 448 bytes), with memory cold, `Simulation::new` took 4.7% of a run's CPU samples,
        // most of it zeroing the pages of those copies, and they added 12 MB to the peak RSS
        // (`benches/HISTORY.md`, "Cost at scale, tenth round").
        let mut flow_states = Vec::with_capacity(flows.len());
        for (i, f) in flows.into_iter().enumerate() {
            let dist = &to_host[host_index[f.dst as usize] as usize];
            let path = representative_path(topo, &adj, dist, f.src, f.dst);
            let protocol = transports.protocol_of(f.generator);
            let wire = transports.wire(protocol);
            let ideal = ideal_fct(f.size, &path, &wire);
            if ideal == Time::MAX {
                return Err(SetupError::FlowBeyondClock {
                    generator: f.generator,
                    index: i,
                    size: f.size,
                    src: f.src,
                    dst: f.dst,
                });
            }
            if let Some(timeout) = transports.fixed_timeout(protocol) {
                let rtt = ideal_fct(wire.payload, &path, &wire);
                let past = rtt.ps() as i128 - timeout.rto.ps() as i128;
                if !matches!(tightest, Some((most, ..)) if most >= past) {
                    tightest = Some((past, rtt, timeout, i, f.src, f.dst));
                }
            }
            let line = ports[hosts[host_index[f.src as usize] as usize].port as usize].rate();
            let cc = transports.cc(protocol, line);
            flow_states.push(FlowState::new(i as u32, f, ideal, line, (protocol, cc)));
        }
        if let Some((past, rtt, timeout, index, src, dst)) = tightest {
            if past >= 0 {
                return Err(SetupError::RtoBelowRtt {
                    key: timeout.key,
                    advice: timeout.advice,
                    rto: timeout.rto,
                    rtt,
                    index,
                    src,
                    dst,
                });
            }
        }
        let transports = Transports::new(&transports, &flow_states);

        let mut sim = Simulation {
            now: Time::ZERO,
            events: EventQueue::default(),
            fingerprint: Fingerprint::default(),
            events_done: 0,
            arena: PacketArena::with_scheme_words(cfg.lb.capabilities().scheme_word)
                .with_arrivals(cfg.lb.capabilities().sojourn)
                .with_int(cfg.cc.carries_int()),
            cc_reads_acks: cfg.cc.reads_acks(),
            int_rx: IntStack::default(),
            ports,
            far_arrivals: FarArrivals::default(),
            host_index,
            host_groups,
            switches,
            hosts,
            flows: flow_states,
            next_flow: 0,
            flows_finished: 0,
            flows_done_stop: false,
            cfg,
            stop,
            guards: Guards::default(),
            measure_from: Time::ZERO,
            totals: NicTotals::default(),
            payload_dropped: 0,
            drops: 0,
            drops_egress: 0,
            lb_actions: Vec::new(),
            mmu_frames: Vec::new(),
            seed,
            faults: faults::FaultState::default(),
            held: None,
            host_side: None,
            reseq: None,
            monitors: None,
            tag_coflows: false,
            varys: None,
            transports,
            #[cfg(test)]
            drop_data: None,
            looks: Default::default(),
            stall: Default::default(),
        };
        let n_flows = sim.flows.len();
        let lb_caps = sim.cfg.lb.capabilities();
        sim.tag_coflows = lb_caps.coflow_tag;
        if sim.cfg.coflow.scheduler == varys::Scheduler::Varys {
            let rate = |p: u32| sim.ports[p as usize].rate().bps() as f64;
            let up = sim.hosts.iter().map(|h| rate(h.port)).collect();
            let down = (sim.hosts.iter())
                .map(|h| rate(sim.ports[h.port as usize].peer))
                .collect();
            let coflows: Vec<Option<u32>> = sim.flows.iter().map(|f| f.spec.coflow).collect();
            sim.varys = Some(Box::new(varys::Varys::new(
                sim.cfg.coflow.work_conserving,
                &coflows,
                up,
                down,
            )));
        }
        if lb_caps.hosts {
            let host_nodes: Vec<u32> = sim.hosts.iter().map(|h| h.node).collect();
            sim.host_side = host_lb::HostSide::new(
                &sim.cfg.lb,
                n_flows,
                (&sim.switches, &sim.host_groups),
                &sim.ports,
                &host_nodes,
                n,
                seed,
                &sim.cfg.transports().host_timing_wire(),
            )
            .map(Box::new);
        }
        if let Some(rule) = sim.cfg.lb.scheme().resequencing() {
            sim.reseq = Some(Box::new(reseq::Resequencer::new(rule, n_flows)));
        }
        let per_port = lb_caps.reorder_queues_per_port;
        if per_port > 0 {
            let host = |p: &PortState| sim.host_index[p.peer_node as usize] != u32::MAX;
            let leads = sim.ports.iter().map(|p| p.rec.is_switch && host(p));
            sim.held = Some(Box::new(hold::HeldQueues::new(per_port, leads)));
        }
        if let Some(f) = sim.flows.first() {
            sim.measure_from = f.spec.start;
            sim.events.schedule(f.spec.start, Event::FlowStart);
        }
        sim.lb_start();
        sim.host_lb_start();
        Ok(sim)
    }
}

impl Simulation {
    /// An estimate of the bytes a simulation of a fabric of shape `shape` holds besides its
    /// flows: the hop distances from every node to every host computed by [`Simulation::new`]
    /// and the switches' next hops towards every host (both grow with hosts × nodes and
    /// dominate a large fabric), then the ports, switches and hosts. The schemes' own tables
    /// and the packets in flight come on top. In floating point, so that any shape has one.
    pub fn estimated_fabric_bytes(shape: &Shape) -> f64 {
        let size = |bytes: usize| bytes as f64;
        let hosts = shape.hosts as f64;
        let switches = shape.switches as f64;
        // `to_host`: a u32 hop distance per (host, node).
        let distances = hosts * (hosts + switches) * size(std::mem::size_of::<u32>());
        // The routing tables (`sim/routes.rs`): in every switch, a 4-byte entry and at most one
        // shared (offset, count) route per group of hosts (a ToR's, so at most as many groups
        // as switches or hosts), and one route per host at its own ToR; and at most one u16
        // next hop per (switch port facing another switch, host) and one more per host (at
        // its ToR).
        let groups = hosts.min(switches);
        let route = size(std::mem::size_of::<(u32, u16)>());
        let routes = switches * groups * (size(4) + route)
            + hosts * route
            + (2.0 * shape.switch_links as f64 + 1.0) * hosts * size(2);
        // Both ends of every link, with their adjacency entries.
        let ports = 2.0
            * shape.links as f64
            * size(std::mem::size_of::<PortState>() + std::mem::size_of::<(u32, usize)>());
        let nodes = switches * size(std::mem::size_of::<Switch>())
            + hosts * size(std::mem::size_of::<Host>());
        distances + routes + ports + nodes
    }

    /// An estimate of the bytes one flow takes: its spec while the traffic is made (in a
    /// generator's vector, grown by doubling, then in the run's), its state in the simulation
    /// and its record in the results.
    pub fn estimated_bytes_per_flow() -> f64 {
        let bytes = 3 * std::mem::size_of::<FlowSpec>()
            + std::mem::size_of::<FlowState>()
            + std::mem::size_of::<FlowRecord>();
        bytes as f64
    }
}

/// The links (rate, delay) of the unloaded reference path from `src` to `dst`: a shortest
/// path that, at every hop, takes the fastest equal-cost link (first one on ties).
fn representative_path(
    topo: &Topology,
    adj: &[Vec<(u32, usize)>],
    dist: &[u32],
    src: u32,
    dst: u32,
) -> Vec<(Rate, Time)> {
    let mut path = Vec::new();
    let mut at = src;
    while at != dst {
        let (next, link) = representative_hop(topo, adj, dist, at);
        path.push((topo.links[link].rate, topo.links[link].delay));
        at = next;
    }
    path
}

/// The next node and link of the representative path from `at` towards the node whose hop
/// distances are `dist` ([`representative_path`]).
#[inline]
fn representative_hop(
    topo: &Topology,
    adj: &[Vec<(u32, usize)>],
    dist: &[u32],
    at: u32,
) -> (u32, usize) {
    adj[at as usize]
        .iter()
        .filter(|&&(y, _)| dist[y as usize] + 1 == dist[at as usize])
        .max_by_key(|&&(_, li)| (topo.links[li].rate, std::cmp::Reverse(li)))
        .copied()
        .expect("connected topology")
}

/// The fabric's largest base RTT and BDP over every pair of hosts ([`FabricRtt`]), as the
/// HPCC and ConWeave ns-3 simulators compute `maxRtt` and `maxBdp` (which HPCC's window and
/// IRN's BDP flow control use): per pair, on the representative path of the ideal FCTs, twice
/// the one-way propagation delay plus the serialization of one `payload` (no headers) on
/// every link one way, and the BDP that RTT at the path's slowest link. The two maxima may
/// come from different pairs, as in the references. Computed per destination over the nodes
/// by distance, O(hosts × (nodes + links)); setup calls it only for a run that needs it
/// (`TransportSetup::needs_fabric_rtt`).
pub(crate) fn fabric_rtt(
    topo: &Topology,
    adj: &[Vec<(u32, usize)>],
    to_host: &[Vec<u32>],
    payload: u64,
) -> FabricRtt {
    let n = topo.nodes();
    // Per node, towards the destination: one-way delay, serialization, slowest link.
    let mut toward = vec![(Time::ZERO, Time::ZERO, Rate(u64::MAX)); n];
    let mut order: Vec<u32> = Vec::with_capacity(n);
    let mut largest = FabricRtt::default();
    for (&dst, dist) in topo.hosts.iter().zip(to_host) {
        order.clear();
        order.extend((0..n as u32).filter(|&x| dist[x as usize] != u32::MAX && x != dst));
        order.sort_by_key(|&x| dist[x as usize]);
        toward[dst as usize] = (Time::ZERO, Time::ZERO, Rate(u64::MAX));
        for &x in &order {
            let (next, link) = representative_hop(topo, adj, dist, x);
            let l = &topo.links[link];
            let (delay, serialization, slowest) = toward[next as usize];
            toward[x as usize] = (
                delay + l.delay,
                serialization + l.rate.tx_time(payload),
                slowest.min(l.rate),
            );
        }
        for &src in &topo.hosts {
            if src == dst || dist[src as usize] == u32::MAX {
                continue;
            }
            let (delay, serialization, slowest) = toward[src as usize];
            let rtt = Time(2 * delay.ps()) + serialization;
            let bdp = rtt.ps() as u128 * slowest.bps() as u128 / 8_000_000_000_000;
            largest.rtt = largest.rtt.max(rtt);
            largest.bdp = largest.bdp.max(bdp as u64);
        }
    }
    largest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::LeafSpine;
    use crate::units::Rate;

    /// A flow whose ideal FCT is past what the clock counts is refused (its ideal FCT once
    /// wrapped around in release builds); one just within it is taken, with its ideal FCT.
    #[test]
    fn a_flow_longer_than_the_clock_is_refused() {
        let link = (Rate::gbps(100), Time::from_us(1));
        let topo = Topology::leaf_spine(&LeafSpine::uniform(2, 1, 2, link.0, link.1));
        let stop = StopRule {
            at: Time::from_ms(1),
            when_flows_done: false,
        };
        let cfg = FabricConfig::default();
        // 80 ps a byte at 100 Gbps, and headers: 2^56 bytes take about 2^62.4 ps alone, 2^58
        // bytes over 2^64.
        let (within, beyond) = (1u64 << 56, 1u64 << 58);
        let path = [link; 4];
        assert!(ideal_fct(within, &path, &cfg.nic.wire()) < Time::MAX);
        assert_eq!(ideal_fct(beyond, &path, &cfg.nic.wire()), Time::MAX);
        let flow = |size| vec![FlowSpec::scripted(0, 3, size, Time::ZERO)];
        assert!(Simulation::new(&topo, cfg.clone(), flow(within), 1, stop).is_ok());
        let err = Simulation::new(&topo, cfg, flow(beyond), 1, stop)
            .err()
            .expect("beyond the clock");
        assert_eq!(
            err.to_string(),
            format!(
                "traffic[0]: flow 0 ({beyond} bytes from host 0 to host 3) would take longer \
                 alone on its path than pfcsim's clock can count (2^64 ps, about 213 days); make \
                 the flow smaller or the links of its path faster"
            )
        );
    }

    /// The largest base RTT is that of the longest path (host, leaf, spine, leaf, host):
    /// twice its propagation delay plus a payload's serialization on each of its links; the
    /// largest BDP is at each path's slowest link, and with slower leaf-spine links it is
    /// that of two hosts of one leaf (4.16 us at 100 Gbps), not of the longest path.
    #[test]
    fn the_fabric_rtt_is_the_longest_pairs() {
        for (fabric_rate, serialization_ns, slowest) in
            [(100, 4 * 80, 100), (40, 2 * 80 + 2 * 200, 40)]
        {
            let topo = Topology::leaf_spine(&LeafSpine {
                fabric_rate: Rate::gbps(fabric_rate),
                ..LeafSpine::uniform(2, 2, 2, Rate::gbps(100), Time::from_us(1))
            });
            let adj = topo.adjacency();
            let to_host: Vec<Vec<u32>> = (topo.hosts.iter())
                .map(|&h| topo.hop_distances_with(&adj, h))
                .collect();
            let got = fabric_rtt(&topo, &adj, &to_host, 1_000);
            let rtt = Time::from_us(8) + Time::from_ns(serialization_ns);
            assert_eq!(got.rtt, rtt, "{fabric_rate} Gbps");
            let same_leaf = (Time::from_us(4) + Time::from_ns(160)).ps() * 100 / 8_000;
            let bdp = (rtt.ps() * slowest / 8_000).max(same_leaf);
            assert_eq!(got.bdp, bdp, "{fabric_rate} Gbps");
        }
    }

    #[test]
    fn a_fabric_with_more_hosts_than_a_route_key_names_is_refused() {
        let link = (Rate::gbps(100), Time::from_us(1));
        let leaves = (MAX_HOSTS as u32).div_ceil(16) + 1;
        let topo = Topology::leaf_spine(&LeafSpine::uniform(leaves, 1, 16, link.0, link.1));
        let stop = StopRule {
            at: Time::from_ms(1),
            when_flows_done: false,
        };
        let err = Simulation::new(&topo, FabricConfig::default(), Vec::new(), 1, stop)
            .err()
            .expect("too many hosts");
        assert_eq!(
            err.to_string(),
            format!(
                "topology: {} hosts; a fabric may have at most 65536 (a host's group and rank \
                 in the switches' routing tables are 16-bit numbers); split the study into \
                 smaller fabrics",
                leaves * 16
            )
        );
    }
}
