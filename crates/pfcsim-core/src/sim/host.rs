//! Host NICs, the same for every transport (`crate::transport`; one flow is one queue pair
//! or connection, whose transport is chosen at setup).
//!
//! Modelled on the NIC of the HPCC/ConWeave ns-3 simulators (`docs/reference/fabric.md` has the
//! details and sources):
//! * Sender: the NIC serves ACK/NACKs first (never held by PFC at the NIC, as in both
//!   references), then probes of a host-side scheme, then round-robins over the flows that
//!   have data ready, are not PFC-paused and whose pacing allows; each flow's transport says
//!   what to send and how to pace it, and a data packet leaves at once when the port is idle.
//! * Timers: one transport-timer event per host watches the retransmission deadlines of all
//!   its flows (`Event::TransportTimer`); a flow's congestion control may ask for a timer of
//!   its own (`Event::CcTimer`).
//! * Receiver: every data packet is measured (count, PFC wait, path), passed through the
//!   host-side scheme's resequencing buffer if it has one (`reseq.rs`), then to the flow's
//!   transport, whose ACK or NACK leaves in the control priority at once.
//! * Congestion notifications: the CNP flag of an ACK or NACK goes to the flow's congestion
//!   control.
//!
//! Hosts never send PFC frames (their receive side is never the bottleneck) but obey the
//! ones their ToR sends. Not modelled: multiple NICs per host, PCIe/host-side delays.

use super::{Event, Simulation};
use crate::cc::AckFeedback;
use crate::lb::host::AckEcho;
use crate::packet::{Packet, PacketId, PacketKind};
use crate::port::CONTROL_PRIO;
use crate::transport::Pace;
use crate::units::Time;

/// A host's NIC.
pub(super) struct Host {
    pub(super) node: u32,
    /// Global id of its single port.
    pub(super) port: u32,
    /// Flows that have data ready to send, in round-robin order, with what the NIC's scan
    /// over them reads (so that the scan does not touch the flows' own state).
    sending: Vec<Sending>,
    /// Where the next round-robin scan starts.
    rr: usize,
    /// Time of the pending pacing wake-up (`Time::MAX`: none).
    wake_at: Time,
    /// Flows started and not finished: the ones its retransmission timer watches.
    active: Vec<u32>,
    /// Time of the pending transport-timer event (`Time::MAX`: none). One event per host
    /// covers the retransmission deadlines of all its flows, so the event queue does not fill
    /// with far-away timers.
    timer_at: Time,
}

impl Host {
    /// Nothing to send: no flow has data ready.
    pub(super) fn is_idle(&self) -> bool {
        self.sending.is_empty()
    }

    /// Flow `f`'s `next_avail` changed (it is in the sending list).
    #[inline]
    pub(super) fn set_next_avail(&mut self, f: u32, at: Time) {
        let entry = self
            .sending
            .iter_mut()
            .find(|s| s.flow == f)
            .expect("listed");
        entry.next_avail = at;
    }

    pub(super) fn new(node: u32, port: u32) -> Host {
        Host {
            node,
            port,
            sending: Vec::new(),
            rr: 0,
            wake_at: Time::MAX,
            active: Vec::new(),
            timer_at: Time::MAX,
        }
    }
}

/// An entry of a host's list of flows with data ready to send.
#[derive(Clone, Copy, Debug)]
struct Sending {
    flow: u32,
    priority: u8,
    /// The flow's `next_avail` (kept equal to it).
    next_avail: Time,
}

