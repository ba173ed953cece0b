//! Who is signed in: the `crm_session` cookie read into a [`Signed`] user for each request, the
//! cookies the console sets, the CSRF check of every POST, and the client's address for the
//! sign-in throttle.

use std::net::{IpAddr, SocketAddr};

use axum::{
    extract::{ConnectInfo, FromRequest, FromRequestParts, Request},
    http::{header, request::Parts, HeaderMap},
    response::{IntoResponse, Redirect, Response},
};
use crm_app::{sessions::ConsoleSession, Caller, Channel, Origin};

use crate::{form::Form, pages::error_page, State};

pub const SESSION_COOKIE: &str = "crm_session";
/// Before sign-in, the login and set-password forms' CSRF token is this cookie's value.
pub const PRE_SESSION_COOKIE: &str = "crm_pre_session";

/// The name a console cookie goes by: behind https with the `__Host-` prefix, which browsers
/// accept only when set over https by this host for the whole site, so that no subdomain or
/// plain-http page can set or shadow it.
pub fn cookie_name(name: &'static str, secure: bool) -> &'static str {
    match (name, secure) {
        (SESSION_COOKIE, true) => "__Host-crm_session",
        (PRE_SESSION_COOKIE, true) => "__Host-crm_pre_session",
        (name, _) => name,
    }
}
/// Sessions end 30 days after sign-in (decisions §24); the cookie no later.
const SESSION_MAX_AGE_SECS: i64 = 30 * 24 * 60 * 60;

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value of console cookie `name` ([`cookie_name`]): `HttpOnly`, `SameSite=Lax`,
/// the whole site, `Secure` behind https.
pub fn set_cookie(name: &'static str, value: &str, max_age_secs: i64, secure: bool) -> String {
    let name = cookie_name(name, secure);
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age_secs}{secure}")
}

pub fn session_cookie(id: &str, secure: bool) -> String {
    set_cookie(SESSION_COOKIE, id, SESSION_MAX_AGE_SECS, secure)
}

pub fn cleared_session_cookie(secure: bool) -> String {
    set_cookie(SESSION_COOKIE, "", 0, secure)
}

/// The signed-in user of a console request, with the caller its operations run as.
pub struct Signed {
    pub session: ConsoleSession,
    /// The session's caller making this request: channel `console`, the request's id.
    pub caller: Caller,
}

impl Signed {
    /// Whether the form carries this session's CSRF token (else answer [`csrf_refused`]).
    pub fn csrf_ok(&self, form: &Form) -> bool {
        form.get("csrf")
            .is_some_and(|token| self.session.csrf_matches(token))
    }
}

pub fn csrf_refused() -> Response {
    error_page(
        403,
        "This form has expired",
        "The page was open too long or came from elsewhere. Go back, reload it and try again.",
    )
}

fn to_login() -> Response {
    Redirect::to("/login").into_response()
}

/// A signed-in user's form post that carries the session's CSRF token: a handler that takes
/// one never sees a forged post, which is answered [`csrf_refused`] before it runs.
pub struct Posted {
    pub signed: Signed,
    pub form: Form,
}

impl FromRequest<State> for Posted {
    type Rejection = Response;

    async fn from_request(req: Request, state: &State) -> Result<Posted, Response> {
        let (mut parts, body) = req.into_parts();
        let signed = Signed::from_request_parts(&mut parts, state).await?;
        let form = Form::from_request(Request::from_parts(parts, body), state).await?;
        if !signed.csrf_ok(&form) {
            return Err(csrf_refused());
        }
        Ok(Posted { signed, form })
    }
}

/// A request without a working session is sent to the login page.
impl FromRequestParts<State> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &State) -> Result<Signed, Response> {
        let name = cookie_name(SESSION_COOKIE, state.secure_cookies);
        let Some(id) = cookie(&parts.headers, name).filter(|v| !v.is_empty()) else {
            return Err(to_login());
        };
        let session = match state.api.console_session(id).await {
            Ok(Some(session)) => session,
            Ok(None) => return Err(to_login()),
            Err(problem) => return Err(crate::reply::bare_problem_page(&problem)),
        };
        let request_id = parts
            .headers
            .get("request-id")
            .and_then(|v| v.to_str().ok())
            .map(Into::into);
        let caller = session.caller.with_origin(Origin {
            channel: Channel::Console,
            request_id,
        });
        // One page, one request: counted here, and its operations run admitted.
        if let Err(problem) = state.api.admit_request(&caller).await {
            return Err(crate::reply::bare_problem_page(&problem));
        }
        Ok(Signed { session, caller })
    }
}

/// The address a sign-in is counted under: the peer's, or the `X-Forwarded-For` client's when
/// the peer is a trusted proxy (the last address the proxies did not add).
pub fn client_address(parts: &Parts, trusted: &[IpAddr]) -> String {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    let Some(peer) = peer else {
        return "unknown".to_owned();
    };
    if !trusted.contains(&peer) {
        return peer.to_string();
    }
    // From the right: the proxies' own entries, then the client as the nearest proxy saw it.
    // The first entry that is not a trusted proxy is the client, whatever it says (an entry the
    // proxy wrote as `address:port` included): skipping it would let an address the client
    // claimed before it stand in.
    let forwarded: Vec<&str> = parts
        .headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    forwarded
        .iter()
        .rev()
        .find(|a| {
            a.parse::<IpAddr>()
                .map_or(true, |ip| !trusted.contains(&ip))
        })
        .map_or_else(|| peer.to_string(), |a| (*a).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, Request};

    fn parts(peer: &str, forwarded: Option<&str>) -> Parts {
        let mut req = Request::builder().uri("/login");
        if let Some(f) = forwarded {
            req = req.header("x-forwarded-for", f);
        }
        let (mut parts, ()) = req.body(()).unwrap().into_parts();
        parts
            .extensions
            .insert(ConnectInfo::<SocketAddr>(peer.parse().unwrap()));
        parts
    }

    #[test]
    fn a_forwarded_address_counts_only_from_a_trusted_proxy() {
        let proxy: IpAddr = "10.0.0.1".parse().unwrap();
        let direct = parts("203.0.113.9:5000", Some("198.51.100.7"));
        assert_eq!(client_address(&direct, &[proxy]), "203.0.113.9");
        let proxied = parts("10.0.0.1:5000", Some("192.0.2.66, 198.51.100.7, 10.0.0.1"));
        assert_eq!(client_address(&proxied, &[proxy]), "198.51.100.7");
        // An entry that is no bare address is still the client: the one before it is not.
        let with_port = parts("10.0.0.1:5000", Some("192.0.2.66, 198.51.100.7:4711"));
        assert_eq!(client_address(&with_port, &[proxy]), "198.51.100.7:4711");
        let no_header = parts("10.0.0.1:5000", None);
        assert_eq!(client_address(&no_header, &[proxy]), "10.0.0.1");
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; crm_session=abc; b=2"),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, "c"), None);
        let set = session_cookie("xyz", true);
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Lax") && set.ends_with("Secure")
        );
        // Behind https the names carry `__Host-` (which needs `Secure`, `Path=/`, no `Domain`).
        assert!(set.starts_with("__Host-crm_session=xyz; Path=/;") && !set.contains("Domain"));
        assert!(session_cookie("xyz", false).starts_with("crm_session=xyz;"));
        assert_eq!(
            cookie_name(PRE_SESSION_COOKIE, true),
            "__Host-crm_pre_session"
        );
    }
}
