//! Algorithm 1: the egress of a packet whose inner choice is warned, or its recirculation.

use super::{Alternative, Rlb};
use crate::packet::Packet;
use crate::units::Time;

/// Candidates considered by Algorithm 1 (bits of the "tried" mask).
const MAX_TRIED: usize = 64;
/// Largest candidate set filtered for removed egresses on the stack.
pub(super) const MAX_CANDIDATES: usize = 256;

/// What Algorithm 1 decided for a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Forward on this egress (`rerouted`: not the inner scheme's choice).
    Forward { port: u16, rerouted: bool },
    /// Recirculate; `charged` is the egress whose RTT gap caused it (`None` when every
    /// candidate is warned: congestion everywhere, nobody's fault), `gap` that gap.
    Recirculate { charged: Option<u16>, gap: Time },
}

impl Rlb {
    /// Algorithm 1 for a packet whose inner choice `p` is blocked: p_s is the untried
    /// candidate with the smallest RTT (`alternative = "next_best"`) or the next one after p
    /// in port order (`"next_port"`); recirculate if RTT(p_s) - RTT(p) > t_rc, else move to
    /// p_s and check again. `can_recirculate`: the switch recirculates at all.
    #[allow(clippy::too_many_arguments)]
    pub fn algorithm1(
        &self,
        now: Time,
        pkt: &Packet,
        p: u16,
        candidates: &[u16],
        dst_tor: Option<u32>,
        t_rc: Time,
        can_recirculate: bool,
    ) -> Decision {
        let prio = pkt.priority;
        let n = candidates.len().min(MAX_TRIED);
        let Some(start) = candidates[..n].iter().position(|&c| c == p) else {
            // The pinned candidate was removed: treat the first kept candidate as p.
            return Decision::Forward {
                port: candidates[0],
                rerouted: true,
            };
        };
        let mut cur = start;
        let mut tried: u64 = 1 << start;
        loop {
            let port = candidates[cur];
            if !self.blocked(port, prio, now) {
                return Decision::Forward {
                    port,
                    rerouted: port != p,
                };
            }
            // p_s among the untried candidates, taken in port order after the current one,
            // cyclically: the one with the smallest RTT (the first of equals), or the first.
            let mut untried = (1..n)
                .map(|k| (cur + k) % n)
                .filter(|&i| tried & (1 << i) == 0);
            let next = match self.alternative {
                Alternative::NextBest => {
                    untried.min_by_key(|&i| self.rtt(now, dst_tor, candidates[i]))
                }
                Alternative::NextPort => untried.next(),
            };
            let Some(next) = next else {
                break;
            };
            let ps = candidates[next];
            let gap = self
                .rtt(now, dst_tor, ps)
                .saturating_sub(self.rtt(now, dst_tor, port));
            // Waiting for a faulty path is pointless: only warned paths are waited for.
            if can_recirculate && !self.removed[port as usize] && gap > t_rc {
                return Decision::Recirculate {
                    charged: Some(ps),
                    gap,
                };
            }
            tried |= 1 << next;
            cur = next;
        }
        // Every candidate is warned: wait by recirculating, or take p.
        if can_recirculate && !self.removed[p as usize] {
            Decision::Recirculate {
                charged: None,
                gap: Time::MAX,
            }
        } else {
            Decision::Forward {
                port: p,
                rerouted: false,
            }
        }
    }

