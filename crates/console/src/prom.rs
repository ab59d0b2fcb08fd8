//! A small reader of the Prometheus / OpenMetrics text format, enough for the console: samples
//! with their labels, sums over label filters, rates between two scrapes and histogram
//! quantiles (linear interpolation inside a bucket, as Prometheus' `histogram_quantile`).

/// One sample: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name (with its `_total`, `_bucket`… suffix).
    pub name: String,
    /// Label pairs in the order written.
    pub labels: Vec<(String, String)>,
    /// The value.
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if present.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn matches(&self, filter: &[(&str, &str)]) -> bool {
        filter.iter().all(|(k, v)| self.label(k) == Some(v))
    }
}

/// Every sample of one scrape.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// The samples, in the order of the text.
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// Parses the text; lines that cannot be read are skipped.
    pub fn parse(text: &str) -> Self {
        Self {
            samples: text.lines().filter_map(parse_line).collect(),
        }
    }

    /// The samples named `name` whose labels include `filter`.
    pub fn select<'a>(&'a self, name: &'a str, filter: &'a [(&'a str, &'a str)]) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| s.name == name && s.matches(filter))
    }

    /// Sum of the samples named `name` whose labels include `filter` (0 when none).
    pub fn sum(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.select(name, filter).map(|s| s.value).sum()
    }

    /// Whether any sample named `name` matches `filter`.
    pub fn has(&self, name: &str, filter: &[(&str, &str)]) -> bool {
        self.select(name, filter).next().is_some()
    }

    /// The cumulative buckets `(le, count)` of histogram `base` (its `base_bucket` samples),
    /// summed over the labels not in `filter`, sorted by `le`.
    pub fn buckets(&self, base: &str, filter: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let name = format!("{base}_bucket");
        let mut out: Vec<(f64, f64)> = Vec::new();
        for s in self.select(&name, filter) {
            let Some(le) = s.label("le").and_then(parse_value) else {
                continue;
            };
            match out.iter_mut().find(|(l, _)| *l == le) {
                Some((_, c)) => *c += s.value,
                None => out.push((le, s.value)),
            }
        }
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out
    }
}

/// Per-second increase of a counter from `prev` to `cur` over `secs` (a reset counts from 0).
pub fn rate(prev: f64, cur: f64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    let inc = if cur >= prev { cur - prev } else { cur };
    inc / secs
}

/// `cur - prev` bucket by bucket (for the quantile of one interval); a reset keeps `cur`.
pub fn bucket_delta(prev: &[(f64, f64)], cur: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let total_prev = prev.last().map_or(0.0, |b| b.1);
    let total_cur = cur.last().map_or(0.0, |b| b.1);
    if total_cur < total_prev {
        return cur.to_vec();
    }
    cur.iter()
        .map(|(le, c)| {
            let p = prev.iter().find(|(l, _)| l == le).map_or(0.0, |b| b.1);
            (*le, (c - p).max(0.0))
        })
        .collect()
}

/// The `q` quantile (0..=1) of cumulative buckets, `None` when they are empty. Inside a bucket
/// the value is interpolated linearly; in the `+Inf` bucket it is the highest finite bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(le, count) in buckets {
        if count >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let in_bucket = count - lower.1;
            if in_bucket <= 0.0 {
                return Some(le);
            }
            return Some(lower.0 + (le - lower.0) * (rank - lower.1) / in_bucket);
        }
        lower = (le, count);
    }
    Some(lower.0)
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => s.parse().ok(),
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let (labels, rest) = if let Some(body) = rest.strip_prefix('{') {
        parse_labels(body)?
    } else {
        (Vec::new(), rest)
    };
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Parses `k="v",k2="v2"} rest`; returns the labels and what follows the `}`.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        let after = s[eq + 1..].strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        labels.push((key, value));
        s = &after[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP tlsgate_handshakes Completed
# TYPE tlsgate_handshakes counter
tlsgate_handshakes_total{site="main",outcome="full",version="TLSv1.3"} 7
tlsgate_handshakes_total{site="main",outcome="ticket",version="TLSv1.3"} 3
tlsgate_handshake_duration_seconds_bucket{outcome="full",le="0.001"} 2
tlsgate_handshake_duration_seconds_bucket{outcome="full",le="0.002"} 6
tlsgate_handshake_duration_seconds_bucket{outcome="full",le="+Inf"} 7
tlsgate_handshake_duration_seconds_bucket{outcome="resumed",le="0.001"} 3
tlsgate_handshake_duration_seconds_bucket{outcome="resumed",le="0.002"} 3
tlsgate_handshake_duration_seconds_bucket{outcome="resumed",le="+Inf"} 3
tlsgate_state{name="a \"q\" b"} 1.5
up 1
# EOF
"#;

    #[test]
    fn parses_and_sums() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.sum("tlsgate_handshakes_total", &[]), 10.0);
        assert_eq!(s.sum("tlsgate_handshakes_total", &[("outcome", "full")]), 7.0);
        assert_eq!(s.sum("tlsgate_state", &[("name", "a \"q\" b")]), 1.5);
        assert_eq!(s.sum("up", &[]), 1.0);
        assert!(!s.has("nope", &[]));
    }

    #[test]
    fn quantiles_interpolate() {
        let s = Scrape::parse(TEXT);
        let b = s.buckets("tlsgate_handshake_duration_seconds", &[]);
        assert_eq!(b, vec![(0.001, 5.0), (0.002, 9.0), (f64::INFINITY, 10.0)]);
        let p50 = quantile(&b, 0.5).unwrap();
        assert!((p50 - 0.001).abs() < 1e-9, "{p50}");
        assert_eq!(quantile(&b, 0.99), Some(0.002));
        assert_eq!(quantile(&[], 0.5), None);
        let d = bucket_delta(&b, &[(0.001, 5.0), (0.002, 11.0), (f64::INFINITY, 12.0)]);
        assert_eq!(d, vec![(0.001, 0.0), (0.002, 2.0), (f64::INFINITY, 2.0)]);
        assert_eq!(rate(10.0, 14.0, 2.0), 2.0);
        assert_eq!(rate(10.0, 4.0, 2.0), 2.0);
    }
}
