//! Range checks of spec values, with one wording for every "out of range" message:
//! `<key>: <value> is out of range; use <valid range> <note>`.

use std::fmt::Display;
use std::ops::{Bound, RangeBounds};

/// Checks that the value of the spec key `key` (a full key path such as `"nic.payload"`) lies
/// in `range`. If not, the message names the key, the value, the valid range and `note`: what
/// the value counts, a default or an example, e.g. `"(e.g. 64)"` (may be empty).
///
/// `range` is a Rust range (`1..=16`, `0..n`, `1..`) or, for an exclusive lower bound, a pair
/// of [`Bound`]s. Ranges print as in Rust (`1..=16`, `0..4`); a range with an exclusive lower
/// or a missing bound prints as a comparison with the key's last segment (`0 < alpha <= 1`,
/// `rate >= 1Gbps`).
pub fn check_range<T, R>(key: &str, value: T, range: R, note: &str) -> Result<(), String>
where
    T: PartialOrd + Display,
    R: RangeBounds<T>,
{
    if range.contains(&value) {
        return Ok(());
    }
    let name = key.rsplit('.').next().unwrap_or(key);
    let valid = match (range.start_bound(), range.end_bound()) {
        (Bound::Included(lo), Bound::Included(hi)) => format!("{lo}..={hi}"),
        (Bound::Included(lo), Bound::Excluded(hi)) => format!("{lo}..{hi}"),
        (Bound::Excluded(lo), Bound::Included(hi)) => format!("{lo} < {name} <= {hi}"),
        (Bound::Excluded(lo), Bound::Excluded(hi)) => format!("{lo} < {name} < {hi}"),
        (Bound::Included(lo), Bound::Unbounded) => format!("{name} >= {lo}"),
        (Bound::Excluded(lo), Bound::Unbounded) => format!("{name} > {lo}"),
        (Bound::Unbounded, Bound::Included(hi)) => format!("{name} <= {hi}"),
        (Bound::Unbounded, Bound::Excluded(hi)) => format!("{name} < {hi}"),
        (Bound::Unbounded, Bound::Unbounded) => unreachable!("an unbounded range holds all"),
    };
    Err(if note.is_empty() {
        format!("{key}: {value} is out of range; use {valid}")
    } else {
        format!("{key}: {value} is out of range; use {valid} {note}")
    })
}

/// Checks that the time of the spec key `key` is above zero (`T` is the time type; its
/// default is zero, which keeps this module below `units`); the message names the key and gives
/// `example` (e.g. `"100us"`) as a valid value.
pub fn check_positive_time<T: PartialEq + Default>(
    key: &str,
    value: T,
    example: &str,
) -> Result<(), String> {
    if value == T::default() {
        return Err(format!(
            "{key}: must be above 0; give a time such as \"{example}\" (valid: > 0s)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_range;
    use crate::units::Bytes;
    use std::ops::Bound::{Excluded, Included, Unbounded};

    #[test]
    fn values_inside_pass_and_outside_name_key_value_range_and_note() {
        assert_eq!(check_range("lb.d", 2, 1..=16, "samples"), Ok(()));
        assert_eq!(
            check_range("lb.d", 0, 1..=16, "samples (DRILL default 2)"),
            Err("lb.d: 0 is out of range; use 1..=16 samples (DRILL default 2)".into())
        );
        assert_eq!(
            check_range("a.leaf", 4u32, 0..4, ""),
            Err("a.leaf: 4 is out of range; use 0..4".into())
        );
        assert_eq!(
            check_range(
                "nic.payload",
                Bytes(0),
                Bytes(1)..=Bytes(9_000),
                "(e.g. \"1000B\")"
            ),
            Err("nic.payload: 0B is out of range; use 1B..=9KB (e.g. \"1000B\")".into())
        );
    }

    #[test]
    fn exclusive_and_open_bounds_print_as_comparisons() {
        let unit = (Excluded(0.0), Included(1.0));
        assert_eq!(check_range("lb.alpha", 1.0, unit, ""), Ok(()));
        assert_eq!(
            check_range("lb.alpha", 0.0, unit, "(CONGA default 0.2)"),
            Err("lb.alpha: 0 is out of range; use 0 < alpha <= 1 (CONGA default 0.2)".into())
        );
        assert_eq!(
            check_range("x.rate", 0, (Excluded(0), Unbounded), ""),
            Err("x.rate: 0 is out of range; use rate > 0".into())
        );
        assert!(check_range("x.f", f64::NAN, 0.0..=1.0, "").is_err());
    }
}
