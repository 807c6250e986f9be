//! The overall verdict of a check and its exit code, decided in one place from every scenario's
//! status and checks (docs/design.md, "Exit codes"). `check`, `confirm`, `perfgate report` and
//! the merge of shards all call [`decide`]; nothing else sets a verdict or an exit code.

use crate::exit;
use crate::gate::Verdict;
use serde::{Deserialize, Serialize};

/// Whether a scenario could be compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Compared with its baseline; see `checks`.
    Compared,
    /// No baseline file: run `perfgate bless`.
    NoBaseline,
    /// The baseline measures something else (fingerprint, workload or metric definitions).
    Stale,
    /// The baseline file is broken.
    InvalidBaseline,
    /// The endpoint could not be measured (unreachable, or error rate above `max_error_rate`).
    Unmeasurable,
    /// Every request was rejected with 401/403/404/405: a wrong key or base_url (exit 2).
    Misconfigured,
    /// `check --load-shard I/N`: one worker's part of the load, measured and not gated;
    /// `perfgate report` merges the N workers' requests and gates them (exit 0 alone).
    LoadShard,
}

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
    /// Load-shard workers' measurements, not gated until `perfgate report` merges them.
    Measured,
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
            Overall::Measured => "MEASURED",
        }
    }
}

impl std::fmt::Display for Overall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
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
///    missing or stale unless the policy allows them, then 0 when nothing was compared; a
///    scenario gated by its objectives alone (gate.slo, gate.cache) comes here as compared, see
///    [`crate::results::Results::decide`]);
/// 6. only load-shard workers' measurements (`check --load-shard`), nothing compared:
///    MEASURED, 0 (`perfgate report` gates them merged);
/// 7. WARN, IMPROVED, PASS: 0.
///
/// Each scenario comes as its status and its worst check verdict
/// ([`crate::results::ScenarioResult::worst`]). As FAIL < WARN < IMPROVED < PASS < INFO, "some
/// check is WARN" is "some worst is WARN" once no check is FAIL, and so on down the list.
pub fn decide(
    scenarios: impl IntoIterator<Item = (Status, Option<Verdict>)>,
    policy: BaselinePolicy,
    interrupted: bool,
) -> (Overall, i32) {
    let scenarios: Vec<(Status, Option<Verdict>)> = scenarios.into_iter().collect();
    let any_status = |st: Status| scenarios.iter().any(|s| s.0 == st);
    let any_check = |v: Verdict| scenarios.iter().any(|s| s.1 == Some(v));
    let missing = any_status(Status::NoBaseline) || any_status(Status::Stale);
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
    } else if !any_status(Status::Compared) && any_status(Status::LoadShard) {
        (Overall::Measured, exit::OK)
    } else if !any_status(Status::Compared) {
        (Overall::NoBaseline, exit::OK)
    } else if any_check(Verdict::Warn) {
        (Overall::Warn, exit::OK)
    } else if any_check(Verdict::Improved) {
        (Overall::Improved, exit::OK)
    } else {
        (Overall::Pass, exit::OK)
    }
}

/// The exit code when some report file could not be written (`failed`): the verdict's own code
/// when it is not 0 (a regression stays 1, could-not-measure 3), else the failure's
/// ([`exit::Error::exit_code`]: 2), so an unwritten report is never a silent success.
pub fn with_write_failure(code: i32, failed: &exit::Error) -> i32 {
    if code == exit::OK {
        failed.exit_code()
    } else {
        code
    }
}

/// Which verdict fails the command (`--fail-on` of `check` and `ab`; the Action's `fail-on`
/// input): a regression only (the default), or a WARN too. It changes the process's exit code
/// only: the verdict, the results file's `exit_code` and the reports are the gate's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FailOn {
    /// A regression (FAIL) exits 1; a WARN exits 0.
    #[default]
    Fail,
    /// A WARN exits 1 too, as a regression does.
    Warn,
}

impl FailOn {
    /// The exit code of a run whose verdict is `verdict` and whose code so far is `code`: with
    /// [`FailOn::Warn`], a WARN that would exit 0 exits 1 ([`exit::REGRESSION`]); every other
    /// code stays what it was (an unwritten report's 2 included).
    pub fn exit_code(self, verdict: Overall, code: i32) -> i32 {
        match (self, verdict) {
            (FailOn::Warn, Overall::Warn) if code == exit::OK => exit::REGRESSION,
            _ => code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_on_warn_turns_only_a_warn_that_passed_into_exit_1() {
        // (--fail-on, overall, the exit code so far, the exit code after)
        let cases = [
            (FailOn::Warn, Overall::Warn, exit::OK, exit::REGRESSION),
            // a report that could not be written keeps its 2
            (
                FailOn::Warn,
                Overall::Warn,
                exit::INVALID_INPUT,
                exit::INVALID_INPUT,
            ),
            (FailOn::Warn, Overall::Pass, exit::OK, exit::OK),
            (FailOn::Warn, Overall::Improved, exit::OK, exit::OK),
            (FailOn::Warn, Overall::NoBaseline, exit::OK, exit::OK),
            (
                FailOn::Warn,
                Overall::Fail,
                exit::REGRESSION,
                exit::REGRESSION,
            ),
            (
                FailOn::Warn,
                Overall::Error,
                exit::COULD_NOT_MEASURE,
                exit::COULD_NOT_MEASURE,
            ),
            // the default changes nothing
            (FailOn::default(), Overall::Warn, exit::OK, exit::OK),
        ];
        for (fail_on, overall, code, want) in cases {
            assert_eq!(
                fail_on.exit_code(overall, code),
                want,
                "{fail_on:?} {overall} {code}"
            );
        }
    }

    /// A scenario as [`decide`] sees it: its status and its worst check.
    type Scenario = (Status, Option<Verdict>);

    fn scenario(status: Status, verdicts: &[Verdict]) -> Scenario {
        (status, verdicts.iter().copied().min())
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
        let d = |v: &[&Scenario], p| decide(v.iter().map(|s| **s), p, false);
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
        // load-shard workers alone: measured, gated when merged; a worker that could not
        // measure still fails its job
        let shard = scenario(LoadShard, &[]);
        assert_eq!(d(&[&shard, &shard], Required), (Overall::Measured, 0));
        assert_eq!(d(&[&shard, &down], Required), (Overall::Error, 3));
        assert_eq!(d(&[&shard, &pass], Required), (Overall::Pass, 0));
        assert_eq!(
            decide([fail, down], Required, true),
            (Overall::Interrupted, 130)
        );
    }

    #[test]
    fn a_write_failure_never_turns_a_code_into_success() {
        let failed = exit::Error::Report {
            what: "HTML report",
            path: "/ro/r.html".into(),
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        };
        assert_eq!(with_write_failure(0, &failed), 2);
        assert_eq!(with_write_failure(1, &failed), 1);
        assert_eq!(with_write_failure(3, &failed), 3);
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
