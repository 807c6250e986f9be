//! The flags that name the nightly history's store (`check --history`, `perfgate history`).

use super::{Remote, Store};
use crate::exit::Error;
use clap::Args;
use std::path::PathBuf;

/// Where the nightly history lives (docs/history.md).
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// The branch of the repository that holds the nightly history (default name
    /// `perfgate-history`). `check` reads it before measuring, judges tonight's run against the
    /// nights and appends the night; `history show` and `history append` read or append it.
    #[arg(long, value_name = "BRANCH", num_args = 0..=1, default_missing_value = super::DEFAULT_BRANCH, env = "PERFGATE_HISTORY")]
    pub history: Option<String>,
    /// The remote (name or URL) the history branch is fetched from and pushed to.
    #[arg(long, value_name = "REMOTE", default_value = "origin")]
    pub history_remote: String,
    /// Keep the history in the local branch only (no fetch, no push): to try it out.
    #[arg(long)]
    pub history_local: bool,
    /// The git checkout that holds the history branch.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub history_repo: PathBuf,
}

impl HistoryArgs {
    /// The store these flags name, if `--history` was given.
    pub fn store(&self) -> Result<Option<Store>, Error> {
        let Some(branch) = &self.history else {
            return Ok(None);
        };
        let remote = if self.history_local {
            Remote::LocalOnly
        } else {
            Remote::Push(self.history_remote.clone())
        };
        Store::new(&self.history_repo, branch, remote)
            .map(Some)
            .map_err(Error::from)
    }
}
