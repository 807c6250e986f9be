//! Stage 3: a corrected check's verdict and its reason.

use super::*;

impl Corrected {
    /// Stage 3: the final verdict and reason of a check from its Holm-adjusted p-values.
    pub fn finish(self) -> Check {
        let Corrected { evaluated, holm } = self;
        let Evaluated {
            check: mut c,
            pending,
            alpha,
            ..
        } = evaluated;
        let Some((reg_h, imp_h)) = holm else {
            return c;
        };
        c.p_holm = Some(reg_h);
        c.alpha = Some(alpha);
        let Some(p) = pending else { return c };
        let sig_reg = reg_h < alpha;
        let sig_imp = imp_h < alpha;
        let raw_sig = c.p_value.is_some_and(|pv| pv < alpha);
        if c.kind.is_slo() {
            return super::slo::finish(c, &p, sig_reg, reg_h);
        }
        let (v, why) = if sig_reg && p.beyond_fail {
            (
                Verdict::Fail,
                format!(
                    "regression: beyond the {:.0}% fail tolerance, Holm p = {}",
                    c.fail * 100.0,
                    fmt_p(reg_h)
                ),
            )
        } else if sig_imp && p.improved_beyond_fail {
            (
                Verdict::Improved,
                format!(
                    "improvement beyond {:.0}%, Holm p = {}",
                    c.fail * 100.0,
                    fmt_p(imp_h)
                ),
            )
        } else if raw_sig && p.beyond_warn {
            (Verdict::Warn, format!("significant slowdown beyond the {:.0}% warn tolerance (p = {}), not enough for FAIL", c.warn * 100.0, fmt_p(c.p_value.unwrap_or(1.0))))
        } else if p.pass {
            (
                Verdict::Pass,
                format!(
                    "no change beyond {:.0}% (p = {})",
                    c.fail * 100.0,
                    fmt_p(reg_h)
                ),
            )
        } else if c.ratio.is_some_and(|r| r <= 1.0 + c.warn) {
            // Not settled at this n, but what was measured is no slowdown worth a warning (an
            // improvement never reads WARN); the bound that is missing is said in the reason.
            (
                Verdict::Pass,
                format!(
                    "no slowdown beyond the {:.0}% warn band measured ({:+.1}%), although at this n the bounds cannot yet exclude a change beyond {:.0}%",
                    c.warn * 100.0,
                    (c.ratio.unwrap_or(1.0) - 1.0) * 100.0,
                    c.fail * 100.0
                ),
            )
        } else {
            (Verdict::Warn, p.inconclusive_reason.clone())
        };
        c.verdict = v;
        // Share checks (errors, tail>P90) have no tolerance in percent: they say what was tested.
        let why = match c.kind {
            CheckKind::ErrorRate | CheckKind::StoppedRate | CheckKind::ParseRate => {
                super::errors::reason(c.kind, v, reg_h, imp_h)
            }
            CheckKind::TailExceedance => super::tail::exceedance_reason(v, reg_h).unwrap_or(why),
            CheckKind::AcceptanceRate => super::quality::reason(v, c.fail, reg_h, imp_h),
            _ => why,
        };
        let why = match (c.fail_configured, c.tau, c.tau_nights) {
            (Some(conf), Some(tau), None) => format!(
                "{why} (fail tolerance widened from {:.0}% to {:.1}% because this baseline's run-to-run spread tau is {:.1}%)",
                conf * 100.0,
                c.fail * 100.0,
                tau * 100.0
            ),
            (Some(conf), Some(tau), Some(nights)) => format!(
                "{why} (fail tolerance widened from {:.0}% to {:.1}% because {nights} nights of history move by tau {:.1}% from night to night{})",
                conf * 100.0,
                c.fail * 100.0,
                tau * 100.0,
                if c.fail >= stats::spread::MAX_LEARNED_FACTOR * conf {
                    format!("; a tolerance learned from the nights is at most {}x the configured one", stats::spread::MAX_LEARNED_FACTOR)
                } else {
                    String::new()
                }
            ),
            _ => why,
        };
        if c.reason.is_empty() {
            c.reason = why;
        } else {
            c.reason = format!("{why}; {}", c.reason);
        }
        // Kept for WARN and for a PASS not settled at this n (sequential sampling goes on).
        if v != Verdict::Warn && (v != Verdict::Pass || p.pass) {
            c.samples_needed = None;
        }
        c
    }
}
