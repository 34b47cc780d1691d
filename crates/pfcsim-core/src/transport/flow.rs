//! The state of one flow that every transport shares ([`FlowState`]): the sender's and the
//! receiver's sequence numbers, pacing and timer deadline, congestion-control state, and the
//! measurements of the flow's record.

use super::Protocol;
use crate::cc::Cc;
use crate::lb::host::FlowInfo;
use crate::metrics::FlowRecord;
use crate::packet::{Packet, PacketKind};
use crate::traffic::FlowSpec;
use crate::units::{Rate, Time};

/// Sender, receiver and measurement state of one flow (a RoCE queue pair, a TCP connection)
/// that every transport shares, laid out on 64-byte lines
/// by what touches it (the layout is checked by a test): in a large fabric a flow's state has
/// left the cache between its packets, and each line a packet touches is a miss.
///
/// * line 0: the sender's sequence state and the flow's transport (every packet sent, every
///   ACK);
/// * line 1: the flow's spec (every packet sent: addresses, size, priority; an ACK: size);
/// * lines 2-3: congestion control and the sender's counters (every packet sent; an ACK with
///   CNP);
/// * line 4: the receiver (every data packet received; the ACK coalescing and NACK throttling
///   words are go-back-N's, kept here since its receiver reads the line anyway), line 5 its
///   rarer counters (packets held by PFC, a new path);
/// * then what is read at the end of the run or by the coflow scheduler only.
#[repr(C, align(64))]
pub struct FlowState {
    // Line 0.
    pub(crate) snd_nxt: u64,
    pub(crate) snd_una: u64,
    /// Highest byte ever sent (bytes below it that are sent again are retransmissions).
    pub(crate) high_sent: u64,
    pub(crate) next_avail: Time,
    /// When the retransmission timer expires if nothing is sent or acknowledged before.
    pub(crate) rto_deadline: Time,
    /// Reading of the host port's pause clock at the QP's last transmission.
    pub(crate) pause_mark: u64,
    /// When the last byte was acknowledged (`Time::MAX`: not yet; [`FlowState::finished`]).
    finished_at: Time,
    pub(crate) id: u32,
    pub(crate) sport: u16,
    pub(crate) in_sending: bool,
    /// The transport the flow runs.
    pub(crate) protocol: Protocol,
    // Line 1.
    pub(crate) spec: FlowSpec,
    // Lines 2-3.
    /// The state of the flow's congestion control.
    pub(crate) cc: Cc,
    pub(crate) line_rate: Rate,
    /// Counters of [`FlowRecord`] kept by the sender.
    pub(crate) packets_sent: u64,
    pub(crate) retransmitted_bytes: u64,
    pub(crate) cnps_received: u32,
    pub(crate) nacks_received: u32,
    pub(crate) timeouts: u32,
    // Line 4.
    pub(crate) expected: u64,
    pub(crate) last_nack: u64,
    pub(crate) nack_allowed_at: Time,
    /// Counters of [`FlowRecord`] kept by the receiver.
    pub(crate) packets_received: u64,
    pub(crate) ooo_arrivals: u64,
    pub(crate) unacked_packets: u32,
    last_path: u32,
    pub(crate) max_ooo_degree: u32,
    path_changes: u32,
    pub(crate) unacked_ce: bool,
    /// Distinct paths seen, saturating at 8 (the first 8 are in `paths`).
    paths_used: u8,
    /// `protocol` again, in the receiver's line: the receiver's dispatch reads it here, so
    /// that a data packet's arrival does not touch the sender's line (in a large run a miss).
    pub(crate) protocol_at_receiver: Protocol,
    // Line 5.
    pfc_paused_packets: u64,
    pfc_wait_total_ps: u64,
    pfc_wait_max_ps: u64,
    paths: [u32; 8],
    // Line 6 (a little of line 5).
    pub(crate) ideal_fct: Time,
    /// The coflow scheduler's rate for the flow, bit/s (infinite: none; `varys.rs`).
    pub(crate) rate_cap_bps: f64,
}

