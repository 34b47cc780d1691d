//! TCP flows: a window-based byte stream with cumulative ACKs, NewReno loss recovery and,
//! optionally, DCTCP's ECN reaction (`[transport]`, `crate::transport`).
//!
//! A flow uses TCP when its `[[traffic]]` entry (or the run's `[transport] kind`) says so;
//! the choice is made at setup and every hook of `host.rs` hands TCP flows here, so RoCE
//! flows run the code they always ran. TCP flows share the host NIC with RoCE flows (the same
//! round-robin over flows with data ready, the same PFC obedience) and reuse the packet's
//! fields: data packets carry `seq`, pure ACKs carry the cumulative ACK in `seq`, the ECN echo
//! in `ce` and the data packet's send time in `sent_at` (a timestamp echo, RFC 7323 style).
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
//! * DCTCP (RFC 8257): the receiver echoes each packet's CE mark on its ACK (one ACK per data
//!   packet, so the echo is exact); the sender keeps alpha, the moving average (gain g) of the
//!   fraction of acknowledged bytes that were marked, updated once per window of data, and on
//!   an ECN echo cuts cwnd to cwnd (1 - alpha/2) (at least two MSS) at most once per window.
//!   Initial alpha is 1 (Linux, RFC 8257). Losses are handled as NewReno does.
//! * Receiver: accepts any segment; in-order data is delivered with whatever the
//!   out-of-order buffer holds contiguously after it; out-of-order segments are buffered
//!   (unbounded buffer); duplicates are discarded. Every data packet is acknowledged at once
//!   with the next expected byte.
//!
//! Not modelled: delayed ACKs, SACK, the receive window (the receiver's buffer is unbounded
//! and never advertises a limit), limited transmit, Nagle, connection setup and teardown
//! (a flow starts with its first data segment), TCP timestamps beyond the send-time echo,
//! F-RTO and other spurious-retransmission detection, pacing below line rate.

use super::host::{reply_to, NicConfig};
use super::{FabricConfig, FlowState, Simulation};
use crate::lb::host::AckEcho;
use crate::metrics::FlowRecord;
use crate::packet::{Packet, PacketKind};
use crate::port::CONTROL_PRIO;
use crate::transport::{TcpCc, TcpConfig, TransportKind};
use crate::units::Time;

/// The TCP state of a run's flows.
pub(super) struct Tcp {
    cfg: TcpConfig,
    mss: u64,
    /// By flow id: the flow's TCP state, `None` for a RoCE flow.
    flows: Vec<Option<TcpFlow>>,
    /// Unit tests: drops the data packets of TCP flows it returns `true` for, on arrival at
    /// the receiver (as if lost on the last link).
    #[cfg(test)]
    pub(super) drop_data: Option<Box<DropFilter>>,
}

/// Unit tests: which data packets to drop at the receiver.
#[cfg(test)]
pub(super) type DropFilter = dyn FnMut(&Packet) -> bool;

/// Sender and receiver state of one TCP flow, beside its [`FlowState`] (which keeps the
/// sequence numbers both transports share: `snd_una`, `snd_nxt`, `high_sent`, `expected`).
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
    /// DCTCP: alpha, the end of the current observation window, and the bytes acknowledged
    /// and marked in it; no further window cut before `snd_una` reaches `cwr_end`.
    alpha: f64,
    window_end: u64,
    acked: u64,
    marked: u64,
    cwr_end: u64,
    /// Receiver: out-of-order segments held, as disjoint sorted `(start, end, packets)`.
    ooo: Vec<(u64, u64, u32)>,
    fast_retransmits: u32,
    dup_acks: u32,
}

impl TcpConfig {
    /// The wire sizes of TCP segments and ACKs, in the form the ideal FCT reads.
    pub(super) fn wire(&self) -> NicConfig {
        NicConfig {
            payload: self.mss,
            header_bytes: self.header_bytes,
            control_bytes: self.ack_bytes,
            ..NicConfig::default()
        }
    }
}

impl FabricConfig {
    /// The NIC parameters that size `transport`'s packets.
    pub(super) fn wire_of(&self, transport: TransportKind) -> NicConfig {
        match transport {
            TransportKind::Roce => self.nic.clone(),
            TransportKind::Tcp => self.transport.tcp.wire(),
        }
    }

