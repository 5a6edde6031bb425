//! What every benchmark reports, in one shape, so `scripts/bench.sh` can gather the figures of
//! all bench targets into one table and its short mode can check that none went missing.
//!
//! A figure is always a value next to a baseline measured in the same run on the same machine
//! (DESIGN.md section 13): absolute times on a shared two-core machine say little, ratios say
//! what the server adds. Each call to [`report`] prints one human line and, when
//! `BENCH_REPORT` names a file, appends the figure to it as one JSON line.
//!
//! Short mode (`BENCH_SHORT=1`, used by `scripts/test.sh`) runs every figure on small sizes so
//! the harness cannot rot; it never judges a time. What it does judge is the table's shape:
//! `scripts/bench-table.py --check` (the one list of the rows every run must produce) fails
//! when a row is missing or unregistered, or when a baseline, a value or a ratio is zero,
//! infinite or NaN. JSON has no numbers for the last two, so they are written as the strings
//! `"NaN"`, `"inf"` and `"-inf"`: the check can then say which it was.

use std::io::Write;
use std::time::Duration;

use serde::Serialize;

/// True in the short mode: small sizes, same code paths.
pub fn short() -> bool {
    std::env::var("BENCH_SHORT").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Whether the part `name` of a bench target runs: all do unless `BENCH_ONLY` lists some
/// (comma-separated, e.g. `BENCH_ONLY=idle`), to re-measure one figure after a change without
/// the rest of its target. `scripts/bench.sh` never sets it, so its table is always whole.
pub fn part(name: &str) -> bool {
    match std::env::var("BENCH_ONLY") {
        Ok(only) if !only.trim().is_empty() => only.split(',').any(|p| p.trim() == name),
        _ => true,
    }
}

/// `full` normally, `short` in the short mode: the sizes a figure is measured at.
pub fn sizes<T: Clone>(full: &[T], short_sizes: &[T]) -> Vec<T> {
    if short() {
        short_sizes.to_vec()
    } else {
        full.to_vec()
    }
}

/// A set of measurements with percentiles (nearest rank).
#[derive(Debug, Clone, Default)]
pub struct Dist {
    sorted: Vec<f64>,
}

impl Dist {
    /// From durations, kept in milliseconds.
    pub fn from_durations(values: &[Duration]) -> Self {
        Self::from_values(values.iter().map(|d| d.as_secs_f64() * 1000.0).collect())
    }

    /// From plain numbers in whatever unit the caller reports.
    pub fn from_values(mut values: Vec<f64>) -> Self {
        values.sort_by(f64::total_cmp);
        Self { sorted: values }
    }

    /// The `q` quantile (0.0..=1.0), nearest rank; 0 for an empty set.
    pub fn p(&self, q: f64) -> f64 {
        if self.sorted.is_empty() {
            return 0.0;
        }
        let rank = (q * self.sorted.len() as f64).ceil() as usize;
        self.sorted[rank.clamp(1, self.sorted.len()) - 1]
    }

    /// How many measurements the percentiles come from.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// True without any measurement.
    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }
}

/// What the design asks of a figure.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "kind", content = "limit", rename_all = "snake_case")]
pub enum Target {
    /// value / baseline at most this (times, memory).
    RatioAtMost(f64),
    /// value / baseline at least this (throughput).
    RatioAtLeast(f64),
    /// value minus baseline at most this, in the figure's unit (added latency).
    PlusAtMost(f64),
    /// value at most this, in the figure's unit, whatever the baseline.
    AtMost(f64),
    /// Both: at most `abs` in the unit and at most `ratio` times the baseline.
    AtMostAndRatio { abs: f64, ratio: f64 },
    /// (value − baseline) / `count` at most `each`: what each of `count` things (open
    /// terminals) adds to a total whose baseline is the same total without them.
    PlusEachAtMost { each: f64, count: usize },
}

