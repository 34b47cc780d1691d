//! Switch support for schemes that see data packets at ingress, hold them in reorder queues,
//! and send scheme messages across the fabric (ConWeave, RLB). None of this runs for a scheme
//! that does not ask for it (`Capabilities::ingress`, `Capabilities::reorder_queues_per_port`).
//!
//! Reorder queues are physical: a held packet was admitted to the switch's shared buffer like
//! any packet (charged to its ingress (port, priority), so it counts towards PFC thresholds
//! and can pause the upstream link) and stays charged until it leaves the egress queue it is
//! released into, as a packet of that egress. While held it is in no egress queue: it is not
//! counted in the egress queue length (ECN, `peak_queue_bytes`) and not serialized. Released
//! packets join the tail of their egress queue in the order they were held.
//!
//! Routed scheme messages are `LbRouted` packets whose `dst` is a host: every switch forwards
//! them like an ACK (ECMP hash of the 5-tuple, strict-priority control queue, not charged to
//! the buffer, unless the message has a data priority) until the switch whose next hop is that
//! host, which hands them to its scheme's `on_control`.

use super::Simulation;
use crate::lb::{flow_hash, Ingress, Layer, RoutedMessage};
use crate::metrics::{PortRecord, ReorderChange};
use crate::packet::{Packet, PacketId, PacketKind};
use crate::port::CONTROL_PRIO;
use crate::units::Time;
use std::collections::VecDeque;

/// Packets held per queue before the queue's storage grows (it never shrinks, so once the
/// largest reorder backlog has been seen nothing more is allocated).
const QUEUE_CAPACITY: usize = 16;

/// Reorder queues of the host-facing egresses of every ToR, with their occupancy records.
pub(super) struct HeldQueues {
    per_port: u32,
    /// `slot[global port]`: index of the port's first queue / 0-based port slot (`u32::MAX`:
    /// the port has none).
    slot: Vec<u32>,
    queues: Vec<VecDeque<PacketId>>,
    ports: Vec<QueueUse>,
    /// Every change of a port's count of queues in use.
    log: Vec<ReorderChange>,
}

/// Queues in use at one port over time.
#[derive(Clone, Copy, Default)]
struct QueueUse {
    in_use: u32,
    max: u32,
    /// Integral of `in_use` over time (queue-picoseconds) up to `changed`.
    integral: u128,
    changed: Time,
}

impl HeldQueues {
    /// Queues for every switch port that leads to a host, `per_port` each.
    pub(super) fn new(per_port: u32, port_leads_to_host: impl Iterator<Item = bool>) -> Self {
        let mut n = 0u32;
        let slot: Vec<u32> = port_leads_to_host
            .map(|h| {
                if h {
                    n += 1;
                    n - 1
                } else {
                    u32::MAX
                }
            })
            .collect();
        HeldQueues {
            per_port,
            slot,
            queues: (0..n * per_port)
                .map(|_| VecDeque::with_capacity(QUEUE_CAPACITY))
                .collect(),
            ports: vec![QueueUse::default(); n as usize],
            log: Vec::new(),
        }
    }

    /// Index of queue `queue` of global port `port`, and the port's slot.
    fn index(&self, port: u32, queue: u16) -> (usize, usize) {
        let slot = self.slot[port as usize];
        assert!(
            slot != u32::MAX && (queue as u32) < self.per_port,
            "reorder queue {queue} of port {port} does not exist"
        );
        (
            (slot * self.per_port + queue as u32) as usize,
            slot as usize,
        )
    }

    fn count(&mut self, port: u32, slot: usize, now: Time, delta: i32) {
        let u = &mut self.ports[slot];
        u.integral += u.in_use as u128 * (now - u.changed).ps() as u128;
        u.changed = now;
        u.in_use = (u.in_use as i32 + delta) as u32;
        u.max = u.max.max(u.in_use);
        self.log.push(ReorderChange {
            time_ps: now.ps(),
            port_id: port,
            in_use: u.in_use,
        });
    }

    /// Packets held now, over all queues.
    pub(super) fn packets_held(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// Fills the reorder columns of the port records and returns the change log.
    pub(super) fn finish(
        self,
        records: &mut [PortRecord],
        now: Time,
        from: Time,
    ) -> Vec<ReorderChange> {
        let span = now.saturating_sub(from).ps();
        for (p, &slot) in self.slot.iter().enumerate() {
            if slot == u32::MAX {
                continue;
            }
            let u = &self.ports[slot as usize];
            let integral = u.integral + u.in_use as u128 * (now - u.changed).ps() as u128;
            records[p].reorder_queues_max = u.max;
            records[p].reorder_queues_mean = if span > 0 {
                integral as f64 / span as f64
            } else {
                0.0
            };
        }
        self.log
    }
}

impl Simulation {
    /// Shows data packet `pid`, arrived at switch `s`, to the scheme's `on_ingress`; returns
    /// the reorder queue to hold it in, if the scheme holds it.
    pub(super) fn lb_ingress(&mut self, s: u32, pid: PacketId) -> Option<u16> {
        let key = self.host_groups.key(self.arena.get(pid).dst);
        let sw = &mut self.switches[s as usize];
        let (offset, count) = sw.routing.route(key);
        let range = offset as usize..offset as usize + count as usize;
        let pkt = self.arena.get_mut(pid);
        let verdict = sw.with_scheme(
            self.now,
            &self.ports,
            &mut self.lb_actions,
            |lb, ctx, hops| lb.on_ingress(ctx, pkt, &hops[range]),
        );
        match verdict {
            Ingress::Forward => None,
            Ingress::Hold { queue } => Some(queue),
        }
    }

