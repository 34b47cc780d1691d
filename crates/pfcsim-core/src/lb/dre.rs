//! Link utilization measured in the data plane, as CONGA measures it and PLB reuses: a DRE
//! (discounting rate estimator) per egress, quantized into a congestion metric, and the CE
//! fold that carries the largest metric along a packet's path.
//!
//! A DRE is a register `X` that grows by the wire bytes of each data packet sent and is
//! multiplied by `1 - alpha` every `t_dre` (at multiples of `t_dre` since time zero). Its
//! quantized value, `floor(8 X / (C tau) 2^q_bits)` with `tau = t_dre / alpha` and `C` the
//! port's rate, is the port's congestion metric: about `2^q_bits` at full utilization, not
//! clamped (a header field saturates it at 255, see [`fold`]).

use crate::units::Time;

/// A discounting rate estimator, decayed lazily: reading it at time `t` gives exactly what a
/// timer multiplying it by `1 - alpha` at every multiple of `t_dre` would have left.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dre {
    /// Bytes (discounted).
    x: f64,
    /// Index of the last decrement period applied (`now / t_dre`).
    epoch: u64,
}

impl Dre {
    #[inline]
    fn decay(&mut self, now: u64, t_dre: u64, keep: f64) {
        let e = now / t_dre;
        if e > self.epoch {
            let k = e - self.epoch;
            // (1 - alpha)^k underflows long before 4096 periods for any alpha >= 0.2.
            self.x = if k > 4096 {
                0.0
            } else {
                self.x * keep.powi(k as i32)
            };
            self.epoch = e;
        }
    }

    /// The register's value at `now` (bytes; times in picoseconds).
    pub fn value(&mut self, now: u64, t_dre: u64, keep: f64) -> f64 {
        self.decay(now, t_dre, keep);
        self.x
    }

    /// Counts `bytes` sent at `now`.
    #[inline]
    pub fn add(&mut self, now: u64, t_dre: u64, keep: f64, bytes: f64) {
        self.decay(now, t_dre, keep);
        self.x += bytes;
    }
}

/// The DREs of one switch's ports, with their quantization.
#[derive(Clone, Debug)]
pub struct PortDres {
    t_dre: u64,
    keep: f64,
    /// `8 * 2^q_bits / tau` in 1/s: metric = x * scale / rate_bps.
    scale: f64,
    /// Line rate of each local port (bit/s), the `C` of the quantization.
    rate_bps: Vec<f64>,
    dre: Vec<Dre>,
}

impl PortDres {
    /// DREs for ports of the given rates (bit/s), decayed by `1 - alpha` every `t_dre`,
    /// quantized to `q_bits` (callers validate: `t_dre > 0`, `0 < alpha <= 1`).
    pub fn new(t_dre: Time, alpha: f64, q_bits: u32, rate_bps: &[u64]) -> PortDres {
        let tau_s = t_dre.as_secs_f64() / alpha;
        PortDres {
            t_dre: t_dre.ps(),
            keep: 1.0 - alpha,
            scale: 8.0 * (1u64 << q_bits) as f64 / tau_s,
            rate_bps: rate_bps.iter().map(|&r| r as f64).collect(),
            dre: vec![Dre::default(); rate_bps.len()],
        }
    }

    /// Counts `bytes` sent on local port `port` at `now` (picoseconds).
    #[inline]
    pub fn add(&mut self, now: u64, port: u16, bytes: u64) {
        self.dre[port as usize].add(now, self.t_dre, self.keep, bytes as f64);
    }

    /// The quantized congestion metric of local port `port` at `now` (picoseconds).
    #[inline]
    pub fn metric(&mut self, now: u64, port: u16) -> u32 {
        let x = self.dre[port as usize].value(now, self.t_dre, self.keep);
        (x * self.scale / self.rate_bps[port as usize]) as u32
    }

    /// [`PortDres::metric`] without decaying the register in place (monitors read it between
    /// events; the run's own reads must not depend on theirs).
    pub fn metric_at(&self, now: u64, port: u16) -> u32 {
        let mut dre = self.dre[port as usize];
        let x = dre.value(now, self.t_dre, self.keep);
        (x * self.scale / self.rate_bps[port as usize]) as u32
    }

    /// Sets port `port`'s register to `bytes` (unit tests).
    #[cfg(test)]
    pub fn set_bytes(&mut self, port: u16, bytes: f64) {
        self.dre[port as usize].x = bytes;
    }
}

/// The CE fold at a hop: the largest of a packet's CE field and this hop's metric, saturating
/// at 255 (the 8-bit field).
#[inline]
pub fn fold(ce: u8, metric: u32) -> u8 {
    ce.max(metric.min(255) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dre_decays_geometrically_at_multiples_of_t_dre() {
        let (t, keep) = (50_000_000u64, 0.8);
        let mut d = Dre::default();
        d.add(10, t, keep, 1000.0);
        // Still in period 0: no decay yet.
        assert_eq!(d.value(t - 1, t, keep), 1000.0);
        // k periods later: x0 (1 - alpha)^k, whether read every period or once.
        assert!((d.value(t, t, keep) - 800.0).abs() < 1e-9);
        let mut e = d;
        assert!((e.value(5 * t + 7, t, keep) - 1000.0 * 0.8f64.powi(5)).abs() < 1e-9);
        for k in 2..=5 {
            d.value(k * t, t, keep);
        }
        assert!((d.value(5 * t + 7, t, keep) - e.value(5 * t + 7, t, keep)).abs() < 1e-9);
        // Far in the future: gone.
        assert_eq!(d.value(10_000 * t, t, keep), 0.0);
    }

    #[test]
    fn a_port_sending_at_line_rate_has_a_metric_of_about_two_to_the_q_bits() {
        // 10 Gbps, t_dre = 50 us, alpha = 0.2: tau = 250 us.
        let mut dres = PortDres::new(Time::from_us(50), 0.2, 3, &[10_000_000_000]);
        // One 1,250-byte packet every microsecond (10 Gbps) for 5 ms.
        for us in 0..5_000u64 {
            dres.add(us * 1_000_000, 0, 1_250);
        }
        // Read just before a decrement: X = 62,500 bytes per period / alpha.
        let m = dres.metric(4_999_999_999, 0);
        assert!(
            (7..=8).contains(&m),
            "metric {m} at line rate, expected about 8"
        );
        assert_eq!(fold(3, m), m as u8);
        assert_eq!(fold(200, 1_000), 255);
        assert_eq!(fold(9, 2), 9);
    }
}
