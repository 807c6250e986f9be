//! The overall verdict of a check and its exit code, decided in one place from every scenario's
//! status and checks (docs/design.md, "Exit codes"). `check`, `confirm`, `perfgate report` and
//! the merge of shards all call [`decide`]; nothing else sets a verdict or an exit code.

use crate::exit;
use crate::gate::Verdict;
use crate::results::{ScenarioResult, Status};
use serde::{Deserialize, Serialize};

/// The overall verdict, serialised as in the results JSON (`"FAIL"`, `"NO_BASELINE"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Overall {
    /// Every gated check PASS (or INFO).
    Pass,
    /// At least one IMPROVED, no WARN or FAIL.
    Improved,
    /// At least one WARN, no FAIL.
    Warn,
    /// A scenario without a usable baseline (missing, stale or invalid).
    NoBaseline,
    /// At least one gated check FAIL.
    Fail,
    /// A scenario could not be measured (exit 3) or is misconfigured (exit 2).
    Error,
    /// Ctrl-C / SIGTERM: partial results.
    Interrupted,
}

impl Overall {
    /// `FAIL`, `NO_BASELINE`, ... as in the results JSON and the action's `verdict` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Overall::Pass => "PASS",
            Overall::Improved => "IMPROVED",
            Overall::Warn => "WARN",
            Overall::NoBaseline => "NO_BASELINE",
            Overall::Fail => "FAIL",
            Overall::Error => "ERROR",
            Overall::Interrupted => "INTERRUPTED",
        }
    }

    /// True for FAIL and ERROR: what renderers show as a failed gate.
    pub fn is_failure(self) -> bool {
        matches!(self, Overall::Fail | Overall::Error)
    }
}

impl std::fmt::Display for Overall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a missing or stale baseline means for the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselinePolicy {
    /// A scenario without a usable baseline fails the check (exit 2): the default, so a gate
    /// never passes without having compared.
    #[default]
    Required,
    /// `--allow-missing-baseline`: a missing or stale baseline is reported and does not fail
    /// the check (the first run of a new scenario). An invalid baseline file still does.
    AllowMissing,
}

impl BaselinePolicy {
    /// True for the default (used by serde to leave the field out of the results JSON).
    pub fn is_required(&self) -> bool {
        *self == BaselinePolicy::Required
    }
}

/// The overall verdict and exit code, from every scenario's status and checks. Precedence,
/// most severe first:
/// 1. interrupted (130);
/// 2. a scenario that could not be measured: ERROR, 3 (its numbers are not trustworthy, even
///    when another scenario regressed; the report shows both);
/// 3. a misconfigured scenario (every request 401/403/404/405): ERROR, 2;
/// 4. a FAIL check: FAIL, 1;
/// 5. a scenario without a usable baseline: NO_BASELINE, 2 (an invalid baseline file always;
///    missing or stale unless the policy allows them or the scenario's gate.slo objectives were
///    checked, then 0 when nothing was compared or checked);
/// 6. WARN, IMPROVED, PASS: 0.
pub fn decide(
    scenarios: &[ScenarioResult],
    policy: BaselinePolicy,
    interrupted: bool,
) -> (Overall, i32) {
    let any_status = |st: Status| scenarios.iter().any(|s| s.status == st);
    let any_check = |v: Verdict| {
        scenarios
            .iter()
            .flat_map(|s| s.checks.iter())
            .any(|c| c.verdict == v)
    };
    // A scenario whose gate.slo objectives were checked is gated without a baseline: its
    // missing or stale baseline is reported, not an error (a gate on day one).
    let slo_checked = |s: &ScenarioResult| s.checks.iter().any(|c| c.kind.is_slo());
    let missing = scenarios
        .iter()
        .any(|s| matches!(s.status, Status::NoBaseline | Status::Stale) && !slo_checked(s));
    let gated = scenarios
        .iter()
        .any(|s| s.status == Status::Compared || slo_checked(s));
    if interrupted {
        (Overall::Interrupted, exit::INTERRUPTED)
    } else if any_status(Status::Unmeasurable) {
        (Overall::Error, exit::COULD_NOT_MEASURE)
    } else if any_status(Status::Misconfigured) {
        (Overall::Error, exit::INVALID_INPUT)
    } else if any_check(Verdict::Fail) {
        (Overall::Fail, exit::REGRESSION)
    } else if any_status(Status::InvalidBaseline) || (missing && policy.is_required()) {
        (Overall::NoBaseline, exit::INVALID_INPUT)
    } else if !gated {
        (Overall::NoBaseline, exit::OK)
    } else if any_check(Verdict::Warn) {
        (Overall::Warn, exit::OK)
    } else if any_check(Verdict::Improved) {
        (Overall::Improved, exit::OK)
    } else {
        (Overall::Pass, exit::OK)
    }
}

