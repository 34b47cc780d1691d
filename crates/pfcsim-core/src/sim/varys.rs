//! Coflow scheduling (`[coflow]`): Varys (Chowdhury, Zhong and Stoica, SIGCOMM 2014), a central
//! coordinator that sets the rate of every flow of every coflow, layered on any `[lb]` scheme.
//!
//! What is modelled (`/work/shared/spec/baselines-and-fabric.md` §7, after the Varys authors'
//! simulator, and `docs/reference/coflows.md`):
//! * **Ports**: the fabric is taken as non-blocking; the only constraints are the host NICs'
//!   uplinks (a host's port) and downlinks (its ToR's port towards it), at their line rates.
//!   Rates are wire rates: a flow's remaining bytes count their packet headers.
//! * **SEBF**: active coflows are ordered by their effective bottleneck on the idle ports,
//!   `Γ = max over ports of (bytes the coflow still has to move through the port) / (the
//!   port's rate)`, smallest first (ties: lower coflow id), recomputed at every event.
//! * **MADD**: in that order, a coflow's `Γ` is recomputed on the capacity the coflows before
//!   it left, and each of its flows gets `remaining bytes / Γ`, so that all finish together at
//!   the pace of its bottleneck; a coflow one of whose ports has no capacity left gets nothing
//!   (skipped).
//! * **Work conservation** (`work_conserving`, on by default, as the Varys simulator does):
//!   the skipped coflows' flows then share what is left of each port (a flow takes the
//!   smaller of its sender's and its receiver's leftover divided by the number of such flows
//!   there), and what is still left goes to flows in coflow arrival order, each taking the
//!   smaller of its sender's and its receiver's leftover.
//! * **Events**: the coordinator recomputes every rate when a flow of a coflow starts (the
//!   first one is the coflow's arrival; later ones, with per-flow arrivals, add to it: the
//!   coordinator learns of a flow when its sender starts it) and when a coflow completes (its
//!   last flow is acknowledged). Between events rates stay as set. Coordinator delay 0: the
//!   new rates apply at once at every sender.
//! * **Enforcement**: each sender paces a flow at `min(its congestion control's rate, its Varys rate)`; a flow
//!   at rate 0 waits. Where the Varys rate binds, it is a token bucket of one packet
//!   ([`capped_next`]), as a NIC's rate limiter, so that a sender whose flows' Varys rates
//!   fill its link keeps every one at its rate. A flow's remaining bytes are those not yet acknowledged (`size -
//!   snd_una`). Paths are the `[lb]` scheme's (ECMP by default).
//!
//! Not modelled: the starvation-avoidance windows and the deadline mode of Varys (admission
//! control), coordinator and daemon delays, port capacity taken by flows outside coflows
//! (they are not scheduled and run at their congestion control's rate).

use super::Simulation;
use crate::transport::FlowState;
use crate::units::Time;
use serde::{Deserialize, Serialize};

/// `[coflow]`: how coflows are scheduled, beside any `[lb]` scheme.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, default)]
pub struct CoflowConfig {
    /// `"none"`: every flow at its congestion control's rate; `"varys"`: Varys's rates.
    pub scheduler: Scheduler,
    /// Varys's work-conservation step (leftover capacity handed out after MADD; the Varys
    /// simulator has it).
    pub work_conserving: bool,
}

crate::tagged::table!(CoflowConfig);

impl Default for CoflowConfig {
    fn default() -> Self {
        CoflowConfig {
            scheduler: Scheduler::None,
            work_conserving: true,
        }
    }
}

/// The coflow scheduler of `[coflow]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheduler {
    #[default]
    None,
    Varys,
}

impl CoflowConfig {
    /// No scheduler, as a spec without `[coflow]` (written out only when set).
    pub fn is_default(&self) -> bool {
        *self == CoflowConfig::default()
    }
}

/// A share of a port below which it counts as full (rounding of the rates' sums).
const FULL: f64 = 1e-9;

/// The coordinator's state.
pub(super) struct Varys {
    work_conserving: bool,
    /// Flows of each coflow (dense index), in flow-id order.
    members: Vec<Vec<u32>>,
    /// Flows of each coflow not yet finished.
    unfinished: Vec<u32>,
    /// Dense coflow index of each flow (`u32::MAX`: not in a coflow).
    coflow_of: Vec<u32>,
    /// Uplink and downlink rate (bit/s) of each host (by host index).
    up_bps: Vec<f64>,
    down_bps: Vec<f64>,
    // Scratch space, reused at every recomputation.
    rem_up: Vec<f64>,
    rem_down: Vec<f64>,
}

/// A flow taking part in an allocation: its index, endpoints (host indices) and remaining
/// wire bits.
#[derive(Clone, Copy)]
struct Demand {
    flow: u32,
    src: usize,
    dst: usize,
    bits: f64,
}

