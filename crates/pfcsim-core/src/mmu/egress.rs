//! The egress-triggered model of the MMU (`switch.pfc.model = "egress"`): PFC keyed on the
//! bytes queued for an egress queue (local egress port, priority) instead of the bytes an
//! ingress holds. The mechanism of the "destination based rule" of TI's CPSW Ethernet switch
//! (DRA821U technical reference manual, SPRUIU1C, "Priority Flow Control"): an ingress
//! priority is triggered, at the reception of one of its packets, by the state of that
//! packet's destination transmit queue, and cleared once every transmit queue that set the
//! trigger meets its clear condition. Thresholds in bytes here, not in blocks (see
//! `docs/reference/fabric.md`, "PFC models").
//!
//! * Counted: per egress queue, the wire bytes of the data packets charged to it, from
//!   admission until they start leaving (packets held by a scheme, not yet in the port's
//!   queue, count); per (ingress port, priority), the bytes it holds.
//! * XOFF: a packet that arrives on ingress `p` at priority `q` and leaves its egress queue at
//!   `xoff` bytes or more makes the queue congested and pauses (p, q), unless that queue
//!   already pauses it. Ingresses that send nothing to the queue while it is congested are
//!   not paused by it.
//! * XON: when a departure leaves a congested queue at `xoff - resume_offset` bytes or fewer,
//!   the queue releases every ingress it paused. An ingress paused by several congested queues
//!   sends RESUME when the last of them releases it.
//! * Admission: a packet is dropped only if the switch's whole buffer (`switch.buffer`) would
//!   overflow; there is no per-ingress headroom: the buffer must hold what arrives after the
//!   PAUSE (up to one round trip of each paused link).

use super::{Admission, Frame, Model, PfcConfig, Xon};
use crate::port::N_PRIO;
use crate::units::{Bytes, Rate, Time};
use serde::{Deserialize, Serialize};

/// Parameters of the egress-triggered PFC model (`[switch.pfc.egress]`, required with it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct EgressPfcConfig {
    /// An egress queue (port, priority) of at least this many bytes pauses each ingress that
    /// sends it a packet.
    pub xoff: Bytes,
    /// It releases them once it is at most `xoff - resume_offset` long (default 3 KB).
    #[serde(default = "default_egress_resume_offset")]
    pub resume_offset: Bytes,
}

crate::tagged::table!(EgressPfcConfig);

fn default_egress_resume_offset() -> Bytes {
    Bytes(3_000)
}

/// One egress queue (local egress port, priority).
#[derive(Clone, Copy, Debug, Default)]
struct EgressQueue {
    bytes: u64,
    /// Above `xoff` and not yet drained to the XON level.
    congested: bool,
}

/// One (ingress port, priority).
#[derive(Clone, Copy, Debug, Default)]
struct Ingress {
    bytes: u64,
    /// Congested egress queues that pause it.
    holds: u32,
}

/// The buffer state of one switch in the egress model.
#[derive(Clone, Debug)]
pub struct EgressMmu {
    buffer: u64,
    xoff: u64,
    resume_offset: u64,
    ports: usize,
    total: u64,
    /// Per (egress port, priority).
    egress: Vec<EgressQueue>,
    /// Per (egress port, priority, ingress port): the egress queue pauses the ingress.
    paused_by: Vec<bool>,
    /// Per (ingress port, priority).
    ingress: Vec<Ingress>,
    /// PFC frames decided and not yet taken by the switch.
    frames: Vec<Frame>,
}

impl EgressMmu {
    /// A switch of `ports` ports and a buffer of `buffer` bytes; an egress queue of `xoff`
    /// bytes or more pauses each ingress that sends to it and releases them at
    /// `xoff - resume_offset` (`resume_offset <= xoff`).
    pub fn new(buffer: u64, xoff: u64, resume_offset: u64, ports: usize) -> EgressMmu {
        EgressMmu {
            buffer,
            xoff,
            resume_offset,
            ports,
            total: 0,
            egress: vec![EgressQueue::default(); ports * N_PRIO],
            paused_by: vec![false; ports * N_PRIO * ports],
            ingress: vec![Ingress::default(); ports * N_PRIO],
            frames: Vec::new(),
        }
    }

    #[inline]
    fn idx(port: usize, prio: u8) -> usize {
        port * N_PRIO + prio as usize
    }

    #[inline]
    fn pair(&self, out: usize, prio: u8, port: usize) -> usize {
        Self::idx(out, prio) * self.ports + port
    }
}

