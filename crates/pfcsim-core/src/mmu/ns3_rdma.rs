//! The ns3-rdma model of the MMU (`switch.pfc.model = "ns3-rdma"`): the buffer accounting
//! and PFC thresholds of `BroadcomNode` in the DCQCN authors' ns-3 simulator
//! (bobzhuyb/ns3-rdma, `src/network/model/broadcom-node.cc`, as called from
//! `QbbNetDevice::Send` and `CheckQueueFull` in `src/point-to-point/model/qbb-net-device.cc`).
//!
//! What it counts, as that code does, on admission of a packet of `s` bytes on (ingress port
//! `p`, priority group `q`), all in whole bytes with no reserve taken out:
//! * `total` (every byte in the switch), `sp[SP(q)]` (the service pool of `q`: pool 1 for
//!   priority 1, pool 0 for every other), `port[p]` and `pg[p][q]` all grow by `s`;
//! * headroom `hdrm[p][q]` grows by `s` too if the pool is then over its limit
//!   (`sp[SP(q)] > pool`); headroom is counted beside `pg`, not instead of it.
//!
//! Drop: if `total + s > buffer`, or if `pg + s > pg_min` and `port + s > port_min` and the
//! pool is over its limit and `hdrm + s > headroom`.
//!
//! PAUSE (checked after each admitted packet, for its (p, q)):
//! * static mode: `pg[p][q] > pg_limit` (20 cells of 1030 B: 20,600 B) or `port[p] >
//!   port_limit` (4800 cells);
//! * dynamic mode: `pg[p][q] > pg_min + port_min` and `pg[p][q] - pg_min - port_min >
//!   alpha x (pool - sp[SP(q)])`, in floating point (alpha = 16 in the code: a PG pauses only
//!   when the pool is nearly full).
//!
//! RESUME (checked, while (p, q) is pausing, after each release that could make it hold:
//! in static mode a release from the same port, in dynamic mode a release from the same
//! service pool, whichever PG it is from):
//! * static: `pg[p][q] < pg_limit - 2 cells` and `port[p] < 4700 cells`;
//! * dynamic: `pg[p][q] - pg_min - port_min < alpha x (pool - sp[SP(q)] - 16)`.
//!
//! The XON condition depends on counters other PGs share (the pool's use, the port's bytes),
//! so checking it only at the PG's own releases would leave a PG paused for good once it has
//! released its last byte while the pool was still full: no release of its own comes after
//! that. In the code such a PG cannot stay paused: its PAUSE expires after its pause time
//! unless re-sent, and it is re-sent only while the XOFF condition holds, which needs more
//! than `pg_min + port_min` bytes.
//!
//! Not modelled (see `docs/reference/fabric.md`, "PFC models"): the code's PAUSE frames carry a 5
//! µs pause time, are re-sent on every arriving packet and every 2 µs while the condition holds,
//! and its RESUME goes out for priority 0 whatever the paused priority (so a data pause ends when
//! its pause time runs out); here, as in every pfcsim model, one PAUSE holds until its RESUME. The
//! static mode's port-wide PAUSE (all priorities of the port) and the dynamic mode's check of every
//! priority of the port are checked for the arriving packet's priority only. Its egress limits
//! equal the whole buffer and never bind before `total` does.

use super::{Admission, Frame, Model, PfcConfig, Xon};
use crate::port::N_PRIO;
use crate::units::{Bytes, Rate, Time};
use serde::{Deserialize, Serialize};

/// The buffer cell of the code (bytes): its thresholds are whole numbers of cells.
pub const CELL: u64 = 1030;

/// Parameters of the ns3-rdma PFC model (`[switch.pfc.ns3_rdma]`; unset: every default);
/// defaults: the values of `BroadcomNode` in bobzhuyb/ns3-rdma (cells of 1030 B).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct Ns3RdmaConfig {
    /// The dynamic threshold (`USE_DYNAMIC_PFC_THRESHOLD 1`, as in the code's example
    /// configs); `false`: the static per-(port, priority) limit.
    pub dynamic: bool,
    /// Factor of the dynamic threshold on the free part of the service pool (16).
    pub alpha: f64,
    /// Limit of a service pool: 4000 cells.
    pub pool: Bytes,
    /// Static XOFF on the bytes of a (port, priority): 20 cells; XON 2 cells below.
    pub static_limit: Bytes,
    /// Headroom of a (port, priority), used once the pool is over its limit: 100 cells.
    pub headroom: Bytes,
}