impl FlowState {
    /// Flow `id` of `spec`, alone on its path in `ideal_fct`, sent by a NIC of rate `line`
    /// with `protocol` and congestion control `cc`.
    pub(crate) fn new(
        id: u32,
        spec: FlowSpec,
        ideal_fct: Time,
        line: Rate,
        (protocol, cc): (Protocol, Cc),
    ) -> Self {
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
            protocol,
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
            protocol_at_receiver: protocol,
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
    pub(crate) fn prefetch_for(&self, kind: PacketKind) {
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
    pub(crate) fn note_path(&mut self, sig: u32) {
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

    /// Counts the data packet carrying `payload` bytes from `seq` that the sender just put on
    /// the wire (a retransmission if the bytes were sent before). Returns the bytes sent for
    /// the first time.
    #[inline]
    pub(crate) fn note_sent(&mut self, seq: u64, payload: u64) -> u64 {
        if seq == self.snd_nxt {
            self.snd_nxt += payload;
        }
        let new = if seq < self.high_sent {
            self.retransmitted_bytes += payload;
            0
        } else {
            payload
        };
        self.high_sent = self.high_sent.max(seq + payload);
        self.packets_sent += 1;
        new
    }

    /// Measures a data packet of the flow reaching its receiver, whatever the transport then
    /// does with it: the count, the time PFC held it, its path.
    #[inline]
    pub(crate) fn note_arrival(&mut self, pkt: &Packet) {
        self.packets_received += 1;
        if pkt.pfc_wait_ns > 0 {
            let wait_ps = pkt.pfc_wait_ns as u64 * 1_000;
            self.pfc_paused_packets += 1;
            self.pfc_wait_total_ps += wait_ps;
            self.pfc_wait_max_ps = self.pfc_wait_max_ps.max(wait_ps);
        }
        self.note_path(pkt.path_sig);
    }

    /// The last byte was acknowledged at `now`.
    pub(crate) fn finish(&mut self, now: Time) {
        self.finished_at = now;
    }

    /// When the last byte was acknowledged, if it was.
    pub(crate) fn finished(&self) -> Option<Time> {
        (self.finished_at != Time::MAX).then_some(self.finished_at)
    }

    pub(crate) fn is_unfinished(&self) -> bool {
        self.finished_at == Time::MAX
    }

    pub(crate) fn in_sending(&self) -> bool {
        self.in_sending
    }

    /// Bytes the receiver has not yet acknowledged.
    pub(crate) fn unacknowledged(&self) -> u64 {
        self.spec.size - self.snd_una
    }

    /// Next byte the receiver expects.
    pub(crate) fn expected(&self) -> u64 {
        self.expected
    }

    /// The byte the receiver last sent a NACK for (`u64::MAX`: none yet; unit tests).
    #[cfg(test)]
    pub(crate) fn last_nack(&self) -> u64 {
        self.last_nack
    }

    /// The data packet of this flow carrying `payload` bytes from `seq`, sent at `now` with
    /// `header` bytes of headers on path `path_tag` (and, with `coflow_tag`, its coflow in
    /// `lb.meta`, [`crate::lb::Capabilities::coflow_tag`]); `pause_now` is the host port's
    /// pause clock for the flow's priority: the packet carries the time the flow was held by
    /// PFC at its own NIC since its last packet. Every transport sends through it.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn data_packet(
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
    pub(crate) fn info(&self) -> FlowInfo {
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
    pub(crate) fn record(&self) -> FlowRecord {
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
            // The transport's own fields are filled in by the transport (`Transport::fill_record`).
            ..FlowRecord::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Cc, FlowState, Protocol};
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
            let how = (Protocol::GoBackN, Cc::None);
            let mut flow = FlowState::new(0, spec, crate::units::Time::ZERO, line, how);
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
        assert!(offset_of!(FlowState, protocol) < 64);
        assert_eq!(offset_of!(FlowState, spec), 64);
        assert_eq!(offset_of!(FlowState, cc), 128);
        assert!(offset_of!(FlowState, timeouts) < 256);
        assert_eq!(offset_of!(FlowState, expected), 256);
        assert!(offset_of!(FlowState, paths_used) < 320);
        assert!(offset_of!(FlowState, protocol_at_receiver) >= 256);
        assert!(offset_of!(FlowState, protocol_at_receiver) < 320);
        assert_eq!(offset_of!(FlowState, pfc_paused_packets), 320);
        assert!(offset_of!(FlowState, paths) + size_of::<[u32; 8]>() <= 384);
        assert_eq!(size_of::<FlowState>(), 448);
    }
}
