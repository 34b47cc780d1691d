//! Packets and the arena that holds them.
//!
//! A packet lives in the arena from the moment a NIC or switch creates it until it is
//! delivered, dropped or consumed; queues, links and events refer to it by [`PacketId`].
//! Freed slots are reused, so once the number of packets in flight has peaked the arena
//! allocates nothing more.

use crate::cc::IntStack;
use crate::units::Time;

/// Index of a packet in the [`PacketArena`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketId(pub u32);

/// What a packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// RoCEv2 data (the only kind load balancers spread).
    Data,
    /// Cumulative acknowledgement; `seq` is the next byte the receiver expects.
    Ack,
    /// Negative acknowledgement: the receiver saw a gap; `seq` is the next expected byte.
    Nack,
    /// PFC PAUSE for priority `priority`.
    Pause,
    /// PFC RESUME (XON) for priority `priority`.
    Resume,
    /// A message of a load-balancing scheme to a neighbouring switch (warnings, feedback,
    /// probes). Its meaning is the scheme's: it is carried in `lb`, and `layer` says which
    /// scheme of a wrapped pair it is for.
    LbControl,
    /// A message of a load-balancing scheme to the ToR of host `dst`: every switch forwards it
    /// like an ACK (ECMP on its 5-tuple) until the ToR, whose scheme receives it. Carried in
    /// `lb`, for the scheme `layer` names, like [`PacketKind::LbControl`].
    LbRouted,
    /// A host-side scheme's path probe: routed by its path tag, queued and ECN-marked in its
    /// data priority like data, never shown to a switch's scheme.
    Probe,
    /// The destination host's answer to a probe, routed like an ACK; it echoes the probe's
    /// path tag, `meta`, CE mark and send time, and carries in `seq` the time (ps) the probe
    /// reached the destination.
    ProbeReply,
}

impl PacketKind {
    /// Control packets (everything but data) are never load balanced and, with the default
    /// switch setting, ride in the strict-priority control queue.
    pub fn is_control(self) -> bool {
        !matches!(self, PacketKind::Data | PacketKind::Probe)
    }

    /// Packets that switches route by their path tag, count hops for and ECN-mark: data and
    /// host probes.
    #[inline]
    pub fn follows_path_tag(self) -> bool {
        matches!(self, PacketKind::Data | PacketKind::Probe)
    }
}

/// Header fields that load-balancing schemes may read and write. Each scheme documents which
/// of them it uses and how.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LbHeader {
    /// Path chosen by the sender (pinned flows, host-side schemes) or a source switch: byte
    /// `h` (bits `8h..8h+8`) is the choice at the packet's `h`-th switch hop, 0 for "the switch
    /// decides", `c + 1` for the `c`-th equal-cost next hop (modulo their number). Switches
    /// honour it before asking their own scheme. 0 means no choice at any hop.
    pub path_tag: u32,
    /// A scheme-defined field (e.g. a congestion metric and its feedback, packed).
    pub meta: u32,
}

/// Which scheme of the switch a scheme message or timer belongs to, when one scheme wraps
/// another (RLB around DRILL): the wrapper's and the wrapped scheme's never mix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layer {
    /// The scheme that picks paths: an unwrapped scheme, or the one a wrapper wraps.
    #[default]
    Base,
    /// A scheme wrapped around the base scheme.
    Wrapper,
}

/// One packet: 64 bytes, one cache line (checked by a test). A scheme that needs header bytes
/// of its own keeps them beside the packet, in the arena's scheme words
/// ([`PacketArena::with_scheme_words`]), so that no other run carries them.
#[derive(Clone, Copy, Debug)]
pub struct Packet {
    /// Data: first payload byte. ACK/NACK: next byte the receiver expects.
    pub seq: u64,
    /// When the sender put the packet on the wire (data), or echo of it (ACK/NACK).
    pub sent_at: Time,
    /// Flow the packet belongs to (for control packets: the flow acknowledged).
    pub flow: u32,
    pub src: u32,
    pub dst: u32,
    /// Data: running hash of the egress ports the packet took, identifying its path. An
    /// IRN NACK: its SACK ([`Packet::sack_offset`]).
    pub path_sig: u32,
    /// Time this packet has spent in PFC-paused queues so far, in nanoseconds (counted
    /// modulo 2^32 ns, 4.29 s). While the packet waits in an egress queue it holds that time
    /// minus the queue's pause clock ([`crate::port::PortState::enqueue`]).
    pub pfc_wait_ns: u32,
    /// What the packet keeps about the place it is in (see [`Place`]).
    place: Place,
    pub lb: LbHeader,
    /// Switch hops a data packet has taken so far (incremented at every switch egress).
    pub hop: u8,
    pub kind: PacketKind,
    /// PFC priority class, 0..8. Priority 0 is the control class.
    pub priority: u8,
    /// The one-bit fields: [`Packet::ce`], [`Packet::cnp`], [`Packet::layer`].
    flags: u8,
    /// UDP source port (the per-flow entropy ECMP hashes on).
    pub sport: u16,
    pub dport: u16,
    /// Payload bytes (0 for control packets).
    pub payload: u16,
    /// Bytes on the wire, headers included.
    pub wire_bytes: u16,
}

