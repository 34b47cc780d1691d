//! The RoCE NIC's parameters (`[nic]`): packet sizes, ACK and NACK pacing, the
//! retransmission timeout. The sizes of control frames (`control_bytes`) also size the PFC
//! frames and scheme messages of every node.

use crate::check::check_range;
use crate::transport::irn::{IrnConfig, Recovery};
use crate::transport::Wire;
use crate::units::{Bytes, Time};
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
    /// Loss recovery: `"go_back_n"` (RoCE NICs; the default) or `"irn"` (selective repeat
    /// with BDP flow control, `transport/irn`).
    #[serde(skip_serializing_if = "Recovery::is_default")]
    pub recovery: Recovery,
    /// IRN's parameters (`[nic.irn]`; with `recovery = "irn"` only).
    #[serde(skip_serializing_if = "IrnConfig::is_default")]
    pub irn: IrnConfig,
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
            recovery: Recovery::GoBackN,
            irn: IrnConfig::default(),
        }
    }
}

impl NicConfig {
    /// Bytes on the wire of a full-size data packet.
    pub fn mtu_wire_bytes(&self) -> u64 {
        self.payload.0 + self.header_bytes as u64
    }

    /// The sizes of RoCE's data packets and ACKs on the wire.
    pub fn wire(&self) -> Wire {
        Wire {
            payload: self.payload.0,
            header: self.header_bytes as u64,
            ack: self.control_bytes as u64,
        }
    }
}

impl NicConfig {
    /// Checks the values of `[nic]` that the types alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        let jumbo = "(jumbo frames at most, e.g. \"1000B\")";
        check_range("nic.payload", self.payload, Bytes(1)..=Bytes(9_000), jumbo)?;
        check_range("nic.header_bytes", self.header_bytes, 0..=512, "")?;
        if self.ack_interval == 0 {
            return Err("nic.ack_interval: must be at least 1 (ACK every N packets)".into());
        }
        if self.recovery != Recovery::Irn && !self.irn.is_default() {
            return Err("nic.irn: parameters of IRN, but nic.recovery is \"go_back_n\"; set nic.recovery = \"irn\", or remove the table".into());
        }
        self.irn.validate(self.payload)?;
        check_range(
            "nic.control_bytes",
            self.control_bytes,
            1..=512,
            "(e.g. 64)",
        )
    }
}
