//! What a measuring command (`check`, `ab`) does with its results: the terminal report, the
//! report files, GitHub (PR comment, step summary, annotations, outputs), the exit code.

use crate::report;
use crate::verdict::FailOn;
use clap::Args;
use std::path::PathBuf;

/// The report files a command can write.
#[derive(Debug, Args)]
pub struct ReportFiles {
    /// Write the markdown report (the PR comment body) to FILE.
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// Write the results JSON to FILE (layout: schema/results.schema.json).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Write JUnit XML to FILE: one testcase per check, for CI systems other than GitHub.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write a self-contained HTML page to FILE: distributions of baseline and candidate, verdicts.
    #[arg(long)]
    pub html: Option<PathBuf>,
}

impl ReportFiles {
    pub fn outputs(&self) -> report::Outputs<'_> {
        report::Outputs {
            json: self.output.as_deref(),
            markdown: self.markdown.as_deref(),
            junit: self.junit.as_deref(),
            html: self.html.as_deref(),
        }
    }
}

/// After measuring (`check`, `ab`): prints the terminal report, writes the report files,
/// publishes to GitHub, says why scenarios could not be measured, and returns the exit code
/// (a WARN's 1 under `--fail-on warn`).
pub async fn deliver(
    rep: report::Report,
    out: &ReportFiles,
    github: &crate::github::GithubArgs,
    fail_on: FailOn,
) -> i32 {
    let mut rep = rep;
    if let Some(p) = &out.output {
        report::last_resort::keep(p, &mut rep.results);
    }
    let written = report::print_and_write(&rep, &out.outputs());
    report::last_resort::done();
    let results = rep.results;
    // PR comment, step summary, annotations, outputs, tracking issue: warns, never changes the exit code.
    // The step outputs name only the report files written now.
    let reports = crate::github::Reports {
        json: written.written_path(out.output.as_deref()),
        markdown: written.written_path(out.markdown.as_deref()),
    };
    crate::github::publish(&results, github, reports).await;
    written.print_failures();
    // On stderr too (stdout may go to a file): each reason once, through the report's sanitiser.
    for s in &results.scenarios {
        let why = report::safe_text::field(&s.status_detail);
        match s.status {
            crate::results::Status::Unmeasurable => {
                eprintln!("perfgate: could not measure {}: {why}", s.name)
            }
            crate::results::Status::Misconfigured => eprintln!(
                "perfgate: scenario {} is misconfigured (wrong base_url, model or key?): {why}",
                s.name
            ),
            _ => {}
        }
    }
    let code = written.exit_code(results.exit_code);
    let with_policy = fail_on.exit_code(results.verdict, code);
    if with_policy != code {
        eprintln!("perfgate: --fail-on warn, and the verdict is WARN: exit {with_policy}");
    }
    with_policy
}
