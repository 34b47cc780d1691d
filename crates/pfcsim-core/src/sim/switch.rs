//! Switches: forwarding, the shared buffer and PFC, ECN marking at dequeue, and the egress
//! scheduler.
//!
//! Modelled: store-and-forward output-queued switch with 8 priority queues per egress port,
//! a shared buffer and PFC in the spec's PFC model (`switch.pfc.model`, see `mmu/`), PFC
//! frames sent ahead of everything else on the link, a strict-priority control queue
//! (configurable), round-robin among data priorities skipping paused ones, RED/ECN marking at
//! dequeue on the egress queue length. Not modelled: switching latency inside the switch,
//! cut-through forwarding, multicast, link-level errors. With PFC off, a drop-tail limit per
//! egress queue (`switch.egress_limit`, in packets or bytes) can drop data packets on arrival
//! besides the shared buffer's admission.

use super::routes::{HostGroups, RoutingTable};
use super::{FabricConfig, SetupError, Simulation};
use crate::cc::IntHop;
use crate::engine::{mix64, rng_stream, Rng, StreamKind};
use crate::lb::{
    flow_hash, pick_index, pinned_choice, Capabilities, Layer, LbAction, LbCtx, LbFabric, PortDir,
    SwitchScheme, NO_TOR,
};
use crate::mmu::{Admission, Mmu, PfcConfig, Xon};
use crate::packet::{Packet, PacketId, PacketKind};
use crate::port::{PortState, CONTROL_PRIO, N_PRIO};
use crate::units::{Bytes, Rate, Time};
use rand::Rng as _;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// Switch parameters (the `[switch]` table of a spec).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct SwitchConfig {
    /// Shared buffer per switch (ConWeave R1: 9 MB).
    pub buffer: Bytes,
    /// ACK, NACK and other control packets ride in a strict-priority queue that is not
    /// accounted in the buffer and never ECN-marked (ConWeave: true). With `false` they share
    /// the data priority's queue, accounting and pauses (HPCC: false).
    pub control_strict_priority: bool,
    pub pfc: PfcConfig,
    pub ecn: EcnConfig,
    /// Give every switch a loopback link of this rate and delay, for schemes that recirculate
    /// packets (unset: none).
    pub loopback: Option<LoopbackConfig>,
    /// Drop-tail limit of every egress queue (per port and data priority) of a lossy fabric,
    /// `{ packets = N }` or `{ bytes = "..." }`: a data packet that would take its egress
    /// queue past it is dropped on arrival (counted in the port's `egress_drops`). Unset: no
    /// limit, only the shared buffer's admission drops. Needs `pfc.enabled = false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_limit: Option<EgressLimit>,
}

crate::tagged::table!(SwitchConfig);

/// A drop-tail limit of an egress queue (`switch.egress_limit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum EgressLimit {
    /// At most this many packets queued (the queue of ns-2/ns-3 drop-tail simulations).
    Packets(u32),
    /// At most this many bytes queued (wire bytes).
    Bytes(Bytes),
}

impl Default for SwitchConfig {
    fn default() -> Self {
        SwitchConfig {
            buffer: Bytes(9_000_000),
            control_strict_priority: true,
            pfc: PfcConfig::default(),
            ecn: EcnConfig::default(),
            loopback: None,
            egress_limit: None,
        }
    }
}

/// A switch's loopback link (`[switch.loopback]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct LoopbackConfig {
    pub rate: Rate,
    pub delay: Time,
}

crate::tagged::table!(LoopbackConfig);

/// RED/ECN marking parameters (`[switch.ecn]`), applied per egress queue at dequeue.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct EcnConfig {
    pub enabled: bool,
    /// Below Kmin nothing is marked (ConWeave: 100 KB for every link speed).
    pub kmin: Bytes,
    /// Above Kmax everything is marked (ConWeave: 400 KB).
    pub kmax: Bytes,
    /// Marking probability at Kmax (ConWeave: 0.2).
    pub pmax: f64,
    /// Other values for links of a given rate.
    pub per_rate: Vec<EcnRateOverride>,
}

crate::tagged::table!(EcnConfig);

impl Default for EcnConfig {
    fn default() -> Self {
        EcnConfig {
            enabled: true,
            kmin: Bytes(100_000),
            kmax: Bytes(400_000),
            pmax: 0.2,
            per_rate: Vec::new(),
        }
    }
}