impl Target {
    fn met(self, baseline: f64, value: f64) -> bool {
        let ratio = ratio(baseline, value);
        match self {
            Target::RatioAtMost(r) => ratio <= r,
            Target::RatioAtLeast(r) => ratio >= r,
            Target::PlusAtMost(d) => value - baseline <= d,
            Target::AtMost(a) => value <= a,
            Target::AtMostAndRatio { abs, ratio: r } => value <= abs && ratio <= r,
            Target::PlusEachAtMost { each, count } => (value - baseline) / count as f64 <= each,
        }
    }

    fn describe(self, unit: &str) -> String {
        match self {
            Target::RatioAtMost(r) => format!("at most {r}x"),
            Target::RatioAtLeast(r) => format!("at least {r}x"),
            Target::PlusAtMost(d) => format!("at most +{d} {unit}"),
            Target::AtMost(a) => format!("at most {a} {unit}"),
            Target::AtMostAndRatio { abs, ratio } => {
                format!("at most {abs} {unit} and {ratio}x")
            }
            Target::PlusEachAtMost { each, count } => {
                format!("at most +{each} {unit} each of {count}")
            }
        }
    }
}

fn ratio(baseline: f64, value: f64) -> f64 {
    if baseline == 0.0 {
        f64::INFINITY
    } else {
        value / baseline
    }
}

/// One measured figure and its baseline.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// Stable name of the figure (`relay-keystroke`, `store-list-sqlite`): the short mode
    /// checks that each expected one appears.
    pub id: String,
    /// Which statistic: `p50`, `p99`, `mean`, `total`...
    pub stat: String,
    /// The size of the work it was measured at (`sessions=1000`), for the cost growth.
    pub size: String,
    /// What the baseline is, in words.
    pub baseline_is: String,
    #[serde(serialize_with = "number")]
    pub baseline: f64,
    #[serde(serialize_with = "number")]
    pub value: f64,
    /// Unit of `baseline` and `value`: `ms`, `MB/s`, `KB`...
    pub unit: String,
    pub target: Option<Target>,
}

impl Figure {
    /// A figure without a target yet; chain [`Figure::target`] and the rest.
    pub fn new(id: &str, stat: &str, unit: &str, baseline: f64, value: f64) -> Self {
        Self {
            id: id.into(),
            stat: stat.into(),
            size: String::new(),
            baseline_is: String::new(),
            baseline,
            value,
            unit: unit.into(),
            target: None,
        }
    }

    /// The design's target for this figure.
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// The work size it was measured at.
    pub fn size(mut self, size: impl Into<String>) -> Self {
        self.size = size.into();
        self
    }

    /// What the baseline is.
    pub fn baseline_is(mut self, what: impl Into<String>) -> Self {
        self.baseline_is = what.into();
        self
    }

    /// value / baseline.
    pub fn ratio(&self) -> f64 {
        ratio(self.baseline, self.value)
    }

    /// Whether the target is met; `None` when the figure has none (growth rows).
    pub fn met(&self) -> Option<bool> {
        self.target.map(|t| t.met(self.baseline, self.value))
    }
}

/// `v` as a JSON number, or as `"NaN"`, `"inf"`, `"-inf"`, which JSON has no number for
/// (serde_json would write `null`, and the check could not tell a NaN from an infinity).
fn number<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else if v.is_nan() {
        s.serialize_str("NaN")
    } else if *v > 0.0 {
        s.serialize_str("inf")
    } else {
        s.serialize_str("-inf")
    }
}

#[derive(Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    figure: &'a Figure,
    #[serde(serialize_with = "number")]
    ratio: f64,
    met: Option<bool>,
    target_text: Option<String>,
    short: bool,
}

