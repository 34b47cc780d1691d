//! Congestion control: what sets a flow's sending rate, or shapes the window its transport
//! keeps, from the signals the network returns (CNPs, ECN echoes on ACKs).
//!
//! Each algorithm is one file (its parameters, its state per flow, and what it does with each
//! signal, as an implementation of [`CongestionControl`]) and one row of [`algorithms!`]
//! below, which makes [`Cc`] (a flow's state, a closed enum: the data path dispatches with a
//! `match`, no indirect call) and [`CcParams`] (every algorithm's parameters, for the run).
//! The transport a flow runs (`crate::transport`) asks its algorithm for the pacing rate and
//! hands it the signals; the NIC (`sim/host.rs`) delivers CNPs and the algorithm's timer.
//!
//! * [`dcqcn`]: DCQCN, rate-based, for RoCE flows (`[cc] kind = "dcqcn"`).
//! * [`dctcp`]: DCTCP's reaction to ECN echoes, on the window of TCP flows
//!   (`transport.tcp.cc = "dctcp"`).
//! * [`timely`]: TIMELY, rate-based on the RTT gradient, for RoCE flows
//!   (`[cc] kind = "timely"`).
//! * [`hpcc`]: HPCC, a window (and the rate it paces at) from in-band telemetry, for RoCE
//!   flows (`[cc] kind = "hpcc"`).
//!
//! What an algorithm needs of the rest of the run is said by [`CcConfig`]: header bytes on
//! the flow's packets ([`CcConfig::header_bytes`]), the ACKs' feedback
//! ([`CcConfig::reads_acks`], delivered through [`CongestionControl::on_feedback`]), the
//! switches' telemetry ([`CcConfig::carries_int`]), the fabric's base RTT and BDP
//! ([`CcConfig::needs_fabric_rtt`]) and a window on the bytes in flight
//! ([`CongestionControl::window`]). A run of an algorithm that needs none of them pays for none.
//!
//! A flow without an algorithm (`Cc::None`: `[cc] kind = "none"` for RoCE, NewReno for TCP,
//! whose window is the transport's own) sends at line rate within its transport's window.

pub mod dcqcn;
pub mod dctcp;
pub mod hpcc;
pub mod timely;

pub use dcqcn::{Dcqcn, DcqcnConfig};
pub use dctcp::{Dctcp, DctcpConfig};
pub use hpcc::{Hpcc, HpccConfig};
pub use timely::{Timely, TimelyConfig};

use crate::units::Time;

/// Congestion control run by the RoCE NICs (the `[cc]` table).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
// Written as a table with `kind = "<variant>"` (see `crate::tagged`).
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum CcConfig {
    /// DCQCN (Mellanox flavour).
    Dcqcn(DcqcnConfig),
    /// TIMELY (RTT gradient).
    Timely(TimelyConfig),
    /// HPCC (in-band telemetry).
    Hpcc(HpccConfig),
    /// No congestion control: every flow sends at line rate.
    None,
}

crate::tagged::internally_tagged!(CcConfig, "kind");

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig::Dcqcn(DcqcnConfig::default())
    }
}

