//! Host NICs: RoCEv2 reliable connections (one queue pair per flow) with go-back-N.
//!
//! Modelled on the NIC of the HPCC/ConWeave ns-3 simulators (`docs/fabric.md` has the
//! details and sources):
//! * Sender: per-QP rate pacing (line rate, or the DCQCN rate), the NIC serves ACK/NACKs
//!   first, then round-robins over QPs that have data, are not PFC-paused and whose pacing
//!   allows; go-back-N on NACK (resend from the first unacknowledged byte); a retransmission
//!   timeout restarted by every data packet sent and by every ACK that leaves data
//!   outstanding; one timer event per host checks the deadlines of its flows.
//! * Receiver: accepts only the next expected packet; ACKs every `ack_interval` packets (and
//!   the last one); on a gap sends a NACK (at most one per expected sequence per
//!   `nack_interval`) and discards the packet; on a duplicate re-sends an ACK.
//! * The CNP flag rides on the ACK/NACK of a CE-marked packet (and on every NACK with
//!   `cnp_on_nack`, as in ConWeave).
//!
//! Hosts never send PFC frames (their receive side is never the bottleneck) but obey the
//! ones their ToR sends. Not modelled: selective repeat (IRN), multiple NICs per host,
//! PCIe/host-side delays, window limits.

use super::{Event, Simulation};
use crate::dcqcn::Dcqcn;
use crate::lb::host::{AckEcho, FlowInfo};
use crate::metrics::FlowRecord;
use crate::packet::{Packet, PacketId, PacketKind};
use crate::port::CONTROL_PRIO;
use crate::sim::CcConfig;
use crate::traffic::FlowSpec;
use crate::units::{Bytes, Rate, Time};
use serde::{Deserialize, Serialize};

/// NIC and transport parameters (`[nic]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct NicConfig {
    /// Payload bytes per data packet (both references: 1000 B).
    pub payload: Bytes,
    /// Header bytes added to a data packet on the wire (ConWeave: a 1000 B payload is a
    /// 1048 B frame).
    pub header_bytes: u16,
    /// Size on the wire of ACK, NACK, PFC and other control frames (ConWeave: 64 B).
    pub control_bytes: u16,
    /// The receiver ACKs every this many in-order packets (both references: 1).
    pub ack_interval: u32,
    /// At most one NACK per expected sequence number per this interval (ConWeave: 4 us;
    /// HPCC: 500 us).
    pub nack_interval: Time,
    /// Retransmission timeout (ConWeave: 4 ms); "0s" disables it (HPCC has none).
    pub rto: Time,
    /// Every NACK carries the CNP flag (ConWeave: true; HPCC: only if CE-marked).
    pub cnp_on_nack: bool,
}

crate::tagged::table!(NicConfig);

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            payload: Bytes(1000),
            header_bytes: 48,
            control_bytes: 64,
            ack_interval: 1,
            nack_interval: Time::from_us(4),
            rto: Time::from_ms(4),
            cnp_on_nack: true,
        }
    }
}

impl NicConfig {
    /// Bytes on the wire of a full-size data packet.
    pub fn mtu_wire_bytes(&self) -> u64 {
        self.payload.0 + self.header_bytes as u64
    }
}

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
    /// Time of the pending retransmission-timer event (`Time::MAX`: none). One event per
    /// host covers all its flows, so the event queue does not fill with far-away timers.
    rto_at: Time,
}

impl Host {
    /// Nothing to send: no flow has data ready.
    pub(super) fn is_idle(&self) -> bool {
        self.sending.is_empty()
    }

