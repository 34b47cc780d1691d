//! IRN: RoCE with selective repeat and BDP flow control (`[nic] recovery = "irn"`; the NIC's
//! packet sizes, ACK and NACK pacing in `[nic]`, IRN's own parameters in `[nic.irn]`).
//!
//! Mittal et al., "Revisiting Network Support for RDMA", SIGCOMM 2018, §3; the ConWeave ns-3
//! simulator's IRN (`rdma-hw.cc`, `rdma-queue-pair.cc`) for the defaults. What is modelled
//! (`docs/reference/transport-irn.md` has the sources and the differences from the reference):
//! * Receiver: accepts packets out of order and holds them (a bitmap of the packets past the
//!   next expected one); an in-order packet is delivered with every held packet that follows
//!   it and acknowledged (every `nic.ack_interval` packets, as go-back-N); each out-of-order
//!   arrival is answered with a NACK carrying the cumulative ACK and the packet that
//!   triggered it (a one-packet SACK). A packet already held is NACKed again at most once per
//!   `nic.nack_interval`; a duplicate below the next expected byte is ACKed again.
//! * Sender: a SACK scoreboard (a bitmap of the packets past the cumulative ACK). A NACK, or
//!   a timeout, starts loss recovery: the first packet retransmitted is the one at the
//!   cumulative ACK, and any later packet counts as lost only if a packet after it has been
//!   selectively acknowledged (after a timeout, the packet at the cumulative ACK counts as
//!   lost too). Lost packets go before new ones; recovery ends once the cumulative ACK passes
//!   the end of the data sent when it began. `retransmit = "unsacked"` resends instead every
//!   packet not SACKed up to that end, as the ConWeave ns-3 simulator does.
//! * BDP flow control: a new packet leaves only if, with it, at most `nic.irn.bdp` bytes are
//!   outstanding past the cumulative ACK (retransmissions are not limited).
//! * Two timeouts: `rto_low` while at most `low_rto_packets` packets are outstanding,
//!   `rto_high` otherwise; the timer restarts on every packet sent and every ACK that leaves
//!   data outstanding. With PFC on, `timeouts_with_pfc = false` turns it off.
//! * Congestion control as go-back-N's: the flow is paced at its algorithm's rate (`[cc]`)
//!   within its window if it keeps one (HPCC), the algorithm's header bytes ride on every
//!   packet, and a NACK carries the CNP flag under `nic.cnp_on_nack` (as every out-of-order
//!   NACK of the reference does) or when the packet was marked.
//!
//! Not modelled: IRN's NIC-side changes to RDMA operations (read responses, atomics, the
//! receive WQE bookkeeping of its §4), the receiver's limited out-of-order buffer (it holds
//! whatever BDP flow control lets in), retransmissions lost again other than by a timeout.

mod config;
#[cfg(test)]
mod tests;

pub use config::{IrnConfig, Recovery, Retransmit, MAX_BDP_PACKETS};

use super::{
    cc_observation, cc_pace, AckOutcome, FixedTimeout, FlowState, NicTotals, Observation, Pace,
    Protocol, Segment, Transport, TransportSetup, Wire,
};
use crate::cc::{Cc, CcParams};
use crate::metrics::FlowRecord;
use crate::packet::{Packet, PacketKind};
use crate::units::{Rate, Time};

/// IRN's state for a run: the NIC's parameters and every IRN flow's state.
pub struct Irn {
    payload: u64,
    /// Header bytes of a data packet and bytes of an ACK/NACK, the congestion control's
    /// header included.
    header: u16,
    ack_bytes: u16,
    /// The congestion control keeps a window on the bytes in flight (HPCC).
    windowed: bool,
    ack_interval: u32,
    nack_interval: crate::units::Time,
    cnp_on_nack: bool,
    /// BDP flow control's cap on the bytes outstanding.
    bdp: u64,
    rto_low: Time,
    rto_high: Time,
    low_rto_packets: u64,
    /// The retransmission timer runs (off with PFC on and `timeouts_with_pfc = false`).
    timeouts: bool,
    /// Recovery resends every packet not SACKed up to its end (`retransmit = "unsacked"`),
    /// not only those below the highest SACK.
    resend_unsacked: bool,
    /// By flow id: the flow's IRN state, `None` for a flow of another transport (empty in a
    /// run without IRN flows).
    flows: Vec<Option<IrnFlow>>,
    /// The flows' bitmaps, `2 * words` words per flow by flow id: the sender's SACK
    /// scoreboard, then the receiver's packets held. Each is a ring of packet numbers
    /// (`seq / payload`) modulo its bits, more than BDP flow control lets be outstanding.
    bits: Vec<u64>,
    words: usize,
}

