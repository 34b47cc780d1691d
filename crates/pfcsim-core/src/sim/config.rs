//! The fabric's parameters besides topology and traffic ([`FabricConfig`]: the `[switch]`,
//! `[nic]`, `[cc]` and `[lb]` tables of a spec), and the checks of the switch and NIC
//! parameters that their types alone cannot express (`SwitchConfig` is defined in
//! `switch.rs`, `NicConfig` in `host.rs`).

use super::switch::{EgressLimit, Ns3RdmaConfig, PfcConfig, PfcModel};
use super::{NicConfig, SwitchConfig};
use crate::check::check_range;
use crate::dcqcn::DcqcnConfig;
use crate::lb::LbConfig;
use crate::mmu::{CELL, MAX_BUFFER};
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
        if !(self.pfc.alpha > 0.0 && self.pfc.alpha.is_finite()) {
            return Err(format!(
                "switch.pfc.alpha: {} is not valid; use a positive factor (e.g. 0.0625)",
                self.pfc.alpha
            ));
        }
        match self.pfc.static_threshold {
            Some(Bytes(0)) => {
                return Err("switch.pfc.static_threshold: must be above 0, or left out for the dynamic threshold".into());
            }
            Some(t) if t > self.buffer => {
                return Err(format!("switch.pfc.static_threshold ({t}) is above switch.buffer ({}): no ingress can hold that much, so PFC would never pause; give at most the buffer (e.g. \"256KB\"), or leave it out for the dynamic threshold", self.buffer));
            }
            Some(_) if self.pfc.alpha != PfcConfig::default().alpha => {
                return Err("switch.pfc.alpha: the dynamic threshold's factor, which switch.pfc.static_threshold replaces; remove alpha, or static_threshold for the dynamic threshold".into());
            }
            _ => {}
        }
        self.validate_pfc_model()?;
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

impl SwitchConfig {
    /// Checks `switch.pfc.model` against the other keys of `[switch.pfc]`: each model's own
    /// parameters, and no parameter of another model.
    fn validate_pfc_model(&self) -> Result<(), String> {
        let pfc = &self.pfc;
        let model = pfc.model;
        if model != PfcModel::Ns3Rdma && pfc.ns3_rdma.is_some() {
            return Err(format!("switch.pfc.ns3_rdma: parameters of the \"ns3-rdma\" PFC model, but switch.pfc.model is \"{}\"; set switch.pfc.model = \"ns3-rdma\", or remove the table", model.name()));
        }
        if model != PfcModel::Egress && pfc.egress.is_some() {
            return Err(format!("switch.pfc.egress: parameters of the \"egress\" PFC model, but switch.pfc.model is \"{}\"; set switch.pfc.model = \"egress\", or remove the table", model.name()));
        }
        if model == PfcModel::Ingress {
            return Ok(());
        }
        if !pfc.enabled {
            return Err(format!("switch.pfc.model: \"{}\" is a PFC model and needs switch.pfc.enabled = true; enable PFC, or leave model out for a lossy fabric", model.name()));
        }
        let defaults = PfcConfig::default();
        let ingress_only = [
            ("alpha", pfc.alpha != defaults.alpha),
            ("static_threshold", pfc.static_threshold.is_some()),
            ("reserve", pfc.reserve != defaults.reserve),
            ("resume_offset", pfc.resume_offset != defaults.resume_offset),
            ("headroom", pfc.headroom.is_some()),
        ];
        if let Some((key, _)) = ingress_only.iter().find(|(_, set)| *set) {
            let table = if model == PfcModel::Egress {
                "egress"
            } else {
                "ns3_rdma"
            };
            return Err(format!("switch.pfc.{key}: a parameter of the \"ingress\" PFC model, which switch.pfc.model = \"{}\" does not use; remove it (this model's parameters are in [switch.pfc.{table}])", model.name()));
        }
        match model {
            PfcModel::Ns3Rdma => {
                let c = pfc.ns3_rdma.clone().unwrap_or_default();
                if !(c.alpha > 0.0 && c.alpha.is_finite()) {
                    return Err(format!("switch.pfc.ns3_rdma.alpha: {} is not valid; use a positive factor (the code's: 16)", c.alpha));
                }
                if c.pool.0 == 0 || c.pool > self.buffer {
                    return Err(format!("switch.pfc.ns3_rdma.pool ({}): must be above 0 and at most switch.buffer ({}) (the code's: 4000 cells of 1030 B, \"4120000B\")", c.pool, self.buffer));
                }
                if c.static_limit.0 <= 2 * CELL {
                    return Err(format!("switch.pfc.ns3_rdma.static_limit ({}): must be above 2060B, since RESUME comes 2 cells of 1030 B below it (the code's: \"20600B\")", c.static_limit));
                }
                if c.headroom.0 == 0 {
                    return Err("switch.pfc.ns3_rdma.headroom: must be above 0 (the code's: 100 cells of 1030 B, \"103000B\")".into());
                }
                let code = Ns3RdmaConfig::default();
                if c.dynamic && c.static_limit != code.static_limit {
                    return Err("switch.pfc.ns3_rdma.static_limit: the static limit, unused by the dynamic threshold (dynamic = true, the default); set switch.pfc.ns3_rdma.dynamic = false, or remove static_limit".into());
                }
                if !c.dynamic && c.alpha != code.alpha {
                    return Err("switch.pfc.ns3_rdma.alpha: the dynamic threshold's factor, unused with dynamic = false; remove alpha, or set dynamic = true".into());
                }
            }
            PfcModel::Egress => {
                let Some(c) = &pfc.egress else {
                    return Err("switch.pfc.model: \"egress\" needs switch.pfc.egress.xoff, the egress queue length that pauses the ingresses feeding it (e.g. [switch.pfc.egress] xoff = \"200KB\")".into());
                };
                if c.xoff.0 == 0 {
                    return Err("switch.pfc.egress.xoff: must be above 0 (e.g. \"200KB\")".into());
                }
                if c.xoff > self.buffer {
                    return Err(format!("switch.pfc.egress.xoff ({}) is above switch.buffer ({}): no egress queue can reach it, so PFC would never pause; give at most the buffer (e.g. \"200KB\")", c.xoff, self.buffer));
                }
                if c.resume_offset > c.xoff {
                    return Err(format!("switch.pfc.egress.resume_offset ({}) is above switch.pfc.egress.xoff ({}); RESUME comes at xoff - resume_offset, so it must be at most xoff", c.resume_offset, c.xoff));
                }
            }
            PfcModel::Ingress => {}
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
