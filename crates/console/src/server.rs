//! The HTTP/1.1 server (hyper): authentication, the login form, the embedded UI assets and the
//! routing of `/api/*` to [`crate::api`].
//!
//! Every request first passes the request guard shared with the admin listener
//! (`tlsgate_admin::guard`), whatever the identity (token, cookie or none on loopback): `Host`
//! must name the console (its listen address, `localhost`, a loopback IP or an `--allowed-host`;
//! else 421), a foreign `Origin` or a cross-site `Sec-Fetch-Site` is 403, and a change must be
//! JSON (`content-type: application/json`) or carry `X-Tlsgate-Request: 1` (else 403), which a
//! cross-site form cannot send. The login form (`POST /login`) is the one change that may be
//! form-encoded; it is still refused cross-origin.
//!
//! Then unauthenticated requests get 401: JSON for `/api/*`, the login page otherwise.
//! `/healthz`, `/login`, `/logout` and `/style.css` need no credentials. The session cookie is
//! also `SameSite=Strict` and `HttpOnly`.

use crate::api;
use crate::auth::{Identity, COOKIE_NAME, SESSION_TTL};
use crate::State;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, SET_COOKIE};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use tlsgate_error::Classify;
use tlsgate_wire::percent::{self, Plus};

/// Largest request body read.
const MAX_BODY: usize = 1024 * 1024;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const LOGIN_HTML: &str = include_str!("../assets/login.html");
const APP_JS: &str = include_str!("../assets/app.js");
const CHARTS_JS: &str = include_str!("../assets/charts.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");

type Resp = Response<Full<Bytes>>;

fn respond(status: StatusCode, ctype: &str, body: impl Into<Bytes>) -> Resp {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, ctype)
        .header(CACHE_CONTROL, "no-store")
        .header("x-content-type-options", "nosniff")
        .header("x-frame-options", "DENY")
        .header(
            "content-security-policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'",
        )
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

fn json(answer: api::Answer) -> Resp {
    let body = serde_json::to_vec(&answer.1).unwrap_or_default();
    respond(answer.0, "application/json", body)
}

fn redirect(to: &str, cookie: Option<String>) -> Resp {
    let mut b = Response::builder()
        .status(StatusCode::SEE_OTHER)
        .header(LOCATION, to)
        .header(CACHE_CONTROL, "no-store");
    if let Some(c) = cookie {
        b = b.header(SET_COOKIE, c);
    }
    b.body(Full::new(Bytes::new()))
        .expect("static response parts are valid")
}

fn login_page(status: StatusCode, message: &str) -> Resp {
    let page = LOGIN_HTML.replace("{{message}}", message);
    respond(status, "text/html; charset=utf-8", page)
}

