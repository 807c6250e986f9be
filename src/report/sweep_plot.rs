//! The HTML report's load-sweep plots: for a scenario written with `load.concurrency: [...]`
//! (or `load.rate: [...]`), one panel per metric with latency (y, the P50) against output token
//! throughput (x), one point per level, candidate and baseline as lines: where latency turns up
//! while throughput stops growing is the serving capacity. Inline SVG, as plot.rs.

use super::plot::{AXIS, BASELINE, CANDIDATE};
use plotters::prelude::*;

/// One level of a sweep: its label (`c4`), output tokens/s, and the P50 in ms.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub label: String,
    pub tokens_per_s: f64,
    pub p50_ms: f64,
}

/// Points that can be drawn: finite and non-negative, in the order given.
fn drawable(pts: &[Point]) -> Vec<&Point> {
    pts.iter()
        .filter(|p| {
            p.tokens_per_s.is_finite()
                && p.p50_ms.is_finite()
                && p.tokens_per_s >= 0.0
                && p.p50_ms >= 0.0
        })
        .collect()
}

/// A latency-versus-throughput panel as an SVG document, `w` x `h` px; `None` when neither
/// side has a point to draw. `word` names the reference's line: `baseline`, or `base` in an
/// A/B run ([`super::base_word`]).
pub fn sweep_svg(
    title: &str,
    word: &str,
    baseline: &[Point],
    candidate: &[Point],
    w: u32,
    h: u32,
) -> Option<String> {
    let (b, c) = (drawable(baseline), drawable(candidate));
    let all: Vec<&&Point> = b.iter().chain(&c).collect();
    if all.is_empty() {
        return None;
    }
    let xmax = all.iter().map(|p| p.tokens_per_s).fold(0.0, f64::max);
    let ymax = all.iter().map(|p| p.p50_ms).fold(0.0, f64::max);
    let (xhi, yhi) = ((xmax * 1.12).max(1e-3), (ymax * 1.15).max(1e-3));
    super::plot::svg(w, h, |root| {
        let mut chart = super::plot::framed(root, title, 0.0..xhi, 0.0..yhi)?;
        super::plot::mesh(&mut chart, 6, "output tokens/s", "P50 (ms)")
            .draw()
            .ok()?;
        for (pts, colour, name) in [(&b, BASELINE, word), (&c, CANDIDATE, "candidate")] {
            if pts.is_empty() {
                continue;
            }
            let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.tokens_per_s, p.p50_ms)).collect();
            super::plot::line(&mut chart, xy, colour, name.to_string())?;
            chart
                .draw_series(pts.iter().map(|p| {
                    EmptyElement::at((p.tokens_per_s, p.p50_ms))
                        + Circle::new((0, 0), 3, colour.filled())
                        + Text::new(
                            p.label.clone(),
                            (5, -14),
                            ("sans-serif", 12).into_font().color(&AXIS),
                        )
                }))
                .ok()?;
        }
        super::plot::legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(label: &str, x: f64, y: f64) -> Point {
        Point {
            label: label.into(),
            tokens_per_s: x,
            p50_ms: y,
        }
    }

    #[test]
    fn draws_each_level_labelled_and_skips_what_cannot_be_drawn() {
        let cand = [
            p("c1", 40.0, 30.0),
            p("c4", 120.0, 45.0),
            p("c16", 150.0, 160.0),
        ];
        let base = [
            p("c1", 41.0, 29.0),
            p("c4", f64::NAN, 44.0),
            p("c16", 1e308 * 10.0, 1.0),
        ];
        let svg = sweep_svg(
            "TTFT P50 against throughput",
            "baseline",
            &base,
            &cand,
            420,
            280,
        )
        .unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for l in ["c1", "c4", "c16", "baseline", "candidate"] {
            assert!(svg.contains(&format!("\n{l}\n</text>")), "{l}: {svg}");
        }
        // 3 candidate points and the 1 drawable baseline point
        assert_eq!(svg.matches("<circle").count(), 4, "{svg}");
        assert!(sweep_svg("x", "baseline", &[], &[p("c1", f64::NAN, 1.0)], 420, 280).is_none());
        // an A/B run's reference line is the base, never "baseline" (issue 32 item 3)
        let ab = sweep_svg("x", "base", &base, &cand, 420, 280).unwrap();
        assert!(ab.contains("\nbase\n</text>"), "{ab}");
        assert!(!ab.contains("baseline"), "{ab}");
    }
}
