//! Structured output and tool calls (docs/metrics.md "Structured output and tool calls"): what a
//! request asked for ([`Expect`], read from the body perfgate sends: `response_format`, `tools`),
//! what its stream answered ([`Collector`]: the answer text, the tool calls' names and argument
//! fragments, bounded), and whether that parsed ([`Parsed`]). Pure.
//!
//! The schema check is a documented subset of JSON Schema, not a validator: a schema's `type`
//! (one name or a list; `integer` is a number without a fraction), an object's `required` keys,
//! and its `properties`, each checked by the same rules where the value has the key (nested
//! objects included). `enum`, `items`, `pattern`, bounds, `$ref`, `anyOf` and the rest are not
//! checked: an output they would refuse still parses here.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// The most answer text and tool-call arguments kept per request; beyond it the output is not
/// judged (`too_large`).
pub const MAX_COLLECTED: usize = 1 << 20;

/// What a request asked the model to produce, as its body says.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// `response_format: {type: json_object}` (no schema) or `{type: json_schema, json_schema:
    /// {schema: ...}}`: the answer text is one JSON value (matching the schema).
    Json { schema: Option<Value> },
    /// `tools` (and a `tool_choice` other than `none`): at least one tool call, each naming a
    /// tool offered, its arguments a JSON object matching that tool's `parameters`.
    ToolCall {
        /// Each offered function's name and `parameters` schema.
        functions: BTreeMap<String, Option<Value>>,
    },
}

impl Expect {
    /// What the chat body `body` asks for; `None` for a plain answer.
    pub fn from_body(body: &Value) -> Option<Expect> {
        let tools = body
            .get("tools")
            .and_then(Value::as_array)
            .filter(|t| !t.is_empty());
        if let Some(tools) = tools {
            if body.get("tool_choice").and_then(Value::as_str) != Some("none") {
                let functions = tools
                    .iter()
                    .filter_map(|t| {
                        let f = t.get("function")?;
                        let name = f.get("name")?.as_str()?.to_string();
                        Some((name, f.get("parameters").cloned()))
                    })
                    .collect();
                return Some(Expect::ToolCall { functions });
            }
        }
        let rf = body.get("response_format")?;
        match rf.get("type")?.as_str()? {
            "json_object" => Some(Expect::Json { schema: None }),
            "json_schema" => Some(Expect::Json {
                schema: rf.get("json_schema").and_then(|j| j.get("schema")).cloned(),
            }),
            _ => None,
        }
    }
}

/// One streamed piece of a tool call (`delta.tool_calls[i]`): its index, and the name and
/// argument fragment it carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolDelta {
    pub index: u64,
    pub name: Option<String>,
    pub arguments: Option<String>,
}

/// Whether a request's structured output or tool call parsed, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parsed {
    /// It parsed (and matched the schema's checked subset).
    Ok,
    /// The answer text is not one JSON value.
    NotJson,
    /// JSON, but not of the schema's type, without a required key, or a property of another type.
    SchemaMismatch,
    /// Tools were offered, the answer called none.
    NoToolCall,
    /// A call names no tool that was offered.
    UnknownTool,
    /// A call's arguments are not a JSON object.
    ArgumentsNotJson,
    /// A call's arguments do not match its tool's `parameters`.
    ArgumentsMismatch,
    /// More than [`MAX_COLLECTED`] bytes of output: not judged.
    TooLarge,
}

impl Parsed {
    /// Stable snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Parsed::Ok => "ok",
            Parsed::NotJson => "not_json",
            Parsed::SchemaMismatch => "schema_mismatch",
            Parsed::NoToolCall => "no_tool_call",
            Parsed::UnknownTool => "unknown_tool",
            Parsed::ArgumentsNotJson => "arguments_not_json",
            Parsed::ArgumentsMismatch => "arguments_mismatch",
            Parsed::TooLarge => "too_large",
        }
    }
}

/// A request's answer text and tool calls as they stream, bounded by [`MAX_COLLECTED`].
#[derive(Debug, Clone, PartialEq)]
pub struct Collector {
    expect: Expect,
    text: String,
    /// By call index: name, arguments.
    calls: BTreeMap<u64, (String, String)>,
    kept: usize,
    overflow: bool,
}

impl Collector {
    pub fn new(expect: Expect) -> Collector {
        Collector {
            expect,
            text: String::new(),
            calls: BTreeMap::new(),
            kept: 0,
            overflow: false,
        }
    }

    fn room(&mut self, n: usize) -> bool {
        if self.overflow || self.kept + n > MAX_COLLECTED {
            self.overflow = true;
            return false;
        }
        self.kept += n;
        true
    }

