//! GitHub (docs/design.md "GitHub"): after `check` has written its reports, keep one PR comment per check id
//! up to date (found by the hidden `<!-- perfgate:ID -->` marker, edited in place), write the
//! step summary, annotations and step outputs, and on scheduled/push runs keep one tracking issue.
//!
//! Invariant: nothing here changes the exit code. Every failure (no token, a fork's read-only
//! token, an API error, a file that cannot be written) becomes a one-line warning on stderr,
//! and `check` still exits by its verdict. The token is never printed, logged or stored.

pub mod actions;
pub mod api;
pub mod context;

use crate::gate::{CheckKind, ReasonKind, Verdict};
use crate::report::markdown::{self, Extra};
use crate::results::Results;
use crate::verdict::Overall;
use clap::{Args, ValueEnum};
use context::Context;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use context::default_id_from;

/// GitHub's limit on a comment or issue body is 65,536 characters. Bodies are kept at or under
/// this many *bytes*, which also bounds characters and UTF-16 units (emoji are 4 bytes).
pub const MAX_BODY_BYTES: usize = 65_536;
/// All GitHub API calls of one run together.
pub const API_DEADLINE: Duration = Duration::from_secs(120);
/// Baseline files whose last commit is looked up, at most.
const MAX_COMMIT_LOOKUPS: usize = 20;

/// When the GitHub integration runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Mode {
    /// Inside GitHub Actions (`GITHUB_ACTIONS=true`).
    #[default]
    Auto,
    /// Always (e.g. another CI posting to GitHub with --repo, --pr and a token).
    On,
    /// Never.
    Off,
}

/// GitHub options of `perfgate check`; each defaults to the GitHub Actions environment.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "GitHub")]
pub struct GithubArgs {
    /// GitHub integration (PR comment, step summary, annotations, outputs, tracking issue).
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    pub github: Mode,
    /// Name of the environment variable that holds the GitHub token (never the token itself).
    #[arg(long, value_name = "NAME", default_value = "GITHUB_TOKEN")]
    pub github_token_env: String,
    /// Repository OWNER/NAME [default: $GITHUB_REPOSITORY].
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// Pull request number [default: from the event payload at $GITHUB_EVENT_PATH].
    #[arg(long, value_name = "N")]
    pub pr: Option<u64>,
    /// GitHub REST API URL [default: $GITHUB_API_URL, else https://api.github.com].
    #[arg(long, value_name = "URL")]
    pub api_url: Option<String>,
    /// Write no PR comment and no tracking issue (step summary, annotations and outputs still).
    #[arg(long)]
    pub no_comment: bool,
    /// Keep no tracking issue on runs without a pull request.
    #[arg(long)]
    pub no_issue: bool,
    /// Also write the comment body to FILE, for a later job to post (fork-safe pattern).
    #[arg(long, value_name = "FILE")]
    pub comment_file: Option<PathBuf>,
}

impl Default for GithubArgs {
    fn default() -> Self {
        GithubArgs {
            github: Mode::Auto,
            github_token_env: "GITHUB_TOKEN".into(),
            repo: None,
            pr: None,
            api_url: None,
            no_comment: false,
            no_issue: false,
            comment_file: None,
        }
    }
}

/// The report files `check` wrote, named in the step outputs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reports<'a> {
    pub json: Option<&'a Path>,
    pub markdown: Option<&'a Path>,
}

/// What [`publish_with`] did, for the caller's messages and for tests.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub enabled: bool,
    pub comment: Option<api::CommentAction>,
    pub issue: Option<api::IssueAction>,
    /// The body sent (or that would have been sent) as the comment or issue.
    pub body: Option<String>,
    /// One line each; printed as warnings.
    pub warnings: Vec<String>,
    /// `::error`/`::warning` workflow commands for FAIL/WARN checks, for stdout.
    pub annotations: Vec<String>,
}

/// The default `--id`: `GITHUB_WORKFLOW/GITHUB_JOB` inside GitHub Actions, else `perfgate`.
pub fn default_id() -> String {
    default_id_from(&|k| std::env::var(k).ok())
}

