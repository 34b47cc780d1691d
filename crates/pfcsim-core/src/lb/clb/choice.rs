//! Algorithm 1 (the port classes) and Algorithm 2 (the choice among equal-cost egresses) of
//! CLB, written over functions that give a candidate's queue, growth and `Tr`, so that they
//! are tested without a switch.

use crate::engine::Rng;
use rand::Rng as _;

/// The class of an egress (port, priority), best first (Algorithm 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// `Q < Q_thr`, `G <= 0`: the best path.
    A,
    /// `Q < Q_thr`, `G > 0`: may pause soon.
    B,
    /// `Q >= Q_thr`, `G <= 0`.
    C,
    /// `Q >= Q_thr`, `G > 0` (Algorithm 1 writes `Q > Q_thr`, leaving `Q = Q_thr` with a
    /// growing queue unclassified; the text says "has reached": `>=`).
    D,
}

impl Class {
    /// The class's number in monitors and counters (A = 0 ... D = 3).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// Algorithm 1: the class of an egress whose queue holds `q` bytes and grew by `g` bytes over
/// the last sampling interval, with the threshold `q_thr`.
#[inline]
pub fn classify(q: u64, g: i64, q_thr: u64) -> Class {
    match (q < q_thr, g <= 0) {
        (true, true) => Class::A,
        (true, false) => Class::B,
        (false, true) => Class::C,
        (false, false) => Class::D,
    }
}

/// The value Algorithm 2 minimizes within a class: `Q` in A and C (in C the least `Q` is the
/// least `Q - Q_thr`, line 13), `G` in B and D (line 14 tests set C again; it means D).
#[inline]
fn key(class: Class, q: u64, g: i64) -> i64 {
    match class {
        Class::A | Class::C => q.min(i64::MAX as u64) as i64,
        Class::B | Class::D => g,
    }
}

/// What settled a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// One port had the best class and the least key.
    Class,
    /// Two or more did; one had the least `Tr` of the packet's coflow.
    Tr,
    /// Ports were still tied (or the packet is outside a coflow): the switch's RNG drew one.
    Random,
}

/// A decision: the port, its class, what settled it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub port: u16,
    pub class: Class,
    pub settled: Settled,
}

/// Algorithm 2 for one data packet: among `candidates` (at least one), those of the best
/// class present with the least key; if two or more remain and `tr` is given (the packet
/// belongs to a coflow and the tie-break is on), those with the least `tr`; then one drawn
/// uniformly with `rng` (drawn only if two or more remain). `view(port)` is `(Q, G)`.
pub fn decide(
    candidates: &[u16],
    view: impl Fn(u16) -> (u64, i64),
    q_thr: u64,
    tr: Option<&dyn Fn(u16) -> f64>,
    rng: &mut Rng,
) -> Decision {
    let rank = |p: u16| {
        let (q, g) = view(p);
        let class = classify(q, g, q_thr);
        (class, key(class, q, g))
    };
    let best = candidates
        .iter()
        .map(|&p| rank(p))
        .min()
        .expect("candidates");
    let tied = || candidates.iter().copied().filter(move |&p| rank(p) == best);
    let mut n = tied().count();
    let mut settled = Settled::Class;
    let mut least_tr = None;
    if n > 1 {
        if let Some(tr) = tr {
            let least = tied().map(tr).fold(f64::INFINITY, f64::min);
            let m = tied().filter(|&p| tr(p) == least).count();
            if m < n {
                (n, least_tr, settled) = (m, Some(least), Settled::Tr);
            }
        }
    }
    let mut pick = 0;
    if n > 1 {
        pick = rng.gen_range(0..n);
        settled = Settled::Random;
    }
    let port = tied()
        .filter(|&p| least_tr.is_none_or(|least| tr.is_some_and(|tr| tr(p) == least)))
        .nth(pick)
        .expect("a tied port");
    Decision {
        port,
        class: best.0,
        settled,
    }
}
