//! The pages in a real browser: headless Chromium, driven over WebDriver (chromedriver),
//! against the router on a real 127.0.0.1 listener over an engine with the fake embedder.
//!
//! Each test starts its own chromedriver on a free port (killed, with the browsers it
//! started, when the test ends) and its own server. Without `chromium` and `chromedriver`
//! on PATH (or `CORTEX_CHROMIUM` / `CORTEX_CHROMEDRIVER`), a test prints one skip line and
//! passes; under CI (`CI` set) it fails and names `scripts/install-chromium.sh`.
//!
//! Screenshots of the main pages go to `$CORTEX_SCREENSHOT_DIR`, else
//! `target/screenshots/` under the workspace root.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use cortex_app::engine::Engine;
use cortex_core::memory::MemoryKind;
use cortex_web::{Login, OneTimeToken, SESSION_COOKIE, Viewer, WebConfig};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use support::{Secrets, app, engine};

const ADA_KEY: &str = "key-ada-0123456789";
const BOB_KEY: &str = "key-bob-9876543210";

// ---------------------------------------------------------------------------------------
// Chromium and chromedriver

/// The two programs the tests need.
#[derive(Debug)]
struct Tools {
    chromium: PathBuf,
    chromedriver: PathBuf,
}

/// A program named by `var`, else the first of `names` on PATH.
fn program(var: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

/// The tools, or `None` (after one skip line) when they are missing outside CI. Under CI
/// a missing tool fails the test.
fn tools(test: &str) -> Option<Tools> {
    let chromium = program("CORTEX_CHROMIUM", &["chromium", "chromium-browser"]);
    let chromedriver = program("CORTEX_CHROMEDRIVER", &["chromedriver"]);
    match (chromium, chromedriver) {
        (Some(chromium), Some(chromedriver)) => Some(Tools {
            chromium,
            chromedriver,
        }),
        _ => {
            let why = "chromium and chromedriver are not on PATH: run `bash \
                       scripts/install-chromium.sh` (as root on Debian), or set \
                       CORTEX_CHROMIUM and CORTEX_CHROMEDRIVER";
            if std::env::var("CI").is_ok_and(|v| !v.is_empty()) {
                panic!("{test}: {why}");
            }
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

/// A chromedriver this test started, in its own process group: dropping it kills the
/// group (chromedriver and every browser it launched).
#[derive(Debug)]
struct Driver {
    child: Child,
    url: String,
    chromium: PathBuf,
}

impl Driver {
    async fn start(tools: &Tools) -> Driver {
        use std::os::unix::process::CommandExt;

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&tools.chromedriver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", tools.chromedriver.display()));
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            chromium: tools.chromium.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = reqwest::get(format!("{}/status", driver.url))
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return driver;
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver did not answer on {}",
                driver.url
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A fresh headless browser: its own profile, so its own cookies.
    async fn browser(&self) -> Client {
        self.browser_saving_to(None).await
    }

    /// A fresh headless browser that saves downloads into `downloads`, without asking.
    async fn browser_saving_to(&self, downloads: Option<&std::path::Path>) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".to_owned(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": self.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                ],
                "prefs": {
                    "download.default_directory": downloads,
                    "download.prompt_for_download": false,
                },
            }),
        );
        ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("no browser session from {}: {e}", self.url))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------
// The site under test

/// The `cortex ui` one-time link for ada, and two keys (ada's, bob's) for the login form.
#[derive(Debug)]
struct Logins {
    link: Arc<OneTimeToken>,
    keys: Secrets,
}

#[async_trait]
impl Login for Logins {
    async fn viewer_for_secret(&self, secret: &str) -> Option<Viewer> {
        match self.link.viewer_for_secret(secret).await {
            Some(viewer) => Some(viewer),
            None => self.keys.viewer_for_secret(secret).await,
        }
    }
}

/// A server on 127.0.0.1 and a chromedriver, for one test.
#[derive(Debug)]
struct Site {
    engine: Arc<Engine>,
    link: Arc<OneTimeToken>,
    base: String,
    server: tokio::task::JoinHandle<()>,
    driver: Driver,
}

impl Site {
    /// `None` when the test is skipped (no Chromium, outside CI).
    async fn start(test: &str) -> Option<Site> {
        let tools = tools(test)?;
        let engine = engine();
        let link = Arc::new(OneTimeToken::new("ada"));
        let keys = Secrets(HashMap::from([
            (ADA_KEY.to_owned(), Viewer::writer("ada")),
            (BOB_KEY.to_owned(), Viewer::writer("bob")),
        ]));
        let login = Arc::new(Logins {
            link: link.clone(),
            keys,
        });
        let router = app(engine.clone(), login, WebConfig::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        let driver = Driver::start(&tools).await;
        Some(Site {
            engine,
            link,
            base,
            server,
            driver,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn remember(&self, user: &str, content: &str, kind: MemoryKind, tags: &[&str]) -> String {
        let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
        self.engine
            .memory
            .memorize(user, content, kind, &tags, &Default::default())
            .await
            .unwrap()
            .memory
            .id
            .to_string()
    }

    /// Stores a memory with its structure (events, entities, relations) given as
    /// memorize's JSON arguments.
    async fn remember_structured(&self, user: &str, content: &str, structure: Value) -> String {
        let args: cortex_app::StructureArgs = serde_json::from_value(structure).unwrap();
        let options = cortex_core::engine::MemorizeOptions {
            structure: args.into_structure().unwrap(),
            ..Default::default()
        };
        self.engine
            .memory
            .memorize(user, content, MemoryKind::Event, &[], &options)
            .await
            .unwrap()
            .memory
            .id
            .to_string()
    }

    /// A fresh browser logged in through the login form with `key`.
    async fn logged_in(&self, key: &str) -> Client {
        self.logged_in_saving_to(key, None).await
    }

    /// The same, saving downloads into `downloads`.
    async fn logged_in_saving_to(&self, key: &str, downloads: Option<&std::path::Path>) -> Client {
        let c = self.driver.browser_saving_to(downloads).await;
        c.goto(&self.url("/login")).await.unwrap();
        let secret = c.find(Locator::Css("input[name=secret]")).await.unwrap();
        secret.send_keys(key).await.unwrap();
        click(&c, "form.login button[type=submit]").await;
        let landed = path(&c).await;
        if landed != "/" {
            panic!(
                "logging in with a key landed on {landed}: {}",
                text(&c, "main").await
            );
        }
        c
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.server.abort();
    }
}

// ---------------------------------------------------------------------------------------
// Page helpers

/// Clicks what `css` finds (a link or a form's button: every click here loads a page) and
/// waits for the new page: WebDriver's click may return before the navigation it starts
/// has finished, which a busy machine shows.
async fn click(c: &Client, css: &str) {
    follow(c, Locator::Css(css), css).await;
}

/// Clicks a checkbox (no page loads).
async fn tick(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .click()
        .await
        .unwrap();
}

async fn follow(c: &Client, locator: Locator<'_>, what: &str) {
    c.execute("window.__cortexLeaving = true;", vec![])
        .await
        .unwrap();
    c.find(locator)
        .await
        .unwrap_or_else(|e| panic!("no {what} on the page: {e}"))
        .click()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        // Fails while the old document unloads; true once the new one has loaded.
        let loaded = c
            .execute(
                "return window.__cortexLeaving === undefined && document.readyState === 'complete';",
                vec![],
            )
            .await;
        if matches!(loaded, Ok(Value::Bool(true))) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("clicking {what} loaded no new page");
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
        .text()
        .await
        .unwrap()
}

async fn texts(c: &Client, css: &str) -> Vec<String> {
    let mut all = Vec::new();
    for e in c.find_all(Locator::Css(css)).await.unwrap() {
        all.push(e.text().await.unwrap());
    }
    all
}

/// The path (and query) the address bar shows.
async fn path(c: &Client) -> String {
    let url = c.current_url().await.unwrap();
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

async fn script(c: &Client, js: &str) -> Value {
    c.execute(js, vec![]).await.unwrap()
}

/// Where screenshots go: `$CORTEX_SCREENSHOT_DIR`, else `<workspace>/target/screenshots`.
fn screenshot_dir() -> PathBuf {
    match std::env::var_os("CORTEX_SCREENSHOT_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join("target")
            .join("screenshots"),
    }
}

/// Writes the visible page as `<name>.png`.
async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    save_png(&png, name);
}

fn save_png(png: &[u8], name: &str) {
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

// ---------------------------------------------------------------------------------------
// The tests

#[tokio::test]
async fn the_one_time_link_logs_in_and_leaves_the_address_bar() {
    let Some(site) = Site::start("the_one_time_link_logs_in_and_leaves_the_address_bar").await
    else {
        return;
    };
    site.remember(
        "ada",
        "Ada prefers green tea",
        MemoryKind::Preference,
        &["drinks"],
    )
    .await;
    site.remember("ada", "Ada's laptop runs Debian", MemoryKind::Fact, &[])
        .await;
    let c = site.driver.browser().await;

    c.goto(&site.url(&site.link.login_path())).await.unwrap();
    let url = c.current_url().await.unwrap();
    assert_eq!(url.path(), "/", "the link redirects to Browse");
    assert!(
        !url.as_str().contains(site.link.token()),
        "the token left the address bar: {url}"
    );
    assert_eq!(c.title().await.unwrap(), "Your memories · Cortex");
    let memories = texts(&c, "table.memories a.content").await;
    assert_eq!(
        memories,
        ["Ada's laptop runs Debian", "Ada prefers green tea"]
    );
    assert_eq!(text(&c, "header.top .user").await, "ada");

    // The session cookie is there, and HttpOnly: the page's script cannot read it.
    let cookie = c.get_named_cookie(SESSION_COOKIE).await.unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    let visible = script(&c, "return document.cookie").await;
    assert!(
        !visible
            .as_str()
            .unwrap_or_default()
            .contains(SESSION_COOKIE),
        "document.cookie shows the session: {visible}"
    );
    screenshot(&c, "browse").await;

    // The link worked once: a second browser following it is sent to the login page.
    let other = site.driver.browser().await;
    other
        .goto(&site.url(&site.link.login_path()))
        .await
        .unwrap();
    assert_eq!(path(&other).await, "/login?error=link");
    assert!(text(&other, "p.error").await.contains("already used"));
    screenshot(&other, "login").await;

    // Logging out ends the session: Browse sends the browser to the login page.
    click(&c, "form.logout button").await;
    assert_eq!(path(&c).await, "/login");
    c.goto(&site.url("/")).await.unwrap();
    assert_eq!(path(&c).await, "/login");

    other.close().await.unwrap();
    c.close().await.unwrap();
}

#[tokio::test]
async fn search_with_a_filter_shows_only_matches_with_their_ranks() {
    let Some(site) = Site::start("search_with_a_filter_shows_only_matches_with_their_ranks").await
    else {
        return;
    };
    let chosen = "We chose Postgres as the production database";
    let backups = "We decided the database backups run nightly at two";
    site.remember("ada", chosen, MemoryKind::Decision, &["infra"])
        .await;
    site.remember("ada", backups, MemoryKind::Decision, &[])
        .await;
    site.remember(
        "ada",
        "The database migration notes live in the wiki",
        MemoryKind::Fact,
        &[],
    )
    .await;
    site.remember("ada", "Ada prefers green tea", MemoryKind::Preference, &[])
        .await;
    let c = site.logged_in(ADA_KEY).await;
    assert_eq!(texts(&c, "table.memories tbody tr").await.len(), 4);

    click(&c, "header.top nav a[href='/search']").await;
    assert_eq!(path(&c).await, "/search");
    c.find(Locator::Css("input[name=q]"))
        .await
        .unwrap()
        .send_keys("database")
        .await
        .unwrap();
    tick(&c, "form.search input[name=kinds][value=decision]").await;
    click(&c, "form.search button[type=submit]").await;

    let url = path(&c).await;
    assert!(url.starts_with("/search?"), "{url}");
    assert!(
        url.contains("q=database") && url.contains("kinds=decision"),
        "{url}"
    );
    let found = texts(&c, "table.results a.content").await;
    assert_eq!(found.len(), 2, "only the two decisions: {found:?}");
    assert!(found.contains(&chosen.to_owned()) && found.contains(&backups.to_owned()));
    for kind in texts(&c, "table.results td.kind").await {
        assert_eq!(kind, "decision");
    }
    for score in texts(&c, "table.results td.score").await {
        let score: f64 = score.parse().unwrap();
        assert!(score > 0.0, "a fused score: {score}");
    }
    for rank in texts(&c, "table.results td.dense").await {
        rank.parse::<u32>().unwrap();
    }
    for rank in texts(&c, "table.results td.bm25").await {
        rank.parse::<u32>().unwrap();
    }
    // The filter stays checked on the results page.
    let checked = c
        .find(Locator::Css(
            "form.search input[name=kinds][value=decision]",
        ))
        .await
        .unwrap()
        .is_selected()
        .await
        .unwrap();
    assert!(checked);
    screenshot(&c, "search").await;

    // Browse's filter form narrows the list the same way.
    click(&c, "header.top nav a[href='/']").await;
    tick(&c, "form.filter input[name=kinds][value=preference]").await;
    click(&c, "form.filter button[type=submit]").await;
    assert_eq!(
        texts(&c, "table.memories a.content").await,
        ["Ada prefers green tea"]
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn a_memory_shows_its_history_and_takes_corrections() {
    let Some(site) = Site::start("a_memory_shows_its_history_and_takes_corrections").await else {
        return;
    };
    site.remember(
        "ada",
        "Ada's team meets on Tuesdays",
        MemoryKind::Event,
        &[],
    )
    .await;
    site.remember(
        "ada",
        "Ada's old locker code is 4711",
        MemoryKind::Fact,
        &[],
    )
    .await;
    let c = site.logged_in(ADA_KEY).await;

    // Open it from Browse.
    follow(
        &c,
        Locator::LinkText("Ada's team meets on Tuesdays"),
        "the memory's link",
    )
    .await;
    let first = path(&c).await;
    assert!(first.starts_with("/memory/"), "{first}");
    assert_eq!(c.title().await.unwrap(), "Memory · Cortex");
    assert_eq!(text(&c, "dd.state").await, "live");
    assert_eq!(texts(&c, "table.history tbody tr").await.len(), 1);

    // Retag: kind and tags through the form; the correction gets a new id.
    c.find(Locator::Css("form.retag select[name=kind]"))
        .await
        .unwrap()
        .select_by_value("fact")
        .await
        .unwrap();
    c.find(Locator::Css("form.retag input[name=add]"))
        .await
        .unwrap()
        .send_keys("team, schedule")
        .await
        .unwrap();
    click(&c, "form.retag button[type=submit]").await;
    let retagged = path(&c).await;
    assert!(
        retagged.starts_with("/memory/") && retagged != first,
        "{retagged}"
    );
    assert_eq!(texts(&c, "table.history tbody tr").await.len(), 2);
    let reasons = texts(&c, "table.history tbody tr td:last-child").await;
    assert!(
        reasons.iter().any(|r| r.starts_with("retagged")),
        "{reasons:?}"
    );
    let mut tags = texts(&c, "dl.memory .tag").await;
    tags.sort();
    assert_eq!(tags, ["schedule", "team"]);

    // Replace: a corrected text, which supersedes it.
    let content = c
        .find(Locator::Css("form.replace textarea[name=content]"))
        .await
        .unwrap();
    content.clear().await.unwrap();
    content
        .send_keys("Ada's team meets on Wednesdays")
        .await
        .unwrap();
    click(&c, "form.replace button[type=submit]").await;
    let replaced = path(&c).await;
    assert!(replaced != retagged, "{replaced}");
    assert_eq!(
        text(&c, "p.memory-content").await,
        "Ada's team meets on Wednesdays"
    );
    let history = texts(&c, "table.history tbody tr").await;
    assert_eq!(history.len(), 3, "{history:?}");
    assert!(history.iter().any(|r| r.contains("Tuesdays")));
    assert_eq!(texts(&c, "table.history tr.current").await.len(), 1);
    screenshot(&c, "memory").await;
    let section = c.find(Locator::Css("section.history")).await.unwrap();
    let png = section.screenshot().await.unwrap();
    save_png(&png, "memory-history");

    // The old version's page says it was superseded, and offers no corrections.
    c.goto(&site.url(&first)).await.unwrap();
    assert!(text(&c, "dd.state").await.starts_with("superseded on"));
    assert!(
        c.find_all(Locator::Css("form.retag"))
            .await
            .unwrap()
            .is_empty()
    );

    // Browse shows the correction, not the versions it replaced.
    c.goto(&site.url("/")).await.unwrap();
    let listed = texts(&c, "table.memories a.content").await;
    assert!(listed.contains(&"Ada's team meets on Wednesdays".to_owned()));
    assert!(!listed.iter().any(|m| m.contains("Tuesdays")), "{listed:?}");

    // Forget: the button leads to a confirmation; only that deletes.
    follow(
        &c,
        Locator::LinkText("Ada's old locker code is 4711"),
        "the memory's link",
    )
    .await;
    click(&c, "form.forget button").await;
    assert_eq!(c.title().await.unwrap(), "Forget this memory? · Cortex");
    assert_eq!(site.engine.memory.count("ada").await.unwrap(), 2, "not yet");
    screenshot(&c, "forget").await;
    click(&c, "form.confirm button.danger").await;
    assert_eq!(path(&c).await, "/");
    let listed = texts(&c, "table.memories a.content").await;
    assert_eq!(listed, ["Ada's team meets on Wednesdays"]);
    assert_eq!(site.engine.memory.count("ada").await.unwrap(), 1);
    c.close().await.unwrap();
}

#[tokio::test]
async fn a_memory_holding_markup_renders_as_text() {
    let Some(site) = Site::start("a_memory_holding_markup_renders_as_text").await else {
        return;
    };
    let payload = r#"<script>window.__xss=1</script><img src=x onerror="window.__xss=2">"#;
    let id = site
        .remember("ada", payload, MemoryKind::Fact, &["<b>tag</b>"])
        .await;
    let c = site.logged_in(ADA_KEY).await;

    let pages = [
        ("/".to_owned(), "table.memories a.content"),
        ("/search?q=xss".to_owned(), "table.results a.content"),
        (format!("/memory/{id}"), "p.memory-content"),
    ];
    for (page, shown) in &pages {
        c.goto(&site.url(page)).await.unwrap();
        assert_eq!(&text(&c, shown).await, payload, "{page} shows the text");
        let xss = script(&c, "return typeof window.__xss").await;
        assert_eq!(xss, json!("undefined"), "{page} ran the memory's script");
        assert!(
            c.find_all(Locator::Css("main img, main script, main b"))
                .await
                .unwrap()
                .is_empty(),
            "{page} made elements of the memory"
        );
        assert!(
            c.find(Locator::Css("body"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
                .contains("<b>tag</b>"),
            "{page} shows the tag as text"
        );
    }
    c.close().await.unwrap();
}

#[tokio::test]
async fn a_write_without_the_csrf_token_is_refused() {
    let Some(site) = Site::start("a_write_without_the_csrf_token_is_refused").await else {
        return;
    };
    let id = site
        .remember("ada", "Ada parks on level 3", MemoryKind::Fact, &[])
        .await;
    let c = site.logged_in(ADA_KEY).await;

    // A retag whose form lost its token.
    c.goto(&site.url(&format!("/memory/{id}"))).await.unwrap();
    script(
        &c,
        "document.querySelector('form.retag input[name=csrf]').remove(); return null",
    )
    .await;
    c.find(Locator::Css("form.retag input[name=add]"))
        .await
        .unwrap()
        .send_keys("tampered")
        .await
        .unwrap();
    click(&c, "form.retag button[type=submit]").await;
    assert_eq!(c.title().await.unwrap(), "Forbidden · Cortex");
    assert!(
        text(&c, "p.error").await.contains("security token"),
        "the page says why"
    );
    screenshot(&c, "csrf-refused").await;

    // A token that is not the session's.
    c.goto(&site.url(&format!("/memory/{id}"))).await.unwrap();
    script(
        &c,
        "document.querySelector('form.retag input[name=csrf]').value = 'forged'; return null",
    )
    .await;
    click(&c, "form.retag button[type=submit]").await;
    assert_eq!(c.title().await.unwrap(), "Forbidden · Cortex");

    // The confirmed forget without its token.
    c.goto(&site.url(&format!("/memory/{id}"))).await.unwrap();
    click(&c, "form.forget button").await;
    assert_eq!(c.title().await.unwrap(), "Forget this memory? · Cortex");
    script(
        &c,
        "document.querySelector('form.confirm input[name=csrf]').remove(); return null",
    )
    .await;
    click(&c, "form.confirm button.danger").await;
    assert_eq!(c.title().await.unwrap(), "Forbidden · Cortex");

    // Nothing changed.
    let history = site.engine.memory.history("ada", &id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert!(history[0].memory.tags.is_empty());
    assert_eq!(site.engine.memory.count("ada").await.unwrap(), 1);
    c.goto(&site.url(&format!("/memory/{id}"))).await.unwrap();
    assert_eq!(text(&c, "dd.state").await, "live");
    c.close().await.unwrap();
}

#[tokio::test]
async fn two_users_each_see_only_their_own_memories() {
    let Some(site) = Site::start("two_users_each_see_only_their_own_memories").await else {
        return;
    };
    site.remember(
        "ada",
        "Ada's project is called Lighthouse",
        MemoryKind::Fact,
        &[],
    )
    .await;
    site.remember("ada", "Ada prefers green tea", MemoryKind::Preference, &[])
        .await;
    let bobs = site
        .remember(
            "bob",
            "Bob's project is called Harbor",
            MemoryKind::Fact,
            &[],
        )
        .await;

    // A wrong key opens nothing.
    let stranger = site.driver.browser().await;
    stranger.goto(&site.url("/login")).await.unwrap();
    assert_eq!(stranger.title().await.unwrap(), "Log in · Cortex");
    screenshot(&stranger, "login-form").await;
    stranger
        .find(Locator::Css("input[name=secret]"))
        .await
        .unwrap()
        .send_keys("not-a-key")
        .await
        .unwrap();
    click(&stranger, "form.login button[type=submit]").await;
    assert!(
        text(&stranger, "p.error")
            .await
            .contains("opens no memories")
    );
    stranger.goto(&site.url("/")).await.unwrap();
    assert_eq!(path(&stranger).await, "/login");
    stranger.close().await.unwrap();

    // Both logged in at once, each in their own browser.
    let ada = site.logged_in(ADA_KEY).await;
    let bob = site.logged_in(BOB_KEY).await;
    for _ in 0..2 {
        ada.goto(&site.url("/")).await.unwrap();
        let mut seen = texts(&ada, "table.memories a.content").await;
        seen.sort();
        assert_eq!(
            seen,
            [
                "Ada prefers green tea",
                "Ada's project is called Lighthouse"
            ]
        );
        assert_eq!(text(&ada, "header.top .user").await, "ada");

        bob.goto(&site.url("/")).await.unwrap();
        assert_eq!(
            texts(&bob, "table.memories a.content").await,
            ["Bob's project is called Harbor"]
        );
        assert_eq!(text(&bob, "header.top .user").await, "bob");
    }

    // Search does not reach across, nor does a memory's own address.
    ada.goto(&site.url("/search?q=project+called+Harbor"))
        .await
        .unwrap();
    let found = texts(&ada, "table.results a.content").await;
    assert_eq!(found[0], "Ada's project is called Lighthouse");
    assert!(!found.iter().any(|m| m.contains("Bob")), "{found:?}");
    bob.goto(&site.url("/search?q=project+called+Lighthouse"))
        .await
        .unwrap();
    assert_eq!(
        texts(&bob, "table.results a.content").await,
        ["Bob's project is called Harbor"]
    );
    ada.goto(&site.url(&format!("/memory/{bobs}")))
        .await
        .unwrap();
    assert_eq!(ada.title().await.unwrap(), "Not Found · Cortex");
    let body = text(&ada, "body").await;
    assert!(!body.contains("Harbor"), "{body}");

    ada.close().await.unwrap();
    bob.close().await.unwrap();
}

/// Ada's three dated memories with their people, project and relations.
async fn ada_with_structure(site: &Site) -> [String; 3] {
    let kickoff = site
        .remember_structured(
            "ada",
            "Kick-off of Lighthouse with Grace in Lisbon",
            json!({
                "subject": "Lighthouse",
                "entities": [
                    {"name": "Lighthouse", "type": "project"},
                    {"name": "Grace", "type": "person", "aliases": ["Grace Hopper"]}
                ],
                "relations": [{"from": "Grace", "label": "leads", "to": "Lighthouse"}],
                "event": {"time": "2024-03-04T09:00:00Z", "place": "Lisbon", "actor": "Grace", "type": "meeting"}
            }),
        )
        .await;
    let launch = site
        .remember_structured(
            "ada",
            "Lighthouse launched to its first customers",
            json!({
                "subject": "Lighthouse",
                "event": {"time": "2024-09-20", "type": "launch"}
            }),
        )
        .await;
    let review = site
        .remember_structured(
            "ada",
            "Grace reviewed the Harbor design with Linus",
            json!({
                "entities": [{"name": "Harbor", "type": "project"}, {"name": "Linus", "type": "person"}],
                "relations": [
                    {"from": "Grace", "label": "reviewed", "to": "Harbor"},
                    {"from": "Linus", "label": "works on", "to": "Harbor"}
                ],
                "event": {"time": "2025-01-15T16:30:00Z", "actor": "Grace", "type": "review"}
            }),
        )
        .await;
    [kickoff, launch, review]
}

#[tokio::test]
async fn the_timeline_and_the_graph_lead_to_the_memories_behind_them() {
    let Some(site) =
        Site::start("the_timeline_and_the_graph_lead_to_the_memories_behind_them").await
    else {
        return;
    };
    let [kickoff, _, review] = ada_with_structure(&site).await;
    site.remember_structured(
        "bob",
        "Bob met Mallory in Oslo",
        json!({"entities": [{"name": "Mallory"}], "event": {"time": "2024-06-01"}}),
    )
    .await;
    let c = site.logged_in(ADA_KEY).await;

    // The timeline: a dot per event on the axis and the events by day, oldest first.
    click(&c, "header.top nav a[href='/timeline']").await;
    assert_eq!(c.title().await.unwrap(), "Timeline · Cortex");
    assert_eq!(
        c.find_all(Locator::Css("svg.timeline circle.event"))
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        texts(&c, "ol.timeline li.day").await,
        ["2024-03-04", "2024-09-20", "2025-01-15"]
    );
    let events = texts(&c, "ol.timeline li.event").await;
    assert!(
        events[0].contains("Kick-off of Lighthouse") && events[0].contains("at Lisbon"),
        "{events:?}"
    );
    assert!(
        events[2].contains("by Grace") && events[2].contains("review"),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e.contains("Mallory")),
        "bob's event on ada's page: {events:?}"
    );
    screenshot(&c, "timeline").await;
    // A date range narrows it; an event's memory is one click away.
    c.goto(&site.url("/timeline?since=2024-06-01&until=2025-01-01"))
        .await
        .unwrap();
    assert_eq!(texts(&c, "ol.timeline li.day").await, ["2024-09-20"]);
    c.goto(&site.url("/timeline")).await.unwrap();
    follow(
        &c,
        Locator::LinkText("Kick-off of Lighthouse with Grace in Lisbon"),
        "the event's memory",
    )
    .await;
    assert_eq!(path(&c).await, format!("/memory/{kickoff}"));

    // The graph: every entity drawn, each a link; the picture pans and zooms by script.
    click(&c, "header.top nav a[href='/graph']").await;
    assert_eq!(c.title().await.unwrap(), "Graph · Cortex");
    let mut drawn = texts(&c, "svg.graph text.node-label").await;
    drawn.sort();
    assert_eq!(drawn, ["Grace", "Harbor", "Lighthouse", "Linus"]);
    assert_eq!(
        c.find_all(Locator::Css("svg.graph line.edge"))
            .await
            .unwrap()
            .len(),
        3
    );
    screenshot(&c, "graph").await;
    let view = || async {
        script(
            &c,
            "return document.getElementById('graph').getAttribute('viewBox')",
        )
        .await
    };
    let home = view().await;
    c.find(Locator::Css("#zoom-in"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let zoomed = view().await;
    assert_ne!(
        zoomed, home,
        "zoom in changed nothing: the script did not run"
    );
    // A drag pans: the view moves, its size stays.
    let svg = c.find(Locator::Css("svg.graph")).await.unwrap();
    use fantoccini::actions::InputSource;
    let drag = fantoccini::actions::MouseActions::new("mouse".to_owned())
        .then(fantoccini::actions::PointerAction::MoveToElement {
            element: svg.clone(),
            duration: None,
            x: 5.0,
            y: 5.0,
        })
        .then(fantoccini::actions::PointerAction::Down {
            button: fantoccini::actions::MOUSE_BUTTON_LEFT,
        })
        .then(fantoccini::actions::PointerAction::MoveBy {
            duration: Some(Duration::from_millis(100)),
            x: 120.0,
            y: 40.0,
        })
        .then(fantoccini::actions::PointerAction::Up {
            button: fantoccini::actions::MOUSE_BUTTON_LEFT,
        });
    c.perform_actions(drag).await.unwrap();
    let panned = view().await;
    let size = |v: &Value| {
        v.as_str()
            .unwrap()
            .split(' ')
            .skip(2)
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_ne!(panned, zoomed, "a drag did not pan");
    assert_eq!(size(&panned), size(&zoomed));
    c.find(Locator::Css("#zoom-reset"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(view().await, home);

    // An entity opens its dossier: its relationships both ways and the memories behind it.
    click(&c, "svg.graph a.node[href='/entity?name=Grace']").await;
    assert_eq!(c.title().await.unwrap(), "Grace · Cortex");
    let mut relationships = texts(&c, "ul.relationships li").await;
    relationships.sort();
    assert_eq!(
        relationships,
        ["Grace leads Lighthouse", "Grace reviewed Harbor"]
    );
    let behind = texts(&c, "section.behind a.content").await;
    assert!(
        behind.contains(&"Grace reviewed the Harbor design with Linus".to_owned()),
        "{behind:?}"
    );
    screenshot(&c, "entity").await;
    follow(&c, Locator::LinkText("Harbor"), "the other entity").await;
    assert_eq!(c.title().await.unwrap(), "Harbor · Cortex");
    let relationships = texts(&c, "ul.relationships li").await;
    assert!(
        relationships.contains(&"Linus works on Harbor".to_owned()),
        "{relationships:?}"
    );
    follow(
        &c,
        Locator::LinkText("Grace reviewed the Harbor design with Linus"),
        "the memory",
    )
    .await;
    assert_eq!(path(&c).await, format!("/memory/{review}"));

    // Bob's graph holds only his own entity, and ada's entity is not his to open.
    let bob = site.logged_in(BOB_KEY).await;
    bob.goto(&site.url("/graph")).await.unwrap();
    assert_eq!(texts(&bob, "svg.graph text.node-label").await, ["Mallory"]);
    bob.goto(&site.url("/entity?name=Grace")).await.unwrap();
    assert_eq!(bob.title().await.unwrap(), "Not Found · Cortex");
    bob.close().await.unwrap();
    c.close().await.unwrap();
}

/// Waits for exactly one finished download in `dir` and returns its name and text.
async fn downloaded(dir: &std::path::Path) -> (String, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        let done: Vec<&String> = names
            .iter()
            .filter(|n| !n.ends_with(".crdownload") && !n.starts_with('.'))
            .collect();
        let partial = names.iter().any(|n| n.ends_with(".crdownload"));
        if let [name] = done.as_slice()
            && !partial
        {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            return ((*name).clone(), text);
        }
        assert!(
            Instant::now() < deadline,
            "no finished download in {}: {names:?}",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fresh empty directory under the target directory for one test's downloads.
fn download_dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("web-downloads")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.canonicalize().unwrap()
}

#[tokio::test]
async fn stats_and_export_show_and_download_only_the_users_own_memories() {
    let Some(site) =
        Site::start("stats_and_export_show_and_download_only_the_users_own_memories").await
    else {
        return;
    };
    ada_with_structure(&site).await;
    let tea = site
        .remember(
            "ada",
            "Ada prefers green tea",
            MemoryKind::Preference,
            &["drinks"],
        )
        .await;
    site.engine
        .memory
        .retag(
            "ada",
            &tea,
            &cortex_core::engine::Retag {
                kind: None,
                add: vec!["tea".into()],
                remove: vec![],
            },
        )
        .await
        .unwrap();
    site.remember(
        "bob",
        "Bob's project is called Harbor",
        MemoryKind::Fact,
        &[],
    )
    .await;

    let jsonl_dir = download_dir("export-jsonl");
    let c = site.logged_in_saving_to(ADA_KEY, Some(&jsonl_dir)).await;
    click(&c, "header.top nav a[href='/stats']").await;
    assert_eq!(c.title().await.unwrap(), "Stats · Cortex");
    assert_eq!(text(&c, "#live").await, "4");
    assert_eq!(text(&c, "#superseded").await, "1");
    assert_eq!(text(&c, "#events").await, "3");
    assert_eq!(text(&c, "#entities").await, "4");
    assert_eq!(text(&c, "#relationships").await, "3");
    assert!(
        text(&c, "#embedder").await.contains("256"),
        "the fake embedder's dimension"
    );
    screenshot(&c, "stats").await;

    click(&c, "header.top nav a[href='/export']").await;
    screenshot(&c, "export").await;
    c.find(Locator::Css("#download-jsonl"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let (name, text) = downloaded(&jsonl_dir).await;
    assert!(
        name.starts_with("cortex-ada-") && name.ends_with(".jsonl"),
        "{name}"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "header");
    assert_eq!(lines[0]["users"], json!(["ada"]));
    let memories: Vec<&Value> = lines.iter().filter(|l| l["type"] == "memory").collect();
    assert_eq!(
        memories.len(),
        5,
        "four live and the retagged one's old version"
    );
    assert!(
        lines[1..].iter().all(|l| l["user_id"] == "ada"),
        "only ada's lines"
    );
    assert!(
        !text.contains("Harbor\",\"kind\":\"fact") && !text.contains("Bob"),
        "bob's memory in ada's export"
    );
    for kind in ["event", "entity", "edge", "link", "supersession"] {
        assert!(lines.iter().any(|l| l["type"] == kind), "no {kind} line");
    }
    c.close().await.unwrap();

    // Markdown, for bob: his one memory, none of ada's.
    let markdown_dir = download_dir("export-markdown");
    let bob = site.logged_in_saving_to(BOB_KEY, Some(&markdown_dir)).await;
    bob.goto(&site.url("/export")).await.unwrap();
    bob.find(Locator::Css("#download-markdown"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let (name, text) = downloaded(&markdown_dir).await;
    assert!(
        name.starts_with("cortex-bob-") && name.ends_with(".md"),
        "{name}"
    );
    assert!(text.starts_with("# Cortex memories"), "{text}");
    assert!(text.contains("Bob's project is called Harbor"), "{text}");
    assert!(
        !text.contains("Ada") && !text.contains("Lighthouse"),
        "{text}"
    );
    bob.goto(&site.url("/stats")).await.unwrap();
    assert_eq!(text_of(&bob, "#live").await, "1");
    assert_eq!(text_of(&bob, "#events").await, "0");
    bob.close().await.unwrap();
}

async fn text_of(c: &Client, css: &str) -> String {
    text(c, css).await
}