/// Runs the GitHub integration for a finished `check` with the process environment. Prints one
/// line per problem on stderr (as a `::warning` inside Actions) and returns; never fails.
pub async fn publish(results: &Results, args: &GithubArgs, reports: Reports<'_>) {
    let env = |k: &str| std::env::var(k).ok();
    let out = publish_with(results, args, reports, &env).await;
    let in_actions = env("GITHUB_ACTIONS").as_deref() == Some("true");
    for a in &out.annotations {
        println!("{a}");
    }
    for w in &out.warnings {
        if in_actions {
            println!(
                "::warning title=perfgate GitHub::{}",
                actions::escape_data(w)
            );
        } else {
            eprintln!("perfgate: warning: GitHub: {w}");
        }
    }
    match out.comment {
        Some(api::CommentAction::Created(id)) => {
            eprintln!("perfgate: created the PR comment ({id})")
        }
        Some(api::CommentAction::Updated(id)) => {
            eprintln!("perfgate: updated the PR comment ({id})")
        }
        None => {}
    }
    match out.issue {
        Some(api::IssueAction::Opened(n)) => eprintln!("perfgate: opened tracking issue #{n}"),
        Some(api::IssueAction::Updated(n)) => eprintln!("perfgate: updated tracking issue #{n}"),
        Some(api::IssueAction::Recovered(n)) => {
            eprintln!("perfgate: commented on and closed tracking issue #{n}: recovered")
        }
        _ => {}
    }
}

/// The body under [`MAX_BODY_BYTES`]: the full report when it fits; else the short form (the
/// verdict line, the FAIL and WARN rows, FAIL first) with a pointer to the step summary; with
/// thousands of failing rows, as many as fit.
pub fn fit_body(results: &Results, extra: &Extra, limit: usize) -> String {
    let full = markdown::render_with(results, extra);
    if full.len() <= limit {
        return full;
    }
    let where_ = match &extra.run_url {
        Some(_) => "the full report is in the step summary of the workflow run (link below)",
        None => "the full report is in the step summary of the workflow run",
    };
    let mut x = extra.clone();
    x.compact = true;
    x.note = Some(format!(
        "This report has {} characters, more than a GitHub comment holds; {where_}.",
        full.chars().count()
    ));
    let body = markdown::render_with(results, &x);
    if body.len() <= limit {
        return body;
    }
    // Binary search on the number of rows shown.
    let (mut lo, mut hi) = (0usize, body.lines().count());
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        x.max_rows = Some(mid);
        if markdown::render_with(results, &x).len() <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    x.max_rows = Some(lo);
    let body = markdown::render_with(results, &x);
    if body.len() <= limit {
        return body;
    }
    // Only reachable with an absurd limit: cut at a character boundary.
    let mut cut = limit;
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    body[..cut].to_string()
}

/// The tracking issue's state for a scheduled run's results: open it (a regression), close it
/// (no regression), or leave it as it is (no verdict to judge by: no baseline, could not
/// measure, interrupted). With a nightly history (docs/history.md "The tracking issue"), a
/// scenario whose nights are judged for change points opens the issue only on a persistent
/// step (its `nightly step` check FAILs): tonight's FAIL against the committed baseline alone
/// fails the run but neither opens nor closes the issue, so one bad night does not alert and
/// the nights before a step is confirmed do not close and reopen it.
fn tracked_failure(r: &Results) -> Option<bool> {
    let any_row = |kind: ReasonKind| {
        r.scenarios
            .iter()
            .flat_map(|s| &s.checks)
            .any(|c| c.reason_kind == kind)
    };
    match r.verdict {
        Overall::Fail => {}
        // a step up confirmed on an earlier night, still in force: the issue stays open and is
        // updated, though the night is not red
        Overall::Warn if any_row(ReasonKind::StepInForce) => return Some(true),
        // in force but back tonight: neither recovered nor failed
        Overall::Warn if any_row(ReasonKind::StepBack) => return None,
        Overall::Pass | Overall::Warn | Overall::Improved => return Some(false),
        Overall::NoBaseline | Overall::Error | Overall::Interrupted | Overall::Measured => {
            return None
        }
    }
    let confirmed = r.scenarios.iter().any(|s| {
        let follows_steps = s.checks.iter().any(|c| c.kind == CheckKind::ChangePoint);
        s.checks.iter().any(|c| {
            c.verdict == Verdict::Fail && (!follows_steps || c.kind == CheckKind::ChangePoint)
        })
    });
    confirmed.then_some(true)
}

