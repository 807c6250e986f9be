//! A baseline's text, checked before it is written: what `bless` writes is what `check` reads.
//!
//! The layout is pretty-printed JSON (one field a line, stable key order, so a bless is a
//! readable diff) except that an array of numbers stays on one line: a request's ITL points
//! one per line made a 23,000-request baseline 70 MB, above the size a check reads (issue 26).
//! The text is then held against the reader's own rules: at most
//! [`crate::limits::MAX_BASELINE_BYTES`] (counted while writing, so a too large baseline is
//! never held in memory whole) and [`super::parse`] must accept it, so a figure a check would
//! refuse (a negative or non-finite time, a time above a day) stops the bless, not every later
//! check.

use super::Baseline;
use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use std::io::{self, Write};

/// Why a baseline is not written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unwritable {
    /// Its text would be larger than a check reads.
    #[error("its baseline would be {} ({bytes} bytes), above the {} a check reads (limits::MAX_BASELINE_BYTES): bless fewer runs (--runs) or fewer load.samples", crate::units::fmt_bytes(*bytes), crate::units::fmt_bytes(*limit))]
    TooLarge { bytes: u64, limit: u64 },
    /// Its text would not read back as a baseline (the reader's message, naming the field).
    #[error("the baseline would not read back: {0}")]
    Unreadable(String),
}

/// The text of `b` as it will be written (trailing newline included), once it is known to be
/// at most [`crate::limits::MAX_BASELINE_BYTES`] and to read back with [`super::parse`].
pub fn encode(b: &Baseline) -> Result<String, Unwritable> {
    encode_within(b, crate::limits::MAX_BASELINE_BYTES)
}

/// [`encode`] with another size limit (tests).
pub fn encode_within(b: &Baseline, limit: u64) -> Result<String, Unwritable> {
    let mut w = Capped {
        kept: Vec::new(),
        seen: 0,
        limit,
    };
    let mut ser = serde_json::Serializer::with_formatter(&mut w, Layout::default());
    b.serialize(&mut ser)
        .map_err(|e| Unwritable::Unreadable(e.to_string()))?;
    let _ = w.write_all(b"\n");
    if w.seen > limit {
        return Err(Unwritable::TooLarge {
            bytes: w.seen,
            limit,
        });
    }
    let text = String::from_utf8(w.kept).map_err(|e| Unwritable::Unreadable(e.to_string()))?;
    super::parse(&text, &Default::default()).map_err(Unwritable::Unreadable)?;
    Ok(text)
}

