//! Transports: what the NICs at both ends of a flow run to move its bytes reliably, and the
//! `[transport]` table that says which one each flow uses.
//!
//! A transport is one folder (its parameters, its per-flow state, what its sender and
//! receiver do) implementing [`Transport`], and one row of [`transports!`] below, which makes
//! [`Protocol`] (the transport a flow runs, one byte of its [`FlowState`]) and [`Transports`]
//! (every transport's state for a run, with the dispatch of each hook through a `match` on the
//! flow's protocol: no indirect call on the data path).
//!
//! * [`roce`]: RoCEv2 reliable connections with go-back-N (`kind = "roce"`, the default).
//! * [`irn`]: RoCEv2 with IRN's selective repeat and BDP flow control (`kind = "roce"` with
//!   `[nic] recovery = "irn"`).
//! * [`tcp`]: TCP with NewReno loss recovery (`kind = "tcp"`).
//!
//! The NIC (`sim/host.rs`) is the same for every transport: it lists the flows with data
//! ready, round-robins over them at the line rate and the pacing their transport asks for,
//! obeys PFC, keeps one timer per host, and asks the flow's transport what to send
//! ([`Transport::can_send`], [`Transport::next_segment`], [`Transport::pace`],
//! [`Transport::timer_on_send`]), what a data packet means to the receiver
//! ([`Transport::on_data`]: what it delivers, and the ACK or NACK to return), what an ACK
//! means to the sender ([`Transport::on_ack`]), and what a timeout does
//! ([`Transport::on_timeout`]). Congestion control (`crate::cc`) sits behind the transport:
//! the flow's [`Cc`] state is chosen by its transport ([`Transport::cc`]), paces it
//! ([`Transport::pace`]) or shapes its window (TCP calls it on each ACK), and the NIC hands it
//! CNPs and its timer.
//!
//! `[transport] kind` is the run's default; a `[[traffic]]` entry may override it with its own
//! `transport = "roce" | "tcp"`, so that RoCE and TCP flows share a fabric (in different
//! priorities, typically). `[transport.tcp]` holds TCP's parameters whatever the default is;
//! `[nic]` holds RoCE's. A spec without `[transport]` (the default: every flow RoCE) resolves
//! to the same text as before TCP existed, so that stores and fingerprints of RoCE runs do not
//! move.

pub mod flow;
pub mod irn;
pub mod roce;
pub mod tcp;

pub use crate::traffic::TransportKind;
pub use flow::FlowState;
pub use irn::{Irn, IrnConfig, Recovery};
pub use roce::{GoBackN, NicConfig};
pub use tcp::{Tcp, TcpCc, TcpConfig};

use crate::cc::{Cc, CcConfig, CcParams, Dcqcn, FabricRtt, Hpcc, Timely};
use crate::metrics::{FlowRecord, OodHistogram};
use crate::packet::Packet;
use crate::units::{Rate, Time};
use serde::{Deserialize, Serialize};

/// The `[transport]` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct TransportConfig {
    /// Transport of the flows whose `[[traffic]]` entry does not name one.
    pub kind: TransportKind,
    pub tcp: TcpConfig,
}

crate::tagged::table!(TransportConfig);

impl TransportConfig {
    /// The default table (every flow RoCE, TCP's defaults): left out of a resolved spec.
    pub fn is_default(&self) -> bool {
        *self == TransportConfig::default()
    }

    /// Checks the values that the types alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        self.tcp.validate()
    }
}

/// The sizes of a transport's packets on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wire {
    /// Payload bytes of a full-size data packet.
    pub payload: u64,
    /// Header bytes a data packet adds on the wire.
    pub header: u64,
    /// Bytes of an ACK on the wire.
    pub ack: u64,
}