/// Bits of [`Packet`]'s `flags`.
const CE: u8 = 1;
const CNP: u8 = 2;
const WRAPPER_LAYER: u8 = 4;

/// No packet (the end of a wire's or a queue's list of packets, [`Packet::behind_on_wire`],
/// [`Packet::behind_in_queue`]).
pub(crate) const NO_PACKET: u32 = u32::MAX;

/// Two words whose meaning is given by the place the packet is in. Each meaning is written when
/// the packet gets to its place and read only while it is there, so they never mix:
///
/// - from its arrival at a switch to its departure, word 1 is the port it came in on
///   ([`Packet::ingress_port`]);
/// - while it waits in an egress queue (a switch's or a NIC's), word 0 is the packet behind it
///   in that queue ([`Packet::behind_in_queue`]);
/// - on a wire, word 0 is the packet behind it on that wire and word 1 how long after it that
///   one arrives ([`Packet::behind_on_wire`]).
///
/// Sharing them keeps a packet in one cache line and lets each queue's and each wire's FIFO
/// run through its packets (`port::PrioQueue`, `port::Wire`): a dequeue learns which packet
/// is next in the queue, and an arrival which one arrives next on the wire and when, from the
/// line it reads anyway.
#[derive(Clone, Copy, Debug, Default)]
struct Place([u32; 2]);

impl Packet {
    /// A blank packet of `kind`; callers fill in the rest.
    pub fn new(kind: PacketKind) -> Packet {
        Packet {
            seq: 0,
            sent_at: Time::ZERO,
            flow: 0,
            src: 0,
            dst: 0,
            path_sig: 0,
            pfc_wait_ns: 0,
            place: Place::default(),
            lb: LbHeader::default(),
            hop: 0,
            kind,
            priority: 0,
            flags: 0,
            sport: 0,
            dport: 0,
            payload: 0,
            wire_bytes: 0,
        }
    }

    /// The answer of this packet's receiver (an ACK, a NACK, a probe's reply): `kind`, back to
    /// its sender (addresses and ports swapped), same flow and priority, echoing its send
    /// time; `wire_bytes` on the wire. The caller adds what the answer says.
    pub fn reply(&self, kind: PacketKind, wire_bytes: u16) -> Packet {
        let mut reply = Packet::new(kind);
        reply.flow = self.flow;
        reply.src = self.dst;
        reply.dst = self.src;
        reply.sport = self.dport;
        reply.dport = self.sport;
        reply.priority = self.priority;
        reply.sent_at = self.sent_at;
        reply.wire_bytes = wire_bytes;
        reply
    }

    /// An IRN NACK: the packet that triggered it (selectively acknowledged), in packets past
    /// the cumulative ACK `seq`. Carried in `path_sig`, which only data packets use.
    #[inline]
    pub fn sack_offset(&self) -> u32 {
        self.path_sig
    }
    pub fn set_sack_offset(&mut self, offset: u32) {
        self.path_sig = offset;
    }

    /// ECN Congestion Experienced (set by switches on data packets and probes). On an ACK or
    /// NACK: the echo of the acknowledged data packet's mark (ECE); on a probe reply: the
    /// probe's.
    #[inline]
    pub fn ce(&self) -> bool {
        self.flags & CE != 0
    }
    pub fn set_ce(&mut self, ce: bool) {
        self.set_flag(CE, ce);
    }