impl CcConfig {
    /// Checks the parameters of the congestion control (`[cc]`).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcConfig::Dcqcn(d) => d.validate(),
            CcConfig::Timely(t) => t.validate(),
            CcConfig::Hpcc(h) => h.validate(),
            CcConfig::None => Ok(()),
        }
    }

    /// Header bytes the algorithm adds to every data packet and every ACK or NACK of a flow,
    /// as the HPCC authors' simulator sizes them: TIMELY's send timestamp (8 B), HPCC's
    /// telemetry ([`INT_HEADER_BYTES`]).
    pub fn header_bytes(&self) -> u16 {
        match self {
            CcConfig::Timely(_) => TIMESTAMP_HEADER_BYTES,
            CcConfig::Hpcc(_) => INT_HEADER_BYTES,
            CcConfig::Dcqcn(_) | CcConfig::None => 0,
        }
    }

    /// The algorithm reads every ACK and NACK ([`CongestionControl::on_feedback`]).
    pub fn reads_acks(&self) -> bool {
        matches!(self, CcConfig::Timely(_) | CcConfig::Hpcc(_))
    }

    /// Switches append in-band telemetry to data packets, echoed on the ACKs ([`IntStack`]).
    pub fn carries_int(&self) -> bool {
        matches!(self, CcConfig::Hpcc(_))
    }

    /// The algorithm needs the fabric's largest base RTT and BDP ([`FabricRtt`]).
    pub fn needs_fabric_rtt(&self) -> bool {
        matches!(self, CcConfig::Hpcc(_))
    }

    /// The algorithm limits the bytes a flow has in flight ([`CongestionControl::window`]).
    pub fn has_window(&self) -> bool {
        matches!(self, CcConfig::Hpcc(h) if h.window)
    }

    /// The name `kind` takes for this algorithm.
    pub fn name(&self) -> &'static str {
        match self {
            CcConfig::Dcqcn(_) => "dcqcn",
            CcConfig::Timely(_) => "timely",
            CcConfig::Hpcc(_) => "hpcc",
            CcConfig::None => "none",
        }
    }
}

/// Bytes of TIMELY's send timestamp on a packet (the reference's `IntHeader` in timestamp
/// mode: one 64-bit word).
pub const TIMESTAMP_HEADER_BYTES: u16 = 8;

/// Hops of telemetry a packet carries at most (the reference's `IntHeader::maxHop`).
pub const MAX_INT_HOPS: usize = 5;

/// Bytes of the telemetry header on a packet: [`MAX_INT_HOPS`] records of 8 bytes and a
/// 2-byte hop count (the reference's `IntHeader` in INT mode, whatever the hops used).
pub const INT_HEADER_BYTES: u16 = 42;

/// One switch egress's telemetry record, written as a data packet leaves it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntHop {
    /// When the packet left (started its transmission).
    pub time: Time,
    /// Bytes the port had transmitted before the packet.
    pub tx_bytes: u64,
    /// Bytes queued at the port (every priority) as the packet left.
    pub queue_bytes: u64,
    /// The port's rate, bit/s.
    pub rate_bps: u64,
}

/// The telemetry a data packet collects on its way, and its ACK echoes.
#[derive(Clone, Copy, Debug, Default)]
pub struct IntStack {
    hops: [IntHop; MAX_INT_HOPS],
    /// Records pushed (saturating; above [`MAX_INT_HOPS`] only the first are kept).
    pushed: u8,
}

impl IntStack {
    /// No record: a packet as its sender makes it.
    pub fn clear(&mut self) {
        self.pushed = 0;
    }

    /// Appends the record of one more egress.
    #[inline]
    pub fn push(&mut self, hop: IntHop) {
        if let Some(slot) = self.hops.get_mut(self.pushed as usize) {
            *slot = hop;
        }
        self.pushed = self.pushed.saturating_add(1);
    }

    /// The records, one per egress in path order; `None` if the path had more egresses than
    /// a header holds (the reference then ignores the telemetry).
    pub fn hops(&self) -> Option<&[IntHop]> {
        self.hops.get(..self.pushed as usize)
    }

    /// The records kept (the first [`MAX_INT_HOPS`]).
    pub fn hops_recorded(&self) -> &[IntHop] {
        &self.hops[..(self.pushed as usize).min(MAX_INT_HOPS)]
    }
}

/// The fabric's largest base RTT over every pair of hosts and the largest BDP, as the HPCC
/// and ConWeave simulators compute them for `GLOBAL_T 1` (and for IRN's BDP): per pair, the
/// RTT is twice the one-way propagation delay plus the serialization of one payload on
/// every link of the path one way, and the BDP that RTT at the path's slowest link rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FabricRtt {
    pub rtt: Time,
    /// Bytes.
    pub bdp: u64,
}

