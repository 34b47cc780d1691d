//! RPS (random packet spraying): every switch sends each data packet to an equal-cost next
//! hop drawn uniformly at random from its own RNG stream.
//!
//! As in the ns-3 random-ECMP routing the baselines use; there is no state and no
//! congestion signal. Spraying reorders packets whenever the paths' queues differ, which
//! RoCE's go-back-N turns into NACKs and retransmissions.

use crate::engine::Rng;
use rand::Rng as _;
use serde::{Deserialize, Serialize};

/// RPS has no parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpsConfig {}

/// RPS state of one switch (none).
#[derive(Clone, Debug, Default)]
pub struct Rps;

impl Rps {
    #[inline]
    pub fn choose(&self, rng: &mut Rng, candidates: &[u16]) -> u16 {
        candidates[rng.gen_range(0..candidates.len())]
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
            counts[Rps.choose(&mut rng, &[0, 1, 2, 3]) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }
}
