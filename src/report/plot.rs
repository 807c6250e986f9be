//! The HTML report's plots: empirical CDFs (ECDF) of baseline and candidate drawn over each
//! other, as inline SVG (plotters' SVG backend: no fonts loaded, no bitmaps, deterministic).
//!
//! An ECDF shows, at each latency x, the share of requests that took at most x. Every request
//! is drawn (no binning), the median and the tail are read off the y axis, and a slower candidate
//! is a curve shifted to the right.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Baseline colour (blue), also used by the page's legend.
pub const BASELINE: RGBColor = RGBColor(0x3b, 0x6e, 0xa8);
/// Candidate colour (orange).
pub const CANDIDATE: RGBColor = RGBColor(0xe0, 0x6c, 0x00);
pub(super) const GRID: RGBColor = RGBColor(0xe6, 0xe8, 0xeb);
pub(super) const AXIS: RGBColor = RGBColor(0x55, 0x5b, 0x66);

/// The hex form of a colour, for CSS.
pub fn css(c: RGBColor) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// Largest value drawn, ms (a day; larger values are drawn at the edge).
pub const PLOT_MAX_MS: f64 = 86_400_000.0;

/// The step points of an ECDF from `lo` to `hi`.
fn steps(xs: &[f64], lo: f64, hi: f64) -> Vec<(f64, f64)> {
    let mut s: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    let n = s.len() as f64;
    let mut pts = vec![(lo, 0.0)];
    for (i, &x) in s.iter().enumerate() {
        pts.push((x, i as f64 / n));
        pts.push((x, (i + 1) as f64 / n));
    }
    pts.push((hi, 1.0));
    pts
}

/// A readable tick label for a value in ms.
fn tick(v: f64, span: f64) -> String {
    if span >= 50.0 {
        format!("{v:.0}")
    } else if span >= 5.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A chart of the HTML report's plots: SVG, both axes in f64.
pub(super) type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// An SVG document of `w` x `h` px on white, `draw` painting it; `None` when `draw` fails.
pub(super) fn svg(
    w: u32,
    h: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Option<()>,
) -> Option<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (w, h)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        draw(&root)?;
        root.present().ok()?;
    }
    Some(out)
}

/// The mesh every plot shares (white light lines, grey grid and axis, 13 px labels, 5 ticks on
/// y), with `x_labels` ticks on x and the axes described; the plot adds its formatters and draws it.
pub(super) fn mesh<'a, 'b, 'c>(
    chart: &'c mut Chart<'a, 'b>,
    x_labels: usize,
    x_desc: &str,
    y_desc: &str,
) -> plotters::chart::MeshStyle<'a, 'c, RangedCoordf64, RangedCoordf64, SVGBackend<'b>> {
    let mut m = chart.configure_mesh();
    m.light_line_style(WHITE)
        .bold_line_style(GRID)
        .axis_style(AXIS)
        .x_labels(x_labels)
        .y_labels(5)
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 13).into_font().color(&AXIS))
        .axis_desc_style(("sans-serif", 13).into_font().color(&AXIS));
    m
}

/// A line of `colour` through `pts`, named `name` in the legend.
pub(super) fn line(
    chart: &mut Chart,
    pts: Vec<(f64, f64)>,
    colour: RGBColor,
    name: String,
) -> Option<()> {
    chart
        .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
        .ok()?
        .label(name)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
    Some(())
}

/// The legend of the named lines, at `position`.
pub(super) fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: SeriesLabelPosition,
) -> Option<()> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(GRID)
        .label_font(("sans-serif", 13).into_font().color(&AXIS))
        .draw()
        .ok()
}

/// A chart on `root` in the frame every plot of the HTML report shares: the title, margins and
/// label areas, over `x` and `y`.
pub(super) fn framed<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, plotters::coord::Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Option<Chart<'a, 'b>> {
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 17).into_font().color(&AXIS))
        .margin(8)
        .margin_right(16)
        .x_label_area_size(38)
        .y_label_area_size(58)
        .build_cartesian_2d(x, y)
        .ok()
}