    /// ACK/NACK: the receiver asks the sender's congestion control to react (DCQCN CNP).
    #[inline]
    pub fn cnp(&self) -> bool {
        self.flags & CNP != 0
    }
    pub fn set_cnp(&mut self, cnp: bool) {
        self.set_flag(CNP, cnp);
    }

    /// Scheme message: the scheme it is for ([`Layer::Base`] for every other packet).
    #[inline]
    pub fn layer(&self) -> Layer {
        if self.flags & WRAPPER_LAYER != 0 {
            Layer::Wrapper
        } else {
            Layer::Base
        }
    }
    pub fn set_layer(&mut self, layer: Layer) {
        self.set_flag(WRAPPER_LAYER, layer == Layer::Wrapper);
    }

    #[inline]
    fn set_flag(&mut self, bit: u8, on: bool) {
        if on {
            self.flags |= bit;
        } else {
            self.flags &= !bit;
        }
    }

    /// At a switch: the local index of the port the packet arrived on.
    #[inline]
    pub fn ingress_port(&self) -> u16 {
        self.place.0[1] as u16
    }
    pub(crate) fn set_ingress_port(&mut self, port: u16) {
        self.place.0[1] = port as u32;
    }

    /// In an egress queue: the packet behind this one ([`NO_PACKET`]: none).
    #[inline]
    pub(crate) fn behind_in_queue(&self) -> u32 {
        self.place.0[0]
    }
    #[inline]
    pub(crate) fn set_behind_in_queue(&mut self, behind: u32) {
        self.place.0[0] = behind;
    }

    /// On a wire: the packet behind this one ([`NO_PACKET`]: none) and how many picoseconds
    /// after this one it arrives (`u32::MAX`: too long to say here, `port::FarArrivals` knows).
    #[inline]
    pub(crate) fn behind_on_wire(&self) -> (u32, u32) {
        (self.place.0[0], self.place.0[1])
    }
    #[inline]
    pub(crate) fn set_behind_on_wire(&mut self, behind: u32, gap: u32) {
        self.place = Place([behind, gap]);
    }
}

/// A packet in the arena, on a cache line of its own: a packet is 64 bytes, and an arena
/// aligned only as its fields are would spread every packet over two lines (two misses, and
/// a prefetch that covers half of it). The alignment is the slot's, not `Packet`'s, so that
/// copies of a packet need no 64-byte-aligned stack frame.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Slot(Packet);

/// Slab of packets with a free list.
#[derive(Default)]
pub struct PacketArena {
    slots: Vec<Slot>,
    /// One scheme word per slot, if the run's scheme carries header bytes of its own
    /// (empty otherwise).
    words: Vec<u64>,
    scheme_words: bool,
    /// When each slot's packet arrived at the switch holding it, if the run's scheme reads
    /// sojourn times (empty otherwise).
    arrivals: Vec<Time>,
    track_arrivals: bool,
    /// Each slot's in-band telemetry, if the run's congestion control reads it (empty
    /// otherwise): written by the sender (cleared), the switches and the receiver (the ACK's
    /// echo), never reset by `alloc`.
    int: Vec<IntStack>,
    carries_int: bool,
    free: Vec<u32>,
    live: usize,
}

impl PacketArena {
    /// An arena whose packets each carry a 64-bit word of the load-balancing scheme's own
    /// header (RLB's piggybacked timestamps), 0 when a packet is created. Without it (the
    /// default) no packet carries one and [`PacketArena::with_word_mut`] must not be called.
    pub fn with_scheme_words(scheme_words: bool) -> PacketArena {
        PacketArena {
            scheme_words,
            ..Default::default()
        }
    }

    /// This arena, keeping for each packet the time it arrived at the switch holding it
    /// ([`PacketArena::set_arrival`]), if `track` (schemes that read sojourn times).
    pub fn with_arrivals(self, track: bool) -> PacketArena {
        PacketArena {
            track_arrivals: track,
            ..self
        }
    }

