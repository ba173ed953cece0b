//! The routes around the operations: health, readiness, error pages, OpenAPI, request ids.

use reqwest::Method;

use crate::support::Server;

async fn health_and_readiness_need_no_key(s: Server) {
    assert_eq!(s.anon(Method::GET, "!/healthz").send().await.status, 200);
    assert_eq!(s.anon(Method::GET, "!/readyz").send().await.status, 200);
}

async fn every_error_code_has_a_page(s: Server) {
    for code in crm_api::ErrorCode::ALL {
        let res = s
            .anon(Method::GET, &format!("!/errors/{}", code.as_str()))
            .send()
            .await;
        assert_eq!(res.status, 200, "{}", code.as_str());
        assert!(res.body.as_str().unwrap().contains(code.as_str()));
    }
    assert_eq!(
        s.anon(Method::GET, "!/errors/no_such_code")
            .send()
            .await
            .status,
        404
    );
}

async fn problem_types_point_at_the_error_pages(s: Server) {
    let res = s.anon(Method::GET, "/contacts").send().await;
    let t = res.problem(401, "unauthorized")["type"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(t, format!("{}/errors/unauthorized", s.base));
    let page = s
        .anon(Method::GET, &format!("!{}", t.trim_start_matches(&s.base)))
        .send()
        .await;
    assert_eq!(page.status, 200);
}

async fn openapi_lists_every_operation(s: Server) {
    let res = s.anon(Method::GET, "/openapi.json").send().await;
    let doc = res.ok(200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "0.14.0");
    for op in crm_api::catalog() {
        let entry = &doc["paths"][op.path][op.method.as_str().to_lowercase()];
        assert_eq!(entry["operationId"], op.name);
    }
}

async fn request_ids_are_unique(s: Server) {
    let a = s.anon(Method::GET, "!/healthz").send().await;
    let b = s.anon(Method::GET, "!/healthz").send().await;
    assert_ne!(a.header("request-id"), b.header("request-id"));
    for res in [a, b] {
        let id = res.header("request-id").unwrap();
        assert!(
            id.starts_with("req_")
                && id.len() == 36
                && id[4..].bytes().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
    }
}

/// A caller's own `Request-Id` is kept and echoed, on operations and on the other routes.
async fn a_callers_request_id_is_echoed(s: Server) {
    let res = s
        .anon(Method::GET, "!/healthz")
        .header("request-id", "trace-abc-1")
        .send()
        .await;
    assert_eq!(res.header("request-id"), Some("trace-abc-1"));
    let res = s.get("/contacts").await;
    assert!(res
        .header("request-id")
        .is_some_and(|id| id.starts_with("req_")));
    let res = s
        .anon(Method::GET, "/contacts")
        .header("request-id", "trace-abc-2")
        .send()
        .await;
    res.problem(401, "unauthorized");
    assert_eq!(res.header("request-id"), Some("trace-abc-2"));
}

crate::on_both_stores!(
    health_and_readiness_need_no_key,
    every_error_code_has_a_page,
    problem_types_point_at_the_error_pages,
    openapi_lists_every_operation,
    request_ids_are_unique,
    a_callers_request_id_is_echoed,
);

/// docs/openapi.json is generated from the catalog (`cargo xtask openapi`); it must not go stale.
#[test]
fn the_committed_openapi_document_is_current() {
    let committed = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/openapi.json"
    ))
    .expect("docs/openapi.json");
    let committed: serde_json::Value = serde_json::from_str(&committed).unwrap();
    // Not assert_eq!: printing two whole documents buries the message.
    assert!(
        committed == crm_api::openapi::document("http://127.0.0.1:8080"),
        "docs/openapi.json is stale: run `cargo xtask openapi`"
    );
}