/// Keeps the first `limit` bytes and counts the rest.
struct Capped {
    kept: Vec<u8>,
    seen: u64,
    limit: u64,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.seen += buf.len() as u64;
        if self.seen <= self.limit {
            self.kept.extend_from_slice(buf);
        } else {
            self.kept = Vec::new();
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An open array or object.
enum Frame {
    /// An array: `inline` once its first item showed whether it holds scalars (one line) or
    /// containers (one item a line); `pending` the separator owed to the next item (`true`
    /// for the first).
    Array {
        inline: Option<bool>,
        pending: Option<bool>,
    },
    /// An object, and whether it has a field yet.
    Object { has_field: bool },
}

/// Two-space pretty-printing with arrays of scalars on one line (`[1.5, 2.25, 3.0]`).
#[derive(Default)]
struct Layout {
    stack: Vec<Frame>,
}

impl Layout {
    fn newline<W: ?Sized + Write>(&self, w: &mut W) -> io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..self.stack.len() {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    /// Writes the separator an array owes before its next item, which is a scalar or not.
    fn item<W: ?Sized + Write>(&mut self, w: &mut W, scalar: bool) -> io::Result<()> {
        let Some(Frame::Array { inline, pending }) = self.stack.last_mut() else {
            return Ok(());
        };
        let Some(first) = pending.take() else {
            return Ok(());
        };
        let one_line = *inline.get_or_insert(scalar);
        if one_line {
            if !first {
                w.write_all(b", ")?;
            }
            Ok(())
        } else {
            if !first {
                w.write_all(b",")?;
            }
            self.newline(w)
        }
    }
}

macro_rules! scalar {
    ($($name:ident: $t:ty),*) => {$(
        fn $name<W: ?Sized + Write>(&mut self, w: &mut W, v: $t) -> io::Result<()> {
            self.item(w, true)?;
            CompactFormatter.$name(w, v)
        }
    )*};
}

impl Formatter for Layout {
    fn write_null<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.item(w, true)?;
        w.write_all(b"null")
    }
    scalar!(write_bool: bool, write_i8: i8, write_i16: i16, write_i32: i32, write_i64: i64,
        write_u8: u8, write_u16: u16, write_u32: u32, write_u64: u64, write_f32: f32,
        write_f64: f64, write_i128: i128, write_u128: u128, write_number_str: &str);

    fn begin_string<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.item(w, true)?;
        w.write_all(b"\"")
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.item(w, false)?;
        self.stack.push(Frame::Array {
            inline: None,
            pending: None,
        });
        w.write_all(b"[")
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, _: &mut W, first: bool) -> io::Result<()> {
        if let Some(Frame::Array { pending, .. }) = self.stack.last_mut() {
            *pending = Some(first);
        }
        Ok(())
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if let Some(Frame::Array {
            inline: Some(false),
            ..
        }) = self.stack.pop()
        {
            self.newline(w)?;
        }
        w.write_all(b"]")
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.item(w, false)?;
        self.stack.push(Frame::Object { has_field: false });
        w.write_all(b"{")
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if let Some(Frame::Object { has_field }) = self.stack.last_mut() {
            *has_field = true;
        }
        if !first {
            w.write_all(b",")?;
        }
        self.newline(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, _: &mut W) -> io::Result<()> {
        Ok(())
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        if let Some(Frame::Object { has_field: true }) = self.stack.pop() {
            self.newline(w)?;
        }
        w.write_all(b"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(v: &serde_json::Value) -> String {
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, Layout::default());
        v.serialize(&mut ser).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// A baseline of `runs` runs of `per_run` requests, each with `points` ITL points.
    fn big(runs: usize, per_run: usize, points: usize) -> Baseline {
        let record = |i: usize| {
            serde_json::json!({
                "ttft_ms": 100.0 + (i % 97) as f64 * 0.125,
                "tpot_ms": 10.125,
                "e2e_ms": 1500.5,
                "itl_ms": {"n": points, "p50": 10.125, "p99": 12.5, "max": 13.75,
                    "points": (0..points).map(|k| 10.0 + (k % 31) as f64 * 0.125).collect::<Vec<_>>()},
                "output_tokens": points + 1,
                "token_source": "usage",
            })
        };
        let run = |r: usize| {
            serde_json::json!({"started_at": "2026-01-01T00:00:00Z", "wall_ms": 1000.0,
                "records": (0..per_run).map(|i| record(r * per_run + i)).collect::<Vec<_>>()})
        };
        let mut v = serde_json::json!({
            "schema_version": 1, "perfgate_version": "0", "metrics_version": 1,
            "scenario": {"name": "big", "fingerprint": "f", "config": {}},
            "created_at": "2026-01-01T00:00:00Z",
            "environment": {"model": null, "system_fingerprint": null, "server": null, "host": null},
            "workload": {"prompt_hash": "h", "max_tokens": 140, "fixed_length": false,
                "token_source": "usage", "prompt_tokens_p50": null, "output_tokens_p50": 141.0},
            "runs": (0..runs).map(run).collect::<Vec<_>>(),
            "summary": {},
        });
        let mut b: Baseline = serde_json::from_value(v.take()).unwrap();
        let all: Vec<_> = b.records().cloned().collect();
        b.summary = super::super::summaries(&all);
        b
    }

    /// Issue 26: 4,600 samples x 5 runs x 140 tokens (128 ITL points kept per request) was
    /// blessed as 70 MB of pretty-printed JSON, which every later check refused as larger than
    /// the 64 MiB it reads. The same baseline is now written with its points on one line, well
    /// within the limit, and reads back.
    #[test]
    fn a_baseline_a_check_would_refuse_is_never_written() {
        let b = big(5, 4_600, 128);
        let pretty = serde_json::to_string_pretty(&b).unwrap().len() as u64;
        assert!(
            pretty > crate::limits::MAX_BASELINE_BYTES,
            "the old layout: {pretty} bytes"
        );
        let text = encode(&b).unwrap();
        let n = text.len() as u64;
        assert!(n <= crate::limits::MAX_BASELINE_BYTES, "{n} bytes");
        assert!(n * 2 < pretty, "{n} vs {pretty} bytes");
        assert_eq!(super::super::parse(&text, &Default::default()).unwrap(), b);
        // Larger than the limit: refused with its size, nothing held beyond the limit.
        let e = encode_within(&b, n - 1).unwrap_err();
        assert_eq!(
            e,
            Unwritable::TooLarge {
                bytes: n,
                limit: n - 1
            }
        );
        assert!(e.to_string().starts_with("its baseline would be "), "{e}");
        assert!(
            e.to_string().contains(&format!("({n} bytes), above the ")),
            "{e}"
        );
    }

    /// Issue 26: `ttft_ms: -1` (from `bless --from` records) was written, then refused by
    /// every check: the text is read back with the check's own parser before it is written.
    #[test]
    fn figures_a_check_refuses_stop_the_write() {
        let mut b = big(1, 20, 2);
        b.runs[0].records[3].ttft_ms = Some(-1.0);
        let all: Vec<_> = b.records().cloned().collect();
        b.summary = super::super::summaries(&all);
        assert_eq!(
            encode(&b).unwrap_err(),
            Unwritable::Unreadable(
                "runs[0].records[3].ttft_ms is -1: it must be a number of ms >= 0".into()
            )
        );
        b.environment
            .server_metrics
            .insert("m".into(), f64::INFINITY);
        assert!(matches!(encode(&b), Err(Unwritable::Unreadable(_))));
    }

    #[test]
    fn numbers_stay_on_one_line_and_objects_are_pretty() {
        let v = serde_json::json!({"a": [1.5, 2.0, 3], "b": [{"c": []}, {"d": {}}], "e": "x", "f": [], "g": {}});
        let text = layout(&v);
        assert_eq!(
            text,
            "{\n  \"a\": [1.5, 2.0, 3],\n  \"b\": [\n    {\n      \"c\": []\n    },\n    {\n      \"d\": {}\n    }\n  ],\n  \"e\": \"x\",\n  \"f\": [],\n  \"g\": {}\n}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
    }
}
