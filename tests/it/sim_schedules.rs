//! perfgate's client against the simulator's burst and stall schedules, over real loopback
//! HTTP: the measured TTFT, TPOT and ITL match the values computed by hand from the schedule.

use perfgate::client::body;
use perfgate::client::http::StreamClient;
use perfgate::sim::{SimConfig, SimServer};
use std::time::{Duration, Instant};

/// Sends one chat request with `max_tokens` to a simulator started with `query`, returns the
/// record and the simulator's own token send offsets (ms after the request arrived).
async fn measure(query: &str, max_tokens: u32) -> (perfgate::record::RequestRecord, Vec<f64>) {
    let srv = SimServer::start(SimConfig::from_query(query).unwrap(), 0)
        .await
        .unwrap();
    let yaml = format!(
        "scenarios:\n  - name: s\n    endpoint: {{base_url: 'sim://'}}\n    request: {{prompt: hi, max_tokens: {max_tokens}, ignore_eos: true}}\n"
    );
    let sc = perfgate::config::parse_str(&yaml, "s.yaml", &|_| None)
        .unwrap()
        .remove(0);
    let client = StreamClient::new(&sc.endpoint, &srv.base_url(), 1).unwrap();
    let b = body::build(sc.endpoint.api, &sc.endpoint.model, &sc.request, true, None);
    let sent = client.send(&b, Instant::now()).await;
    let n = sent.sim_request.expect("sim header");
    // the completion id names the request, as the server's logs would
    assert_eq!(
        sent.record.response_id.as_deref(),
        Some(format!("chatcmpl-sim-{n}").as_str())
    );
    let t = srv.timings(n).unwrap();
    let offs = t
        .token_times()
        .map(|x| x.duration_since(t.arrival).as_secs_f64() * 1000.0)
        .collect();
    (sent.record, offs)
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: measured {got:.3} ms, expected {want:.3} ms (+-{tol})"
    );
}

/// burst=4, 9 tokens, TTFT 30 ms, 5 ms per token: events carry [1], [2..5], [6..9], sent when
/// their last token is due: 30, 50, 70 ms. TTFT = 30, TPOT = (70 - 30) / (9 - 1) = 5 ms
/// (token count from usage), ITL = [20, 20] (per event), 3 token events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_known_answer() {
    let fut = measure("ttft_ms=30&tpot_ms=5&ttft_sigma=0&tpot_sigma=0&burst=4", 9);
    let (r, offs) = tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap();
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.output_tokens, Some(9));
    assert_eq!(r.token_events, 3);
    assert_eq!(offs.len(), 3);
    // the simulator's own schedule, never early
    for (o, due) in offs.iter().zip([30.0, 50.0, 70.0]) {
        assert!(*o >= due - 0.01 && *o < due + 40.0, "sent {o} due {due}");
    }
    // TTFT includes connect + write + the simulator's lateness (a few ms at most, 40 on a busy box)
    close(r.ttft_ms.unwrap(), 30.0, 40.0, "TTFT");
    // TPOT and ITL are differences of send times: measured against the simulator's own
    close(
        r.tpot_ms.unwrap(),
        (offs[2] - offs[0]) / 8.0,
        2.0,
        "TPOT vs sent",
    );
    close(r.tpot_ms.unwrap(), 5.0, 5.0, "TPOT vs schedule");
    assert_eq!(r.itl_ms.len(), 2);
    close(r.itl_ms[0], offs[1] - offs[0], 3.0, "ITL 1");
    close(r.itl_ms[1], offs[2] - offs[1], 3.0, "ITL 2");
}

/// stall_every=3, stall_ms=80, 7 tokens, TTFT 20, 2 ms per token: due 20, 22, 24, 106, 108,
/// 110, 192 ms. TPOT = (192 - 20) / 6 = 28.667 ms; ITL = [2, 2, 82, 2, 2, 82].
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stall_known_answer() {
    let fut = measure(
        "ttft_ms=20&tpot_ms=2&ttft_sigma=0&tpot_sigma=0&stall_every=3&stall_ms=80",
        7,
    );
    let (r, offs) = tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .unwrap();
    assert!(r.ok(), "{:?}", r.error);
    assert_eq!(r.output_tokens, Some(7));
    assert_eq!(r.token_events, 7);
    close(r.tpot_ms.unwrap(), 172.0 / 6.0, 6.0, "TPOT vs schedule");
    close(
        r.tpot_ms.unwrap(),
        (offs[6] - offs[0]) / 6.0,
        2.0,
        "TPOT vs sent",
    );
    let want = [2.0, 2.0, 82.0, 2.0, 2.0, 82.0];
    assert_eq!(r.itl_ms.len(), 6);
    for (i, (g, w)) in r.itl_ms.iter().zip(want).enumerate() {
        // the stalls stand out: never mistaken for a normal gap
        close(*g, w, 15.0, &format!("ITL {i}"));
    }
}