    /// The packet sizes behind the host-side schemes' unloaded timings (`PairTiming`): TCP's
    /// segment and ACK when every flow of the run uses TCP, else the NIC's (RoCE's; a run that
    /// mixes the transports keeps RoCE's, one timing serving both).
    pub(super) fn host_timing_wire(&self) -> NicConfig {
        let every_flow_tcp = if self.traffic_transports.is_empty() {
            self.transport.kind == TransportKind::Tcp
        } else {
            self.traffic_transports
                .iter()
                .all(|&t| t == TransportKind::Tcp)
        };
        self.wire_of(if every_flow_tcp {
            TransportKind::Tcp
        } else {
            TransportKind::Roce
        })
    }

    /// Bytes on the wire of the largest data packet of any flow's transport.
    pub(super) fn max_data_wire_bytes(&self) -> u64 {
        let tcp = self.traffic_transports.contains(&TransportKind::Tcp)
            || self.transport.kind == TransportKind::Tcp;
        let roce = self.nic.mtu_wire_bytes();
        if tcp {
            roce.max(self.transport.tcp.wire().mtu_wire_bytes())
        } else {
            roce
        }
    }
}

impl Tcp {
    /// The TCP state of `flows`, if any of them uses TCP.
    pub(super) fn new(cfg: &FabricConfig, flows: &[FlowState]) -> Option<Tcp> {
        let uses_tcp = |f: &FlowState| cfg.transport_of(f.spec.generator) == TransportKind::Tcp;
        // Looked for first: a run without TCP (most) builds no table (on R1 its 97,737 empty
        // entries took 0.7% of a run's CPU samples when memory was cold, zeroing fresh pages).
        if !flows.iter().any(uses_tcp) {
            return None;
        }
        let tcp = &cfg.transport.tcp;
        let mss = tcp.mss.0;
        let states: Vec<Option<TcpFlow>> = flows
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
                    alpha: 1.0,
                    window_end: 0,
                    acked: 0,
                    marked: 0,
                    cwr_end: 0,
                    ooo: Vec::new(),
                    fast_retransmits: 0,
                    dup_acks: 0,
                })
            })
            .collect();
        Some(Tcp {
            cfg: tcp.clone(),
            mss,
            flows: states,
            #[cfg(test)]
            drop_data: None,
        })
    }

    /// Flow `f` uses TCP.
    #[inline]
    pub(super) fn is_tcp(&self, f: u32) -> bool {
        self.flows[f as usize].is_some()
    }

    /// What a rate monitor records of TCP flow `f` (`None` for a RoCE flow): its congestion
    /// window in bytes and the rate that window allows, cwnd over the smoothed RTT (bit/s,
    /// at most `line`; `line` before the first RTT sample, when the initial window goes out
    /// at the line rate).
    pub(super) fn window_rate(&self, f: u32, line: f64) -> Option<(u64, f64)> {
        let st = self.flows[f as usize].as_ref()?;
        let rate = st
            .srtt
            .map_or(line, |srtt_ps| (st.cwnd * 8.0 * 1e12 / srtt_ps).min(line));
        Some((st.cwnd as u64, rate))
    }

    /// Writes the TCP flows' transport and counters into their records.
    pub(super) fn fill_records(&self, records: &mut [FlowRecord]) {
        for (rec, st) in records.iter_mut().zip(&self.flows) {
            if let Some(st) = st {
                rec.transport = "tcp";
                rec.fast_retransmits = st.fast_retransmits;
                rec.dup_acks = st.dup_acks;
            }
        }
    }
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