    /// Answer text, in stream order.
    pub fn push_text(&mut self, t: &str) {
        if self.room(t.len()) {
            self.text.push_str(t);
        }
    }

    /// A tool-call piece; at most 128 calls are kept apart (a larger index is too large).
    pub fn push_tool(&mut self, d: &ToolDelta) {
        let n =
            d.name.as_ref().map_or(0, String::len) + d.arguments.as_ref().map_or(0, String::len);
        if d.index >= 128 {
            self.overflow = true;
        }
        if !self.room(n) {
            return;
        }
        let call = self.calls.entry(d.index).or_default();
        if let Some(name) = &d.name {
            call.0.push_str(name);
        }
        if let Some(a) = &d.arguments {
            call.1.push_str(a);
        }
    }

    /// Whether what was collected parsed.
    pub fn outcome(&self) -> Parsed {
        if self.overflow {
            return Parsed::TooLarge;
        }
        match &self.expect {
            Expect::Json { schema } => match serde_json::from_str::<Value>(self.text.trim()) {
                Err(_) => Parsed::NotJson,
                Ok(v) if schema.as_ref().is_some_and(|s| !matches(s, &v)) => Parsed::SchemaMismatch,
                Ok(_) => Parsed::Ok,
            },
            Expect::ToolCall { functions } => {
                if self.calls.is_empty() {
                    return Parsed::NoToolCall;
                }
                for (name, args) in self.calls.values() {
                    let Some(params) = functions.get(name) else {
                        return Parsed::UnknownTool;
                    };
                    // an empty argument string is an empty object (no parameters)
                    let args = if args.trim().is_empty() {
                        "{}"
                    } else {
                        args.trim()
                    };
                    match serde_json::from_str::<Value>(args) {
                        Ok(v @ Value::Object(_)) => {
                            if params.as_ref().is_some_and(|s| !matches(s, &v)) {
                                return Parsed::ArgumentsMismatch;
                            }
                        }
                        _ => return Parsed::ArgumentsNotJson,
                    }
                }
                Parsed::Ok
            }
        }
    }
}

/// The checked subset of JSON Schema (see the module doc): `type`, `required`, `properties`.
pub fn matches(schema: &Value, v: &Value) -> bool {
    let Some(s) = schema.as_object() else {
        return true; // `true`, `{}`-like or not a schema: nothing checked
    };
    let type_ok = |t: &Value| match t.as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("number") => v.is_number(),
        Some("integer") => v.as_f64().is_some_and(|x| x.fract() == 0.0),
        Some("boolean") => v.is_boolean(),
        Some("null") => v.is_null(),
        _ => true,
    };
    match s.get("type") {
        Some(Value::Array(ts)) if !ts.iter().any(type_ok) => return false,
        Some(t @ Value::String(_)) if !type_ok(t) => return false,
        _ => {}
    }
    let Some(obj) = v.as_object() else {
        return true;
    };
    if let Some(req) = s.get("required").and_then(Value::as_array) {
        if req
            .iter()
            .filter_map(Value::as_str)
            .any(|k| !obj.contains_key(k))
        {
            return false;
        }
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, ps) in props {
            if let Some(x) = obj.get(k) {
                if !matches(ps, x) {
                    return false;
                }
            }
        }
    }
    true
}

/// A run's structured outputs: how many were checked, how many parsed, and why the others did not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParseSummary {
    /// Successful requests whose output was checked.
    pub checked: usize,
    /// Of those, the ones that parsed.
    pub parsed: usize,
    /// parsed / checked.
    pub rate: f64,
    /// The others, by why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<Parsed, usize>,
}

