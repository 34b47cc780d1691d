//! The ingress model of the MMU (`switch.pfc.model = "ingress"`, the default): one shared
//! buffer, ingress accounting per (ingress port, priority), and the PFC XOFF/XON decisions.
//!
//! Modelled on the shared-buffer MMU of the HPCC ns-3 simulator (see `docs/reference/fabric.md`):
//!
//! * Each (ingress port `p`, priority `q`) has a small reserve, then uses the shared pool, then
//!   its port's headroom.
//! * The shared-pool threshold is either dynamic, `T = alpha * (buffer - Σheadroom - Σreserve
//!   - shared_used)`, or a static byte count.
//! * XOFF: after an enqueue, if (p, q) uses headroom or its shared use reached `T`, the switch
//!   sends PAUSE(q) out of port `p`. XON: after a dequeue, if (p, q) is paused, uses no
//!   headroom, and its shared use is 0 or at most `T - resume_offset`, it sends RESUME(q).
//! * Admission: with PFC on, a packet is dropped only if it would overrun the port's headroom
//!   (the fabric is misconfigured if that happens); with PFC off there is no headroom and a
//!   packet that would push (p, q) past `T` is dropped (lossy mode).
//!
//! Its parameters are the keys of `[switch.pfc]` itself (`alpha`, `static_threshold`,
//! `reserve`, `resume_offset`, `headroom`, in [`PfcConfig`]), checked whatever the model.

use super::{Admission, Frame, Model, PfcConfig, Xon, MAX_BUFFER};
use crate::port::N_PRIO;
use crate::units::{Bytes, Rate, Time};

/// Headroom of a port: what arrives after the switch decides to pause the link's far end.
/// The PAUSE waits for one packet on our egress and its own serialization, travels the link
/// (one delay) while the peer keeps sending; the peer then finishes the packet it is sending,
/// and everything already on the wire still arrives (one delay). So 2 x rate x delay plus
/// three maximum-size packets.
pub fn auto_headroom(rate: Rate, delay: Time, mtu_wire: u64) -> u64 {
    2 * rate.bytes_in(delay) + 3 * mtu_wire
}

/// `bytes x alpha`, rounded down: `(bytes as f64 * alpha) as u64`, computed through the
/// signed conversions, which x86-64 does in fewer instructions (`i64` to `f64` in one, `u64`
/// to `f64` in about ten; this runs two or three times per packet a switch admits, and R1 ran
/// 0.5% fewer instructions, `benches/HISTORY.md`, "Cost at scale, fifth round"). The same
/// value for every `bytes` below 2^63 (`bytes` is at most the buffer, at most [`MAX_BUFFER`]:
/// `switch.buffer` is checked) and
/// every `alpha`: the two conversions to `f64` round alike below 2^63, and so do the two back
/// for a product below 2^63; a larger product (a huge `alpha`) takes the unsigned conversion.
#[inline]
fn scaled(bytes: u64, alpha: f64) -> u64 {
    /// 2^63, exactly.
    const SIGNED_LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let product = bytes as i64 as f64 * alpha;
    if product < SIGNED_LIMIT {
        product as i64 as u64
    } else {
        product as u64
    }
}

/// How the XOFF threshold on a queue's shared-buffer use is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Threshold {
    /// Dynamic threshold: `alpha` times the free shared buffer.
    Dynamic { alpha: f64 },
    /// A fixed number of shared-buffer bytes per (ingress port, priority).
    Static { bytes: u64 },
}

/// The buffer state of one switch in the ingress model.
#[derive(Clone, Debug)]
pub struct IngressMmu {
    buffer: u64,
    reserve: u64,
    resume_offset: u64,
    threshold: Threshold,
    pfc: bool,
    headroom: Vec<u64>,
    /// Σheadroom + Σreserve over ports: the part of the buffer the shared pool cannot use.
    set_aside: u64,
    /// Per (port, priority), in one record so an update touches one cache line; priority by
    /// priority, so that the entries of a fabric's one or two priorities in use are adjacent
    /// (24 bytes apart, not 192) and few lines hold a switch's whole state.
    queues: Vec<IngressQueue>,
    /// Number of ports (the stride of a priority's entries in `queues`).
    ports: usize,
    shared_used: u64,
}