/// Sender and receiver state of one IRN flow, beside its [`FlowState`] (which keeps the
/// sequence numbers every transport shares: `snd_una`, `high_sent` (new data goes out
/// there), `expected`). IRN leaves `snd_nxt` at `high_sent`, but for the NIC moving it back
/// to `snd_una` at a timeout (which lists the flow among those with data ready).
#[derive(Clone, Debug, Default)]
struct IrnFlow {
    /// In loss recovery (since a NACK or a timeout), until the cumulative ACK reaches
    /// `recovery_end`, the end of the data sent when it began.
    recovery: bool,
    recovery_end: u64,
    /// Packets below this byte and not selectively acknowledged are lost: it is the start of
    /// the highest packet SACKed, or the end of the packet at the cumulative ACK after a
    /// timeout.
    lost_below: u64,
    /// Where to look for the next lost packet to retransmit.
    retx_from: u64,
    /// Receiver: payload bytes held out of order now, and the most ever held.
    held_bytes: u64,
    held_max: u64,
}

impl Irn {
    #[inline]
    fn state(&self, flow: &FlowState) -> &IrnFlow {
        self.flows[flow.id as usize].as_ref().expect("an IRN flow")
    }

    #[inline]
    fn state_mut(&mut self, flow: &FlowState) -> &mut IrnFlow {
        self.flows[flow.id as usize].as_mut().expect("an IRN flow")
    }

    /// The scoreboard (`side` 0) or the receiver's bitmap (`side` 1) of `flow`: its first
    /// word, and the bit of packet `seq`.
    #[inline]
    fn bit_of(&self, flow: &FlowState, side: usize, seq: u64) -> (usize, u64) {
        let ring = seq / self.payload % (self.words as u64 * 64);
        let word = (flow.id as usize * 2 + side) * self.words + (ring / 64) as usize;
        (word, 1 << (ring % 64))
    }

    #[inline]
    fn is_set(&self, flow: &FlowState, side: usize, seq: u64) -> bool {
        let (word, bit) = self.bit_of(flow, side, seq);
        self.bits[word] & bit != 0
    }

    #[inline]
    fn set(&mut self, flow: &FlowState, side: usize, seq: u64, on: bool) {
        let (word, bit) = self.bit_of(flow, side, seq);
        if on {
            self.bits[word] |= bit;
        } else {
            self.bits[word] &= !bit;
        }
    }

    /// Payload bytes of the packet at `seq`.
    #[inline]
    fn len_at(&self, flow: &FlowState, seq: u64) -> u64 {
        self.payload.min(flow.spec.size - seq)
    }

    /// The first lost packet at or after where the flow looks for one, if it is in recovery
    /// (with `retransmit = "unsacked"`, the first packet not SACKed before the end of the
    /// recovery).
    fn lost_packet(&self, flow: &FlowState) -> Option<u64> {
        let st = self.state(flow);
        if !st.recovery {
            return None;
        }
        let end = match self.resend_unsacked {
            true => st.lost_below.max(st.recovery_end),
            false => st.lost_below,
        };
        let mut seq = st.retx_from.max(flow.snd_una);
        while seq < end {
            if !self.is_set(flow, 0, seq) {
                return Some(seq);
            }
            seq += self.payload;
        }
        None
    }

    /// BDP flow control, and the congestion control's window if it keeps one (as go-back-N
    /// reads it: the bytes sent past the cumulative ACK below the window), let the flow's next
    /// new packet go.
    #[inline]
    fn may_send_new(&self, flow: &FlowState) -> bool {
        let seq = flow.high_sent;
        seq < flow.spec.size
            && seq + self.len_at(flow, seq) <= flow.snd_una + self.bdp
            && (!self.windowed || (flow.cc.window()).is_none_or(|w| seq - flow.snd_una < w))
    }

    /// The retransmission timeout now: `rto_low` with few packets outstanding (the packets
    /// from the cumulative ACK to the highest sent, SACKed ones included, as the reference
    /// counts them), `rto_high` otherwise.
    #[inline]
    fn rto(&self, flow: &FlowState) -> Time {
        let outstanding = (flow.high_sent - flow.snd_una).div_ceil(self.payload);
        match outstanding <= self.low_rto_packets {
            true => self.rto_low,
            false => self.rto_high,
        }
    }
}