    /// Puts admitted packet `pid` into reorder queue `queue` of global egress `out`.
    pub(super) fn hold_packet(&mut self, out: u32, queue: u16, pid: PacketId) {
        let now = self.now;
        let held = self
            .held
            .as_deref_mut()
            .expect("the scheme declared reorder queues");
        let (q, slot) = held.index(out, queue);
        if held.queues[q].is_empty() {
            held.count(out, slot, now, 1);
        }
        held.queues[q].push_back(pid);
    }

    /// Moves the packets of reorder queue `queue` of global egress `out` into the egress.
    pub(super) fn release_held(&mut self, out: u32, queue: u16) {
        let now = self.now;
        let Some(held) = self.held.as_deref_mut() else {
            return;
        };
        let (q, slot) = held.index(out, queue);
        if held.queues[q].is_empty() {
            return;
        }
        held.count(out, slot, now, -1);
        while let Some(pid) = held.queues[q].pop_front() {
            let prio = self.arena.get(pid).priority;
            self.ports[out as usize].enqueue(prio, pid, &mut self.arena, now);
        }
        self.try_send(out);
    }

    /// Whether routed scheme message `pid` has reached the ToR of its destination host.
    pub(super) fn routed_control_here(&self, s: u32, pid: PacketId) -> bool {
        let sw = &self.switches[s as usize];
        let key = self.host_groups.key(self.arena.get(pid).dst);
        let (offset, count) = sw.routing.route(key);
        count == 1 && {
            let out = sw.ports.start + sw.routing.next_hops[offset as usize] as u32;
            self.host_index[self.ports[out as usize].peer_node as usize] != u32::MAX
        }
    }

    /// Sends routed scheme message `message` of switch `s`'s scheme of `layer` (see
    /// [`RoutedMessage`]). Nothing is sent without a route to its host (a failed link not yet
    /// routed around) or on a link that is down.
    pub(super) fn send_routed(&mut self, s: u32, message: &RoutedMessage, layer: Layer) {
        let mut pkt = Packet::new(PacketKind::LbRouted);
        pkt.src = message.src;
        pkt.dst = message.to_host;
        pkt.sport = message.sport;
        pkt.dport = message.dport;
        pkt.lb = message.header;
        pkt.set_layer(layer);
        pkt.priority = message.priority;
        pkt.wire_bytes = self.cfg.nic.control_bytes;
        let Some(hashed) = self.routed_egress(s, &pkt) else {
            return;
        };
        let local = message.via.unwrap_or(hashed);
        let sw = &mut self.switches[s as usize];
        let out = sw.ports.start + local as u32;
        if self.faults.port_down.get(out as usize) == Some(&true) {
            return;
        }
        if message.priority != CONTROL_PRIO {
            // Charged like a data packet of that priority, to the ingress of its egress.
            pkt.set_ingress_port(local);
            let wire = pkt.wire_bytes as u64;
            match sw
                .mmu
                .arrive(local as usize, local as usize, message.priority, wire)
            {
                crate::mmu::Admission::Drop => return,
                crate::mmu::Admission::Accept { pause } => {
                    if pause {
                        self.send_pfc(out, message.priority, PacketKind::Pause);
                    }
                }
            }
        }
        let pid = self.arena.alloc(pkt);
        let now = self.now;
        let port = &mut self.ports[out as usize];
        port.rec.lb_messages_sent += 1;
        port.enqueue(message.priority, pid, &mut self.arena, now);
        self.try_send(out);
    }

    /// The local egress of switch `s` that routed message `pkt` takes by ECMP hash (`None`:
    /// no route to its host, e.g. a failed link not yet routed around).
    fn routed_egress(&self, s: u32, pkt: &Packet) -> Option<u16> {
        let sw = &self.switches[s as usize];
        let (offset, count) = sw.routing.route(self.host_groups.key(pkt.dst));
        if count == 0 {
            return None;
        }
        let pick = (flow_hash(pkt, sw.control_salt) % count as u64) as usize;
        Some(sw.routing.next_hops[offset as usize + pick])
    }
}
