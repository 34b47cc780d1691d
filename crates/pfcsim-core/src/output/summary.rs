//! The FCT summary of a run: flow completion time and slowdown statistics per flow-size
//! bucket, as a [`Summary`] of [`SummaryRow`]s and as the text table the CLI prints.

use crate::metrics::table::record;
use crate::metrics::{nearest_rank, ps_to_us, FlowRecord};

/// Flow-size buckets given by ascending boundaries in bytes. With bounds `b0 < b1 < ... < bk`,
/// bucket 0 holds sizes below `b0`, bucket `i` (1..=k) sizes in `[b(i-1), bi)` and bucket
/// `k + 1` sizes of at least `bk`. E.g. `[10_000, 100_000, 1_000_000]` gives buckets `<10KB`,
/// `10KB-100KB`, `100KB-1MB` and `>=1MB` (labels made from the bounds, decimal units).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeBuckets(pub Vec<u64>);

// There is always at least one bucket, so an `is_empty` would be meaningless.
#[allow(clippy::len_without_is_empty)]
impl SizeBuckets {
    /// Label of bucket `i`, e.g. `<10KB`, `10KB-100KB`, `>=10MB` (`all sizes` when there are no
    /// bounds). Panics if `i >= self.len()`.
    pub fn label(&self, i: usize) -> String {
        assert!(i < self.len(), "size bucket {i} out of range");
        let lo = i.checked_sub(1).map(|j| decimal_size(self.0[j]));
        let hi = self.0.get(i).map(|&b| decimal_size(b));
        match (lo, hi) {
            (None, None) => "all sizes".to_string(),
            (None, Some(hi)) => format!("<{hi}"),
            (Some(lo), Some(hi)) => format!("{lo}-{hi}"),
            (Some(lo), None) => format!(">={lo}"),
        }
    }

    /// Index of the bucket that holds a flow of `size` bytes.
    pub fn index(&self, size: u64) -> usize {
        self.0.partition_point(|&bound| bound <= size)
    }

    /// Number of buckets: one more than the number of bounds.
    pub fn len(&self) -> usize {
        self.0.len() + 1
    }
}

impl Default for SizeBuckets {
    /// Bounds 10 KB, 100 KB, 1 MB and 10 MB.
    fn default() -> Self {
        SizeBuckets(vec![10_000, 100_000, 1_000_000, 10_000_000])
    }
}

/// `bytes` in the largest decimal unit it reaches, exactly: `10KB`, `1.5MB`, `999B`.
fn decimal_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "TB"),
        (1_000_000_000, "GB"),
        (1_000_000, "MB"),
        (1_000, "KB"),
    ];
    match UNITS.iter().find(|&&(unit, _)| bytes >= unit) {
        None => format!("{bytes}B"),
        Some(&(unit, suffix)) => {
            let (whole, frac) = (bytes / unit, bytes % unit);
            if frac == 0 {
                format!("{whole}{suffix}")
            } else {
                let digits = unit.ilog10() as usize;
                let frac = format!("{frac:0digits$}");
                format!("{whole}.{}{suffix}", frac.trim_end_matches('0'))
            }
        }
    }
}

