//! A browser in miniature over the router: a cookie, the CSRF token of the last page.

#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic on a failed expectation

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::header::{CONTENT_TYPE, COOKIE, HOST, LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, Request, StatusCode};
use cortex_app::engine::Engine;
use cortex_core::{engine::CortexMemory, in_memory::InMemoryStore, memory::MemoryKind};
use cortex_providers::FakeProvider;
use cortex_web::{Login, Ready, Viewer, WebConfig, WebState, router};
use tower::ServiceExt;

/// A `Login` that maps fixed secrets to viewers (the hosted server's keys, in miniature).
#[derive(Debug)]
pub struct Secrets(pub HashMap<String, Viewer>);

#[async_trait]
impl Login for Secrets {
    async fn viewer_for_secret(&self, secret: &str) -> Option<Viewer> {
        self.0.get(secret).cloned()
    }
}

/// An engine over one in-memory store (memories, timeline and graph) and the fake
/// embedder, as `cortex ui` wires a real one.
pub fn engine() -> Arc<Engine> {
    let store = Arc::new(InMemoryStore::new());
    let memory = CortexMemory::new(store.clone(), Arc::new(FakeProvider::new(256)))
        .with_enrichment(store.clone());
    Arc::new(Engine {
        memory: Arc::new(memory),
        store,
        user_id: "ada".into(),
        top_k: 10,
    })
}

pub fn app(engine: Arc<Engine>, login: Arc<dyn Login>, config: WebConfig) -> Router {
    router(WebState::with_config(
        Arc::new(Ready(engine)),
        login,
        config,
    ))
}

/// Secrets that each log a user in with write access.
pub fn secrets(pairs: &[(&str, &str)]) -> Arc<dyn Login> {
    Arc::new(Secrets(
        pairs
            .iter()
            .map(|(s, u)| (s.to_string(), Viewer::writer(*u)))
            .collect(),
    ))
}

pub async fn remember(engine: &Engine, user: &str, content: &str) -> String {
    engine
        .memory
        .memorize(user, content, MemoryKind::Note, &[], &Default::default())
        .await
        .unwrap()
        .memory
        .id
        .to_string()
}

/// What came back.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn location(&self) -> &str {
        self.headers
            .get(LOCATION)
            .map(|v| v.to_str().unwrap())
            .unwrap_or("")
    }

    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// The value a `Set-Cookie` gives cookie `name`.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.set_cookies().iter().find_map(|c| {
            let first = c.split(';').next()?;
            let (k, v) = first.split_once('=')?;
            (k == name).then(|| v.to_owned())
        })
    }

    /// The first CSRF field's value on the page.
    pub fn csrf(&self) -> String {
        let marker = r#"name="csrf" value=""#;
        let start = self.body.find(marker).expect("a form with a csrf field") + marker.len();
        let len = self.body[start..].find('"').unwrap();
        self.body[start..start + len].to_owned()
    }
}

pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = to_bytes(response.into_body(), usize::MAX).await.unwrap();
    Answer {
        status,
        headers,
        body: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

pub const HOST_NAME: &str = "cortex.test";

pub fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut r = Request::get(path).header(HOST, HOST_NAME);
    if let Some(c) = cookie {
        r = r.header(COOKIE, c);
    }
    r.body(Body::empty()).unwrap()
}

pub fn post(path: &str, cookie: Option<&str>, form: &[(&str, &str)]) -> Request<Body> {
    post_from(path, cookie, form, None)
}

pub fn post_from(
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
    origin: Option<&str>,
) -> Request<Body> {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let mut r = Request::post(path)
        .header(HOST, HOST_NAME)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        r = r.header(COOKIE, c);
    }
    if let Some(o) = origin {
        r = r.header("origin", o);
    }
    r.body(Body::from(body)).unwrap()
}

/// A logged-in browser: its cookie header and the CSRF token its forms carry.
#[derive(Debug, Clone)]
pub struct Browser {
    pub cookie: String,
    pub csrf: String,
}

/// Logs in through the login form with `secret`.
pub async fn log_in(app: &Router, secret: &str) -> Browser {
    let form = send(app, get("/login", None)).await;
    assert_eq!(form.status, StatusCode::OK);
    let login_cookie = form.cookie("cortex_login").unwrap();
    let csrf = form.csrf();
    let done = send(
        app,
        post(
            "/login",
            Some(&format!("cortex_login={login_cookie}")),
            &[("csrf", &csrf), ("secret", secret)],
        ),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.location(), "/");
    browser(app, &done).await
}

/// The browser a successful login answer opened.
pub async fn browser(app: &Router, login: &Answer) -> Browser {
    let cookie = format!("cortex_session={}", login.cookie("cortex_session").unwrap());
    let home = send(app, get("/", Some(&cookie))).await;
    assert_eq!(home.status, StatusCode::OK, "{}", home.body);
    Browser {
        cookie,
        csrf: home.csrf(),
    }
}

impl Browser {
    pub async fn get(&self, app: &Router, path: &str) -> Answer {
        send(app, get(path, Some(&self.cookie))).await
    }

    /// A form post with this browser's CSRF token added.
    pub async fn post(&self, app: &Router, path: &str, form: &[(&str, &str)]) -> Answer {
        let mut all = vec![("csrf", self.csrf.as_str())];
        all.extend_from_slice(form);
        send(app, post(path, Some(&self.cookie), &all)).await
    }
}

/// Every memory id a page links to, in order, without repeats.
pub fn memory_links(body: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for part in body.split(r#"href="/memory/"#).skip(1) {
        let id: String = part.chars().take_while(|c| *c != '"').collect();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}