/// What the MMU holds for one (ingress port, priority).
#[derive(Clone, Copy, Debug, Default)]
struct IngressQueue {
    /// Reserve + shared bytes charged.
    ingress: u64,
    /// Headroom bytes charged.
    hdrm: u64,
    /// PAUSE is outstanding.
    paused: bool,
}

impl IngressMmu {
    /// `headroom[p]` is port `p`'s headroom (ignored with PFC off).
    pub fn new(
        buffer: u64,
        reserve: u64,
        resume_offset: u64,
        threshold: Threshold,
        pfc: bool,
        headroom: Vec<u64>,
    ) -> IngressMmu {
        debug_assert!(buffer <= MAX_BUFFER, "see `scaled`");
        let ports = headroom.len();
        let headroom = if pfc { headroom } else { vec![0; ports] };
        let set_aside = headroom.iter().sum::<u64>() + reserve * ports as u64;
        IngressMmu {
            buffer,
            reserve,
            resume_offset,
            threshold,
            pfc,
            headroom,
            set_aside,
            queues: vec![IngressQueue::default(); ports * N_PRIO],
            ports,
            shared_used: 0,
        }
    }

    #[inline]
    fn idx(&self, port: usize, prio: u8) -> usize {
        prio as usize * self.ports + port
    }

    #[inline]
    fn shared_of(&self, q: &IngressQueue) -> u64 {
        q.ingress.saturating_sub(self.reserve)
    }

    /// A packet of `size` bytes arrives on ingress `port` at priority `prio`: drop it, or
    /// charge it and say whether the switch must now send PAUSE(prio) out of `port`.
    #[inline(always)]
    pub fn arrive(&mut self, port: usize, prio: u8, size: u64) -> Admission {
        let threshold = self.threshold();
        let i = self.idx(port, prio);
        let mut q = self.queues[i];
        let n = q.ingress + size;
        let over_threshold = n > self.reserve && n - self.reserve > threshold;
        if over_threshold && (!self.pfc || q.hdrm + size > self.headroom[port]) {
            return Admission::Drop;
        }
        let mut threshold_after = threshold;
        if n <= self.reserve {
            q.ingress = n;
        } else if self.pfc && over_threshold {
            q.hdrm += size;
        } else {
            self.shared_used += size.min(n - self.reserve);
            q.ingress = n;
            // Charging the shared pool lowers the threshold: read it again.
            threshold_after = self.threshold();
        }
        let pause = self.pfc && !q.paused && (q.hdrm > 0 || self.shared_of(&q) >= threshold_after);
        q.paused |= pause;
        self.queues[i] = q;
        Admission::Accept { pause }
    }

    /// Releases a departing packet's bytes (headroom first, then shared, then reserve).
    /// Returns `true` if the switch must now send RESUME(prio) out of `port`.
    #[inline]
    pub fn release(&mut self, port: usize, prio: u8, size: u64) -> bool {
        let i = self.idx(port, prio);
        let mut q = self.queues[i];
        let from_hdrm = q.hdrm.min(size);
        q.hdrm -= from_hdrm;
        let rest = size - from_hdrm;
        let from_shared = self.shared_of(&q).min(rest);
        self.shared_used -= from_shared;
        q.ingress -= rest;
        let mut resume = false;
        if q.paused && q.hdrm == 0 {
            let shared = self.shared_of(&q);
            if shared == 0 || shared + self.resume_offset <= self.threshold() {
                q.paused = false;
                resume = true;
            }
        }
        self.queues[i] = q;
        resume
    }

    /// The bytes of the pool shared by every (port, priority), in use.
    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    /// The first of this model's keys, the keys of `[switch.pfc]` itself, that `pfc` sets to
    /// other than its default (another model refuses them: [`PfcConfig::validate`]).
    pub(super) fn key_set(pfc: &PfcConfig) -> Option<&'static str> {
        let defaults = PfcConfig::default();
        let keys = [
            ("alpha", pfc.alpha != defaults.alpha),
            ("static_threshold", pfc.static_threshold.is_some()),
            ("reserve", pfc.reserve != defaults.reserve),
            ("resume_offset", pfc.resume_offset != defaults.resume_offset),
            ("headroom", pfc.headroom.is_some()),
        ];
        keys.iter().find(|(_, set)| *set).map(|(key, _)| *key)
    }
}

