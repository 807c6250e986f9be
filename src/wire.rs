//! Names on the wire that perfgate's streaming client and its simulator agree on: a leaf, so the
//! client reads them without knowing the simulator (and the simulator without the client).

/// Response header naming the simulator's request number (`GET /sim/timings/N`): the client
/// keeps it per request to look up the simulator's own send times (the accuracy benchmark).
pub const SIM_REQUEST_HEADER: &str = "x-perfgate-sim-request";