crate::tagged::table!(Ns3RdmaConfig);

impl Default for Ns3RdmaConfig {
    fn default() -> Self {
        Ns3RdmaConfig {
            dynamic: true,
            alpha: 16.0,
            pool: Bytes(4_000 * CELL),
            static_limit: Bytes(20 * CELL),
            headroom: Bytes(100 * CELL),
        }
    }
}

/// Thresholds of the ns3-rdma model, in bytes (the code's names in brackets).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ns3RdmaParams {
    /// Every byte in the switch at most (`m_maxBufferBytes`, 9 MB).
    pub buffer: u64,
    /// Dynamic threshold (`USE_DYNAMIC_PFC_THRESHOLD 1`, as the code's example configs) or
    /// static limits.
    pub dynamic: bool,
    /// Factor of the dynamic threshold (`m_pg_shared_alpha_cell`, 16).
    pub alpha: f64,
    /// Limit of a service pool (`m_buffer_cell_limit_sp`, 4000 cells).
    pub pool: u64,
    /// Guarantees of a PG and of a port (`m_pg_min_cell`, `m_port_min_cell`, 1 cell each).
    pub pg_min: u64,
    pub port_min: u64,
    /// Static XOFF and XON of a PG (`m_pg_shared_limit_cell` 20 cells,
    /// `m_pg_shared_limit_cell_off` 2 cells below).
    pub pg_limit: u64,
    pub pg_resume: u64,
    /// Static XOFF and XON of a port (`m_port_max_shared_cell` 4800 cells,
    /// `m_port_min_cell_off` 4700 cells).
    pub port_limit: u64,
    pub port_resume: u64,
    /// Headroom of a PG (`m_pg_hdrm_limit`, 100 cells).
    pub headroom: u64,
    /// Bytes taken off the free pool in the dynamic XON (`m_pg_shared_alpha_cell_off_diff`,
    /// 16).
    pub resume_gap: u64,
}

impl Ns3RdmaParams {
    /// The code's values for a switch of `buffer` bytes, with the spec's mode, alpha, pool,
    /// static PG limit and headroom (`[switch.pfc.ns3_rdma]`); the static XON is 2 cells
    /// below the PG limit.
    pub fn new(
        buffer: u64,
        dynamic: bool,
        alpha: f64,
        pool: u64,
        pg_limit: u64,
        headroom: u64,
    ) -> Self {
        Ns3RdmaParams {
            buffer,
            dynamic,
            alpha,
            pool,
            pg_min: CELL,
            port_min: CELL,
            pg_limit,
            pg_resume: pg_limit.saturating_sub(2 * CELL),
            port_limit: 4_800 * CELL,
            port_resume: 4_700 * CELL,
            headroom,
            resume_gap: 16,
        }
    }
}

/// What the model holds for one (ingress port, priority group).
#[derive(Clone, Copy, Debug, Default)]
struct PgState {
    /// Every byte charged (guarantee, shared and headroom alike).
    bytes: u64,
    /// The part counted as headroom.
    hdrm: u64,
    paused: bool,
}

/// The buffer state of one switch in the ns3-rdma model.
#[derive(Clone, Debug)]
pub struct Ns3RdmaMmu {
    p: Ns3RdmaParams,
    total: u64,
    /// Service pools 0 and 1.
    sp: [u64; 2],
    port: Vec<u64>,
    pgs: Vec<PgState>,
    /// The pausing PGs of each service pool (indices into `pgs`), whose XON a release from
    /// the pool may make true.
    pausing: [Vec<usize>; 2],
    /// RESUMEs decided by the last release that answered [`Xon::Frames`], not yet taken.
    frames: Vec<Frame>,
}

/// The service pool of a priority group (`GetIngressSP`: 1 for priority 1, else 0).
#[inline]
fn pool_of(prio: u8) -> usize {
    (prio == 1) as usize
}

