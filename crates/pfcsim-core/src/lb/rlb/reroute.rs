//! Algorithm 1: the egress of a packet whose inner choice is warned, or its recirculation.

use super::Rlb;
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
    /// Algorithm 1 for a packet whose inner choice `p` is blocked: the next candidate after
    /// p in port order is p_s; recirculate if RTT(p_s) - RTT(p) > t_rc, else move to p_s and
    /// check again. `can_recirculate`: the switch recirculates at all.
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
            // p_s: the next untried candidate after the current one, cyclically.
            let Some(next) = (1..n)
                .map(|k| (cur + k) % n)
                .find(|&i| tried & (1 << i) == 0)
            else {
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

    /// Algorithm 1. Checked to fail with the RTT gap test replaced by "always reroute" and by
    /// "always recirculate", without the "check again" of a replaced p_s, and with clearing
    /// CNMs ignored.
    #[test]
    fn an_unwarned_choice_is_kept_and_a_warned_one_is_replaced_or_recirculated() {
        let mut rlb = leaf(&ecmp_inner());
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
