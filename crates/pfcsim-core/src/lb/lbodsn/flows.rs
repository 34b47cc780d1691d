//! Congested-flow identification at the destination ToR (section 3.2, eq. 3).
//!
//! A hashed table counts the bytes of each (ingress port, priority, flow) in the buffer: added
//! when a packet arrives from a spine, removed when it leaves towards the host. Each
//! (port, priority) keeps the list of its slots holding bytes, so `fNum` is that list's
//! length. Two flows hashing to one slot share it (counted as the first one), as in a
//! hardware register array. `F_cc = Q >> ⌈log2(fNum)⌉` (eq. 3 with `Q_T[qInd]` read as a
//! weight of 1); the flows holding more than `F_cc` bytes are congested, the largest first.
//! With `f_cc = false` (the ablation) every flow with bytes in the queue is congested.

use crate::engine::mix64;
use crate::port::N_PRIO;

/// One slot: a flow's bytes in one (ingress port, priority), with where to reach its
/// source ToR.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub key: u32,
    pub pq: u32,
    pub bytes: u64,
    /// Position in its (port, priority)'s active list.
    pos: u32,
    /// The flow's source host and ports (an FCN is routed to the host's ToR) and the
    /// source ToR's uplink its latest packet took.
    pub src: u32,
    pub sport: u16,
    pub dport: u16,
    pub src_tor: u32,
    pub up: u8,
}

/// What a packet tells the table about its flow.
#[derive(Clone, Copy, Debug)]
pub struct FlowId {
    pub key: u32,
    pub src: u32,
    pub sport: u16,
    pub dport: u16,
    pub src_tor: u32,
    pub up: u8,
}

/// The per-(port, priority, flow) byte counts of one ToR.
#[derive(Clone, Debug, Default)]
pub struct FlowBytes {
    slots: Vec<Slot>,
    /// `active[port * N_PRIO + prio]`: slots holding bytes.
    active: Vec<Vec<u32>>,
}

impl FlowBytes {
    /// A table of `size` slots for a switch of `ports` ports (empty if `size` is 0).
    pub fn new(size: usize, ports: usize) -> FlowBytes {
        FlowBytes {
            slots: vec![Slot::default(); size],
            active: vec![Vec::new(); if size > 0 { ports * N_PRIO } else { 0 }],
        }
    }

    #[inline]
    fn slot_of(&self, key: u32, pq: u32) -> usize {
        (mix64(key as u64 ^ (pq as u64) << 40) % self.slots.len() as u64) as usize
    }

    /// A packet of `bytes` of flow `id` arrived on ingress `port` at `prio`.
    pub fn add(&mut self, port: u16, prio: u8, id: FlowId, bytes: u64) {
        if self.slots.is_empty() {
            return;
        }
        let pq = port as u32 * N_PRIO as u32 + prio as u32;
        let i = self.slot_of(id.key, pq);
        let s = &mut self.slots[i];
        if s.bytes == 0 {
            let list = &mut self.active[pq as usize];
            *s = Slot {
                key: id.key,
                pq,
                bytes: 0,
                pos: list.len() as u32,
                src: id.src,
                sport: id.sport,
                dport: id.dport,
                src_tor: id.src_tor,
                up: id.up,
            };
            list.push(i as u32);
        } else if s.key == id.key && s.pq == pq {
            s.up = id.up;
        }
        s.bytes += bytes;
    }

    /// A packet of `bytes` of the flow with `key`, counted on (`port`, `prio`), left.
    pub fn remove(&mut self, port: u16, prio: u8, key: u32, bytes: u64) {
        if self.slots.is_empty() {
            return;
        }
        let pq = port as u32 * N_PRIO as u32 + prio as u32;
        let i = self.slot_of(key, pq);
        let s = &mut self.slots[i];
        if s.bytes == 0 {
            return;
        }
        s.bytes = s.bytes.saturating_sub(bytes);
        if s.bytes == 0 {
            let (pq, pos) = (s.pq as usize, s.pos as usize);
            let list = &mut self.active[pq];
            list.swap_remove(pos);
            if let Some(&moved) = list.get(pos) {
                self.slots[moved as usize].pos = pos as u32;
            }
        }
    }

