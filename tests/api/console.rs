//! The console over HTTP (decisions §21, §24), below what the browser suite (`tests/console`)
//! shows: its security headers, the pre-session and session CSRF checks, the sign-in throttle
//! and whose address it counts, that the console ignores bearer keys and the API ignores the
//! session cookie, and that a console write is the user's, through channel `console`.

use reqwest::{header, redirect::Policy, Client, StatusCode};
use serde_json::Value;

use crate::{
    support::{create_workspace, fresh_database, start, Backend, Server},
    users::user_create,
};

const PASSWORD: &str = "console pass phrase";

async fn serve(backend: Backend, env: &[(&str, &str)]) -> Server {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(&database_url, &[]);
    let s = start(backend, database_url, keys, env);
    for (email, role) in [("ada@example.com", "admin"), ("vic@example.com", "viewer")] {
        let args = [
            "--workspace",
            s.keys.workspace_id.as_str(),
            "--email",
            email,
            "--name",
            "Ada",
            "--role",
            role,
            "--password-stdin",
        ];
        let (ok, _, err) = user_create(&s.database_url, &args, &format!("{PASSWORD}\n"));
        assert!(ok, "{err}");
    }
    s
}

/// A browser without cookies that follows no redirect.
fn browser() -> Client {
    Client::builder().redirect(Policy::none()).build().unwrap()
}

/// The value of `name` in the response's `Set-Cookie` headers.
fn set_cookie(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .map(|rest| rest.split(';').next().unwrap_or_default().to_owned())
}

