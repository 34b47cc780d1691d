//! The switch memory-management unit: where a switch counts the bytes it buffers, when it
//! drops, and when it sends PFC PAUSE and RESUME. Three models (`switch.pfc.model`, described
//! with their sources in `docs/reference/fabric.md`, "PFC models"):
//!
//! * [`IngressMmu`] (`"ingress"`, the default): the shared-buffer MMU of the HPCC ns-3
//!   simulator, per (ingress port, priority) reserve, shared pool and headroom, a dynamic
//!   (`alpha`) or static XOFF threshold with a resume offset.
//! * [`Ns3RdmaMmu`] (`"ns3-rdma"`): the thresholds of the DCQCN authors' ns-3
//!   (`BroadcomNode` in bobzhuyb/ns3-rdma): a static per-(port, priority-group) limit of
//!   20 cells or a dynamic one keyed on the free part of a shared service pool.
//! * [`EgressMmu`] (`"egress"`): PFC triggered by the length of an egress queue: an ingress
//!   that sends a packet to a queue at `xoff` bytes or more is paused until the queue drains
//!   to `xoff - resume_offset` (the "destination based rule" of TI's CPSW switch).
//!
//! A model is one file here and one row of the registry (`pfc_models!` below): its buffer
//! state, which implements [`Model`] (its checks of `[switch.pfc]`, its construction, its data
//! path and the read-only views of its state), and, unless it is the default model, its
//! parameter table `[switch.pfc.<table>]` (a config struct read with `crate::tagged::table!`).
//! The registry generates [`PfcModel`] (the `switch.pfc.model` key), [`PfcConfig`] (the
//! `[switch.pfc]` table: the default model's keys, which are the table's own, then the model
//! and one optional table per other model) with its checks, and [`Mmu`] with its dispatch.
//!
//! The model is chosen once per switch: [`Mmu`] is an enum; on the data path
//! ([`Mmu::arrive`], [`Mmu::release`]) the default model is tested first and the others are
//! dispatched out of line, so that the default pays one compare and branch.
//!
//! Control packets in the strict-priority queue are not accounted by any model.

mod egress;
mod ingress;
mod ns3_rdma;

pub use egress::{EgressMmu, EgressPfcConfig};
pub use ingress::{auto_headroom, IngressMmu, Threshold};
pub use ns3_rdma::{Ns3RdmaConfig, Ns3RdmaMmu, Ns3RdmaParams, CELL};

use crate::units::{Bytes, Rate, Time};
use serde::{Deserialize, Serialize};

/// The largest switch buffer modelled (2^53 bytes, about 9 PB; `switch.buffer` is checked
/// against it). The ingress model's thresholds need buffers below 2^63 (they convert byte
/// counts through `i64`, `ingress.rs`); below 2^53 every byte count is also exact as an `f64`,
/// in which the ns-3-style model computes.
pub const MAX_BUFFER: u64 = 1 << 53;

/// What the MMU decided about an arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Charged; `pause`: the switch must now send PAUSE for the packet's (ingress port,
    /// priority).
    Accept {
        pause: bool,
    },
    Drop,
}

/// What the MMU decided when a packet left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Xon {
    /// Nothing to send.
    None,
    /// The switch must now send RESUME for the packet's (ingress port, priority).
    Resume,
    /// The MMU has PFC frames for the switch to send ([`Mmu::take_frames`]): RESUMEs of
    /// other ingresses than the packet's (egress model; ns3-rdma model, whose XON depends
    /// on bytes other ingresses share).
    Frames,
}

/// A PFC frame the MMU asks the switch to send out of its local port `port`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub port: u16,
    pub prio: u8,
    /// PAUSE (`true`) or RESUME (`false`).
    pub pause: bool,
}

/// What a PFC model implements: its checks of `[switch.pfc]` and its construction, its data
/// path, and the read-only views of its state that load balancers (RLB, LBoDSN), monitors and
/// deadlock detection take. [`Mmu`] dispatches each of its methods to the switch's model.
pub trait Model: Sized {
    /// Checks the keys of `[switch.pfc]` this model reads, on a switch of `buffer` bytes. The
    /// default model's keys (the table's own) are checked whatever the model; another model's
    /// only when it is chosen, after the checks common to all ([`PfcConfig::validate`]).
    fn validate(pfc: &PfcConfig, buffer: Bytes) -> Result<(), String>;

    /// The state of a switch of `buffer` bytes whose ports' links are `links` (rate, delay; in
    /// port order), from a validated `pfc`; `mtu_wire` is the wire size of the largest data
    /// packet.
    fn build(pfc: &PfcConfig, buffer: Bytes, links: &[(Rate, Time)], mtu_wire: u64) -> Self;