/// RED parameters for links of one rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct EcnRateOverride {
    pub rate: Rate,
    pub kmin: Bytes,
    pub kmax: Bytes,
    pub pmax: f64,
}

crate::tagged::table!(EcnRateOverride);

impl EcnConfig {
    /// (kmin, kmax, pmax) for an egress of `rate`; kmin = u64::MAX when marking is off.
    pub fn red_for(&self, rate: Rate) -> (u64, u64, f64) {
        if !self.enabled {
            return (u64::MAX, u64::MAX, 0.0);
        }
        match self.per_rate.iter().find(|o| o.rate == rate) {
            Some(o) => (o.kmin.0, o.kmax.0, o.pmax),
            None => (self.kmin.0, self.kmax.0, self.pmax),
        }
    }
}

/// One switch.
pub(super) struct Switch {
    pub(super) node: u32,
    /// Global ids of its ports.
    pub(super) ports: Range<u32>,
    /// Next hops towards every host.
    pub(super) routing: RoutingTable,
    pub(super) mmu: Mmu,
    pub(super) lb: Box<dyn SwitchScheme>,
    /// What the scheme asks of the switch: the optional hooks and tests on the data path.
    lb_caps: Capabilities,
    /// The layer the scheme's own hooks run as (a wrapper's, or the base scheme's).
    lb_layer: Layer,
    /// Salt of the ECMP hash used for control packets.
    pub(super) control_salt: u64,
    /// Local index of the loopback egress (its other end is the next port), if any.
    loopback: Option<u16>,
    /// Random stream of the load balancer.
    rng: Rng,
    /// Random stream of ECN marking.
    ecn_rng: Rng,
    /// The switch has drop rules from faults (`sim/faults.rs`): check arriving packets.
    pub(super) faulty: bool,
    /// Drop-tail limit of its egress queues (`switch.egress_limit`).
    egress_limit: Option<EgressLimit>,
}

impl Switch {
    /// `to_host[i]`: hop distance from every node to the host of index `i`; `groups`: the
    /// hosts' keys to the routing tables.
    pub(super) fn new(
        node: u32,
        ports: Range<u32>,
        adj: &[Vec<(u32, usize)>],
        (to_host, groups): (&[Vec<u32>], &HostGroups),
        all_ports: &[PortState],
        cfg: &FabricConfig,
        seed: u64,
    ) -> Result<Switch, SetupError> {
        let neighbours = &adj[node as usize];
        let routing = RoutingTable::shortest_paths(node, neighbours, to_host, groups, |_| false);
        let my_ports = &all_ports[ports.start as usize..ports.end as usize];
        let mtu_wire = cfg.transports().max_data_wire_bytes();
        let links: Vec<(Rate, Time)> = my_ports.iter().map(|p| (p.rate(), p.delay)).collect();
        let mmu = Mmu::build(&cfg.switch.pfc, cfg.switch.buffer, &links, mtu_wire);
        let set_aside = mmu.set_aside();
        if cfg.switch.buffer.0 <= set_aside {
            return Err(SetupError::BufferTooSmall {
                node,
                buffer: cfg.switch.buffer.0,
                set_aside,
            });
        }
        let loopback = neighbours
            .iter()
            .position(|&(peer, _)| peer == node)
            .map(|i| i as u16);
        let lb_caps = cfg.lb.capabilities();
        if loopback.is_none() && lb_caps.loopback {
            return Err(SetupError::NoLoopback {
                node,
                scheme: cfg.lb.name(),
            });
        }
        let lb = cfg
            .lb
            .instantiate(&lb_fabric(node, &ports, adj, to_host, all_ports, cfg));
        Ok(Switch {
            node,
            ports,
            routing,
            mmu,
            lb,
            lb_caps,
            lb_layer: if lb_caps.wrapper {
                Layer::Wrapper
            } else {
                Layer::Base
            },
            control_salt: mix64(node as u64 ^ 0x5eed),
            loopback,
            rng: switch_rng(seed, node),
            ecn_rng: ecn_rng(seed, node),
            faulty: false,
            egress_limit: cfg.switch.egress_limit,
        })
    }
}

/// The RNG stream of a switch's load balancer.
fn switch_rng(seed: u64, node: u32) -> Rng {
    rng_stream(seed, StreamKind::Switch, node as u64)
}