    /// Flow `f`'s `next_avail` changed (it is in the sending list).
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
            rto_at: Time::MAX,
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

/// Sender, receiver and measurement state of one flow (queue pair), laid out on 64-byte lines
/// by what touches it (the layout is checked by a test): in a large fabric a flow's state has
/// left the cache between its packets, and each line a packet touches is a miss.
///
/// * line 0: the sender's sequence state (every packet sent, every ACK);
/// * line 1: the flow's spec (every packet sent: addresses, size, priority; an ACK: size);
/// * lines 2-3: rate control and the sender's counters (every packet sent; an ACK with CNP);
/// * line 4: the receiver (every data packet received), line 5 its rarer counters (packets
///   held by PFC, a new path);
/// * then what is read at the end of the run or by the coflow scheduler only.
#[repr(C, align(64))]
pub(crate) struct FlowState {
    // Line 0.
    pub(super) snd_nxt: u64,
    pub(super) snd_una: u64,
    /// Highest byte ever sent (bytes below it that are sent again are retransmissions).
    pub(super) high_sent: u64,
    pub(super) next_avail: Time,
    /// When the retransmission timer expires if nothing is sent or acknowledged before.
    pub(super) rto_deadline: Time,
    /// Reading of the host port's pause clock at the QP's last transmission.
    pub(super) pause_mark: u64,
    /// When the last byte was acknowledged (`Time::MAX`: not yet; [`FlowState::finished`]).
    finished_at: Time,
    pub(super) id: u32,
    pub(super) sport: u16,
    pub(super) in_sending: bool,
    // Line 1.
    pub(super) spec: FlowSpec,
    // Lines 2-3.
    cc: Option<Dcqcn>,
    pub(super) line_rate: Rate,
    /// Counters of [`FlowRecord`] kept by the sender.
    pub(super) packets_sent: u64,
    pub(super) retransmitted_bytes: u64,
    cnps_received: u32,
    nacks_received: u32,
    timeouts: u32,
    // Line 4.
    pub(super) expected: u64,
    last_nack: u64,
    nack_allowed_at: Time,
    /// Counters of [`FlowRecord`] kept by the receiver.
    pub(super) packets_received: u64,
    pub(super) ooo_arrivals: u64,
    unacked_packets: u32,
    last_path: u32,
    pub(super) max_ooo_degree: u32,
    path_changes: u32,
    unacked_ce: bool,
    /// Distinct paths seen, saturating at 8 (the first 8 are in `paths`).
    paths_used: u8,
    // Line 5.
    pfc_paused_packets: u64,
    pfc_wait_total_ps: u64,
    pfc_wait_max_ps: u64,
    paths: [u32; 8],
    // Line 6 (a little of line 5).
    pub(super) ideal_fct: Time,
    /// The coflow scheduler's rate for the flow, bit/s (infinite: none; `varys.rs`).
    pub(super) rate_cap_bps: f64,
}

impl FlowState {
    pub(super) fn new(id: u32, spec: FlowSpec, ideal_fct: Time, line: Rate, cc: &CcConfig) -> Self {
        let cc = match cc {
            CcConfig::Dcqcn(_) => Some(Dcqcn::new(line)),
            CcConfig::None => None,
        };
        FlowState {
            snd_nxt: 0,
            snd_una: 0,
            high_sent: 0,
            next_avail: Time::ZERO,
            rto_deadline: Time::MAX,
            pause_mark: 0,
            finished_at: Time::MAX,
            id,
            // Source ports are assigned per queue pair, like the references do.
            sport: 10_000u16.wrapping_add(id as u16),
            in_sending: false,
            spec,
            cc,
            line_rate: line,
            packets_sent: 0,
            retransmitted_bytes: 0,
            cnps_received: 0,
            nacks_received: 0,
            timeouts: 0,
            expected: 0,
            last_nack: u64::MAX,
            nack_allowed_at: Time::ZERO,
            packets_received: 0,
            ooo_arrivals: 0,
            unacked_packets: 0,
            last_path: 0,
            max_ooo_degree: 0,
            path_changes: 0,
            unacked_ce: false,
            paths_used: 0,
            paths: [0; 8],
            pfc_paused_packets: 0,
            pfc_wait_total_ps: 0,
            pfc_wait_max_ps: 0,
            ideal_fct,
            rate_cap_bps: f64::INFINITY,
        }
    }

    /// Asks for the line that a packet of `kind` arriving for this flow reads first: the
    /// receiver's for data, the sender's for the rest (see [`crate::engine::prefetch`]).
    #[inline]
    pub(super) fn prefetch_for(&self, kind: PacketKind) {
        if kind == PacketKind::Data {
            crate::engine::prefetch(&self.expected);
        } else {
            crate::engine::prefetch(self);
        }
    }