    /// A packet of `size` bytes arrives on ingress `port` at priority `prio`, bound for the
    /// local egress `out`: drop it, or charge it and say whether the switch must now send
    /// PAUSE(prio) out of `port`.
    fn arrive(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Admission;

    /// Releases a departing packet's bytes (it came in on `port`, leaves by `out`) and says
    /// which PFC frames the switch must now send.
    fn release(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Xon;

    /// Moves the PFC frames decided by the last release that answered [`Xon::Frames`] to the
    /// end of `into`, in the order decided. No allocation once both buffers have grown to the
    /// most frames of one decision.
    fn take_frames(&mut self, into: &mut Vec<Frame>);

    /// The current XOFF threshold on [`Model::ingress_use`].
    fn threshold(&self) -> u64;

    /// Bytes currently charged, all queues together (0 when the switch is empty).
    fn bytes_in_use(&self) -> u64;

    /// The part of the buffer set aside for headroom and reserves, which the shared pool
    /// never uses (a switch whose buffer is not above it is refused).
    fn set_aside(&self) -> u64;

    /// Bytes of (port, prio) that count against the XOFF threshold ([`Model::threshold`]).
    fn ingress_use(&self, port: usize, prio: u8) -> u64;

    /// Every byte charged to (port, prio) (monitors).
    fn charged(&self, port: usize, prio: u8) -> u64;

    /// The bytes each (port, priority) may use before its use counts against the threshold:
    /// `reserve() + threshold()` is the XOFF level of [`Model::charged`].
    fn reserve(&self) -> u64;

    /// How far below the threshold a paused (port, priority) must drain before RESUME.
    fn resume_offset(&self) -> u64;

    /// Whether this switch has PAUSE outstanding for (port, prio).
    fn is_pausing(&self, port: usize, prio: u8) -> bool;

    /// Whether (port, prio) keeps its PAUSE outstanding for as long as `stuck` of the bytes
    /// charged to it stay in the switch, whatever else leaves or arrives (PFC deadlock
    /// detection, `sim/stall.rs`); `more_may_arrive`: a packet of this priority is still on
    /// the wire towards the port. `false` when the model cannot tell: deadlock detection then
    /// does not find its deadlocks, the no-progress watchdog does.
    fn pause_is_stuck(&self, port: usize, prio: u8, stuck: u64, more_may_arrive: bool) -> bool;
}

/// The registry of PFC models: generates [`PfcModel`], [`PfcConfig`] and [`Mmu`] from one row
/// per model, `"name" => Variant(State, table: Config), "summary";`, where `State` implements
/// [`Model`] and `Config` is its table `[switch.pfc.<table>]`. The first row is the default
/// model, the ingress model: it has no table, its keys are `[switch.pfc]`'s own (written in
/// [`PfcConfig`] here; its `key_set` names the first one set, which the other models refuse),
/// and the data path tests it first ([`Mmu::arrive`]).
macro_rules! pfc_models {
    (
        $dname:literal => $dvariant:ident($dmmu:ty), $dsummary:literal;
        $($name:literal => $variant:ident($mmu:ty, $table:ident: $config:ty), $summary:literal;)*
    ) => {
        /// The PFC model of the switches (`switch.pfc.model`).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub enum PfcModel {
            #[default]
            #[doc = $dsummary]
            #[serde(rename = $dname)]
            $dvariant,
            $(#[doc = $summary] #[serde(rename = $name)] $variant,)*
        }

        impl PfcModel {
            /// Every model, in the registry's order.
            #[cfg(test)]
            const ALL: &[PfcModel] = &[PfcModel::$dvariant, $(PfcModel::$variant,)*];

            fn is_default(&self) -> bool {
                *self == PfcModel::$dvariant
            }

            /// The name a spec gives it.
            pub fn name(self) -> &'static str {
                match self {
                    PfcModel::$dvariant => $dname,
                    $(PfcModel::$variant => $name,)*
                }
            }

            /// The key of its parameter table in `[switch.pfc]` (none for the default model,
            /// whose keys are the table's own).
            fn table(self) -> Option<&'static str> {
                match self {
                    PfcModel::$dvariant => None,
                    $(PfcModel::$variant => Some(stringify!($table)),)*
                }
            }
        }

        /// PFC parameters (`[switch.pfc]`).
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        #[serde(remote = "Self", deny_unknown_fields, default)]
        pub struct PfcConfig {
            /// PFC on (lossless) or off (lossy: drops on overflow).
            pub enabled: bool,
            /// Dynamic-threshold factor: a queue pauses its ingress when its shared-buffer use
            /// reaches alpha x free shared buffer (ConWeave: 1/16; HPCC: 1/8).
            pub alpha: f64,
            /// If set, a static XOFF threshold on a queue's shared-buffer use replaces the
            /// dynamic one.
            pub static_threshold: Option<Bytes>,
            /// Bytes each (ingress port, priority) may use before touching the shared pool
            /// (HPCC: 4 KB).
            pub reserve: Bytes,
            /// RESUME is sent once a queue's shared use is this far below the threshold (HPCC:
            /// 3 KB).
            pub resume_offset: Bytes,
            /// Headroom per port. Unset: 2 x rate x delay + 3 MTU of the port's link (enough
            /// to absorb what arrives after a PAUSE is decided; see [`auto_headroom`]).
            pub headroom: Option<Bytes>,
            #[doc = concat!(
                "The PFC model: where bytes are counted and what triggers PAUSE and RESUME ",
                "(`docs/reference/fabric.md`, \"PFC models\"). `alpha`, `static_threshold`, ",
                "`reserve`, `resume_offset` and `headroom` above belong to the `\"", $dname,
                "\"` model."
            )]
            #[serde(skip_serializing_if = "PfcModel::is_default")]
            pub model: PfcModel,
            $(
                #[doc = concat!(
                    "Parameters of the `\"", $name, "\"` model ([`", stringify!($config), "`])."
                )]
                #[serde(skip_serializing_if = "Option::is_none")]
                pub $table: Option<$config>,
            )*
        }

        impl Default for PfcConfig {
            fn default() -> Self {
                PfcConfig {
                    enabled: true,
                    alpha: 1.0 / 16.0,
                    static_threshold: None,
                    reserve: Bytes(4_000),
                    resume_offset: Bytes(3_000),
                    headroom: None,
                    model: PfcModel::$dvariant,
                    $($table: None,)*
                }
            }
        }

        impl PfcConfig {
            /// Checks `[switch.pfc]` on a switch of `buffer` bytes: the default model's keys
            /// (whatever the model); then a model's table only under that model, and under
            /// another model than the default, PFC on and none of the default model's keys
            /// set; then the chosen model's own parameters.
            pub fn validate(&self, buffer: Bytes) -> Result<(), String> {
                <$dmmu as Model>::validate(self, buffer)?;
                let model = self.model.name();
                $(if self.model != PfcModel::$variant && self.$table.is_some() {
                    return Err(format!(
                        "switch.pfc.{}: parameters of the \"{}\" PFC model, but switch.pfc.model is \"{model}\"; set switch.pfc.model = \"{}\", or remove the table",
                        stringify!($table), $name, $name
                    ));
                })*
                let Some(table) = self.model.table() else {
                    return Ok(());
                };
                if !self.enabled {
                    return Err(format!("switch.pfc.model: \"{model}\" is a PFC model and needs switch.pfc.enabled = true; enable PFC, or leave model out for a lossy fabric"));
                }
                if let Some(key) = <$dmmu>::key_set(self) {
                    return Err(format!(
                        "switch.pfc.{key}: a parameter of the \"{}\" PFC model, which switch.pfc.model = \"{model}\" does not use; remove it (this model's parameters are in [switch.pfc.{table}])",
                        $dname
                    ));
                }
                match self.model {
                    PfcModel::$dvariant => Ok(()),
                    $(PfcModel::$variant => <$mmu as Model>::validate(self, buffer),)*
                }
            }
        }

        /// The buffer state of one switch, in the model its spec chose.
        #[derive(Clone, Debug)]
        pub enum Mmu {
            $dvariant($dmmu),
            $($variant($mmu),)*
        }

        impl Mmu {
            /// The MMU of a switch of `buffer` bytes whose ports' links are `links` (rate,
            /// delay; in port order), in the model of `pfc` (validated:
            /// [`PfcConfig::validate`]); `mtu_wire` is the wire size of the largest data
            /// packet.
            pub fn build(
                pfc: &PfcConfig,
                buffer: Bytes,
                links: &[(Rate, Time)],
                mtu_wire: u64,
            ) -> Mmu {
                match pfc.model {
                    PfcModel::$dvariant => {
                        Mmu::$dvariant(<$dmmu as Model>::build(pfc, buffer, links, mtu_wire))
                    }
                    $(PfcModel::$variant => {
                        Mmu::$variant(<$mmu as Model>::build(pfc, buffer, links, mtu_wire))
                    })*
                }
            }

            /// [`Mmu::arrive`] in the models other than the default, out of the data path's
            /// code.
            #[cold]
            #[inline(never)]
            fn arrive_other(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Admission {
                match self {
                    Mmu::$dvariant(m) => Model::arrive(m, port, out, prio, size),
                    $(Mmu::$variant(m) => Model::arrive(m, port, out, prio, size),)*
                }
            }

            /// [`Mmu::release`] in the models other than the default, out of the data path's
            /// code.
            #[cold]
            #[inline(never)]
            fn release_other(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Xon {
                match self {
                    Mmu::$dvariant(m) => Model::release(m, port, out, prio, size),
                    $(Mmu::$variant(m) => Model::release(m, port, out, prio, size),)*
                }
            }

            /// [`Model::take_frames`]: after a [`Mmu::release`] that answered
            /// [`Xon::Frames`].
            pub fn take_frames(&mut self, into: &mut Vec<Frame>) {
                match self {
                    Mmu::$dvariant(m) => m.take_frames(into),
                    $(Mmu::$variant(m) => m.take_frames(into),)*
                }
            }

            /// [`Model::threshold`].
            #[inline]
            pub fn threshold(&self) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.threshold(),
                    $(Mmu::$variant(m) => m.threshold(),)*
                }
            }

            /// [`Model::bytes_in_use`].
            pub fn bytes_in_use(&self) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.bytes_in_use(),
                    $(Mmu::$variant(m) => m.bytes_in_use(),)*
                }
            }

            /// [`Model::set_aside`].
            pub fn set_aside(&self) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.set_aside(),
                    $(Mmu::$variant(m) => m.set_aside(),)*
                }
            }

            /// [`Model::ingress_use`]: a read-only view for load balancers that predict PFC
            /// (RLB, LBoDSN).
            #[inline]
            pub fn ingress_use(&self, port: usize, prio: u8) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.ingress_use(port, prio),
                    $(Mmu::$variant(m) => m.ingress_use(port, prio),)*
                }
            }

            /// [`Model::charged`].
            pub fn charged(&self, port: usize, prio: u8) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.charged(port, prio),
                    $(Mmu::$variant(m) => m.charged(port, prio),)*
                }
            }

            /// [`Model::reserve`].
            pub fn reserve(&self) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.reserve(),
                    $(Mmu::$variant(m) => m.reserve(),)*
                }
            }

            /// [`Model::resume_offset`].
            pub fn resume_offset(&self) -> u64 {
                match self {
                    Mmu::$dvariant(m) => m.resume_offset(),
                    $(Mmu::$variant(m) => m.resume_offset(),)*
                }
            }

            /// [`Model::is_pausing`].
            pub fn is_pausing(&self, port: usize, prio: u8) -> bool {
                match self {
                    Mmu::$dvariant(m) => m.is_pausing(port, prio),
                    $(Mmu::$variant(m) => m.is_pausing(port, prio),)*
                }
            }

            /// [`Model::pause_is_stuck`].
            pub fn pause_is_stuck(
                &self,
                port: usize,
                prio: u8,
                stuck: u64,
                more_may_arrive: bool,
            ) -> bool {
                match self {
                    Mmu::$dvariant(m) => m.pause_is_stuck(port, prio, stuck, more_may_arrive),
                    $(Mmu::$variant(m) => m.pause_is_stuck(port, prio, stuck, more_may_arrive),)*
                }
            }
        }
    };
}