impl Simulation {
    /// The next flow of the table starts: it becomes ready to send.
    pub(super) fn flow_start(&mut self) {
        let f = self.next_flow as u32;
        self.next_flow += 1;
        if let Some(next) = self.flows.get(self.next_flow) {
            self.events.schedule(next.spec.start, Event::FlowStart);
        }
        let h = self.host_index[self.flows[f as usize].spec.src as usize];
        let port = self.hosts[h as usize].port;
        let prio = self.flows[f as usize].spec.priority;
        let mark = self.ports[port as usize].pause_clock(prio, self.now);
        let flow = &mut self.flows[f as usize];
        flow.next_avail = self.now;
        flow.pause_mark = mark;
        self.hosts[h as usize].active.push(f);
        if self.host_side.is_some() {
            let info = self.flows[f as usize].info();
            self.host_lb_flow_start(h, info);
        }
        if self.varys.as_ref().is_some_and(|v| v.schedules(f)) {
            self.varys_update();
        }
        self.mark_sending(h, f);
        self.host_kick(h);
    }

    pub(super) fn mark_sending(&mut self, h: u32, f: u32) {
        let flow = &mut self.flows[f as usize];
        if !flow.in_sending && flow.is_unfinished() {
            flow.in_sending = true;
            self.hosts[h as usize].sending.push(Sending {
                flow: f,
                priority: flow.spec.priority,
                next_avail: flow.next_avail,
            });
        }
    }

    /// Asks host `h`'s NIC to send what it can (now, or when its port frees up).
    pub(super) fn host_kick(&mut self, h: u32) {
        let p = self.hosts[h as usize].port;
        self.try_send(p);
    }

    /// The NIC of host `h` is idle: send an ACK/NACK, or a data packet of the next eligible
    /// flow, or schedule a wake-up for the earliest paced flow.
    pub(super) fn host_send(&mut self, h: u32) {
        let host = &mut self.hosts[h as usize];
        let p = host.port;
        let port = &mut self.ports[p as usize];
        // ACKs and NACKs go first and are never held by PFC at the NIC (as in both
        // references, whatever the switches do with them).
        if port.nonempty & (1 << CONTROL_PRIO) != 0 {
            let pid = port.dequeue(CONTROL_PRIO, &mut self.arena, self.now);
            self.start_tx(p, pid);
            return;
        }
        // Probes of a host-side scheme wait in the data priorities' queues (obeying PFC).
        let probes = port.nonempty & !port.paused & !(1 << CONTROL_PRIO);
        if probes != 0 {
            let pid = port.dequeue(probes.trailing_zeros() as u8, &mut self.arena, self.now);
            self.start_tx(p, pid);
            return;
        }
        let n = host.sending.len();
        let mut earliest = Time::MAX;
        let start = if host.rr < n { host.rr } else { 0 };
        for k in 0..n {
            let i = if start + k < n {
                start + k
            } else {
                start + k - n
            };
            let entry = host.sending[i];
            if port.is_paused(entry.priority) {
                continue;
            }
            if entry.next_avail > self.now {
                earliest = earliest.min(entry.next_avail);
                continue;
            }
            let f = entry.flow;
            host.rr = i + 1;
            self.send_data(h, i, f);
            return;
        }
        if earliest < Time::MAX && (host.wake_at <= self.now || earliest < host.wake_at) {
            host.wake_at = earliest;
            self.events.schedule(earliest, Event::NicWake(h));
        }
    }

    pub(super) fn nic_wake(&mut self, h: u32) {
        let host = &mut self.hosts[h as usize];
        if host.wake_at != self.now {
            return; // superseded by an earlier wake-up
        }
        host.wake_at = Time::MAX;
        self.host_kick(h);
    }