/// The RNG stream of a switch's ECN marking, separate from the load balancer's so that two
/// schemes compared on the same seed see the same marking draws (common random numbers).
fn ecn_rng(seed: u64, node: u32) -> Rng {
    rng_stream(seed, StreamKind::Ecn, node as u64)
}

/// What the scheme of switch `node` is told about the fabric: always the node count; the
/// ToR of every host and the direction of each of its ports only if the scheme asks for them.
fn lb_fabric(
    node: u32,
    ports: &Range<u32>,
    adj: &[Vec<(u32, usize)>],
    to_host: &[Vec<u32>],
    all_ports: &[PortState],
    cfg: &FabricConfig,
) -> LbFabric {
    let mut f = LbFabric {
        node,
        nodes: adj.len() as u32,
        ..Default::default()
    };
    if !cfg.lb.capabilities().fabric {
        return f;
    }
    // A host's port leads to its ToR; ToRs are numbered in node order.
    let mut tor_index = vec![NO_TOR; adj.len()];
    let mut host_tor = vec![NO_TOR; adj.len()];
    for p in all_ports.iter().filter(|p| !p.rec.is_switch) {
        host_tor[p.node as usize] = p.peer_node;
        tor_index[p.peer_node as usize] = 0;
    }
    for t in tor_index.iter_mut().filter(|t| **t == 0) {
        *t = f.tors;
        f.tors += 1;
    }
    f.tor_of = host_tor
        .iter()
        .map(|&t| {
            if t == NO_TOR {
                NO_TOR
            } else {
                tor_index[t as usize]
            }
        })
        .collect();
    f.my_tor = Some(tor_index[node as usize]).filter(|&t| t != NO_TOR);
    // Tier: hop distance to the nearest host.
    let tier = |n: u32| to_host.iter().map(|d| d[n as usize]).min().unwrap_or(0);
    let mine = tier(node);
    f.port_dir = all_ports[ports.start as usize..ports.end as usize]
        .iter()
        .map(|p| {
            let peer = p.peer_node;
            if peer == node {
                PortDir::Loopback
            } else if host_tor[peer as usize] != NO_TOR {
                PortDir::Host
            } else {
                match tier(peer).cmp(&mine) {
                    std::cmp::Ordering::Greater => PortDir::Up,
                    std::cmp::Ordering::Less => PortDir::Down,
                    std::cmp::Ordering::Equal => PortDir::Flat,
                }
            }
        })
        .collect();
    f.port_rate_bps = all_ports[ports.start as usize..ports.end as usize]
        .iter()
        .map(|p| p.rate().bps())
        .collect();
    f.port_delay_ps = all_ports[ports.start as usize..ports.end as usize]
        .iter()
        .map(|p| p.delay.ps())
        .collect();
    // Switch hops to every ToR (breadth-first over the links).
    let mut dist = vec![u32::MAX; adj.len()];
    let mut frontier = std::collections::VecDeque::from([node]);
    dist[node as usize] = 0;
    while let Some(n) = frontier.pop_front() {
        for &(peer, _) in &adj[n as usize] {
            if dist[peer as usize] == u32::MAX {
                dist[peer as usize] = dist[n as usize] + 1;
                frontier.push_back(peer);
            }
        }
    }
    f.tor_hops = vec![u32::MAX; f.tors as usize];
    for (n, &t) in tor_index.iter().enumerate() {
        if t != NO_TOR {
            f.tor_hops[t as usize] = dist[n];
        }
    }
    f
}

impl Simulation {
    /// The scheme instance of switch `node`, if it is a `T` (tests and diagnostics: e.g.
    /// `scheme_at::<Rlb>(6)`).
    pub fn scheme_at<T: SwitchScheme>(&self, node: u32) -> Option<&T> {
        self.switches.iter().find(|s| s.node == node)?.scheme()
    }
}

impl Switch {
    /// The switch's scheme instance, if it is a `T`.
    pub(super) fn scheme<T: SwitchScheme>(&self) -> Option<&T> {
        let scheme: &dyn std::any::Any = &*self.lb;
        scheme.downcast_ref()
    }