impl Ns3RdmaMmu {
    pub fn new(p: Ns3RdmaParams, ports: usize) -> Ns3RdmaMmu {
        Ns3RdmaMmu {
            p,
            total: 0,
            sp: [0; 2],
            port: vec![0; ports],
            pgs: vec![PgState::default(); ports * N_PRIO],
            pausing: [Vec::new(), Vec::new()],
            frames: Vec::new(),
        }
    }

    #[inline]
    fn idx(port: usize, prio: u8) -> usize {
        port * N_PRIO + prio as usize
    }

    /// `alpha x (pool - used - gap)`, in floating point as the code computes it (negative
    /// once the pool is over its limit).
    #[inline]
    fn dynamic_level(&self, prio: u8, gap: u64) -> f64 {
        self.p.alpha * (self.p.pool as f64 - self.sp[pool_of(prio)] as f64 - gap as f64)
    }

    /// `pg - pg_min - port_min`, in floating point (negative below the guarantees).
    #[inline]
    fn above_mins(&self, bytes: u64) -> f64 {
        bytes as f64 - self.p.pg_min as f64 - self.p.port_min as f64
    }

    /// The XOFF condition of (port, prio) as it stands (`GetPauseClasses`).
    fn over_xoff(&self, port: usize, prio: u8) -> bool {
        let pg = self.pgs[Self::idx(port, prio)].bytes;
        if self.p.dynamic {
            pg > self.p.pg_min + self.p.port_min
                && self.above_mins(pg) > self.dynamic_level(prio, 0)
        } else {
            self.port[port] > self.p.port_limit || pg > self.p.pg_limit
        }
    }

    /// The XON condition of (port, prio) as it stands (`GetResumeClasses`).
    fn under_xon(&self, port: usize, prio: u8) -> bool {
        let pg = self.pgs[Self::idx(port, prio)].bytes;
        if self.p.dynamic {
            self.above_mins(pg) < self.dynamic_level(prio, self.p.resume_gap)
        } else {
            pg < self.p.pg_resume && self.port[port] < self.p.port_resume
        }
    }

    /// Admission (`CheckIngressAdmission`), charging (`UpdateIngressAdmission`) and XOFF.
    #[inline(never)]
    pub fn arrive(&mut self, port: usize, prio: u8, size: u64) -> Admission {
        let i = Self::idx(port, prio);
        let pool = pool_of(prio);
        let q = self.pgs[i];
        if self.total + size > self.p.buffer {
            return Admission::Drop;
        }
        if q.bytes + size > self.p.pg_min
            && self.port[port] + size > self.p.port_min
            && self.sp[pool] > self.p.pool
            && q.hdrm + size > self.p.headroom
        {
            return Admission::Drop;
        }
        self.total += size;
        self.sp[pool] += size;
        self.port[port] += size;
        self.pgs[i].bytes += size;
        if self.sp[pool] > self.p.pool {
            self.pgs[i].hdrm += size;
        }
        let pause = !self.pgs[i].paused && self.over_xoff(port, prio);
        if pause {
            self.pgs[i].paused = true;
            self.pausing[pool].push(i);
        }
        Admission::Accept { pause }
    }