impl Wire {
    /// Bytes on the wire of a full-size data packet.
    pub fn mtu(&self) -> u64 {
        self.payload + self.header
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
pub fn ideal_fct(size: u64, path: &[(Rate, Time)], wire: &Wire) -> Time {
    let (payload, header) = (wire.payload, wire.header);
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
        .map(|&(rate, delay)| (rate.tx_time(wire.ack) + delay).ps() as u128)
        .sum();
    Time(u64::try_from(last_departure + ack_back).unwrap_or(u64::MAX))
}

/// The transport parts of a run's configuration, as setup reads them before any flow is
/// built: the `[nic]`, `[transport]` and `[cc]` tables and the transport of each `[[traffic]]`
/// entry.
#[derive(Clone, Copy, Debug)]
pub struct TransportSetup<'a> {
    pub nic: &'a NicConfig,
    pub transport: &'a TransportConfig,
    pub cc: &'a CcConfig,
    /// The transport of the flows of each `[[traffic]]` entry (by `FlowSpec::generator`); an
    /// entry not listed (flows built in code) uses `transport.kind`.
    pub traffic: &'a [TransportKind],
    /// PFC is on at the switches (`switch.pfc.enabled`).
    pub lossless: bool,
    /// The fabric's largest base RTT and BDP, computed by setup only for a run that needs
    /// them ([`TransportSetup::needs_fabric_rtt`]; `sim/setup.rs`, `fabric_rtt`).
    pub fabric_rtt: Option<FabricRtt>,
}

/// A retransmission timeout set in advance (not from measured RTTs), which setup checks
/// against the base RTT of every flow that runs the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FixedTimeout {
    /// The spec key that sets it.
    pub key: &'static str,
    pub rto: Time,
    /// What to do when it is too short.
    pub advice: &'static str,
}

impl TransportSetup<'_> {
    /// The transport of the flows of generator `generator`.
    pub fn kind_of(&self, generator: u16) -> TransportKind {
        self.traffic
            .get(generator as usize)
            .copied()
            .unwrap_or(self.transport.kind)
    }

    /// What the flows of `kind` run.
    pub fn protocol(&self, kind: TransportKind) -> Protocol {
        match (kind, self.nic.recovery) {
            (TransportKind::Roce, Recovery::GoBackN) => Protocol::GoBackN,
            (TransportKind::Roce, Recovery::Irn) => Protocol::Irn,
            (TransportKind::Tcp, _) => Protocol::Tcp,
        }
    }

    /// What the flows of generator `generator` run.
    pub fn protocol_of(&self, generator: u16) -> Protocol {
        self.protocol(self.kind_of(generator))
    }

    /// The transports of the run's flows: each `[[traffic]]` entry's, and the run's default.
    fn protocols(&self) -> impl Iterator<Item = Protocol> + '_ {
        (self.traffic.iter().chain([&self.transport.kind])).map(|&k| self.protocol(k))
    }

    /// The packet sizes behind the host-side schemes' unloaded timings (`PairTiming`): those of
    /// the one transport every flow of the run uses, else the NIC's (RoCE's; a run that mixes
    /// transports keeps RoCE's, one timing serving all).
    pub fn host_timing_wire(&self) -> Wire {
        let first = self.kind_of(0);
        let kinds = if self.traffic.is_empty() {
            &[first][..]
        } else {
            self.traffic
        };
        match kinds.iter().all(|&k| k == first) {
            true => self.wire(self.protocol(first)),
            false => self.nic.wire(),
        }
    }

    /// Bytes on the wire of the largest data packet: the NIC's (RoCE's), or that of any
    /// transport a flow may use if larger.
    pub fn max_data_wire_bytes(&self) -> u64 {
        let nic = self.nic.wire().mtu();
        self.protocols()
            .map(|p| self.wire(p).mtu())
            .fold(nic, u64::max)
    }

    /// Some flow runs a transport that needs the fabric's largest base RTT and BDP
    /// ([`TransportSetup::fabric_rtt`]; [`Transport::needs_fabric_rtt`]: a RoCE transport
    /// under HPCC, IRN without a BDP of its own).
    pub fn needs_fabric_rtt(&self) -> bool {
        self.protocols().any(|p| self.protocol_needs_fabric_rtt(p))
    }

    /// The sizes of a RoCE transport's packets: the NIC's, with the congestion control's
    /// header (TIMELY's timestamp, HPCC's telemetry) on every data packet and ACK/NACK.
    pub fn roce_wire(&self) -> Wire {
        let extra = self.cc.header_bytes() as u64;
        let nic = self.nic.wire();
        Wire {
            header: nic.header + extra,
            ack: nic.ack + extra,
            ..nic
        }
    }

    /// The congestion control of a new RoCE flow sent at `line` (`[cc]`).
    pub fn roce_cc(&self, line: Rate) -> Cc {
        match self.cc {
            CcConfig::Dcqcn(_) => Cc::Dcqcn(Dcqcn::new(line)),
            CcConfig::Timely(_) => Cc::Timely(Timely::new(line)),
            CcConfig::Hpcc(c) => {
                let fabric = self
                    .fabric_rtt
                    .expect("setup computes the fabric's RTT for HPCC");
                Cc::Hpcc(Hpcc::new(line, c, fabric))
            }
            CcConfig::None => Cc::None,
        }
    }

    /// The parameters of every congestion control, for the run.
    pub fn cc_params(&self) -> CcParams {
        CcParams::new(self.cc, self.transport.tcp.dctcp())
    }
}