    /// Calls `hook` with this switch's scheme, the context the scheme sees and acts through,
    /// and the switch's next-hop table (for slicing the candidates of a decision). Always
    /// inlined: on the data path (`choose`, `on_dequeue`) an out-of-line call that builds the
    /// context costs more than the hook of a simple scheme.
    #[inline(always)]
    pub(super) fn with_scheme<R>(
        &mut self,
        now: Time,
        all_ports: &[PortState],
        actions: &mut Vec<LbAction>,
        hook: impl FnOnce(&mut dyn SwitchScheme, &mut LbCtx, &[u16]) -> R,
    ) -> R {
        let Switch {
            node,
            ports,
            routing,
            lb,
            lb_layer,
            loopback,
            rng,
            mmu,
            ..
        } = self;
        let mut ctx = LbCtx {
            now,
            node: *node,
            ports: &all_ports[ports.start as usize..ports.end as usize],
            loopback: *loopback,
            mmu: Some(mmu),
            rng,
            layer: *lb_layer,
            arrived: Time::ZERO,
            actions,
        };
        hook(&mut **lb, &mut ctx, &routing.next_hops)
    }
}

impl Simulation {
    /// A packet arrived on global port `p` of switch `s`.
    pub(super) fn switch_receive(&mut self, s: u32, p: u32, pid: PacketId) {
        let sw = &self.switches[s as usize];
        let in_local = (p - sw.ports.start) as u16;
        if sw.faulty && self.fault_filter(s, in_local, pid) {
            return;
        }
        let kind = self.arena.get(pid).kind;
        if kind == PacketKind::LbControl
            || kind == PacketKind::LbRouted && self.routed_control_here(s, pid)
        {
            let sw = &mut self.switches[s as usize];
            let (header, layer) = (self.arena.get(pid).lb, self.arena.get(pid).layer());
            self.arena.free(pid);
            sw.with_scheme(self.now, &self.ports, &mut self.lb_actions, |lb, ctx, _| {
                crate::lb::on_control(lb, ctx, layer, in_local, &header)
            });
            self.apply_lb_actions(s);
            return;
        }
        self.switch_forward(s, in_local, pid);
    }