/// Prints the figure and appends it to `BENCH_REPORT` (one JSON object a line) when set.
pub fn report(figure: &Figure) {
    let target_text = figure.target.map(|t| t.describe(&figure.unit));
    let verdict = match figure.met() {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "-",
    };
    println!(
        "FIGURE {:<24} {:<5} {:<18} baseline {:>10.3} {u}  value {:>10.3} {u}  ratio {:>7.3}x  target {}  {}",
        figure.id,
        figure.stat,
        figure.size,
        figure.baseline,
        figure.value,
        figure.ratio(),
        target_text.as_deref().unwrap_or("-"),
        verdict,
        u = figure.unit,
    );
    let Ok(path) = std::env::var("BENCH_REPORT") else {
        return;
    };
    let written = json_line(figure, target_text)
        .map_err(std::io::Error::other)
        .and_then(|json| {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            writeln!(file, "{json}")
        });
    if let Err(e) = written {
        eprintln!("could not append the figure to {path}: {e}");
    }
}

/// The figure as the one JSON line `report` appends.
fn json_line(figure: &Figure, target_text: Option<String>) -> serde_json::Result<String> {
    serde_json::to_string(&Line {
        figure,
        ratio: figure.ratio(),
        met: figure.met(),
        target_text,
        short: short(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let d = Dist::from_values((1..=100).map(f64::from).collect());
        assert_eq!(d.p(0.5), 50.0);
        assert_eq!(d.p(0.99), 99.0);
        assert_eq!(d.p(1.0), 100.0);
        assert_eq!(Dist::from_values(vec![7.0]).p(0.99), 7.0);
    }

    #[test]
    fn targets_judge_the_ratio_or_the_difference() {
        let f = Figure::new("x", "p99", "ms", 2.0, 2.9).target(Target::PlusAtMost(1.0));
        assert_eq!(f.met(), Some(true));
        let f = Figure::new("x", "p99", "ms", 2.0, 3.1).target(Target::PlusAtMost(1.0));
        assert_eq!(f.met(), Some(false));
        let f = Figure::new("x", "mean", "MB/s", 100.0, 89.0).target(Target::RatioAtLeast(0.9));
        assert_eq!(f.met(), Some(false));
        let f = Figure::new("x", "p99", "ms", 1.0, 9.0).target(Target::AtMostAndRatio {
            abs: 10.0,
            ratio: 2.0,
        });
        assert_eq!(f.met(), Some(false));
    }

    #[test]
    fn a_target_per_thing_judges_the_added_total_over_the_count() {
        let target = Target::PlusEachAtMost {
            each: 200.0,
            count: 1000,
        };
        let f = Figure::new("x", "total", "KB", 50_000.0, 249_000.0).target(target);
        assert_eq!(f.met(), Some(true));
        let f = Figure::new("x", "total", "KB", 50_000.0, 251_000.0).target(target);
        assert_eq!(f.met(), Some(false));
        assert_eq!(target.describe("KB"), "at most +200 KB each of 1000");
    }

    /// The check in `scripts/bench-table.py` reads these; `null` (serde_json's default for a
    /// non-finite number) would not say which of the three it was.
    #[test]
    fn numbers_json_has_none_for_are_written_by_name() {
        let json = |f: &Figure| -> serde_json::Value {
            serde_json::from_str(&json_line(f, None).unwrap()).unwrap()
        };
        let finite = json(&Figure::new("x", "p99", "ms", 2.0, 3.0));
        assert_eq!(finite["baseline"], 2.0);
        assert_eq!(finite["value"], 3.0);
        assert_eq!(finite["ratio"], 1.5);
        let zero_baseline = json(&Figure::new("x", "p99", "ms", 0.0, 3.0));
        assert_eq!(zero_baseline["baseline"], 0.0);
        assert_eq!(zero_baseline["ratio"], "inf");
        let nan = json(&Figure::new("x", "p99", "ms", f64::NAN, 3.0));
        assert_eq!(nan["baseline"], "NaN");
        assert_eq!(nan["ratio"], "NaN");
        let negative = json(&Figure::new("x", "p99", "ms", 1.0, f64::NEG_INFINITY));
        assert_eq!(negative["value"], "-inf");
        assert_eq!(negative["ratio"], "-inf");
    }
}
