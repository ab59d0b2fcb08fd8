//! Hand-written SVG line charts (no dependencies): series of (x, y) points, axes with ticks,
//! a legend. Enough for the lab's figures.

use std::fmt::Write as _;

const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// Dashed line.
    pub dashed: bool,
}

fn nice_step(range: f64) -> f64 {
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    mag * if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Renders a line chart.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h, ml, mr, mt, mb) = (760.0, 440.0, 70.0, 200.0, 40.0, 50.0);
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.0.is_finite() && p.1.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, 0f64, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        (x0, x1, y1) = (0.0, 1.0, 1.0);
    }
    if x1 - x0 < 1e-9 {
        x1 = x0 + 1.0;
    }
    if y1 - y0 < 1e-9 {
        y1 = y0 + 1.0;
    }
    let ystep = nice_step(y1 - y0);
    let (y0, y1) = ((y0 / ystep).floor() * ystep, (y1 / ystep).ceil() * ystep);
    let xstep = nice_step(x1 - x0);
    let (pw, ph) = (w - ml - mr, h - mt - mb);
    let sx = |x: f64| ml + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| mt + ph - (y - y0) / (y1 - y0) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        ml + pw / 2.0,
        esc(title)
    );
    let mut y = y0;
    while y <= y1 + ystep * 1e-6 {
        let _ = writeln!(
            s,
            r##"<line x1="{ml}" x2="{0}" y1="{1}" y2="{1}" stroke="#ddd"/><text x="{2}" y="{3}" text-anchor="end">{4}</text>"##,
            ml + pw,
            sy(y),
            ml - 6.0,
            sy(y) + 4.0,
            fmt_tick(y)
        );
        y += ystep;
    }
    let mut x = (x0 / xstep).ceil() * xstep;
    while x <= x1 + xstep * 1e-6 {
        let _ = writeln!(
            s,
            r##"<line x1="{0}" x2="{0}" y1="{mt}" y2="{1}" stroke="#eee"/><text x="{0}" y="{2}" text-anchor="middle">{3}</text>"##,
            sx(x),
            mt + ph,
            mt + ph + 16.0,
            fmt_tick(x)
        );
        x += xstep;
    }
    let _ = writeln!(
        s,
        r#"<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        h - 10.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        mt + ph / 2.0,
        esc(y_label)
    );
    for (i, se) in series.iter().enumerate() {
        // Solid and dashed lines count their colours separately, so the k-th dashed series (a
        // p90, say) has the colour of the k-th solid one (its p50).
        let k = series[..i].iter().filter(|o| o.dashed == se.dashed).count();
        let c = COLORS[k % COLORS.len()];
        let path: Vec<String> = se
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let dash = if se.dashed { r#" stroke-dasharray="6,4""# } else { "" };
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#,
            path.join(" ")
        );
        for p in &path {
            let (px, py) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r#"<circle cx="{px}" cy="{py}" r="3" fill="{c}"/>"#);
        }
        let ly = mt + 10.0 + i as f64 * 18.0;
        let _ = writeln!(
            s,
            r#"<line x1="{0}" x2="{1}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{2}" y="{3}">{4}</text>"#,
            ml + pw + 10.0,
            ml + pw + 34.0,
            ml + pw + 40.0,
            ly + 4.0,
            esc(&se.label)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_tick(v: f64) -> String {
    if v.abs() >= 100.0 || v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_series_and_escapes() {
        let s = line_chart(
            "a < b",
            "x",
            "y",
            &[Series {
                label: "one".into(),
                points: vec![(0.0, 1.0), (10.0, 5.0)],
                dashed: false,
            }],
        );
        assert!(
            s.starts_with("<svg")
                && s.contains("a &lt; b")
                && s.contains("<polyline")
                && s.trim_end().ends_with("</svg>")
        );
    }
}
