//! A scheme that exists only in tests, to exercise the plug-in interface end to end: it
//! recirculates every data packet once through its switch's loopback port, and on its first
//! decision sets a timer whose firing sends a message out of the first candidate port to the
//! neighbour there, which answers once on the port the message came in on.

use super::{Capabilities, LbCtx, LbFabric, SchemeConfig, SwitchScheme};
use crate::packet::{LbHeader, Packet};
use crate::units::Time;
use serde::{Deserialize, Serialize};

/// No parameters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {}

/// Per-switch state.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Where the timer's message goes, once the first decision has set the timer.
    ping_port: Option<u16>,
}

const TOKEN: u64 = 7;
const PING: u32 = 42;
const PONG: u32 = 43;

impl SchemeConfig for ProbeConfig {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            loopback: true,
            ..Capabilities::default()
        }
    }

    fn switch_scheme(&self, _fabric: &LbFabric) -> Box<dyn SwitchScheme> {
        Box::new(Probe::default())
    }
}

impl SwitchScheme for Probe {
    fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        if self.ping_port.is_none() {
            self.ping_port = Some(candidates[0]);
            ctx.set_timer(ctx.now + Time::from_us(1), TOKEN);
        }
        match ctx.loopback {
            // Came back in at the loopback's far end: now forward it.
            Some(lo) if pkt.ingress_port() == lo + 1 => candidates[0],
            Some(lo) => lo,
            None => candidates[0],
        }
    }

    fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        assert_eq!(token, TOKEN);
        ctx.send_control(
            self.ping_port.expect("set with the timer"),
            LbHeader {
                path_tag: 0,
                meta: PING,
            },
        );
    }

    fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        if header.meta == PING {
            ctx.send_control(
                port,
                LbHeader {
                    path_tag: 0,
                    meta: PONG,
                },
            );
        }
    }
}