    /// Routes, admits, charges and enqueues a data or control packet.
    fn switch_forward(&mut self, s: u32, in_local: u16, pid: PacketId) {
        let strict = self.cfg.switch.control_strict_priority;
        self.arena.get_mut(pid).set_ingress_port(in_local);
        let caps = &self.switches[s as usize].lb_caps;
        let (sojourn, scheme_word, ingress) = (caps.sojourn, caps.scheme_word, caps.ingress);
        if sojourn {
            self.arena.set_arrival(pid, self.now);
        }
        if scheme_word {
            let (pkt, word) = self.arena.with_word_mut(pid);
            if *word != 0 {
                let sw = &mut self.switches[s as usize];
                sw.with_scheme(self.now, &self.ports, &mut self.lb_actions, |lb, ctx, _| {
                    lb.on_arrival(ctx, pkt, word)
                });
            }
        }
        let hold = if ingress && self.arena.get(pid).kind == PacketKind::Data {
            self.lb_ingress(s, pid)
        } else {
            None
        };
        let sw = &mut self.switches[s as usize];
        // Read in place (a copy of the 64-byte record cost more than the fields used).
        let pkt = self.arena.get(pid);
        let (offset, count) = sw.routing.route(self.host_groups.key(pkt.dst));
        let range = offset as usize..offset as usize + count as usize;
        let candidates = &sw.routing.next_hops[range.clone()];
        let out_local = if count == 1 {
            candidates[0]
        } else if count == 0 {
            // Only after a link failure, before routing has reconverged.
            let p = sw.ports.start + in_local as u32;
            self.fault_drop(pid, super::faults::DropCause::NoRoute, p);
            return;
        } else if let Some(c) = (pkt.kind.follows_path_tag()
            && !(pkt.kind == PacketKind::Data && sw.lb_caps.pinned))
            .then(|| pinned_choice(pkt, candidates))
            .flatten()
        {
            c
        } else if pkt.kind == PacketKind::Data {
            sw.with_scheme(
                self.now,
                &self.ports,
                &mut self.lb_actions,
                |lb, ctx, hops| lb.choose(ctx, pkt, &hops[range]),
            )
        } else {
            candidates[pick_index(flow_hash(pkt, sw.control_salt), candidates.len())]
        };
        let (kind, priority, payload) = (pkt.kind, pkt.priority, pkt.payload as u64);
        let wire = pkt.wire_bytes as u64;
        let out = sw.ports.start + out_local as u32;
        // The egress is read below, after the buffer's admission: asked for now, its lines
        // come in while the admission runs (in a large fabric they have left the cache).
        self.ports[out as usize].prefetch_hop();
        // Whatever the scheme asked for happens even if the buffer then drops the packet.
        if !self.lb_actions.is_empty() {
            self.apply_lb_actions(s);
        }
        let sw = &mut self.switches[s as usize];
        // A scheme message with a data priority (an RLB path probe) queues as that data does.
        let prio = if kind.is_control()
            && strict
            && !(kind == PacketKind::LbRouted && priority != CONTROL_PRIO)
        {
            CONTROL_PRIO
        } else {
            priority
        };
        let mut pause = false;
        if prio != CONTROL_PRIO {
            if let Some(limit) = sw.egress_limit {
                let queue = &self.ports[out as usize].prio[prio as usize];
                let full = match limit {
                    EgressLimit::Packets(n) => queue.len >= n,
                    EgressLimit::Bytes(b) => queue.bytes + wire > b.0,
                };
                if full {
                    self.ports[out as usize].rec.egress_drops += 1;
                    self.drops_egress += 1;
                    self.payload_dropped += payload;
                    self.arena.free(pid);
                    return;
                }
            }
            match sw
                .mmu
                .arrive(in_local as usize, out_local as usize, prio, wire)
            {
                Admission::Drop => {
                    self.ports[out as usize].rec.drops += 1;
                    self.drops += 1;
                    self.payload_dropped += payload;
                    self.arena.free(pid);
                    return;
                }
                // The loopback is inside the switch: its far end never pauses it.
                Admission::Accept { pause: p } => {
                    pause = p && sw.loopback.map(|l| l + 1) != Some(in_local)
                }
            }
        }
        let in_port = sw.ports.start + in_local as u32;
        let now = self.now;
        if let Some(queue) = hold {
            self.hold_packet(out, queue, pid);
            if pause {
                self.send_pfc(in_port, prio, PacketKind::Pause);
            }
            return;
        }
        let port = &mut self.ports[out as usize];
        if !pause && port.takes_at_once(prio, now) {
            // The egress is idle with nothing queued: the packet would be queued and taken
            // out again at once (`try_send`). Its queue's bookkeeping is done without the
            // round trip through the queue, with the same results (most packets of a fabric
            // at moderate load find their egress idle).
            port.pass_through(self.arena.get(pid), now);
            if prio != CONTROL_PRIO {
                // As `switch_dequeue` would have chosen it, the only queue not empty.
                port.rr_next = next_round_robin(prio);
            }
            return self.switch_depart(s, out, pid, prio, 0);
        }
        port.enqueue(prio, pid, &mut self.arena, now);
        if pause {
            self.send_pfc(in_port, prio, PacketKind::Pause);
        }
        self.try_send(out);
    }

    /// Port `p` of switch `s` is idle: send the next PFC frame, control packet, or data packet
    /// (round-robin over unpaused data priorities).
    pub(super) fn switch_dequeue(&mut self, s: u32, p: u32) {
        let now = self.now;
        let port = &mut self.ports[p as usize];
        if let Some(pid) = port.next_pfc() {
            self.start_tx(p, pid);
            return;
        }
        let prio = if port.nonempty & (1 << CONTROL_PRIO) != 0 {
            CONTROL_PRIO
        } else {
            // Round-robin over the non-empty, unpaused data priorities, from `rr_next` on.
            let eligible = port.nonempty & !port.paused & !(1 << CONTROL_PRIO);
            if eligible == 0 {
                return;
            }
            let from_next = eligible & (0xffu8 << port.rr_next);
            let q = if from_next != 0 {
                from_next.trailing_zeros()
            } else {
                eligible.trailing_zeros()
            } as u8;
            port.rr_next = next_round_robin(q);
            q
        };
        let pid = port.dequeue(prio, &mut self.arena, now);
        let queue_after = port.queue_bytes(prio);
        self.switch_depart(s, p, pid, prio, queue_after);
    }