/// [`publish`] with an injectable environment; returns what it did.
pub async fn publish_with(
    results: &Results,
    args: &GithubArgs,
    reports: Reports<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Outcome {
    let ctx = Context::from_env(args, env);
    let mut out = Outcome {
        enabled: ctx.enabled,
        warnings: ctx.warnings.clone(),
        ..Outcome::default()
    };
    if !ctx.enabled {
        // --comment-file is asked for explicitly: write it even outside GitHub Actions.
        if let Some(p) = &args.comment_file {
            let extra = Extra {
                run_url: ctx.run_url.clone(),
                commit: ctx.sha.clone(),
                ..Extra::default()
            };
            let body = fit_body(results, &extra, MAX_BODY_BYTES);
            write_comment_file(p, &body, &mut out.warnings);
            out.body = Some(body);
        }
        return out;
    }
    if ctx.pr.is_none()
        && ctx
            .event_name
            .as_deref()
            .is_some_and(|e| e.starts_with("pull_request"))
    {
        out.warnings.push(format!(
            "a {} run, but no PR number in the event (GITHUB_EVENT_PATH) or --pr; no PR comment",
            ctx.event_name.as_deref().unwrap_or_default()
        ));
    }
    let wants_api =
        !args.no_comment && (ctx.pr.is_some() || (ctx.tracks_issue() && !args.no_issue));
    let mut client = None;
    if let (Some(repo), Some(token)) = (&ctx.repo, &ctx.token) {
        match api::Api::new(&ctx.api_url, token, repo) {
            Ok(c) => client = Some(c),
            Err(e) => out
                .warnings
                .push(format!("cannot set up the API client: {e}")),
        }
    } else if wants_api {
        let missing = if ctx.repo.is_none() {
            "no repository (GITHUB_REPOSITORY or --repo)".to_string()
        } else {
            format!(
                "no token in ${} (pass `github-token`, or `env: GITHUB_TOKEN: ${{{{ github.token }}}}`)",
                ctx.token_env
            )
        };
        out.warnings
            .push(format!("{missing}; no PR comment or tracking issue"));
    }

    let deadline = tokio::time::Instant::now() + API_DEADLINE;
    let mut extra = Extra {
        run_url: ctx.run_url.clone(),
        commit: ctx.sha.clone(),
        ..Extra::default()
    };
    if let Some(api) = &client {
        match tokio::time::timeout_at(deadline, baseline_commits(api, &ctx, results)).await {
            Ok(Ok(m)) => extra.baseline_commits = m,
            // the permission is the likely cause only when GitHub answered
            Ok(Err(e)) if e.status.is_some() => out.warnings.push(format!(
                "cannot look up the baselines' commits (needs `contents: read`): {e}"
            )),
            Ok(Err(e)) => out.warnings.push(format!(
                "cannot look up the baselines' commits: GitHub's API did not answer ({e})"
            )),
            Err(_) => out
                .warnings
                .push("looking up the baselines' commits timed out".into()),
        }
    }

    let full = markdown::render_with(results, &extra);
    if let Some(p) = &ctx.step_summary {
        let text = if full.len() <= actions::MAX_STEP_SUMMARY_BYTES {
            full.clone()
        } else {
            fit_body(results, &extra, actions::MAX_STEP_SUMMARY_BYTES - 1024)
        };
        if let Err(e) = actions::append(p, &format!("{text}\n")) {
            out.warnings.push(format!("step summary: {e}"));
        }
    }
    if let Some(p) = &ctx.output {
        if let Err(e) = actions::append(
            p,
            &actions::outputs(results, reports.json, reports.markdown),
        ) {
            out.warnings.push(format!("step outputs: {e}"));
        }
    }
    if ctx.in_actions {
        out.annotations = actions::annotations(results);
    }

    let body = fit_body(results, &extra, MAX_BODY_BYTES);
    let marker = body.lines().next().unwrap_or_default().to_string();
    if let Some(p) = &args.comment_file {
        write_comment_file(p, &body, &mut out.warnings);
    }
    out.body = Some(body.clone());
    let Some(api) = client.filter(|_| !args.no_comment) else {
        return out;
    };

    if let Some(pr) = ctx.pr {
        match tokio::time::timeout_at(deadline, api::upsert_comment(&api, pr, &marker, &body)).await
        {
            Ok(Ok(a)) => out.comment = Some(a),
            Ok(Err(e)) => {
                out.warnings
                    .push(api::hint(&e, &format!("PR #{pr} comment"), &ctx.token_env))
            }
            Err(_) => out.warnings.push(format!(
                "PR #{pr} comment: GitHub did not answer within {}s",
                API_DEADLINE.as_secs()
            )),
        }
    } else if ctx.tracks_issue() && !args.no_issue {
        let failed = tracked_failure(results);
        let title = format!("perfgate: latency regression ({})", results.id);
        let recovered = recovered_text(&ctx, results);
        let r = tokio::time::timeout_at(
            deadline,
            api::track_issue(&api, &marker, failed, &title, &body, &recovered),
        )
        .await;
        match r {
            Ok(Ok(a)) => out.issue = Some(a),
            Ok(Err(e)) => out
                .warnings
                .push(api::hint(&e, "tracking issue", &ctx.token_env)),
            Err(_) => out.warnings.push(format!(
                "tracking issue: GitHub did not answer within {}s",
                API_DEADLINE.as_secs()
            )),
        }
    }
    out
}

fn write_comment_file(p: &Path, body: &str, warnings: &mut Vec<String>) {
    let written = p
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(p, body));
    if let Err(e) = written {
        warnings.push(format!("--comment-file {}: {e}", p.display()));
    }
}

