//! Recorded stream cases (`tests/cases/*.yaml`): what a server wrote and when, plus the result
//! perfgate must measure from it. [`crate::sim::SimServer::start_replay`] serves one over real HTTP.
//!
//! The format is documented in `tests/cases/README.md`. Unknown keys are errors (a typo in a
//! case must not silently weaken a test); `notes` is allowed at the top level and in `expect`.
//! All times are ms after the request arrived at the server.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

/// Largest time accepted for `at_ms` / `close_at_ms`, in ms (one hour).
pub const MAX_REPLAY_MS: f64 = 3_600_000.0;

/// One recorded stream: the HTTP status and headers, then the body bytes with their timing.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayCase {
    /// The case file this recording comes from (e.g. `03-role-only-first-chunk.md`).
    #[serde(default)]
    pub source: Option<String>,
    /// Which stream of the case (e.g. `a`), when it has several.
    #[serde(default)]
    pub variant: Option<String>,
    /// `openai-chat` | `openai-completions` | `anthropic-messages`; `None` means `openai-chat`.
    #[serde(default)]
    pub api: Option<String>,
    /// HTTP status the server answers with (200..=599).
    pub status: u16,
    /// Response headers (names case-insensitive). `content-length` and `transfer-encoding` are
    /// ignored when serving: the body is always chunked, without a Content-Length.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// What the server writes, in order of non-decreasing `at_ms`.
    #[serde(default)]
    pub reads: Vec<ReplayRead>,
    /// When the server ends the body, ms after the request arrived; default: right after the
    /// last read. Must not be before the last read.
    #[serde(default)]
    pub close_at_ms: Option<f64>,
    /// `true`: drop the connection at `close_at_ms` without the final empty chunk, so the client
    /// sees an incomplete body. Default `false`.
    #[serde(default)]
    pub abort: Option<bool>,
    /// What perfgate must measure from this stream.
    #[serde(default)]
    pub expect: Option<ReplayExpect>,
    /// Free text for humans.
    #[serde(default)]
    pub notes: Option<String>,
}

/// One write of the server: `at_ms` after the request arrived, exactly one of `text` or `hex`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRead {
    /// When the bytes are written, ms after the request arrived.
    pub at_ms: f64,
    /// The bytes as UTF-8 text.
    #[serde(default)]
    pub text: Option<String>,
    /// The bytes in hex (two digits per byte; spaces allowed), for bytes that are not UTF-8.
    #[serde(default)]
    pub hex: Option<String>,
}

/// The result perfgate must measure from a case (times in ms from t0, counts in tokens).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayExpect {
    /// Whether the request is a success.
    pub success: bool,
    /// When `success` is false: the failure class in snake_case (`connect`, `http_status`,
    /// `in_band_error`, `not_sse`, `no_token`, `truncated`, `timeout_idle`, ...).
    #[serde(default)]
    pub failure_class: Option<String>,
    /// A substring the failure message must contain.
    #[serde(default)]
    pub message_contains: Option<String>,
    /// TTFT (first token-bearing event, any channel), ms; `None` when undefined.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// Time to first answer-text/tool-call event when it differs from TTFT, ms.
    #[serde(default)]
    pub ttfot_ms: Option<f64>,
    /// TPOT = (t_last - t_first) / (output_tokens - 1), ms.
    #[serde(default)]
    pub tpot_ms: Option<f64>,
    /// E2E = t_last, arrival of the last token-bearing event, ms.
    #[serde(default)]
    pub e2e_ms: Option<f64>,
    /// `[DONE]` or end of body, ms.
    #[serde(default)]
    pub t_done_ms: Option<f64>,
    /// Output tokens (usage or counted events), tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// `usage` or `events`.
    #[serde(default)]
    pub token_source: Option<String>,
    /// Every gap between successive token-bearing events, ms (per token when the stream carries
    /// cumulative usage on every token event, as perfgate measures it).
    #[serde(default)]
    pub itl_ms: Option<Vec<f64>>,
    /// Free text for humans.
    #[serde(default)]
    pub notes: Option<String>,
}