    /// Sends the next data packet of flow `f`, at position `i` of host `h`'s sending list: its
    /// transport says which, how to pace the flow and when its timer restarts; a flow that may
    /// send nothing (its transport's window, or the host-side scheme holds it) leaves the list
    /// and the NIC looks for another.
    fn send_data(&mut self, h: u32, i: usize, f: u32) {
        if !self.transports.can_send(&self.flows[f as usize]) {
            self.unlist_sending(h, i);
            return self.host_send(h);
        }
        if !self.host_lb_may_send(h, f) {
            // Held by the host-side scheme until it releases the flow.
            self.unlist_sending(h, i);
            return self.host_send(h);
        }
        let now = self.now;
        let p = self.hosts[h as usize].port;
        let seg = self.transports.next_segment(&self.flows[f as usize]);
        let path_tag = match self.flows[f as usize].spec.path_tag {
            0 if self.host_side.is_some() => {
                let info = self.flows[f as usize].info();
                self.host_lb_path_tag(h, info, seg.seq, seg.payload as u32)
            }
            pinned => pinned,
        };
        let pause_now = {
            let prio = self.flows[f as usize].spec.priority;
            self.ports[p as usize].pause_clock(prio, now)
        };
        let flow = &mut self.flows[f as usize];
        let pkt = flow.data_packet(
            seg.seq,
            seg.payload,
            seg.header,
            path_tag,
            self.tag_coflows,
            now,
            pause_now,
        );
        self.totals.payload_sent += seg.payload;
        self.totals.bytes_offered += flow.note_sent(seg.seq, seg.payload);
        let next_avail = match self.transports.pace(flow, now) {
            Pace::Rate(rate) => {
                // A paced flow keeps its next sending time even when it leaves the list.
                flow.next_avail = if self.varys.is_some() && flow.rate_cap_bps < rate {
                    // The coflow scheduler's cap binds: a token bucket of one packet.
                    super::varys::capped_next(flow, pkt.wire_bytes, now)
                } else {
                    now + Time(crate::units::ceil_u64(pkt.wire_bytes as f64 * 8e12 / rate))
                };
                flow.next_avail
            }
            Pace::Line => now + flow.line_rate.tx_time(pkt.wire_bytes as u64),
        };
        let more = self.transports.can_send(flow);
        if more {
            flow.next_avail = next_avail;
            self.hosts[h as usize].sending[i].next_avail = next_avail;
        }
        if let Some(at) = self.transports.timer_on_send(flow, now) {
            flow.rto_deadline = at;
            self.host_timer_by(h, at);
        }
        if !more {
            self.unlist_sending(h, i);
        }
        let pid = self.arena.alloc(pkt);
        if self.arena.carries_int() {
            self.arena.int_mut(pid).clear();
        }
        self.start_tx(p, pid);
    }

    /// Host `h`'s transport timer fired: every flow with unacknowledged data whose deadline
    /// passed times out (it goes back to its first unacknowledged byte, and its transport
    /// sets the next deadline).
    pub(super) fn transport_timer(&mut self, h: u32) {
        if self.hosts[h as usize].timer_at != self.now {
            return; // superseded by an earlier one (`host_timer_by`)
        }
        self.hosts[h as usize].timer_at = Time::MAX;
        let now = self.now;
        let mut next = Time::MAX;
        let mut resend = false;
        for i in 0..self.hosts[h as usize].active.len() {
            let f = self.hosts[h as usize].active[i];
            let flow = &mut self.flows[f as usize];
            if flow.snd_una >= flow.high_sent {
                continue; // nothing outstanding
            }
            if flow.rto_deadline <= now {
                flow.timeouts += 1;
                flow.snd_nxt = flow.snd_una;
                self.transports.on_timeout(flow, now);
                resend = true;
                if self.host_side.is_some() {
                    let info = self.flows[f as usize].info();
                    self.host_lb_timeout(h, info);
                }
            }
            next = next.min(self.flows[f as usize].rto_deadline);
        }
        if next < Time::MAX {
            self.hosts[h as usize].timer_at = next;
            self.events.schedule(next, Event::TransportTimer(h));
        }
        if resend {
            for i in 0..self.hosts[h as usize].active.len() {
                let f = self.hosts[h as usize].active[i];
                let flow = &self.flows[f as usize];
                if flow.snd_nxt < flow.high_sent {
                    self.mark_sending(h, f);
                }
            }
            self.host_kick(h);
        }
    }