/// The login form's pre-session token (its cookie's value).
async fn pre_session(s: &Server, client: &Client) -> String {
    let res = client
        .get(format!("{}/login", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    set_cookie(&res, "crm_pre_session").expect("a pre-session cookie")
}

async fn log_in(
    s: &Server,
    client: &Client,
    email: &str,
    password: &str,
    forwarded_for: Option<&str>,
) -> reqwest::Response {
    let token = pre_session(s, client).await;
    let mut req = client
        .post(format!("{}/login", s.base))
        .header(header::COOKIE, format!("crm_pre_session={token}"))
        .form(&[
            ("csrf", token.as_str()),
            ("email", email),
            ("password", password),
        ]);
    if let Some(f) = forwarded_for {
        req = req.header("x-forwarded-for", f);
    }
    req.send().await.unwrap()
}

/// A signed-in session: its cookie value and its CSRF token (read off the board).
async fn session(s: &Server, email: &str) -> (String, String) {
    let client = browser();
    let res = log_in(s, &client, email, PASSWORD, None).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let cookie = set_cookie(&res, "crm_session").expect("a session cookie");
    let page = client
        .get(format!("{}/", s.base))
        .header(header::COOKIE, format!("crm_session={cookie}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token on the page")
        .to_owned();
    (cookie, csrf)
}

async fn pages_carry_a_strict_policy_and_forms_need_their_token(s: Server) {
    let client = browser();
    let res = client
        .get(format!("{}/login", s.base))
        .send()
        .await
        .unwrap();
    let csp = res.headers()[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(res.headers()[header::X_FRAME_OPTIONS], "DENY");
    let cookie = res.headers()[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    // A login post without the pre-session token is refused before the password is looked at.
    let forged = client
        .post(format!("{}/login", s.base))
        .form(&[("email", "ada@example.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert!(set_cookie(&forged, "crm_session").is_none());
    // Signed in, a write without this session's token is refused and writes nothing.
    let (cookie, csrf) = session(&s, "ada@example.com").await;
    let post = |token: &str| {
        client
            .post(format!("{}/contacts", s.base))
            .header(header::COOKIE, format!("crm_session={cookie}"))
            .form(&[("csrf", token), ("first_name", "Forged")])
            .send()
    };
    assert_eq!(
        post("not the token").await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let made = post(&csrf).await.unwrap();
    assert_eq!(made.status(), StatusCode::SEE_OTHER);
    let location = made.headers()[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned();
    let id = location.trim_start_matches("/contacts/");
    // The session works in live mode: the contact is live, written by the user via the console.
    let contacts = s
        .req(reqwest::Method::GET, "/contacts")
        .key(&s.keys.live)
        .send()
        .await;
    let names: Vec<&str> = contacts.ok(200)["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["first_name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["Forged"],
        "one contact, from the request with the token"
    );
    let history = s
        .req(reqwest::Method::GET, &format!("/contacts/{id}/history"))
        .key(&s.keys.live)
        .send()
        .await;
    let entry = &history.ok(200)["data"][0];
    assert_eq!(entry["channel"], "console");
    assert_eq!(entry["actor"]["type"], "user");
    assert_eq!(entry["actor"]["name"], "Ada");
}

async fn the_console_ignores_keys_and_the_api_ignores_sessions(s: Server) {
    let client = browser();
    let with_key = client
        .get(format!("{}/", s.base))
        .bearer_auth(&s.keys.live)
        .send()
        .await
        .unwrap();
    assert_eq!(with_key.status(), StatusCode::SEE_OTHER);
    assert_eq!(with_key.headers()[header::LOCATION], "/login");
    let (cookie, _) = session(&s, "ada@example.com").await;
    let api = client
        .get(format!("{}/v1/contacts", s.base))
        .header(header::COOKIE, format!("crm_session={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);
    let body: Value = api.json().await.unwrap();
    assert_eq!(body["code"], "unauthorized");
}

async fn a_viewer_is_refused_writes_it_forges(s: Server) {
    let (cookie, csrf) = session(&s, "vic@example.com").await;
    let board = browser()
        .get(format!("{}/contacts/new", s.base))
        .header(header::COOKIE, format!("crm_session={cookie}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !board.contains("New contact</a>"),
        "no quick create for a viewer"
    );
    let forged = browser()
        .post(format!("{}/contacts", s.base))
        .header(header::COOKIE, format!("crm_session={cookie}"))
        .form(&[("csrf", csrf.as_str()), ("first_name", "Sneaky")])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let contacts = s
        .req(reqwest::Method::GET, "/contacts")
        .key(&s.keys.live)
        .send()
        .await;
    assert_eq!(contacts.ok(200)["data"], serde_json::json!([]));
}

async fn failed_sign_ins_are_throttled_per_client_address(s: Server) {
    let client = browser();
    for _ in 0..5 {
        let res = log_in(
            &s,
            &client,
            "ada@example.com",
            "wrong",
            Some("198.51.100.1"),
        )
        .await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        let page = res.text().await.unwrap();
        assert!(page.contains("Wrong email or password"), "{page}");
    }
    // The peer is no trusted proxy: X-Forwarded-For is not believed, so another claimed address
    // is the same client, throttled even with the right password.
    let res = log_in(
        &s,
        &client,
        "ada@example.com",
        PASSWORD,
        Some("203.0.113.7"),
    )
    .await;
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(set_cookie(&res, "crm_session").is_none());
    // An unknown email is answered as a wrong password.
    let res = log_in(&s, &client, "nobody@example.com", PASSWORD, None).await;
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
}

async fn behind_a_trusted_proxy_each_forwarded_client_is_counted_apart(backend: Backend) {
    let s = serve(backend, &[("CRM_TRUSTED_PROXIES", "127.0.0.1")]).await;
    let client = browser();
    for _ in 0..5 {
        let res = log_in(
            &s,
            &client,
            "ada@example.com",
            "wrong",
            Some("198.51.100.1"),
        )
        .await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    let throttled = log_in(
        &s,
        &client,
        "ada@example.com",
        PASSWORD,
        Some("198.51.100.1"),
    )
    .await;
    assert_eq!(throttled.status(), StatusCode::TOO_MANY_REQUESTS);
    let other = log_in(
        &s,
        &client,
        "ada@example.com",
        PASSWORD,
        Some("203.0.113.7"),
    )
    .await;
    assert_eq!(other.status(), StatusCode::SEE_OTHER);
}

/// A page is one request to the rate limit and the meter, however many operations render it.
async fn a_page_counts_as_one_request(backend: Backend) {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(&database_url, &["--rate-limit-per-minute", "3"]);
    let s = start(backend, database_url, keys, &[]);
    let args = [
        "--workspace",
        s.keys.workspace_id.as_str(),
        "--email",
        "ada@example.com",
        "--name",
        "Ada",
        "--role",
        "admin",
        "--password-stdin",
    ];
    let (ok, _, err) = user_create(&s.database_url, &args, &format!("{PASSWORD}\n"));
    assert!(ok, "{err}");
    let client = browser();
    let res = log_in(&s, &client, "ada@example.com", PASSWORD, None).await;
    let cookie = set_cookie(&res, "crm_session").expect("a session cookie");
    let board = || {
        client
            .get(format!("{}/", s.base))
            .header(header::COOKIE, format!("crm_session={cookie}"))
            .send()
    };
    // The board runs several operations (pipelines, totals, a list per stage): each page still
    // takes one of the three a minute.
    for _ in 0..3 {
        assert_eq!(board().await.unwrap().status(), StatusCode::OK);
    }
    assert_eq!(
        board().await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
}

/// Behind https the cookies carry the `__Host-` prefix, and only those names are read.
async fn behind_https_the_cookies_are_host_prefixed(backend: Backend) {
    let s = serve(backend, &[("CRM_PUBLIC_URL", "https://crm.example.test")]).await;
    let client = browser();
    let res = client
        .get(format!("{}/login", s.base))
        .send()
        .await
        .unwrap();
    let set = res.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        set.starts_with("__Host-crm_pre_session=") && set.contains("; Secure"),
        "{set}"
    );
    let token = set_cookie(&res, "__Host-crm_pre_session").unwrap();
    let login = |cookie: String| {
        client
            .post(format!("{}/login", s.base))
            .header(header::COOKIE, cookie)
            .form(&[
                ("csrf", token.as_str()),
                ("email", "ada@example.com"),
                ("password", PASSWORD),
            ])
            .send()
    };
    // The unprefixed name is not the pre-session cookie any more: the form is refused.
    let refused = login(format!("crm_pre_session={token}")).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let res = login(format!("__Host-crm_pre_session={token}"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let session = set_cookie(&res, "__Host-crm_session").expect("a prefixed session cookie");
    let board = |cookie: String| {
        client
            .get(format!("{}/", s.base))
            .header(header::COOKIE, cookie)
            .send()
    };
    let res = board(format!("__Host-crm_session={session}"))
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let res = board(format!("crm_session={session}")).await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::SEE_OTHER,
        "the unprefixed name is ignored"
    );
}

async fn served(backend: Backend) -> Server {
    serve(backend, &[]).await
}

crate::on_both_stores!(
    served_by super::served;
    pages_carry_a_strict_policy_and_forms_need_their_token,
    the_console_ignores_keys_and_the_api_ignores_sessions,
    a_viewer_is_refused_writes_it_forges,
    failed_sign_ins_are_throttled_per_client_address,
);

mod proxies {
    use super::*;

    crate::on_both_backends!(
        behind_a_trusted_proxy_each_forwarded_client_is_counted_apart,
        a_page_counts_as_one_request,
        behind_https_the_cookies_are_host_prefixed,
    );
}