pfc_models! {
    "ingress" => Ingress(IngressMmu),
        "Shared buffer charged per (ingress port, priority): the HPCC ns-3 simulator's MMU.";
    "ns3-rdma" => Ns3Rdma(Ns3RdmaMmu, ns3_rdma: Ns3RdmaConfig),
        "The static or dynamic thresholds of the DCQCN authors' ns-3 (bobzhuyb/ns3-rdma).";
    "egress" => Egress(EgressMmu, egress: EgressPfcConfig),
        "PAUSE an ingress that sends to an egress queue at or above a length, until the queue \
         drains (the \"destination based rule\" of TI's CPSW switch).";
}

crate::tagged::table!(PfcConfig);

impl Mmu {
    /// The ingress model (`switch.pfc.model = "ingress"`) with these parameters; see
    /// [`IngressMmu::new`].
    pub fn new(
        buffer: u64,
        reserve: u64,
        resume_offset: u64,
        threshold: Threshold,
        pfc: bool,
        headroom: Vec<u64>,
    ) -> Mmu {
        Mmu::Ingress(IngressMmu::new(
            buffer,
            reserve,
            resume_offset,
            threshold,
            pfc,
            headroom,
        ))
    }

    /// A packet of `size` bytes arrives on ingress `port` at priority `prio`, bound for the
    /// local egress `out`: drop it, or charge it and say whether the switch must now send
    /// PAUSE(prio) out of `port`. The default model is tested first and the others are
    /// dispatched out of line (`#[cold]`), so that the data path pays one compare and branch
    /// for the choice (a full `match` here cost 1.6% of R1's instructions, this 1.1%:
    /// `benches/HISTORY.md`, "PFC models").
    #[inline(always)]
    pub fn arrive(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Admission {
        if let Mmu::Ingress(m) = self {
            return m.arrive(port, prio, size);
        }
        self.arrive_other(port, out, prio, size)
    }

    /// Releases a departing packet's bytes (it came in on `port`, leaves by `out`) and says
    /// which PFC frames the switch must now send. Always inlined, as [`Mmu::arrive`].
    #[inline(always)]
    pub fn release(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Xon {
        if let Mmu::Ingress(m) = self {
            return if m.release(port, prio, size) {
                Xon::Resume
            } else {
                Xon::None
            };
        }
        self.release_other(port, out, prio, size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every registered model with a `[switch.pfc]` table that chooses it, its parameter table
    /// at its defaults (the egress model's `xoff` has none), and that table resolved (as a
    /// resolved spec writes it).
    const MODELS: &[(&str, &str, &str)] = &[
        (
            "ingress",
            "",
            "enabled = true\nalpha = 0.0625\nreserve = \"4KB\"\nresume_offset = \"3KB\"\n",
        ),
        (
            "ns3-rdma",
            "model = \"ns3-rdma\"\n[ns3_rdma]\n",
            "enabled = true\nalpha = 0.0625\nreserve = \"4KB\"\nresume_offset = \"3KB\"\n\
             model = \"ns3-rdma\"\n\n[ns3_rdma]\ndynamic = true\nalpha = 16.0\n\
             pool = \"4120KB\"\nstatic_limit = \"20600B\"\nheadroom = \"103KB\"\n",
        ),
        (
            "egress",
            "model = \"egress\"\n[egress]\nxoff = \"200KB\"\n",
            "enabled = true\nalpha = 0.0625\nreserve = \"4KB\"\nresume_offset = \"3KB\"\n\
             model = \"egress\"\n\n[egress]\nxoff = \"200KB\"\nresume_offset = \"3KB\"\n",
        ),
    ];

    /// The registry covers every model: each name parses, its table validates and resolves
    /// as before, and the switch gets an MMU of that model, which charges and releases a
    /// packet. A row dropped from the registry, or one added without a case here, fails.
    #[test]
    fn every_registered_model_parses_validates_and_builds() {
        let names: Vec<&str> = PfcModel::ALL.iter().map(|m| m.name()).collect();
        let cases: Vec<&str> = MODELS.iter().map(|&(name, ..)| name).collect();
        assert_eq!(names, cases, "every model of the registry has a case here");
        let buffer = Bytes(9_000_000);
        let links = [(Rate::gbps(100), Time::from_us(1)); 4];
        for &(name, table, resolved) in MODELS {
            let pfc: PfcConfig = toml::from_str(table).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(pfc.model.name(), name);
            assert_eq!(pfc.validate(buffer), Ok(()), "{name}");
            assert_eq!(toml::to_string(&pfc).unwrap(), resolved, "{name}");
            let mut mmu = Mmu::build(&pfc, buffer, &links, 1_048);
            let variant = format!("{:?}(", pfc.model);
            assert!(format!("{mmu:?}").starts_with(&variant), "{name}: {mmu:?}");
            let no_pause = Admission::Accept { pause: false };
            assert_eq!(mmu.arrive(0, 1, 3, 1_000), no_pause, "{name}");
            assert_eq!((mmu.bytes_in_use(), mmu.charged(0, 3)), (1_000, 1_000));
            assert_eq!(mmu.release(0, 1, 3, 1_000), Xon::None, "{name}");
            assert_eq!(mmu.bytes_in_use(), 0, "{name}");
        }
    }

    /// A model's table under another model is refused, naming both.
    #[test]
    fn a_table_of_another_model_is_refused() {
        for &(name, table, _) in &MODELS[1..] {
            let key = table.lines().nth(1).unwrap().trim_matches(['[', ']']);
            let other: PfcConfig = toml::from_str(&table.replacen(name, "ingress", 1)).unwrap();
            assert_eq!(
                other.validate(Bytes(9_000_000)),
                Err(format!(
                    "switch.pfc.{key}: parameters of the \"{name}\" PFC model, but \
                     switch.pfc.model is \"ingress\"; set switch.pfc.model = \"{name}\", or \
                     remove the table"
                ))
            );
        }
    }
}