/// Serves one connection's requests.
pub async fn handle(req: Request<hyper::body::Incoming>, state: Arc<State>) -> Result<Resp, std::convert::Infallible> {
    let (parts, body) = req.into_parts();
    let (method, headers) = (parts.method, parts.headers);
    let path = parts.uri.path().to_string();
    let query = parts.uri.query().unwrap_or("").to_string();
    let checked = if method == Method::POST && path == "/login" {
        state.guard.check_form_post(&parts.uri, &headers)
    } else {
        state.guard.check(&method, &parts.uri, &headers)
    };
    if let Err(refusal) = checked {
        tracing::warn!(%method, %path, %refusal, "console: request refused");
        let error = (refusal.status(), serde_json::json!({"error": refusal.to_string()}));
        return Ok(if path.starts_with("/api/") {
            json(error)
        } else {
            respond(refusal.status(), "text/plain; charset=utf-8", format!("{refusal}\n"))
        });
    }
    let body = match tlsgate_admin::guard::read_body(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => return Ok(json((e.status(), serde_json::json!({"error": e.to_string()})))),
    };
    // Unauthenticated routes.
    match (&method, path.as_str()) {
        (&Method::GET, "/healthz") => return Ok(respond(StatusCode::OK, "text/plain", "ok\n")),
        (&Method::GET, "/login") => return Ok(login_page(StatusCode::OK, "")),
        (&Method::GET, "/style.css") => return Ok(respond(StatusCode::OK, "text/css; charset=utf-8", STYLE_CSS)),
        (&Method::POST, "/login") => return Ok(login(&state, &body)),
        (&Method::GET | &Method::POST, "/logout") => {
            state.auth.end_session(&headers);
            let clear = format!("{COOKIE_NAME}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
            return Ok(redirect("/login", Some(clear)));
        }
        _ => {}
    }
    let Some(who) = state.auth.identify(&headers) else {
        return Ok(if path.starts_with("/api/") {
            json((
                StatusCode::UNAUTHORIZED,
                serde_json::json!({"error": "authentication required: Authorization: Bearer TOKEN"}),
            ))
        } else {
            login_page(StatusCode::UNAUTHORIZED, "")
        });
    };
    Ok(route(&state, &who, &method, &path, &query, &body).await)
}

async fn route(state: &State, who: &Identity, method: &Method, path: &str, query: &str, body: &[u8]) -> Resp {
    let asset = |ctype: &str, text: &'static str| respond(StatusCode::OK, ctype, text);
    match (method, path) {
        (&Method::GET, "/" | "/index.html") => asset("text/html; charset=utf-8", INDEX_HTML),
        (&Method::GET, "/app.js") => asset("text/javascript; charset=utf-8", APP_JS),
        (&Method::GET, "/charts.js") => asset("text/javascript; charset=utf-8", CHARTS_JS),
        (&Method::GET, "/api/overview") => json(api::overview(state, who).await),
        (&Method::GET, "/api/document") => json(api::document(state).await),
        (&Method::GET, "/api/keyservers") => json(api::keyservers(state).await),
        (&Method::GET, "/api/history") => {
            let limit = query
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == "limit")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(20);
            json(api::history(state, limit).await)
        }
        (&Method::GET, "/api/whoami") => json((
            StatusCode::OK,
            serde_json::json!({"author": who.author(), "open": state.auth.is_open()}),
        )),
        (&Method::POST, p) if p.starts_with("/api/pools/") && p.ends_with("/members") => {
            let name = &p["/api/pools/".len()..p.len() - "/members".len()];
            if name.is_empty() || name.contains('/') {
                return json(api::bad_request("use POST /api/pools/NAME/members"));
            }
            json(api::edit_members(state, who, &percent::decode(name, Plus::Literal), body).await)
        }
        (&Method::GET, "/api/access-rules") => json(api::access_rules(state).await),
        (&Method::PUT, "/api/access-rules") => json(api::set_access_rules(state, who, body).await),
        (&Method::POST, p) if p.starts_with("/api/rollback/") => match p["/api/rollback/".len()..].parse::<u64>() {
            Ok(v) => json(api::rollback(state, who, v, body).await),
            Err(_) => json(api::bad_request("use POST /api/rollback/VERSION")),
        },
        (_, p) if p.starts_with("/api/") => json((
            StatusCode::NOT_FOUND,
            serde_json::json!({"error": format!("no API {method} {p}; see docs/CONSOLE.md")}),
        )),
        _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
    }
}

fn login(state: &State, body: &[u8]) -> Resp {
    let form = String::from_utf8_lossy(body);
    let token = form
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| percent::decode(v, Plus::Space))
        .unwrap_or_default();
    let id = match state.auth.login(&token) {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(side = %e.side(), kind = e.kind(), "console: login refused");
            return login_page(StatusCode::UNAUTHORIZED, "Wrong token.");
        }
    };
    let cookie = format!(
        "{COOKIE_NAME}={id}; Path=/; Max-Age={}; HttpOnly; SameSite=Strict",
        SESSION_TTL.as_secs()
    );
    redirect("/", Some(cookie))
}
