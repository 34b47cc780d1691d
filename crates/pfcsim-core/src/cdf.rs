//! Flow-size distributions given as cumulative distribution tables.
//!
//! A table lists points `(size_bytes, cumulative_probability)`. Between two points the CDF is
//! read as **piecewise linear**, so flow sizes are uniform inside each segment. Two points with
//! the same size form a point mass (a vertical jump of the CDF), and if the first point has a
//! probability `p0 > 0`, that mass sits at the first size. This is how the HPCC and ConWeave
//! traffic generators and ns-2's interpolating empirical distribution read these tables.
//!
//! The tables pfcsim ships live in `workloads/` at the repository root; their provenance is in
//! `workloads/README.md`.

use std::str::FromStr;

/// A flow-size distribution: a piecewise-linear CDF over flow sizes in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSizeCdf {
    name: String,
    /// `(size_bytes, cumulative_probability)`, starting at probability 0 and ending at exactly
    /// 1, with neither coordinate decreasing. A first point with `p0 > 0` in the source table is
    /// stored as a jump from `(x0, 0)` to `(x0, p0)`.
    points: Vec<(f64, f64)>,
}

/// Why a CDF table was rejected. Line numbers count every line of the text from 1, comments
/// and blank lines included.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum CdfError {
    /// The text has no data lines at all; `line` is the one after its last line, where the
    /// first data line was expected.
    #[error("CDF line {line}: file ends without a data line, expected lines of \"<size_bytes> <cumulative_probability>\"")]
    Empty { line: usize },
    /// A data line is not exactly two numbers.
    #[error(
        "CDF line {line}: \"{text}\" is not two numbers, expected \"<size_bytes> <cumulative_probability>\""
    )]
    NotTwoNumbers { line: usize, text: String },
    /// A size is infinite, NaN or negative.
    #[error("CDF line {line}: size {size} is invalid, expected a finite number of bytes >= 0")]
    BadSize { line: usize, size: f64 },
    /// A cumulative probability is outside `[0, 1]`.
    #[error(
        "CDF line {line}: cumulative probability {prob} is invalid, expected a value in [0, 1]"
    )]
    BadProbability { line: usize, prob: f64 },
    /// A size is smaller than the one on the previous data line.
    #[error(
        "CDF sizes decrease at line {line}: {size} after {previous}, expected sizes that never decrease"
    )]
    SizesDecreasing {
        line: usize,
        size: f64,
        previous: f64,
    },
    /// A cumulative probability is smaller than the one on the previous data line.
    #[error(
        "CDF not monotone at line {line}: cumulative probability {prob} after {previous}, expected probabilities that never decrease"
    )]
    NotMonotone {
        line: usize,
        prob: f64,
        previous: f64,
    },
    /// The last cumulative probability is not 1.
    #[error("CDF line {line}: last cumulative probability is {prob}, expected 1 (within 1e-9)")]
    LastNotOne { line: usize, prob: f64 },
    /// Every size with any probability is 0 bytes: the mean flow size is 0, and a load could
    /// only be offered by infinitely many flows.
    #[error(
        "CDF line {line}: all of the probability is at size 0, so the mean flow size is 0 bytes, expected sizes above 0"
    )]
    ZeroMean { line: usize },
}

/// How far the last cumulative probability may be from 1 (rounding in published tables).
const LAST_PROB_TOLERANCE: f64 = 1e-9;

/// Declares the shipped tables once: their names (sorted) and their embedded text.
macro_rules! builtin_tables {
    ($($name:literal),* $(,)?) => {
        const BUILTIN_NAMES: &[&str] = &[$($name),*];
        const BUILTIN_TEXTS: &[&str] =
            &[$(include_str!(concat!("../../../workloads/", $name, ".cdf"))),*];
    };
}

