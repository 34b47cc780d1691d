//! DRILL (Ghorbani et al., SIGCOMM'17): per-packet choice at every switch from local queue
//! lengths. For each data packet the switch samples `d` distinct candidates at random, adds
//! the `m` least-loaded candidates it remembered from its previous decision for the same
//! destination, sends the packet to the least loaded of them and remembers the `m` least
//! loaded (winner first) for next time.
//!
//! "Load" of a candidate is the bytes waiting in its egress queue, read at the moment of the
//! decision: by default the queue of the packet's own priority (`queue = "priority"`, the
//! queue the packet would join); `queue = "total"` adds every priority of the port, control
//! included, as conweave-ns3 does. Ties keep the remembered port, and among samples the first
//! drawn; a sample replaces the current best only if strictly lower, as in both references.
//! Memory is keyed by destination host, as both references key it by destination address.
//!
//! Not modelled: the paper's decomposition of asymmetric fabrics into symmetric components
//! (neither reference implements it), several forwarding engines with separate memories.

use super::{LbCtx, LbFabric, SchemeConfig, SwitchScheme};
use crate::check::check_range;
use crate::engine::Rng;
use crate::packet::Packet;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// Which bytes count as a candidate's load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrillQueue {
    /// Bytes queued at the candidate egress in the data packet's own priority.
    #[default]
    Priority,
    /// Bytes queued at the candidate egress in all priorities (conweave-ns3).
    Total,
}

/// Largest accepted `d`.
pub const MAX_D: u32 = 16;
/// Largest accepted `m`.
pub const MAX_M: u32 = 8;

/// DRILL parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrillConfig {
    /// Random samples per packet (default 2: the paper's recommendation, hard-coded in both
    /// ns3-load-balance and conweave-ns3). Valid: 1..=16; with fewer candidates, all are
    /// sampled.
    pub d: u32,
    /// Remembered least-loaded ports per destination (default 1, as the paper and both
    /// references). Valid: 0..=8.
    pub m: u32,
    /// What a candidate's load is (default `priority`: the packet's priority queue at the
    /// egress; `total`: all priorities, as conweave-ns3).
    pub queue: DrillQueue,
}

impl Default for DrillConfig {
    fn default() -> Self {
        DrillConfig {
            d: 2,
            m: 1,
            queue: DrillQueue::Priority,
        }
    }
}

impl SchemeConfig for DrillConfig {
    /// Checks the values; the message names the key under `[lb]` and the valid range.
    fn validate(&self) -> Result<(), String> {
        let samples = "random samples per packet (DRILL default 2)";
        check_range("lb.d", self.d, 1..=MAX_D, samples)?;
        let remembered = "remembered ports (DRILL default 1)";
        check_range("lb.m", self.m, 0..=MAX_M, remembered)
    }

    fn switch_scheme(&self, fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Drill::new(self, fabric.nodes))
    }
}

const EMPTY: u16 = u16::MAX;

/// One switch's DRILL state: `m` remembered ports per destination node.
#[derive(Clone, Debug)]
pub struct Drill {
    d: usize,
    m: usize,
    queue: DrillQueue,
    /// `memory[dst * m ..][..m]`: remembered ports, least loaded first (`EMPTY`: none).
    memory: Vec<u16>,
}

impl Drill {
    pub fn new(cfg: &DrillConfig, nodes: u32) -> Drill {
        if let Err(e) = cfg.validate() {
            panic!("invalid [lb] config: {e}");
        }
        Drill {
            d: cfg.d as usize,
            m: cfg.m as usize,
            queue: cfg.queue,
            memory: vec![EMPTY; nodes as usize * cfg.m as usize],
        }
    }
}

impl SwitchScheme for Drill {
    #[inline]
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        let (view, prio) = (ctx.ports, pkt.priority);
        match self.queue {
            DrillQueue::Priority => self.decide(ctx.rng, pkt.dst, candidates, |p| {
                view[p as usize].queue_bytes(prio)
            }),
            DrillQueue::Total => self.decide(ctx.rng, pkt.dst, candidates, |p| {
                view[p as usize].total_queue_bytes()
            }),
        }
    }

    fn adopt(&mut self, pkt: &Packet, port: u16) {
        self.remember(pkt.dst, port)
    }
}

