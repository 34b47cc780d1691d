//! Physical units used throughout the simulator.
//!
//! Inside the simulator every quantity is an integer: time in picoseconds ([`Time`]), data
//! rates in bits per second ([`Rate`]) and sizes in bytes ([`Bytes`]). Human-readable strings
//! such as `"100Gbps"`, `"1us"` or `"9MB"` are parsed only at the spec boundary, through the
//! `FromStr` and serde implementations here. Size prefixes are decimal (1 KB = 1000 B); the
//! binary prefixes `KiB`, `MiB` and `GiB` are accepted too.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::str::FromStr;

/// A point in simulated time or a span of it, in picoseconds.
///
/// `u64` picoseconds cover about 213 days of simulated time, far beyond any experiment. A
/// spec may give times up to [`Time::SPEC_MAX`] only, so that the sums a run makes of them
/// (a flow's start, its delays and timeouts, the stop) stay far from that end: past it the
/// clock would wrap around.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub u64);

impl Time {
    pub const ZERO: Time = Time(0);
    pub const MAX: Time = Time(u64::MAX);
    /// The longest time a spec may give, 1,000,000 s (about 11.6 days), and the latest time
    /// a flow may start: a run's times are sums of a few of these, within the 64-bit clock
    /// ([`Time::MAX`] is 18 times as long).
    pub const SPEC_MAX: Time = Time(1_000_000 * 1_000_000_000_000);

    pub const fn from_ps(ps: u64) -> Time {
        Time(ps)
    }
    pub const fn from_ns(ns: u64) -> Time {
        Time(ns * 1_000)
    }
    pub const fn from_us(us: u64) -> Time {
        Time(us * 1_000_000)
    }
    pub const fn from_ms(ms: u64) -> Time {
        Time(ms * 1_000_000_000)
    }
    pub const fn ps(self) -> u64 {
        self.0
    }
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e12
    }
    pub fn saturating_sub(self, other: Time) -> Time {
        Time(self.0.saturating_sub(other.0))
    }
}

impl Add for Time {
    type Output = Time;
    fn add(self, rhs: Time) -> Time {
        Time(self.0 + rhs.0)
    }
}

impl AddAssign for Time {
    fn add_assign(&mut self, rhs: Time) {
        self.0 += rhs.0;
    }
}

impl Sub for Time {
    type Output = Time;
    fn sub(self, rhs: Time) -> Time {
        Time(self.0 - rhs.0)
    }
}

/// A data rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rate(pub u64);

impl Rate {
    pub const fn gbps(g: u64) -> Rate {
        Rate(g * 1_000_000_000)
    }
    pub const fn mbps(m: u64) -> Rate {
        Rate(m * 1_000_000)
    }
    pub const fn bps(self) -> u64 {
        self.0
    }
    /// Time to serialize `bytes` at this rate, rounded up to the next picosecond.
    #[inline]
    pub fn tx_time(self, bytes: u64) -> Time {
        // Packet-sized amounts fit in u64 arithmetic, which is much cheaper than u128.
        match bytes.checked_mul(8_000_000_000_000) {
            Some(bit_ps) => Time(bit_ps.div_ceil(self.0)),
            None => {
                let bit_ps = bytes as u128 * 8_000_000_000_000;
                Time(bit_ps.div_ceil(self.0 as u128) as u64)
            }
        }
    }
    /// Picoseconds to serialize one byte, if that is a whole number (every rate that divides
    /// 8 Tbit/s: 10, 25, 40, 100, 200, 400 Gbps...): then [`Rate::tx_time`] of `n` bytes is
    /// exactly `n` times it, a multiplication instead of a division.
    pub const fn ps_per_byte(self) -> Option<u64> {
        if self.0 != 0 && 8_000_000_000_000 % self.0 == 0 {
            Some(8_000_000_000_000 / self.0)
        } else {
            None
        }
    }
    /// Bytes carried in `t` at this rate (rounded down).
    pub fn bytes_in(self, t: Time) -> u64 {
        (self.0 as u128 * t.0 as u128 / 8 / 1_000_000_000_000) as u64
    }
}

/// A size in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

/// Why a unit string could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

/// Splits `"12.5Gbps"` into (12.5 as text, "Gbps").
fn split_number(s: &str) -> (&str, &str) {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(s.len());
    (s[..end].trim(), s[end..].trim())
}