/// The next data packet a sender puts on the wire: `payload` bytes from byte `seq`, with
/// `header` bytes of headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub seq: u64,
    pub payload: u64,
    pub header: u16,
}

/// How the NIC spaces a flow's packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// At this rate (bit/s; a per-flow rate limiter, whose next sending time the flow keeps
    /// even while it has nothing to send).
    Rate(f64),
    /// As fast as the line serializes them: no pacing state is kept.
    Line,
}

/// What the NICs sent and delivered, over every flow of the run: the transports count a
/// data packet's delivery into it as they take it (`Transport::on_data`), the NIC the rest.
#[derive(Clone, Debug, Default)]
pub struct NicTotals {
    /// Payload bytes sent for the first time, and sent in all (retransmissions included).
    pub bytes_offered: u64,
    pub payload_sent: u64,
    /// Payload bytes and data packets delivered in order to the receivers.
    pub bytes_delivered: u64,
    pub data_packets_delivered: u64,
    /// Payload bytes that reached a receiver and were thrown away (duplicates; out of order
    /// for go-back-N).
    pub payload_discarded: u64,
    /// The out-of-order degrees of every out-of-order data arrival at a receiver.
    pub ood: OodHistogram,
}

/// How a RoCE transport paces a flow: at its congestion control's rate, or line rate without
/// one. DCQCN, the common case, is read first with one comparison: the dispatch over every
/// algorithm (a jump table since the rate-based ones were added) cost R1 8 instructions a
/// packet.
#[inline(always)]
pub(crate) fn cc_pace(flow: &mut FlowState, cc: &CcParams, now: Time) -> Pace {
    let rate = match &mut flow.cc {
        Cc::Dcqcn(d) => d.rate(&cc.dcqcn, now),
        other => other.rate(cc, now).unwrap_or(flow.line_rate.bps() as f64),
    };
    Pace::Rate(rate)
}

/// What a rate monitor records of a RoCE flow: its congestion control's rate, target and
/// window, or line rate.
pub(crate) fn cc_observation(flow: &FlowState, cc: &CcParams, now: Time) -> Observation {
    let reading = flow.cc.observe(cc, now);
    Observation {
        rate: reading.map_or(flow.line_rate.bps() as f64, |r| r.rate),
        target: reading.and_then(|r| r.target),
        cwnd: flow.cc.window(),
    }
}

/// What an ACK or NACK did at its sender, and what the NIC does next (after the host-side
/// scheme has seen the ACK and the congestion control its CNP, and unless the flow finished).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Bytes acknowledged for the first time.
    pub newly_acked: u64,
    /// The ACK reports a loss (a NACK; TCP's fast retransmit), as host-side schemes see it.
    pub loss: bool,
    /// Go back to the first unacknowledged byte (a NACK, counted in the flow's record).
    pub go_back: bool,
    /// (Re)start the retransmission timer with this deadline.
    pub timer: Option<Time>,
    /// The flow may send: list it among the NIC's flows with data ready.
    pub send: bool,
    /// Let the NIC send what it can.
    pub kick: bool,
}

