//! RPS (random packet spraying): every switch sends each data packet to an equal-cost next
//! hop drawn uniformly at random from its own RNG stream.
//!
//! As in the ns-3 random-ECMP routing the baselines use; there is no state and no
//! congestion signal. Spraying reorders packets whenever the paths' queues differ, which
//! RoCE's go-back-N turns into NACKs and retransmissions.

use super::{LbCtx, LbFabric, SchemeConfig, SwitchScheme};
use crate::engine::Rng;
use crate::packet::Packet;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// RPS has no parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpsConfig {}

/// RPS state of one switch (none).
#[derive(Clone, Debug, Default)]
pub struct Rps;

impl SchemeConfig for RpsConfig {
    fn switch_scheme(&self, _fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Rps)
    }
}

impl Rps {
    /// A uniformly random candidate.
    #[inline]
    pub fn pick(&self, rng: &mut Rng, candidates: &[u16]) -> u16 {
        candidates[rng.gen_range(0..candidates.len())]
    }
}

impl SwitchScheme for Rps {
    #[inline]
    fn choose(&mut self, ctx: &mut LbCtx, _pkt: &Packet, candidates: &[u16]) -> u16 {
        self.pick(ctx.rng, candidates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{rng_stream, StreamKind};

    #[test]
    fn sprays_uniformly() {
        let mut rng = rng_stream(1, StreamKind::Switch, 0);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[Rps.pick(&mut rng, &[0, 1, 2, 3]) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }
}
