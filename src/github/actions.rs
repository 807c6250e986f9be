//! GitHub Actions' file commands and workflow commands: the step summary (`$GITHUB_STEP_SUMMARY`),
//! step outputs (`$GITHUB_OUTPUT`) and `::error`/`::warning` annotations, escaped so that no
//! value can start another command.

use crate::gate::Verdict;
use crate::report::{fmt_baseline, fmt_change, fmt_check_name, fmt_value};
use crate::results::Results;
use std::io::Write;
use std::path::Path;

/// GitHub shows at most 10 annotations of each kind per step.
pub const MAX_ANNOTATIONS: usize = 10;
/// GitHub's limit on one step's summary (1 MiB).
pub const MAX_STEP_SUMMARY_BYTES: usize = 1 << 20;

/// Escapes the message of a workflow command (`%`, CR, LF).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow command property value (data escapes plus `:` and `,`).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `::error`/`::warning` lines for FAIL/WARN checks, at most [`MAX_ANNOTATIONS`] of each kind
/// (the last one says how many more there are when they do not fit).
pub fn annotations(r: &Results) -> Vec<String> {
    let mut out = Vec::new();
    for (verdict, cmd) in [(Verdict::Fail, "error"), (Verdict::Warn, "warning")] {
        let lines: Vec<String> = r
            .scenarios
            .iter()
            .flat_map(|s| s.checks.iter().map(move |c| (s, c)))
            .filter(|(_, c)| c.verdict == verdict)
            .map(|(s, c)| {
                let name = fmt_check_name(c);
                let title = format!("perfgate {}: {name} {}", s.name, verdict.as_str());
                let msg = format!(
                    "{name} of {}: {} -> {}, change {}. {}",
                    s.name,
                    fmt_baseline(c),
                    fmt_value(c, c.candidate),
                    fmt_change(c),
                    c.reason
                );
                format!(
                    "::{cmd} title={}::{}",
                    escape_property(&title),
                    escape_data(&msg)
                )
            })
            .collect();
        if lines.len() <= MAX_ANNOTATIONS {
            out.extend(lines);
        } else {
            out.extend(lines.iter().take(MAX_ANNOTATIONS - 1).cloned());
            let more = lines.len() - (MAX_ANNOTATIONS - 1);
            out.push(format!(
                "::{cmd} title={}::{}",
                escape_property(&format!("perfgate: {more} more {}", verdict.as_str())),
                escape_data(&format!(
                    "{more} more {} checks; the step summary lists every check",
                    verdict.as_str()
                ))
            ));
        }
    }
    out
}

/// `name=value` lines for `$GITHUB_OUTPUT`; a value with a line break uses the heredoc form with a
/// delimiter that does not occur in it.
pub fn output_lines(pairs: &[(&str, String)]) -> String {
    let mut o = String::new();
    for (k, v) in pairs {
        if v.contains('\n') || v.contains('\r') {
            let mut d = String::from("perfgate_EOF");
            while v.contains(&d) {
                d.push('_');
            }
            o.push_str(&format!("{k}<<{d}\n{v}\n{d}\n"));
        } else {
            o.push_str(&format!("{k}={v}\n"));
        }
    }
    o
}

/// Step outputs: `verdict`, `regressions` (number of FAIL checks), `report-json` and
/// `report-path` (when written).
pub fn outputs(r: &Results, json: Option<&Path>, markdown: Option<&Path>) -> String {
    let mut pairs = vec![
        ("verdict", r.verdict.as_str().to_string()),
        ("regressions", r.count(Verdict::Fail).to_string()),
    ];
    if let Some(p) = json {
        pairs.push(("report-json", p.display().to_string()));
    }
    if let Some(p) = markdown {
        pairs.push(("report-path", p.display().to_string()));
    }
    output_lines(&pairs)
}

/// Why a file command file (`GITHUB_STEP_SUMMARY`, `GITHUB_OUTPUT`) was not appended to; a
/// warning, never an exit code.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// The file cannot be opened for appending.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The write failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Appends `text` to a file command file (they are shared by every command of the step).
pub fn append(path: &Path, text: &str) -> Result<(), AppendError> {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|source| AppendError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    f.write_all(text.as_bytes())
        .map_err(|source| AppendError::Write {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_command_values_cannot_start_a_command() {
        let e = escape_data("50%\n::add-mask::x\r");
        assert_eq!(e, "50%25%0A::add-mask::x%0D");
        assert!(!e.contains('\n'));
        assert_eq!(escape_property("a:b,c"), "a%3Ab%2Cc");
    }

    #[test]
    fn outputs_use_heredoc_for_multiline_values() {
        let o = output_lines(&[
            ("verdict", "FAIL".into()),
            ("x", "a\nperfgate_EOF\nb".into()),
        ]);
        assert!(o.starts_with("verdict=FAIL\nx<<perfgate_EOF_\n"), "{o}");
        assert!(o.ends_with("\nperfgate_EOF_\n"));
    }
}