/// Why a replay case is refused: the field at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplayError {
    /// Not YAML of a replay case (serde-saphyr's message, with its line).
    #[error("invalid replay case: {0}")]
    Yaml(String),
    /// `status` outside 200..=599.
    #[error("status {0} must be in 200..=599")]
    Status(u16),
    /// A header name that HTTP does not allow.
    #[error("headers: {name:?} is not a valid header name")]
    HeaderName {
        /// The name as written.
        name: String,
    },
    /// A header value that HTTP does not allow.
    #[error("headers: the value of {name:?} is not a valid header value")]
    HeaderValue {
        /// The header's name as written.
        name: String,
    },
    /// `reads[index].at_ms` negative, not finite or above [`MAX_REPLAY_MS`].
    #[error("reads[{index}].at_ms = {at} must be in [0, {MAX_REPLAY_MS}] ms")]
    ReadTime {
        /// Which read.
        index: usize,
        /// Its `at_ms`.
        at: f64,
    },
    /// `reads[index]` before the read above it.
    #[error("reads[{index}].at_ms = {at} is before the previous read ({prev} ms); reads must be in time order")]
    ReadOrder {
        /// Which read.
        index: usize,
        /// Its `at_ms`.
        at: f64,
        /// The previous read's `at_ms`.
        prev: f64,
    },
    /// `reads[index].hex` is not hex.
    #[error("reads[{index}].hex: {source}")]
    Hex {
        /// Which read.
        index: usize,
        /// What is wrong with the digits.
        #[source]
        source: HexError,
    },
    /// `reads[index]` has both `text` and `hex`.
    #[error("reads[{index}] has both `text` and `hex`; give one")]
    TextAndHex {
        /// Which read.
        index: usize,
    },
    /// `reads[index]` has neither `text` nor `hex`.
    #[error("reads[{index}] needs `text` or `hex`")]
    NoBody {
        /// Which read.
        index: usize,
    },
    /// `close_at_ms` negative, not finite or above [`MAX_REPLAY_MS`].
    #[error("close_at_ms = {close} must be in [0, {MAX_REPLAY_MS}] ms")]
    CloseTime {
        /// Its value.
        close: f64,
    },
    /// `close_at_ms` before the last read.
    #[error("close_at_ms = {close} is before the last read ({last} ms)")]
    CloseBeforeRead {
        /// Its value.
        close: f64,
        /// The last read's `at_ms`.
        last: f64,
    },
    /// `api` is not one of perfgate's dialects (the message lists them).
    #[error("api {0}")]
    Api(String),
}

/// Why a `hex:` read does not decode.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HexError {
    /// An odd number of digits (whitespace ignored).
    #[error("{0:?} has an odd number of hex digits")]
    Odd(String),
    /// A character that is not a hex digit.
    #[error("{0:?} is not hex")]
    NotHex(String),
}

impl ReplayCase {
    /// Parses and checks a case from YAML text (see [`ReplayCase::validate`]).
    pub fn from_yaml(s: &str) -> Result<ReplayCase, ReplayError> {
        let case: ReplayCase =
            serde_saphyr::from_str(s).map_err(|e| ReplayError::Yaml(e.to_string()))?;
        case.validate()?;
        Ok(case)
    }

    /// Reads and parses a case file; errors name the file. The replay format is the test
    /// corpus's (`tests/cases/`), whose tests read the message as text: it stays a `String`.
    pub fn load(path: &Path) -> Result<ReplayCase, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read replay case {}: {e}", path.display()))?;
        ReplayCase::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The body writes as (at_ms, bytes), in order. Errors when a read has both or neither of
    /// `text`/`hex`, bad hex, or an `at_ms` that is negative, not finite, over one hour or
    /// before the previous read's.
    pub fn read_bytes(&self) -> Result<Vec<(f64, Vec<u8>)>, ReplayError> {
        let mut out = Vec::with_capacity(self.reads.len());
        let mut prev = 0.0_f64;
        for (i, r) in self.reads.iter().enumerate() {
            let at = r.at_ms;
            if !at.is_finite() || !(0.0..=MAX_REPLAY_MS).contains(&at) {
                return Err(ReplayError::ReadTime { index: i, at });
            }
            if at < prev {
                return Err(ReplayError::ReadOrder { index: i, at, prev });
            }
            prev = at;
            let bytes = match (&r.text, &r.hex) {
                (Some(t), None) => t.as_bytes().to_vec(),
                (None, Some(h)) => {
                    decode_hex(h).map_err(|source| ReplayError::Hex { index: i, source })?
                }
                (Some(_), Some(_)) => return Err(ReplayError::TextAndHex { index: i }),
                (None, None) => return Err(ReplayError::NoBody { index: i }),
            };
            out.push((at, bytes));
        }
        Ok(out)
    }

    /// When the body ends, ms after the request arrived: `close_at_ms`, else the last read's
    /// `at_ms`, else 0.
    pub fn end_ms(&self) -> f64 {
        self.close_at_ms
            .unwrap_or_else(|| self.reads.last().map_or(0.0, |r| r.at_ms))
    }

    /// Checks everything serving needs: status in 200..=599, header names and values valid
    /// for HTTP, reads (see [`ReplayCase::read_bytes`]), `close_at_ms` not before the last
    /// read, `api` one of [`crate::api::Api::ALL`].
    pub fn validate(&self) -> Result<(), ReplayError> {
        if !(200..=599).contains(&self.status) {
            return Err(ReplayError::Status(self.status));
        }
        for (name, value) in &self.headers {
            hyper::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ReplayError::HeaderName { name: name.clone() })?;
            hyper::header::HeaderValue::from_str(value)
                .map_err(|_| ReplayError::HeaderValue { name: name.clone() })?;
        }
        let reads = self.read_bytes()?;
        if let Some(close) = self.close_at_ms {
            if !close.is_finite() || !(0.0..=MAX_REPLAY_MS).contains(&close) {
                return Err(ReplayError::CloseTime { close });
            }
            if let Some((last, _)) = reads.last() {
                if close < *last {
                    return Err(ReplayError::CloseBeforeRead { close, last: *last });
                }
            }
        }
        if let Some(api) = &self.api {
            api.parse::<crate::api::Api>().map_err(ReplayError::Api)?;
        }
        Ok(())
    }
}

