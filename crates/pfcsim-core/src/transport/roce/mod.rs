//! RoCEv2 reliable connections with go-back-N (`kind = "roce"`; parameters in `[nic]`).
//!
//! Modelled on the NIC of the HPCC/ConWeave ns-3 simulators (`docs/reference/fabric.md` has the
//! details and sources):
//! * Sender: paced at its congestion control's rate (`[cc]`: DCQCN, TIMELY, HPCC, or line
//!   rate without), with at most its congestion control's window in flight (HPCC: the
//!   reference's `IsWinBound`, bytes sent beyond the cumulative ACK); go-back-N on NACK
//!   (resend from the first unacknowledged byte); a retransmission timeout
//!   (`nic.rto`, "0s" for none) restarted by every data packet sent and by every ACK that
//!   leaves data outstanding, after which the flow resends from its first unacknowledged
//!   byte.
//! * Receiver: accepts only the next expected packet; ACKs every `ack_interval` packets (and
//!   the last one); on a gap sends a NACK (at most one per expected sequence per
//!   `nack_interval`) and discards the packet; on a duplicate re-sends an ACK.
//! * The CNP flag rides on the ACK/NACK of a CE-marked packet (and on every NACK with
//!   `cnp_on_nack`, as in ConWeave); an ACK's ECN echo is its CNP flag, a NACK's the mark of
//!   the packet that triggered it.
//! * The congestion control's header bytes (TIMELY's timestamp, HPCC's telemetry) ride on
//!   every data packet and ACK/NACK.
//!
//! Not modelled: PCIe/host-side delays, multiple NICs per host.

mod config;

pub use config::NicConfig;

use super::{
    cc_observation, cc_pace, AckOutcome, FixedTimeout, FlowState, NicTotals, Observation, Pace,
    Segment, Transport, TransportSetup, Wire,
};
use crate::cc::{Cc, CcParams};
use crate::packet::{Packet, PacketKind};
use crate::units::{Rate, Time};

/// Go-back-N's state for a run: the NIC's parameters (per flow it keeps nothing beyond the
/// shared [`FlowState`]).
pub struct GoBackN {
    nic: NicConfig,
    /// Header bytes of a data packet and bytes of an ACK/NACK, the congestion control's
    /// header included.
    data_header: u16,
    ack_bytes: u16,
    /// The congestion control keeps a window on the bytes in flight.
    windowed: bool,
}

impl Transport for GoBackN {
    fn new(setup: &TransportSetup, _flows: &[FlowState]) -> Self {
        let wire = setup.roce_wire();
        GoBackN {
            nic: setup.nic.clone(),
            data_header: wire.header as u16,
            ack_bytes: wire.ack as u16,
            windowed: setup.cc.has_window(),
        }
    }

    fn wire(setup: &TransportSetup) -> Wire {
        setup.roce_wire()
    }

    fn cc(setup: &TransportSetup, line: Rate) -> Cc {
        setup.roce_cc(line)
    }

    fn needs_fabric_rtt(setup: &TransportSetup) -> bool {
        setup.cc.needs_fabric_rtt()
    }

    fn fixed_timeout(setup: &TransportSetup) -> Option<FixedTimeout> {
        (setup.nic.rto != Time::ZERO).then_some(FixedTimeout {
            key: "nic.rto",
            rto: setup.nic.rto,
            advice: "give a timeout well above it (default \"4ms\"), or \"0s\" for none",
        })
    }

    /// Bytes left, within the congestion control's window if it keeps one (the window is
    /// read only in a run whose algorithm has one).
    #[inline(always)]
    fn can_send(&self, flow: &FlowState) -> bool {
        flow.snd_nxt < flow.spec.size
            && (!self.windowed
                || flow
                    .cc
                    .window()
                    .is_none_or(|w| flow.snd_nxt.saturating_sub(flow.snd_una) < w))
    }

    #[inline]
    fn next_segment(&mut self, flow: &FlowState) -> Segment {
        let seq = flow.snd_nxt;
        Segment {
            seq,
            payload: self.nic.payload.0.min(flow.spec.size - seq),
            header: self.data_header,
        }
    }

    /// At the congestion control's rate, or line rate without one.
    #[inline(always)]
    fn pace(&self, flow: &mut FlowState, cc: &CcParams, now: Time) -> Pace {
        cc_pace(flow, cc, now)
    }

    /// Every data packet restarts the timer.
    #[inline]
    fn timer_on_send(&self, _flow: &FlowState, now: Time) -> Option<Time> {
        let rto = self.nic.rto;
        (rto != Time::ZERO).then(|| now + rto)
    }