impl Varys {
    /// The coordinator of a run whose flows (in flow-id order) are in the coflows
    /// `coflow_of`; `up_bps`/`down_bps` are the hosts' link rates.
    pub(super) fn new(
        work_conserving: bool,
        coflow_ids: &[Option<u32>],
        up_bps: Vec<f64>,
        down_bps: Vec<f64>,
    ) -> Varys {
        let mut ids: Vec<u32> = coflow_ids.iter().flatten().copied().collect();
        ids.sort_unstable();
        ids.dedup();
        let mut members = vec![Vec::new(); ids.len()];
        let coflow_of = coflow_ids
            .iter()
            .enumerate()
            .map(|(f, c)| match c {
                Some(c) => {
                    let i = ids.binary_search(c).expect("listed");
                    members[i].push(f as u32);
                    i as u32
                }
                None => u32::MAX,
            })
            .collect();
        let unfinished = members.iter().map(|m| m.len() as u32).collect();
        let hosts = up_bps.len();
        Varys {
            work_conserving,
            members,
            unfinished,
            coflow_of,
            up_bps,
            down_bps,
            rem_up: vec![0.0; hosts],
            rem_down: vec![0.0; hosts],
        }
    }

    /// Whether flow `f` is in a coflow.
    pub(super) fn schedules(&self, f: u32) -> bool {
        self.coflow_of[f as usize] != u32::MAX
    }

    /// Flow `f` finished; true if its coflow completed with it.
    fn flow_done(&mut self, f: u32) -> bool {
        let c = self.coflow_of[f as usize] as usize;
        self.unfinished[c] -= 1;
        self.unfinished[c] == 0
    }

    /// The rate (bit/s) of every started, unfinished flow of a coflow, as `(flow, rate)`.
    /// `started` is the number of flows started so far (flows start in id order).
    fn allocate(
        &mut self,
        flows: &[FlowState],
        started: usize,
        host_of: impl Fn(u32) -> usize,
        payload: u64,
        header: u64,
    ) -> Vec<(u32, f64)> {
        // Demands by coflow, with each coflow's arrival (its first flow's start).
        let mut coflows: Vec<(Vec<Demand>, Time)> = Vec::new();
        for (members, &left) in self.members.iter().zip(&self.unfinished) {
            if left == 0 {
                continue;
            }
            let demands: Vec<Demand> = members
                .iter()
                .filter(|&&f| (f as usize) < started && flows[f as usize].is_unfinished())
                .map(|&f| {
                    let flow = &flows[f as usize];
                    let bytes = flow.unacknowledged();
                    let wire = bytes + bytes.div_ceil(payload) * header;
                    Demand {
                        flow: f,
                        src: host_of(flow.spec.src),
                        dst: host_of(flow.spec.dst),
                        bits: wire as f64 * 8.0,
                    }
                })
                .collect();
            if !demands.is_empty() {
                let arrival = flows[members[0] as usize].spec.start;
                coflows.push((demands, arrival));
            }
        }
        // SEBF: the bottleneck on idle ports, smallest first (ties: coflow order).
        let (up, down) = (&self.up_bps, &self.down_bps);
        let mut order: Vec<(f64, usize)> = coflows
            .iter()
            .enumerate()
            .map(|(i, (d, _))| (bottleneck(d, up, down).unwrap_or(f64::INFINITY), i))
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        self.rem_up.copy_from_slice(up);
        self.rem_down.copy_from_slice(down);
        let mut rates: Vec<Vec<f64>> = coflows.iter().map(|(d, _)| vec![0.0; d.len()]).collect();
        let mut skipped = Vec::new();
        // MADD.
        for &(_, i) in &order {
            let demands = &coflows[i].0;
            match bottleneck(demands, &self.rem_up, &self.rem_down) {
                Some(gamma) => {
                    for (k, d) in demands.iter().enumerate() {
                        let r = d.bits / gamma;
                        rates[i][k] = r;
                        take(&mut self.rem_up[d.src], r);
                        take(&mut self.rem_down[d.dst], r);
                    }
                }
                None => skipped.push(i),
            }
        }
        if self.work_conserving {
            // The skipped coflows share the leftover of each port.
            let hosts = self.rem_up.len();
            let (mut n_up, mut n_down) = (vec![0u32; hosts], vec![0u32; hosts]);
            for &i in &skipped {
                for d in &coflows[i].0 {
                    n_up[d.src] += 1;
                    n_down[d.dst] += 1;
                }
            }
            let shares: Vec<(usize, usize, f64)> = skipped
                .iter()
                .flat_map(|&i| coflows[i].0.iter().enumerate().map(move |(k, d)| (i, k, d)))
                .map(|(i, k, d)| {
                    let r = (self.rem_up[d.src] / n_up[d.src] as f64)
                        .min(self.rem_down[d.dst] / n_down[d.dst] as f64);
                    (i, k, r)
                })
                .collect();
            for (i, k, r) in shares {
                let d = coflows[i].0[k];
                rates[i][k] += r;
                take(&mut self.rem_up[d.src], r);
                take(&mut self.rem_down[d.dst], r);
            }
            // Then what is left, to flows in coflow arrival order.
            let mut by_arrival: Vec<usize> = (0..coflows.len()).collect();
            by_arrival.sort_by_key(|&i| (coflows[i].1, i));
            for i in by_arrival {
                for (k, d) in coflows[i].0.iter().enumerate() {
                    let r = self.rem_up[d.src].min(self.rem_down[d.dst]);
                    if r > 0.0 {
                        rates[i][k] += r;
                        take(&mut self.rem_up[d.src], r);
                        take(&mut self.rem_down[d.dst], r);
                    }
                }
            }
        }
        coflows
            .iter()
            .zip(rates)
            .flat_map(|((d, _), r)| d.iter().map(|d| d.flow).zip(r).collect::<Vec<_>>())
            .collect()
    }
}

