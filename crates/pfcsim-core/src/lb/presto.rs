//! Presto: the sender cuts every flow into fixed-size flowcells and sends them round robin
//! over the paths to the destination; the receiver resequences between flowcells.
//!
//! Modelled (Presto, SIGCOMM'15, and the public ns-3 port of its authors' successors; see
//! `docs/schemes/presto.md`):
//! * Sender: flowcell `k` of a flow holds its bytes `[k * flowcell, (k + 1) * flowcell)` and
//!   goes on path `(start + k) mod n` of the `n` paths between the two ToRs, `start` drawn at
//!   random per flow. Cells are cut by byte offset, as Presto cuts them by TSO segment, so a
//!   retransmitted packet goes on the path of its flowcell.
//! * Receiver: a resequencing buffer in front of go-back-N (`sim/reseq.rs`), Presto's GRO
//!   rule: a packet ahead of the expected one in a *later* flowcell is held (reordering between
//!   flowcells); ahead within the *same* flowcell it goes to the transport at once (a loss:
//!   packets of a cell share a path). Held packets are released when the gap fills (or when
//!   the expected byte reaches their flowcell), and pushed to the transport in order when the
//!   expected byte has not moved for `reorder_timeout` or when more than `reorder_buffer`
//!   packets would be held; what leaks through reaches go-back-N as usual.
//!
//! Not modelled: weighted round robin for asymmetric fabrics (Presto's controller weights),
//! the adaptive flush timeout, TSO/GRO batching costs.

use super::host::{FlowInfo, HostCtx, HostFabric, HostScheme};
use super::{Capabilities, LbFabric, SchemeConfig, SwitchScheme};
use crate::check::check_range;
use crate::units::{Bytes, Time};
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// Presto's parameters (`[lb]` with `scheme = "presto"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PrestoConfig {
    /// Flowcell size (Presto: 64 KB, the TSO limit; here 64,000 B, 64 packets of 1000 B
    /// payload: write "65536B" for the exact TSO limit).
    pub flowcell: Bytes,
    /// The receiver's resequencing buffer is on (Presto's GRO); off, every reordering between
    /// flowcells reaches go-back-N.
    pub resequence: bool,
    /// Held packets are pushed to the transport once the flow's next expected byte has not
    /// moved for this long (the public ns-3 port's out-of-order flush timer: 100 us).
    pub reorder_timeout: Time,
    /// Most packets held per flow; one more flushes the buffer (default 256: four 64 KB
    /// flowcells of 1000 B packets).
    pub reorder_buffer: u32,
}

impl Default for PrestoConfig {
    fn default() -> Self {
        PrestoConfig {
            flowcell: Bytes(64_000),
            resequence: true,
            reorder_timeout: Time::from_us(100),
            reorder_buffer: 256,
        }
    }
}

impl SchemeConfig for PrestoConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range (the
    /// resequencing keys only with `lb.resequence = true`).
    fn validate(&self) -> Result<(), String> {
        check_range(
            "lb.flowcell",
            self.flowcell,
            Bytes(1)..,
            "(Presto default \"64KB\")",
        )?;
        if self.resequence && self.reorder_timeout == Time::ZERO {
            return Err(
                "lb.reorder_timeout: must be above 0 with lb.resequence = true; give a time such as \"100us\" (valid: > 0s)"
                    .into(),
            );
        }
        if self.resequence {
            check_range(
                "lb.reorder_buffer",
                self.reorder_buffer,
                1..,
                "held packets per flow with lb.resequence = true (Presto default 256)",
            )?;
        }
        Ok(())
    }

    /// The receiver's resequencing rule, if on.
    fn resequencing(&self) -> Option<Resequencing> {
        self.resequence.then_some(Resequencing {
            flowcell: self.flowcell.0,
            timeout: self.reorder_timeout,
            limit: self.reorder_buffer,
        })
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            hosts: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        super::host::switch_side(fabric)
    }

    fn host_scheme(&self, flows: usize, _fabric: &HostFabric) -> Option<Box<dyn HostScheme>> {
        Some(Box::new(Presto::new(self, flows)))
    }
}

