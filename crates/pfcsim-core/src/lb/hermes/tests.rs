//! Helpers shared by the unit tests of Hermes's parts (the tests are beside the code they
//! test).

use super::{Hermes, HermesConfig};
use crate::lb::host::{FlowInfo, HostScheme, ProbeEcho, TestHost};
use crate::units::Time;

pub(super) const US: u64 = 1_000;

pub(super) fn hermes(host: &TestHost, cfg: &HermesConfig, flows: usize) -> Hermes {
    Hermes::new(cfg, &host.fabric, flows)
}

/// `n` probe replies at `t_ns` on path tag `tag` (ToR 1), with this RTT and mark, at
/// host 0 (its rack's agent): every host of rack 0 learns them.
pub(super) fn probe_replies(
    h: &mut Hermes,
    host: &mut TestHost,
    t_ns: u64,
    tag: u32,
    rtt_us: u64,
    ce: bool,
    n: u32,
) {
    for k in 0..n {
        let echo = ProbeEcho {
            to_host: 2,
            path_tag: tag,
            ce,
            rtt: Time::from_us(rtt_us),
            one_way: Time::from_us(rtt_us / 2),
            meta: 0,
        };
        h.on_probe_reply(&mut host.ctx(t_ns + k as u64), &echo);
    }
}

pub(super) fn flow(id: u32, high_sent: u64) -> FlowInfo {
    FlowInfo {
        high_sent,
        snd_una: high_sent,
        ..TestHost::flow(id, 10_000_000)
    }
}