impl Model for EgressMmu {
    /// The table given, its `xoff` above 0 and at most the buffer, and `resume_offset` at
    /// most `xoff`.
    fn validate(pfc: &PfcConfig, buffer: Bytes) -> Result<(), String> {
        let Some(c) = &pfc.egress else {
            return Err("switch.pfc.model: \"egress\" needs switch.pfc.egress.xoff, the egress queue length that pauses the ingresses feeding it (e.g. [switch.pfc.egress] xoff = \"200KB\")".into());
        };
        if c.xoff.0 == 0 {
            return Err("switch.pfc.egress.xoff: must be above 0 (e.g. \"200KB\")".into());
        }
        if c.xoff > buffer {
            return Err(format!("switch.pfc.egress.xoff ({}) is above switch.buffer ({buffer}): no egress queue can reach it, so PFC would never pause; give at most the buffer (e.g. \"200KB\")", c.xoff));
        }
        if c.resume_offset > c.xoff {
            return Err(format!("switch.pfc.egress.resume_offset ({}) is above switch.pfc.egress.xoff ({}); RESUME comes at xoff - resume_offset, so it must be at most xoff", c.resume_offset, c.xoff));
        }
        Ok(())
    }

    /// The table's thresholds; the links do not matter.
    fn build(pfc: &PfcConfig, buffer: Bytes, links: &[(Rate, Time)], _mtu_wire: u64) -> Self {
        let c = (pfc.egress.as_ref()).expect("validated: the egress model has its table");
        EgressMmu::new(buffer.0, c.xoff.0, c.resume_offset.0, links.len())
    }