builtin_tables!(
    "alistorage",
    "cache_follower",
    "cache_follower_homa",
    "data_mining",
    "data_mining_conga",
    "data_mining_xpass",
    "enterprise",
    "google_rpc_2008",
    "google_search_rpc",
    "hadoop",
    "hadoop_fbhdp2015",
    "solar2022",
    "web_search",
    "web_search_pias",
    "web_search_xpass",
    "web_server",
    "web_server_homa",
);

impl FlowSizeCdf {
    /// Reads a CDF table. Lines starting with `#` (after optional whitespace) and blank lines
    /// are skipped; every other line is `<size_bytes> <cumulative_probability>`, separated by
    /// whitespace. `name` is kept for reports only.
    pub fn parse(name: &str, text: &str) -> Result<Self, CdfError> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut last_line = 0;
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let trimmed = raw.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let (size, prob) = parse_point(line, trimmed)?;
            if !size.is_finite() || size < 0.0 {
                return Err(CdfError::BadSize { line, size });
            }
            if !(0.0..=1.0).contains(&prob) {
                return Err(CdfError::BadProbability { line, prob });
            }
            match points.last() {
                None if prob > 0.0 => points.push((size, 0.0)),
                Some(&(previous, _)) if size < previous => {
                    return Err(CdfError::SizesDecreasing {
                        line,
                        size,
                        previous,
                    })
                }
                Some(&(_, previous)) if prob < previous => {
                    return Err(CdfError::NotMonotone {
                        line,
                        prob,
                        previous,
                    })
                }
                _ => {}
            }
            points.push((size, prob));
            last_line = line;
        }
        let last = points.last_mut().ok_or(CdfError::Empty {
            line: text.lines().count() + 1,
        })?;
        if (last.1 - 1.0).abs() > LAST_PROB_TOLERANCE {
            return Err(CdfError::LastNotOne {
                line: last_line,
                prob: last.1,
            });
        }
        last.1 = 1.0;
        let cdf = FlowSizeCdf {
            name: name.to_string(),
            points,
        };
        if cdf.mean() <= 0.0 {
            return Err(CdfError::ZeroMean { line: last_line });
        }
        Ok(cdf)
    }

    /// One of the tables shipped with pfcsim (see [`FlowSizeCdf::builtin_names`]), or `None`
    /// for an unknown name.
    pub fn builtin(name: &str) -> Option<Self> {
        let index = BUILTIN_NAMES.iter().position(|&n| n == name)?;
        let cdf = FlowSizeCdf::parse(name, BUILTIN_TEXTS[index])
            .expect("shipped CDF tables are valid (checked by the tests of this module)");
        Some(cdf)
    }

    /// Names of the shipped tables (the file stems in `workloads/`), sorted.
    pub fn builtin_names() -> &'static [&'static str] {
        BUILTIN_NAMES
    }

    /// The name given to [`FlowSizeCdf::parse`] (for a shipped table, its file stem).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Exact mean flow size in bytes of the piecewise-linear distribution:
    /// `Σ Δp·(x₍ᵢ₋₁₎ + xᵢ)/2` over the segments, which includes `p0·x0` for a leading point mass.
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) * (w[0].0 + w[1].0) / 2.0)
            .sum()
    }

    /// Inverse CDF: the flow size for a uniform random number `u` in `[0, 1)`, interpolated
    /// linearly inside the segment that holds `u`, rounded to the nearest byte and at least 1.
    ///
    /// Precisely, the size returned is the smallest `x` with `F(x) > u`: a `u` equal to the
    /// probability at the bottom of a jump gives the jump's size, one equal to the top gives the
    /// size after it, so each point mass gets exactly its probability. `u < 0` or NaN gives the
    /// smallest size and `u >= 1` the largest.
    pub fn sample(&self, u: f64) -> u64 {
        let points = &self.points;
        // Index of the first point whose cumulative probability exceeds `u`.
        let size = match points.partition_point(|&(_, p)| p <= u) {
            0 => points[0].0,
            i if i == points.len() => points[i - 1].0,
            i => {
                let (x0, p0) = points[i - 1];
                let (x1, p1) = points[i];
                // p0 <= u < p1, so the segment has positive probability.
                x0 + (u - p0) / (p1 - p0) * (x1 - x0)
            }
        };
        to_bytes(size)
    }

    /// The largest size [`FlowSizeCdf::sample`] can return, in bytes.
    pub fn max_size(&self) -> u64 {
        to_bytes(self.points[self.points.len() - 1].0)
    }
}

