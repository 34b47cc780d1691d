//! Probing: the first host of each ToR is its rack's agent; while a flow of the rack runs it
//! probes every other ToR every `probe_interval` (two random paths and the current best one),
//! shares every reply with the whole rack, and counts a probe unanswered for `probe_timeout` as
//! a loss on its path for every host of the rack.

use super::Hermes;
use crate::lb::host::{HostAction, HostCtx, ProbeEcho};
use crate::units::Time;
use rand::Rng as _;

/// A probe in flight: its number and send time (`seq` 0: none).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Outstanding {
    seq: u32,
    sent_at: Time,
}

impl Hermes {
    /// Whether host `h` is its rack's probing agent.
    fn is_agent(&self, h: u32) -> bool {
        self.rack[self.host_tor[h as usize] as usize].first() == Some(&h)
    }

    /// The path host `h` rates best towards ToR `b`: lowest class, then RTT, then index.
    fn best(&mut self, h: u32, b: u32, n: u16, now: Time) -> u16 {
        (0..n)
            .min_by_key(|&i| {
                let v = self.view(h, b, i, now);
                (v.class, v.rtt)
            })
            .expect("n >= 1")
    }

    fn probe_slot(&self, a: u32, b: u32, i: u16) -> usize {
        (self.probe_base[a as usize] + self.row[(a * self.tors + b) as usize]) as usize + i as usize
    }

    /// Sends a probe on path `i` from ToR `a`'s agent to ToR `b`, unless one is in flight.
    fn send_probe(&mut self, ctx: &mut HostCtx, a: u32, b: u32, i: u16) {
        let o = self.probe_slot(a, b, i);
        if self.probes[o].seq != 0 {
            return;
        }
        self.probe_seq = self.probe_seq.wrapping_add(1).max(1);
        self.probes[o] = Outstanding {
            seq: self.probe_seq,
            sent_at: ctx.now,
        };
        for k in 0..self.rack[a as usize].len() {
            let e = self.entry(self.rack[a as usize][k], b, i);
            self.stats[e].age(ctx.now, &self.cfg);
            self.stats[e].sent[0] += 1;
        }
        ctx.actions.push(HostAction::SendProbe {
            to_host: self.rack_node[b as usize],
            path_tag: ctx.fabric.tor_paths(a, b)[i as usize],
            priority: self.cfg.probe_priority,
            meta: self.probe_seq,
        });
    }

    /// At time zero: the phase of the agent's rounds, if host `ctx.host` is an agent.
    pub(super) fn start_agent(&mut self, ctx: &mut HostCtx) {
        let h = self.host(ctx.host);
        if self.cfg.probe && self.tors > 1 && self.is_agent(h) {
            // Agents run at random phases, so that racks do not probe in lockstep. They
            // start with the first flow of their rack.
            let phase = ctx.rng.gen_range(0..self.cfg.probe_interval.ps());
            self.phase[self.host_tor[h as usize] as usize] = ctx.now + Time(phase);
        }
    }

    /// A flow of ToR `a`'s rack started: the rack's agent, if stopped, resumes on its round
    /// grid.
    pub(super) fn wake_agent(&mut self, ctx: &mut HostCtx, a: u32) {
        if !self.cfg.probe || self.probing[a as usize] {
            return;
        }
        self.probing[a as usize] = true;
        let (phase, interval) = (self.phase[a as usize].ps(), self.cfg.probe_interval.ps());
        let now = ctx.now.ps();
        let at = if now <= phase {
            phase
        } else {
            phase + (now - phase).div_ceil(interval) * interval
        };
        ctx.actions.push(HostAction::SetTimer {
            host: self.rack_node[a as usize],
            at: Time(at),
            token: 0,
        });
    }