record! {
    /// FCT and slowdown statistics of one group of flows.
    ///
    /// `flows` counts every flow of the group, `finished` those that completed. The FCT and
    /// slowdown statistics are over finished flows only (NaN when there are none); quantiles use
    /// [`quantile`]. The three counters (`retransmitted_bytes`, `ooo_arrivals`, `stalled_flows`)
    /// add up over every flow of the group, finished or not.
    #[derive(Clone, Debug, PartialEq)]
    pub struct SummaryRow {
        /// `all` for every flow, otherwise a [`SizeBuckets::label`].
        pub bucket: String,
        /// Flows in the group.
        pub flows: u64,
        /// Flows in the group that finished.
        pub finished: u64,
        /// Mean FCT in microseconds.
        pub fct_avg_us: f64,
        /// Median FCT in microseconds.
        pub fct_p50_us: f64,
        /// 95th-percentile FCT in microseconds.
        pub fct_p95_us: f64,
        /// 99th-percentile FCT in microseconds.
        pub fct_p99_us: f64,
        /// 99.9th-percentile FCT in microseconds.
        pub fct_p999_us: f64,
        /// Mean slowdown (FCT / ideal FCT).
        pub slowdown_avg: f64,
        /// Median slowdown.
        pub slowdown_p50: f64,
        /// 95th-percentile slowdown.
        pub slowdown_p95: f64,
        /// 99th-percentile slowdown.
        pub slowdown_p99: f64,
        /// 99.9th-percentile slowdown.
        pub slowdown_p999: f64,
        /// Sum of the flows' retransmitted payload bytes.
        pub retransmitted_bytes: u64,
        /// Sum of the flows' out-of-order arrivals.
        pub ooo_arrivals: u64,
        /// Flows held up by PFC at least once.
        pub stalled_flows: u64,
    }
}

/// The FCT summary of a run: one [`SummaryRow`] for all flows, then one per size bucket.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// `all` first, then each size bucket in order (empty buckets included).
    pub rows: Vec<SummaryRow>,
}

impl Summary {
    /// Summarizes `flows`, overall and per size bucket (see [`SummaryRow`] for what each
    /// number covers).
    pub fn compute(flows: &[FlowRecord], buckets: &SizeBuckets) -> Summary {
        // Group 0 is every flow, group 1 + i is size bucket i.
        let mut groups = vec![Group::default(); buckets.len() + 1];
        for flow in flows {
            groups[0].add(flow);
            groups[1 + buckets.index(flow.size_bytes)].add(flow);
        }
        let labels =
            std::iter::once("all".to_string()).chain((0..buckets.len()).map(|i| buckets.label(i)));
        let rows = labels
            .zip(groups)
            .map(|(label, group)| group.into_row(label))
            .collect();
        Summary { rows }
    }

    /// The summary as a fixed-width text table for a terminal: bucket, flows, finished flows
    /// (`done`), FCT avg/p50/p99/p99.9 in microseconds and slowdown avg/p50/p99/p99.9. NaN
    /// statistics show as `-`.
    pub fn to_table(&self) -> String {
        const HEADER: [&str; 11] = [
            "bucket", "flows", "done", "avg", "p50", "p99", "p99.9", "avg", "p50", "p99", "p99.9",
        ];
        // Column ranges under the group titles of the first header line.
        const GROUPS: [(&str, std::ops::Range<usize>); 2] =
            [(" FCT (us) ", 3..7), (" slowdown ", 7..11)];
        const SEP: &str = "  ";
        let num = |x: f64| {
            if x.is_nan() {
                "-".to_string()
            } else {
                format!("{x:.2}")
            }
        };
        let cells: Vec<[String; 11]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.bucket.clone(),
                    r.flows.to_string(),
                    r.finished.to_string(),
                    num(r.fct_avg_us),
                    num(r.fct_p50_us),
                    num(r.fct_p99_us),
                    num(r.fct_p999_us),
                    num(r.slowdown_avg),
                    num(r.slowdown_p50),
                    num(r.slowdown_p99),
                    num(r.slowdown_p999),
                ]
            })
            .collect();
        let mut widths = HEADER.map(str::len);
        for row in &cells {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        // Widen the last column of a group if its title does not fit over the group.
        for (title, range) in GROUPS {
            let span: usize =
                widths[range.clone()].iter().sum::<usize>() + SEP.len() * (range.len() - 1);
            widths[range.end - 1] += (title.len() + 2).saturating_sub(span);
        }

        let mut out = String::new();
        let mut groups_line = " ".repeat(widths[..3].iter().sum::<usize>() + SEP.len() * 3);
        for (k, (title, range)) in GROUPS.into_iter().enumerate() {
            if k > 0 {
                groups_line.push_str(SEP);
            }
            let span = widths[range.clone()].iter().sum::<usize>() + SEP.len() * (range.len() - 1);
            groups_line.push_str(&format!("{title:-^span$}"));
        }
        out.push_str(&groups_line);
        out.push('\n');
        let header = HEADER.map(str::to_string);
        for row in std::iter::once(&header).chain(&cells) {
            let line: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            out.push_str(&line.join(SEP));
            out.push('\n');
        }
        out
    }
}

