//! Text from a results file made safe to print in a terminal or a CI log (issue 26). A results
//! file can be edited by hand or come from elsewhere, so `perfgate report` cannot trust its
//! strings: a terminal escape (ESC, CSI, OSC) would rewrite the terminal or the log, a line
//! starting with `::` is a GitHub Actions workflow command (`::error`, `::add-mask::`,
//! `::stop-commands::`), and one field of megabytes is one line of megabytes. Pure.

/// `text` with every path inside one of perfgate's per-run temporary directories
/// (`<temp>/perfgate-<pid>-<16 hex>/`, where default server logs live) shortened to
/// `<runner temp>/`: in a PR comment such a path names a file on a runner that is gone.
pub fn without_run_dir(text: &str, temp: &str) -> String {
    let prefix = format!("{}/perfgate-", temp.trim_end_matches('/'));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find(&prefix) {
        let after = &rest[i + prefix.len()..];
        // <pid>-<16 hex>/
        let name_len = after.find('/').filter(|&n| {
            let name = &after[..n];
            name.split_once('-').is_some_and(|(pid, hex)| {
                !pid.is_empty()
                    && pid.chars().all(|c| c.is_ascii_digit())
                    && hex.len() == 16
                    && hex.chars().all(|c| c.is_ascii_hexdigit())
            })
        });
        match name_len {
            Some(n) => {
                out.push_str(&rest[..i]);
                out.push_str("<runner temp>/");
                rest = &after[n + 1..];
            }
            None => {
                out.push_str(&rest[..i + prefix.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// [`without_run_dir`] for this machine's temporary directory.
pub fn without_this_run_dir(text: &str) -> String {
    without_run_dir(text, &std::env::temp_dir().to_string_lossy())
}

/// The longest field shown, in characters; a longer one is cut and says how long it was.
pub const MAX_FIELD_CHARS: usize = 2000;

/// `s` as [`bounded`] with [`MAX_FIELD_CHARS`].
pub fn field(s: &str) -> String {
    bounded(s, MAX_FIELD_CHARS)
}

/// `s` safe to print: control characters (ESC, CR, BEL, backspace, the C1 range, DEL) and the
/// Unicode bidirectional controls dropped, line breaks and tabs kept; every line whose first
/// non-blank characters are `::` made `: :` (no workflow command); at most `max` characters
/// kept, then `… (N characters)` with `s`'s length. Text with none of these is returned as is.
pub fn bounded(s: &str, max: usize) -> String {
    let total = s.chars().count();
    let mut out = String::with_capacity(s.len().min(max.saturating_mul(4)) + 32);
    for c in s.chars().take(max) {
        if c == '\n' || c == '\t' || !(c.is_control() || is_bidi_control(c)) {
            out.push(c);
        }
    }
    if out.contains("::") {
        out = out
            .split('\n')
            .map(neutralise_command)
            .collect::<Vec<_>>()
            .join("\n");
    }
    if total > max {
        out.push_str(&format!("… ({total} characters)"));
    }
    out
}

/// A line that would start a workflow command (`::name ...::`), made plain text.
fn neutralise_command(line: &str) -> String {
    let body = line.trim_start();
    match body.strip_prefix("::") {
        Some(rest) => format!("{}: :{rest}", &line[..line.len() - body.len()]),
        None => line.to_string(),
    }
}

/// The characters that reorder displayed text (embeddings, overrides, isolates, marks).
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{200E}' | '\u{200F}' | '\u{061C}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged() {
        let s = "could not connect to 127.0.0.1:9: Connection refused; base http://[::1]:8/v1";
        assert_eq!(field(s), s);
        assert_eq!(field("a\n\tb"), "a\n\tb");
    }

    #[test]
    fn escapes_and_workflow_commands_are_neutralised() {
        assert_eq!(
            field("x\u{1b}]0;pwned\u{7}\u{1b}[2J\ry\u{9b}z\u{202e}"),
            "x]0;pwned[2Jyz"
        );
        assert_eq!(field("::error title=x::boom"), ": :error title=x::boom");
        assert_eq!(
            field("fine\n  ::add-mask::secret\n::stop-commands::t"),
            "fine\n  : :add-mask::secret\n: :stop-commands::t"
        );
        // an escape between the colons does not help
        assert_eq!(field("\u{1b}:\u{7}:warning::x"), ": :warning::x");
    }

    #[test]
    fn long_fields_are_cut_with_their_length() {
        let s = "AB".repeat(5_000);
        let f = bounded(&s, 8);
        assert_eq!(f, "ABABABAB… (10000 characters)");
        assert_eq!(
            field(&s).chars().count(),
            MAX_FIELD_CHARS + "… (10000 characters)".chars().count()
        );
    }

    #[test]
    fn a_per_run_temp_dir_is_shortened_and_nothing_else() {
        let t = "log /tmp/perfgate-28305-0426eba280c63aaa/server-1-76ec.log, last 3 line(s)";
        assert_eq!(
            without_run_dir(t, "/tmp"),
            "log <runner temp>/server-1-76ec.log, last 3 line(s)"
        );
        assert_eq!(
            without_run_dir(t, "/tmp/"),
            "log <runner temp>/server-1-76ec.log, last 3 line(s)"
        );
        // not perfgate's own run directory: unchanged
        for keep in [
            "/tmp/perfgate-x/a.log",
            "/tmp/perfgate-12-abc/a.log",
            "/var/tmp/perfgate-1-0426eba280c63aaa",
            "logs/perfgate-server.log",
        ] {
            assert_eq!(without_run_dir(keep, "/tmp"), keep);
        }
    }
}
