//! The links: a port's serializer, the packets propagating on the wire, and PFC frames
//! pausing and resuming an egress.

use super::{Event, Simulation};
use crate::packet::{Packet, PacketId, PacketKind, NO_PACKET};
use crate::port::NodeRef;
use crate::units::Time;

impl Simulation {
    /// Puts `pid` on port `p`'s serializer (the port must be idle). The packet joins the
    /// link's in-flight FIFO at once, since its arrival time at the peer is already known; the
    /// port asks to be woken when the serializer frees up only if more is waiting then.
    #[inline]
    pub(super) fn start_tx(&mut self, p: u32, pid: PacketId) {
        let port = &mut self.ports[p as usize];
        debug_assert!(port.busy_until <= self.now);
        let wire = self.arena.get(pid).wire_bytes as u64;
        port.tx_packets += 1;
        port.tx_bytes += wire;
        let done = self.now + port.tx_time(wire);
        port.busy_until = done;
        let arrival = done + port.delay;
        let far = &mut self.far_arrivals;
        if port.wire.push_back(&mut self.arena, far, pid, arrival) {
            self.events
                .schedule(arrival, Event::Arrival { port: p, pid });
        }
        let more = port.total_queue_bytes > 0
            || port.pfc_waiting()
            || matches!(port.owner, NodeRef::Host(h) if !self.hosts[h as usize].is_idle());
        if more {
            port.wake_at = done;
            self.events.schedule(done, Event::TxDone(p));
        }
    }

    /// Port `p`'s serializer is free again.
    pub(super) fn tx_done(&mut self, p: u32) {
        let port = &mut self.ports[p as usize];
        if port.wake_at != self.now {
            return; // stale: the port was restarted before this wake-up ran
        }
        port.wake_at = Time::MAX;
        self.try_send(p);
    }

    pub(super) fn arrival(&mut self, p: u32, pid: PacketId) {
        let pkt = self.arena.get(pid);
        let (kind, flow, dst) = (pkt.kind, pkt.flow, pkt.dst);
        let (behind, gap) = pkt.behind_on_wire();
        let port = &mut self.ports[p as usize];
        if !port.wire.arrived(pid, behind) {
            return; // the link went down with the packet on it (a fault)
        }
        let to = port.peer;
        let peer = port.peer_ref;
        // Ask now for what the receiving node reads first, so that its miss overlaps the
        // scheduling of the next arrival: a host's queue pair, a switch's route entry.
        match peer {
            NodeRef::Host(_) => {
                if let Some(f) = self.flows.get(flow as usize) {
                    f.prefetch_for(kind);
                }
            }
            NodeRef::Switch(s) => {
                let key = self.host_groups.hint_key(dst);
                self.switches[s as usize].routing.prefetch(key)
            }
        }
        // The next packet on the wire is not asked for here: it arrives a serialization time
        // later at the earliest, and the event loop asks for it when it reaches its slot.
        if behind != NO_PACKET {
            let next = PacketId(behind);
            let at = self.far_arrivals.arrival(behind, gap, self.now);
            self.events
                .schedule(at, Event::Arrival { port: p, pid: next });
        }
        if matches!(kind, PacketKind::Pause | PacketKind::Resume) {
            self.receive_pfc(to, pid);
            return;
        }
        match peer {
            NodeRef::Switch(s) => self.switch_receive(s, to, pid),
            NodeRef::Host(h) => self.host_receive(h, pid),
        }
    }

    /// Starts the next transmission on port `p` if it is idle and has something eligible; if
    /// it is busy, makes sure it is woken when it frees up.
    pub(super) fn try_send(&mut self, p: u32) {
        let port = &mut self.ports[p as usize];
        if port.busy_until > self.now {
            if port.wake_at != port.busy_until {
                port.wake_at = port.busy_until;
                self.events.schedule(port.busy_until, Event::TxDone(p));
            }
            return;
        }
        let owner = port.owner;
        match owner {
            NodeRef::Switch(s) => self.switch_dequeue(s, p),
            NodeRef::Host(h) => self.host_send(h),
        }
    }

    /// A PFC frame arrived on port `p`: pause or resume `p`'s own egress.
    pub(super) fn receive_pfc(&mut self, p: u32, pid: PacketId) {
        let pkt = *self.arena.get(pid);
        self.arena.free(pid);
        let now = self.now;
        let port = &mut self.ports[p as usize];
        let q = pkt.priority as usize;
        let bit = 1u8 << q;
        match pkt.kind {
            PacketKind::Pause => {
                port.rec.pfc_pauses_received += 1;
                if port.paused & bit == 0 {
                    if port.paused == 0 {
                        port.paused_any_since = now;
                    }
                    port.paused |= bit;
                    port.prio[q].paused_since = now;
                    self.pause_taken(p);
                }
                if self.monitors.is_some() {
                    self.monitor_pfc(p, pkt.priority, true, false, None);
                }
            }
            PacketKind::Resume => {
                let paused_for = (port.paused & bit != 0).then(|| now - port.prio[q].paused_since);
                if port.paused & bit != 0 {
                    let pq = &mut port.prio[q];
                    pq.pause_clock += (now - pq.paused_since).ps();
                    pq.pause_clock_ns = (pq.pause_clock / 1_000) as u32;
                    port.paused &= !bit;
                    if port.paused == 0 {
                        port.rec.paused_time_ps += (now - port.paused_any_since).ps();
                    }
                }
                if self.monitors.is_some() {
                    self.monitor_pfc(p, pkt.priority, false, false, paused_for);
                }
                self.try_send(p);
            }
            _ => unreachable!("receive_pfc gets PFC frames only"),
        }
    }

    /// Queues a PFC frame for priority `prio` out of port `p`.
    pub(super) fn send_pfc(&mut self, p: u32, prio: u8, kind: PacketKind) {
        if self.faults.port_down.get(p as usize) == Some(&true) {
            return; // the link is down: nobody to tell
        }
        let mut pkt = Packet::new(kind);
        pkt.priority = prio;
        pkt.wire_bytes = self.cfg.nic.control_bytes;
        let pid = self.arena.alloc(pkt);
        let port = &mut self.ports[p as usize];
        match kind {
            PacketKind::Pause => port.rec.pfc_pauses_sent += 1,
            _ => port.rec.pfc_resumes_sent += 1,
        }
        port.queue_pfc(pid);
        if self.monitors.is_some() {
            self.monitor_pfc(p, prio, kind == PacketKind::Pause, true, None);
        }
        self.try_send(p);
    }
}
