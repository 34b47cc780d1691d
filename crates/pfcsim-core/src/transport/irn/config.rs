//! IRN's parameters (`[nic.irn]`) and the choice of loss recovery for RoCE flows
//! (`[nic] recovery`).

use crate::check::check_range;
use crate::units::{Bytes, Time};
use serde::{Deserialize, Serialize};

/// How RoCE flows recover lost and reordered packets (`[nic] recovery`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// Go-back-N, as RoCE NICs do (`transport/roce`).
    #[default]
    GoBackN,
    /// IRN's selective repeat with BDP flow control (`transport/irn`).
    Irn,
}

impl Recovery {
    pub fn is_default(&self) -> bool {
        *self == Recovery::default()
    }
}

/// Which packets IRN resends in loss recovery (`[nic.irn] retransmit`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retransmit {
    /// The paper's: the packet at the cumulative ACK, then only packets below the highest
    /// SACKed one that are not SACKed.
    #[default]
    Lost,
    /// The ConWeave ns-3 simulator's: every packet from the cumulative ACK to the end of the
    /// data sent when recovery began that is not SACKed, packets still in flight included
    /// (go-back-N that skips SACKed packets).
    Unsacked,
}

/// The most packets IRN lets a flow have outstanding (`bdp` over the payload): each IRN flow
/// keeps two bitmaps of this many bits at most, one at each end.
pub const MAX_BDP_PACKETS: u64 = 1 << 16;

/// IRN parameters (`[nic.irn]`). Defaults as the ConWeave ns-3 simulator runs IRN at
/// 100 Gbps (`scratch/network-load-balance.cc`); `docs/reference/transport-irn.md` sets them
/// beside the IRN paper's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct IrnConfig {
    /// BDP flow control: the most bytes a flow may have outstanding (sent and not
    /// cumulatively acknowledged). Unset: the fabric's largest base-RTT BDP, as the
    /// reference computes it (`Transport::needs_fabric_rtt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bdp: Option<Bytes>,
    /// Retransmission timeout while at most `low_rto_packets` packets are outstanding
    /// (ConWeave ns-3 at 100 Gbps: 100 us).
    pub rto_low: Time,
    /// Retransmission timeout otherwise (ConWeave ns-3 at 100 Gbps: 320 us; the paper sets
    /// it from the fabric's largest RTT).
    pub rto_high: Time,
    /// The paper's N: `rto_low` applies while at most this many packets are outstanding,
    /// too few for a later packet's NACK to reveal a loss (paper: 3).
    pub low_rto_packets: u32,
    /// The retransmission timer runs with PFC on too (the paper's "IRN with PFC"). `false`:
    /// no timeouts while PFC is on, as the ConWeave ns-3 simulator does (its IRN never times
    /// out in a lossless fabric, where only PFC pauses delay packets).
    pub timeouts_with_pfc: bool,
    /// Which packets recovery resends: `"lost"` (the paper, the default) or `"unsacked"` (the
    /// ConWeave ns-3 simulator's reading).
    pub retransmit: Retransmit,
}

crate::tagged::table!(IrnConfig);

impl Default for IrnConfig {
    fn default() -> Self {
        IrnConfig {
            bdp: None,
            rto_low: Time::from_us(100),
            rto_high: Time::from_us(320),
            low_rto_packets: 3,
            timeouts_with_pfc: true,
            retransmit: Retransmit::Lost,
        }
    }
}

impl IrnConfig {
    pub fn is_default(&self) -> bool {
        *self == IrnConfig::default()
    }

    /// Checks `[nic.irn]` for packets of `payload` bytes.
    pub fn validate(&self, payload: Bytes) -> Result<(), String> {
        if let Some(bdp) = self.bdp {
            let most = Bytes(payload.0 * MAX_BDP_PACKETS);
            check_range(
                "nic.irn.bdp",
                bdp,
                payload..=most,
                "(at least one packet's payload, nic.payload; e.g. \"104KB\", one BDP of a 100 Gbps fabric with an 8.3 us RTT)",
            )?;
        }
        if self.rto_low == Time::ZERO {
            return Err("nic.irn.rto_low: must be above 0 (e.g. \"100us\")".into());
        }
        if self.rto_high < self.rto_low {
            return Err(format!(
                "nic.irn.rto_high: {} is below nic.irn.rto_low ({}); the high timeout must be at least the low one (e.g. \"320us\" and \"100us\")",
                self.rto_high, self.rto_low
            ));
        }
        Ok(())
    }
}
