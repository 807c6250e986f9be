//! The streaming client: builds requests per API dialect, sends them over HTTP, decodes SSE
//! incrementally and stamps every event on one monotonic clock.

pub mod body;
pub mod chunk;
pub mod deadline;
pub mod dialect;
pub mod http;
pub mod measure;
pub mod models;
pub mod sse;
pub mod stream;
pub mod think;
