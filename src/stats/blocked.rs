//! The shift estimate of a blocked A/B design (`perfgate ab` with one server at a time; docs/gate.md
//! "Blocked design"): the arms ran one after the other in blocks (ABBA, ABBAABBA, ABBABAAB, ...), so a
//! machine that gets steadily slower (or faster) between blocks would, in a pooled comparison, look
//! like a change of whichever arm ran later.
//!
//! Method (a stratified shift estimate, i.e. a weighted block-level regression):
//! 1. each block's location y_i on the log scale is its Hodges-Lehmann shift against the pooled
//!    sample of all blocks, y_i = HL(ln block_i, ln pooled). Under a pure shift of ln(latency) this
//!    is exact up to a constant common to every block (HL(X + d, R) = d + HL(X, R)), so contrasts of
//!    the y_i are HL shifts between blocks with the reference's noise cancelled to first order;
//! 2. the y_i are fitted by weighted least squares (weights n_i) to y_i = mu + beta t_i + delta s_i,
//!    t_i the block's midpoint in requests (its place in time), s_i = 1 for a candidate block:
//!    delta is the candidate/base log shift with a linear drift beta removed exactly, whatever the
//!    order. For ABBA with equal blocks it is ((y_B1 + y_B2) - (y_A1 + y_A2)) / 2, the mean of the
//!    two adjacent pairs' shifts (A1,B1) and (B2,A2), whose drift terms are +beta and -beta;
//! 3. its standard error has two parts: within blocks, sum_i a_i^2 c^2 / n_i (a the WLS contrast,
//!    c^2 / n the variance of an HL location, c estimated from the blocks' Moses intervals against
//!    the pooled sample); between blocks, drift that is not linear (a random walk, a step) seen in
//!    the residuals and estimated by the method of moments (DerSimonian & Laird 1986 for a
//!    meta-regression): tau_u^2 = max(0, (Q - df) / tr P), Q the weighted residual sum of squares,
//!    df = blocks - 3, added to every block's variance;
//! 4. the one-sided p-values and the bounds use the normal distribution of delta / se.
//!
//! Pure: numbers in, numbers out. Inputs in any positive unit (ms); NaN values are dropped, values
//! <= 0 clamped as in [`super::shift`].

use super::normal::{normal_quantile, normal_sf};
use super::shift::{hl_log_shift, hodges_lehmann_ratio};

/// One block as the estimate sees it.
#[derive(Debug, Clone, Copy)]
pub struct BlockValues<'a> {
    /// True for a candidate block, false for a base block.
    pub candidate: bool,
    /// The block's successful values (ms), in any order.
    pub values: &'a [f64],
    /// Requests the block sent (successes and failures): its length in time. Values below
    /// `values.len()` are read as `values.len()`.
    pub requests: usize,
}

/// The drift-corrected candidate/base shift of a blocked design, log scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockedShift {
    /// delta: ln(candidate / base) with a linear drift over the blocks removed.
    pub log_shift: f64,
    /// Standard error of `log_shift` (within blocks and between blocks).
    pub se: f64,
    /// The within-block part of the standard error alone.
    pub se_within: f64,
    /// beta: the linear drift per mean block length (log scale; 0.05 = 5 % slower per block).
    pub drift_per_block: f64,
    /// tau_u: log-sd of the block effects beyond the linear drift (0 when the residuals are no
    /// larger than the within-block noise explains).
    pub heterogeneity: f64,
    /// Blocks used (blocks with fewer than 2 values are left out).
    pub blocks: usize,
    /// Residual degrees of freedom, blocks - 3.
    pub df: usize,
}

impl BlockedShift {
    /// exp(delta): 1.1 = the candidate 10 % slower.
    pub fn ratio(&self) -> f64 {
        self.log_shift.exp()
    }

    /// One-sided (1 - `alpha`) lower and upper bounds of the ratio, exp(delta -+ z_{1-alpha} se).
    pub fn bounds(&self, alpha: f64) -> (f64, f64) {
        let z = normal_quantile(1.0 - alpha);
        (
            (self.log_shift - z * self.se).exp(),
            (self.log_shift + z * self.se).exp(),
        )
    }

