//! A scheme that exists only in tests, to exercise the plug-in interface end to end: it
//! recirculates every data packet once through its switch's loopback port, and on its first
//! decision sets a timer whose firing sends a message out of the first candidate port to the
//! neighbour there, which answers once on the port the message came in on.

use super::{LbAction, LbCtx};
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

impl Probe {
    pub fn choose(&mut self, ctx: &mut LbCtx, pkt: &Packet, candidates: &[u16]) -> u16 {
        if self.ping_port.is_none() {
            self.ping_port = Some(candidates[0]);
            ctx.actions.push(LbAction::SetTimer {
                at: ctx.now + Time::from_us(1),
                token: TOKEN,
            });
        }
        match ctx.loopback {
            // Came back in at the loopback's far end: now forward it.
            Some(lo) if pkt.ingress_port == lo + 1 => candidates[0],
            Some(lo) => lo,
            None => candidates[0],
        }
    }

    pub fn on_timer(&mut self, ctx: &mut LbCtx, token: u64) {
        assert_eq!(token, TOKEN);
        ctx.actions.push(LbAction::SendControl {
            port: self.ping_port.expect("set with the timer"),
            header: LbHeader {
                path_tag: 0,
                meta: PING,
            },
        });
    }

    pub fn on_control(&mut self, ctx: &mut LbCtx, port: u16, header: &LbHeader) {
        if header.meta == PING {
            ctx.actions.push(LbAction::SendControl {
                port,
                header: LbHeader {
                    path_tag: 0,
                    meta: PONG,
                },
            });
        }
    }
}