/// The summary of a run's outcomes (`None` when none was checked).
pub fn summarize(outcomes: impl IntoIterator<Item = Parsed>) -> Option<ParseSummary> {
    let mut s = ParseSummary {
        checked: 0,
        parsed: 0,
        rate: 0.0,
        failures: BTreeMap::new(),
    };
    for o in outcomes {
        s.checked += 1;
        if o == Parsed::Ok {
            s.parsed += 1;
        } else {
            *s.failures.entry(o).or_default() += 1;
        }
    }
    (s.checked > 0).then(|| ParseSummary {
        rate: s.parsed as f64 / s.checked as f64,
        ..s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool_body(choice: Option<&str>) -> Value {
        let mut b = json!({"tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]});
        if let Some(c) = choice {
            b["tool_choice"] = json!(c);
        }
        b
    }

    #[test]
    fn what_a_body_asks_for() {
        assert!(matches!(
            Expect::from_body(&tool_body(None)),
            Some(Expect::ToolCall { .. })
        ));
        assert_eq!(Expect::from_body(&tool_body(Some("none"))), None);
        assert_eq!(
            Expect::from_body(&json!({"response_format": {"type": "json_object"}})),
            Some(Expect::Json { schema: None })
        );
        assert_eq!(
            Expect::from_body(
                &json!({"response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}})
            ),
            Some(Expect::Json {
                schema: Some(json!({"type": "object"}))
            })
        );
        assert_eq!(
            Expect::from_body(&json!({"response_format": {"type": "text"}})),
            None
        );
        assert_eq!(Expect::from_body(&json!({"messages": []})), None);
    }

    fn tool_outcome(pieces: &[(u64, Option<&str>, Option<&str>)]) -> Parsed {
        let mut c = Collector::new(Expect::from_body(&tool_body(None)).unwrap());
        for &(index, name, args) in pieces {
            c.push_tool(&ToolDelta {
                index,
                name: name.map(str::to_string),
                arguments: args.map(str::to_string),
            });
        }
        c.outcome()
    }

    #[test]
    fn tool_calls_streamed_in_pieces() {
        let ok = [
            (0, Some("weather"), Some("{\"city\": ")),
            (0, None, Some("\"Oslo\", \"days\": 3}")),
        ];
        assert_eq!(tool_outcome(&ok), Parsed::Ok);
        assert_eq!(tool_outcome(&[]), Parsed::NoToolCall);
        assert_eq!(
            tool_outcome(&[(0, Some("weather"), Some("{\"city\": \"Oslo\""))]),
            Parsed::ArgumentsNotJson
        );
        assert_eq!(
            tool_outcome(&[(0, Some("weather"), Some("[1]"))]),
            Parsed::ArgumentsNotJson
        );
        assert_eq!(
            tool_outcome(&[(0, Some("weather"), Some("{\"days\": 3}"))]),
            Parsed::ArgumentsMismatch
        );
        assert_eq!(
            tool_outcome(&[(
                0,
                Some("weather"),
                Some("{\"city\": \"Oslo\", \"days\": 2.5}")
            )]),
            Parsed::ArgumentsMismatch
        );
        assert_eq!(
            tool_outcome(&[(0, Some("news"), Some("{}"))]),
            Parsed::UnknownTool
        );
        // a second call, broken
        assert_eq!(
            tool_outcome(&[
                (0, Some("weather"), Some("{\"city\": \"Oslo\"}")),
                (1, Some("weather"), Some("{"))
            ]),
            Parsed::ArgumentsNotJson
        );
    }

    #[test]
    fn json_answers() {
        let schema = json!({"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}, "n": {"type": ["integer", "null"]}, "inner": {"type": "object", "required": ["x"]}}});
        let run = |schema: Option<Value>, text: &[&str]| {
            let mut c = Collector::new(Expect::Json { schema });
            for t in text {
                c.push_text(t);
            }
            c.outcome()
        };
        assert_eq!(run(None, &["{\"answer\": ", "\"yes\"}"]), Parsed::Ok);
        assert_eq!(run(None, &["{\"answer\": \"yes\""]), Parsed::NotJson);
        assert_eq!(run(None, &["```json\n{}\n```"]), Parsed::NotJson);
        let s = || Some(schema.clone());
        assert_eq!(
            run(s(), &["{\"answer\": \"yes\", \"n\": null}"]),
            Parsed::Ok
        );
        assert_eq!(run(s(), &["{\"n\": 1}"]), Parsed::SchemaMismatch);
        assert_eq!(run(s(), &["{\"answer\": 1}"]), Parsed::SchemaMismatch);
        assert_eq!(run(s(), &["[]"]), Parsed::SchemaMismatch);
        assert_eq!(
            run(s(), &["{\"answer\": \"a\", \"inner\": {\"y\": 1}}"]),
            Parsed::SchemaMismatch
        );
        let big = "x".repeat(MAX_COLLECTED);
        assert_eq!(run(None, &["\"", &big, "\""]), Parsed::TooLarge);
    }

    /// 3 ok, 1 not JSON, 1 without a tool call: 3 of 5 parsed, rate 0.6.
    #[test]
    fn a_run_summary() {
        let s = summarize([
            Parsed::Ok,
            Parsed::NotJson,
            Parsed::Ok,
            Parsed::NoToolCall,
            Parsed::Ok,
        ])
        .unwrap();
        assert_eq!((s.checked, s.parsed), (5, 3));
        assert_eq!(s.rate, 0.6);
        assert_eq!(s.failures.get(&Parsed::NotJson), Some(&1));
        assert_eq!(summarize([]), None);
    }
}