impl Model for IngressMmu {
    /// `alpha` positive and finite; `static_threshold` above 0, at most the buffer, and not
    /// beside an `alpha` of its own (it replaces the dynamic threshold).
    fn validate(pfc: &PfcConfig, buffer: Bytes) -> Result<(), String> {
        if !(pfc.alpha > 0.0 && pfc.alpha.is_finite()) {
            return Err(format!(
                "switch.pfc.alpha: {} is not valid; use a positive factor (e.g. 0.0625)",
                pfc.alpha
            ));
        }
        match pfc.static_threshold {
            Some(Bytes(0)) => {
                Err("switch.pfc.static_threshold: must be above 0, or left out for the dynamic threshold".into())
            }
            Some(t) if t > buffer => {
                Err(format!("switch.pfc.static_threshold ({t}) is above switch.buffer ({buffer}): no ingress can hold that much, so PFC would never pause; give at most the buffer (e.g. \"256KB\"), or leave it out for the dynamic threshold"))
            }
            Some(_) if pfc.alpha != PfcConfig::default().alpha => {
                Err("switch.pfc.alpha: the dynamic threshold's factor, which switch.pfc.static_threshold replaces; remove alpha, or static_threshold for the dynamic threshold".into())
            }
            _ => Ok(()),
        }
    }

    /// Each port's headroom `switch.pfc.headroom`, or [`auto_headroom`] of its link.
    fn build(pfc: &PfcConfig, buffer: Bytes, links: &[(Rate, Time)], mtu_wire: u64) -> Self {
        let headroom = links
            .iter()
            .map(|&(rate, delay)| {
                pfc.headroom
                    .map(|b| b.0)
                    .unwrap_or_else(|| auto_headroom(rate, delay, mtu_wire))
            })
            .collect();
        let threshold = match pfc.static_threshold {
            Some(b) => Threshold::Static { bytes: b.0 },
            None => Threshold::Dynamic { alpha: pfc.alpha },
        };
        IngressMmu::new(
            buffer.0,
            pfc.reserve.0,
            pfc.resume_offset.0,
            threshold,
            pfc.enabled,
            headroom,
        )
    }

    /// [`IngressMmu::arrive`] (`out` does not matter).
    #[inline]
    fn arrive(&mut self, port: usize, _out: usize, prio: u8, size: u64) -> Admission {
        IngressMmu::arrive(self, port, prio, size)
    }

    /// [`IngressMmu::release`]: [`Xon::Resume`] or [`Xon::None`].
    #[inline]
    fn release(&mut self, port: usize, _out: usize, prio: u8, size: u64) -> Xon {
        if IngressMmu::release(self, port, prio, size) {
            Xon::Resume
        } else {
            Xon::None
        }
    }

    /// None: every RESUME is the released packet's own ([`Xon::Resume`]).
    fn take_frames(&mut self, _into: &mut Vec<Frame>) {}

    /// The current XOFF threshold on a queue's shared use.
    #[inline]
    fn threshold(&self) -> u64 {
        match self.threshold {
            Threshold::Dynamic { alpha } => {
                let free = self
                    .buffer
                    .saturating_sub(self.set_aside)
                    .saturating_sub(self.shared_used);
                scaled(free, alpha)
            }
            Threshold::Static { bytes } => bytes,
        }
    }

    /// Bytes currently charged, all queues together (0 when the switch is empty).
    fn bytes_in_use(&self) -> u64 {
        self.queues.iter().map(|q| q.ingress + q.hdrm).sum()
    }

    /// Headroom and reserve over all ports: the part of the buffer the shared pool never uses.
    fn set_aside(&self) -> u64 {
        self.set_aside
    }

    /// Bytes of (port, prio) that count against the XOFF threshold: its shared-pool use plus
    /// any headroom it uses (PAUSE is sent once this reaches [`Model::threshold`] or headroom
    /// is touched). Read-only view for load balancers that predict PFC (RLB).
    #[inline]
    fn ingress_use(&self, port: usize, prio: u8) -> u64 {
        let q = &self.queues[self.idx(port, prio)];
        self.shared_of(q) + q.hdrm
    }