    /// Packet `pid` has left the queue of priority `prio` of port `p` of switch `s`, which
    /// holds `queue_after` bytes now: release its buffer, mark it, let the scheme see it,
    /// and put it on the wire.
    #[inline(always)]
    fn switch_depart(&mut self, s: u32, p: u32, pid: PacketId, prio: u8, queue_after: u64) {
        let now = self.now;
        // Above `kmin` only are the rest of the RED parameters read (on the port's third line).
        let kmin = self.ports[p as usize].ecn_kmin;
        let sw = &mut self.switches[s as usize];
        let out_local = (p - sw.ports.start) as u16;
        let mut scratch = 0;
        // When the packet arrived here, for schemes that read sojourn times.
        let arrived = if sw.lb_caps.sojourn {
            self.arena.arrival(pid)
        } else {
            Time::ZERO
        };
        let (pkt, word) = if sw.lb_caps.scheme_word {
            self.arena.with_word_mut(pid)
        } else {
            (self.arena.get_mut(pid), &mut scratch)
        };
        let mut resume = None;
        let mut frames = false;
        if prio != CONTROL_PRIO {
            let in_local = pkt.ingress_port();
            match sw.mmu.release(
                in_local as usize,
                out_local as usize,
                prio,
                pkt.wire_bytes as u64,
            ) {
                Xon::None => {}
                Xon::Resume => {
                    if sw.loopback.map(|l| l + 1) != Some(in_local) {
                        resume = Some(sw.ports.start + in_local as u32);
                    }
                }
                Xon::Frames => frames = true,
            }
        }
        if pkt.kind.follows_path_tag() {
            if queue_after > kmin {
                let port = &self.ports[p as usize];
                let (kmax, pmax) = (port.ecn_kmax, port.ecn_pmax);
                let mark = queue_after >= kmax || {
                    let prob = pmax * (queue_after - kmin) as f64 / (kmax - kmin) as f64;
                    sw.ecn_rng.gen::<f64>() < prob
                };
                if mark {
                    pkt.set_ce(true);
                    self.ports[p as usize].rec.ecn_marks += 1;
                }
            }
            if pkt.kind == PacketKind::Data && sw.lb_caps.dequeue {
                sw.with_scheme(now, &self.ports, &mut self.lb_actions, |lb, ctx, _| {
                    ctx.arrived = arrived;
                    lb.on_dequeue(ctx, out_local, pkt, word)
                });
            }
            if Some(out_local) != sw.loopback {
                pkt.hop = pkt.hop.wrapping_add(1);
            }
            pkt.path_sig = (mix64(pkt.path_sig as u64 ^ (p as u64) << 32) >> 32) as u32;
        } else if sw.lb_caps.acks && matches!(pkt.kind, PacketKind::Ack | PacketKind::Nack) {
            // Only for schemes that piggyback on ACKs (CONGA `feedback_on_acks`).
            sw.with_scheme(now, &self.ports, &mut self.lb_actions, |lb, ctx, _| {
                lb.on_dequeue(ctx, out_local, pkt, word)
            });
        }
        if self.arena.carries_int() {
            self.push_int(p, pid);
        }
        self.start_tx(p, pid);
        if !self.lb_actions.is_empty() {
            self.apply_lb_actions(s);
        }
        if let Some(in_port) = resume {
            self.send_pfc(in_port, prio, PacketKind::Resume);
        } else if frames {
            self.send_mmu_frames(s);
        }
    }

    /// HPCC's telemetry, as the reference writes it at dequeue: if `pid` is a data packet
    /// leaving port `p` now, its record of the port (before the packet's own bytes are
    /// counted, with the bytes left queued). Out of line: inlined into `switch_depart`, its
    /// code alone cost R1 (no telemetry) 0.8% more instructions.
    #[inline(never)]
    fn push_int(&mut self, p: u32, pid: PacketId) {
        if self.arena.get(pid).kind != PacketKind::Data {
            return;
        }
        let port = &self.ports[p as usize];
        self.arena.int_mut(pid).push(IntHop {
            time: self.now,
            tx_bytes: port.tx_bytes,
            queue_bytes: port.total_queue_bytes,
            rate_bps: port.rate().bps(),
        });
    }

    /// Sends the PFC frames switch `s`'s MMU decided on (a model that resumes other ingresses
    /// than the departing packet's), except towards its loopback (inside the switch: its far
    /// end is never paused).
    fn send_mmu_frames(&mut self, s: u32) {
        let sw = &mut self.switches[s as usize];
        let (first, loopback) = (sw.ports.start, sw.loopback);
        let mut frames = std::mem::take(&mut self.mmu_frames);
        sw.mmu.take_frames(&mut frames);
        for f in frames.drain(..) {
            if loopback.map(|l| l + 1) != Some(f.port) {
                let kind = if f.pause {
                    PacketKind::Pause
                } else {
                    PacketKind::Resume
                };
                self.send_pfc(first + f.port as u32, f.prio, kind);
            }
        }
        self.mmu_frames = frames;
    }