/// The receiver-side resequencing a host-side scheme asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resequencing {
    /// Bytes per flowcell: only reordering between flowcells is held back.
    pub flowcell: u64,
    pub timeout: Time,
    /// Most packets held per flow.
    pub limit: u32,
}

/// Presto's sender state: the first path of every flow.
#[derive(Clone, Debug)]
pub struct Presto {
    flowcell: u64,
    /// Index of the path of the flow's first flowcell, by flow id.
    start: Vec<u16>,
}

impl Presto {
    pub fn new(cfg: &PrestoConfig, flows: usize) -> Presto {
        Presto {
            flowcell: cfg.flowcell.0,
            start: vec![0; flows],
        }
    }
}

impl HostScheme for Presto {
    fn on_flow_start(&mut self, ctx: &mut HostCtx, flow: &FlowInfo) {
        let n = ctx.fabric.paths(flow.src, flow.dst).len();
        self.start[flow.id as usize] = ctx.rng.gen_range(0..n) as u16;
    }

    #[inline]
    fn path_tag(&mut self, ctx: &mut HostCtx, flow: &FlowInfo, seq: u64, _payload: u32) -> u32 {
        let paths = ctx.fabric.paths(flow.src, flow.dst);
        let cell = seq / self.flowcell;
        let start = self.start[flow.id as usize] as u64;
        paths[((start + cell) % paths.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::host::TestHost;

    #[test]
    fn flowcells_go_round_robin_over_the_paths() {
        let mut host = TestHost::new(4);
        let cfg = PrestoConfig::default();
        let mut presto = Presto::new(&cfg, 1);
        let flow = TestHost::flow(0, 1_000_000);
        presto.on_flow_start(&mut host.ctx(0), &flow);
        let tag = |presto: &mut Presto, host: &mut TestHost, seq| {
            presto.path_tag(&mut host.ctx(0), &flow, seq, 1000)
        };
        let first = tag(&mut presto, &mut host, 0);
        // Every packet of a flowcell shares its path ...
        for seq in (0..64_000).step_by(1000) {
            assert_eq!(tag(&mut presto, &mut host, seq), first);
        }
        // ... and successive flowcells take successive paths, wrapping around.
        let cells: Vec<u32> = (0..8)
            .map(|k| tag(&mut presto, &mut host, k * 64_000))
            .collect();
        for (k, &cell) in cells.iter().enumerate() {
            assert_eq!(cell, (first - 1 + k as u32) % 4 + 1, "cell {k}");
        }
    }

    #[test]
    fn flows_start_on_different_paths() {
        let mut host = TestHost::new(8);
        let mut presto = Presto::new(&PrestoConfig::default(), 64);
        let mut seen = std::collections::BTreeSet::new();
        for id in 0..64 {
            let flow = TestHost::flow(id, 100_000);
            presto.on_flow_start(&mut host.ctx(0), &flow);
            seen.insert(presto.path_tag(&mut host.ctx(0), &flow, 0, 1000));
        }
        assert_eq!(seen.len(), 8, "random first paths cover all 8: {seen:?}");
    }

    #[test]
    fn bad_settings_are_refused_with_the_key() {
        let bad = PrestoConfig {
            flowcell: Bytes(0),
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.flowcell: 0B is out of range; use flowcell >= 1B (Presto default \"64KB\")"
        );
        let bad = PrestoConfig {
            reorder_timeout: Time::ZERO,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.reorder_timeout: must be above 0 with lb.resequence = true; give a time such as \"100us\" (valid: > 0s)"
        );
        let bad = PrestoConfig {
            reorder_buffer: 0,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.reorder_buffer: 0 is out of range; use reorder_buffer >= 1 held packets per flow with lb.resequence = true (Presto default 256)"
        );
        let off = PrestoConfig {
            resequence: false,
            reorder_timeout: Time::ZERO,
            reorder_buffer: 0,
            ..Default::default()
        };
        assert_eq!(off.validate(), Ok(()));
        assert_eq!(off.resequencing(), None);
    }
}
