//! The switch memory-management unit: where a switch counts the bytes it buffers, when it
//! drops, and when it sends PFC PAUSE and RESUME. Three models (`switch.pfc.model`, described
//! with their sources in `docs/fabric.md`, "PFC models"):
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
//! The model is chosen once per switch: [`Mmu`] is an enum; on the data path
//! ([`Mmu::arrive`], [`Mmu::release`]) the default model is tested first and the others are
//! dispatched out of line, so that the default pays one compare and branch.
//!
//! Control packets in the strict-priority queue are not accounted by any model.

mod egress;
mod ingress;
mod ns3_rdma;

pub use egress::EgressMmu;
pub use ingress::{auto_headroom, IngressMmu, Threshold};
pub use ns3_rdma::{Ns3RdmaMmu, Ns3RdmaParams, CELL};

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

/// The buffer state of one switch, in the model its spec chose.
#[derive(Clone, Debug)]
pub enum Mmu {
    Ingress(IngressMmu),
    Ns3Rdma(Ns3RdmaMmu),
    Egress(EgressMmu),
}

impl Mmu {
    /// The ingress model (`switch.pfc.model = "ingress"`); see [`IngressMmu::new`].
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

    /// [`Mmu::arrive`] in the models other than the default, out of the data path's code.
    #[cold]
    #[inline(never)]
    fn arrive_other(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Admission {
        match self {
            Mmu::Ingress(m) => m.arrive(port, prio, size),
            Mmu::Ns3Rdma(m) => m.arrive(port, prio, size),
            Mmu::Egress(m) => m.arrive(port, out, prio, size),
        }
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

    /// [`Mmu::release`] in the models other than the default, out of the data path's code.
    #[cold]
    #[inline(never)]
    fn release_other(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Xon {
        match self {
            Mmu::Ingress(m) => {
                if m.release(port, prio, size) {
                    Xon::Resume
                } else {
                    Xon::None
                }
            }
            Mmu::Ns3Rdma(m) => m.release(port, prio, size),
            Mmu::Egress(m) => m.release(port, out, prio, size),
        }
    }

    /// Moves the PFC frames decided by the last [`Mmu::release`] that answered `Frames` to
    /// the end of `into`, in the order decided (none for the default model). No allocation
    /// once both buffers have grown to the most frames of one decision.
    pub fn take_frames(&mut self, into: &mut Vec<Frame>) {
        match self {
            Mmu::Ingress(_) => {}
            Mmu::Ns3Rdma(m) => m.take_frames(into),
            Mmu::Egress(m) => m.take_frames(into),
        }
    }

    /// The current XOFF threshold on [`Mmu::ingress_use`] (priority-group 0's service pool in
    /// the ns3-rdma model; `u64::MAX` in the egress model, which has no per-ingress
    /// threshold).
    #[inline]
    pub fn threshold(&self) -> u64 {
        match self {
            Mmu::Ingress(m) => m.threshold(),
            Mmu::Ns3Rdma(m) => m.threshold(),
            Mmu::Egress(_) => u64::MAX,
        }
    }

    /// Bytes currently charged, all queues together (0 when the switch is empty).
    pub fn bytes_in_use(&self) -> u64 {
        match self {
            Mmu::Ingress(m) => m.bytes_in_use(),
            Mmu::Ns3Rdma(m) => m.bytes_in_use(),
            Mmu::Egress(m) => m.bytes_in_use(),
        }
    }

    /// The part of the buffer set aside for headroom and reserves, which the shared pool
    /// never uses (ingress model; the other models set nothing aside).
    pub fn set_aside(&self) -> u64 {
        match self {
            Mmu::Ingress(m) => m.set_aside(),
            _ => 0,
        }
    }

    /// Bytes of (port, prio) that count against the XOFF threshold ([`Mmu::threshold`]).
    /// Read-only view for load balancers that predict PFC (RLB, LBoDSN). Egress model: every
    /// byte charged to (port, prio).
    #[inline]
    pub fn ingress_use(&self, port: usize, prio: u8) -> u64 {
        match self {
            Mmu::Ingress(m) => m.ingress_use(port, prio),
            Mmu::Ns3Rdma(m) => m.ingress_use(port, prio),
            Mmu::Egress(m) => m.charged(port, prio),
        }
    }

    /// Every byte charged to (port, prio) (monitors).
    pub fn charged(&self, port: usize, prio: u8) -> u64 {
        match self {
            Mmu::Ingress(m) => m.charged(port, prio),
            Mmu::Ns3Rdma(m) => m.charged(port, prio),
            Mmu::Egress(m) => m.charged(port, prio),
        }
    }

    /// The bytes each (port, priority) may use before its use counts against the threshold:
    /// `reserve() + threshold()` is the XOFF level of [`Mmu::charged`].
    pub fn reserve(&self) -> u64 {
        match self {
            Mmu::Ingress(m) => m.reserve(),
            Mmu::Ns3Rdma(m) => m.reserve(),
            Mmu::Egress(_) => 0,
        }
    }

    /// How far below the threshold a paused (port, priority) must drain before RESUME.
    pub fn resume_offset(&self) -> u64 {
        match self {
            Mmu::Ingress(m) => m.resume_offset(),
            Mmu::Ns3Rdma(m) => m.resume_offset(),
            Mmu::Egress(m) => m.resume_offset(),
        }
    }

    /// Whether this switch has PAUSE outstanding for (port, prio).
    pub fn is_pausing(&self, port: usize, prio: u8) -> bool {
        match self {
            Mmu::Ingress(m) => m.is_pausing(port, prio),
            Mmu::Ns3Rdma(m) => m.is_pausing(port, prio),
            Mmu::Egress(m) => m.is_pausing(port, prio),
        }
    }

    /// Whether (port, prio) keeps its PAUSE outstanding for as long as `stuck` of the bytes
    /// charged to it stay in the switch (PFC deadlock detection, `sim/stall.rs`; see
    /// [`IngressMmu::pause_is_stuck`]). The egress model answers `false` (its pauses are
    /// lifted by other ingresses' bytes leaving, which this test cannot see): deadlock
    /// detection does not find its deadlocks, the no-progress watchdog does.
    pub fn pause_is_stuck(&self, port: usize, prio: u8, stuck: u64, more_may_arrive: bool) -> bool {
        match self {
            Mmu::Ingress(m) => m.pause_is_stuck(port, prio, stuck, more_may_arrive),
            Mmu::Ns3Rdma(m) => m.pause_is_stuck(port, prio, stuck, more_may_arrive),
            Mmu::Egress(_) => false,
        }
    }
}