/// The exit code when some report file could not be written: the verdict's own code when it is
/// not 0 (a regression stays 1, could-not-measure 3), else 2, so an unwritten report is never a
/// silent success.
pub fn with_write_failure(code: i32) -> i32 {
    if code == exit::OK {
        exit::INVALID_INPUT
    } else {
        code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(status: Status, verdicts: &[Verdict]) -> ScenarioResult {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results.json"),
        )
        .unwrap();
        let r: crate::results::Results = serde_json::from_str(&text).unwrap();
        let mut s = r.scenarios[0].clone();
        s.status = status;
        let proto = s.checks[0].clone();
        s.checks = verdicts
            .iter()
            .map(|&v| {
                let mut c = proto.clone();
                c.verdict = v;
                c
            })
            .collect();
        s
    }

    #[test]
    fn precedence_is_one_table() {
        use BaselinePolicy::*;
        use Status::*;
        use Verdict::*;
        let pass = scenario(Compared, &[Pass]);
        let fail = scenario(Compared, &[Fail]);
        let warn = scenario(Compared, &[Warn, Pass]);
        let imp = scenario(Compared, &[Improved]);
        let none = scenario(NoBaseline, &[]);
        let stale = scenario(Stale, &[]);
        let invalid = scenario(InvalidBaseline, &[]);
        let down = scenario(Unmeasurable, &[]);
        let wrong = scenario(Misconfigured, &[]);
        let d = |v: &[&ScenarioResult], p| {
            let v: Vec<ScenarioResult> = v.iter().map(|s| (*s).clone()).collect();
            decide(&v, p, false)
        };
        assert_eq!(d(&[&pass], Required), (Overall::Pass, 0));
        assert_eq!(d(&[&pass, &imp], Required), (Overall::Improved, 0));
        assert_eq!(d(&[&imp, &warn], Required), (Overall::Warn, 0));
        assert_eq!(d(&[&warn, &fail], Required), (Overall::Fail, 1));
        assert_eq!(d(&[&pass, &none], Required), (Overall::NoBaseline, 2));
        assert_eq!(d(&[&pass, &stale], Required), (Overall::NoBaseline, 2));
        assert_eq!(d(&[&pass, &none], AllowMissing), (Overall::Pass, 0));
        assert_eq!(d(&[&none, &stale], AllowMissing), (Overall::NoBaseline, 0));
        assert_eq!(
            d(&[&pass, &invalid], AllowMissing),
            (Overall::NoBaseline, 2)
        );
        assert_eq!(d(&[&fail, &none], Required), (Overall::Fail, 1));
        assert_eq!(d(&[&fail, &wrong], Required), (Overall::Error, 2));
        assert_eq!(d(&[&wrong, &down], Required), (Overall::Error, 3));
        let all: Vec<ScenarioResult> = vec![fail.clone(), down.clone()];
        assert_eq!(decide(&all, Required, true), (Overall::Interrupted, 130));
    }

    #[test]
    fn a_write_failure_never_turns_a_code_into_success() {
        assert_eq!(with_write_failure(0), 2);
        assert_eq!(with_write_failure(1), 1);
        assert_eq!(with_write_failure(3), 3);
    }

    #[test]
    fn serialises_as_before() {
        assert_eq!(
            serde_json::to_string(&Overall::NoBaseline).unwrap(),
            "\"NO_BASELINE\""
        );
        assert_eq!(
            serde_json::from_str::<Overall>("\"IMPROVED\"").unwrap(),
            Overall::Improved
        );
    }
}