    /// Release (`RemoveFromIngressAdmission`) and XON: [`Xon::Resume`] if only (port, prio)
    /// must now send RESUME, [`Xon::Frames`] if other pausing PGs the release concerns
    /// (static: the port's, dynamic: the pool's) meet their XON condition too; their RESUMEs
    /// are then in [`Ns3RdmaMmu::take_frames`], the packet's own first, then by (port,
    /// priority).
    #[inline(never)]
    pub fn release(&mut self, port: usize, prio: u8, size: u64) -> Xon {
        let i = Self::idx(port, prio);
        let pool = pool_of(prio);
        self.frames.clear();
        self.total -= size;
        self.sp[pool] -= size;
        self.port[port] -= size;
        let q = &mut self.pgs[i];
        q.bytes -= size;
        q.hdrm = q.hdrm.saturating_sub(size);
        if self.pausing.iter().all(Vec::is_empty) {
            return Xon::None; // nothing paused: the common case, no PG to look at
        }
        let own = q.paused && self.under_xon(port, prio);
        if own {
            self.pgs[i].paused = false;
        }
        if self.p.dynamic {
            if self.pausing[pool].len() > own as usize {
                for k in 0..self.pausing[pool].len() {
                    let j = self.pausing[pool][k];
                    let (jp, jq) = (j / N_PRIO, (j % N_PRIO) as u8);
                    if j != i && self.under_xon(jp, jq) {
                        self.pgs[j].paused = false;
                        self.frames.push(Frame {
                            port: jp as u16,
                            prio: jq,
                            pause: false,
                        });
                    }
                }
            }
            if own || !self.frames.is_empty() {
                let pgs = &self.pgs;
                self.pausing[pool].retain(|&j| pgs[j].paused);
            }
        } else {
            for jq in 0..N_PRIO as u8 {
                let j = Self::idx(port, jq);
                if j != i && self.pgs[j].paused && self.under_xon(port, jq) {
                    self.pgs[j].paused = false;
                    let jpool = pool_of(jq);
                    self.pausing[jpool].retain(|&k| k != j);
                    self.frames.push(Frame {
                        port: port as u16,
                        prio: jq,
                        pause: false,
                    });
                }
            }
            if own {
                self.pausing[pool].retain(|&k| k != i);
            }
        }
        if self.frames.is_empty() {
            return if own { Xon::Resume } else { Xon::None };
        }
        self.frames.sort_unstable_by_key(|f| (f.port, f.prio));
        if own {
            self.frames.insert(
                0,
                Frame {
                    port: port as u16,
                    prio,
                    pause: false,
                },
            );
        }
        Xon::Frames
    }
}