/// What [`Summary::compute`] gathers about one group of flows.
#[derive(Clone, Default)]
struct Group {
    flows: u64,
    fct_us: Vec<f64>,
    slowdown: Vec<f64>,
    retransmitted_bytes: u64,
    ooo_arrivals: u64,
    stalled_flows: u64,
}

impl Group {
    fn add(&mut self, flow: &FlowRecord) {
        self.flows += 1;
        if let Some(fct) = flow.fct_ps {
            self.fct_us.push(ps_to_us(fct));
            self.slowdown.extend(flow.slowdown);
        }
        self.retransmitted_bytes += flow.retransmitted_bytes;
        self.ooo_arrivals += flow.ooo_arrivals;
        self.stalled_flows += u64::from(flow.stalled);
    }

    fn into_row(self, bucket: String) -> SummaryRow {
        let fct = Stats::of(self.fct_us);
        let slowdown = Stats::of(self.slowdown);
        SummaryRow {
            bucket,
            flows: self.flows,
            finished: fct.n,
            fct_avg_us: fct.avg,
            fct_p50_us: fct.p50,
            fct_p95_us: fct.p95,
            fct_p99_us: fct.p99,
            fct_p999_us: fct.p999,
            slowdown_avg: slowdown.avg,
            slowdown_p50: slowdown.p50,
            slowdown_p95: slowdown.p95,
            slowdown_p99: slowdown.p99,
            slowdown_p999: slowdown.p999,
            retransmitted_bytes: self.retransmitted_bytes,
            ooo_arrivals: self.ooo_arrivals,
            stalled_flows: self.stalled_flows,
        }
    }
}

/// Count, mean and quantiles of a sample (NaN statistics when it is empty).
struct Stats {
    n: u64,
    avg: f64,
    p50: f64,
    p95: f64,
    p99: f64,
    p999: f64,
}

impl Stats {
    fn of(mut values: Vec<f64>) -> Stats {
        values.sort_by(f64::total_cmp);
        let avg = if values.is_empty() {
            f64::NAN
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        };
        Stats {
            n: values.len() as u64,
            avg,
            p50: quantile(&values, 0.5),
            p95: quantile(&values, 0.95),
            p99: quantile(&values, 0.99),
            p999: quantile(&values, 0.999),
        }
    }
}