/// Why a decimal number times a unit's factor is not a value of 64 bits.
enum Inexact {
    /// Not a non-negative decimal number, or not a whole number of the base unit.
    NotWhole,
    /// Above `u64::MAX` of the base unit.
    TooLarge,
}

/// Parses a non-negative decimal number exactly as a rational `mantissa / 10^scale`.
fn parse_decimal(num: &str) -> Result<(u128, u32), Inexact> {
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() || num == "." {
        return Err(Inexact::NotWhole);
    }
    let (int, frac) = num.split_once('.').unwrap_or((&num, ""));
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(Inexact::NotWhole);
    }
    // Digits only: the parse fails only if the number overflows 128 bits.
    let mantissa: u128 = format!("{int}{frac}")
        .parse()
        .map_err(|_| Inexact::TooLarge)?;
    Ok((mantissa, frac.len() as u32))
}

/// Multiplies the decimal `num` by `factor` and returns an exact integer of 64 bits.
fn scale_exact(num: &str, factor: u128) -> Result<u64, Inexact> {
    let (mantissa, scale) = parse_decimal(num)?;
    let pow = 10u128.checked_pow(scale).ok_or(Inexact::NotWhole)?;
    let product = mantissa.checked_mul(factor).ok_or(Inexact::TooLarge)?;
    if product % pow != 0 {
        return Err(Inexact::NotWhole);
    }
    u64::try_from(product / pow).map_err(|_| Inexact::TooLarge)
}

impl FromStr for Time {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Time, UnitError> {
        let (num, unit) = split_number(s);
        let factor: u128 = match unit {
            "ps" => 1,
            "ns" => 1_000,
            "us" | "µs" => 1_000_000,
            "ms" => 1_000_000_000,
            "s" => 1_000_000_000_000,
            "" => {
                return Err(UnitError(format!(
                    "'{s}' has no time unit; write it with one of ps, ns, us, ms, s (e.g. \"2us\")"
                )))
            }
            other => {
                return Err(UnitError(format!(
                    "'{s}' has unknown time unit '{other}'; use one of ps, ns, us, ms, s (e.g. \"2us\")"
                )))
            }
        };
        let time = match scale_exact(num, factor) {
            Ok(ps) => Time(ps),
            Err(Inexact::NotWhole) => {
                return Err(UnitError(format!(
                "'{s}' is not a non-negative whole number of picoseconds (e.g. \"2us\", \"1.5ms\")"
            )))
            }
            Err(Inexact::TooLarge) => Time(u64::MAX),
        };
        if time > Time::SPEC_MAX {
            return Err(UnitError(format!(
                "'{s}' is longer than {}, the longest time a spec may give (the simulated clock \
                 counts picoseconds in 64 bits)",
                Time::SPEC_MAX
            )));
        }
        Ok(time)
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        let (num, unit) = split_number(s);
        let factor: u128 = match unit {
            "bps" => 1,
            "Kbps" | "kbps" => 1_000,
            "Mbps" => 1_000_000,
            "Gbps" => 1_000_000_000,
            "Tbps" => 1_000_000_000_000,
            "" => {
                return Err(UnitError(format!(
                    "'{s}' has no rate unit; write it with one of bps, Kbps, Mbps, Gbps, Tbps (e.g. \"100Gbps\")"
                )))
            }
            other => {
                return Err(UnitError(format!(
                    "'{s}' has unknown rate unit '{other}'; use one of bps, Kbps, Mbps, Gbps, Tbps (e.g. \"100Gbps\")"
                )))
            }
        };
        match scale_exact(num, factor) {
            Ok(0) => Err(UnitError(format!(
                "'{s}' is a zero rate; a rate must be positive"
            ))),
            Ok(r) => Ok(Rate(r)),
            Err(Inexact::NotWhole) => Err(UnitError(format!(
                "'{s}' is not a positive whole number of bits per second (e.g. \"40Gbps\")"
            ))),
            Err(Inexact::TooLarge) => Err(UnitError(format!(
                "'{s}' is too large: a rate counts bits per second in 64 bits, up to {}",
                Rate(u64::MAX)
            ))),
        }
    }
}

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Bytes, UnitError> {
        let (num, unit) = split_number(s);
        let factor: u128 = match unit {
            "B" => 1,
            "KB" | "kB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            "" => {
                return Err(UnitError(format!(
                    "'{s}' has no size unit; write it with one of B, KB, MB, GB, KiB, MiB, GiB (e.g. \"9MB\")"
                )))
            }
            other => {
                return Err(UnitError(format!(
                    "'{s}' has unknown size unit '{other}'; use one of B, KB, MB, GB, KiB, MiB, GiB (e.g. \"9MB\")"
                )))
            }
        };
        match scale_exact(num, factor) {
            Ok(b) => Ok(Bytes(b)),
            Err(Inexact::NotWhole) => Err(UnitError(format!(
                "'{s}' is not a non-negative whole number of bytes (e.g. \"9MB\", \"1.5KB\")"
            ))),
            Err(Inexact::TooLarge) => Err(UnitError(format!(
                "'{s}' is too large: a size counts bytes in 64 bits, up to {} bytes",
                u64::MAX
            ))),
        }
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ps = self.0;
        for (unit, factor) in [
            ("s", 1_000_000_000_000u64),
            ("ms", 1_000_000_000),
            ("us", 1_000_000),
            ("ns", 1_000),
        ] {
            if ps >= factor && ps.is_multiple_of(factor) {
                return write!(f, "{}{unit}", ps / factor);
            }
        }
        if ps.is_multiple_of(1_000) && ps > 0 {
            return write!(f, "{}ns", ps / 1_000);
        }
        write!(f, "{ps}ps")
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, factor) in [
            ("Tbps", 1_000_000_000_000u64),
            ("Gbps", 1_000_000_000),
            ("Mbps", 1_000_000),
            ("Kbps", 1_000),
        ] {
            if b >= factor && b.is_multiple_of(factor) {
                return write!(f, "{}{unit}", b / factor);
            }
        }
        write!(f, "{b}bps")
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, factor) in [("GB", 1_000_000_000u64), ("MB", 1_000_000), ("KB", 1_000)] {
            if b >= factor && b.is_multiple_of(factor) {
                return write!(f, "{}{unit}", b / factor);
            }
        }
        write!(f, "{b}B")
    }
}