impl Transport for Irn {
    fn new(setup: &TransportSetup, flows: &[FlowState]) -> Self {
        let nic = setup.nic;
        let irn = &nic.irn;
        let payload = nic.payload.0;
        let uses_irn = |f: &FlowState| f.protocol == Protocol::Irn;
        let any = flows.iter().any(uses_irn);
        // (Setup computes the fabric's BDP when some flow runs IRN without `bdp`.)
        let bdp = match (any, irn.bdp) {
            (false, _) => payload,
            (true, Some(bdp)) => bdp.0,
            (true, None) => setup.fabric_rtt.expect("the fabric's BDP, for IRN").bdp,
        };
        let bdp = bdp.max(payload);
        // Packets past the cumulative ACK that BDP flow control lets be outstanding, and one
        // more: at either end, every live bit is within that many packets of the base.
        let packets = bdp.div_ceil(payload) + 1;
        let words = packets.div_ceil(64).next_power_of_two() as usize;
        let wire = setup.roce_wire();
        Irn {
            payload,
            header: wire.header as u16,
            ack_bytes: wire.ack as u16,
            windowed: setup.cc.has_window(),
            ack_interval: nic.ack_interval,
            nack_interval: nic.nack_interval,
            cnp_on_nack: nic.cnp_on_nack,
            bdp,
            rto_low: irn.rto_low,
            rto_high: irn.rto_high,
            low_rto_packets: irn.low_rto_packets as u64,
            timeouts: irn.timeouts_with_pfc || !setup.lossless,
            resend_unsacked: irn.retransmit == Retransmit::Unsacked,
            flows: match any {
                true => flows
                    .iter()
                    .map(|f| uses_irn(f).then(IrnFlow::default))
                    .collect(),
                false => Vec::new(),
            },
            bits: match any {
                true => vec![0; flows.len() * 2 * words],
                false => Vec::new(),
            },
            words,
        }
    }

    fn wire(setup: &TransportSetup) -> Wire {
        setup.roce_wire()
    }

    fn cc(setup: &TransportSetup, line: Rate) -> Cc {
        setup.roce_cc(line)
    }

    fn fixed_timeout(setup: &TransportSetup) -> Option<FixedTimeout> {
        let irn = &setup.nic.irn;
        (irn.timeouts_with_pfc || !setup.lossless).then_some(FixedTimeout {
            key: "nic.irn.rto_low",
            rto: irn.rto_low,
            advice: "give a timeout well above it (default \"100us\")",
        })
    }

    /// For its BDP cap, unless `bdp` is set, and for HPCC.
    fn needs_fabric_rtt(setup: &TransportSetup) -> bool {
        setup.nic.irn.bdp.is_none() || setup.cc.needs_fabric_rtt()
    }

    /// A lost packet to retransmit, or a new packet that BDP flow control lets go.
    fn can_send(&self, flow: &FlowState) -> bool {
        self.lost_packet(flow).is_some() || self.may_send_new(flow)
    }

    /// The first lost packet, else the next new one.
    fn next_segment(&mut self, flow: &FlowState) -> Segment {
        let seq = match self.lost_packet(flow) {
            Some(seq) => {
                let end = seq + self.len_at(flow, seq);
                self.state_mut(flow).retx_from = end;
                seq
            }
            None => flow.high_sent,
        };
        Segment {
            seq,
            payload: self.len_at(flow, seq),
            header: self.header,
        }
    }

    fn pace(&self, flow: &mut FlowState, cc: &CcParams, now: Time) -> Pace {
        cc_pace(flow, cc, now)
    }

    /// Every data packet restarts the timer, with the timeout for what is now outstanding.
    fn timer_on_send(&self, flow: &FlowState, now: Time) -> Option<Time> {
        self.timeouts.then(|| now + self.rto(flow))
    }