/// Splits a data line into its two numbers.
fn parse_point(line: usize, text: &str) -> Result<(f64, f64), CdfError> {
    let mut fields = text.split_whitespace().map(f64::from_str);
    match (fields.next(), fields.next(), fields.next()) {
        (Some(Ok(size)), Some(Ok(prob)), None) => Ok((size, prob)),
        _ => Err(CdfError::NotTwoNumbers {
            line,
            text: text.to_string(),
        }),
    }
}

/// Rounds a size to the nearest whole byte, at least 1 (a flow carries data).
fn to_bytes(size: f64) -> u64 {
    (size.round() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cdf(text: &str) -> FlowSizeCdf {
        FlowSizeCdf::parse("test", text).unwrap()
    }

    fn error(text: &str) -> String {
        FlowSizeCdf::parse("test", text).unwrap_err().to_string()
    }

    #[test]
    fn means_match_the_workloads_readme() {
        // The README quotes these means rounded to the byte.
        for (name, mean) in [
            ("alistorage", 40_870.0),
            ("web_search", 1_711_250.0),
            ("data_mining", 7_470_236.0),
        ] {
            let got = FlowSizeCdf::builtin(name).unwrap().mean();
            assert!(
                (got - mean).abs() <= 1.0,
                "{name}: mean {got}, expected {mean}"
            );
        }
    }

    #[test]
    fn grid_sample_mean_matches_mean() {
        const N: u32 = 200_000;
        for &name in FlowSizeCdf::builtin_names() {
            let cdf = FlowSizeCdf::builtin(name).unwrap();
            let total: f64 = (0..N)
                .map(|i| cdf.sample((f64::from(i) + 0.5) / f64::from(N)) as f64)
                .sum();
            let sample_mean = total / f64::from(N);
            let error = (sample_mean / cdf.mean() - 1.0).abs();
            assert!(
                error < 0.005,
                "{name}: grid mean {sample_mean}, mean {}",
                cdf.mean()
            );
        }
    }

    #[test]
    fn every_builtin_parses_and_all_are_listed() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../workloads");
        let mut stems: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "cdf"))
            .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        stems.sort();
        assert_eq!(FlowSizeCdf::builtin_names(), stems);
        for &name in FlowSizeCdf::builtin_names() {
            let cdf = FlowSizeCdf::builtin(name).unwrap();
            assert_eq!(cdf.name(), name);
        }
        assert_eq!(FlowSizeCdf::builtin("no_such_workload"), None);
        assert_eq!(
            FlowSizeCdf::builtin("alistorage").unwrap().max_size(),
            2_000_000
        );
    }

    #[test]
    fn interpolates_within_segments() {
        let c = cdf("# comment\n\n0 0\n100 0.5\n300 1\n");
        assert_eq!(c.sample(0.25), 50);
        assert_eq!(c.sample(0.5), 100);
        assert_eq!(c.sample(0.75), 200);
        assert_eq!(c.mean(), 0.5 * 50.0 + 0.5 * 200.0);
        assert_eq!(c.max_size(), 300);
    }

    #[test]
    fn point_masses_and_jumps() {
        // 20% at 10 B (leading mass), 30% at 100 B (vertical jump), rest uniform on 200..400 B.
        let c = cdf("10 0.2\n100 0.2\n100 0.5\n200 0.5\n400 1");
        assert_eq!(c.sample(0.0), 10);
        assert_eq!(c.sample(0.1999), 10);
        assert_eq!(c.sample(0.2), 100);
        assert_eq!(c.sample(0.4999), 100);
        assert_eq!(c.sample(0.5), 200);
        assert_eq!(c.sample(0.75), 300);
        assert_eq!(c.sample(1.0), 400);
        assert!((c.mean() - (0.2 * 10.0 + 0.3 * 100.0 + 0.5 * 300.0)).abs() < 1e-9);
    }

    #[test]
    fn never_samples_zero_bytes() {
        let c = cdf("0 0\n4000 1");
        assert_eq!(c.sample(0.0), 1);
        assert_eq!(c.sample(-1.0), 1);
        assert_eq!(c.sample(f64::NAN), 1);
        assert_eq!(cdf("0 0.5\n0.4 1").sample(0.5), 1);
    }

    /// A table whose sizes are all 0 has a mean of 0: the Poisson generator's arrival rate
    /// (load over mean size) would be infinite, and it made flows without end.
    #[test]
    fn rejects_a_table_whose_mean_is_zero() {
        let expected = |line| {
            format!("CDF line {line}: all of the probability is at size 0, so the mean flow size is 0 bytes, expected sizes above 0")
        };
        assert_eq!(error("0 1"), expected(1));
        assert_eq!(error("0 0\n0 1\n"), expected(2));
        // Sizes above 0 that no probability reaches do not help.
        assert_eq!(error("0 0\n0 1\n100 1\n"), expected(3));
        assert!(cdf("0 0.999\n1 1").mean() > 0.0);
    }

    /// The error names the line where the first data line was expected, as every error of a
    /// file names a line.
    #[test]
    fn rejects_an_empty_table() {
        let expected = |line| {
            format!("CDF line {line}: file ends without a data line, expected lines of \"<size_bytes> <cumulative_probability>\"")
        };
        assert_eq!(error("# only a comment\n\n"), expected(3));
        assert_eq!(error(""), expected(1));
    }

    #[test]
    fn rejects_a_line_that_is_not_two_numbers() {
        let expected = |text: &str| {
            format!(
                "CDF line 2: \"{text}\" is not two numbers, expected \"<size_bytes> <cumulative_probability>\""
            )
        };
        assert_eq!(error("0 0\n100 1 0.5\n"), expected("100 1 0.5"));
        assert_eq!(error("0 0\n100\n"), expected("100"));
        assert_eq!(error("0 0\n100 one\n"), expected("100 one"));
    }

    #[test]
    fn rejects_a_bad_size() {
        assert_eq!(
            error("0 0\n-5 1\n"),
            "CDF line 2: size -5 is invalid, expected a finite number of bytes >= 0"
        );
        assert_eq!(
            error("0 0\ninf 1\n"),
            "CDF line 2: size inf is invalid, expected a finite number of bytes >= 0"
        );
    }

    #[test]
    fn rejects_a_probability_outside_0_1() {
        assert_eq!(
            error("0 0\n100 100\n"),
            "CDF line 2: cumulative probability 100 is invalid, expected a value in [0, 1]"
        );
    }

    #[test]
    fn rejects_decreasing_sizes() {
        assert_eq!(
            error("0 0\n200 0.5\n100 1\n"),
            "CDF sizes decrease at line 3: 100 after 200, expected sizes that never decrease"
        );
    }

    #[test]
    fn rejects_decreasing_probabilities() {
        assert_eq!(
            error("0 0\n100 0.6\n\n200 0.4\n300 1\n"),
            "CDF not monotone at line 4: cumulative probability 0.4 after 0.6, expected probabilities that never decrease"
        );
    }

    #[test]
    fn rejects_a_last_probability_other_than_1() {
        assert_eq!(
            error("0 0\n100 0.99\n# trailing comment\n"),
            "CDF line 2: last cumulative probability is 0.99, expected 1 (within 1e-9)"
        );
        assert_eq!(cdf("0 0\n100 0.9999999999").sample(0.99999999995), 100);
    }
}