    /// One-sided p-value of "the candidate is slower" (H0: delta <= 0).
    pub fn p_greater(&self) -> f64 {
        p_above(self.log_shift, self.se)
    }

    /// One-sided p-value of "the candidate is faster" (H0: delta >= 0).
    pub fn p_less(&self) -> f64 {
        p_above(-self.log_shift, self.se)
    }
}

fn p_above(d: f64, se: f64) -> f64 {
    if se > 0.0 && se.is_finite() {
        normal_sf(d / se)
    } else if d > 0.0 {
        0.0
    } else {
        1.0
    }
}

/// The blocks' order as letters, base A and candidate B: "ABBA".
pub fn order_label(candidate: &[bool]) -> String {
    candidate
        .iter()
        .map(|&c| if c { 'B' } else { 'A' })
        .collect()
}

/// The drift-corrected shift (module docs). `None` when fewer than 3 blocks have 2 or more values,
/// when either arm has none, or when the order cannot tell the arms from a linear drift (e.g. AB,
/// or blocks that are all one arm).
pub fn blocked_log_shift(blocks: &[BlockValues]) -> Option<BlockedShift> {
    // Place in time: cumulative requests at each block's midpoint, over every block given (a
    // block left out still took its time).
    let mut t = Vec::with_capacity(blocks.len());
    let mut elapsed = 0.0;
    for b in blocks {
        let len = b.requests.max(b.values.len()) as f64;
        t.push(elapsed + len / 2.0);
        elapsed += len;
    }
    let used: Vec<(usize, &BlockValues)> = blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.values.iter().filter(|x| !x.is_nan()).count() >= 2)
        .collect();
    let k = used.len();
    if k < 3 || !used.iter().any(|(_, b)| b.candidate) || used.iter().all(|(_, b)| b.candidate) {
        return None;
    }
    let pooled: Vec<f64> = used
        .iter()
        .flat_map(|(_, b)| b.values.iter().copied())
        .filter(|x| !x.is_nan())
        .collect();
    let big_n = pooled.len() as f64;
    // Block locations against the pooled sample, and the HL scale c from their 95 % Moses bounds:
    // the bounds of block i vs the pool are y_i -+ 1.96 c sqrt(1/n_i + 1/N).
    let z = normal_quantile(0.975);
    let mut y = Vec::with_capacity(k);
    let mut n = Vec::with_capacity(k);
    let (mut c2_sum, mut c2_w) = (0.0, 0.0);
    for (_, b) in &used {
        let yi = hl_log_shift(b.values, &pooled)?;
        let ni = b.values.iter().filter(|x| !x.is_nan()).count() as f64;
        if let Some(s) = hodges_lehmann_ratio(b.values, &pooled, 0.025) {
            let w = (s.upper.ln() - s.lower.ln()) / 2.0;
            if w.is_finite() && w >= 0.0 {
                let c = w / (z * (1.0 / ni + 1.0 / big_n).sqrt());
                c2_sum += ni * c * c;
                c2_w += ni;
            }
        }
        if !yi.is_finite() {
            return None;
        }
        y.push(yi);
        n.push(ni);
    }
    if c2_w <= 0.0 {
        return None;
    }
    let c2 = c2_sum / c2_w;
    // Design: [1, t (in mean block lengths, centred), s].
    let mean_len = elapsed / blocks.len() as f64;
    let ts: Vec<f64> = used.iter().map(|(i, _)| t[*i] / mean_len).collect();
    let x: Vec<[f64; 3]> = used
        .iter()
        .zip(&ts)
        .map(|((_, b), &ti)| [1.0, ti, if b.candidate { 1.0 } else { 0.0 }])
        .collect();
    // Weighted least squares with weights n_i (within-block variance c^2 / n_i).
    let xtwx = gram(&x, &n);
    let inv = inverse3(&xtwx)?;
    // Row r of (X'WX)^-1 X'W: coefficient r = sum_i row_r[i] y_i. Row 2 is the contrast a of
    // delta, row 1 that of beta.
    let rows: Vec<Vec<f64>> = (0..3)
        .map(|r| {
            x.iter()
                .zip(&n)
                .map(|(xi, wi)| wi * (0..3).map(|c| inv[r][c] * xi[c]).sum::<f64>())
                .collect()
        })
        .collect();
    let coef: Vec<f64> = rows
        .iter()
        .map(|row| row.iter().zip(&y).map(|(ri, yi)| ri * yi).sum())
        .collect();
    let a = &rows[2];
    let (beta, delta) = (coef[1], coef[2]);
    let var_within: f64 = a.iter().zip(&n).map(|(ai, ni)| ai * ai * c2 / ni).sum();
    // Between-block heterogeneity (DerSimonian-Laird for a meta-regression), weights w = n / c^2.
    let df = k - 3;
    let mut tau2 = 0.0;
    if df > 0 && c2 > 0.0 {
        let w: Vec<f64> = n.iter().map(|ni| ni / c2).collect();
        let q: f64 = x
            .iter()
            .zip(&y)
            .zip(&w)
            .map(|((xi, yi), wi)| {
                let fitted: f64 = (0..3).map(|c| coef[c] * xi[c]).sum();
                wi * (yi - fitted).powi(2)
            })
            .sum();
        // tr P = sum w - tr((X'WX)^-1 X'W^2 X).
        let w2: Vec<f64> = w.iter().map(|v| v * v).collect();
        let xtw2x = gram(&x, &w2);
        let inv_w = inverse3(&gram(&x, &w))?;
        let tr: f64 = (0..3)
            .map(|r| (0..3).map(|c| inv_w[r][c] * xtw2x[c][r]).sum::<f64>())
            .sum();
        let tr_p = w.iter().sum::<f64>() - tr;
        if tr_p > 0.0 {
            tau2 = ((q - df as f64) / tr_p).max(0.0);
        }
    }
    let var: f64 = var_within + tau2 * a.iter().map(|ai| ai * ai).sum::<f64>();
    Some(BlockedShift {
        log_shift: delta,
        se: var.sqrt(),
        se_within: var_within.sqrt(),
        drift_per_block: beta,
        heterogeneity: tau2.sqrt(),
        blocks: k,
        df,
    })
}