    /// Counts a data packet that took path `sig`: a change from the last packet's path, and a
    /// path not seen before (up to 8). A packet on the last path (most of them) leaves `paths`
    /// unread: that path is in it already, or the count has saturated.
    #[inline]
    fn note_path(&mut self, sig: u32) {
        if self.paths_used > 0 && sig == self.last_path {
            return;
        }
        if self.paths_used > 0 {
            self.path_changes += 1;
        }
        self.last_path = sig;
        let used = self.paths_used as usize;
        if used < self.paths.len() && !self.paths[..used].contains(&sig) {
            self.paths[used] = sig;
            self.paths_used += 1;
        }
    }

    /// When the last byte was acknowledged, if it was.
    pub(super) fn finished(&self) -> Option<Time> {
        (self.finished_at != Time::MAX).then_some(self.finished_at)
    }

    pub(super) fn is_unfinished(&self) -> bool {
        self.finished_at == Time::MAX
    }

    pub(super) fn in_sending(&self) -> bool {
        self.in_sending
    }

    /// Bytes the receiver has not yet acknowledged.
    pub(super) fn unacknowledged(&self) -> u64 {
        self.spec.size - self.snd_una
    }

    /// Next byte the receiver expects.
    pub(super) fn expected(&self) -> u64 {
        self.expected
    }

    /// The byte the receiver last sent a NACK for (`u64::MAX`: none yet; unit tests).
    #[cfg(test)]
    pub(super) fn last_nack(&self) -> u64 {
        self.last_nack
    }

    /// The data packet of this flow carrying `payload` bytes from `seq`, sent at `now` with
    /// `header` bytes of headers on path `path_tag` (and, with `coflow_tag`, its coflow in
    /// `lb.meta`, [`crate::lb::Capabilities::coflow_tag`]); `pause_now` is the host port's
    /// pause clock for the flow's priority: the packet carries the time the flow was held by
    /// PFC at its own NIC since its last packet. Both transports send through it.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn data_packet(
        &mut self,
        seq: u64,
        payload: u64,
        header: u16,
        path_tag: u32,
        coflow_tag: bool,
        now: Time,
        pause_now: u64,
    ) -> Packet {
        let mut pkt = Packet::new(PacketKind::Data);
        pkt.flow = self.id;
        pkt.src = self.spec.src;
        pkt.dst = self.spec.dst;
        pkt.sport = self.sport;
        pkt.dport = self.spec.dport;
        pkt.priority = self.spec.priority;
        pkt.lb.path_tag = path_tag;
        if coflow_tag {
            pkt.lb.meta = self.spec.coflow.map_or(0, |c| c + 1);
        }
        pkt.seq = seq;
        pkt.payload = payload as u16;
        pkt.wire_bytes = payload as u16 + header;
        pkt.sent_at = now;
        pkt.pfc_wait_ns = ((pause_now - self.pause_mark) / 1_000).min(u32::MAX as u64) as u32;
        self.pause_mark = pause_now;
        pkt
    }

    /// What host-side schemes see of the flow.
    pub(super) fn info(&self) -> FlowInfo {
        FlowInfo {
            id: self.id,
            src: self.spec.src,
            dst: self.spec.dst,
            size: self.spec.size,
            start: self.spec.start,
            snd_una: self.snd_una,
            high_sent: self.high_sent,
            priority: self.spec.priority,
        }
    }