    #[inline(always)]
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Slot(p);
                if self.scheme_words {
                    self.words[i as usize] = 0;
                }
                PacketId(i)
            }
            None => self.grow(p),
        }
    }

    /// A new slot, once every freed one is in use again (only until the number of packets in
    /// flight peaks: kept out of line so that `alloc` inlines).
    #[cold]
    #[inline(never)]
    fn grow(&mut self, p: Packet) -> PacketId {
        self.slots.push(Slot(p));
        if self.scheme_words {
            self.words.push(0);
        }
        if self.track_arrivals {
            self.arrivals.push(Time::ZERO);
        }
        if self.carries_int {
            self.int.push(IntStack::default());
        }
        PacketId(self.slots.len() as u32 - 1)
    }

    /// This arena, keeping for each packet its in-band telemetry ([`PacketArena::int_mut`]),
    /// if `carry` (HPCC).
    pub fn with_int(self, carry: bool) -> PacketArena {
        PacketArena {
            carries_int: carry,
            ..self
        }
    }

    /// The arena keeps in-band telemetry.
    #[inline]
    pub fn carries_int(&self) -> bool {
        self.carries_int
    }

    /// Packet `id`'s in-band telemetry (only in an arena [`PacketArena::with_int`]).
    #[inline]
    pub fn int(&self, id: PacketId) -> &IntStack {
        &self.int[id.0 as usize]
    }

    /// Packet `id`'s in-band telemetry, to write (only in an arena [`PacketArena::with_int`]).
    #[inline]
    pub fn int_mut(&mut self, id: PacketId) -> &mut IntStack {
        &mut self.int[id.0 as usize]
    }

    /// Records that packet `id` arrived at a switch at `at` (only in an arena
    /// [`PacketArena::with_arrivals`]).
    #[inline]
    pub fn set_arrival(&mut self, id: PacketId, at: Time) {
        self.arrivals[id.0 as usize] = at;
    }

    /// When packet `id` arrived at the switch holding it (only in an arena
    /// [`PacketArena::with_arrivals`]).
    #[inline]
    pub fn arrival(&self, id: PacketId) -> Time {
        self.arrivals[id.0 as usize]
    }

    /// A packet and its scheme word (only in an arena [`PacketArena::with_scheme_words`]).
    #[inline]
    pub fn with_word_mut(&mut self, id: PacketId) -> (&mut Packet, &mut u64) {
        (
            &mut self.slots[id.0 as usize].0,
            &mut self.words[id.0 as usize],
        )
    }

    pub fn free(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id.0);
    }

    #[inline]
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id.0 as usize].0
    }

    #[inline]
    pub fn get_mut(&mut self, id: PacketId) -> &mut Packet {
        &mut self.slots[id.0 as usize].0
    }

    /// Packets currently alive.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Most packets ever alive at once (the arena's capacity in use).
    pub fn high_water(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Packet>(), 64);
    }

    /// The one-bit fields share a byte: each is set and cleared alone.
    #[test]
    fn the_flags_are_independent() {
        let mut p = Packet::new(PacketKind::Ack);
        p.set_ce(true);
        p.set_layer(Layer::Wrapper);
        assert!(p.ce() && !p.cnp() && p.layer() == Layer::Wrapper);
        p.set_cnp(true);
        p.set_ce(false);
        assert!(!p.ce() && p.cnp() && p.layer() == Layer::Wrapper);
        p.set_layer(Layer::Base);
        assert!(!p.ce() && p.cnp() && p.layer() == Layer::Base);
    }

    #[test]
    fn every_packet_of_the_arena_starts_a_cache_line() {
        let mut a = PacketArena::default();
        for _ in 0..100 {
            let id = a.alloc(Packet::new(PacketKind::Data));
            assert_eq!(
                std::ptr::from_ref(a.get(id)) as usize % 64,
                0,
                "packet {}",
                id.0
            );
        }
    }

    #[test]
    fn a_reused_slot_starts_with_a_clear_scheme_word() {
        let mut a = PacketArena::with_scheme_words(true);
        let x = a.alloc(Packet::new(PacketKind::Data));
        *a.with_word_mut(x).1 = 7;
        a.free(x);
        let y = a.alloc(Packet::new(PacketKind::Data));
        assert_eq!(y, x);
        assert_eq!(*a.with_word_mut(y).1, 0);
    }

    #[test]
    fn freed_slots_are_reused() {
        let mut a = PacketArena::default();
        let x = a.alloc(Packet::new(PacketKind::Data));
        let y = a.alloc(Packet::new(PacketKind::Ack));
        a.free(x);
        let z = a.alloc(Packet::new(PacketKind::Nack));
        assert_eq!(z, x);
        assert_eq!(a.get(y).kind, PacketKind::Ack);
        assert_eq!(a.get(z).kind, PacketKind::Nack);
        assert_eq!(a.live(), 2);
        assert_eq!(a.high_water(), 2);
    }
}
