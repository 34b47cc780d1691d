//! The hosts' side of host-side load balancing (`lb/host.rs`): the path table, the scheme's
//! calls and actions, and probes.

use super::routes::HostGroups;
use super::{Event, Simulation, Switch};
use crate::engine::{rng_stream, Rng, StreamKind};
use crate::lb::host::{
    AckEcho, FlowInfo, HostAction, HostCtx, HostFabric, HostScheme, PairTiming, ProbeEcho,
};
use crate::lb::{LbConfig, NO_TOR};
use crate::packet::{Packet, PacketKind};
use crate::port::{PortState, CONTROL_PRIO};
use crate::transport::Wire;
use crate::units::{Rate, Time};

/// The run's host-side scheme with what it works on.
pub(super) struct HostSide {
    lb: Box<dyn HostScheme>,
    /// The name of the scheme it is the host side of (its counters are written under it).
    name: &'static str,
    pub(super) fabric: HostFabric,
    /// One RNG stream per host (by host index).
    rngs: Vec<Rng>,
    actions: Vec<HostAction>,
    /// The scheme holds and releases flows ([`HostScheme::clocks_sending`]).
    pub(super) clocks_sending: bool,
}

impl HostSide {
    /// The host-side part of `cfg` for `flows` flows (`None` if the scheme has none); `wire`
    /// sizes the packets of the unloaded timings (`TransportSetup::host_timing_wire`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        cfg: &LbConfig,
        flows: usize,
        (switches, groups): (&[Switch], &HostGroups),
        ports: &[PortState],
        host_nodes: &[u32],
        nodes: usize,
        seed: u64,
        wire: &Wire,
    ) -> Option<HostSide> {
        if !cfg.capabilities().hosts {
            return None;
        }
        let fabric = path_table((switches, groups), ports, host_nodes, nodes, wire);
        let lb = cfg.scheme().host_scheme(flows, &fabric)?;
        Some(HostSide {
            clocks_sending: lb.clocks_sending(),
            lb,
            name: cfg.innermost().name(),
            fabric,
            rngs: (0..host_nodes.len())
                .map(|h| rng_stream(seed, StreamKind::Host, h as u64))
                .collect(),
            actions: Vec::new(),
        })
    }

    /// The scheme's values at host node `host` (scheme monitors).
    pub(super) fn samples(
        &self,
        now: Time,
        host: u32,
        emit: &mut dyn FnMut(&'static str, u32, f64),
    ) {
        self.lb.samples(now, host, &self.fabric, emit);
    }

    /// Adds the host-side scheme's counters to `out`.
    pub(super) fn counters(&self, out: &mut crate::lb::Counters) {
        out.of(self.name, |out| self.lb.counters(out));
    }
}

