//! perfgate: a CI regression gate for LLM inference latency.
//!
//! Data flows one way: config -> runner (client, SSE decoder) -> records -> stats -> gate ->
//! report. `sim` is the built-in simulator used by the quickstart and the tests.

pub mod ab;
pub mod api;
pub mod assess;
pub mod baseline;
pub mod bless;
pub mod cache;
pub mod calibrate;
pub mod cancel;
pub mod check;
pub mod cli;
pub mod client;
pub mod clock;
pub mod compare;
pub mod config;
pub mod deliver;
pub mod execute;
pub mod exit;
pub mod fsutil;
pub mod gate;
pub mod github;
pub mod hint;
pub mod history;
pub mod import;
pub mod init;
pub mod limits;
pub mod machine;
pub mod nights;
pub mod output_text;
pub mod prompt_fit;
pub mod record;
pub mod redact;
pub mod report;
pub mod rerender;
pub mod results;
pub mod runner;
pub mod rx_stamp;
pub mod seeded;
pub mod server;
pub mod sim;
pub mod speculative;
pub mod stats;
pub mod structured;
pub mod summary;
pub mod synthetic_prompt;
pub mod tls;
pub mod units;
pub mod validate;
pub mod verdict;
pub mod wire;
