//! The HTML report's nightly series (`check --history`): one panel per gated metric with each
//! night's P50 (x: the night, y: ms), the first night of every change point marked by a vertical
//! line (red: a step up, green: down), and tonight's night highlighted. Inline SVG, as plot.rs.

use super::plot::{AXIS, BASELINE, CANDIDATE};
use plotters::prelude::*;

const UP: RGBColor = RGBColor(0xcf, 0x22, 0x2e);
const DOWN: RGBColor = RGBColor(0x1a, 0x7f, 0x37);

/// A series panel as an SVG document, `w` x `h` px: `values` oldest first (NaN: no value that
/// night), numbered from `first_night`; `steps` the indexes of change points' first nights with
/// their direction (true: up). `None` when no night has a value.
pub fn series_svg(
    title: &str,
    values: &[f64],
    first_night: usize,
    steps: &[(usize, bool)],
    w: u32,
    h: u32,
) -> Option<String> {
    let pts: Vec<(f64, f64)> = values
        .iter()
        .enumerate()
        .filter(|(_, v)| v.is_finite() && **v >= 0.0)
        .map(|(i, v)| ((first_night + i) as f64, *v))
        .collect();
    let last = *pts.last()?;
    let ymax = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    let ymin = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let pad = ((ymax - ymin) * 0.15).max(ymax * 0.02).max(1e-3);
    let (ylo, yhi) = ((ymin - pad).max(0.0), ymax + pad);
    let (xlo, xhi) = (
        first_night as f64 - 0.5,
        (first_night + values.len()) as f64 - 0.5,
    );
    super::plot::svg(w, h, |root| {
        let mut chart = super::plot::framed(root, title, xlo..xhi, ylo..yhi)?;
        super::plot::mesh(&mut chart, 8, "night", "P50 (ms)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .ok()?;
        for &(i, up) in steps.iter().filter(|(i, _)| *i < values.len()) {
            let x = (first_night + i) as f64 - 0.5;
            let colour = if up { UP } else { DOWN };
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(x, ylo), (x, yhi)],
                    colour.stroke_width(2),
                )))
                .ok()?;
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), BASELINE.stroke_width(2)))
            .ok()?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, BASELINE.filled())))
            .ok()?;
        chart
            .draw_series(std::iter::once(
                EmptyElement::at(last)
                    + Circle::new((0, 0), 6, CANDIDATE.filled())
                    + Text::new(
                        "tonight",
                        (-24, -22),
                        ("sans-serif", 12).into_font().color(&AXIS),
                    ),
            ))
            .ok()?;
        Some(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_every_night_the_steps_and_tonight() {
        let v = [5.0, 5.1, f64::NAN, 5.0, 6.0, 6.1, 6.0];
        let svg = series_svg("TPOT P50, night by night", &v, 25, &[(4, true)], 420, 280).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // 6 nights with a value and tonight's larger mark
        assert_eq!(svg.matches("<circle").count(), 7, "{svg}");
        assert!(svg.contains("\ntonight\n</text>"), "{svg}");
        // the step's line in the step-up colour
        assert!(svg.contains("#CF222E"), "{svg}");
        assert!(series_svg("x", &[f64::NAN], 1, &[], 420, 280).is_none());
    }
}