    /// A packet arrived at host `h`.
    pub(super) fn host_receive(&mut self, h: u32, pid: PacketId) {
        let pkt = *self.arena.get(pid);
        if self.arena.carries_int() {
            self.int_rx = *self.arena.int(pid);
        }
        self.arena.free(pid);
        match pkt.kind {
            PacketKind::Data => self.receive_data(h, &pkt),
            PacketKind::Ack | PacketKind::Nack => self.receive_ack(h, &pkt),
            PacketKind::Probe => self.answer_probe(h, &pkt),
            PacketKind::ProbeReply => self.probe_replied(h, &pkt),
            PacketKind::LbControl | PacketKind::LbRouted => {}
            PacketKind::Pause | PacketKind::Resume => unreachable!("PFC frames are handled first"),
        }
    }

    /// A data packet reached its receiver: measure it, then hand it to the resequencing
    /// buffer of a host-side scheme that has one (`reseq.rs`), or to the transport.
    fn receive_data(&mut self, h: u32, pkt: &Packet) {
        let flow = &mut self.flows[pkt.flow as usize];
        debug_assert_eq!(self.hosts[h as usize].node, flow.spec.dst);
        flow.note_arrival(pkt);
        if self.reseq.is_some() {
            self.resequence(h, pkt); // the resequencer passes it on to `transport_receive`
        } else {
            self.transport_receive(h, pkt);
        }
    }

    /// Receiver side of the flow's transport: what the packet delivers, and the ACK or NACK
    /// it answers with (carrying, for a host-side scheme, the packet's path tag, and in a run
    /// with in-band telemetry the packet's, `int_rx`).
    pub(super) fn transport_receive(&mut self, h: u32, pkt: &Packet) {
        #[cfg(test)]
        if self.drop_data.as_mut().is_some_and(|d| d(pkt)) {
            self.flows[pkt.flow as usize].packets_received -= 1;
            self.drops += 1;
            self.payload_dropped += pkt.payload as u64;
            return;
        }
        let now = self.now;
        let flow = &mut self.flows[pkt.flow as usize];
        if let Some(mut ack) = self.transports.on_data(flow, pkt, now, &mut self.totals) {
            if self.host_side.is_some() {
                ack.lb.path_tag = pkt.lb.path_tag;
            }
            let pid = self.host_enqueue(h, CONTROL_PRIO, ack);
            if self.arena.carries_int() {
                *self.arena.int_mut(pid) = self.int_rx;
            }
        }
    }

    /// Hands `pkt`, made by host `h`, to priority `prio` of its NIC: queues it and lets the
    /// NIC send. A NIC that would take it out of the queue at once (idle, nothing queued,
    /// `prio` not paused: `host_send` then sends the one queued packet first, whatever its
    /// priority) sends it without the round trip through the queue, as a switch egress does
    /// (`PortState::pass_through`): most ACKs leave an idle receiver's NIC so. Returns the
    /// packet's id (it is on its way).
    pub(super) fn host_enqueue(&mut self, h: u32, prio: u8, pkt: Packet) -> PacketId {
        let p = self.hosts[h as usize].port;
        let pid = self.arena.alloc(pkt);
        let now = self.now;
        let port = &mut self.ports[p as usize];
        if port.takes_at_once(prio, now) {
            port.pass_through(self.arena.get(pid), now);
            self.start_tx(p, pid);
            return pid;
        }
        port.enqueue(prio, pid, &mut self.arena, now);
        self.try_send(p);
        pid
    }

