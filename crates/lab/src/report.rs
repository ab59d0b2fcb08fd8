//! Result files: percentiles of a sample, CSV and JSON writers, the output directory.

use crate::measure::percentile;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// Count and spread of a sample (ms).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Pcts {
    /// Samples.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Largest.
    pub max: f64,
}

impl Pcts {
    /// Of these values (NaNs ignored).
    pub fn of(v: &[f64]) -> Self {
        let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        Self {
            n: v.len(),
            min: percentile(&v, 0.0),
            p50: percentile(&v, 50.0),
            p75: percentile(&v, 75.0),
            p90: percentile(&v, 90.0),
            max: percentile(&v, 100.0),
        }
    }

    /// `(p50, p75, p90)`.
    pub fn triple(&self) -> [f64; 3] {
        [self.p50, self.p75, self.p90]
    }
}

/// Percent increase of `b` over `a`.
pub fn pct_increase(a: f64, b: f64) -> f64 {
    (b - a) / a * 100.0
}

/// Writes rows (serializable structs of scalars) as CSV with a header from the first row.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> anyhow::Result<()> {
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let v = serde_json::to_value(row)?;
        let obj = v
            .as_object()
            .ok_or_else(|| anyhow::anyhow!("CSV rows must be structs"))?;
        if i == 0 {
            let _ = writeln!(out, "{}", obj.keys().cloned().collect::<Vec<_>>().join(","));
        }
        let cells: Vec<String> = obj
            .values()
            .map(|x| match x {
                serde_json::Value::String(s) if s.contains([',', '"']) => format!("\"{}\"", s.replace('"', "\"\"")),
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                other => other.to_string(),
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join(","));
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// Writes a value as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)? + "\n")?;
    Ok(())
}

/// A number for a Markdown table.
pub fn f1(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}")
    } else {
        "–".into()
    }
}