    #[inline(never)]
    fn arrive(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Admission {
        if self.total + size > self.buffer {
            return Admission::Drop;
        }
        self.total += size;
        self.ingress[Self::idx(port, prio)].bytes += size;
        let e = Self::idx(out, prio);
        self.egress[e].bytes += size;
        if self.egress[e].bytes >= self.xoff {
            self.egress[e].congested = true;
        }
        let pair = self.pair(out, prio, port);
        if !self.egress[e].congested || self.paused_by[pair] {
            return Admission::Accept { pause: false };
        }
        self.paused_by[pair] = true;
        let q = &mut self.ingress[Self::idx(port, prio)];
        q.holds += 1;
        Admission::Accept {
            pause: q.holds == 1,
        }
    }

    #[inline(never)]
    fn release(&mut self, port: usize, out: usize, prio: u8, size: u64) -> Xon {
        self.total -= size;
        self.ingress[Self::idx(port, prio)].bytes -= size;
        let e = Self::idx(out, prio);
        self.egress[e].bytes -= size;
        if !self.egress[e].congested || self.egress[e].bytes + self.resume_offset > self.xoff {
            return Xon::None;
        }
        self.egress[e].congested = false;
        for j in 0..self.ports {
            let pair = self.pair(out, prio, j);
            if self.paused_by[pair] {
                self.paused_by[pair] = false;
                let q = &mut self.ingress[Self::idx(j, prio)];
                q.holds -= 1;
                if q.holds == 0 {
                    self.frames.push(Frame {
                        port: j as u16,
                        prio,
                        pause: false,
                    });
                }
            }
        }
        if self.frames.is_empty() {
            Xon::None
        } else {
            Xon::Frames
        }
    }

    /// Moves the frames decided since the last call to the end of `into`, in the order
    /// decided. Both buffers keep their memory, so that a run allocates none per decision.
    fn take_frames(&mut self, into: &mut Vec<Frame>) {
        into.append(&mut self.frames);
    }

    /// None: no per-ingress threshold (`u64::MAX`).
    fn threshold(&self) -> u64 {
        u64::MAX
    }

    fn bytes_in_use(&self) -> u64 {
        self.total
    }

    /// Nothing: this model has no headroom or reserve.
    fn set_aside(&self) -> u64 {
        0
    }

    /// Every byte charged to (port, prio) ([`Model::charged`]).
    fn ingress_use(&self, port: usize, prio: u8) -> u64 {
        self.charged(port, prio)
    }

    fn charged(&self, port: usize, prio: u8) -> u64 {
        self.ingress[Self::idx(port, prio)].bytes
    }

    /// Nothing: no per-ingress threshold.
    fn reserve(&self) -> u64 {
        0
    }

    fn resume_offset(&self) -> u64 {
        self.resume_offset
    }

    fn is_pausing(&self, port: usize, prio: u8) -> bool {
        self.ingress[Self::idx(port, prio)].holds > 0
    }

    /// `false`: its pauses are lifted by other ingresses' bytes leaving, which this test
    /// cannot see (deadlock detection does not find its deadlocks, the no-progress watchdog
    /// does).
    fn pause_is_stuck(&self, _port: usize, _prio: u8, _stuck: u64, _more: bool) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(port: u16, prio: u8, pause: bool) -> Frame {
        Frame { port, prio, pause }
    }

    /// Egress port 3 fed by ingresses 0 and 1 (priority 3): the packet that takes it to
    /// 5,000 B pauses its own ingress (1); ingress 0 is paused at its next packet, ingress 2
    /// at its first; XON at 5,000 - 2,000 B releases all three at once.
    #[test]
    fn a_congested_egress_pauses_the_ingresses_that_send_to_it_until_it_drains() {
        let mut m = EgressMmu::new(100_000, 5_000, 2_000, 4);
        let no = Admission::Accept { pause: false };
        let yes = Admission::Accept { pause: true };
        assert_eq!(m.arrive(0, 3, 3, 1_000), no);
        for _ in 0..3 {
            assert_eq!(m.arrive(1, 3, 3, 1_000), no);
        }
        // Another egress queue and another priority count apart.
        assert_eq!(m.arrive(2, 1, 3, 1_000), no);
        assert_eq!(m.arrive(2, 3, 2, 1_000), no);
        // The fifth kilobyte for (3, 3): 5,000 B, congested.
        assert_eq!(m.arrive(1, 3, 3, 1_000), yes);
        assert!(m.is_pausing(1, 3) && !m.is_pausing(0, 3));
        assert_eq!(m.arrive(1, 3, 3, 1_000), no, "one PAUSE per ingress");
        assert_eq!(m.arrive(0, 3, 3, 1_000), yes);
        assert_eq!(m.arrive(2, 3, 3, 1_000), yes);
        assert!(!m.is_pausing(2, 2), "per priority");
        // 8,000 B queued: XON once at most 3,000 B are left.
        for _ in 0..4 {
            assert_eq!(m.release(1, 3, 3, 1_000), Xon::None);
        }
        assert_eq!(m.release(0, 3, 3, 1_000), Xon::Frames); // 3,000 B left
        let mut frames = vec![frame(5, 1, true)];
        m.take_frames(&mut frames);
        assert_eq!(
            frames,
            vec![
                frame(5, 1, true),
                frame(0, 3, false),
                frame(1, 3, false),
                frame(2, 3, false)
            ],
            "appended in the order decided"
        );
        assert!(
            m.frames.capacity() >= 3,
            "the MMU keeps its buffer for the next decision"
        );
        frames.clear();
        m.take_frames(&mut frames);
        assert!(frames.is_empty(), "taken once");
        assert!(!m.is_pausing(0, 3) && !m.is_pausing(2, 3));
        // Below XOFF again: nothing.
        assert_eq!(m.arrive(0, 3, 3, 1_000), no);
    }

    /// An ingress paused by two congested egress queues resumes only when both release it.
    #[test]
    fn an_ingress_paused_by_two_queues_waits_for_both() {
        let mut m = EgressMmu::new(100_000, 2_000, 0, 4);
        m.arrive(0, 2, 3, 1_000);
        assert_eq!(m.arrive(0, 2, 3, 1_000), Admission::Accept { pause: true });
        m.arrive(0, 3, 3, 1_000);
        // The second queue's XOFF adds a hold but sends no second PAUSE.
        assert_eq!(m.arrive(0, 3, 3, 1_000), Admission::Accept { pause: false });
        assert_eq!(m.release(0, 2, 3, 1_000), Xon::None); // queue 2 released it
        assert!(m.is_pausing(0, 3));
        assert_eq!(m.release(0, 3, 3, 1_000), Xon::Frames);
        let mut frames = Vec::new();
        m.take_frames(&mut frames);
        assert_eq!(frames, vec![frame(0, 3, false)]);
        m.release(0, 2, 3, 1_000);
        m.release(0, 3, 3, 1_000);
        assert_eq!(m.bytes_in_use(), 0);
    }

    /// The only drop: the whole buffer would overflow.
    #[test]
    fn drops_only_when_the_buffer_is_full() {
        let mut m = EgressMmu::new(3_000, 1_000, 0, 2);
        for _ in 0..3 {
            assert_ne!(m.arrive(0, 1, 3, 1_000), Admission::Drop);
        }
        assert_eq!(m.arrive(1, 1, 3, 1), Admission::Drop);
        assert_eq!(m.charged(0, 3), 3_000);
    }
}
