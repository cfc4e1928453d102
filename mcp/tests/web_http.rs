//! The web page in the HTTP server (`/`): logged in with the server's own credentials,
//! on SQLite and on Postgres. With API keys each person sees, exports and opens only
//! their own user's memories; a read key changes nothing; a revoked key ends its page
//! session on the next request; failed logins are throttled; `/mcp` works beside it; the
//! shared token logs in as the configured user; `CORTEX_HTTP_WEB=off` serves no page.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

#[path = "support/mcp_http.rs"]
mod mcp_http;

use std::sync::Arc;

use chrono::Utc;
use cortex_core::keys::KeyStore;
use cortex_core::keys::{self, Scope};
use mcp_http::{Client, Server, TestStore};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

/// A browser in miniature: no redirects followed, cookies carried by hand.
struct Page {
    http: reqwest::Client,
    base: String,
    cookie: String,
    csrf: String,
}

fn cookie_value(response: &reqwest::Response, name: &str) -> Option<String> {
    response.headers().get_all(SET_COOKIE).iter().find_map(|v| {
        let first = v.to_str().ok()?.split(';').next()?;
        let (k, v) = first.split_once('=')?;
        (k == name && !v.is_empty()).then(|| v.to_owned())
    })
}

fn csrf_of(body: &str) -> String {
    let marker = r#"name="csrf" value=""#;
    let start = body.find(marker).expect("a form with a csrf field") + marker.len();
    let len = body[start..].find('"').unwrap();
    body[start..start + len].to_owned()
}