    /// `fNum`: flows with bytes in (`port`, `prio`).
    #[cfg(test)]
    pub fn flows(&self, port: u16, prio: u8) -> usize {
        self.active
            .get(port as usize * N_PRIO + prio as usize)
            .map_or(0, Vec::len)
    }

    /// The bytes of flow `key` in (`port`, `prio`) (0 if absent).
    #[cfg(test)]
    pub fn bytes(&self, port: u16, prio: u8, key: u32) -> u64 {
        if self.slots.is_empty() {
            return 0;
        }
        let pq = port as u32 * N_PRIO as u32 + prio as u32;
        let s = &self.slots[self.slot_of(key, pq)];
        if s.key == key && s.pq == pq {
            s.bytes
        } else {
            0
        }
    }

    /// Eq. 3: the congested flows of (`port`, `prio`) when its queue holds `q` bytes, those
    /// with more than `F_cc = q >> ⌈log2(fNum)⌉` bytes (with `use_f_cc`; without it, every
    /// flow with bytes), largest first (ties by slot), at most `max`.
    pub fn congested(&self, port: u16, prio: u8, q: u64, use_f_cc: bool, max: usize) -> Vec<Slot> {
        let Some(list) = self.active.get(port as usize * N_PRIO + prio as usize) else {
            return Vec::new();
        };
        let f_cc = if use_f_cc { f_cc(q, list.len()) } else { 0 };
        let mut out: Vec<(u32, Slot)> = list
            .iter()
            .map(|&i| (i, self.slots[i as usize]))
            .filter(|(_, s)| s.bytes > f_cc)
            .collect();
        out.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes).then(a.0.cmp(&b.0)));
        out.into_iter().take(max).map(|(_, s)| s).collect()
    }
}

/// `F_cc = q >> ⌈log2(f_num)⌉` (eq. 3, every flow of weight 1).
#[inline]
pub fn f_cc(q: u64, f_num: usize) -> u64 {
    if f_num <= 1 {
        return q;
    }
    let shift = usize::BITS - (f_num - 1).leading_zeros();
    q >> shift.min(63)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(key: u32) -> FlowId {
        FlowId {
            key,
            src: key,
            sport: 1,
            dport: 2,
            src_tor: 0,
            up: 1,
        }
    }

    #[test]
    fn f_cc_is_q_over_the_next_power_of_two_of_fnum() {
        assert_eq!(f_cc(1024, 1), 1024);
        assert_eq!(f_cc(1024, 2), 512);
        assert_eq!(f_cc(1024, 3), 256);
        assert_eq!(f_cc(1024, 4), 256);
        assert_eq!(f_cc(1024, 5), 128);
    }

    /// Of two flows in one ingress queue, only the one holding 90% of its bytes is congested
    /// even when an FCN may name two; without `F_cc` (the ablation) both are.
    #[test]
    fn only_the_flow_with_most_of_the_queue_is_congested() {
        let mut t = FlowBytes::new(1024, 4);
        for _ in 0..9 {
            t.add(2, 3, id(7), 1_000);
        }
        t.add(2, 3, id(9), 1_000);
        assert_eq!(t.flows(2, 3), 2);
        let c = t.congested(2, 3, 10_000, true, 2);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].key, c[0].bytes), (7, 9_000));
        // Without F_cc (the ablation) both are, the largest first.
        let c = t.congested(2, 3, 10_000, false, 2);
        let named: Vec<_> = c.iter().map(|s| (s.key, s.bytes)).collect();
        assert_eq!(named, [(7, 9_000), (9, 1_000)]);
        // Draining: the flow leaves the list when its bytes are gone.
        t.remove(2, 3, 9, 1_000);
        assert_eq!(t.flows(2, 3), 1);
        assert_eq!(t.bytes(2, 3, 7), 9_000);
        for _ in 0..9 {
            t.remove(2, 3, 7, 1_000);
        }
        assert_eq!(t.flows(2, 3), 0);
        assert!(t.congested(2, 3, 0, false, 2).is_empty());
    }
}
