//! What differs between the two arms of an A/B run (issue 32 item 3): the servers' commands
//! word by word and their identities key by key, said once at the top of the scenario's notes
//! so the reader knows what the run compares ("candidate adds `-ub 16 -b 16`").

use crate::runner::RunOutput;

/// Options whose value is where each arm listens, not what it runs: a different port is how two
/// arms coexist on one machine, not a difference between the servers.
const PLACE_OPTIONS: [&str; 3] = ["--port", "-p", "--host"];

/// What the candidate's command adds and removes against the base's, word by word (a longest
/// common subsequence of the whitespace-separated words, the values of [`PLACE_OPTIONS`]
/// ignored): `candidate adds `-ub 16 -b 16``, `candidate removes `--flash-attn``, or both.
/// `None` when the commands are the same but for those values.
pub fn command_diff(base: &str, cand: &str) -> Option<String> {
    let words = |s: &str| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut skip = false;
        for w in s.split_whitespace() {
            if skip {
                out.push("<place>".into());
                skip = false;
                continue;
            }
            if let Some((opt, _)) = w.split_once('=') {
                if PLACE_OPTIONS.contains(&opt) {
                    out.push(format!("{opt}=<place>"));
                    continue;
                }
            }
            skip = PLACE_OPTIONS.contains(&w);
            out.push(w.to_string());
        }
        out
    };
    let (b, c) = (words(base), words(cand));
    let (n, m) = (b.len(), c.len());
    // lcs[i][j]: longest common subsequence of b[i..] and c[j..]
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if b[i] == c[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let (mut added, mut removed) = (Vec::new(), Vec::new());
    while i < n || j < m {
        if i < n && j < m && b[i] == c[j] {
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            added.push(c[j].as_str());
            j += 1;
        } else {
            removed.push(b[i].as_str());
            i += 1;
        }
    }
    let mut parts = Vec::new();
    if !added.is_empty() {
        parts.push(format!("adds `{}`", added.join(" ")));
    }
    if !removed.is_empty() {
        parts.push(format!("removes `{}`", removed.join(" ")));
    }
    (!parts.is_empty()).then(|| format!("candidate {}", parts.join(" and ")))
}

/// What differs between the two arms' servers: their commands (when perfgate started both) and
/// how they describe themselves. `None` when neither is known.
pub fn arms_difference(base: &RunOutput, cand: &RunOutput) -> Option<String> {
    let (bs, cs) = (base.server_side.as_ref()?, cand.server_side.as_ref()?);
    let commands = match (&bs.command, &cs.command) {
        (Some(b), Some(c)) => Some(command_diff(b, c)),
        _ => None,
    };
    let (b, c) = (&bs.identity, &cs.identity);
    let identity: Option<Vec<String>> = (!b.is_empty() && !c.is_empty()).then(|| {
        let keys: std::collections::BTreeSet<&String> = b.keys().chain(c.keys()).collect();
        keys.into_iter()
            .filter(|k| b.get(*k) != c.get(*k))
            .map(|k| {
                let show = |v: Option<&String>| v.map_or("(absent)", String::as_str).to_string();
                format!("{k} {} -> {}", show(b.get(k)), show(c.get(k)))
            })
            .collect()
    });
    let said_identity = identity.as_ref().map(|d| {
        if d.is_empty() {
            "the two arms' servers describe themselves identically".to_string()
        } else {
            format!("base -> candidate server: {}", d.join(", "))
        }
    });
    match (commands, said_identity) {
        (None, None) => None,
        (Some(Some(cmd)), Some(id)) => Some(format!("what the A/B compares: {cmd}; {id}")),
        (Some(Some(cmd)), None) => Some(format!("what the A/B compares: {cmd}")),
        (Some(None), Some(id)) if identity.as_ref().is_some_and(Vec::is_empty) => Some(format!(
            "{id} and run the same command (ports aside): an A/A run, which measures the noise of this setup"
        )),
        (Some(None), Some(id)) => Some(format!("{id}; the same command (ports aside)")),
        (Some(None), None) => Some(
            "the two arms run the same command (ports aside): an A/A run, which measures the noise of this setup"
                .into(),
        ),
        (None, Some(id)) if identity.as_ref().is_some_and(Vec::is_empty) => Some(format!(
            "{id} (an A/A run unless what perfgate did not start differs)"
        )),
        (None, Some(id)) => Some(id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_diff_names_what_the_candidate_adds_and_removes_ports_aside() {
        let base = "llama-server -m m.gguf --host 127.0.0.1 --port 8081 -t 1 --flash-attn";
        let cand = "llama-server -m m.gguf --host 127.0.0.1 --port 8082 -t 1 -ub 16 -b 16";
        assert_eq!(
            command_diff(base, cand).as_deref(),
            Some("candidate adds `-ub 16 -b 16` and removes `--flash-attn`")
        );
        assert_eq!(
            command_diff("s --port=1 -np 4", "s --port=2 -np 4 --metrics").as_deref(),
            Some("candidate adds `--metrics`")
        );
        // only the place differs: the same command
        assert_eq!(command_diff("s -p 1 -t 2", "s -p 9 -t 2"), None);
        assert_eq!(
            command_diff("s -t 2", "s -t 4").as_deref(),
            Some("candidate adds `4` and removes `2`")
        );
    }
}