/// `Γ` of a coflow's demands on port capacities `up`/`down` (seconds): the largest time a
/// port needs for the coflow's bits through it; `None` if a port it needs has no capacity.
fn bottleneck(demands: &[Demand], up: &[f64], down: &[f64]) -> Option<f64> {
    let mut at_up: Vec<(usize, f64)> = Vec::new();
    let mut at_down: Vec<(usize, f64)> = Vec::new();
    for d in demands {
        add(&mut at_up, d.src, d.bits);
        add(&mut at_down, d.dst, d.bits);
    }
    let mut gamma: f64 = 0.0;
    for (list, cap) in [(&at_up, up), (&at_down, down)] {
        for &(port, bits) in list {
            if cap[port] <= 0.0 {
                return None;
            }
            gamma = gamma.max(bits / cap[port]);
        }
    }
    Some(gamma)
}

fn add(list: &mut Vec<(usize, f64)>, port: usize, bits: f64) {
    match list.iter_mut().find(|(p, _)| *p == port) {
        Some((_, b)) => *b += bits,
        None => list.push((port, bits)),
    }
}

/// Takes `r` from a port's remaining capacity; a remainder within rounding of 0 is 0.
fn take(rem: &mut f64, r: f64) {
    *rem -= r;
    if *rem < FULL * r.max(1.0) {
        *rem = 0.0;
    }
}

/// When flow `f`, paced by its Varys rate, may send again after sending `wire_bytes` at
/// `now`: a token bucket of one packet. The next packet is due one pace after the one just
/// sent was due, not after it left, so a packet held a little by the NIC's other flows (whose
/// Varys rates may fill the link) does not lower the flow's rate; a longer hold (a PFC pause)
/// earns at most one packet of credit.
pub(super) fn capped_next(f: &FlowState, wire_bytes: u16, now: Time) -> Time {
    let pace = Time(crate::units::ceil_u64(
        wire_bytes as f64 * 8e12 / f.rate_cap_bps,
    ));
    let due = f.next_avail.max(now.saturating_sub(pace));
    due + pace
}

impl Simulation {
    /// A flow of a coflow started or a coflow completed: Varys recomputes every rate, and
    /// the senders whose flows' rates changed are woken.
    pub(super) fn varys_update(&mut self) {
        let Some(varys) = self.varys.as_mut() else {
            return;
        };
        let host_index = &self.host_index;
        let rates = varys.allocate(
            &self.flows,
            self.next_flow,
            |node| host_index[node as usize] as usize,
            self.cfg.nic.payload.0,
            self.cfg.nic.header_bytes as u64,
        );
        let now = self.now;
        let mtu_bits = self.cfg.nic.mtu_wire_bytes() as f64 * 8.0;
        let mut kick = Vec::new();
        for (f, rate) in rates {
            let rate = if rate >= 1.0 { rate } else { 0.0 };
            let flow = &mut self.flows[f as usize];
            let old = flow.rate_cap_bps;
            if rate == old {
                continue;
            }
            flow.rate_cap_bps = rate;
            let next = if rate == 0.0 {
                Time::MAX
            } else if flow.next_avail == Time::MAX {
                now
            } else if rate > old {
                // At most one packet at the new rate from now.
                flow.next_avail
                    .min(now + Time(crate::units::ceil_u64(mtu_bits * 1e12 / rate)))
            } else {
                flow.next_avail
            };
            if next != flow.next_avail {
                flow.next_avail = next;
                let h = self.host_index[flow.spec.src as usize];
                if flow.in_sending() {
                    self.hosts[h as usize].set_next_avail(f, next);
                }
                kick.push(h);
            }
        }
        kick.sort_unstable();
        kick.dedup();
        for h in kick {
            self.host_kick(h);
        }
    }

    /// Flow `f`, in a coflow, finished: if its coflow completed, Varys recomputes.
    pub(super) fn varys_flow_end(&mut self, f: u32) {
        if let Some(v) = self.varys.as_mut() {
            if v.schedules(f) && v.flow_done(f) {
                self.varys_update();
            }
        }
    }
}