    /// Every byte charged to (port, prio): reserve, shared pool and headroom (monitors).
    fn charged(&self, port: usize, prio: u8) -> u64 {
        let q = &self.queues[self.idx(port, prio)];
        q.ingress + q.hdrm
    }

    /// The bytes each (port, priority) may use before touching the shared pool.
    fn reserve(&self) -> u64 {
        self.reserve
    }

    /// Bytes below the XOFF threshold a paused queue must drain to before RESUME.
    fn resume_offset(&self) -> u64 {
        self.resume_offset
    }

    /// Whether this switch has PAUSE outstanding for (port, prio).
    fn is_pausing(&self, port: usize, prio: u8) -> bool {
        self.queues[self.idx(port, prio)].paused
    }

    /// Whether (port, prio) keeps its PAUSE outstanding for as long as `stuck` of the bytes
    /// charged to it stay in the switch, whatever else leaves or arrives (PFC deadlock
    /// detection, `sim/stall.rs`). RESUME is decided only after a release of this (port,
    /// prio)'s bytes, so it never comes if every charged byte is stuck and no more can arrive
    /// (`more_may_arrive`: a packet of this priority is still on the wire towards the port).
    /// Otherwise, after any release at least `stuck` bytes are still charged, and RESUME needs
    /// no headroom in use and a shared use of 0 or at most the threshold less
    /// `resume_offset`; the threshold is at most its value with the shared pool empty.
    fn pause_is_stuck(&self, port: usize, prio: u8, stuck: u64, more_may_arrive: bool) -> bool {
        let q = &self.queues[self.idx(port, prio)];
        if !q.paused {
            return false;
        }
        if stuck >= q.ingress + q.hdrm && !more_may_arrive {
            return true;
        }
        let highest = match self.threshold {
            Threshold::Dynamic { alpha } => {
                scaled(self.buffer.saturating_sub(self.set_aside), alpha)
            }
            Threshold::Static { bytes } => bytes,
        };
        let shared = stuck.saturating_sub(self.reserve);
        shared > 0 && shared + self.resume_offset > highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmu(threshold: Threshold, pfc: bool) -> IngressMmu {
        IngressMmu::new(100_000, 1_000, 500, threshold, pfc, vec![10_000; 4])
    }

    #[test]
    fn static_threshold_pauses_and_resumes_with_hysteresis() {
        let mut m = mmu(Threshold::Static { bytes: 5_000 }, true);
        // Reserve (1000 B) then shared; PAUSE when shared use reaches 5000 B.
        let mut paused_at = None;
        for k in 1..=10 {
            if m.arrive(1, 3, 1_000) == (Admission::Accept { pause: true }) {
                paused_at = Some(k);
                break;
            }
        }
        assert_eq!(paused_at, Some(6)); // 1000 reserve + 5000 shared
        assert!(m.is_pausing(1, 3));
        // Other queues are unaffected.
        assert!(!m.is_pausing(1, 2) && !m.is_pausing(0, 3));
        // RESUME only once shared use <= 5000 - 500.
        assert!(!m.release(1, 3, 400)); // shared 4600
        assert!(m.release(1, 3, 100)); // shared 4500
        assert!(!m.is_pausing(1, 3));
    }

    #[test]
    fn headroom_absorbs_overflow_then_drops() {
        let mut m = mmu(Threshold::Static { bytes: 2_000 }, true);
        for _ in 0..3 {
            assert!(matches!(m.arrive(0, 3, 1_000), Admission::Accept { .. }));
        }
        // Past the threshold: headroom takes 10 more packets, then drops.
        for _ in 0..10 {
            assert!(matches!(m.arrive(0, 3, 1_000), Admission::Accept { .. }));
        }
        assert_eq!(m.arrive(0, 3, 1_000), Admission::Drop);
        for _ in 0..13 {
            m.release(0, 3, 1_000);
        }
        assert_eq!(m.bytes_in_use(), 0);
        assert_eq!(m.shared_used(), 0);
    }

    #[test]
    fn lossy_mode_drops_at_threshold_and_never_pauses() {
        let mut m = mmu(Threshold::Static { bytes: 2_000 }, false);
        let mut accepted = 0;
        while let Admission::Accept { pause } = m.arrive(2, 3, 1_000) {
            assert!(!pause);
            accepted += 1;
        }
        assert_eq!(accepted, 3);
    }

    #[test]
    fn dynamic_threshold_shrinks_as_the_buffer_fills() {
        let mut m = mmu(Threshold::Dynamic { alpha: 0.5 }, true);
        // set aside: 4 * 10_000 headroom + 4 * 1_000 reserve = 44_000.
        assert_eq!(m.threshold(), 28_000);
        m.arrive(0, 3, 1_000); // reserve
        m.arrive(0, 3, 10_000); // shared
        assert_eq!(m.shared_used(), 10_000);
        assert_eq!(m.threshold(), 23_000);
    }

    /// The signed conversions give the value of the plain unsigned ones for every buffer
    /// size up to the largest modelled and any positive factor, products of 2^63 and more
    /// included.
    #[test]
    fn scaled_is_the_unsigned_product() {
        use rand::Rng as _;
        let mut rng = crate::engine::rng_stream(7, crate::engine::StreamKind::Traffic, 0);
        let alphas = [
            1.0 / 16.0,
            0.1,
            0.5,
            1.0,
            3.0,
            16.0,
            1e3,
            1024.0,
            1e6,
            1e12,
            1e300,
        ];
        for _ in 0..100_000 {
            let bits = rng.gen_range(0..=53);
            let bytes = rng.gen_range(0..=(1u64 << bits)).min(MAX_BUFFER);
            let alpha = alphas[rng.gen_range(0..alphas.len())];
            assert_eq!(
                scaled(bytes, alpha),
                (bytes as f64 * alpha) as u64,
                "{bytes} x {alpha}"
            );
        }
        for (bytes, alpha, expected) in [
            (MAX_BUFFER, 16.0, 1 << 57),
            (MAX_BUFFER, 1023.0, 1023 << 53),
            (MAX_BUFFER, 1024.0, 1 << 63),
            (MAX_BUFFER, 2048.0, u64::MAX),
            (9_000_000, 1e300, u64::MAX),
        ] {
            assert_eq!(scaled(bytes, alpha), expected, "{bytes} x {alpha}");
        }
    }

    /// A pause is stuck while its stuck bytes alone hold it: all of them with nothing else to
    /// release, or enough to stay above the XON level at the highest threshold; the releases
    /// that the answer rules out indeed send no RESUME, and those it allows do.
    #[test]
    fn a_pause_is_stuck_only_if_no_release_could_lift_it() {
        let mut m = mmu(Threshold::Static { bytes: 5_000 }, true);
        for _ in 0..6 {
            m.arrive(1, 3, 1_000); // 1000 reserve + 5000 shared: PAUSE
        }
        assert!(m.is_pausing(1, 3));
        assert!(!m.pause_is_stuck(1, 2, 0, false), "not pausing");
        // Every byte stuck and nothing on the wire: no release, so no RESUME, ever.
        assert!(m.pause_is_stuck(1, 3, 6_000, false));
        // Otherwise the stuck bytes must keep the shared use above 5000 - 500 on their own.
        assert!(m.pause_is_stuck(1, 3, 6_000, true));
        assert!(m.pause_is_stuck(1, 3, 5_600, false));
        assert!(!m.pause_is_stuck(1, 3, 5_500, false));
        let mut lifted = m.clone();
        assert!(!m.release(1, 3, 400), "5600 B left: still above XON");
        assert!(lifted.release(1, 3, 500), "5500 B left: RESUME");
        // The dynamic threshold is at most alpha x (buffer - set aside) = 28000 here.
        let mut d = mmu(Threshold::Dynamic { alpha: 0.5 }, true);
        for _ in 0..30 {
            d.arrive(0, 3, 1_000);
        }
        assert!(d.is_pausing(0, 3));
        assert!(d.pause_is_stuck(0, 3, 28_600, true));
        assert!(!d.pause_is_stuck(0, 3, 28_500, true));
    }
}