/// What a rate monitor records of a flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// The rate the flow may send at now (bit/s).
    pub rate: f64,
    /// Its congestion control's target rate, if it has one.
    pub target: Option<f64>,
    /// Its congestion window in bytes, if it has one.
    pub cwnd: Option<u64>,
}

/// A transport: its state for a run, and what its sender and receiver do. Hooks take the
/// flow's shared state ([`FlowState`]); a transport keeps what else it needs per flow itself,
/// by flow id.
pub trait Transport: Sized {
    /// Its state for a run whose flows are `flows` (it serves those whose protocol is its
    /// own; with none, it should allocate nothing).
    fn new(setup: &TransportSetup, flows: &[FlowState]) -> Self;

    /// The sizes of its packets.
    fn wire(setup: &TransportSetup) -> Wire;

    /// The congestion control of a new flow sent at `line`.
    fn cc(_setup: &TransportSetup, _line: Rate) -> Cc {
        Cc::None
    }

    /// Its retransmission timeout, if set in advance.
    fn fixed_timeout(_setup: &TransportSetup) -> Option<FixedTimeout> {
        None
    }

    /// It needs the fabric's largest base RTT and BDP (`TransportSetup::fabric_rtt`), which
    /// setup then computes.
    fn needs_fabric_rtt(_setup: &TransportSetup) -> bool {
        false
    }

    /// The flow may put a data packet on the wire now (bytes left; a window that allows it; a
    /// retransmission pending). Asked before each packet and after it, to keep the flow among
    /// the NIC's flows with data ready.
    #[inline]
    fn can_send(&self, flow: &FlowState) -> bool {
        flow.snd_nxt < flow.spec.size
    }

    /// The data packet to send now (the flow [`Transport::can_send`]); may take a pending
    /// retransmission.
    fn next_segment(&mut self, flow: &FlowState) -> Segment;

    /// How the NIC spaces the flow's packets.
    #[inline]
    fn pace(&self, _flow: &mut FlowState, _cc: &CcParams, _now: Time) -> Pace {
        Pace::Line
    }

    /// A data packet of the flow just left: the retransmission deadline to set, if the timer
    /// (re)starts.
    fn timer_on_send(&self, flow: &FlowState, now: Time) -> Option<Time>;

    /// A data packet of the flow reached its receiver: counts what it delivers or discards
    /// into `totals`, and answers with an ACK or NACK, if any (`pkt.reply`, which the NIC
    /// sends at once in its control priority).
    fn on_data(
        &mut self,
        flow: &mut FlowState,
        pkt: &Packet,
        now: Time,
        totals: &mut NicTotals,
    ) -> Option<Packet>;

    /// An ACK or NACK of the unfinished flow reached its sender.
    fn on_ack(
        &mut self,
        flow: &mut FlowState,
        cc: &CcParams,
        pkt: &Packet,
        now: Time,
    ) -> AckOutcome;

    /// The flow's retransmission timer expired (the NIC has counted the timeout and moved
    /// `snd_nxt` back to `snd_una`): set the next deadline.
    fn on_timeout(&mut self, flow: &mut FlowState, now: Time);

    /// Adds the transport's own fields to the flow's record.
    fn fill_record(&self, _flow: &FlowState, _record: &mut FlowRecord) {}

    /// What a rate monitor records of the unfinished flow at `now`, without changing it.
    fn observe(&self, flow: &FlowState, cc: &CcParams, now: Time) -> Observation;
}

