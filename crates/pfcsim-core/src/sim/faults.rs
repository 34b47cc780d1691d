//! Faults in a running simulation: applying the resolved `[[faults]]` of a spec
//! (`crate::faults`) at their times, and the drops they cause.
//!
//! A fault-free run pays one test of a per-switch flag per packet arriving at a switch (the
//! flag is set only on switches with a silent-drop or black-hole fault) and nothing else.

use super::routes::RoutingTable;
use super::{Event, Simulation};
use crate::engine::{rng_stream, Rng, StreamKind};
use crate::faults::{Fault, ScheduledFault};
use crate::mmu::{Frame, Xon};
use crate::packet::{PacketId, PacketKind};
use crate::port::{NodeRef, CONTROL_PRIO, N_PRIO};
use crate::topology::Topology;
use crate::units::Time;
use rand::Rng as _;

/// Why a packet was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DropCause {
    /// Silent random drop at a switch.
    Silent,
    /// Black-holed source/destination pair.
    BlackHole,
    /// On the wire or queued for a link that went down.
    LinkDown,
    /// A switch had no route to the destination (a link failure not yet reconverged).
    NoRoute,
}

/// Packets lost to each fault cause.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FaultDrops {
    pub silent: u64,
    pub black_hole: u64,
    pub link_down: u64,
    pub no_route: u64,
}

/// Drop rules of one switch.
#[derive(Clone, Debug, Default)]
pub(super) struct SwitchFaults {
    /// Probability and the local ingress ports it applies to (empty: all).
    silent: Option<(f64, Vec<u16>)>,
    /// Sorted (source, destination) pairs and the share of their packets dropped.
    black_hole: Option<(Vec<(u32, u32)>, f64)>,
    rng: Option<Rng>,
}

/// The faults of a run and their state.
#[derive(Default)]
pub(super) struct FaultState {
    plan: Vec<ScheduledFault>,
    /// Per switch (by switch index): its drop rules, if any.
    pub(super) switch: Vec<SwitchFaults>,
    /// Per link (by topology link index): down.
    link_down: Vec<bool>,
    /// Per port: the port's link is down.
    pub(super) port_down: Vec<bool>,
    /// The topology, kept for recomputing routes after a link failure.
    topology: Option<Topology>,
    pub(super) drops: FaultDrops,
    seed: u64,
}

impl Simulation {
    /// Adds the faults of a spec (resolved against this simulation's topology): those
    /// starting at time zero apply at once, the others are scheduled.
    pub fn with_faults(mut self, topology: &Topology, faults: Vec<ScheduledFault>) -> Simulation {
        if faults.is_empty() {
            return self;
        }
        let needs_topology = faults
            .iter()
            .any(|f| matches!(f.fault, Fault::LinkDown { .. }));
        self.faults = FaultState {
            switch: vec![SwitchFaults::default(); self.switches.len()],
            link_down: vec![false; topology.links.len()],
            port_down: vec![false; self.ports.len()],
            topology: needs_topology.then(|| topology.clone()),
            seed: self.seed,
            ..FaultState::default()
        };
        for (i, f) in faults.iter().enumerate() {
            if f.at == Time::ZERO {
                self.apply_fault(i as u32, &f.fault.clone());
            } else {
                self.events.schedule(f.at, Event::Fault(i as u32));
            }
        }
        self.faults.plan = faults;
        self
    }

    /// A scheduled fault starts.
    pub(super) fn fault_starts(&mut self, index: u32) {
        let fault = self.faults.plan[index as usize].fault.clone();
        self.apply_fault(index, &fault);
    }

