//! TCP flows: a window-based byte stream with cumulative ACKs, NewReno loss recovery and,
//! optionally, DCTCP's ECN reaction (`[transport]`, `crate::transport`).
//!
//! A flow uses TCP when its `[[traffic]]` entry (or the run's `[transport] kind`) says so.
//! TCP flows share the host NIC with RoCE flows (the same round-robin over flows with data
//! ready, the same PFC obedience) and reuse the packet's fields: data packets carry `seq`,
//! pure ACKs carry the cumulative ACK in `seq`, the ECN echo in `ce` and the data packet's
//! send time in `sent_at` (a timestamp echo, RFC 7323 style).
//!
//! Modelled:
//! * Sender: congestion window in bytes; slow start from `init_cwnd` segments (cwnd grows by
//!   the bytes newly acknowledged, at most one MSS per ACK), congestion avoidance (one MSS
//!   per window); fast retransmit on `dupack_threshold` duplicate ACKs and NewReno fast
//!   recovery (RFC 6582: window inflation by one MSS per further duplicate ACK, a partial ACK
//!   retransmits the next hole and deflates the window, a full ACK ends recovery with cwnd =
//!   min(ssthresh, flight + MSS); no new fast retransmit before the ACKs pass the highest
//!   byte sent at the last timeout); retransmission timer (RFC 6298): SRTT/RTTVAR from every
//!   ACK that acknowledges new data (the echoed send time makes retransmitted segments'
//!   samples valid), RTO = SRTT + 4 RTTVAR within [`rto_min`, `rto_max`], doubled at each
//!   expiry (exponential backoff, reset by the next RTT sample), restarted by every ACK of new
//!   data, started by a transmission when not running. A timeout sets ssthresh to half the
//!   outstanding bytes (at least two MSS), cwnd to one MSS, and resends from the first
//!   unacknowledged byte (go-back-N from there, in slow start).
//! * DCTCP (RFC 8257, `cc = "dctcp"`, `crate::cc::dctcp`): the receiver echoes each packet's
//!   CE mark on its ACK (one ACK per data packet, so the echo is exact) and the flow's
//!   congestion control shrinks the window on echoes. Losses are handled as NewReno does.
//! * Receiver: accepts any segment; in-order data is delivered with whatever the
//!   out-of-order buffer holds contiguously after it; out-of-order segments are buffered
//!   (unbounded buffer); duplicates are discarded. Every data packet is acknowledged at once
//!   with the next expected byte.
//!
//! Not modelled: delayed ACKs, SACK, the receive window (the receiver's buffer is unbounded
//! and never advertises a limit), limited transmit, Nagle, connection setup and teardown
//! (a flow starts with its first data segment), TCP timestamps beyond the send-time echo,
//! F-RTO and other spurious-retransmission detection, pacing below line rate.

mod config;
#[cfg(test)]
mod tests;

pub use config::{TcpCc, TcpConfig};

use super::{
    AckOutcome, FlowState, NicTotals, Observation, Segment, Transport, TransportSetup, Wire,
};
use crate::cc::{AckSignal, Cc, CcParams, Dctcp, Window};
use crate::metrics::FlowRecord;
use crate::packet::{Packet, PacketKind};
use crate::units::{Rate, Time};

/// TCP's state for a run.
pub struct Tcp {
    cfg: TcpConfig,
    mss: u64,
    /// By flow id: the flow's TCP state, `None` for a flow of another transport (empty in a
    /// run without TCP flows).
    flows: Vec<Option<TcpFlow>>,
}

/// Sender and receiver state of one TCP flow, beside its [`FlowState`] (which keeps the
/// sequence numbers every transport shares: `snd_una`, `snd_nxt`, `high_sent`, `expected`).
struct TcpFlow {
    /// Congestion window and slow-start threshold, in bytes.
    cwnd: f64,
    ssthresh: f64,
    /// Duplicate ACKs in a row.
    dupacks: u32,
    in_recovery: bool,
    /// NewReno's `recover`: the end of the data sent when the last recovery or timeout began
    /// (no fast retransmit until the cumulative ACK reaches it; `None`: never).
    recover: Option<u64>,
    /// A segment to retransmit before any new data (fast retransmit, partial ACK).
    retx: Option<u64>,
    /// Smoothed RTT and RTT variance in picoseconds (`None` before the first sample).
    srtt: Option<f64>,
    rttvar: f64,
    /// RTO before backoff, and the number of doublings applied since the last RTT sample.
    rto: Time,
    backoff: u32,
    /// Receiver: out-of-order segments held, as disjoint sorted `(start, end, packets)`.
    ooo: Vec<(u64, u64, u32)>,
    fast_retransmits: u32,
    dup_acks: u32,
}

