//! DCTCP's reaction to ECN (Alizadeh et al., SIGCOMM 2010; RFC 8257), on the window of a TCP
//! flow (`transport.tcp.cc = "dctcp"`; the window, slow start, congestion avoidance and loss
//! recovery are TCP's own, `transport/tcp/`).
//!
//! The receiver echoes each data packet's CE mark on its ACK (one ACK per packet, so the echo
//! is exact). The sender keeps `alpha`, the moving average (gain `g`) of the fraction of
//! acknowledged bytes that were marked, updated once per window of data (when the cumulative
//! ACK passes the data sent at the last update); on an ECN echo, outside loss recovery, it
//! cuts the window to `cwnd (1 - alpha/2)` (at least two segments) and sets ssthresh there,
//! at most once per window of data (until the cumulative ACK passes what was sent at the
//! cut, or at the last retransmission timeout). Initial alpha is 1 (Linux, RFC 8257).
//!
//! Not modelled: the delayed-ACK state machine of the receiver (every packet is ACKed), the
//! ECN-capable transport negotiation.

use super::{AckSignal, CongestionControl, Window};

/// DCTCP's parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct DctcpConfig {
    /// The gain g of the moving average of the marked fraction (`transport.tcp.dctcp_g`).
    pub g: f64,
}

impl Default for DctcpConfig {
    fn default() -> Self {
        DctcpConfig { g: 1.0 / 16.0 }
    }
}

/// DCTCP's state for one flow.
#[derive(Clone, Debug)]
pub struct Dctcp {
    /// The estimate of the fraction of marked bytes.
    alpha: f64,
    /// The end of the current observation window, and the bytes acknowledged and marked in it.
    window_end: u64,
    acked: u64,
    marked: u64,
    /// No further window cut before the cumulative ACK reaches this byte.
    cwr_end: u64,
}

impl Default for Dctcp {
    fn default() -> Self {
        Dctcp {
            alpha: 1.0,
            window_end: 0,
            acked: 0,
            marked: 0,
            cwr_end: 0,
        }
    }
}

impl Dctcp {
    /// The estimate of the fraction of marked bytes.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl CongestionControl for Dctcp {
    type Config = DctcpConfig;

    fn on_ack(&mut self, cfg: &DctcpConfig, ack: &AckSignal, window: &mut Window) {
        self.acked += ack.newly_acked;
        if ack.ce {
            self.marked += ack.newly_acked;
        }
        if ack.snd_una >= self.window_end && self.acked > 0 {
            let fraction = self.marked as f64 / self.acked as f64;
            self.alpha = (1.0 - cfg.g) * self.alpha + cfg.g * fraction;
            self.acked = 0;
            self.marked = 0;
            self.window_end = ack.snd_nxt;
        }
        if ack.ce && !ack.in_recovery && ack.snd_una >= self.cwr_end {
            window.cwnd = (window.cwnd * (1.0 - self.alpha / 2.0)).max(2.0 * window.mss);
            window.ssthresh = window.cwnd;
            self.cwr_end = ack.snd_nxt;
        }
    }

    fn on_timeout(&mut self, high_sent: u64) {
        self.cwr_end = high_sent;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(newly_acked: u64, ce: bool, snd_una: u64, snd_nxt: u64) -> AckSignal {
        AckSignal {
            newly_acked,
            ce,
            snd_una,
            snd_nxt,
            in_recovery: false,
        }
    }

    /// Alpha follows the marked fraction once per window of data, and a marked ACK cuts the
    /// window by alpha/2 at most once per window.
    #[test]
    fn alpha_tracks_the_marked_fraction_and_cuts_once_per_window() {
        let cfg = DctcpConfig { g: 0.5 };
        let mut d = Dctcp::default();
        let mut w = Window {
            cwnd: 10_000.0,
            ssthresh: f64::INFINITY,
            mss: 1_000.0,
        };
        // First ACK: the first window (ending at byte 0) is over, with no byte marked.
        d.on_ack(&cfg, &ack(1_000, false, 1_000, 10_000), &mut w);
        assert_eq!(d.alpha(), 0.5); // (1 - g) * 1 + g * 0
        assert_eq!(w.cwnd, 10_000.0);
        // Within the window ending at 10,000: a marked ACK cuts once.
        d.on_ack(&cfg, &ack(1_000, true, 2_000, 11_000), &mut w);
        assert_eq!(w.cwnd, 10_000.0 * (1.0 - 0.5 / 2.0));
        assert_eq!(w.ssthresh, w.cwnd);
        let after_cut = w.cwnd;
        d.on_ack(&cfg, &ack(1_000, true, 3_000, 12_000), &mut w);
        assert_eq!(w.cwnd, after_cut, "a second cut within the window");
        // The window ends at 10,000: alpha takes its fraction, 2,000 marked bytes of the
        // 9,000 acknowledged since the last update (seven more unmarked ACKs of 1,000).
        for una in (4_000..=10_000).step_by(1_000) {
            d.on_ack(&cfg, &ack(1_000, false, una, 20_000), &mut w);
        }
        assert_eq!(d.alpha(), 0.5 * 0.5 + 0.5 * (2_000.0 / 9_000.0));
    }

    /// After a timeout no cut comes before the data sent then is acknowledged.
    #[test]
    fn no_cut_before_the_data_of_a_timeout_is_acknowledged() {
        let cfg = DctcpConfig::default();
        let mut d = Dctcp::default();
        let mut w = Window {
            cwnd: 2_000.0,
            ssthresh: 1_000.0,
            mss: 1_000.0,
        };
        d.on_timeout(50_000);
        d.on_ack(&cfg, &ack(1_000, true, 10_000, 51_000), &mut w);
        assert_eq!(w.cwnd, 2_000.0);
        d.on_ack(&cfg, &ack(1_000, true, 50_000, 51_000), &mut w);
        assert_eq!(w.cwnd, 2_000.0, "never below two segments");
        assert_eq!(w.ssthresh, 2_000.0);
    }
}