/// The `q`-quantile of `sorted` (ascending, e.g. sorted with `f64::total_cmp`) by the
/// nearest-rank method: the value of 1-based rank `ceil(q * n)` among the `n` values, with the
/// rank kept within `1..=n` (so `q = 0` gives the smallest value and `q = 1` the largest) and
/// `q` clamped to `[0, 1]`. It never interpolates: the result is always one of the values.
/// A `q * n` within floating-point rounding of an integer counts as that integer (0.07 of 100
/// values is rank 7, although `0.07 * 100.0` is 7.000000000000001; [`nearest_rank`]). NaN if
/// `sorted` is empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[nearest_rank(sorted.len(), q) - 1]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const US: u64 = 1_000_000;

    fn flow(id: u32, size: u64, fct_us: Option<u64>, slowdown: f64) -> FlowRecord {
        let start_ps = u64::from(id) * 10 * US;
        FlowRecord {
            flow_id: id,
            source: "poisson",
            src: id,
            dst: id + 100,
            size_bytes: size,
            start_ps,
            finish_ps: fct_us.map(|f| start_ps + f * US),
            fct_ps: fct_us.map(|f| f * US),
            ideal_fct_ps: US,
            slowdown: fct_us.map(|_| slowdown),
            ..FlowRecord::default()
        }
    }

    /// Buckets `<1KB`, `1KB-10KB`, `10KB-1MB`, `>=1MB` and six flows, two unfinished.
    pub(crate) fn sample() -> (Vec<FlowRecord>, SizeBuckets) {
        let mut flows = vec![
            flow(0, 500, Some(2), 1.0),
            flow(1, 800, Some(4), 2.0),
            flow(2, 5_000, Some(10), 1.5),
            flow(3, 5_000, None, 0.0),
            flow(4, 10_000, Some(20), 3.0),
            flow(5, 2_000_000, None, 0.0),
        ];
        flows[0].ooo_arrivals = 1;
        flows[1].stalled = true;
        flows[2].retransmitted_bytes = 100;
        flows[3].retransmitted_bytes = 50;
        flows[3].ooo_arrivals = 3;
        flows[3].stalled = true;
        (flows, SizeBuckets(vec![1_000, 10_000, 1_000_000]))
    }

    #[test]
    fn quantile_is_nearest_rank() {
        assert!(quantile(&[], 0.5).is_nan());
        for q in [0.0, 0.3, 0.5, 0.999, 1.0] {
            assert_eq!(quantile(&[7.0], q), 7.0);
        }
        let four = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&four, 0.0), 1.0);
        assert_eq!(quantile(&four, 0.25), 1.0);
        assert_eq!(quantile(&four, 0.26), 2.0);
        assert_eq!(quantile(&four, 0.5), 2.0);
        assert_eq!(quantile(&four, 0.51), 3.0);
        assert_eq!(quantile(&four, 1.0), 4.0);
        assert_eq!(quantile(&four, 1.5), 4.0);
        assert_eq!(quantile(&four, -1.0), 1.0);
        assert_eq!(quantile(&four, f64::NAN), 1.0);
        let thousand: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&thousand, 0.5), 500.0);
        assert_eq!(quantile(&thousand, 0.99), 990.0);
        assert_eq!(quantile(&thousand, 0.999), 999.0);
        assert_eq!(quantile(&thousand, 0.9991), 1000.0);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        for k in 1..=100 {
            let q = f64::from(k) / 100.0;
            assert_eq!(quantile(&hundred, q), f64::from(k), "q = {q}");
        }
        assert_eq!(quantile(&hundred, 0.07), 7.0);
    }

    #[test]
    fn size_bucket_labels_and_indices() {
        let b = SizeBuckets::default();
        assert_eq!(b.len(), 5);
        let labels: Vec<String> = (0..b.len()).map(|i| b.label(i)).collect();
        assert_eq!(
            labels,
            ["<10KB", "10KB-100KB", "100KB-1MB", "1MB-10MB", ">=10MB"]
        );
        assert_eq!(b.index(0), 0);
        assert_eq!(b.index(9_999), 0);
        assert_eq!(b.index(10_000), 1);
        assert_eq!(b.index(999_999), 2);
        assert_eq!(b.index(1_000_000), 3);
        assert_eq!(b.index(10_000_000), 4);
        assert_eq!(b.index(u64::MAX), 4);

        let odd = SizeBuckets(vec![999, 1_500, 2_000_000_000, 1_250_000_000_000]);
        let labels: Vec<String> = (0..odd.len()).map(|i| odd.label(i)).collect();
        assert_eq!(
            labels,
            ["<999B", "999B-1.5KB", "1.5KB-2GB", "2GB-1.25TB", ">=1.25TB"]
        );
        let none = SizeBuckets(Vec::new());
        assert_eq!(
            (none.len(), none.index(123), none.label(0)),
            (1, 0, "all sizes".into())
        );
    }

    #[test]
    fn summary_per_bucket() {
        let (flows, buckets) = sample();
        let summary = Summary::compute(&flows, &buckets);
        let names: Vec<&str> = summary.rows.iter().map(|r| r.bucket.as_str()).collect();
        assert_eq!(names, ["all", "<1KB", "1KB-10KB", "10KB-1MB", ">=1MB"]);
        let [all, tiny, small, medium, large] = &summary.rows[..] else {
            panic!("expected 5 rows");
        };

        // all: FCTs 2, 4, 10, 20 us; slowdowns 1, 1.5, 2, 3.
        assert_eq!((all.flows, all.finished), (6, 4));
        assert_eq!(all.fct_avg_us, 9.0);
        assert_eq!(all.fct_p50_us, 4.0);
        assert_eq!(
            (all.fct_p95_us, all.fct_p99_us, all.fct_p999_us),
            (20.0, 20.0, 20.0)
        );
        assert_eq!(all.slowdown_avg, 1.875);
        assert_eq!(all.slowdown_p50, 1.5);
        assert_eq!(all.slowdown_p999, 3.0);
        assert_eq!(
            (all.retransmitted_bytes, all.ooo_arrivals, all.stalled_flows),
            (150, 4, 2)
        );

        assert_eq!((tiny.flows, tiny.finished), (2, 2));
        assert_eq!(
            (tiny.fct_avg_us, tiny.fct_p50_us, tiny.fct_p95_us),
            (3.0, 2.0, 4.0)
        );
        assert_eq!(
            (tiny.slowdown_avg, tiny.slowdown_p50, tiny.slowdown_p99),
            (1.5, 1.0, 2.0)
        );
        assert_eq!(
            (
                tiny.retransmitted_bytes,
                tiny.ooo_arrivals,
                tiny.stalled_flows
            ),
            (0, 1, 1)
        );

        // The unfinished flow counts in `flows` and in the counters, not in the statistics.
        assert_eq!((small.flows, small.finished), (2, 1));
        assert_eq!(
            (small.fct_avg_us, small.fct_p50_us, small.fct_p999_us),
            (10.0, 10.0, 10.0)
        );
        assert_eq!(small.slowdown_avg, 1.5);
        assert_eq!(
            (
                small.retransmitted_bytes,
                small.ooo_arrivals,
                small.stalled_flows
            ),
            (150, 3, 1)
        );

        // 10_000 bytes is the lower bound of its bucket.
        assert_eq!(
            (medium.flows, medium.finished, medium.fct_p50_us),
            (1, 1, 20.0)
        );
        assert_eq!(medium.slowdown_p95, 3.0);

        assert_eq!((large.flows, large.finished), (1, 0));
        for x in [
            large.fct_avg_us,
            large.fct_p50_us,
            large.fct_p95_us,
            large.fct_p99_us,
            large.fct_p999_us,
            large.slowdown_avg,
            large.slowdown_p50,
            large.slowdown_p95,
            large.slowdown_p99,
            large.slowdown_p999,
        ] {
            assert!(x.is_nan());
        }

        let empty = Summary::compute(&[], &SizeBuckets::default());
        assert_eq!(empty.rows.len(), 6);
        assert!(empty
            .rows
            .iter()
            .all(|r| r.flows == 0 && r.fct_avg_us.is_nan()));
    }

    #[test]
    fn table_is_aligned() {
        let (flows, buckets) = sample();
        let table = Summary::compute(&flows, &buckets).to_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + 5, "{table}");
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{table}");
        assert!(lines[0].contains("FCT (us)") && lines[0].contains("slowdown"));
        assert!(lines[1].starts_with("bucket") && lines[1].ends_with("p99.9"));
        assert!(lines[2].starts_with("all "));
        assert!(lines[3].ends_with("2.00"), "{table}");
        assert!(
            lines[6].starts_with(">=1MB") && lines[6].ends_with(" -"),
            "{table}"
        );
    }
}