fn recovered_text(ctx: &Context, r: &Results) -> String {
    let mut s = format!(
        "✅ **perfgate: recovered**: {}",
        crate::report::escape::markdown(&format!(
            "this check ({}) passes again, verdict {}",
            r.id, r.verdict
        ))
    );
    if let Some(sha) = &ctx.sha {
        s.push_str(&format!(" at commit `{}`", sha.get(..7).unwrap_or(sha)));
    }
    if let Some(u) = &ctx.run_url {
        s.push_str(&format!(" ([workflow run]({u}))"));
    }
    s.push_str(". Closing this issue; a new regression opens a new one.\n");
    s
}

/// The last commit that changed each compared scenario's baseline file, keyed by its path in the
/// results. Paths are made relative to the workspace (the repository root in Actions).
async fn baseline_commits(
    api: &api::Api,
    ctx: &Context,
    r: &Results,
) -> Result<BTreeMap<String, (String, String)>, api::ApiError> {
    let mut out = BTreeMap::new();
    let paths: Vec<&String> = {
        let mut v: Vec<&String> = r
            .scenarios
            .iter()
            .filter_map(|s| s.baseline.as_ref().map(|b| &b.path))
            .collect();
        v.sort();
        v.dedup();
        v.truncate(MAX_COMMIT_LOOKUPS);
        v
    };
    for p in paths {
        let Some(rel) = repo_path(p, ctx.workspace.as_deref()) else {
            continue;
        };
        if let Some(sha) = api.last_commit_for_path(&rel, ctx.sha.as_deref()).await? {
            if let Some(url) = ctx.commit_url(&sha) {
                out.insert(p.clone(), (sha, url));
            }
        }
    }
    Ok(out)
}

/// A baseline path as a repository path (`/`-separated, relative to the repository root).
fn repo_path(p: &str, workspace: Option<&Path>) -> Option<String> {
    let path = Path::new(p);
    let rel: PathBuf = match workspace {
        Some(ws) => {
            let ws = ws.canonicalize().unwrap_or_else(|_| ws.to_path_buf());
            let abs = std::env::current_dir().ok()?.join(path);
            let abs = abs.canonicalize().unwrap_or(abs);
            abs.strip_prefix(&ws).ok()?.to_path_buf()
        }
        None if path.is_absolute() => return None,
        None => path.to_path_buf(),
    };
    let parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A WARN night whose `nightly step` row has a step up still in force, back tonight, leaves
    /// the tracking issue as it is (None); one still at the step's level keeps it open (Some(true));
    /// any other WARN is a pass that closes it; a FAIL of the row keeps it open.
    #[test]
    fn a_step_back_for_one_night_neither_closes_nor_opens_the_issue() {
        let mut r = crate::results::fixture();
        r.scenarios.truncate(1);
        let row = |verdict, reason_kind| crate::gate::Check {
            verdict,
            reason_kind,
            ..crate::gate::Check::blank(
                "chat",
                Some(crate::config::Metric::Tpot),
                CheckKind::ChangePoint,
                0.05,
            )
        };
        r.verdict = Overall::Warn;
        r.scenarios[0].checks = vec![row(Verdict::Warn, ReasonKind::StepBack)];
        assert_eq!(tracked_failure(&r), None);
        r.scenarios[0].checks = vec![row(Verdict::Warn, ReasonKind::StepInForce)];
        assert_eq!(tracked_failure(&r), Some(true));
        r.scenarios[0].checks = vec![row(Verdict::Warn, ReasonKind::Measured)];
        assert_eq!(tracked_failure(&r), Some(false));
        r.verdict = Overall::Fail;
        r.scenarios[0].checks = vec![row(Verdict::Fail, ReasonKind::Measured)];
        assert_eq!(tracked_failure(&r), Some(true));
    }
}