    /// Sender side: the flow's transport reads the ACK or NACK; the host-side scheme sees it,
    /// a CNP goes to the congestion control (and, if it reads ACKs, the ACK itself, after a
    /// NACK's go-back, as the reference's `HandleAckHp`/`HandleAckTimely` come after
    /// `RecoverQueue`), and the NIC does what the transport asks.
    fn receive_ack(&mut self, h: u32, pkt: &Packet) {
        let now = self.now;
        let f = pkt.flow;
        let flow = &mut self.flows[f as usize];
        if !flow.is_unfinished() {
            return;
        }
        let outcome = self.transports.on_ack(flow, pkt, now);
        if self.host_side.is_some() {
            let echo = AckEcho {
                nack: outcome.loss,
                path_tag: pkt.lb.path_tag,
                ce: pkt.ce(),
                rtt: now.saturating_sub(pkt.sent_at),
                newly_acked: outcome.newly_acked,
            };
            let info = self.flows[f as usize].info();
            self.host_lb_ack(h, info, echo);
        }
        let flow = &mut self.flows[f as usize];
        if pkt.cnp() {
            flow.cnps_received += 1;
            if let Some(at) = flow.cc.on_cnp(&self.transports.cc, now) {
                self.events.schedule(at, Event::CcTimer(f));
            }
        }
        if flow.snd_una >= flow.spec.size {
            self.flow_finished(h, f);
            return;
        }
        if outcome.go_back {
            flow.nacks_received += 1;
            flow.snd_nxt = flow.snd_una;
            self.mark_sending(h, f);
        }
        if self.cc_reads_acks {
            let flow = &mut self.flows[f as usize];
            let feedback = AckFeedback {
                ack_seq: pkt.seq,
                snd_nxt: flow.snd_nxt,
                rtt: now.saturating_sub(pkt.sent_at),
                int: self.arena.carries_int().then_some(&self.int_rx),
            };
            flow.cc.on_feedback(&self.transports.cc, &feedback);
        }
        if let Some(at) = outcome.timer {
            self.flows[f as usize].rto_deadline = at;
            self.host_timer_by(h, at);
        }
        if outcome.send {
            self.mark_sending(h, f);
        }
        if outcome.kick {
            self.host_kick(h);
        }
    }

    /// Flow `f` of host `h` has every byte acknowledged: it finishes now and leaves the
    /// host's lists.
    pub(super) fn flow_finished(&mut self, h: u32, f: u32) {
        let n_flows = self.flows.len() as u64;
        let flow = &mut self.flows[f as usize];
        flow.finish(self.now);
        if self.host_side.is_some() {
            let info = flow.info();
            self.host_lb_flow_end(h, info);
        }
        let flow = &mut self.flows[f as usize];
        self.flows_finished += 1;
        self.flows_done_stop = self.stop.when_flows_done && self.flows_finished == n_flows;
        let host = &mut self.hosts[h as usize];
        let i = host.active.iter().position(|&x| x == f).expect("active");
        host.active.swap_remove(i);
        if flow.in_sending {
            let i = host
                .sending
                .iter()
                .position(|x| x.flow == f)
                .expect("listed");
            self.unlist_sending(h, i);
        }
        if self.varys.is_some() {
            self.varys_flow_end(f);
        }
    }

    /// Takes the entry at position `i` off host `h`'s list of flows with data ready.
    #[inline]
    pub(super) fn unlist_sending(&mut self, h: u32, i: usize) {
        let host = &mut self.hosts[h as usize];
        let f = host.sending.remove(i).flow;
        if host.rr > i {
            host.rr -= 1;
        }
        self.flows[f as usize].in_sending = false;
    }

    /// Host `h`'s transport timer fires at `at` at the latest (an earlier pending event
    /// stays; a later one is superseded, see `transport_timer`).
    #[inline(always)]
    pub(super) fn host_timer_by(&mut self, h: u32, at: Time) {
        let host = &mut self.hosts[h as usize];
        if at < host.timer_at {
            host.timer_at = at;
            self.events.schedule(at, Event::TransportTimer(h));
        }
    }

    /// Flow `f`'s congestion-control timer fired.
    pub(super) fn cc_timer(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        flow.cc.on_timer(&self.transports.cc, self.now);
    }
}