/// The paths between every two ToRs, walked through the switches' routing tables: at every
/// switch hop with more than one next hop towards the destination ToR, one path per next hop
/// (tag byte `h` = choice + 1), in the order of the switches' ports; up to
/// [`crate::lb::host::MAX_PATHS`] per pair, and choices past the fourth switch hop are left
/// to the switches (the tag has four bytes).
///
/// With them, the unloaded timing of each pair ([`PairTiming`]): the base RTT of the fastest
/// of its paths, from the first host of one ToR to the first host of the other, for a
/// full-size data packet (`wire`'s payload and headers: those of the one transport every flow
/// uses, else the NIC's) and its ACK.
fn path_table(
    (switches, groups): (&[Switch], &HostGroups),
    ports: &[PortState],
    host_nodes: &[u32],
    nodes: usize,
    wire: &Wire,
) -> HostFabric {
    let mut tor_of = vec![NO_TOR; nodes];
    let mut tor_switch = Vec::new(); // switch index of each ToR
    let mut tor_host = Vec::new(); // host index of one host under each ToR
    let switch_of_node = |node: u32| switches.iter().position(|s| s.node == node);
    for (h, &node) in host_nodes.iter().enumerate() {
        let port = &ports[ports
            .iter()
            .position(|p| p.node == node)
            .expect("a host has a port")];
        let tor = port.peer_node;
        let t = match tor_switch
            .iter()
            .position(|&s: &usize| switches[s].node == tor)
        {
            Some(t) => t,
            None => {
                tor_switch.push(switch_of_node(tor).expect("hosts hang off switches"));
                tor_host.push(h);
                tor_switch.len() - 1
            }
        };
        tor_of[node as usize] = t as u32;
    }
    let tors = tor_switch.len() as u32;
    let data_bytes = wire.mtu();
    let ack_bytes = wire.ack;
    // One link's share of the base RTT: the data packet out and the ACK back.
    let link_rtt = |p: &PortState| p.tx_time(data_bytes) + p.tx_time(ack_bytes) + p.delay + p.delay;
    let host_port = |h: usize| {
        ports
            .iter()
            .find(|p| p.node == host_nodes[h])
            .expect("a host has a port")
    };
    let mut timing = vec![PairTiming::default(); (tors * tors) as usize];
    let index_of_node: Vec<Option<usize>> = {
        let mut v = vec![None; nodes];
        for (i, s) in switches.iter().enumerate() {
            v[s.node as usize] = Some(i);
        }
        v
    };
    let mut fabric = HostFabric::new(nodes as u32, tor_of, tors, |a, b| {
        let dst_host = tor_host[b as usize];
        let dst_switch = tor_switch[b as usize];
        // The host links at both ends (a host's link has the same rate and delay both ways).
        let (src_link, dst_link) = (host_port(tor_host[a as usize]), host_port(dst_host));
        let ends_rtt = link_rtt(src_link) + link_rtt(dst_link);
        let ends_rate = src_link.rate().min(dst_link.rate());
        let best = &mut timing[(a * tors + b) as usize];
        *best = PairTiming {
            base_rtt: Time::MAX,
            bottleneck: ends_rate,
        };
        if a == b {
            best.base_rtt = ends_rtt;
            return vec![0];
        }
        let mut tags = Vec::new();
        // Depth-first over (switch, hop, tag so far, base RTT so far, slowest link so far).
        let mut stack = vec![(tor_switch[a as usize], 0u32, 0u32, ends_rtt, ends_rate)];
        while let Some((s, hop, tag, rtt, slowest)) = stack.pop() {
            if s == dst_switch {
                tags.push(tag);
                if rtt < best.base_rtt {
                    *best = PairTiming {
                        base_rtt: rtt,
                        bottleneck: slowest,
                    };
                }
                continue;
            }
            let sw = &switches[s];
            let (offset, count) = sw.routing.route(groups.key(host_nodes[dst_host]));
            let hops = &sw.routing.next_hops[offset as usize..offset as usize + count as usize];
            // Pushed in reverse so that paths come out in port order.
            for (c, &local) in hops.iter().enumerate().rev() {
                let port = &ports[(sw.ports.start + local as u32) as usize];
                let peer = port.peer_node;
                let Some(next) = index_of_node[peer as usize] else {
                    continue; // a host: not on a switch-to-switch path
                };
                let tag = if count > 1 && hop < 4 {
                    tag | (c as u32 + 1) << (8 * hop)
                } else {
                    tag
                };
                let slowest: Rate = slowest.min(port.rate());
                stack.push((next, hop + 1, tag, rtt + link_rtt(port), slowest));
            }
        }
        tags
    });
    fabric.set_timing(|a, b| timing[(a * tors + b) as usize]);
    fabric
}

impl Simulation {
    /// Calls a hook of the host-side scheme for host `h` and carries out its actions.
    fn with_host_lb(&mut self, h: u32, hook: impl FnOnce(&mut dyn HostScheme, &mut HostCtx)) {
        let Some(side) = self.host_side.as_deref_mut() else {
            return;
        };
        let mut ctx = HostCtx {
            now: self.now,
            host: self.hosts[h as usize].node,
            fabric: &side.fabric,
            rng: &mut side.rngs[h as usize],
            actions: &mut side.actions,
        };
        hook(&mut *side.lb, &mut ctx);
        if !side.actions.is_empty() {
            self.apply_host_actions(h);
        }
    }

    fn apply_host_actions(&mut self, h: u32) {
        let side = self.host_side.as_deref_mut().expect("host-side scheme");
        let mut actions = std::mem::take(&mut side.actions);
        for action in actions.drain(..) {
            match action {
                HostAction::SetTimer { host, at, token } => {
                    let target = self.host_index[host as usize];
                    self.events.schedule(at, Event::HostLbTimer(target, token));
                }
                HostAction::SendProbe {
                    to_host,
                    path_tag,
                    priority,
                    meta,
                } => self.send_probe(h, to_host, path_tag, priority, meta),
                HostAction::Release { flow } => {
                    self.mark_sending(h, flow);
                    self.host_kick(h);
                }
            }
        }
        self.host_side
            .as_deref_mut()
            .expect("host-side scheme")
            .actions = actions;
    }