    /// The flow's measurement record.
    pub(super) fn record(&self) -> FlowRecord {
        let s = &self.spec;
        let finished = self.finished();
        let fct = finished.map(|t| (t - s.start).ps());
        FlowRecord {
            flow_id: self.id,
            source: s.source,
            generator: s.generator,
            coflow: s.coflow,
            src: s.src,
            dst: s.dst,
            sport: self.sport,
            dport: s.dport,
            priority: s.priority,
            size_bytes: s.size,
            start_ps: s.start.ps(),
            finish_ps: finished.map(Time::ps),
            fct_ps: fct,
            ideal_fct_ps: self.ideal_fct.ps(),
            slowdown: fct.map(|f| f as f64 / self.ideal_fct.ps() as f64),
            packets_sent: self.packets_sent,
            retransmitted_bytes: self.retransmitted_bytes,
            nacks_received: self.nacks_received,
            timeouts: self.timeouts,
            cnps_received: self.cnps_received,
            packets_received: self.packets_received,
            ooo_arrivals: self.ooo_arrivals,
            max_ooo_degree: self.max_ooo_degree,
            pfc_paused_packets: self.pfc_paused_packets,
            pfc_wait_total_ps: self.pfc_wait_total_ps,
            pfc_wait_max_ps: self.pfc_wait_max_ps,
            stalled: self.pfc_paused_packets > 0,
            paths_used: self.paths_used,
            path_changes: self.path_changes,
            // The transport's own fields are filled in by the run (`results.rs`, `tcp.rs`).
            ..FlowRecord::default()
        }
    }

    /// What a rate monitor records of the flow at `now`, if it is sending (not finished):
    /// its rate and DCQCN target rate (bit/s; no target without congestion control), the bytes
    /// acknowledged and the CNPs received. Reads the DCQCN state without changing it.
    pub(super) fn observe(&self, cc: &CcConfig, now: Time) -> Option<(f64, Option<f64>, u64, u32)> {
        if !self.is_unfinished() {
            return None;
        }
        let (rate, target) = match (&self.cc, cc) {
            (Some(d), CcConfig::Dcqcn(cfg)) => {
                // On a copy: the rate's lazy increase steps are the run's own to apply.
                let mut d = d.clone();
                (d.rate(cfg, now), Some(d.target_rate()))
            }
            _ => (self.line_rate.bps() as f64, None),
        };
        Some((rate, target, self.snd_una, self.cnps_received))
    }

    /// Sending rate in bits/s at `now`.
    fn rate_bps(&mut self, cc: &CcConfig, now: Time) -> f64 {
        match (&mut self.cc, cc) {
            (Some(d), CcConfig::Dcqcn(cfg)) => d.rate(cfg, now),
            _ => self.line_rate.bps() as f64,
        }
    }
}

/// FCT of a flow of `size` bytes alone on a path of links `(rate, delay)`: the time from the
/// first bit sent to the final ACK received.
///
/// Data packets (all full-size but the last) go store-and-forward through the links; with
/// `t_i` the serialization time of a full packet on link `i`, packet `j` (1-based) leaves link
/// `m` at `Σ_{i<=m} t_i + Σ_{i<m} d_i + (j-1) max_{i<=m} t_i`; the smaller last packet follows
/// its predecessor. The final ACK then returns over the same links. `Time::MAX` if that is
/// more than the clock can count (2^64 ps, about 213 days: a flow of petabytes, or of terabytes
/// on a link of a few Mbps), which setup refuses.
pub fn ideal_fct(size: u64, path: &[(Rate, Time)], nic: &NicConfig) -> Time {
    let payload = nic.payload.0;
    let header = nic.header_bytes as u64;
    let n = size.div_ceil(payload);
    let last_wire = size - (n - 1) * payload + header;
    let full_wire = payload + header;
    // Departure of the last packet from each link, computed hop by hop, in 128 bits (the
    // packets' serializations add up past 64 bits for a flow beyond the clock).
    let mut sum_t = 0u128;
    let mut sum_d = 0u128;
    let mut max_t = 0u128;
    let mut last_departure = 0u128; // of the last packet from the previous link, plus its delay
    for (m, &(rate, delay)) in path.iter().enumerate() {
        let t_full = rate.tx_time(full_wire).ps() as u128;
        let t_last = rate.tx_time(last_wire).ps() as u128;
        sum_t += t_full;
        max_t = max_t.max(t_full);
        // Departure of packet n-1 (the last full one) from this link.
        let prev_departure = if n >= 2 {
            sum_t + sum_d + (n as u128 - 2) * max_t
        } else {
            0
        };
        let ready = if m == 0 { 0 } else { last_departure };
        last_departure = ready.max(prev_departure) + t_last + delay.ps() as u128;
        sum_d += delay.ps() as u128;
    }
    let ack_back: u128 = path
        .iter()
        .map(|&(rate, delay)| (rate.tx_time(nic.control_bytes as u64) + delay).ps() as u128)
        .sum();
    Time(u64::try_from(last_departure + ack_back).unwrap_or(u64::MAX))
}