impl Drill {
    /// The decision for a packet to `dst`, with `load(port)` the load of a candidate.
    #[inline]
    fn decide(
        &mut self,
        rng: &mut Rng,
        dst: u32,
        candidates: &[u16],
        load: impl Fn(u16) -> u64,
    ) -> u16 {
        // Contenders in order of preference on ties: memory (least loaded first), then the
        // samples in the order drawn. At most MAX_M + MAX_D of them.
        let mut ports = [0u16; (MAX_M + MAX_D) as usize];
        let mut loads = [0u64; (MAX_M + MAX_D) as usize];
        let mut len = 0;
        let mem = &mut self.memory[dst as usize * self.m..][..self.m];
        for &p in mem.iter() {
            if p != EMPTY && candidates.contains(&p) {
                ports[len] = p;
                loads[len] = load(p);
                len += 1;
            }
        }
        // d distinct samples (all candidates, in random order, if there are no more than d).
        let n = candidates.len();
        let want = self.d.min(n);
        let mut picked = [0usize; MAX_D as usize];
        let mut got = 0;
        while got < want {
            let i = rng.gen_range(0..n);
            if !picked[..got].contains(&i) {
                picked[got] = i;
                got += 1;
                let p = candidates[i];
                if !ports[..len].contains(&p) {
                    ports[len] = p;
                    loads[len] = load(p);
                    len += 1;
                }
            }
        }
        // The m least loaded (at least the winner) to the front, ties in order of preference.
        sort_least_first(&mut ports[..len], &mut loads[..len], self.m.max(1));
        for (i, slot) in mem.iter_mut().enumerate() {
            *slot = if i < len { ports[i] } else { EMPTY };
        }
        ports[0]
    }
}

impl Drill {
    /// RLB with `inner_follows`: the packet to `dst` left on `port` instead of DRILL's choice;
    /// `port` becomes the first remembered port for `dst` (the others move down one place).
    pub fn remember(&mut self, dst: u32, port: u16) {
        let mem = &mut self.memory[dst as usize * self.m..][..self.m];
        let at = mem
            .iter()
            .position(|&p| p == port)
            .unwrap_or(mem.len().saturating_sub(1));
        if let Some(front) = mem.get_mut(..=at) {
            front.rotate_right(1);
            front[0] = port;
        }
    }
}