    /// Gives the host-side scheme its `on_start` call for every host.
    pub(super) fn host_lb_start(&mut self) {
        if self.host_side.is_some() {
            for h in 0..self.hosts.len() as u32 {
                self.with_host_lb(h, |lb, ctx| lb.on_start(ctx));
            }
        }
    }

    pub(super) fn host_lb_timer(&mut self, h: u32, token: u64) {
        self.with_host_lb(h, |lb, ctx| lb.on_timer(ctx, token));
    }

    pub(super) fn host_lb_flow_start(&mut self, h: u32, flow: FlowInfo) {
        self.with_host_lb(h, |lb, ctx| lb.on_flow_start(ctx, &flow));
    }

    pub(super) fn host_lb_flow_end(&mut self, h: u32, flow: FlowInfo) {
        self.with_host_lb(h, |lb, ctx| lb.on_flow_end(ctx, &flow));
    }

    pub(super) fn host_lb_timeout(&mut self, h: u32, flow: FlowInfo) {
        self.with_host_lb(h, |lb, ctx| lb.on_timeout(ctx, &flow));
    }

    pub(super) fn host_lb_ack(&mut self, h: u32, flow: FlowInfo, echo: AckEcho) {
        self.with_host_lb(h, |lb, ctx| lb.on_ack(ctx, &flow, &echo));
    }

    /// The path tag host `h`'s scheme gives the data packet of `flow` carrying `payload` bytes
    /// from byte `seq` on.
    #[inline]
    pub(super) fn host_lb_path_tag(
        &mut self,
        h: u32,
        flow: FlowInfo,
        seq: u64,
        payload: u32,
    ) -> u32 {
        let mut tag = 0;
        self.with_host_lb(h, |lb, ctx| tag = lb.path_tag(ctx, &flow, seq, payload));
        tag
    }

    /// Host `h`'s scheme lets flow `f` send its next data packet now (always, unless the
    /// scheme clocks sending, see [`HostScheme::may_send`], and the flow's path is not pinned).
    #[inline]
    pub(super) fn host_lb_may_send(&mut self, h: u32, f: u32) -> bool {
        if !self.host_side.as_ref().is_some_and(|s| s.clocks_sending) {
            return true;
        }
        let flow = &self.flows[f as usize];
        if flow.spec.path_tag != 0 {
            return true;
        }
        let flow = flow.info();
        let mut may = true;
        self.with_host_lb(h, |lb, ctx| may = lb.may_send(ctx, &flow));
        may
    }

    /// Sends a probe from host `h` through its NIC's data-priority queue (at once if the
    /// NIC takes it so, `host_enqueue`).
    fn send_probe(&mut self, h: u32, to_host: u32, path_tag: u32, priority: u8, meta: u32) {
        let mut pkt = Packet::new(PacketKind::Probe);
        pkt.src = self.hosts[h as usize].node;
        pkt.dst = to_host;
        pkt.flow = u32::MAX;
        pkt.priority = priority;
        pkt.lb.path_tag = path_tag;
        pkt.lb.meta = meta;
        // Entropy for the switches' hash at hops the tag leaves open.
        pkt.sport = meta as u16;
        pkt.dport = (meta >> 16) as u16;
        pkt.wire_bytes = self.cfg.nic.control_bytes;
        pkt.sent_at = self.now;
        self.host_enqueue(h, priority, pkt);
    }

    /// A probe reached host `h`: answer it at once, like an ACK.
    pub(super) fn answer_probe(&mut self, h: u32, probe: &Packet) {
        let mut reply = probe.reply(PacketKind::ProbeReply, self.cfg.nic.control_bytes);
        reply.lb = probe.lb;
        reply.set_ce(probe.ce());
        // The time the probe arrived, for its one-way delay.
        reply.seq = self.now.ps();
        self.host_enqueue(h, CONTROL_PRIO, reply);
    }

    /// A probe reply reached host `h`, the probe's sender.
    pub(super) fn probe_replied(&mut self, h: u32, reply: &Packet) {
        let echo = ProbeEcho {
            to_host: reply.src,
            path_tag: reply.lb.path_tag,
            ce: reply.ce(),
            rtt: self.now.saturating_sub(reply.sent_at),
            one_way: Time(reply.seq).saturating_sub(reply.sent_at),
            meta: reply.lb.meta,
        };
        self.with_host_lb(h, |lb, ctx| lb.on_probe_reply(ctx, &echo));
    }
}