impl Model for Ns3RdmaMmu {
    /// The table's `alpha` positive and finite, `pool` above 0 and at most the buffer,
    /// `static_limit` above the 2 cells of its XON gap, `headroom` above 0, and no parameter
    /// of the other mode (`static_limit` with `dynamic`, `alpha` without).
    fn validate(pfc: &PfcConfig, buffer: Bytes) -> Result<(), String> {
        let c = pfc.ns3_rdma.clone().unwrap_or_default();
        if !(c.alpha > 0.0 && c.alpha.is_finite()) {
            return Err(format!("switch.pfc.ns3_rdma.alpha: {} is not valid; use a positive factor (the code's: 16)", c.alpha));
        }
        if c.pool.0 == 0 || c.pool > buffer {
            return Err(format!("switch.pfc.ns3_rdma.pool ({}): must be above 0 and at most switch.buffer ({buffer}) (the code's: 4000 cells of 1030 B, \"4120000B\")", c.pool));
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
        Ok(())
    }

    /// The code's thresholds ([`Ns3RdmaParams::new`]) with the table's values; the links do
    /// not matter.
    fn build(pfc: &PfcConfig, buffer: Bytes, links: &[(Rate, Time)], _mtu_wire: u64) -> Self {
        let c = pfc.ns3_rdma.clone().unwrap_or_default();
        let params = Ns3RdmaParams::new(
            buffer.0,
            c.dynamic,
            c.alpha,
            c.pool.0,
            c.static_limit.0,
            c.headroom.0,
        );
        Ns3RdmaMmu::new(params, links.len())
    }

    /// [`Ns3RdmaMmu::arrive`] (`out` does not matter).
    fn arrive(&mut self, port: usize, _out: usize, prio: u8, size: u64) -> Admission {
        Ns3RdmaMmu::arrive(self, port, prio, size)
    }

    /// [`Ns3RdmaMmu::release`] (`out` does not matter).
    fn release(&mut self, port: usize, _out: usize, prio: u8, size: u64) -> Xon {
        Ns3RdmaMmu::release(self, port, prio, size)
    }

    /// Moves the RESUMEs decided by the last release that answered [`Xon::Frames`] to the
    /// end of `into` (both buffers keep their memory).
    fn take_frames(&mut self, into: &mut Vec<Frame>) {
        into.append(&mut self.frames);
    }

    fn bytes_in_use(&self) -> u64 {
        self.total
    }

    /// Nothing: this model sets no part of the buffer aside.
    fn set_aside(&self) -> u64 {
        0
    }

    /// Static: the PG limit. Dynamic: `alpha x` the free part of pool 0, at least 0.
    fn threshold(&self) -> u64 {
        if self.p.dynamic {
            self.dynamic_level(0, 0).max(0.0) as u64
        } else {
            self.p.pg_limit
        }
    }

    /// Static: nothing. Dynamic: the PG and port guarantees.
    fn reserve(&self) -> u64 {
        if self.p.dynamic {
            self.p.pg_min + self.p.port_min
        } else {
            0
        }
    }

    /// The XON level's distance below the XOFF level.
    fn resume_offset(&self) -> u64 {
        if self.p.dynamic {
            (self.p.alpha * self.p.resume_gap as f64) as u64
        } else {
            self.p.pg_limit - self.p.pg_resume
        }
    }

    /// The bytes of (port, prio) compared with [`Model::threshold`].
    fn ingress_use(&self, port: usize, prio: u8) -> u64 {
        self.charged(port, prio).saturating_sub(self.reserve())
    }

    fn charged(&self, port: usize, prio: u8) -> u64 {
        self.pgs[Self::idx(port, prio)].bytes
    }

    fn is_pausing(&self, port: usize, prio: u8) -> bool {
        self.pgs[Self::idx(port, prio)].paused
    }

    /// As the ingress model's (see [`super::IngressMmu`]), except that a release of another PG (of
    /// the same port, static; of the same pool, dynamic) can also send (port, prio)'s RESUME,
    /// so a pause whose own bytes are all stuck may still end (`more_may_arrive` does not
    /// matter): it is stuck only if the stuck bytes alone keep the XON condition false in the
    /// most favourable state: static, `stuck >= pg_resume`; dynamic, the PG and its pool
    /// holding only the stuck bytes (the pool holds the PG's bytes, so never fewer).
    fn pause_is_stuck(&self, port: usize, prio: u8, stuck: u64, _more_may_arrive: bool) -> bool {
        if !self.pgs[Self::idx(port, prio)].paused {
            return false;
        }
        if self.p.dynamic {
            let level =
                self.p.alpha * (self.p.pool as f64 - stuck as f64 - self.p.resume_gap as f64);
            self.above_mins(stuck) >= level
        } else {
            stuck >= self.p.pg_resume
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mmu(dynamic: bool) -> Ns3RdmaMmu {
        // The code's defaults: 9 MB, alpha 16, pool 4000 cells, PG limit 20 cells, headroom
        // 100 cells.
        let p = Ns3RdmaParams::new(
            9_000_000,
            dynamic,
            16.0,
            4_000 * CELL,
            20 * CELL,
            100 * CELL,
        );
        Ns3RdmaMmu::new(p, 4)
    }

    /// Static mode: PAUSE once the PG holds more than 20,600 B (every byte counts, no
    /// reserve taken out); RESUME once it holds less than 18,540 B.
    #[test]
    fn static_limit_pauses_above_20_cells_and_resumes_below_18() {
        let mut m = mmu(false);
        // 20 packets of 1030 B: exactly the limit, not above it.
        for _ in 0..20 {
            assert_eq!(m.arrive(1, 3, CELL), Admission::Accept { pause: false });
        }
        assert_eq!(m.charged(1, 3), 20_600);
        assert_eq!(m.arrive(1, 3, 1), Admission::Accept { pause: true });
        assert!(m.is_pausing(1, 3) && !m.is_pausing(1, 2) && !m.is_pausing(0, 3));
        // One PAUSE per XOFF transition.
        assert_eq!(m.arrive(1, 3, CELL), Admission::Accept { pause: false });
        // 21,631 B charged: RESUME below 18,540.
        assert_eq!(m.release(1, 3, 3 * CELL), Xon::None); // 18,541
        assert_eq!(m.release(1, 3, 1), Xon::None); // 18,540: not below
        assert_eq!(m.release(1, 3, 1), Xon::Resume); // 18,539
        assert!(!m.is_pausing(1, 3));
    }

    /// Dynamic mode: PAUSE when `pg - 2060 > 16 x (4,120,000 - pool use)`, i.e. with one
    /// PG holding the whole pool, at `pg - 2060 > 16 x (4,120,000 - pg)`: pg > 3,877,768.2.
    #[test]
    fn dynamic_threshold_keyed_on_the_free_pool() {
        let mut m = mmu(true);
        let mut charged = 0;
        let pause_at = loop {
            charged += CELL;
            if m.arrive(0, 3, CELL) == (Admission::Accept { pause: true }) {
                break charged;
            }
        };
        // The first multiple of 1030 above 3,877,768.2: 3,765 cells = 3,877,950 B.
        assert_eq!(pause_at, 3_765 * CELL);
        // (At 3,764 cells, 3,876,920 - 2,060 <= 16 x (4,120,000 - 3,876,920) = 3,889,280.)
        assert_eq!(m.threshold(), (16 * (4_120_000 - 3_877_950)) as u64);
        // Another port's PG, far below, is not paused but sees the same small threshold.
        assert_eq!(m.arrive(2, 3, CELL), Admission::Accept { pause: false });
        // XON: pg - 2060 < 16 x (4,120,000 - pool - 16). Pool = pg + 1030 (port 2).
        // Solve: pg - 2060 < 16 x (4,118,954 - pg) -> pg < 3,876,783.8.
        let mut released = 0;
        let resumed_at = loop {
            released += CELL;
            if m.release(0, 3, CELL) == Xon::Resume {
                break pause_at - released;
            }
        };
        assert_eq!(resumed_at, 3_763 * CELL); // 3,875,890 < 3,876,783.8 < 3,876,920
    }

    /// Priority 1 has its own service pool: filling pool 0 does not lower its threshold.
    #[test]
    fn priority_1_uses_its_own_service_pool() {
        let mut m = mmu(true);
        for _ in 0..3_000 {
            m.arrive(0, 3, CELL);
        }
        assert!(m.dynamic_level(3, 0) < m.dynamic_level(1, 0));
        assert_eq!(m.dynamic_level(1, 0), 16.0 * 4_120_000.0);
    }

    /// Headroom counts only once the pool is over its limit, and a PG is dropped only when
    /// its headroom would pass 100 cells then; every release empties the counters.
    #[test]
    fn headroom_is_counted_past_the_pool_and_bounds_admission() {
        let mut m = mmu(false);
        let mut n = 0;
        while m.sp[0] <= 4_000 * CELL {
            assert!(matches!(m.arrive(n % 4, 3, CELL), Admission::Accept { .. }));
            n += 1;
        }
        // The packet that took the pool past its limit was counted as headroom.
        let over = (0..4)
            .map(|p| m.pgs[Ns3RdmaMmu::idx(p, 3)].hdrm)
            .sum::<u64>();
        assert_eq!(over, CELL);
        let port = (n - 1) % 4;
        let mut more = 0;
        while let Admission::Accept { .. } = m.arrive(port, 3, CELL) {
            more += 1;
        }
        assert_eq!(more, 99); // 100 cells of headroom in all
        for p in 0..4 {
            while m.charged(p, 3) > 0 {
                m.release(p, 3, CELL);
            }
        }
        assert_eq!((m.bytes_in_use(), m.sp[0]), (0, 0));
        assert!(m.pgs.iter().all(|q| q.hdrm == 0));
    }

    /// The RESUMEs a release decided, as (port, prio).
    fn resumes(m: &mut Ns3RdmaMmu, port: usize, prio: u8, size: u64) -> Vec<(u16, u8)> {
        match m.release(port, prio, size) {
            Xon::None => vec![],
            Xon::Resume => vec![(port as u16, prio)],
            Xon::Frames => {
                let mut f = vec![];
                m.take_frames(&mut f);
                assert!(f.iter().all(|f| !f.pause));
                f.iter().map(|f| (f.port, f.prio)).collect()
            }
        }
    }

    /// Dynamic: a PG paused while the pool is over its limit, which then releases its last
    /// byte (its XON still false: the pool is full of port 0's bytes), resumes at the release
    /// from port 0 that brings the pool back to where its XON holds (`0 - 2060 < 16 x (free -
    /// 16)`: free above -112.75 B), not never.
    #[test]
    fn dynamic_xon_follows_the_pool_not_only_the_pgs_own_releases() {
        let mut m = mmu(true);
        for _ in 0..4_010 {
            m.arrive(0, 3, CELL); // 10 cells over the pool's limit
        }
        assert!(m.is_pausing(0, 3));
        for _ in 0..3 {
            m.arrive(1, 3, CELL);
        }
        assert!(m.is_pausing(1, 3), "3,090 B - 2,060 > 16 x (-10,300)");
        for _ in 0..3 {
            assert_eq!(resumes(&mut m, 1, 3, CELL), vec![]);
        }
        assert_eq!(m.charged(1, 3), 0);
        assert!(
            m.is_pausing(1, 3),
            "empty, but the pool is still 10 cells over"
        );
        // 9 cells over, ..., 1 cell over (1,030 B > 112.75 B): still paused.
        for _ in 0..9 {
            assert_eq!(resumes(&mut m, 0, 3, CELL), vec![]);
        }
        // Free room 0: port 1's XON holds (-2,060 < -256), port 0's does not.
        assert_eq!(resumes(&mut m, 0, 3, CELL), vec![(1, 3)]);
        assert!(!m.is_pausing(1, 3) && m.is_pausing(0, 3));
        assert_eq!(m.pausing[0], vec![Ns3RdmaMmu::idx(0, 3)]);
        // Port 0 resumes later, alone, at its own release.
        let mut n = 0;
        let own = loop {
            n += 1;
            let r = resumes(&mut m, 0, 3, CELL);
            if !r.is_empty() {
                break r;
            }
        };
        assert_eq!((own, n), (vec![(0, 3)], 236));
        assert!(m.pausing[0].is_empty());
    }

    /// Static: a PG paused by its port's total (more than 4800 cells) resumes at the release
    /// of another priority of that port that takes the port below 4700 cells, its own bytes
    /// being gone. (A pool as large as the buffer, so that nothing is dropped.)
    #[test]
    fn static_xon_follows_the_port_total() {
        let p = Ns3RdmaParams::new(9_000_000, false, 16.0, 9_000_000, 20 * CELL, 100 * CELL);
        let mut m = Ns3RdmaMmu::new(p, 4);
        for _ in 0..200 {
            m.arrive(2, 2, CELL);
        }
        for _ in 0..4_700 {
            m.arrive(2, 4, CELL);
        }
        // The port holds 4,900 cells (5,047,000 B): PAUSE for the arriving priority 3.
        assert_eq!(m.arrive(2, 3, 500), Admission::Accept { pause: true });
        assert!(
            m.is_pausing(2, 2) && m.is_pausing(2, 4),
            "both past 20 cells"
        );
        assert_eq!(
            resumes(&mut m, 2, 3, 500),
            vec![],
            "the port is over 4,700 cells"
        );
        assert!(m.is_pausing(2, 3));
        // Priority 4's releases take the port down; below 4,700 cells (4,841,000 B) at the
        // 201st (4,839,970 B). Priorities 2 and 4 keep more than 18 cells: still paused.
        for _ in 0..200 {
            assert_eq!(resumes(&mut m, 2, 4, CELL), vec![]);
        }
        assert_eq!(resumes(&mut m, 2, 4, CELL), vec![(2, 3)]);
        assert!(m.is_pausing(2, 2) && m.is_pausing(2, 4) && !m.is_pausing(2, 3));
    }

    /// A pause is stuck when its stuck bytes alone keep the XON condition false, even if all
    /// its bytes are stuck: another PG's release can still lift it.
    #[test]
    fn a_pause_is_stuck_only_if_no_release_could_lift_it() {
        let mut m = mmu(false);
        for _ in 0..21 {
            m.arrive(1, 3, CELL);
        }
        assert!(m.is_pausing(1, 3));
        assert!(m.pause_is_stuck(1, 3, 21 * CELL, false));
        assert!(m.pause_is_stuck(1, 3, 18_540, true));
        assert!(!m.pause_is_stuck(1, 3, 18_539, true));
        assert!(!m.pause_is_stuck(1, 2, 0, false));
        let mut d = mmu(true);
        for _ in 0..4_010 {
            d.arrive(0, 3, CELL);
        }
        for _ in 0..3 {
            d.arrive(1, 3, CELL);
        }
        assert!(
            !d.pause_is_stuck(1, 3, 3 * CELL, false),
            "port 0's release lifts it"
        );
        assert!(d.pause_is_stuck(0, 3, 4_010 * CELL, false));
    }
}