/// An ECDF panel as an SVG document (`<svg ...>...</svg>`), `w` x `h` px, of values in `unit`
/// (the x axis's label: `ms`, `tokens`). `baseline` is `None` when its values are not available;
/// an empty side is not drawn. Returns `None` when there is nothing to draw. The reference
/// side's legend says `word` (`baseline`; `base` in an A/B report, as its page does;
/// [`super::base_word`]).
pub fn ecdf_svg_in(
    title: &str,
    unit: &str,
    word: &str,
    baseline: Option<&[f64]>,
    candidate: &[f64],
    w: u32,
    h: u32,
) -> Option<String> {
    // Loaded files are range-checked, but the plot must end on any input: values are clamped
    // to [0, PLOT_MAX_MS] (a finite 1.7e308 made the axis ticks loop forever).
    let clamp = |xs: &[f64]| -> Vec<f64> {
        xs.iter()
            .copied()
            .filter(|x| x.is_finite())
            .map(|x| x.clamp(0.0, PLOT_MAX_MS))
            .collect()
    };
    let base_c = baseline.map(clamp);
    let cand_c = clamp(candidate);
    let (baseline, candidate) = (base_c.as_deref(), &cand_c[..]);
    let all: Vec<f64> = baseline
        .unwrap_or(&[])
        .iter()
        .chain(candidate)
        .copied()
        .collect();
    if all.is_empty() {
        return None;
    }
    let min = all.iter().copied().fold(f64::INFINITY, f64::min);
    let max = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pad = ((max - min) * 0.06).max(max.abs() * 0.02).max(1e-3);
    let (lo, hi) = ((min - pad).max(0.0), max + pad);
    svg(w, h, |root| {
        let mut chart = framed(root, title, lo..hi, 0.0..1.0)?;
        let span = hi - lo;
        mesh(&mut chart, 6, unit, "requests at most x")
            .x_label_formatter(&|v| tick(*v, span))
            .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
            .draw()
            .ok()?;
        let mut drawn = 0;
        if let Some(b) = baseline.filter(|b| !b.is_empty()) {
            let name = format!("{word} (n={})", b.len());
            line(&mut chart, steps(b, lo, hi), BASELINE, name)?;
            drawn += 1;
        }
        if !candidate.is_empty() {
            let name = format!("candidate (n={})", candidate.len());
            line(&mut chart, steps(candidate, lo, hi), CANDIDATE, name)?;
            drawn += 1;
        }
        if drawn > 0 {
            legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        }
        Some(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecdf_steps_rise_from_zero_to_one_in_order() {
        let p = steps(&[3.0, 1.0, 2.0], 0.0, 4.0);
        assert_eq!(p.first(), Some(&(0.0, 0.0)));
        assert_eq!(p.last(), Some(&(4.0, 1.0)));
        assert!(p.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(p[1], (1.0, 0.0));
        assert_eq!(p[2], (1.0, 1.0 / 3.0));
    }

    #[test]
    fn an_svg_with_both_sides_and_none_without_data() {
        let draw = |title, b: Option<&[f64]>, c: &[f64]| {
            ecdf_svg_in(title, "ms", "baseline", b, c, 400, 260)
        };
        let svg = draw("TTFT", Some(&[40.0, 41.0, 44.0]), &[50.0, 52.0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("baseline (n=3)") && svg.contains("candidate (n=2)"));
        assert!(draw("TTFT", None, &[]).is_none());
        // one value on both sides: still a range to draw on
        assert!(draw("TPOT", Some(&[4.0]), &[4.0]).is_some());
        // a finite value near f64::MAX (a hand-edited baseline): drawn, clamped to a day,
        // instead of looping in the axis ticks for ever (today's code never returned here)
        let svg = draw("E2E", Some(&[1.7e308, 3.0]), &[f64::MAX, -1e308]).unwrap();
        assert!(svg.contains("candidate (n=2)"));
    }
}