    /// Deliver in order with what is held after it; hold out-of-order packets and NACK them;
    /// re-ACK duplicates.
    fn on_data(
        &mut self,
        flow: &mut FlowState,
        pkt: &Packet,
        now: Time,
        totals: &mut NicTotals,
    ) -> Option<Packet> {
        let payload = pkt.payload as u64;
        let size = flow.spec.size;
        let (kind, cnp, ce, sack) = if pkt.seq == flow.expected {
            flow.expected += payload;
            let mut delivered = (payload, 1);
            while flow.expected < size && self.is_set(flow, 1, flow.expected) {
                let (at, len) = (flow.expected, self.len_at(flow, flow.expected));
                self.set(flow, 1, at, false);
                flow.expected += len;
                delivered = (delivered.0 + len, delivered.1 + 1);
            }
            totals.bytes_delivered += delivered.0;
            totals.data_packets_delivered += delivered.1;
            let st = self.state_mut(flow);
            st.held_bytes -= delivered.0 - payload;
            flow.unacked_packets += 1;
            flow.unacked_ce |= pkt.ce();
            if flow.unacked_packets < self.ack_interval && flow.expected < size {
                return None;
            }
            let cnp = flow.unacked_ce;
            flow.unacked_packets = 0;
            flow.unacked_ce = false;
            (PacketKind::Ack, cnp, cnp, 0)
        } else if pkt.seq > flow.expected {
            flow.ooo_arrivals += 1;
            let degree = (pkt.seq - flow.expected).div_ceil(self.payload);
            flow.max_ooo_degree = flow.max_ooo_degree.max(degree as u32);
            totals.ood.record(degree);
            if self.is_set(flow, 1, pkt.seq) {
                totals.payload_discarded += payload;
                if now < flow.nack_allowed_at {
                    return None;
                }
            } else {
                self.set(flow, 1, pkt.seq, true);
                let st = self.state_mut(flow);
                st.held_bytes += payload;
                st.held_max = st.held_max.max(st.held_bytes);
            }
            flow.nack_allowed_at = now + self.nack_interval;
            let sack = (pkt.seq - flow.expected) / self.payload;
            (
                PacketKind::Nack,
                pkt.ce() || self.cnp_on_nack,
                pkt.ce(),
                sack,
            )
        } else {
            // Duplicate of a packet delivered: ACK again.
            totals.payload_discarded += payload;
            (PacketKind::Ack, pkt.ce(), pkt.ce(), 0)
        };
        let mut reply = pkt.reply(kind, self.ack_bytes);
        reply.seq = flow.expected;
        reply.set_sack_offset(sack as u32);
        reply.set_cnp(cnp);
        reply.set_ce(ce);
        Some(reply)
    }

    /// Cumulative ACK; a NACK's SACK goes on the scoreboard and starts recovery; recovery
    /// ends past its end; the timer restarts while data is outstanding.
    fn on_ack(
        &mut self,
        flow: &mut FlowState,
        _cc: &CcParams,
        pkt: &Packet,
        now: Time,
    ) -> AckOutcome {
        let newly_acked = pkt.seq.saturating_sub(flow.snd_una);
        // The scoreboard forgets what the cumulative ACK passes (at most its whole ring).
        let mut seq = flow.snd_una;
        let passed_ring = flow.snd_una + self.words as u64 * 64 * self.payload;
        while seq < pkt.seq.min(passed_ring) {
            self.set(flow, 0, seq, false);
            seq += self.payload;
        }
        flow.snd_una = flow.snd_una.max(pkt.seq);
        let nack = pkt.kind == PacketKind::Nack;
        // A NACK's SACK: the packet that triggered it.
        let sacked = nack.then(|| pkt.seq + pkt.sack_offset() as u64 * self.payload);
        if let Some(sacked) = sacked {
            flow.nacks_received += 1;
            // (A NACK overtaken by a later cumulative ACK may SACK a packet below it.)
            if sacked >= flow.snd_una && sacked < flow.high_sent {
                self.set(flow, 0, sacked, true);
            }
        }
        let (snd_una, high_sent) = (flow.snd_una, flow.high_sent);
        let st = self.state_mut(flow);
        if let Some(sacked) = sacked {
            st.lost_below = st.lost_below.max(sacked);
            if !st.recovery {
                st.recovery = true;
                st.recovery_end = high_sent;
                st.retx_from = snd_una;
            }
        }
        if st.recovery && snd_una >= st.recovery_end {
            st.recovery = false;
        }
        flow.snd_nxt = flow.high_sent;
        let outstanding = flow.snd_una < flow.high_sent;
        AckOutcome {
            newly_acked,
            loss: nack,
            go_back: false,
            timer: outstanding.then(|| self.timer_on_send(flow, now)).flatten(),
            send: self.can_send(flow),
            kick: true,
        }
    }

    /// Recovery from the cumulative ACK: its packet counts as lost, and so does every packet
    /// below the highest SACKed one that was not SACKed (retransmissions included).
    fn on_timeout(&mut self, flow: &mut FlowState, now: Time) {
        let head_end = flow.snd_una + self.len_at(flow, flow.snd_una);
        let st = self.state_mut(flow);
        st.recovery = true;
        st.recovery_end = flow.high_sent;
        st.retx_from = flow.snd_una;
        st.lost_below = st.lost_below.max(head_end);
        flow.rto_deadline = now + self.rto(flow);
    }

    fn fill_record(&self, flow: &FlowState, record: &mut FlowRecord) {
        record.ooo_buffer_max_bytes = self.state(flow).held_max;
    }

    fn observe(&self, flow: &FlowState, cc: &CcParams, now: Time) -> Observation {
        cc_observation(flow, cc, now)
    }
}