/// A number of bytes in decimal units with one decimal, for messages (`"12.3 GB"`); a
/// float, so that estimates of any size print.
pub fn human_bytes(bytes: f64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < units.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{value:.0} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

macro_rules! serde_via_string {
    ($ty:ty, $expect:literal) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_string())
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl de::Visitor<'_> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        v.parse().map_err(|e: UnitError| E::custom(e.0))
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        Err(E::custom(format!(
                            "{v} has no unit; write it as a string with a unit, {}",
                            $expect
                        )))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        self.visit_i64(v as i64)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        Err(E::custom(format!(
                            "{v} has no unit; write it as a string with a unit, {}",
                            $expect
                        )))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

serde_via_string!(Time, "a time such as \"2us\"");
serde_via_string!(Rate, "a rate such as \"100Gbps\"");
serde_via_string!(Bytes, "a size such as \"9MB\"");

/// `x.ceil() as u64`, without the call to the C library's `ceil` that `f64::ceil` compiles to
/// on the baseline x86-64 target (no SSE4.1 rounding instruction): the same value for every
/// `f64`, including the saturating casts of negative, huge and NaN values.
#[inline]
pub fn ceil_u64(x: f64) -> u64 {
    let t = x as u64;
    if (t as f64) < x {
        t.saturating_add(1)
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_exactly() {
        assert_eq!("2us".parse::<Time>().unwrap(), Time::from_us(2));
        assert_eq!("1.5ms".parse::<Time>().unwrap(), Time(1_500_000_000));
        assert_eq!("1000ns".parse::<Time>().unwrap(), Time::from_us(1));
        assert_eq!("100Gbps".parse::<Rate>().unwrap(), Rate::gbps(100));
        assert_eq!("12.5Gbps".parse::<Rate>().unwrap(), Rate(12_500_000_000));
        assert_eq!("9MB".parse::<Bytes>().unwrap(), Bytes(9_000_000));
        assert_eq!("1MiB".parse::<Bytes>().unwrap(), Bytes(1 << 20));
        assert_eq!("37.5KB".parse::<Bytes>().unwrap(), Bytes(37_500));
    }

    #[test]
    fn rejects_bad_units_with_a_hint() {
        let e = "40".parse::<Rate>().unwrap_err();
        assert!(e.0.contains("no rate unit"), "{e}");
        let e = "0Gbps".parse::<Rate>().unwrap_err();
        assert!(e.0.contains("zero rate"), "{e}");
        let e = "2 parsecs".parse::<Time>().unwrap_err();
        assert!(e.0.contains("unknown time unit 'parsecs'"), "{e}");
        assert!("0.1ps".parse::<Time>().is_err());
        assert!("-1us".parse::<Time>().is_err());
    }

    /// Times near the end of the 64-bit clock made runs wrap around: a flow starting at
    /// 18446744 s made the default stop (its start + 1 s) come before it.
    #[test]
    fn rejects_times_beyond_the_spec_limit() {
        assert_eq!("1000000s".parse::<Time>().unwrap(), Time::SPEC_MAX);
        // The last three overflow 64 bits of picoseconds (or 128 bits as written).
        for s in [
            "1000000001ms",
            "18446744s",
            "18446744073709551615ps",
            "18446744073709551616ps",
            "99999999999999999s",
            "1000000000000000000000000000000000000000s",
        ] {
            assert_eq!(
                s.parse::<Time>().unwrap_err().0,
                format!(
                    "'{s}' is longer than 1000000s, the longest time a spec may give (the \
                     simulated clock counts picoseconds in 64 bits)"
                )
            );
        }
    }

    #[test]
    fn rejects_rates_and_sizes_past_64_bits() {
        assert_eq!(
            "18446745Tbps".parse::<Rate>().unwrap_err().0,
            "'18446745Tbps' is too large: a rate counts bits per second in 64 bits, up to \
             18446744073709551615bps"
        );
        assert_eq!(
            "18446744074GB".parse::<Bytes>().unwrap_err().0,
            "'18446744074GB' is too large: a size counts bytes in 64 bits, up to \
             18446744073709551615 bytes"
        );
        // A fraction of the base unit is still refused as not whole.
        assert!("0.5B"
            .parse::<Bytes>()
            .unwrap_err()
            .0
            .contains("not a non-negative whole number of bytes"));
    }

    #[test]
    fn display_round_trips() {
        for s in ["2us", "1500ns", "3ms", "7ps"] {
            assert_eq!(s.parse::<Time>().unwrap().to_string(), s);
        }
        for s in ["100Gbps", "12500Mbps"] {
            assert_eq!(s.parse::<Rate>().unwrap().to_string(), s);
        }
        assert_eq!("9MB".parse::<Bytes>().unwrap().to_string(), "9MB");
    }

    #[test]
    fn serialization_time_is_exact() {
        // 1048 bytes at 100 Gbps = 83.84 ns.
        assert_eq!(Rate::gbps(100).tx_time(1048), Time(83_840));
        // Rounds up to the next picosecond.
        assert_eq!(Rate(3).tx_time(1), Time(2_666_666_666_667));
        assert_eq!(Rate::gbps(100).bytes_in(Time::from_us(1)), 12_500);
    }

    #[test]
    fn human_bytes_in_decimal_units() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(12_345_678_901.0), "12.3 GB");
        assert_eq!(human_bytes(4e17), "400.0 PB");
    }

    #[test]
    fn ceil_u64_is_ceil_then_cast_for_every_kind_of_value() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let mut values = vec![
            0.0,
            -0.0,
            0.5,
            1.0,
            1.5,
            -0.5,
            -1.0,
            -1.5,
            1e-300,
            4503599627370495.5,
            9007199254740993.0,
            1.8446744073709552e19,
            1e30,
            -1e30,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::EPSILON,
            83_840.000_000_000_01,
        ];
        for _ in 0..100_000 {
            let mantissa: f64 = rng.gen();
            values.push(mantissa * 10f64.powi(rng.gen_range(-5..22)));
            values.push(
                rng.gen_range(0..1u64 << 40) as f64 + [0.0, 0.25, 0.999][rng.gen_range(0..3)],
            );
        }
        for x in values {
            assert_eq!(super::ceil_u64(x), x.ceil() as u64, "{x:e}");
        }
    }
}