    /// The candidates without the egresses Algorithm 2 removed (all of them if none is left),
    /// the kept ones copied into `kept` (at most [`MAX_CANDIDATES`]).
    pub(super) fn without_removed<'a>(
        &self,
        candidates: &'a [u16],
        kept: &'a mut [u16; MAX_CANDIDATES],
    ) -> &'a [u16] {
        if self.any_removed {
            let mut n = 0;
            for &c in candidates.iter().take(MAX_CANDIDATES) {
                if !self.removed[c as usize] {
                    kept[n] = c;
                    n += 1;
                }
            }
            if n == 0 {
                candidates
            } else {
                &kept[..n]
            }
        } else {
            candidates
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::rlb::tests::{cnm, data, ecmp_inner, leaf, switch, warn};
    use crate::lb::rlb::{cnm_meta, RlbConfig};
    use crate::lb::{LbConfig, SwitchScheme};
    use crate::packet::LbHeader;

    /// Algorithm 1 (with `alternative = "next_port"`, so that p_s is the next port whatever
    /// the RTTs). Checked to fail with the RTT gap test replaced by "always reroute" and by
    /// "always recirculate", without the "check again" of a replaced p_s, and with clearing
    /// CNMs ignored.
    #[test]
    fn an_unwarned_choice_is_kept_and_a_warned_one_is_replaced_or_recirculated() {
        let mut rlb = leaf(&RlbConfig {
            alternative: Alternative::NextPort,
            ..ecmp_inner()
        });
        let mut sw = switch();
        let cands = [2u16, 3, 4, 5];
        let pkt = data(2, 0);
        let t_rc = Time::from_ns(500);
        for port in cands {
            rlb.set_rtt(1, port, Time::from_us(10));
        }
        // No warning: p stays.
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 3,
                rerouted: false
            }
        );
        // p = 3 warned for priority 3, p_s = 4 with a small RTT gap (< t_rc): rerouted to 4.
        warn(&mut rlb, &mut sw, 3, 3);
        rlb.set_rtt(1, 4, Time::from_us(10) + Time::from_ns(400));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 4,
                rerouted: true
            }
        );
        // Another priority is not warned.
        let mut other = pkt;
        other.priority = 4;
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &other, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 3,
                rerouted: false
            }
        );
        // A large gap (> t_rc): recirculate, charged to p_s.
        rlb.set_rtt(1, 4, Time::from_us(12));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Recirculate {
                charged: Some(4),
                gap: Time::from_us(2)
            }
        );
        // Reroute only: the large gap does not matter.
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, false),
            Decision::Forward {
                port: 4,
                rerouted: true
            }
        );
        // p_s = 4 warned too with a small gap: go on to 5 (Algorithm 1's "check again").
        warn(&mut rlb, &mut sw, 4, 3);
        rlb.set_rtt(1, 4, Time::from_us(10));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Forward {
                port: 5,
                rerouted: true
            }
        );
        // All warned: recirculate (or, without recirculation, take p).
        warn(&mut rlb, &mut sw, 5, 3);
        warn(&mut rlb, &mut sw, 2, 3);
        assert!(matches!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, true),
            Decision::Recirculate { charged: None, .. }
        ));
        assert_eq!(
            rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, false),
            Decision::Forward {
                port: 3,
                rerouted: false
            }
        );
        // A clearing CNM lifts the warning.
        let clear = LbHeader {
            path_tag: 0,
            meta: cnm_meta(false, 3, 7),
        };
        rlb.on_control(&mut sw.ctx(0), 3, &clear);
        assert!(!rlb.warned(3, 3, Time::ZERO));
    }

    /// p_s, the alternative to a warned p (uplinks 2..5, p = 3 warned): `next_best` (the
    /// default) takes the untried candidate with the smallest RTT, port 2 here, not the next
    /// port 4; `next_port` takes 4. With equal RTTs (or none measured) `next_best` takes the
    /// next port. The RTT gap to the chosen p_s decides recirculation: the next port's small gap
    /// would reroute, the best one's large gap is the one compared. Fails if `next_best` takes
    /// the next port, the largest RTT or the last of equals, and if `next_port` looks at RTTs.
    #[test]
    fn the_alternative_is_the_untried_path_with_the_smallest_rtt_or_the_next_port() {
        let cands = [2u16, 3, 4, 5];
        let pkt = data(2, 0);
        let t_rc = Time::from_ns(500);
        let setup = |alternative, rtts: [u64; 4]| {
            let mut rlb = leaf(&RlbConfig {
                alternative,
                ..ecmp_inner()
            });
            let mut sw = switch();
            for (port, ns) in cands.into_iter().zip(rtts) {
                rlb.set_rtt(1, port, Time::from_ns(ns));
            }
            warn(&mut rlb, &mut sw, 3, 3);
            rlb
        };
        let decide =
            |rlb: &Rlb, can| rlb.algorithm1(Time::ZERO, &pkt, 3, &cands, Some(1), t_rc, can);
        // RTTs: 2 is the fastest, 4 the slowest; p = 3 in between.
        let rtts = [9_000, 10_000, 11_000, 10_200];
        let best = setup(Alternative::NextBest, rtts);
        assert_eq!(
            decide(&best, false),
            Decision::Forward {
                port: 2,
                rerouted: true
            }
        );
        let next = setup(Alternative::NextPort, rtts);
        assert_eq!(
            decide(&next, false),
            Decision::Forward {
                port: 4,
                rerouted: true
            }
        );
        // Recirculation is judged against the chosen p_s: the next port (4) is 1 us slower
        // than p (> t_rc: recirculate), the best (2) is faster (reroute).
        assert_eq!(
            decide(&next, true),
            Decision::Recirculate {
                charged: Some(4),
                gap: Time::from_us(1)
            }
        );
        assert_eq!(
            decide(&best, true),
            Decision::Forward {
                port: 2,
                rerouted: true
            }
        );
        // Equal RTTs: the first of equals in port order after p, the next port.
        let equal = setup(Alternative::NextBest, [10_000; 4]);
        assert_eq!(
            decide(&equal, true),
            Decision::Forward {
                port: 4,
                rerouted: true
            }
        );
    }

    /// `inner_follows`, around LetFlow: a flowlet whose packet was rerouted off a warned port
    /// goes on from the port it was rerouted to once the warning is cleared; without the
    /// option it returns to its own port. Checked to fail with `adopt` doing nothing and with
    /// RLB not calling it.
    #[test]
    fn with_inner_follows_a_rerouted_flowlet_stays_on_its_new_port() {
        for follows in [false, true] {
            let cfg = RlbConfig {
                inner: Box::new(LbConfig::LetFlow(crate::lb::LetFlowConfig::default())),
                inner_follows: follows,
                ..Default::default()
            };
            let mut rlb = leaf(&cfg);
            let mut sw = switch();
            let cands = [2u16, 3, 4, 5];
            let pkt = data(2, 0);
            let p = rlb.choose(&mut sw.ctx(0), &pkt, &cands);
            warn(&mut rlb, &mut sw, p, 3);
            let ps = rlb.choose(&mut sw.ctx(1_000), &data(2, 1000), &cands);
            assert_eq!(
                ps,
                cands[(cands.iter().position(|&c| c == p).unwrap() + 1) % 4]
            );
            let clear = cnm(cnm_meta(false, 3, 7));
            rlb.on_control(&mut sw.ctx(2_000), p, &clear);
            // The same flowlet (within the 100 us timeout), no warning left.
            let next = rlb.choose(&mut sw.ctx(3_000), &data(2, 2000), &cands);
            assert_eq!(
                next,
                if follows { ps } else { p },
                "inner_follows = {follows}"
            );
        }
    }
}