/// What an ACK or NACK tells a rate-based RoCE algorithm that reads them
/// ([`CcConfig::reads_acks`]).
#[derive(Clone, Copy, Debug)]
pub struct AckFeedback<'a> {
    /// The cumulative ACK (the next byte the receiver expects).
    pub ack_seq: u64,
    /// The sender's next byte to send, after the ACK.
    pub snd_nxt: u64,
    /// The ACK's arrival time minus the send time of the data packet it answers.
    pub rtt: Time,
    /// The telemetry the data packet collected, if the run carries it.
    pub int: Option<&'a IntStack>,
}

/// What an ACK tells a window-based algorithm.
#[derive(Clone, Copy, Debug)]
pub struct AckSignal {
    /// Bytes this ACK acknowledges for the first time.
    pub newly_acked: u64,
    /// The receiver echoed an ECN mark (CE) of the packet the ACK answers.
    pub ce: bool,
    /// The sender's first unacknowledged byte and next byte to send, after the ACK.
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// The transport is repairing a loss (its own window rules apply meanwhile).
    pub in_recovery: bool,
}

/// The window a transport keeps, in bytes, that an algorithm may shrink.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub cwnd: f64,
    pub ssthresh: f64,
    /// The transport's segment size: the smallest window is two of them.
    pub mss: f64,
}

/// What a rate monitor reads of a flow's algorithm: its rate and, if it has one, its target
/// rate (bit/s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateReading {
    pub rate: f64,
    pub target: Option<f64>,
}

/// A congestion-control algorithm: its parameters and its state for one flow. Every hook
/// does nothing by default; an algorithm implements the signals it reacts to.
pub trait CongestionControl {
    /// Its parameters (one value per run).
    type Config: Clone + Default + std::fmt::Debug;

    /// The flow's sending rate at `now` (bit/s); `None`: the algorithm does not pace the flow
    /// (it sends at line rate within its transport's window).
    fn rate(&mut self, _cfg: &Self::Config, _now: Time) -> Option<f64> {
        None
    }

    /// A congestion notification arrived at the sender (an ACK or NACK with the CNP flag).
    /// Returns the time of a timer the NIC must set for the flow ([`CongestionControl::on_timer`]).
    fn on_cnp(&mut self, _cfg: &Self::Config, _now: Time) -> Option<Time> {
        None
    }

    /// The timer asked for by [`CongestionControl::on_cnp`] fired.
    fn on_timer(&mut self, _cfg: &Self::Config, _now: Time) {}

    /// An ACK arrived for a flow whose transport keeps `window`.
    fn on_ack(&mut self, _cfg: &Self::Config, _ack: &AckSignal, _window: &mut Window) {}

    /// The transport's retransmission timer expired with data up to `high_sent` sent.
    fn on_timeout(&mut self, _high_sent: u64) {}

    /// An ACK or NACK reached the sender of a RoCE flow, in a run whose algorithm reads them
    /// ([`CcConfig::reads_acks`]), after the transport has taken it.
    fn on_feedback(&mut self, _cfg: &Self::Config, _ack: &AckFeedback) {}

    /// The most bytes the flow may have in flight (sent and not acknowledged); `None`: no
    /// limit of the algorithm's (the transport's own rules apply).
    fn window(&self) -> Option<u64> {
        None
    }

    /// What a rate monitor records at `now`, without changing the state (`None`: the
    /// algorithm sets no rate).
    fn observe(&self, _cfg: &Self::Config, _now: Time) -> Option<RateReading> {
        None
    }
}