impl Simulation {
    /// Sends the next segment of TCP flow `f`, at position `i` of host `h`'s sending list:
    /// a pending retransmission, or new data if the window allows; a flow that may send
    /// nothing leaves the list and the NIC looks for another.
    #[inline(never)] // kept out of the RoCE paths that dispatch here
    pub(super) fn tcp_send(&mut self, h: u32, i: usize, f: u32) {
        let now = self.now;
        let tcp = self.tcp.as_mut().expect("a TCP run");
        let mss = tcp.mss;
        let header = tcp.cfg.header_bytes;
        let st = tcp.flows[f as usize].as_mut().expect("a TCP flow");
        let flow = &self.flows[f as usize];
        if !st.can_send(flow, mss) {
            self.unlist_sending(h, i);
            return self.host_send(h);
        }
        if !self.host_lb_may_send(h, f) {
            // Held by the host-side scheme until it releases the flow.
            self.unlist_sending(h, i);
            return self.host_send(h);
        }
        let tcp = self.tcp.as_mut().expect("a TCP run");
        let st = tcp.flows[f as usize].as_mut().expect("a TCP flow");
        let flow = &self.flows[f as usize];
        let seq = st.retx.take().unwrap_or(flow.snd_nxt);
        let p = self.hosts[h as usize].port;
        let path_tag = match flow.spec.path_tag {
            0 if self.host_side.is_some() => {
                let info = flow.info();
                let payload = mss.min(flow.spec.size - seq);
                self.host_lb_path_tag(h, info, seq, payload as u32)
            }
            pinned => pinned,
        };
        let prio = self.flows[f as usize].spec.priority;
        let pause_now = self.ports[p as usize].pause_clock(prio, now);
        let flow = &mut self.flows[f as usize];
        let payload = mss.min(flow.spec.size - seq);
        let pkt = flow.data_packet(
            seq,
            payload,
            header,
            path_tag,
            self.tag_coflows,
            now,
            pause_now,
        );
        if seq == flow.snd_nxt {
            flow.snd_nxt += payload;
        }
        self.payload_sent += payload;
        if seq < flow.high_sent {
            flow.retransmitted_bytes += payload;
        } else {
            self.bytes_offered += payload;
        }
        flow.high_sent = flow.high_sent.max(seq + payload);
        flow.packets_sent += 1;
        let next_avail = now + flow.line_rate.tx_time(pkt.wire_bytes as u64);
        let tcp = self.tcp.as_ref().expect("a TCP run");
        let st = tcp.flows[f as usize].as_ref().expect("a TCP flow");
        let more = st.can_send(flow, mss);
        let deadline =
            (flow.rto_deadline == Time::MAX).then(|| now + st.current_rto(tcp.cfg.rto_max));
        if let Some(at) = deadline {
            flow.rto_deadline = at;
            self.host_rto_by(h, at);
        }
        if more {
            self.set_next_avail(h, i, next_avail);
        } else {
            self.unlist_sending(h, i);
        }
        let pid = self.arena.alloc(pkt);
        self.start_tx(p, pid);
    }