    /// A probing round of the agent of this host's rack. With no flow of the rack running,
    /// it only waits for the probes still out (answered, or lost after `probe_timeout`), then
    /// stops until the rack's next flow starts.
    pub(super) fn probe_round(&mut self, ctx: &mut HostCtx) {
        let h = self.host(ctx.host);
        let a = self.host_tor[h as usize];
        let now = ctx.now;
        let idle = self.rack_flows[a as usize] == 0;
        let mut waiting = false;
        for b in 0..self.tors {
            if b == a {
                continue;
            }
            let n = ctx.fabric.tor_paths(a, b).len() as u16;
            // Probes unanswered for too long are losses for the whole rack.
            for i in 0..n {
                let o = self.probe_slot(a, b, i);
                let p = self.probes[o];
                if p.seq != 0 && now.saturating_sub(p.sent_at) >= self.cfg.probe_timeout {
                    self.probes[o].seq = 0;
                    for k in 0..self.rack[a as usize].len() {
                        let e = self.entry(self.rack[a as usize][k], b, i);
                        self.record_loss(e, now);
                    }
                }
                waiting |= self.probes[o].seq != 0;
            }
            if idle {
                continue;
            }
            // Two random paths and the best one.
            let first = ctx.rng.gen_range(0..n);
            let second = if n > 1 {
                (first + 1 + ctx.rng.gen_range(0..n - 1)) % n
            } else {
                first
            };
            let best = self.best(h, b, n, now);
            for i in [first, second, best] {
                self.send_probe(ctx, a, b, i);
            }
        }
        if idle && !waiting {
            self.probing[a as usize] = false;
            return;
        }
        ctx.actions.push(HostAction::SetTimer {
            host: ctx.host,
            at: now + self.cfg.probe_interval,
            token: 0,
        });
    }

    /// A probe reply at the agent of this host's rack: the probe is answered, and every host
    /// of the rack learns the path's RTT and mark.
    pub(super) fn probe_reply(&mut self, ctx: &mut HostCtx, echo: &ProbeEcho) {
        let h = self.host(ctx.host);
        let a = self.host_tor[h as usize];
        let b = ctx.fabric.tor(echo.to_host);
        let Some(i) = ctx
            .fabric
            .tor_paths(a, b)
            .iter()
            .position(|&t| t == echo.path_tag)
        else {
            return;
        };
        let i = i as u16;
        let o = self.probe_slot(a, b, i);
        if self.probes[o].seq == echo.meta {
            self.probes[o].seq = 0;
        }
        // Shared with the whole rack at once.
        for k in 0..self.rack[a as usize].len() {
            let e = self.entry(self.rack[a as usize][k], b, i);
            self.stats[e].sample(ctx.now, echo.rtt, echo.ce, &self.cfg);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::hermes::tests::{flow, hermes, probe_replies, US};
    use crate::lb::hermes::{HermesConfig, PathClass};
    use crate::lb::host::{FlowInfo, HostScheme, TestHost};

    #[test]
    fn the_rack_agent_probes_and_shares_what_it_learns() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 1);
        // Agents start with their rack's first flow, on the round grid of their phase.
        for node in [1, 0] {
            host.host = node;
            h.on_start(&mut host.ctx(0));
            assert!(host.actions.is_empty());
        }
        // A flow of host 1 (not the agent) wakes host 0, the agent.
        host.host = 1;
        h.on_flow_start(
            &mut host.ctx(0),
            &FlowInfo {
                src: 1,
                ..flow(0, 0)
            },
        );
        let [HostAction::SetTimer { host: 0, at, .. }] = host.actions[..] else {
            panic!("{:?}", host.actions)
        };
        assert!(at < Time::ZERO + cfg.probe_interval);
        host.host = 0;
        host.actions.clear();
        // A round: two random paths and the best, distinct ones once, to host 2.
        let mut rounds = Vec::new();
        let mut t = 0;
        for _ in 0..3 {
            h.on_timer(&mut host.ctx(t), 0);
            let probes: Vec<u32> = host
                .actions
                .iter()
                .filter_map(|a| match *a {
                    HostAction::SendProbe {
                        to_host,
                        path_tag,
                        priority,
                        ..
                    } => {
                        assert_eq!((to_host, priority), (2, 3));
                        Some(path_tag)
                    }
                    _ => None,
                })
                .collect();
            assert!(matches!(
                host.actions.last(),
                Some(HostAction::SetTimer { .. })
            ));
            host.actions.clear();
            rounds.push(probes);
            t += 600 * US; // replies never come: every probe times out
        }
        assert!((2..=3).contains(&rounds[0].len()), "{rounds:?}");
        // The best path (all unknown: the first) is probed every round; its unanswered
        // probes are losses for the whole rack, and the third fails it.
        assert!(rounds.iter().all(|r| r.contains(&1)), "{rounds:?}");
        assert_ne!(h.class(1, 1, 0, Time::from_ns(t)), PathClass::Failed);
        h.on_timer(&mut host.ctx(t), 0);
        for node in [0, 1] {
            assert_eq!(h.class(node, 1, 0, Time::from_ns(t)), PathClass::Failed);
        }
        // A reply reaches every host of the rack.
        let mut h = hermes(&host, &cfg, 0);
        probe_replies(&mut h, &mut host, 0, 2, 30, true, 20);
        assert_eq!(h.class(1, 1, 1, Time::from_ns(100)), PathClass::Bad);
    }

