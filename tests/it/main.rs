//! The integration tests, in one binary (each test binary links all of perfgate, which made 19 of
//! them slow to build on 2 cores). One module per former file; run one with
//! `cargo test --test it MODULE::` (e.g. `cargo test --test it report_snapshots::`).
//! tests/realserver.rs, tests/realserver_prompt.rs and tests/thirdparty.rs stay binaries of their
//! own: they start external servers and must not share the machine with the other tests.

#[path = "../support/mod.rs"]
mod support;

mod ab;
mod ab_outputs;
mod bounds;
mod cases;
mod check_outputs;
mod cli;
mod client_tuning;
mod cold_start;
mod conversation;
mod differential;
mod docs;
mod encoding;
mod gate_guards;
mod generated_lengths;
mod github_action;
mod github_cli;
mod github_fake;
mod github_prism;
mod github_support;
mod hostile;
mod import;
mod itl;
mod load_shards;
mod messages;
mod nightly;
mod open_loop;
mod paired;
mod prefix_cache;
mod prompt_set;
mod report_cli;
mod report_html;
mod report_junit;
mod report_schema;
mod report_snapshots;
mod server_failures;
mod server_hardening;
mod server_lifecycle;
mod shard;
mod sim_prefix_cache;
mod sim_schedules;
mod slo;
mod speculative;
mod steady;
mod structured;
mod trace_replay;
mod workload;