/// Moves the `keep` least loaded entries to the front, least first; equal loads keep their
/// relative order (a later entry must be strictly lower to move ahead).
fn sort_least_first(ports: &mut [u16], loads: &mut [u64], keep: usize) {
    for i in 0..keep.min(ports.len()) {
        let mut best = i;
        for j in i + 1..ports.len() {
            if loads[j] < loads[best] {
                best = j;
            }
        }
        ports[i..=best].rotate_right(1);
        loads[i..=best].rotate_right(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{rng_stream, StreamKind};

    #[test]
    fn validation_names_the_key_and_range() {
        let bad = DrillConfig {
            d: 0,
            ..Default::default()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "lb.d: 0 is out of range; use 1..=16 random samples per packet (DRILL default 2)"
        );
        let bad = DrillConfig {
            m: 9,
            ..Default::default()
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("lb.m: 9 is out of range"));
        assert!(DrillConfig {
            d: 1,
            m: 0,
            ..Default::default()
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn least_first_is_stable() {
        let mut ports = [10u16, 11, 12, 13];
        let mut loads = [5u64, 3, 3, 1];
        sort_least_first(&mut ports, &mut loads, 4);
        assert_eq!((ports, loads), ([13, 11, 12, 10], [1, 3, 3, 5]));
    }

    fn rng() -> Rng {
        rng_stream(5, StreamKind::Switch, 2)
    }

    #[test]
    fn takes_the_least_loaded_of_memory_and_samples_and_remembers_it() {
        let cands = [0u16, 1, 2, 3];
        let loads = [100u64, 50, 10, 70];
        let mut drill = Drill::new(&DrillConfig::default(), 4);
        let mut rng = rng();
        // With d = 2 the first decision sees two of the four; after a few, port 2 (the least
        // loaded) has been sampled once and memory keeps it from then on.
        let got: Vec<u16> = (0..40)
            .map(|_| drill.decide(&mut rng, 1, &cands, |p| loads[p as usize]))
            .collect();
        let first2 = got.iter().position(|&p| p == 2).unwrap();
        assert!(first2 < 10, "{got:?}");
        assert!(got[first2..].iter().all(|&p| p == 2), "{got:?}");
        // Before that, every choice is the lesser of two distinct samples (never the worst).
        assert!(got.iter().all(|&p| p != 0), "{got:?}");
        // Memory is per destination: destination 3 starts afresh.
        assert_eq!(drill.memory[3], EMPTY);
    }

    #[test]
    fn ties_keep_the_remembered_port_and_d_covers_all_when_large() {
        let cands = [0u16, 1, 2];
        let mut drill = Drill::new(
            &DrillConfig {
                d: 16,
                ..Default::default()
            },
            1,
        );
        let mut rng = rng();
        // All loads equal: the first decision takes the first sample, then memory wins ties.
        let first = drill.decide(&mut rng, 0, &cands, |_| 7);
        for _ in 0..50 {
            assert_eq!(drill.decide(&mut rng, 0, &cands, |_| 7), first);
        }
        // d >= n samples every candidate: the strict minimum always wins.
        for best in 0..3u16 {
            let got = drill.decide(&mut rng, 0, &cands, |p| if p == best { 1 } else { 2 });
            assert_eq!(got, best);
        }
    }

    /// RLB's `inner_follows`. Checked to fail with `adopt` doing nothing.
    #[test]
    fn an_adopted_port_is_remembered_first_and_wins_the_next_tie() {
        let cands = [0u16, 1, 2, 3];
        let mut drill = Drill::new(&DrillConfig::default(), 1);
        let mut rng = rng();
        let first = drill.decide(&mut rng, 0, &cands, |_| 0);
        let other = (first + 1) % 4;
        drill.remember(0, other);
        assert_eq!(drill.memory, [other]);
        // Equal loads: the remembered port, now the adopted one, keeps the flow.
        for _ in 0..20 {
            assert_eq!(drill.decide(&mut rng, 0, &cands, |_| 0), other);
        }
        // With m = 2 the adopted port goes first and the former first moves down.
        let mut drill = Drill::new(
            &DrillConfig {
                d: 4,
                m: 2,
                ..Default::default()
            },
            1,
        );
        drill.decide(&mut rng, 0, &cands, |p| [4u64, 3, 2, 1][p as usize]);
        assert_eq!(drill.memory, [3, 2]);
        drill.remember(0, 0);
        assert_eq!(drill.memory, [0, 3]);
        drill.remember(0, 3);
        assert_eq!(drill.memory, [3, 0]);
    }

    #[test]
    fn m_zero_has_no_memory_and_m_two_remembers_the_two_least() {
        let cands = [0u16, 1, 2, 3];
        let loads = [4u64, 3, 2, 1];
        let mut drill = Drill::new(
            &DrillConfig {
                d: 4,
                m: 2,
                ..Default::default()
            },
            1,
        );
        drill.decide(&mut rng(), 0, &cands, |p| loads[p as usize]);
        assert_eq!(drill.memory, [3, 2]);
        let mut drill = Drill::new(
            &DrillConfig {
                d: 1,
                m: 0,
                ..Default::default()
            },
            1,
        );
        assert!(drill.memory.is_empty());
        let mut r = rng();
        let got: Vec<u16> = (0..400)
            .map(|_| drill.decide(&mut r, 0, &cands, |p| loads[p as usize]))
            .collect();
        // d = 1, m = 0 is a uniform random choice.
        assert!(cands
            .iter()
            .all(|c| got.iter().filter(|&&p| p == *c).count() > 70));
    }
}
