//! TCP's parameters (`[transport.tcp]`).

use crate::cc::DctcpConfig;
use crate::check::check_range;
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};

/// TCP's congestion control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TcpCc {
    /// NewReno (RFC 5681, RFC 6582): slow start, congestion avoidance, fast retransmit and fast
    /// recovery with partial ACKs.
    #[default]
    Newreno,
    /// DCTCP (Alizadeh et al., SIGCOMM 2010; RFC 8257): NewReno whose window, on ECN echoes,
    /// shrinks by alpha/2 at most once per window, alpha the moving average of the fraction
    /// of marked bytes. Needs ECN marking at the switches (`[switch.ecn]`, step marking at K:
    /// `kmin = kmax = K`, `pmax = 1`).
    Dctcp,
}

/// TCP parameters (`[transport.tcp]`). The defaults are those of the 10 Gbps TCP-era
/// load-balancing simulations (DCTCP paper, Hermes and CONGA ns-3 setups); see
/// `docs/reference/transport-tcp.md` for the sources.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct TcpConfig {
    pub cc: TcpCc,
    /// Maximum segment size, payload bytes per data packet (1460 B: a 1500 B IP MTU less 40 B
    /// of IP and TCP headers, as in the DCTCP paper's testbed and the ns-3 load-balancing
    /// simulations).
    pub mss: Bytes,
    /// Header bytes added to a segment on the wire: Ethernet (14 + 4 FCS), IP (20), TCP (20)
    /// = 58 B, so a full segment is a 1518 B frame.
    pub header_bytes: u16,
    /// Size on the wire of a pure ACK (64 B, the minimum Ethernet frame).
    pub ack_bytes: u16,
    /// Initial congestion window in segments (10: RFC 6928, Linux's default).
    pub init_cwnd: u32,
    /// Lower bound of the retransmission timeout (10 ms, chosen: a reduced data-center
    /// minimum between the Hermes simulation code's 5 ms and Linux's 200 ms; sources in
    /// `docs/reference/transport-tcp.md`).
    pub rto_min: Time,
    /// Timeout before the first RTT sample (RFC 6298 says 1 s; data-center simulations start
    /// at `rto_min`; proposed default 10 ms).
    pub rto_initial: Time,
    /// Upper bound of the timeout after exponential backoff (1 s, proposed).
    pub rto_max: Time,
    /// Duplicate ACKs that trigger fast retransmit (3, RFC 5681).
    pub dupack_threshold: u32,
    /// DCTCP's gain g of the moving average of the marked fraction (1/16, DCTCP paper).
    pub dctcp_g: f64,
}

crate::tagged::table!(TcpConfig);

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            cc: TcpCc::Newreno,
            mss: Bytes(1460),
            header_bytes: 58,
            ack_bytes: 64,
            init_cwnd: 10,
            rto_min: Time::from_ms(10),
            rto_initial: Time::from_ms(10),
            rto_max: Time::from_ms(1_000),
            dupack_threshold: 3,
            dctcp_g: 1.0 / 16.0,
        }
    }
}

impl TcpConfig {
    /// Checks the values of `[transport.tcp]` that the types alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        check_range(
            "transport.tcp.mss",
            self.mss,
            Bytes(1)..=Bytes(9_000),
            "(jumbo frames at most, e.g. \"1460B\")",
        )?;
        check_range("transport.tcp.header_bytes", self.header_bytes, 0..=512, "")?;
        check_range(
            "transport.tcp.ack_bytes",
            self.ack_bytes,
            1..=512,
            "(e.g. 64)",
        )?;
        check_range(
            "transport.tcp.init_cwnd",
            self.init_cwnd,
            1..=1_000,
            "segments (e.g. 10)",
        )?;
        check_range(
            "transport.tcp.dupack_threshold",
            self.dupack_threshold,
            1..=100,
            "(e.g. 3)",
        )?;
        if self.rto_min == Time::ZERO {
            return Err("transport.tcp.rto_min: must be above 0 (e.g. \"10ms\")".into());
        }
        if self.rto_initial < self.rto_min || self.rto_max < self.rto_initial {
            return Err(format!(
                "transport.tcp: need rto_min <= rto_initial <= rto_max, got {} <= {} <= {}; e.g. rto_min = rto_initial = \"10ms\", rto_max = \"1s\"",
                self.rto_min, self.rto_initial, self.rto_max
            ));
        }
        if !(self.dctcp_g > 0.0 && self.dctcp_g <= 1.0) {
            return Err(format!(
                "transport.tcp.dctcp_g: {} is not valid; give a gain in (0, 1] (DCTCP: 0.0625)",
                self.dctcp_g
            ));
        }
        Ok(())
    }
}

impl TcpConfig {
    /// The sizes of TCP's segments and ACKs on the wire.
    pub fn wire(&self) -> crate::transport::Wire {
        crate::transport::Wire {
            payload: self.mss.0,
            header: self.header_bytes as u64,
            ack: self.ack_bytes as u64,
        }
    }

    /// DCTCP's parameters (`cc = "dctcp"`).
    pub fn dctcp(&self) -> DctcpConfig {
        DctcpConfig { g: self.dctcp_g }
    }
}