/// The answer of `pkt`'s receiver (an ACK, a NACK, a probe's reply): `kind`, back to its
/// sender (addresses and ports swapped), same flow and priority, echoing its send time;
/// `wire_bytes` on the wire. The caller adds what the answer says.
pub(super) fn reply_to(pkt: &Packet, kind: PacketKind, wire_bytes: u16) -> Packet {
    let mut reply = Packet::new(kind);
    reply.flow = pkt.flow;
    reply.src = pkt.dst;
    reply.dst = pkt.src;
    reply.sport = pkt.dport;
    reply.dport = pkt.sport;
    reply.priority = pkt.priority;
    reply.sent_at = pkt.sent_at;
    reply.wire_bytes = wire_bytes;
    reply
}

impl Simulation {
    /// The next flow of the table starts: its QP becomes ready to send.
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
    /// QP, or schedule a wake-up for the earliest paced QP.
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

    /// Sends the next data packet of flow `f`, at position `i` of host `h`'s sending list.
    fn send_data(&mut self, h: u32, i: usize, f: u32) {
        if self.tcp.as_ref().is_some_and(|t| t.is_tcp(f)) {
            return self.tcp_send(h, i, f);
        }
        if !self.host_lb_may_send(h, f) {
            // Held by the host-side scheme until it releases the flow.
            self.unlist_sending(h, i);
            return self.host_send(h);
        }
        let now = self.now;
        let p = self.hosts[h as usize].port;
        let payload_max = self.cfg.nic.payload.0;
        let header = self.cfg.nic.header_bytes;
        let pause_now = {
            let prio = self.flows[f as usize].spec.priority;
            self.ports[p as usize].pause_clock(prio, now)
        };
        let path_tag = match self.flows[f as usize].spec.path_tag {
            0 if self.host_side.is_some() => {
                let flow = &self.flows[f as usize];
                let (info, seq) = (flow.info(), flow.snd_nxt);
                let payload = payload_max.min(flow.spec.size - seq);
                self.host_lb_path_tag(h, info, seq, payload as u32)
            }
            pinned => pinned,
        };
        let flow = &mut self.flows[f as usize];
        let seq = flow.snd_nxt;
        let payload = payload_max.min(flow.spec.size - seq);
        let pkt = flow.data_packet(
            seq,
            payload,
            header,
            path_tag,
            self.tag_coflows,
            now,
            pause_now,
        );
        flow.snd_nxt += payload;
        self.payload_sent += payload;
        if seq < flow.high_sent {
            flow.retransmitted_bytes += payload;
        } else {
            self.bytes_offered += payload;
        }
        flow.high_sent = flow.high_sent.max(flow.snd_nxt);
        flow.packets_sent += 1;
        let rate = flow.rate_bps(&self.cfg.cc, now);
        if self.varys.is_some() && flow.rate_cap_bps < rate {
            // The coflow scheduler's cap binds: a token bucket of one packet (`varys.rs`).
            flow.next_avail = super::varys::capped_next(flow, pkt.wire_bytes, now);
        } else {
            let pace = crate::units::ceil_u64(pkt.wire_bytes as f64 * 8e12 / rate);
            flow.next_avail = now + Time(pace);
        }
        self.hosts[h as usize].sending[i].next_avail = flow.next_avail;
        let done_sending = flow.snd_nxt >= flow.spec.size;
        self.arm_rto(f);
        if done_sending {
            let host = &mut self.hosts[h as usize];
            host.sending.remove(i);
            if host.rr > i {
                host.rr -= 1;
            }
            self.flows[f as usize].in_sending = false;
        }
        let pid = self.arena.alloc(pkt);
        self.start_tx(p, pid);
    }