    /// Carries out what a load balancer asked for during its last hook.
    fn apply_lb_actions(&mut self, s: u32) {
        let first = self.switches[s as usize].ports.start;
        let mut actions = std::mem::take(&mut self.lb_actions);
        for action in actions.drain(..) {
            match action {
                LbAction::SendControl {
                    port,
                    header,
                    layer,
                } => self.send_control(first + port as u32, s, header, layer),
                LbAction::SetTimer { at, token, layer } => {
                    let event = super::Event::LbTimer(s, timer_code(layer, token));
                    self.events.schedule(at, event);
                }
                LbAction::SendRouted { message, layer } => self.send_routed(s, &message, layer),
                LbAction::Release { port, queue } => self.release_held(first + port as u32, queue),
            }
        }
        self.lb_actions = actions;
    }

    /// Sends a scheme message of switch `s`'s scheme of `layer` out of its port `p` (global
    /// id) to the neighbour, in the strict-priority control queue. Nothing is sent on a link
    /// that is down.
    fn send_control(&mut self, p: u32, s: u32, header: crate::packet::LbHeader, layer: Layer) {
        if self.faults.port_down.get(p as usize) == Some(&true) {
            return;
        }
        let mut pkt = Packet::new(PacketKind::LbControl);
        pkt.src = self.switches[s as usize].node;
        pkt.lb = header;
        pkt.set_layer(layer);
        pkt.wire_bytes = self.cfg.nic.control_bytes;
        let pid = self.arena.alloc(pkt);
        self.ports[p as usize].rec.lb_messages_sent += 1;
        let now = self.now;
        self.ports[p as usize].enqueue(CONTROL_PRIO, pid, &mut self.arena, now);
        self.try_send(p);
    }

    /// Gives every switch's scheme its `on_start` call, at time zero, before any event runs
    /// (HULA schedules its first probes there).
    pub(super) fn lb_start(&mut self) {
        for s in 0..self.switches.len() as u32 {
            let sw = &mut self.switches[s as usize];
            sw.with_scheme(self.now, &self.ports, &mut self.lb_actions, |lb, ctx, _| {
                lb.on_start(ctx)
            });
            if !self.lb_actions.is_empty() {
                self.apply_lb_actions(s);
            }
        }
    }

    /// A load balancer's timer fired.
    pub(super) fn lb_timer(&mut self, s: u32, code: u64) {
        let (layer, token) = timer_of(code);
        let sw = &mut self.switches[s as usize];
        sw.with_scheme(self.now, &self.ports, &mut self.lb_actions, |lb, ctx, _| {
            crate::lb::on_timer(lb, ctx, layer, token)
        });
        self.apply_lb_actions(s);
    }
}

/// The data priority the round-robin of an egress tries first after serving `prio`.
fn next_round_robin(prio: u8) -> u8 {
    if prio as usize == N_PRIO - 1 {
        1
    } else {
        prio + 1
    }
}

/// A scheme timer's token in its event: the layer of the scheme that set it in the top bit
/// (the token is below 2^63), so that the fingerprint tells a wrapper's timers from its inner
/// scheme's.
fn timer_code(layer: Layer, token: u64) -> u64 {
    token | ((layer == Layer::Wrapper) as u64) << 63
}

/// The layer and token of a timer event's code (see [`timer_code`]).
fn timer_of(code: u64) -> (Layer, u64) {
    let layer = if code >> 63 == 1 {
        Layer::Wrapper
    } else {
        Layer::Base
    };
    (layer, code & !(1 << 63))
}

#[cfg(test)]
mod tests {
    use super::{timer_code, timer_of};
    use crate::lb::Layer;

    /// A wrapper's timers carry bit 63 in their event (as RLB's tokens did before the layer
    /// existed, so fingerprints are unchanged), the base scheme's none; both come back whole.
    #[test]
    fn a_timer_code_keeps_the_layer_in_its_top_bit_and_gives_both_back() {
        assert_eq!(timer_code(Layer::Wrapper, 1), 1 << 63 | 1);
        assert_eq!(timer_code(Layer::Base, 1), 1);
        for layer in [Layer::Base, Layer::Wrapper] {
            assert_eq!(timer_of(timer_code(layer, 12_345)), (layer, 12_345));
        }
    }
}
