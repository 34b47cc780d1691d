//! The fabric's parameters besides topology and traffic ([`FabricConfig`]: the `[switch]`,
//! `[nic]`, `[cc]`, `[lb]`, `[coflow]` and `[transport]` tables of a spec), and the checks of
//! the switch parameters that their types alone cannot express (`SwitchConfig` is defined in
//! `switch.rs`; `[switch.pfc]` checks itself, `crate::mmu`, as do the NIC's, the transports'
//! and the congestion controls' tables).

use super::switch::EgressLimit;
use super::SwitchConfig;
use crate::cc::CcConfig;
use crate::check::check_range;
use crate::lb::LbConfig;
use crate::mmu::MAX_BUFFER;
use crate::transport::{NicConfig, TransportConfig, TransportKind, TransportSetup};
use crate::units::Bytes;

/// Everything about the fabric's behaviour that is not topology or traffic.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FabricConfig {
    pub switch: SwitchConfig,
    pub nic: NicConfig,
    pub cc: CcConfig,
    pub lb: LbConfig,
    /// The coflow scheduler (`[coflow]`, `varys.rs`).
    pub coflow: super::CoflowConfig,
    /// The `[transport]` table: the default transport and each transport's parameters.
    pub transport: TransportConfig,
    /// The transport of the flows of each `[[traffic]]` entry (by `FlowSpec::generator`);
    /// an entry not listed (flows built in code) uses `transport.kind`.
    pub traffic_transports: Vec<TransportKind>,
}

impl FabricConfig {
    /// The transport parts of the configuration, as setup reads them.
    pub fn transports(&self) -> TransportSetup<'_> {
        TransportSetup {
            nic: &self.nic,
            transport: &self.transport,
            cc: &self.cc,
            traffic: &self.traffic_transports,
            lossless: self.switch.pfc.enabled,
            fabric_rtt: None,
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