    /// Accept in order, NACK on a gap, re-ACK duplicates.
    #[inline]
    fn on_data(
        &mut self,
        flow: &mut FlowState,
        pkt: &Packet,
        now: Time,
        totals: &mut NicTotals,
    ) -> Option<Packet> {
        let nic = &self.nic;
        let payload = pkt.payload as u64;
        let (kind, cnp, ce) = if pkt.seq == flow.expected {
            flow.expected += payload;
            totals.bytes_delivered += payload;
            totals.data_packets_delivered += 1;
            flow.unacked_packets += 1;
            flow.unacked_ce |= pkt.ce();
            // The flow's size (on its second line) is read only between ACKs.
            if flow.unacked_packets < nic.ack_interval && flow.expected < flow.spec.size {
                return None;
            }
            let cnp = flow.unacked_ce;
            flow.unacked_packets = 0;
            flow.unacked_ce = false;
            // An ACK's ECN echo is its CNP flag: the marks of the packets it covers.
            (PacketKind::Ack, cnp, cnp)
        } else if pkt.seq > flow.expected {
            totals.payload_discarded += payload;
            flow.ooo_arrivals += 1;
            let degree = (pkt.seq - flow.expected).div_ceil(nic.payload.0);
            flow.max_ooo_degree = flow.max_ooo_degree.max(degree as u32);
            totals.ood.record(degree);
            if now < flow.nack_allowed_at && flow.last_nack == flow.expected {
                return None;
            }
            flow.last_nack = flow.expected;
            flow.nack_allowed_at = now + nic.nack_interval;
            (PacketKind::Nack, pkt.ce() || nic.cnp_on_nack, pkt.ce())
        } else {
            // Duplicate (already received): ACK again.
            totals.payload_discarded += payload;
            (PacketKind::Ack, pkt.ce(), pkt.ce())
        };
        let mut reply = pkt.reply(kind, self.ack_bytes);
        reply.seq = flow.expected;
        reply.set_cnp(cnp);
        reply.set_ce(ce);
        Some(reply)
    }

    /// Cumulative ACK; a NACK goes back to the first unacknowledged byte; the timer restarts
    /// while data is outstanding; the NIC is asked to send after every ACK (a windowed flow,
    /// which its window may have held, is listed among the flows with data ready again).
    #[inline]
    fn on_ack(
        &mut self,
        flow: &mut FlowState,
        _cc: &CcParams,
        pkt: &Packet,
        now: Time,
    ) -> AckOutcome {
        let newly_acked = pkt.seq.saturating_sub(flow.snd_una);
        flow.snd_una = flow.snd_una.max(pkt.seq);
        let nack = pkt.kind == PacketKind::Nack;
        let outstanding = flow.snd_una < flow.high_sent;
        AckOutcome {
            newly_acked,
            loss: nack,
            go_back: nack,
            timer: outstanding.then(|| self.timer_on_send(flow, now)).flatten(),
            send: self.windowed,
            kick: true,
        }
    }

    fn on_timeout(&mut self, flow: &mut FlowState, now: Time) {
        flow.rto_deadline = now + self.nic.rto;
    }

    /// The congestion control's rate, target and window, or line rate.
    fn observe(&self, flow: &FlowState, cc: &CcParams, now: Time) -> Observation {
        cc_observation(flow, cc, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{CcConfig, FabricRtt, HpccConfig};
    use crate::traffic::FlowSpec;
    use crate::transport::{Protocol, TransportConfig};

    /// Under HPCC a flow may send only while the bytes past its cumulative ACK are below its
    /// window (one BDP at line rate); without a window (DCQCN) only the bytes left count.
    #[test]
    fn the_window_caps_the_bytes_in_flight() {
        let fabric = FabricRtt {
            rtt: Time::from_us(10),
            bdp: 125_000,
        };
        for (cc, window) in [
            (CcConfig::Hpcc(HpccConfig::default()), Some(125_000)),
            (CcConfig::Dcqcn(Default::default()), None),
        ] {
            let nic = NicConfig::default();
            let transport = TransportConfig::default();
            let setup = TransportSetup {
                nic: &nic,
                transport: &transport,
                cc: &cc,
                traffic: &[],
                lossless: true,
                fabric_rtt: Some(fabric),
            };
            let line = Rate::gbps(100);
            let how = (Protocol::GoBackN, GoBackN::cc(&setup, line));
            let spec = FlowSpec::scripted(0, 1, 10_000_000, Time::ZERO);
            let mut flow = FlowState::new(0, spec, Time::ZERO, line, how);
            let gbn = GoBackN::new(&setup, &[]);
            assert_eq!(flow.cc.window(), window);
            flow.snd_una = 1_000_000;
            flow.snd_nxt = 1_000_000 + 124_999;
            assert!(gbn.can_send(&flow));
            flow.snd_nxt = 1_000_000 + 125_000;
            assert_eq!(gbn.can_send(&flow), window.is_none(), "{cc:?}");
        }
    }

    /// The congestion control's header bytes ride on data packets and ACKs: HPCC's 42
    /// (telemetry), TIMELY's 8 (timestamp), none for DCQCN.
    #[test]
    fn the_cc_header_counts_on_the_wire() {
        for (cc, extra) in [
            (CcConfig::Hpcc(HpccConfig::default()), 42),
            (CcConfig::Timely(Default::default()), 8),
            (CcConfig::Dcqcn(Default::default()), 0),
        ] {
            let (nic, transport) = (NicConfig::default(), TransportConfig::default());
            let setup = TransportSetup {
                nic: &nic,
                transport: &transport,
                cc: &cc,
                traffic: &[],
                lossless: true,
                fabric_rtt: None,
            };
            let wire = GoBackN::wire(&setup);
            assert_eq!((wire.header, wire.ack), (48 + extra, 64 + extra));
        }
    }
}