fn decode_hex(h: &str) -> Result<Vec<u8>, HexError> {
    let digits: Vec<u8> = h.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err(HexError::Odd(h.to_string()));
    }
    digits
        .chunks(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16);
            let lo = (pair[1] as char).to_digit(16);
            match (hi, lo) {
                (Some(hi), Some(lo)) => Ok((hi * 16 + lo) as u8),
                _ => Err(HexError::NotHex(h.to_string())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const README_CASE: &str = r#"
source: 03-role-only-first-chunk.md   # the case file it comes from
variant: a
api: openai-chat
status: 200
headers:
  content-type: text/event-stream
reads:
  - at_ms: 5
    text: "data: {\"choices\":[]}\n\n"
  - at_ms: 280
    hex: "e4bd"
close_at_ms: 296
abort: false
expect:
  success: true
  failure_class: null
  message_contains: null
  ttft_ms: 214
  ttfot_ms: null
  tpot_ms: 20
  e2e_ms: 274
  t_done_ms: 295
  output_tokens: 4
  token_source: events
  itl_ms: [20, 20, 20]
notes: free text
"#;

    #[test]
    fn parses_readme_example() {
        let c = ReplayCase::from_yaml(README_CASE).unwrap();
        assert_eq!(c.source.as_deref(), Some("03-role-only-first-chunk.md"));
        assert_eq!(c.status, 200);
        assert_eq!(c.headers["content-type"], "text/event-stream");
        assert_eq!(c.close_at_ms, Some(296.0));
        assert_eq!(c.abort, Some(false));
        let e = c.expect.clone().unwrap();
        assert!(e.success);
        assert_eq!(e.failure_class, None);
        assert_eq!(e.ttft_ms, Some(214.0));
        assert_eq!(e.ttfot_ms, None);
        assert_eq!(e.output_tokens, Some(4));
        assert_eq!(e.itl_ms, Some(vec![20.0, 20.0, 20.0]));
        let reads = c.read_bytes().unwrap();
        assert_eq!(reads[0], (5.0, b"data: {\"choices\":[]}\n\n".to_vec()));
        assert_eq!(reads[1], (280.0, vec![0xe4, 0xbd]));
        assert_eq!(c.end_ms(), 296.0);
    }

    #[test]
    fn rejects_unknown_keys() {
        let bad = README_CASE.replace("notes: free text", "note: typo");
        let e = ReplayCase::from_yaml(&bad).unwrap_err().to_string();
        assert!(e.contains("note"), "{e}");
        let bad = README_CASE.replace("token_source: events", "token_src: events");
        assert!(ReplayCase::from_yaml(&bad).is_err());
        let bad = README_CASE.replace("hex: \"e4bd\"", "hex: \"e4bd\"\n    at: 3");
        assert!(ReplayCase::from_yaml(&bad).is_err());
    }

    #[test]
    fn rejects_bad_reads_and_times() {
        for (from, to) in [
            ("hex: \"e4bd\"", "hex: \"e4b\""),
            ("hex: \"e4bd\"", "hex: \"zz\""),
            ("hex: \"e4bd\"", "hex: \"e4bd\"\n    text: x"),
            ("at_ms: 280", "at_ms: 2"),
            ("at_ms: 5", "at_ms: -5"),
            ("close_at_ms: 296", "close_at_ms: 100"),
            ("status: 200", "status: 99"),
            ("api: openai-chat", "api: grpc"),
            ("content-type: text", "bad header: text"),
        ] {
            let bad = README_CASE.replace(from, to);
            assert_ne!(bad, README_CASE, "{from}");
            assert!(ReplayCase::from_yaml(&bad).is_err(), "{to} accepted");
        }
    }

    #[test]
    fn minimal_case_and_defaults() {
        let c = ReplayCase::from_yaml("status: 500\n").unwrap();
        assert!(c.reads.is_empty());
        assert_eq!(c.end_ms(), 0.0);
        assert!(c.expect.is_none());
        let c =
            ReplayCase::from_yaml("status: 200\nreads:\n  - at_ms: 7\n    hex: 00 ff\n").unwrap();
        assert_eq!(c.read_bytes().unwrap(), vec![(7.0, vec![0, 255])]);
        assert_eq!(c.end_ms(), 7.0);
    }

    #[test]
    fn load_names_the_file() {
        let e = ReplayCase::load(Path::new("/nonexistent/case.yaml")).unwrap_err();
        assert!(e.contains("/nonexistent/case.yaml"), "{e}");
    }
}