    /// Restarts flow `f`'s retransmission timer.
    fn arm_rto(&mut self, f: u32) {
        let rto = self.cfg.nic.rto;
        if rto == Time::ZERO {
            return;
        }
        let flow = &mut self.flows[f as usize];
        flow.rto_deadline = self.now + rto;
        // Deadlines only move forward, so a pending host timer is never later than this one.
        let h = self.host_index[flow.spec.src as usize];
        let host = &mut self.hosts[h as usize];
        if host.rto_at == Time::MAX {
            host.rto_at = flow.rto_deadline;
            self.events.schedule(flow.rto_deadline, Event::Rto(h));
        }
    }

    /// Host `h`'s retransmission timer fired: every flow with unacknowledged data whose
    /// deadline passed goes back to its first unacknowledged byte.
    pub(super) fn rto_fired(&mut self, h: u32) {
        // TCP's timer can move a host's deadline earlier (`tcp.rs`), leaving a later event
        // behind; RoCE's never does, so this never skips one of its events.
        if self.tcp.is_some() && self.hosts[h as usize].rto_at != self.now {
            return;
        }
        self.hosts[h as usize].rto_at = Time::MAX;
        let rto = self.cfg.nic.rto;
        let mut next = Time::MAX;
        let mut resend = false;
        for i in 0..self.hosts[h as usize].active.len() {
            let f = self.hosts[h as usize].active[i];
            let flow = &mut self.flows[f as usize];
            if flow.snd_una >= flow.high_sent {
                continue; // nothing outstanding
            }
            if flow.rto_deadline <= self.now {
                flow.timeouts += 1;
                flow.snd_nxt = flow.snd_una;
                flow.rto_deadline = self.now + rto;
                resend = true;
                if self.host_side.is_some() {
                    let info = flow.info();
                    self.host_lb_timeout(h, info);
                }
                if self.tcp.is_some() {
                    self.tcp_timeout(f); // TCP flows: backoff and loss recovery
                }
            }
            next = next.min(self.flows[f as usize].rto_deadline);
        }
        if next < Time::MAX {
            self.hosts[h as usize].rto_at = next;
            self.events.schedule(next, Event::Rto(h));
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
        // Measurements over every data packet that reaches the receiver.
        flow.packets_received += 1;
        if pkt.pfc_wait_ns > 0 {
            let wait_ps = pkt.pfc_wait_ns as u64 * 1_000;
            flow.pfc_paused_packets += 1;
            flow.pfc_wait_total_ps += wait_ps;
            flow.pfc_wait_max_ps = flow.pfc_wait_max_ps.max(wait_ps);
        }
        flow.note_path(pkt.path_sig);
        if self.reseq.is_some() {
            self.resequence(h, pkt); // the resequencer passes it on to `transport_receive`
        } else {
            self.transport_receive(h, pkt);
        }
    }

    /// Receiver side of the transport: accept in order, NACK on a gap, re-ACK duplicates.
    pub(super) fn transport_receive(&mut self, h: u32, pkt: &Packet) {
        if self.tcp.as_ref().is_some_and(|t| t.is_tcp(pkt.flow)) {
            return self.tcp_receive(h, pkt);
        }
        let now = self.now;
        let nic = &self.cfg.nic;
        let flow = &mut self.flows[pkt.flow as usize];

        let reply = if pkt.seq == flow.expected {
            flow.expected += pkt.payload as u64;
            self.bytes_delivered += pkt.payload as u64;
            self.data_packets_delivered += 1;
            flow.unacked_packets += 1;
            flow.unacked_ce |= pkt.ce();
            // The flow's size (on its second line) is read only between ACKs.
            if flow.unacked_packets >= nic.ack_interval || flow.expected >= flow.spec.size {
                let cnp = flow.unacked_ce;
                flow.unacked_packets = 0;
                flow.unacked_ce = false;
                Some((PacketKind::Ack, cnp))
            } else {
                None
            }
        } else if pkt.seq > flow.expected {
            self.payload_discarded += pkt.payload as u64;
            flow.ooo_arrivals += 1;
            let degree = (pkt.seq - flow.expected).div_ceil(nic.payload.0);
            flow.max_ooo_degree = flow.max_ooo_degree.max(degree as u32);
            self.ood.record(degree);
            if now >= flow.nack_allowed_at || flow.last_nack != flow.expected {
                flow.last_nack = flow.expected;
                flow.nack_allowed_at = now + nic.nack_interval;
                Some((PacketKind::Nack, pkt.ce() || nic.cnp_on_nack))
            } else {
                None
            }
        } else {
            // Duplicate (already received): ACK again.
            self.payload_discarded += pkt.payload as u64;
            Some((PacketKind::Ack, pkt.ce()))
        };
        if let Some((kind, cnp)) = reply {
            let mut ack = reply_to(pkt, kind, nic.control_bytes);
            ack.seq = flow.expected;
            ack.set_cnp(cnp);
            // Echoes for host-side schemes: the ECN marks (ECE) of the packets an ACK covers
            // (an ACK's CNP flag is exactly that), or a NACK's packet's mark; and its path.
            ack.set_ce(if kind == PacketKind::Ack {
                cnp
            } else {
                pkt.ce()
            });
            if self.host_side.is_some() {
                ack.lb.path_tag = pkt.lb.path_tag;
            }
            self.host_enqueue(h, CONTROL_PRIO, ack);
        }
    }

    /// Hands `pkt`, made by host `h`, to priority `prio` of its NIC: queues it and lets the
    /// NIC send. A NIC that would take it out of the queue at once (idle, nothing queued,
    /// `prio` not paused: `host_send` then sends the one queued packet first, whatever its
    /// priority) sends it without the round trip through the queue, as a switch egress does
    /// (`PortState::pass_through`): most ACKs leave an idle receiver's NIC so.
    pub(super) fn host_enqueue(&mut self, h: u32, prio: u8, pkt: Packet) {
        let p = self.hosts[h as usize].port;
        let pid = self.arena.alloc(pkt);
        let now = self.now;
        let port = &mut self.ports[p as usize];
        if port.takes_at_once(prio, now) {
            port.pass_through(self.arena.get(pid), now);
            return self.start_tx(p, pid);
        }
        port.enqueue(prio, pid, &mut self.arena, now);
        self.try_send(p);
    }

    /// Sender side: cumulative ACK, go-back-N on NACK, congestion notification.
    fn receive_ack(&mut self, h: u32, pkt: &Packet) {
        if self.tcp.as_ref().is_some_and(|t| t.is_tcp(pkt.flow)) {
            return self.tcp_receive_ack(h, pkt);
        }
        let now = self.now;
        let f = pkt.flow;
        let flow = &mut self.flows[f as usize];
        if !flow.is_unfinished() {
            return;
        }
        let newly_acked = pkt.seq.saturating_sub(flow.snd_una);
        flow.snd_una = flow.snd_una.max(pkt.seq);
        if self.host_side.is_some() {
            let echo = AckEcho {
                nack: pkt.kind == PacketKind::Nack,
                path_tag: pkt.lb.path_tag,
                ce: pkt.ce(),
                rtt: now.saturating_sub(pkt.sent_at),
                newly_acked,
            };
            let info = flow.info();
            self.host_lb_ack(h, info, echo);
        }
        let flow = &mut self.flows[f as usize];
        if pkt.cnp() {
            flow.cnps_received += 1;
            if let (Some(d), CcConfig::Dcqcn(cfg)) = (&mut flow.cc, &self.cfg.cc) {
                if let Some(at) = d.on_cnp(cfg, now) {
                    self.events.schedule(at, Event::DcqcnDecrease(f));
                }
            }
        }
        if flow.snd_una >= flow.spec.size {
            self.flow_finished(h, f);
            return;
        }
        if pkt.kind == PacketKind::Nack {
            flow.nacks_received += 1;
            flow.snd_nxt = flow.snd_una;
            self.mark_sending(h, f);
        }
        if self.flows[f as usize].snd_una < self.flows[f as usize].high_sent {
            self.arm_rto(f);
        }
        self.host_kick(h);
    }

    /// Flow `f` of host `h` has every byte acknowledged: it finishes now and leaves the
    /// host's lists.
    pub(super) fn flow_finished(&mut self, h: u32, f: u32) {
        let n_flows = self.flows.len() as u64;
        let flow = &mut self.flows[f as usize];
        flow.finished_at = self.now;
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
    pub(super) fn unlist_sending(&mut self, h: u32, i: usize) {
        let host = &mut self.hosts[h as usize];
        let f = host.sending.remove(i).flow;
        if host.rr > i {
            host.rr -= 1;
        }
        self.flows[f as usize].in_sending = false;
    }

    /// Sets the pacing time of the entry at position `i` of host `h`'s sending list (and of
    /// its flow).
    pub(super) fn set_next_avail(&mut self, h: u32, i: usize, at: Time) {
        let host = &mut self.hosts[h as usize];
        self.flows[host.sending[i].flow as usize].next_avail = at;
        host.sending[i].next_avail = at;
    }

    /// Host `h`'s retransmission timer fires at `at` at the latest (an earlier pending
    /// event stays; a later one is superseded, see `rto_fired`).
    pub(super) fn host_rto_by(&mut self, h: u32, at: Time) {
        let host = &mut self.hosts[h as usize];
        if at < host.rto_at {
            host.rto_at = at;
            self.events.schedule(at, Event::Rto(h));
        }
    }

    pub(super) fn dcqcn_decrease(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        if let (Some(d), CcConfig::Dcqcn(cfg)) = (&mut flow.cc, &self.cfg.cc) {
            d.on_decrease_check(cfg, self.now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CcConfig, FlowState};
    use std::mem::{align_of, offset_of, size_of};

    /// The path counters agree with a plain count over every packet's path: distinct paths
    /// (saturating at 8) and changes between consecutive packets.
    #[test]
    fn path_counts_match_a_plain_count() {
        use crate::engine::{rng_stream, StreamKind};
        use rand::Rng as _;
        for (seed, n_paths) in [(1, 1), (2, 3), (3, 8), (4, 9), (5, 20)] {
            let mut rng = rng_stream(seed, StreamKind::Traffic, 0);
            let spec = crate::traffic::FlowSpec::scripted(0, 1, 1, crate::units::Time::ZERO);
            let line = crate::units::Rate::gbps(100);
            let mut flow = FlowState::new(0, spec, crate::units::Time::ZERO, line, &CcConfig::None);
            let mut seen = Vec::new();
            let (mut changes, mut last) = (0, None);
            for _ in 0..500 {
                // Runs of one path, as a flow's packets come.
                let sig = rng.gen_range(0..n_paths) * 7919 + 1;
                for _ in 0..rng.gen_range(1..4) {
                    flow.note_path(sig);
                    if last.is_some_and(|l| l != sig) {
                        changes += 1;
                    }
                    last = Some(sig);
                    if !seen.contains(&sig) {
                        seen.push(sig);
                    }
                }
            }
            assert_eq!(
                flow.paths_used as usize,
                seen.len().min(8),
                "{n_paths} paths"
            );
            assert_eq!(flow.path_changes, changes, "{n_paths} paths");
        }
    }

    /// Each group of a queue pair's fields starts a line of its own, as its doc says.
    #[test]
    fn a_flows_state_is_laid_out_by_line() {
        assert_eq!(align_of::<FlowState>(), 64);
        assert_eq!(offset_of!(FlowState, snd_nxt), 0);
        assert!(offset_of!(FlowState, in_sending) < 64);
        assert_eq!(offset_of!(FlowState, spec), 64);
        assert_eq!(offset_of!(FlowState, cc), 128);
        assert!(offset_of!(FlowState, timeouts) < 256);
        assert_eq!(offset_of!(FlowState, expected), 256);
        assert!(offset_of!(FlowState, paths_used) < 320);
        assert_eq!(offset_of!(FlowState, pfc_paused_packets), 320);
        assert!(offset_of!(FlowState, paths) + size_of::<[u32; 8]>() <= 384);
        assert_eq!(size_of::<FlowState>(), 448);
    }
}