    /// Receiver side of TCP flow `pkt.flow` at host `h`: deliver or buffer the segment and
    /// acknowledge it with the next expected byte and its CE mark.
    #[inline(never)] // kept out of the RoCE paths that dispatch here
    pub(super) fn tcp_receive(&mut self, h: u32, pkt: &Packet) {
        let f = pkt.flow as usize;
        let tcp = self.tcp.as_mut().expect("a TCP run");
        #[cfg(test)]
        if tcp.drop_data.as_mut().is_some_and(|d| d(pkt)) {
            self.flows[f].packets_received -= 1;
            self.drops += 1;
            self.payload_dropped += pkt.payload as u64;
            return;
        }
        let mss = tcp.mss;
        let ack_bytes = tcp.cfg.ack_bytes;
        let st = tcp.flows[f].as_mut().expect("a TCP flow");
        let flow = &mut self.flows[f];
        let (start, end) = (pkt.seq, pkt.seq + pkt.payload as u64);
        if end <= flow.expected {
            self.payload_discarded += pkt.payload as u64; // a duplicate
        } else if start <= flow.expected {
            let before = flow.expected;
            flow.expected = end;
            self.data_packets_delivered += 1;
            // What the out-of-order buffer holds contiguously after it follows.
            let contiguous = st.ooo.iter().take_while(|o| o.0 <= end).count();
            for &(_, e, n) in &st.ooo[..contiguous] {
                flow.expected = flow.expected.max(e);
                self.data_packets_delivered += n as u64;
            }
            st.ooo.drain(..contiguous);
            self.bytes_delivered += flow.expected - before;
            if flow.expected >= flow.spec.size {
                st.ooo = Vec::new();
            }
        } else {
            flow.ooo_arrivals += 1;
            let degree = (start - flow.expected).div_ceil(mss);
            flow.max_ooo_degree = flow.max_ooo_degree.max(degree as u32);
            self.ood.record(degree);
            let at = st.ooo.partition_point(|o| o.1 <= start);
            match st.ooo.get(at) {
                Some(o) if o.0 <= start && end <= o.1 => {
                    self.payload_discarded += pkt.payload as u64; // held already
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
        let mut ack = reply_to(pkt, PacketKind::Ack, ack_bytes);
        ack.seq = flow.expected;
        ack.set_ce(pkt.ce());
        if self.host_side.is_some() {
            ack.lb.path_tag = pkt.lb.path_tag;
        }
        self.host_enqueue(h, CONTROL_PRIO, ack);
    }

    /// Sender side of TCP flow `pkt.flow` at host `h`: an ACK arrived.
    #[inline(never)] // kept out of the RoCE paths that dispatch here
    pub(super) fn tcp_receive_ack(&mut self, h: u32, pkt: &Packet) {
        let now = self.now;
        let f = pkt.flow;
        let tcp = self.tcp.as_mut().expect("a TCP run");
        let (mss_u, cfg) = (tcp.mss, &tcp.cfg);
        let mss = mss_u as f64;
        let st = tcp.flows[f as usize].as_mut().expect("a TCP flow");
        let flow = &mut self.flows[f as usize];
        if !flow.is_unfinished() {
            return;
        }
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
        if cfg.cc == TcpCc::Dctcp {
            st.acked += newly;
            if pkt.ce() {
                st.marked += newly;
            }
            if flow.snd_una >= st.window_end && st.acked > 0 {
                let fraction = st.marked as f64 / st.acked as f64;
                st.alpha = (1.0 - cfg.dctcp_g) * st.alpha + cfg.dctcp_g * fraction;
                st.acked = 0;
                st.marked = 0;
                st.window_end = flow.snd_nxt;
            }
            if pkt.ce() && !st.in_recovery && flow.snd_una >= st.cwr_end {
                st.cwnd = (st.cwnd * (1.0 - st.alpha / 2.0)).max(2.0 * mss);
                st.ssthresh = st.cwnd;
                st.cwr_end = flow.snd_nxt;
            }
        }
        // The timer restarts on new data acknowledged and stops once nothing is outstanding.
        let restart = newly > 0;
        let outstanding = flow.snd_una < flow.high_sent;
        let rto = st.current_rto(cfg.rto_max);
        if !outstanding {
            flow.rto_deadline = Time::MAX;
        } else if restart {
            flow.rto_deadline = now + rto;
        }
        let deadline = flow.rto_deadline;
        let can_send = st.can_send(flow, mss_u);
        if self.host_side.is_some() {
            let echo = AckEcho {
                nack: fast_retransmit,
                path_tag: pkt.lb.path_tag,
                ce: pkt.ce(),
                rtt: now.saturating_sub(pkt.sent_at),
                newly_acked: newly,
            };
            let info = self.flows[f as usize].info();
            self.host_lb_ack(h, info, echo);
        }
        if self.flows[f as usize].snd_una >= self.flows[f as usize].spec.size {
            self.flow_finished(h, f);
            return;
        }
        if deadline < Time::MAX {
            self.host_rto_by(h, deadline);
        }
        if can_send {
            self.mark_sending(h, f);
            self.host_kick(h);
        }
    }

    /// Flow `f`'s retransmission timer expired (called by `rto_fired`, which has counted the
    /// timeout and moved `snd_nxt` back to `snd_una`): if it is a TCP flow, back off, halve
    /// ssthresh, restart from one segment and rearm.
    #[inline(never)] // kept out of the RoCE paths that dispatch here
    pub(super) fn tcp_timeout(&mut self, f: u32) {
        let now = self.now;
        let tcp = self.tcp.as_mut().expect("a TCP run");
        let mss = tcp.mss as f64;
        let Some(st) = tcp.flows[f as usize].as_mut() else {
            return;
        };
        let flow = &mut self.flows[f as usize];
        let flight = (flow.high_sent - flow.snd_una) as f64;
        st.ssthresh = (flight / 2.0).max(2.0 * mss);
        st.cwnd = mss;
        st.in_recovery = false;
        st.dupacks = 0;
        st.retx = None;
        st.recover = Some(flow.high_sent);
        st.cwr_end = flow.high_sent;
        st.backoff += 1;
        flow.rto_deadline = now + st.current_rto(tcp.cfg.rto_max);
    }
}