/// X' W X for rows x_i and weights w_i.
fn gram(x: &[[f64; 3]], w: &[f64]) -> [[f64; 3]; 3] {
    let mut g = [[0.0; 3]; 3];
    for (xi, wi) in x.iter().zip(w) {
        for r in 0..3 {
            for c in 0..3 {
                g[r][c] += wi * xi[r] * xi[c];
            }
        }
    }
    g
}

/// Inverse of a symmetric positive 3x3 matrix by its adjugate; `None` when it is (near) singular:
/// the order cannot separate the arms from a linear drift.
fn inverse3(m: &[[f64; 3]; 3]) -> Option<[[f64; 3]; 3]> {
    let cof = |r: usize, c: usize| {
        let (r1, r2) = ((r + 1) % 3, (r + 2) % 3);
        let (c1, c2) = ((c + 1) % 3, (c + 2) % 3);
        m[r1][c1] * m[r2][c2] - m[r1][c2] * m[r2][c1]
    };
    let det = (0..3).map(|c| m[0][c] * cof(0, c)).sum::<f64>();
    let scale = (0..3).map(|i| m[i][i].abs()).product::<f64>();
    if !(det.is_finite() && scale > 0.0 && det.abs() > 1e-9 * scale) {
        return None;
    }
    let mut inv = [[0.0; 3]; 3];
    for (r, row) in inv.iter_mut().enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v = cof(c, r) / det;
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block: median `m` times a fixed shape (the same in every block: 21 lognormal quantiles,
    /// log-sd 0.1), so block locations differ by ln(m_i / m_j) exactly.
    fn shaped(m: f64) -> Vec<f64> {
        (0..21)
            .map(|i| m * (0.1 * crate::stats::normal_quantile((i as f64 + 0.5) / 21.0)).exp())
            .collect()
    }

    fn est(order: &str, medians: &[f64]) -> BlockedShift {
        let vals: Vec<Vec<f64>> = medians.iter().map(|&m| shaped(m)).collect();
        let blocks: Vec<BlockValues> = order
            .chars()
            .zip(&vals)
            .map(|(ch, v)| BlockValues {
                candidate: ch == 'B',
                values: v,
                requests: v.len(),
            })
            .collect();
        blocked_log_shift(&blocks).unwrap()
    }

    #[test]
    fn abba_by_hand() {
        // Base blocks at ln-locations 0 and 0.15, candidate blocks at 0.05 + 0.1 and 0.10 + 0.1:
        // a drift of 0.05 per block and a true shift of 0.1. By hand, with equal blocks:
        // delta = ((0.15 + 0.20) - (0 + 0.15)) / 2 = 0.10; beta = 0.05; the pairs (A1,B1) and
        // (B2,A2) give 0.15 and 0.05, whose mean is 0.10.
        let l = [0.0, 0.15, 0.20, 0.15];
        let e = est("ABBA", &l.map(|v: f64| 10.0 * v.exp()));
        assert!((e.log_shift - 0.10).abs() < 1e-12, "{e:?}");
        assert!((e.drift_per_block - 0.05).abs() < 1e-12, "{e:?}");
        // The model fits exactly: no heterogeneity beyond the within-block noise.
        assert_eq!(e.heterogeneity, 0.0);
        assert_eq!((e.blocks, e.df), (4, 1));
        // The contrast is (-1/2, 1/2, 1/2, -1/2): var = c^2 * 4 * (1/4) / 21 = c^2 / 21.
        assert!((e.se - e.se_within).abs() < 1e-15);
    }

    #[test]
    fn abab_removes_the_drift_a_pooled_estimate_keeps() {
        // ABAB with a drift of 0.05 per block and no change: base at 0, 0.10, candidate at 0.05,
        // 0.15. The mean candidate minus mean base is 0.05 (what pooling sees); the fit gives 0.
        let e = est("ABAB", &[0.0f64, 0.05, 0.10, 0.15].map(|v| 10.0 * v.exp()));
        assert!(e.log_shift.abs() < 1e-12, "{e:?}");
        let pooled_b: Vec<f64> = [shaped(10.0), shaped(10.0 * 0.10f64.exp())].concat();
        let pooled_c: Vec<f64> =
            [shaped(10.0 * 0.05f64.exp()), shaped(10.0 * 0.15f64.exp())].concat();
        let pooled = hl_log_shift(&pooled_c, &pooled_b).unwrap();
        assert!(pooled > 0.04, "pooled shift {pooled}");
    }

    #[test]
    fn orders_that_cannot_separate_drift_give_none() {
        let v = shaped(10.0);
        let b = |candidate| BlockValues {
            candidate,
            values: &v,
            requests: 21,
        };
        assert!(blocked_log_shift(&[b(false), b(true)]).is_none());
        assert!(blocked_log_shift(&[b(false), b(false), b(false)]).is_none());
        // AAB: three blocks, both arms, 0 residual df: estimable.
        assert!(blocked_log_shift(&[b(false), b(false), b(true)]).is_some());
    }

    #[test]
    fn a_step_between_blocks_shows_as_heterogeneity() {
        // ABBAABBA, no change, the machine 20 % slower from the 6th block on: the residuals are
        // larger than the within-block noise explains, so the between-block term widens se.
        let mut l = [0.0; 8];
        for v in l.iter_mut().skip(5) {
            *v = 1.2f64.ln();
        }
        let e = est("ABBAABBA", &l.map(|v| 10.0 * v.exp()));
        assert!(e.heterogeneity > 0.0, "{e:?}");
        assert!(e.se > e.se_within, "{e:?}");
    }

    #[test]
    fn p_values_and_bounds() {
        let e = BlockedShift {
            log_shift: 0.1,
            se: 0.05,
            se_within: 0.05,
            drift_per_block: 0.0,
            heterogeneity: 0.0,
            blocks: 4,
            df: 1,
        };
        // z = 2: P(Z >= 2) = 0.02275
        assert!((e.p_greater() - 0.022_750_131_948_179_2).abs() < 1e-12);
        assert!((e.p_less() - (1.0 - 0.022_750_131_948_179_2)).abs() < 1e-12);
        let (lo, hi) = e.bounds(0.05);
        assert!((lo - (0.1 - 1.644_853_626_951_472_2 * 0.05f64).exp()).abs() < 1e-12);
        assert!((hi - (0.1 + 1.644_853_626_951_472_2 * 0.05f64).exp()).abs() < 1e-12);
        assert_eq!(order_label(&[false, true, true, false]), "ABBA");
    }
}