    #[test]
    fn the_agent_stops_while_its_rack_is_idle_and_resumes_on_its_grid() {
        let mut host = TestHost::new(4);
        let cfg = HermesConfig::default();
        let mut h = hermes(&host, &cfg, 2);
        h.on_start(&mut host.ctx(0));
        let phase = 37 * US; // a whole number of ns, for the test's clock
        h.phase[0] = Time::from_ns(phase);
        let f = flow(0, 0);
        h.on_flow_start(&mut host.ctx(0), &f);
        let [HostAction::SetTimer { host: 0, at, .. }] = host.actions[..] else {
            panic!("{:?}", host.actions)
        };
        assert_eq!(at, Time::from_ns(phase));
        host.actions.clear();
        let round = |h: &mut Hermes, host: &mut TestHost, t: u64| {
            host.actions.clear();
            h.on_timer(&mut host.ctx(t), 0);
            let probes = host
                .actions
                .iter()
                .filter(|a| matches!(a, HostAction::SendProbe { .. }))
                .count();
            let next = host.actions.iter().find_map(|a| match *a {
                HostAction::SetTimer { host: 0, at, .. } => Some(at),
                _ => None,
            });
            (probes, next)
        };
        // A flow runs: probes, next round one interval later.
        let (probes, next) = round(&mut h, &mut host, phase);
        assert!(probes >= 2);
        assert_eq!(next, Some(Time::from_ns(phase) + cfg.probe_interval));
        // The flow ends: no more probes; the round waits for the three still out...
        h.on_flow_end(&mut host.ctx(phase + 50 * US), &f);
        let (probes, next) = round(&mut h, &mut host, phase + 100 * US);
        assert_eq!((probes, next.is_some()), (0, true));
        // ...and stops once they are answered.
        for tag in 1..=4 {
            for meta in 1..=3 {
                let echo = ProbeEcho {
                    to_host: 2,
                    path_tag: tag,
                    ce: false,
                    rtt: Time::from_us(9),
                    one_way: Time::from_us(4),
                    meta,
                };
                h.on_probe_reply(&mut host.ctx(phase + 150 * US), &echo);
            }
        }
        assert_eq!(round(&mut h, &mut host, phase + 200 * US), (0, None));
        // The rack's next flow restarts the agent at its next round on the grid.
        host.actions.clear();
        h.on_flow_start(&mut host.ctx(phase + 1_234 * US), &flow(1, 0));
        let [HostAction::SetTimer { host: 0, at, .. }] = host.actions[..] else {
            panic!("{:?}", host.actions)
        };
        assert_eq!(at, Time::from_ns(phase + 1_300 * US));
        // A second flow does not start it twice.
        host.actions.clear();
        h.on_flow_start(&mut host.ctx(phase + 1_250 * US), &flow(0, 0));
        assert!(host.actions.is_empty());
    }
}
