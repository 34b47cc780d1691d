//! The fabric's parameters besides topology and traffic ([`FabricConfig`]: the `[switch]`,
//! `[nic]`, `[cc]` and `[lb]` tables of a spec), and the checks of the switch and NIC
//! parameters that their types alone cannot express (`SwitchConfig` is defined in
//! `switch.rs`, `NicConfig` in `host.rs`; `[switch.pfc]` checks itself, `crate::mmu`).

use super::switch::EgressLimit;
use super::{NicConfig, SwitchConfig};
use crate::check::check_range;
use crate::dcqcn::DcqcnConfig;
use crate::lb::LbConfig;
use crate::mmu::MAX_BUFFER;
use crate::transport::{TransportConfig, TransportKind};
use crate::units::Bytes;

/// Congestion control run by the sender NICs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
// Written as a table with `kind = "<variant>"` (see `crate::tagged`).
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
pub enum CcConfig {
    /// DCQCN (Mellanox flavour).
    Dcqcn(DcqcnConfig),
    /// No congestion control: every flow sends at line rate.
    None,
}

crate::tagged::internally_tagged!(CcConfig, "kind");

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig::Dcqcn(DcqcnConfig::default())
    }
}

/// Everything about the fabric's behaviour that is not topology or traffic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FabricConfig {
    pub switch: SwitchConfig,
    pub nic: NicConfig,
    pub cc: CcConfig,
    pub lb: LbConfig,
    /// The coflow scheduler (`[coflow]`, `varys.rs`).
    pub coflow: super::CoflowConfig,
    /// The `[transport]` table: the default transport and TCP's parameters.
    pub transport: TransportConfig,
    /// The transport of the flows of each `[[traffic]]` entry (by `FlowSpec::generator`);
    /// an entry not listed (flows built in code) uses `transport.kind`.
    pub traffic_transports: Vec<TransportKind>,
}

impl FabricConfig {
    /// The transport of the flows of generator `generator`.
    pub fn transport_of(&self, generator: u16) -> TransportKind {
        self.traffic_transports
            .get(generator as usize)
            .copied()
            .unwrap_or(self.transport.kind)
    }
}

impl CcConfig {
    /// Checks the parameters of the congestion control (`[cc]`).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            CcConfig::Dcqcn(d) => d.validate(),
            CcConfig::None => Ok(()),
        }
    }
}

impl SwitchConfig {
    /// Checks the values of `[switch]` that the types alone cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.buffer.0 == 0 {
            return Err("switch.buffer: must be above 0 (e.g. \"9MB\")".into());
        }
        if self.buffer.0 > MAX_BUFFER {
            return Err(format!("switch.buffer: {} is above the largest buffer pfcsim models, 2^53 bytes (about 9 PB); give a switch's buffer (e.g. \"9MB\")", self.buffer));
        }
        self.pfc.validate(self.buffer)?;
        let check_red = |key: &str, kmin: Bytes, kmax: Bytes, pmax: f64| {
            if kmin > kmax {
                return Err(format!(
                    "{key}: kmin ({kmin}) is above kmax ({kmax}); kmin must be <= kmax"
                ));
            }
            check_range(
                &format!("{key}.pmax"),
                pmax,
                0.0..=1.0,
                "(a marking probability)",
            )
        };
        match self.egress_limit {
            Some(_) if self.pfc.enabled => {
                return Err("switch.egress_limit: a drop-tail limit needs a lossy fabric; set switch.pfc.enabled = false, or leave egress_limit out".into());
            }
            Some(EgressLimit::Packets(0)) | Some(EgressLimit::Bytes(Bytes(0))) => {
                return Err("switch.egress_limit: must be above 0 (e.g. { packets = 100 } or { bytes = \"150KB\" })".into());
            }
            _ => {}
        }
        let ecn = &self.ecn;
        check_red("switch.ecn", ecn.kmin, ecn.kmax, ecn.pmax)?;
        for (i, o) in ecn.per_rate.iter().enumerate() {
            check_red(&format!("switch.ecn.per_rate[{i}]"), o.kmin, o.kmax, o.pmax)?;
        }
        Ok(())
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
        check_range(
            "nic.control_bytes",
            self.control_bytes,
            1..=512,
            "(e.g. 64)",
        )
    }
}