    fn apply_fault(&mut self, index: u32, fault: &Fault) {
        match *fault {
            Fault::LinkRate { a, b, rate } => {
                for p in [self.port_between(a, b), self.port_between(b, a)] {
                    let (kmin, kmax, pmax) = self.cfg.switch.ecn.red_for(rate);
                    let port = &mut self.ports[p as usize];
                    port.set_rate(rate);
                    port.ecn_kmin = kmin;
                    port.ecn_kmax = kmax;
                    port.ecn_pmax = pmax;
                }
            }
            Fault::SilentDrop {
                switch,
                probability,
                ref from,
            } => {
                let s = self.switch_index(switch);
                let ports = from
                    .iter()
                    .map(|&n| (self.port_between(switch, n) - self.switches[s].ports.start) as u16)
                    .collect();
                self.switch_faults(s).silent = Some((probability, ports));
            }
            Fault::BlackHole {
                switch,
                ref pairs,
                fraction,
            } => {
                let s = self.switch_index(switch);
                self.switch_faults(s).black_hole = Some((pairs.clone(), fraction));
            }
            Fault::LinkDown { a, b, reconverge } => {
                let link = self
                    .link_between(a, b)
                    .expect("faults are resolved against the topology");
                self.faults.link_down[link] = true;
                for p in [self.port_between(a, b), self.port_between(b, a)] {
                    self.faults.port_down[p as usize] = true;
                    self.take_port_down(p);
                }
                // The two ends stop using the link at once; the others once routing reconverges.
                for node in [a, b] {
                    let s = self.switch_index(node);
                    self.reroute(s);
                }
                if reconverge == Time::ZERO {
                    self.reconverge(index);
                } else {
                    let at = self.now + reconverge;
                    self.events.schedule(at, Event::Reconverge(index));
                }
            }
        }
    }

    /// Routing has reconverged after link failure `index`: every switch routes around it.
    pub(super) fn reconverge(&mut self, _index: u32) {
        for s in 0..self.switches.len() {
            self.reroute(s);
        }
    }

    /// Recomputes switch `s`'s next hops over the links that are up.
    fn reroute(&mut self, s: usize) {
        let topo = self
            .faults
            .topology
            .as_ref()
            .expect("kept when a link can fail");
        let mut adj = topo.adjacency();
        for list in &mut adj {
            list.retain(|&(_, link)| !self.faults.link_down[link]);
        }
        let to_host: Vec<Vec<u32>> = topo
            .hosts
            .iter()
            .map(|&h| topo.hop_distances_with(&adj, h))
            .collect();
        let full = topo.adjacency();
        let down = &self.faults.link_down;
        let node = self.switches[s].node;
        self.switches[s].routing = RoutingTable::shortest_paths(
            node,
            &full[node as usize],
            &to_host,
            &self.host_groups,
            |link| down[link],
        );
    }

    /// Drops everything on the wire and queued at port `p`, whose link went down, and ends
    /// a pause the peer held on it.
    fn take_port_down(&mut self, p: u32) {
        let now = self.now;
        while let Some(gone) =
            (self.ports[p as usize].wire).pop_front(&self.arena, &mut self.far_arrivals)
        {
            self.fault_drop(gone, DropCause::LinkDown, p);
        }
        while let Some(pid) = self.ports[p as usize].next_pfc() {
            self.arena.free(pid);
        }
        let mut frames = Vec::new();
        for prio in 0..N_PRIO as u8 {
            while self.ports[p as usize].nonempty & (1 << prio) != 0 {
                let pid = self.ports[p as usize].dequeue(prio, &mut self.arena, now);
                if let NodeRef::Switch(s) = self.ports[p as usize].owner {
                    let sw = &mut self.switches[s as usize];
                    let pkt = self.arena.get(pid);
                    let (in_local, out) = (pkt.ingress_port(), (p - sw.ports.start) as usize);
                    let wire = pkt.wire_bytes as u64;
                    if prio != CONTROL_PRIO {
                        match sw.mmu.release(in_local as usize, out, prio, wire) {
                            Xon::None => {}
                            Xon::Resume => frames.push(Frame {
                                port: in_local,
                                prio,
                                pause: false,
                            }),
                            Xon::Frames => sw.mmu.take_frames(&mut frames),
                        }
                    }
                }
                self.fault_drop(pid, DropCause::LinkDown, p);
            }
        }
        let port = &mut self.ports[p as usize];
        if port.paused != 0 {
            for q in 0..N_PRIO {
                if port.paused & (1 << q) != 0 {
                    let pq = &mut port.prio[q];
                    pq.pause_clock += (now - pq.paused_since).ps();
                    pq.pause_clock_ns = (pq.pause_clock / 1_000) as u32;
                }
            }
            port.paused = 0;
            port.rec.paused_time_ps += (now - port.paused_any_since).ps();
        }
        if let NodeRef::Switch(s) = self.ports[p as usize].owner {
            let first = self.switches[s as usize].ports.start;
            for f in frames {
                let kind = if f.pause {
                    PacketKind::Pause
                } else {
                    PacketKind::Resume
                };
                self.send_pfc(first + f.port as u32, f.prio, kind);
            }
        }
    }