/// The registry of algorithms: one row per algorithm, `Variant(field): StateType`. Makes the
/// per-flow enum [`Cc`] (with `None` for no algorithm), the run's [`CcParams`] (field
/// `field` holds `StateType::Config`) and the dispatch of every hook of
/// [`CongestionControl`] through a `match`.
macro_rules! algorithms {
    ($($(#[$doc:meta])* $variant:ident($field:ident): $state:ty,)+) => {
        /// The congestion-control state of one flow.
        #[derive(Clone, Debug)]
        pub enum Cc {
            /// No algorithm: line rate, within the transport's window.
            None,
            $($(#[$doc])* $variant($state),)+
        }

        /// The parameters of every algorithm, for one run.
        #[derive(Clone, Debug, Default)]
        pub struct CcParams {
            $(pub $field: <$state as CongestionControl>::Config,)+
        }

        impl Cc {
            /// See [`CongestionControl::rate`].
            #[inline]
            pub fn rate(&mut self, params: &CcParams, now: Time) -> Option<f64> {
                match self {
                    Cc::None => None,
                    $(Cc::$variant(s) => CongestionControl::rate(s, &params.$field, now),)+
                }
            }

            /// See [`CongestionControl::on_cnp`].
            pub fn on_cnp(&mut self, params: &CcParams, now: Time) -> Option<Time> {
                match self {
                    Cc::None => None,
                    $(Cc::$variant(s) => CongestionControl::on_cnp(s, &params.$field, now),)+
                }
            }

            /// See [`CongestionControl::on_timer`].
            pub fn on_timer(&mut self, params: &CcParams, now: Time) {
                match self {
                    Cc::None => {}
                    $(Cc::$variant(s) => CongestionControl::on_timer(s, &params.$field, now),)+
                }
            }

            /// See [`CongestionControl::on_ack`].
            pub fn on_ack(&mut self, params: &CcParams, ack: &AckSignal, window: &mut Window) {
                match self {
                    Cc::None => {}
                    $(Cc::$variant(s) => CongestionControl::on_ack(s, &params.$field, ack, window),)+
                }
            }

            /// See [`CongestionControl::on_timeout`].
            pub fn on_timeout(&mut self, high_sent: u64) {
                match self {
                    Cc::None => {}
                    $(Cc::$variant(s) => CongestionControl::on_timeout(s, high_sent),)+
                }
            }

            /// See [`CongestionControl::on_feedback`].
            pub fn on_feedback(&mut self, params: &CcParams, ack: &AckFeedback) {
                match self {
                    Cc::None => {}
                    $(Cc::$variant(s) => CongestionControl::on_feedback(s, &params.$field, ack),)+
                }
            }

            /// See [`CongestionControl::window`].
            #[inline]
            pub fn window(&self) -> Option<u64> {
                match self {
                    Cc::None => None,
                    $(Cc::$variant(s) => CongestionControl::window(s),)+
                }
            }

            /// See [`CongestionControl::observe`].
            pub fn observe(&self, params: &CcParams, now: Time) -> Option<RateReading> {
                match self {
                    Cc::None => None,
                    $(Cc::$variant(s) => CongestionControl::observe(s, &params.$field, now),)+
                }
            }
        }
    };
}

algorithms! {
    /// DCQCN's reaction point (RoCE flows, `[cc] kind = "dcqcn"`).
    Dcqcn(dcqcn): Dcqcn,
    /// DCTCP's ECN reaction (TCP flows, `transport.tcp.cc = "dctcp"`).
    Dctcp(dctcp): Dctcp,
    /// TIMELY (RoCE flows, `[cc] kind = "timely"`).
    Timely(timely): Timely,
    /// HPCC (RoCE flows, `[cc] kind = "hpcc"`).
    Hpcc(hpcc): Hpcc,
}

impl CcParams {
    /// The parameters of a run whose RoCE flows run `cc` and whose TCP flows, if DCTCP,
    /// `dctcp`.
    pub fn new(cc: &CcConfig, dctcp: DctcpConfig) -> CcParams {
        CcParams {
            dcqcn: match cc {
                CcConfig::Dcqcn(c) => c.clone(),
                _ => DcqcnConfig::default(),
            },
            dctcp,
            timely: match cc {
                CcConfig::Timely(c) => c.clone(),
                _ => TimelyConfig::default(),
            },
            hpcc: match cc {
                CcConfig::Hpcc(c) => c.clone(),
                _ => HpccConfig::default(),
            },
        }
    }
}
