//! The catalog's routes, matched ahead of axum's router: a request for an operation goes straight
//! from its path to [`rest::serve`], and only the rest (`/healthz`, `/errors`, the OpenAPI
//! document, MCP, A2A, the not-found answer) reaches axum's `Router`.
//!
//! Why not a route per operation in the `Router`: on every request axum clones the route's boxed
//! service, boxes its future twice, inserts `MatchedPath` and the path parameters into the
//! request's extensions (a hash map allocated for them), and sets `Content-Length` itself. That
//! was 2,800 of the 27,000 instructions of a cached `GET /v1/automations-capabilities`
//! (callgrind, docs/performance-history.md); the lookup here is the same `matchit` tree axum uses.

use std::{
    collections::BTreeMap,
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use axum::{extract::Request, http, response::Response, routing::future::RouteFuture, Router};
use crm_api::{
    catalog::{self, ALIASES},
    Api, Method,
};
use tower::Service;

use crate::{
    request_context::current_request_id,
    rest,
    route::{PathParams, Target},
    REQUEST_ID,
};

/// One path's operations, by method (`Method as usize`).
#[derive(Default, Clone, Copy)]
struct Methods([Option<Target>; 4]);

/// The whole application: the catalog's routes, then axum's router for everything else.
///
/// One `Arc`: hyper-util clones the service for every request (`TowerToHyperService`), and
/// three reference counts cost three atomic increments and decrements each time.
#[derive(Clone)]
pub struct Dispatch(Arc<Inner>);

struct Inner {
    api: Arc<Api>,
    routes: Routes,
    rest: Router,
}

/// The operation routes: the paths without parameters in a hash map as well (a collection, a
/// singleton like `/v1/settings`), found by one hash instead of a walk of the tree (300
/// instructions); matchit also prefers a static route over a parameter, so the order agrees.
struct Routes {
    fixed: foldhash::HashMap<&'static str, Methods>,
    tree: matchit::Router<Methods>,
}

impl Dispatch {
    /// `rest` answers every request that is not one of the catalog's operations, including the
    /// not-found answer for unknown paths and methods.
    pub(crate) fn new(api: Arc<Api>, rest: Router) -> Dispatch {
        Dispatch(Arc::new(Inner {
            api,
            routes: operation_routes(),
            rest,
        }))
    }
}

/// What a request's method and path are among the operation routes.
pub(crate) enum Lookup {
    Operation(Target, PathParams),
    /// The path is an operation's, the method none of its operations': 405 with this `Allow`.
    OtherMethods(String),
    /// Not an operation's path: axum's router takes it.
    Elsewhere,
}

impl Methods {
    fn target(&self, method: Method) -> Option<Target> {
        self.0[method as usize]
    }

    /// The `Allow` value of the path: its methods (HEAD with GET).
    fn allow(&self) -> String {
        let mut allowed: Vec<&str> = Vec::new();
        for (method, name) in [
            (Method::Get, "GET, HEAD"),
            (Method::Post, "POST"),
            (Method::Patch, "PATCH"),
            (Method::Delete, "DELETE"),
        ] {
            if self.0[method as usize].is_some() {
                allowed.push(name);
            }
        }
        allowed.join(", ")
    }
}

impl Routes {
    fn find(&self, method: &http::Method, path: &str) -> Lookup {
        let Some(path) = path.strip_prefix("/v1") else {
            return Lookup::Elsewhere;
        };
        let method = match *method {
            http::Method::GET | http::Method::HEAD => Some(Method::Get),
            http::Method::POST => Some(Method::Post),
            http::Method::PATCH => Some(Method::Patch),
            http::Method::DELETE => Some(Method::Delete),
            _ => None,
        };
        let (methods, params) = if let Some(methods) = self.fixed.get(path) {
            (methods, None)
        } else if let Ok(found) = self.tree.at(path) {
            (found.value, Some(found.params))
        } else {
            return Lookup::Elsewhere;
        };
        let Some(target) = method.and_then(|m| methods.target(m)) else {
            return Lookup::OtherMethods(methods.allow());
        };
        let params = params.map_or(Ok(BTreeMap::new()), |params| {
            params
                .iter()
                .map(|(k, v)| Ok((k.to_owned(), percent_decode(v)?)))
                .collect()
        });
        Lookup::Operation(target, params)
    }
}

fn percent_decode(raw: &str) -> Result<String, ()> {
    if !raw.contains('%') {
        return Ok(raw.to_owned());
    }
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(drop)
}

/// Every operation at `/v1<path>` and every alias at `/v1<alias path>`.
fn operation_routes() -> Routes {
    let mut paths: Vec<(&'static str, Methods)> = Vec::new();
    let mut add = |path: &'static str, method: Method, target: Target| {
        let at = match paths.iter().position(|(p, _)| *p == path) {
            Some(at) => at,
            None => {
                paths.push((path, Methods::default()));
                paths.len() - 1
            }
        };
        let slot = &mut paths[at].1 .0[method as usize];
        assert!(
            slot.is_none(),
            "two operations at {} {path}",
            method.as_str()
        );
        *slot = Some(target);
    };
    for op in catalog::catalog() {
        add(op.path, op.method, Target { op, alias: None });
    }
    for alias in ALIASES {
        let op = catalog::find(alias.operation)
            .unwrap_or_else(|| panic!("alias of an unknown operation {}", alias.operation));
        add(
            alias.path,
            alias.method,
            Target {
                op,
                alias: Some(alias),
            },
        );
    }
    let mut tree = matchit::Router::new();
    let mut fixed = foldhash::HashMap::default();
    for (path, methods) in paths {
        if !path.contains('{') {
            fixed.insert(path, methods);
        }
        tree.insert(path, methods)
            .unwrap_or_else(|e| panic!("operation path {path}: {e}"));
    }
    Routes { fixed, tree }
}

impl Service<Request> for Dispatch {
    type Response = Response;
    type Error = Infallible;
    type Future = DispatchFuture;

    /// Always ready: so is axum's `Router` (its `poll_ready` returns `Ready` unconditionally).
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> DispatchFuture {
        let inner = &*self.0;
        match inner.routes.find(req.method(), req.uri().path()) {
            Lookup::Operation(target, path) => DispatchFuture::Operation {
                inner: Box::pin(rest::serve(inner.api.clone(), target, path, req)),
            },
            Lookup::OtherMethods(allow) => DispatchFuture::Answered {
                answer: Some(rest::method_not_allowed(&inner.api, &req, &allow)),
            },
            Lookup::Elsewhere => DispatchFuture::Rest {
                inner: inner.rest.clone().call(with_request_id_header(req)),
            },
        }
    }
}

/// The routes that are not operations get the request id as a header too: MCP and A2A read it
/// there, from tasks of their own where it is not the current id.
fn with_request_id_header(mut req: Request) -> Request {
    if !req.headers().contains_key(&REQUEST_ID) {
        if let Some(id) = current_request_id() {
            req.headers_mut().insert(REQUEST_ID.clone(), id);
        }
    }
    req
}

pin_project_lite::pin_project! {
    #[project = DispatchProj]
    pub enum DispatchFuture {
        Operation { inner: Pin<Box<dyn Future<Output = Response> + Send>> },
        Rest { #[pin] inner: RouteFuture<Infallible> },
        Answered { answer: Option<Response> },
    }
}

impl Future for DispatchFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            DispatchProj::Operation { inner } => inner.as_mut().poll(cx).map(Ok),
            DispatchProj::Rest { inner } => inner.poll(cx),
            DispatchProj::Answered { answer } => {
                Poll::Ready(Ok(answer.take().expect("polled after it answered")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_and_alias_has_its_route() {
        let routes = operation_routes();
        let http_method = |m: Method| match m {
            Method::Get => http::Method::GET,
            Method::Post => http::Method::POST,
            Method::Patch => http::Method::PATCH,
            Method::Delete => http::Method::DELETE,
        };
        for op in catalog::catalog() {
            let concrete = format!("/v1{}", op.path.replace('{', "x").replace('}', ""));
            let Lookup::Operation(target, params) = routes.find(&http_method(op.method), &concrete)
            else {
                panic!("{}", op.path)
            };
            assert_eq!(
                target.op.name,
                op.name,
                "{} {}",
                op.method.as_str(),
                op.path
            );
            assert_eq!(
                params.unwrap().len(),
                op.path.matches('{').count(),
                "{}",
                op.path
            );
        }
        for alias in ALIASES {
            let concrete = format!("/v1{}", alias.path.replace('{', "x").replace('}', ""));
            let Lookup::Operation(target, _) = routes.find(&http_method(alias.method), &concrete)
            else {
                panic!("{}", alias.path)
            };
            assert_eq!(target.alias.map(|a| a.action), Some(alias.action));
        }
        assert!(!routes.fixed.is_empty() && routes.fixed.keys().all(|p| !p.contains('{')));
        assert!(matches!(
            routes.find(&http::Method::GET, "/v1/no-such-thing"),
            Lookup::Elsewhere
        ));
        assert!(matches!(
            routes.find(&http::Method::GET, "/healthz"),
            Lookup::Elsewhere
        ));
    }

    #[test]
    fn a_method_an_operation_path_does_not_serve_names_the_ones_it_does() {
        let routes = operation_routes();
        let allow = |method: http::Method, path: &str| match routes.find(&method, path) {
            Lookup::OtherMethods(allow) => allow,
            _ => panic!("{method} {path} is not refused"),
        };
        assert_eq!(allow(http::Method::PUT, "/v1/contacts"), "GET, HEAD, POST");
        assert_eq!(
            allow(http::Method::TRACE, "/v1/contacts"),
            "GET, HEAD, POST"
        );
        assert_eq!(
            allow(http::Method::POST, "/v1/contacts/con_1"),
            "GET, HEAD, PATCH, DELETE"
        );
        assert_eq!(allow(http::Method::PUT, "/v1/settings"), "GET, HEAD, PATCH");
    }

    #[test]
    fn path_parameters_are_percent_decoded_and_must_be_utf8() {
        assert_eq!(percent_decode("con_1"), Ok("con_1".to_owned()));
        assert_eq!(percent_decode("a%20b%2Fc"), Ok("a b/c".to_owned()));
        assert_eq!(percent_decode("%FF"), Err(()));
    }
}