/// `pairs` as an urlencoded form body, with its content type.
fn encode(pairs: &[(&str, &str)]) -> (&'static str, String) {
    let url = reqwest::Url::parse_with_params("http://form.invalid/", pairs).unwrap();
    (
        "application/x-www-form-urlencoded",
        url.query().unwrap_or_default().to_owned(),
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Posts the login form with `secret`: the answer's status, and the page when it opened a
/// session.
async fn log_in(server: &Server, secret: &str) -> (StatusCode, Option<Page>) {
    let http = client();
    let base = server.base_url();
    let form = http.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(form.status(), StatusCode::OK);
    let login_cookie = cookie_value(&form, "cortex_login").unwrap();
    let csrf = csrf_of(&form.text().await.unwrap());
    let done = http
        .post(format!("{base}/login"))
        .header(COOKIE, format!("cortex_login={login_cookie}"))
        .header(CONTENT_TYPE, encode(&[]).0)
        .body(encode(&[("csrf", csrf.as_str()), ("secret", secret)]).1)
        .send()
        .await
        .unwrap();
    let status = done.status();
    let Some(session) = cookie_value(&done, "cortex_session") else {
        return (status, None);
    };
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(done.headers()[LOCATION], "/");
    let cookie = format!("cortex_session={session}");
    let home = http
        .get(format!("{base}/"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK);
    let csrf = csrf_of(&home.text().await.unwrap());
    let page = Page {
        http,
        base,
        cookie,
        csrf,
    };
    (status, Some(page))
}

impl Page {
    async fn get(&self, path: &str) -> (StatusCode, String) {
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> (StatusCode, String) {
        let mut all = vec![("csrf", self.csrf.as_str())];
        all.extend_from_slice(form);
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .header(CONTENT_TYPE, encode(&[]).0)
            .body(encode(&all).1)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    }
}

async fn key(store: &dyn KeyStore, user: &str, scope: Scope) -> (String, String) {
    let issued = keys::issue(user, scope, None, None, Utc::now()).unwrap();
    store.insert_key(&issued.stored).await.unwrap();
    (issued.token, issued.stored.id)
}

async fn keyed_page(store: Arc<dyn KeyStore>, env: &[(&str, &str)]) {
    let (ada_key, _) = key(store.as_ref(), "ada", Scope::Write).await;
    let (bea_key, bea_id) = key(store.as_ref(), "bea", Scope::Write).await;
    let (ada_read, _) = key(store.as_ref(), "ada", Scope::Read).await;
    let server = Server::start(&[&[("CORTEX_HTTP_AUTH", "keys")][..], env].concat());
    let ada_mcp = Client::open(&server, &ada_key);
    let ada_memory = ada_mcp.ok(
        "memorize",
        json!({"content": "Ada prefers green tea", "event": {"time": "2024-05-01"},
               "entities": [{"name": "Grace", "type": "person"}]}),
    )["id"]
        .as_str()
        .unwrap()
        .to_owned();
    Client::open(&server, &bea_key).ok("memorize", json!({"content": "Bea prefers black coffee"}));

    // Each key's page shows its own user's memories, timeline, graph and export only.
    let (_, ada) = log_in(&server, &ada_key).await;
    let ada = ada.expect("ada's key logs in");
    let (_, bea) = log_in(&server, &bea_key).await;
    let bea = bea.expect("bea's key logs in");
    let (status, home) = ada.get("/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        home.contains("Ada prefers green tea") && !home.contains("Bea"),
        "{home}"
    );
    let (_, home) = bea.get("/").await;
    assert!(
        home.contains("Bea prefers black coffee") && !home.contains("Ada"),
        "{home}"
    );
    let (_, timeline) = bea.get("/timeline").await;
    assert!(!timeline.contains("green tea"), "{timeline}");
    let (_, graph) = bea.get("/graph").await;
    assert!(!graph.contains("Grace"), "{graph}");
    let (_, graph) = ada.get("/graph").await;
    assert!(graph.contains("Grace"), "{graph}");
    let (status, _) = bea.get(&format!("/memory/{ada_memory}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, export) = bea.get("/export/download?format=jsonl").await;
    assert_eq!(status, StatusCode::OK);
    let lines: Vec<Value> = export
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["users"], json!(["bea"]));
    assert_eq!(lines.len(), 2, "the header and bea's one memory: {export}");
    assert!(!export.contains("Ada"), "{export}");
    let (_, stats) = bea.get("/stats").await;
    assert!(
        !stats.contains("On disk"),
        "a shared server shows no store size: {stats}"
    );

    // Bea cannot forget Ada's memory through the page.
    let (status, _) = bea
        .post(
            &format!("/memory/{ada_memory}/forget"),
            &[("confirm", "yes")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Ada's read key: every page, no correction form, and a write is refused.
    let (_, reader) = log_in(&server, &ada_read).await;
    let reader = reader.expect("a read key logs in");
    let (_, page) = reader.get(&format!("/memory/{ada_memory}")).await;
    assert!(page.contains("Ada prefers green tea"), "{page}");
    assert!(
        !page.contains("Forget") && !page.contains("Correct it"),
        "{page}"
    );
    let (status, body) = reader
        .post(
            &format!("/memory/{ada_memory}/forget"),
            &[("confirm", "yes")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body.contains("can only read"), "{body}");
    let listed = ada_mcp.ok("list_memories", json!({}));
    assert_eq!(
        mcp_http::contents(&listed, "memories"),
        ["Ada prefers green tea"]
    );

    // A revoked key ends its page session on the next request.
    assert!(store.revoke_key(&bea_id, Utc::now()).await.unwrap());
    let r = bea
        .http
        .get(format!("{}/", bea.base))
        .header(COOKIE, &bea.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()[LOCATION], "/login");
    let (status, page) = log_in(&server, &bea_key).await;
    assert!(
        page.is_none() && status == StatusCode::UNAUTHORIZED,
        "{status}"
    );

    // Failed logins from one client are throttled: past the limit even a right key waits.
    // (One failure above: the revoked key.)
    for _ in 0..9 {
        let (status, page) = log_in(&server, "cx_not_a_real_key").await;
        assert!(
            page.is_none() && status == StatusCode::UNAUTHORIZED,
            "{status}"
        );
    }
    let (status, page) = log_in(&server, &ada_key).await;
    assert!(page.is_none(), "logged in while throttled");
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    // The tools are not the page: /mcp still answers ada.
    ada_mcp.ok("list_memories", json!({}));
    // The log is read on another thread: give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server.log().join("\n").contains("too many failed logins") {
        assert!(
            std::time::Instant::now() < deadline,
            "no throttle line in the log:\n{}",
            server.log().join("\n")
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_each_key_only_its_users_memories_on_sqlite() {
    let store = TestStore::sqlite();
    keyed_page(store.keys.clone(), &store.env()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_each_key_only_its_users_memories_on_postgres() {
    let Some(store) = TestStore::postgres("web_http").await else {
        return;
    };
    keyed_page(store.keys.clone(), &store.env()).await;
    store.remove().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_token_logs_in_as_the_configured_user_and_the_page_can_be_off() {
    let store = TestStore::sqlite();
    const TOKEN: &str = "web-test-token-0123456789";
    let env = [("CORTEX_HTTP_TOKEN", TOKEN), ("CORTEX_USER_ID", "carol")];
    let server = Server::start(&[&env[..], &store.env()].concat());
    Client::open(&server, TOKEN).ok("memorize", json!({"content": "Carol keeps bees"}));
    let (_, page) = log_in(&server, TOKEN).await;
    let page = page.expect("the token logs in");
    let (_, home) = page.get("/").await;
    assert!(
        home.contains("Carol keeps bees") && home.contains("carol"),
        "{home}"
    );
    let (status, page) = log_in(&server, "web-test-token-wrong-wrong").await;
    assert!(
        page.is_none() && status == StatusCode::UNAUTHORIZED,
        "{status}"
    );
    drop(server);

    let off = [("CORTEX_HTTP_TOKEN", TOKEN), ("CORTEX_HTTP_WEB", "off")];
    let server = Server::start(&[&off[..], &store.env()].concat());
    for path in ["/", "/login"] {
        // Not the page: the bearer guard of every path but the open ones answers.
        let (status, _, body) = server.get(path);
        assert_eq!(status, 401, "{path} with the page off: {body}");
        assert!(!body.contains("csrf"), "{body}");
    }
    Client::open(&server, TOKEN).ok("list_memories", json!({}));
}