impl TcpFlow {
    /// The retransmission timeout now: the RTO doubled once per backoff, at most `rto_max`.
    fn current_rto(&self, rto_max: Time) -> Time {
        let backed = self.rto.ps().saturating_mul(1u64 << self.backoff.min(32));
        Time(backed.min(rto_max.ps()))
    }

    /// The flow may put a segment on the wire now: a retransmission is pending, or the next
    /// new segment fits in the window.
    fn can_send(&self, flow: &FlowState, mss: u64) -> bool {
        if self.retx.is_some() {
            return true;
        }
        let size = flow.spec.size;
        if flow.snd_nxt >= size {
            return false;
        }
        let seg = mss.min(size - flow.snd_nxt);
        flow.snd_nxt + seg <= flow.snd_una + self.cwnd as u64
    }
}

impl Tcp {
    /// Flow `flow`'s TCP state.
    #[inline]
    fn state(&self, flow: &FlowState) -> &TcpFlow {
        self.flows[flow.id as usize].as_ref().expect("a TCP flow")
    }

    #[inline]
    fn state_mut(&mut self, flow: &FlowState) -> &mut TcpFlow {
        self.flows[flow.id as usize].as_mut().expect("a TCP flow")
    }
}

impl Transport for Tcp {
    fn new(setup: &TransportSetup, flows: &[FlowState]) -> Self {
        let tcp = &setup.transport.tcp;
        let mss = tcp.mss.0;
        let uses_tcp = |f: &FlowState| f.protocol == super::Protocol::Tcp;
        // A run without TCP (most) builds no table (on R1 its 97,737 empty entries took 0.7%
        // of a run's CPU samples when memory was cold, zeroing fresh pages).
        let states = if flows.iter().any(uses_tcp) {
            flows
                .iter()
                .map(|f| {
                    uses_tcp(f).then(|| TcpFlow {
                        cwnd: (tcp.init_cwnd as u64 * mss) as f64,
                        ssthresh: f64::INFINITY,
                        dupacks: 0,
                        in_recovery: false,
                        recover: None,
                        retx: None,
                        srtt: None,
                        rttvar: 0.0,
                        rto: tcp.rto_initial,
                        backoff: 0,
                        ooo: Vec::new(),
                        fast_retransmits: 0,
                        dup_acks: 0,
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Tcp {
            cfg: tcp.clone(),
            mss,
            flows: states,
        }
    }

    fn wire(setup: &TransportSetup) -> Wire {
        setup.transport.tcp.wire()
    }

    /// DCTCP's ECN reaction with `cc = "dctcp"`; NewReno's window alone otherwise.
    fn cc(setup: &TransportSetup, _line: Rate) -> Cc {
        match setup.transport.tcp.cc {
            TcpCc::Dctcp => Cc::Dctcp(Dctcp::default()),
            TcpCc::Newreno => Cc::None,
        }
    }

    /// A pending retransmission, or new data that fits in the window.
    #[inline]
    fn can_send(&self, flow: &FlowState) -> bool {
        self.state(flow).can_send(flow, self.mss)
    }

    #[inline]
    fn next_segment(&mut self, flow: &FlowState) -> Segment {
        let (mss, header) = (self.mss, self.cfg.header_bytes);
        let seq = self.state_mut(flow).retx.take().unwrap_or(flow.snd_nxt);
        Segment {
            seq,
            payload: mss.min(flow.spec.size - seq),
            header,
        }
    }

    /// A transmission starts the timer when it is not running.
    fn timer_on_send(&self, flow: &FlowState, now: Time) -> Option<Time> {
        (flow.rto_deadline == Time::MAX)
            .then(|| now + self.state(flow).current_rto(self.cfg.rto_max))
    }

    /// Deliver the segment (with what the out-of-order buffer holds after it) or buffer it,
    /// and acknowledge it with the next expected byte and its CE mark.
    fn on_data(
        &mut self,
        flow: &mut FlowState,
        pkt: &Packet,
        _now: Time,
        totals: &mut NicTotals,
    ) -> Option<Packet> {
        let mss = self.mss;
        let st = self.flows[flow.id as usize].as_mut().expect("a TCP flow");
        let (start, end) = (pkt.seq, pkt.seq + pkt.payload as u64);
        if end <= flow.expected {
            totals.payload_discarded += pkt.payload as u64; // a duplicate
        } else if start <= flow.expected {
            let before = flow.expected;
            flow.expected = end;
            totals.data_packets_delivered += 1;
            // What the out-of-order buffer holds contiguously after it follows.
            let contiguous = st.ooo.iter().take_while(|o| o.0 <= end).count();
            for &(_, e, n) in &st.ooo[..contiguous] {
                flow.expected = flow.expected.max(e);
                totals.data_packets_delivered += n as u64;
            }
            st.ooo.drain(..contiguous);
            totals.bytes_delivered += flow.expected - before;
            if flow.expected >= flow.spec.size {
                st.ooo = Vec::new();
            }
        } else {
            flow.ooo_arrivals += 1;
            let degree = (start - flow.expected).div_ceil(mss);
            flow.max_ooo_degree = flow.max_ooo_degree.max(degree as u32);
            totals.ood.record(degree);
            let at = st.ooo.partition_point(|o| o.1 <= start);
            match st.ooo.get(at) {
                Some(o) if o.0 <= start && end <= o.1 => {
                    totals.payload_discarded += pkt.payload as u64; // held already
                }
                _ => {
                    // Segments keep their boundaries, so a new one touches its neighbours
                    // at most at their ends.
                    st.ooo.insert(at, (start, end, 1));
                    if at + 1 < st.ooo.len() && st.ooo[at + 1].0 <= end {
                        let next = st.ooo.remove(at + 1);
                        st.ooo[at].1 = st.ooo[at].1.max(next.1);
                        st.ooo[at].2 += next.2;
                    }
                    if at > 0 && st.ooo[at - 1].1 >= start {
                        let this = st.ooo.remove(at);
                        st.ooo[at - 1].1 = st.ooo[at - 1].1.max(this.1);
                        st.ooo[at - 1].2 += this.2;
                    }
                }
            }
        }
        let mut ack = pkt.reply(PacketKind::Ack, self.cfg.ack_bytes);
        ack.seq = flow.expected;
        ack.set_ce(pkt.ce());
        Some(ack)
    }

    /// RTT sample, window growth, fast retransmit and NewReno recovery, the congestion
    /// control's reaction to the ECN echo, and the timer: restarted by new data acknowledged,
    /// stopped once nothing is outstanding.
    fn on_ack(
        &mut self,
        flow: &mut FlowState,
        cc: &CcParams,
        pkt: &Packet,
        now: Time,
    ) -> AckOutcome {
        let (mss_u, cfg) = (self.mss, &self.cfg);
        let mss = mss_u as f64;
        let st = self.flows[flow.id as usize].as_mut().expect("a TCP flow");
        let newly = pkt.seq.saturating_sub(flow.snd_una);
        let mut fast_retransmit = false;
        if newly > 0 {
            flow.snd_una = pkt.seq;
            flow.snd_nxt = flow.snd_nxt.max(flow.snd_una);
            // RTT sample (RFC 6298), valid for retransmissions too: the ACK echoes the send
            // time of the very packet that made it.
            let r = now.saturating_sub(pkt.sent_at).ps() as f64;
            match st.srtt {
                None => {
                    st.srtt = Some(r);
                    st.rttvar = r / 2.0;
                }
                Some(srtt) => {
                    st.rttvar = 0.75 * st.rttvar + 0.25 * (srtt - r).abs();
                    st.srtt = Some(0.875 * srtt + 0.125 * r);
                }
            }
            let rto = st.srtt.unwrap_or(r) + 4.0 * st.rttvar;
            st.rto = Time(rto.ceil() as u64).clamp(cfg.rto_min, cfg.rto_max);
            st.backoff = 0;
            if st.in_recovery {
                let recover = st.recover.unwrap_or(0);
                if flow.snd_una >= recover {
                    // Full ACK: recovery ends.
                    let flight = (flow.snd_nxt - flow.snd_una) as f64;
                    st.cwnd = st.ssthresh.min(flight.max(mss) + mss);
                    st.in_recovery = false;
                    st.dupacks = 0;
                } else {
                    // Partial ACK: the next hole goes again, the window deflates.
                    st.retx = Some(flow.snd_una);
                    st.fast_retransmits += 1;
                    st.cwnd = (st.cwnd - newly as f64 + mss).max(mss);
                }
            } else {
                st.dupacks = 0;
                if st.cwnd < st.ssthresh {
                    st.cwnd += (newly as f64).min(mss);
                } else {
                    st.cwnd += mss * mss / st.cwnd;
                }
            }
        } else if pkt.seq == flow.snd_una && flow.snd_una < flow.high_sent {
            st.dup_acks += 1;
            st.dupacks += 1;
            if st.in_recovery {
                st.cwnd += mss; // inflation: a segment left the network
            } else if st.dupacks == cfg.dupack_threshold
                && !matches!(st.recover, Some(r) if flow.snd_una < r)
            {
                let flight = (flow.high_sent - flow.snd_una) as f64;
                st.ssthresh = (flight / 2.0).max(2.0 * mss);
                st.cwnd = st.ssthresh + cfg.dupack_threshold as f64 * mss;
                st.in_recovery = true;
                st.recover = Some(flow.high_sent);
                st.retx = Some(flow.snd_una);
                st.fast_retransmits += 1;
                fast_retransmit = true;
            }
        }
        let signal = AckSignal {
            newly_acked: newly,
            ce: pkt.ce(),
            snd_una: flow.snd_una,
            snd_nxt: flow.snd_nxt,
            in_recovery: st.in_recovery,
        };
        let mut window = Window {
            cwnd: st.cwnd,
            ssthresh: st.ssthresh,
            mss,
        };
        flow.cc.on_ack(cc, &signal, &mut window);
        (st.cwnd, st.ssthresh) = (window.cwnd, window.ssthresh);
        // The timer restarts on new data acknowledged and stops once nothing is outstanding.
        let outstanding = flow.snd_una < flow.high_sent;
        if !outstanding {
            flow.rto_deadline = Time::MAX;
        } else if newly > 0 {
            flow.rto_deadline = now + st.current_rto(cfg.rto_max);
        }
        let can_send = st.can_send(flow, mss_u);
        AckOutcome {
            newly_acked: newly,
            loss: fast_retransmit,
            go_back: false,
            timer: (flow.rto_deadline < Time::MAX).then_some(flow.rto_deadline),
            send: can_send,
            kick: can_send,
        }
    }

    /// Back off, halve ssthresh (of the outstanding bytes, at least two segments), restart
    /// from one segment in slow start, and rearm.
    fn on_timeout(&mut self, flow: &mut FlowState, now: Time) {
        let mss = self.mss as f64;
        let rto_max = self.cfg.rto_max;
        let st = self.flows[flow.id as usize].as_mut().expect("a TCP flow");
        let flight = (flow.high_sent - flow.snd_una) as f64;
        st.ssthresh = (flight / 2.0).max(2.0 * mss);
        st.cwnd = mss;
        st.in_recovery = false;
        st.dupacks = 0;
        st.retx = None;
        st.recover = Some(flow.high_sent);
        flow.cc.on_timeout(flow.high_sent);
        st.backoff += 1;
        flow.rto_deadline = now + st.current_rto(rto_max);
    }

    fn fill_record(&self, flow: &FlowState, record: &mut FlowRecord) {
        let st = self.state(flow);
        record.fast_retransmits = st.fast_retransmits;
        record.dup_acks = st.dup_acks;
    }

    /// Its congestion window, and the rate that window allows: cwnd over the smoothed RTT
    /// (at most the line rate; the line rate before the first RTT sample, when the initial
    /// window goes out at the line rate).
    fn observe(&self, flow: &FlowState, _cc: &CcParams, _now: Time) -> Observation {
        let st = self.state(flow);
        let line = flow.line_rate.bps() as f64;
        let rate = st
            .srtt
            .map_or(line, |srtt_ps| (st.cwnd * 8.0 * 1e12 / srtt_ps).min(line));
        Observation {
            rate,
            target: None,
            cwnd: Some(st.cwnd as u64),
        }
    }
}