    /// Whether switch `s` drops packet `pid`, which arrived on its local port `in_local`;
    /// if so the packet is gone. Called only for switches with drop rules.
    #[cold]
    pub(super) fn fault_filter(&mut self, s: u32, in_local: u16, pid: PacketId) -> bool {
        let pkt = *self.arena.get(pid);
        let seed = self.faults.seed;
        let node = self.switches[s as usize].node;
        let rules = &mut self.faults.switch[s as usize];
        let rng = rules
            .rng
            .get_or_insert_with(|| rng_stream(seed, StreamKind::Fault, 1 << 32 | node as u64));
        let mut cause = None;
        if let Some((probability, ports)) = &rules.silent {
            if (ports.is_empty() || ports.contains(&in_local)) && rng.gen::<f64>() < *probability {
                cause = Some(DropCause::Silent);
            }
        }
        if let Some((pairs, fraction)) = &rules.black_hole {
            if cause.is_none()
                && pairs.binary_search(&(pkt.src, pkt.dst)).is_ok()
                && (*fraction >= 1.0 || rng.gen::<f64>() < *fraction)
            {
                cause = Some(DropCause::BlackHole);
            }
        }
        match cause {
            Some(cause) => {
                let p = self.switches[s as usize].ports.start + in_local as u32;
                self.fault_drop(pid, cause, p);
                true
            }
            None => false,
        }
    }

    /// Counts and frees a packet lost to a fault at (or, for a link, out of) port `p`.
    pub(super) fn fault_drop(&mut self, pid: PacketId, cause: DropCause, p: u32) {
        let pkt = self.arena.get(pid);
        if pkt.kind == PacketKind::Data {
            self.payload_dropped += pkt.payload as u64;
        }
        let drops = &mut self.faults.drops;
        match cause {
            DropCause::Silent => drops.silent += 1,
            DropCause::BlackHole => drops.black_hole += 1,
            DropCause::LinkDown => drops.link_down += 1,
            DropCause::NoRoute => drops.no_route += 1,
        }
        self.ports[p as usize].rec.fault_drops += 1;
        self.arena.free(pid);
    }

    fn switch_faults(&mut self, s: usize) -> &mut SwitchFaults {
        self.switches[s].faulty = true;
        &mut self.faults.switch[s]
    }

    fn switch_index(&self, node: u32) -> usize {
        match self.ports[self.node_first_port(node) as usize].owner {
            NodeRef::Switch(s) => s as usize,
            NodeRef::Host(_) => unreachable!("faults name switches"),
        }
    }

    /// The global port of node `a` whose link leads to node `b`.
    fn port_between(&self, a: u32, b: u32) -> u32 {
        let first = self.node_first_port(a);
        (first..)
            .take_while(|&p| (p as usize) < self.ports.len() && self.ports[p as usize].node == a)
            .find(|&p| self.ports[p as usize].peer_node == b)
            .expect("faults are resolved against the topology")
    }

    fn node_first_port(&self, node: u32) -> u32 {
        self.ports
            .iter()
            .position(|p| p.node == node)
            .expect("every node has a port") as u32
    }

    fn link_between(&self, a: u32, b: u32) -> Option<usize> {
        let topo = self.faults.topology.as_ref()?;
        topo.links
            .iter()
            .position(|l| (l.a == a && l.b == b) || (l.a == b && l.b == a))
    }
}
