//! Per-minute rate limits (decisions §8, §16): GCRA per workspace and mode, bursts of up to the
//! limit, 429 `rate_limited` with `Retry-After`, `RateLimit-*` headers on every authenticated
//! response; shared by every server process through Redis when `CRM_REDIS_URL` is set.

use std::time::{Duration, Instant};

use futures::future::join_all;
use reqwest::Method;

use crate::support::{create_workspace, fresh_database, spawn_with, start, Backend};

/// Where the tests reach Redis: `CRM_TEST_REDIS_URL`, else the local server.
fn redis_url() -> String {
    std::env::var("CRM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

/// Fails (never skips) when Redis does not answer, saying how to provide one.
fn require_redis(url: &str) {
    let addr = url
        .trim_start_matches("redis://")
        .split(['/', '?'])
        .next()
        .unwrap_or_default();
    let addr = addr.rsplit_once('@').map_or(addr, |(_, host)| host);
    if std::net::TcpStream::connect(addr).is_err() {
        panic!("this test needs Redis: run one on 127.0.0.1:6379 (redis-server) or set CRM_TEST_REDIS_URL=redis://host:port (tried {url})");
    }
}

async fn requests_past_the_rate_limit_get_429_with_retry_after(backend: Backend) {
    let s = spawn_with(backend, &["--rate-limit-per-minute", "5"]).await;
    for remaining in (0..5).rev() {
        let res = s.get("/contacts").await;
        res.ok(200);
        assert_eq!(res.header("ratelimit-limit"), Some("5"));
        assert_eq!(
            res.header("ratelimit-remaining"),
            Some(remaining.to_string().as_str())
        );
        assert!(
            res.header("ratelimit-reset")
                .unwrap()
                .parse::<u64>()
                .unwrap()
                <= 60
        );
        assert_eq!(res.header("retry-after"), None);
    }
    let refused = s.get("/contacts").await;
    refused.problem(429, "rate_limited");
    assert_eq!(
        refused.header("retry-after"),
        Some("12"),
        "one request every 12 s at 5 per minute"
    );
    assert_eq!(refused.header("ratelimit-remaining"), Some("0"));
    // The exempt routes are rate-limited too; the other mode has its own budget.
    s.get("/usage").await.problem(429, "rate_limited");
    let live = s.req(Method::GET, "/usage").key(&s.keys.live).send().await;
    assert_eq!(live.ok(200)["rate_limit_per_minute"], 5);
    // Unauthenticated requests carry no budget.
    let anon = s.anon(Method::GET, "/contacts").send().await;
    assert_eq!(anon.header("ratelimit-limit"), None);

    // Refused requests were not counted: another server on the database (with a fresh budget of
    // its own, as there is no Redis here) sees the five, once the first has flushed.
    let other = start(s.backend, s.database_url.clone(), s.keys.clone(), &[]);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(other.get("/usage").await.ok(200)["requests"]["used"], 5);
}

async fn two_servers_sharing_redis_admit_at_most_the_limit_plus_the_burst(backend: Backend) {
    const LIMIT: usize = 30;
    let url = redis_url();
    require_redis(&url);
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(&database_url, &["--rate-limit-per-minute", "30"]);
    let env = [("CRM_REDIS_URL", url.as_str())];
    let servers = [
        start(backend, database_url.clone(), keys.clone(), &env),
        start(backend, database_url, keys, &env),
    ];

    let began = Instant::now();
    let mut admitted = 0;
    for round in 0..8 {
        let sends = (0..10).map(|i| servers[(round + i) % 2].get("/contacts"));
        for res in join_all(sends).await {
            match res.status.as_u16() {
                200 => admitted += 1,
                _ => {
                    res.problem(429, "rate_limited");
                    assert!(res.header("retry-after").is_some());
                }
            }
        }
    }
    // Each server alone would admit a whole burst of 30; together they share one budget: the
    // burst, plus what refills at one request every 2 s while the test runs.
    let refilled = (began.elapsed().as_secs_f64() / 2.0).ceil() as usize;
    assert!(admitted >= LIMIT, "the burst is admitted: {admitted}");
    assert!(
        admitted <= LIMIT + refilled,
        "{admitted} admitted in {:?}",
        began.elapsed()
    );
}

crate::on_both_backends!(
    requests_past_the_rate_limit_get_429_with_retry_after,
    two_servers_sharing_redis_admit_at_most_the_limit_plus_the_burst,
);