/// The registry of transports: one row per transport, `Variant(field, "name"): Type`. Makes
/// [`Protocol`], [`Transports`] (field `field` holds the transport's state) and the dispatch
/// of every hook of [`Transport`] through a `match` on the flow's protocol. `"name"` is what
/// flow records call it.
macro_rules! transports {
    (
        $(#[$ddoc:meta])* $dvariant:ident($dfield:ident, $dname:literal): $dty:ty,
        $($(#[$doc:meta])* $variant:ident($field:ident, $name:literal): $ty:ty,)+
    ) => {
        transports! {
            @all [$(#[$ddoc])* $dvariant($dfield, $dname): $dty, $($(#[$doc])* $variant($field, $name): $ty,)+]
            $dvariant($dfield), [$($variant($field)),+]
        }
    };
    (
        @all [$($(#[$doc:meta])* $variant:ident($field:ident, $name:literal): $ty:ty,)+]
        $dvariant:ident($dfield:ident), [$($ovariant:ident($ofield:ident)),+]
    ) => {
        /// The transport a flow runs.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub enum Protocol {
            $($(#[$doc])* $variant,)+
        }

        impl Protocol {
            /// What flow records call it (`FlowRecord::transport`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Protocol::$variant => $name,)+
                }
            }
        }

        /// Every transport's state for one run, and the parameters of the congestion
        /// controls behind them.
        pub struct Transports {
            $(pub $field: $ty,)+
            pub cc: CcParams,
        }

        impl TransportSetup<'_> {
            /// See [`Transport::wire`].
            pub fn wire(&self, protocol: Protocol) -> Wire {
                match protocol {
                    $(Protocol::$variant => <$ty>::wire(self),)+
                }
            }

            /// See [`Transport::cc`].
            pub fn cc(&self, protocol: Protocol, line: Rate) -> Cc {
                match protocol {
                    $(Protocol::$variant => <$ty>::cc(self, line),)+
                }
            }

            /// See [`Transport::fixed_timeout`].
            pub fn fixed_timeout(&self, protocol: Protocol) -> Option<FixedTimeout> {
                match protocol {
                    $(Protocol::$variant => <$ty>::fixed_timeout(self),)+
                }
            }

            /// See [`Transport::needs_fabric_rtt`].
            fn protocol_needs_fabric_rtt(&self, protocol: Protocol) -> bool {
                match protocol {
                    $(Protocol::$variant => <$ty>::needs_fabric_rtt(self),)+
                }
            }
        }

        impl Transports {
            /// The transports' state for a run of `flows`.
            pub fn new(setup: &TransportSetup, flows: &[FlowState]) -> Transports {
                Transports {
                    $($field: <$ty>::new(setup, flows),)+
                    cc: setup.cc_params(),
                }
            }
        }

        // The hooks of the data path: the first row (the default transport) is tested first
        // and called inline, the others out of line, so that a run of the default pays one
        // compare and branch per hook (a `match` over three rows cost R1 about 15
        // instructions a data packet more than one over two).
        impl Transports {
            /// See [`Transport::can_send`].
            #[inline(always)]
            pub fn can_send(&self, flow: &FlowState) -> bool {
                if flow.protocol == Protocol::$dvariant {
                    self.$dfield.can_send(flow)
                } else {
                    self.can_send_other(flow)
                }
            }

            /// [`Transports::can_send`] of the transports other than the default.
            #[inline(never)]
            fn can_send_other(&self, flow: &FlowState) -> bool {
                match flow.protocol {
                    $(Protocol::$ovariant => self.$ofield.can_send(flow),)+
                    Protocol::$dvariant => unreachable!("dispatched inline"),
                }
            }

            /// See [`Transport::next_segment`].
            #[inline(always)]
            pub fn next_segment(&mut self, flow: &FlowState) -> Segment {
                if flow.protocol == Protocol::$dvariant {
                    self.$dfield.next_segment(flow)
                } else {
                    self.next_segment_other(flow)
                }
            }

            /// [`Transports::next_segment`] of the transports other than the default.
            #[inline(never)]
            fn next_segment_other(&mut self, flow: &FlowState) -> Segment {
                match flow.protocol {
                    $(Protocol::$ovariant => self.$ofield.next_segment(flow),)+
                    Protocol::$dvariant => unreachable!("dispatched inline"),
                }
            }

            /// See [`Transport::pace`].
            #[inline(always)]
            pub fn pace(&self, flow: &mut FlowState, now: Time) -> Pace {
                if flow.protocol == Protocol::$dvariant {
                    self.$dfield.pace(flow, &self.cc, now)
                } else {
                    self.pace_other(flow, now)
                }
            }

            /// [`Transports::pace`] of the transports other than the default.
            #[inline(never)]
            fn pace_other(&self, flow: &mut FlowState, now: Time) -> Pace {
                match flow.protocol {
                    $(Protocol::$ovariant => self.$ofield.pace(flow, &self.cc, now),)+
                    Protocol::$dvariant => unreachable!("dispatched inline"),
                }
            }

            /// See [`Transport::timer_on_send`].
            #[inline(always)]
            pub fn timer_on_send(&self, flow: &FlowState, now: Time) -> Option<Time> {
                if flow.protocol == Protocol::$dvariant {
                    self.$dfield.timer_on_send(flow, now)
                } else {
                    self.timer_on_send_other(flow, now)
                }
            }

            /// [`Transports::timer_on_send`] of the transports other than the default.
            #[inline(never)]
            fn timer_on_send_other(&self, flow: &FlowState, now: Time) -> Option<Time> {
                match flow.protocol {
                    $(Protocol::$ovariant => self.$ofield.timer_on_send(flow, now),)+
                    Protocol::$dvariant => unreachable!("dispatched inline"),
                }
            }

            /// See [`Transport::on_data`].
            #[inline(always)]
            pub fn on_data(
                &mut self,
                flow: &mut FlowState,
                pkt: &Packet,
                now: Time,
                totals: &mut NicTotals,
            ) -> Option<Packet> {
                if flow.protocol_at_receiver == Protocol::$dvariant {
                    self.$dfield.on_data(flow, pkt, now, totals)
                } else {
                    self.on_data_other(flow, pkt, now, totals)
                }
            }

            /// [`Transports::on_data`] of the transports other than the default.
            #[inline(never)]
            fn on_data_other(
                &mut self,
                flow: &mut FlowState,
                pkt: &Packet,
                now: Time,
                totals: &mut NicTotals,
            ) -> Option<Packet> {
                match flow.protocol_at_receiver {
                    $(Protocol::$ovariant => self.$ofield.on_data(flow, pkt, now, totals),)+
                    Protocol::$dvariant => unreachable!("dispatched inline"),
                }
            }

            /// See [`Transport::on_ack`].
            #[inline(always)]
            pub fn on_ack(
                &mut self,
                flow: &mut FlowState,
                pkt: &Packet,
                now: Time,
            ) -> AckOutcome {
                if flow.protocol == Protocol::$dvariant {
                    self.$dfield.on_ack(flow, &self.cc, pkt, now)
                } else {
                    self.on_ack_other(flow, pkt, now)
                }
            }

            /// [`Transports::on_ack`] of the transports other than the default.
            #[inline(never)]
            fn on_ack_other(
                &mut self,
                flow: &mut FlowState,
                pkt: &Packet,
                now: Time,
            ) -> AckOutcome {
                match flow.protocol {
                    $(Protocol::$ovariant => self.$ofield.on_ack(flow, &self.cc, pkt, now),)+
                    Protocol::$dvariant => unreachable!("dispatched inline"),
                }
            }

            /// See [`Transport::on_timeout`].
            pub fn on_timeout(&mut self, flow: &mut FlowState, now: Time) {
                match flow.protocol {
                    $(Protocol::$variant => self.$field.on_timeout(flow, now),)+
                }
            }

            /// The flow's record: the shared measurements, the transport's name and its own
            /// fields ([`Transport::fill_record`]).
            pub fn record(&self, flow: &FlowState) -> FlowRecord {
                let mut record = flow.record();
                record.transport = flow.protocol.name();
                match flow.protocol {
                    $(Protocol::$variant => self.$field.fill_record(flow, &mut record),)+
                }
                record
            }

            /// See [`Transport::observe`].
            pub fn observe(&self, flow: &FlowState, now: Time) -> Observation {
                match flow.protocol {
                    $(Protocol::$variant => self.$field.observe(flow, &self.cc, now),)+
                }
            }
        }
    };
}

transports! {
    /// RoCEv2 reliable connection with go-back-N (`roce/`).
    GoBackN(go_back_n, "roce"): GoBackN,
    /// TCP, NewReno loss recovery (`tcp/`).
    Tcp(tcp, "tcp"): Tcp,
    /// RoCEv2 with IRN's selective repeat and BDP flow control (`irn/`).
    Irn(irn, "irn"): Irn,
}
