//! The web pages driven through the router: login, isolation, escaping, CSP, CSRF, the
//! corrections and paging.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

mod support;

use std::sync::Arc;

use axum::http::StatusCode;
use cortex_core::{filter::MemoryFilter, memory::MemoryKind};
use cortex_web::{CSP, OneTimeToken, WebConfig};
use support::*;

#[tokio::test]
async fn a_one_time_token_logs_in_once_and_leaves_the_url() {
    let engine = engine();
    remember(&engine, "ada", "Ada prefers green tea").await;
    let token = Arc::new(OneTimeToken::new("ada"));
    let app = app(engine, token.clone(), WebConfig::default());

    let first = send(&app, get(&token.login_path(), None)).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    assert_eq!(first.location(), "/", "the token leaves the URL");
    let cookie = first
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("cortex_session="))
        .unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
        assert!(cookie.contains(flag), "{cookie} lacks {flag}");
    }
    let home = browser(&app, &first).await;
    let page = home.get(&app, "/").await;
    assert!(page.body.contains("Ada prefers green tea"));
    assert!(!page.body.contains(token.token()));

    let again = send(&app, get(&token.login_path(), None)).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    assert_eq!(again.location(), "/login?error=link");
    assert!(again.cookie("cortex_session").is_none());
    let told = send(&app, get(again.location(), None)).await;
    assert_eq!(told.status, StatusCode::OK);
    assert!(told.body.contains("already used"));

    let wrong = send(&app, get("/login?token=not-the-token", None)).await;
    assert_eq!(wrong.location(), "/login?error=link");
}

#[tokio::test]
async fn without_a_session_pages_redirect_and_writes_are_refused() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada prefers green tea").await;
    let app = app(
        engine.clone(),
        secrets(&[("k", "ada")]),
        WebConfig::default(),
    );
    for path in ["/", "/search?q=tea", &format!("/memory/{id}")] {
        for cookie in [None, Some("cortex_session=forged")] {
            let a = send(&app, get(path, cookie)).await;
            assert_eq!(a.status, StatusCode::SEE_OTHER, "{path}");
            assert_eq!(a.location(), "/login", "{path}");
        }
    }
    let a = send(
        &app,
        post(&format!("/memory/{id}/forget"), None, &[("confirm", "yes")]),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(engine.memory.count("ada").await.unwrap(), 1);
}

#[tokio::test]
async fn the_login_form_checks_its_token_and_the_secret() {
    let app = app(
        engine(),
        secrets(&[("key-ada", "ada")]),
        WebConfig::default(),
    );
    let form = send(&app, get("/login", None)).await;
    let login_cookie = format!("cortex_login={}", form.cookie("cortex_login").unwrap());
    let csrf = form.csrf();
    // Without the form's cookie, or with another token: refused.
    let a = send(
        &app,
        post("/login", None, &[("csrf", &csrf), ("secret", "key-ada")]),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = send(
        &app,
        post(
            "/login",
            Some(&login_cookie),
            &[("csrf", "x"), ("secret", "key-ada")],
        ),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    // A wrong secret.
    let a = send(
        &app,
        post(
            "/login",
            Some(&login_cookie),
            &[("csrf", &csrf), ("secret", "nope")],
        ),
    )
    .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.cookie("cortex_session").is_none());
    // From another site.
    let a = send(
        &app,
        post_from(
            "/login",
            Some(&login_cookie),
            &[("csrf", &csrf), ("secret", "key-ada")],
            Some("https://evil.example"),
        ),
    )
    .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);

    let ada = log_in(&app, "key-ada").await;
    let out = ada.post(&app, "/logout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(ada.get(&app, "/").await.location(), "/login");
}

const XSS: &str = "<script>alert(1)</script> and <img src=x onerror=alert(1)>";
const ESCAPED: [&str; 2] = [
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&lt;img src=x onerror=alert(1)&gt;",
];

/// A memory of `XSS` whose entity, relation and event hold it too.
async fn remember_markup(engine: &cortex_app::engine::Engine) -> String {
    use cortex_core::{
        engine::MemorizeOptions, structure::MemoryStructure, structure::StructureEntity,
        structure::StructureEvent,
    };
    let structure = MemoryStructure {
        entities: vec![
            StructureEntity {
                name: XSS.into(),
                entity_type: Some(XSS.into()),
                ..Default::default()
            },
            StructureEntity {
                name: "Grace".into(),
                ..Default::default()
            },
        ],
        relations: vec![cortex_core::structure::StructureRelation {
            from: "Grace".into(),
            label: "likes".into(),
            to: XSS.into(),
        }],
        event: Some(StructureEvent {
            time: "2024-05-01T00:00:00Z".parse().unwrap(),
            place: Some(XSS.into()),
            actor: Some(XSS.into()),
            event_type: None,
        }),
        ..Default::default()
    };
    let options = MemorizeOptions {
        structure: Some(structure),
        ..Default::default()
    };
    engine
        .memory
        .memorize("ada", XSS, MemoryKind::Note, &[], &options)
        .await
        .unwrap()
        .memory
        .id
        .to_string()
}

#[tokio::test]
async fn memories_render_as_text() {
    let engine = engine();
    let id = remember_markup(&engine).await;
    let app = app(engine, secrets(&[("k", "ada")]), WebConfig::default());
    let ada = log_in(&app, "k").await;
    let entity = format!(
        "/entity?{}",
        form_urlencoded::Serializer::new(String::new())
            .append_pair("name", XSS)
            .finish()
    );
    let pages = [
        ada.get(&app, "/").await,
        ada.get(&app, "/search?q=alert").await,
        ada.get(&app, &format!("/memory/{id}")).await,
        ada.post(&app, &format!("/memory/{id}/forget"), &[]).await,
        ada.get(&app, "/timeline").await,
        ada.get(&app, "/graph").await,
        ada.get(&app, &entity).await,
    ];
    for page in &pages {
        assert_eq!(page.status, StatusCode::OK);
        assert!(!page.body.contains("<script>alert"), "{}", page.body);
        assert!(!page.body.contains("<img src=x"), "{}", page.body);
        for e in ESCAPED {
            assert!(page.body.contains(e), "{e} missing from {}", page.body);
        }
    }
    // An error page quotes what it was given as text too.
    let bad = ada
        .get(&app, "/?since=%3Cscript%3Ealert(1)%3C/script%3E")
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(!bad.body.contains("<script>alert"));
    assert!(bad.body.contains("&lt;script&gt;"));
}

#[tokio::test]
async fn every_response_has_the_csp_and_nothing_inline() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada prefers green tea").await;
    let app = app(engine, secrets(&[("k", "ada")]), WebConfig::default());
    let ada = log_in(&app, "k").await;
    let answers = [
        send(&app, get("/login", None)).await,
        send(&app, get("/", None)).await,
        send(&app, get("/assets/cortex.css", None)).await,
        send(&app, get("/no/such/page", None)).await,
        ada.get(&app, "/").await,
        ada.get(&app, "/?kinds=fact&tags=x&since=2020-01-01").await,
        ada.get(&app, "/search").await,
        ada.get(&app, "/search?q=tea").await,
        ada.get(&app, &format!("/memory/{id}")).await,
        ada.get(&app, "/memory/00000000-0000-4000-8000-000000000000")
            .await,
        ada.get(&app, "/?kinds=bogus").await,
        ada.post(&app, &format!("/memory/{id}/forget"), &[]).await,
        send(
            &app,
            post(&format!("/memory/{id}/retag"), Some(&ada.cookie), &[]),
        )
        .await,
        ada.get(&app, "/timeline").await,
        ada.get(&app, "/graph").await,
        ada.get(&app, "/entity?name=nobody").await,
        ada.get(&app, "/stats").await,
        ada.get(&app, "/export").await,
        send(&app, get("/assets/graph.js", None)).await,
        ada.get(&app, "/export/download?format=jsonl").await,
    ];
    for a in &answers {
        let csp = a.headers.get("content-security-policy").unwrap();
        assert_eq!(csp, CSP);
        assert!(CSP.contains("script-src 'self'") && !CSP.contains("unsafe"));
        assert_eq!(a.headers.get("x-content-type-options").unwrap(), "nosniff");
        assert_eq!(a.headers.get("referrer-policy").unwrap(), "same-origin");
        for (i, _) in a.body.match_indices("<script") {
            let tag = &a.body[i..i + a.body[i..].find('>').unwrap()];
            assert!(tag.contains(" src="), "inline script: {tag}");
        }
        assert!(!a.body.contains(" style="), "inline style in {}", a.body);
        assert!(!a.body.contains("<style"), "inline style in {}", a.body);
    }
    assert_eq!(answers[3].status, StatusCode::NOT_FOUND);
    assert_eq!(answers[9].status, StatusCode::NOT_FOUND);
    assert_eq!(answers[10].status, StatusCode::BAD_REQUEST);
    for a in &answers[13..18] {
        assert!(
            a.status.is_success() || a.status == StatusCode::NOT_FOUND,
            "{}",
            a.body
        );
    }
    assert_eq!(
        answers[15].status,
        StatusCode::NOT_FOUND,
        "no entity nobody"
    );
    assert!(
        answers[18].headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/javascript")
    );
    assert_eq!(answers[19].headers["content-type"], "application/x-ndjson");
    assert!(
        answers[19].headers["content-disposition"]
            .to_str()
            .unwrap()
            .starts_with("attachment; filename=\"cortex-ada-")
    );
    assert!(
        answers[2]
            .headers
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
}

#[tokio::test]
async fn a_write_without_the_right_csrf_token_changes_nothing() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada prefers green tea").await;
    let app = app(
        engine.clone(),
        secrets(&[("k", "ada")]),
        WebConfig::default(),
    );
    let ada = log_in(&app, "k").await;
    let other = log_in(&app, "k").await;
    assert_ne!(ada.csrf, other.csrf);
    let forget = format!("/memory/{id}/forget");
    let retag = format!("/memory/{id}/retag");
    let replace = format!("/memory/{id}/replace");
    let attempts = [
        post(&forget, Some(&ada.cookie), &[("confirm", "yes")]),
        post(
            &forget,
            Some(&ada.cookie),
            &[("confirm", "yes"), ("csrf", "")],
        ),
        post(
            &forget,
            Some(&ada.cookie),
            &[("confirm", "yes"), ("csrf", "0123")],
        ),
        post(
            &forget,
            Some(&ada.cookie),
            &[("confirm", "yes"), ("csrf", &other.csrf)],
        ),
        post_from(
            &forget,
            Some(&ada.cookie),
            &[("confirm", "yes"), ("csrf", &ada.csrf)],
            Some("http://evil.example"),
        ),
        post(
            &retag,
            Some(&ada.cookie),
            &[("kind", "fact"), ("csrf", "bad")],
        ),
        post(
            &replace,
            Some(&ada.cookie),
            &[("content", "changed"), ("kind", "note")],
        ),
        post("/logout", Some(&ada.cookie), &[]),
        // `Origin: null` (a sandboxed frame elsewhere) without the browser's word that
        // the request is same-origin.
        post_from(
            &forget,
            Some(&ada.cookie),
            &[("confirm", "yes"), ("csrf", &ada.csrf)],
            Some("null"),
        ),
        with_fetch_site(
            post_from(
                &forget,
                Some(&ada.cookie),
                &[("confirm", "yes"), ("csrf", &ada.csrf)],
                Some("null"),
            ),
            "cross-site",
        ),
    ];
    for request in attempts {
        let a = send(&app, request).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.body);
    }
    let all = engine
        .memory
        .list_page("ada", &MemoryFilter::default(), 10, None)
        .await
        .unwrap();
    assert_eq!(all.memories.len(), 1);
    assert_eq!(all.memories[0].id.to_string(), id);
    assert_eq!(all.memories[0].kind, MemoryKind::Note);
    // The session is still open, and the same request from this site works: with this
    // host as its Origin, or (a browser under a `no-referrer` policy) `Origin: null` with
    // `Sec-Fetch-Site: same-origin`.
    let done = send(
        &app,
        post_from(
            &retag,
            Some(&ada.cookie),
            &[("kind", "fact"), ("csrf", &ada.csrf)],
            Some(&format!("http://{HOST_NAME}")),
        ),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let id = done.location().trim_start_matches("/memory/").to_owned();
    let done = send(
        &app,
        with_fetch_site(
            post_from(
                &format!("/memory/{id}/forget"),
                Some(&ada.cookie),
                &[("confirm", "yes"), ("csrf", &ada.csrf)],
                Some("null"),
            ),
            "same-origin",
        ),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let live = engine
        .memory
        .list_page("ada", &MemoryFilter::default(), 10, None)
        .await
        .unwrap();
    assert!(
        live.memories.iter().all(|m| m.id.to_string() != id),
        "forgotten"
    );
}

/// `request` with the browser's `Sec-Fetch-Site` header.
fn with_fetch_site(
    mut request: axum::http::Request<axum::body::Body>,
    site: &'static str,
) -> axum::http::Request<axum::body::Body> {
    request
        .headers_mut()
        .insert("sec-fetch-site", axum::http::HeaderValue::from_static(site));
    request
}

#[tokio::test]
async fn forget_needs_the_confirmation() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada prefers green tea").await;
    let app = app(
        engine.clone(),
        secrets(&[("k", "ada")]),
        WebConfig::default(),
    );
    let ada = log_in(&app, "k").await;
    let forget = format!("/memory/{id}/forget");
    for confirm in [None, Some("no"), Some("")] {
        let mut form = vec![];
        if let Some(c) = confirm {
            form.push(("confirm", c));
        }
        let a = ada.post(&app, &forget, &form).await;
        assert_eq!(a.status, StatusCode::OK);
        assert!(a.body.contains("Forget for good"));
        assert!(a.body.contains(r#"name="confirm" value="yes""#));
        assert_eq!(engine.memory.count("ada").await.unwrap(), 1);
    }
    let a = ada.post(&app, &forget, &[("confirm", "yes")]).await;
    assert_eq!(a.status, StatusCode::SEE_OTHER);
    assert_eq!(a.location(), "/");
    assert_eq!(engine.memory.count("ada").await.unwrap(), 0);
    assert_eq!(
        ada.get(&app, &format!("/memory/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert!(!ada.get(&app, "/").await.body.contains("green tea"));
}

#[tokio::test]
async fn retag_and_replace_show_in_history() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada prefers green tea").await;
    let app = app(
        engine.clone(),
        secrets(&[("k", "ada")]),
        WebConfig::default(),
    );
    let ada = log_in(&app, "k").await;

    let page = ada.get(&app, &format!("/memory/{id}")).await;
    assert!(page.body.contains("Change kind and tags") && page.body.contains("Replace with"));

    let a = ada
        .post(
            &app,
            &format!("/memory/{id}/retag"),
            &[
                ("kind", "preference"),
                ("add", "drinks, Tea"),
                ("remove", ""),
            ],
        )
        .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let retagged = a.location().trim_start_matches("/memory/").to_owned();
    assert_ne!(retagged, id);
    let page = ada.get(&app, a.location()).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("preference"));
    assert!(page.body.contains(">drinks<") && page.body.contains(">tea<"));
    assert!(page.body.contains("retagged"), "{}", page.body);
    assert!(
        memory_links(&page.body).contains(&id),
        "history links the old version"
    );

    // A change that changes nothing is the caller's error, shown as a 400 page.
    let a = ada
        .post(&app, &format!("/memory/{retagged}/retag"), &[("kind", "")])
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);

    let a = ada
        .post(
            &app,
            &format!("/memory/{retagged}/replace"),
            &[
                ("content", "Ada prefers oolong now"),
                ("kind", "preference"),
                ("tags", "drinks"),
            ],
        )
        .await;
    assert_eq!(a.status, StatusCode::SEE_OTHER, "{}", a.body);
    let page = ada.get(&app, a.location()).await;
    assert!(page.body.contains("Ada prefers oolong now"));
    assert!(
        page.body.contains("Ada prefers green tea"),
        "the old version in history"
    );
    assert!(
        page.body.contains("replaced by the caller"),
        "{}",
        page.body
    );
    let versions = memory_links(&page.body);
    assert!(versions.contains(&id) && versions.contains(&retagged));

    // The old version's page says it was superseded and offers no corrections.
    let old = ada.get(&app, &format!("/memory/{id}")).await;
    assert!(old.body.contains("superseded on"));
    assert!(!old.body.contains("Replace with"));

    let home = ada.get(&app, "/").await;
    assert!(home.body.contains("oolong") && !home.body.contains("green tea"));
    assert_eq!(engine.memory.count("ada").await.unwrap(), 1);
}

#[tokio::test]
async fn each_user_sees_only_their_own_memories() {
    let engine = engine();
    let ada_id = remember(&engine, "ada", "Ada's secret: green tea").await;
    let bob_id = remember(&engine, "bob", "Bob's secret: black coffee").await;
    let app = app(
        engine.clone(),
        secrets(&[("key-ada", "ada"), ("key-bob", "bob")]),
        WebConfig::default(),
    );
    let adas = [log_in(&app, "key-ada").await, log_in(&app, "key-ada").await];
    let bobs = [log_in(&app, "key-bob").await, log_in(&app, "key-bob").await];
    for (mine, (own, theirs), (own_id, their_id)) in [
        (&adas, ("green tea", "black coffee"), (&ada_id, &bob_id)),
        (&bobs, ("black coffee", "green tea"), (&bob_id, &ada_id)),
    ] {
        for b in mine {
            for path in ["/", "/search?q=secret"] {
                let page = b.get(&app, path).await;
                assert!(page.body.contains(own), "{path}");
                assert!(!page.body.contains(theirs), "{path}");
            }
            assert_eq!(
                b.get(&app, &format!("/memory/{own_id}")).await.status,
                StatusCode::OK
            );
            let theirs_page = b.get(&app, &format!("/memory/{their_id}")).await;
            assert_eq!(theirs_page.status, StatusCode::NOT_FOUND);
            assert!(!theirs_page.body.contains(theirs));
            let a = b
                .post(
                    &app,
                    &format!("/memory/{their_id}/forget"),
                    &[("confirm", "yes")],
                )
                .await;
            assert_eq!(a.status, StatusCode::NOT_FOUND);
            let a = b
                .post(
                    &app,
                    &format!("/memory/{their_id}/retag"),
                    &[("kind", "fact")],
                )
                .await;
            assert_eq!(a.status, StatusCode::NOT_FOUND);
        }
    }
    assert_eq!(engine.memory.count("ada").await.unwrap(), 1);
    assert_eq!(engine.memory.count("bob").await.unwrap(), 1);
}

#[tokio::test]
async fn paging_reaches_every_memory_once() {
    let engine = engine();
    let mut written = Vec::new();
    for i in 0..23 {
        written.push(
            remember(
                &engine,
                "ada",
                &format!("memory number {i} about topic {}", i * 7919),
            )
            .await,
        );
    }
    let config = WebConfig {
        page_size: 7,
        ..WebConfig::default()
    };
    let app = app(engine, secrets(&[("k", "ada")]), config);
    let ada = log_in(&app, "k").await;
    let mut seen = Vec::new();
    let mut path = "/".to_owned();
    let mut pages = 0;
    loop {
        let page = ada.get(&app, &path).await;
        assert_eq!(page.status, StatusCode::OK);
        pages += 1;
        let ids = memory_links(&page.body);
        assert!(ids.len() <= 7);
        seen.extend(ids);
        let marker = r#"class="older" href=""#;
        let Some(start) = page.body.find(marker) else {
            break;
        };
        let rest = &page.body[start + marker.len()..];
        path = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
        assert!(pages < 10);
    }
    assert_eq!(pages, 4);
    written.reverse();
    assert_eq!(seen, written, "newest first, each once");
}

#[tokio::test]
async fn browse_filters_and_search_shows_ranks() {
    let engine = engine();
    engine
        .memory
        .memorize(
            "ada",
            "Billing moved to Stripe",
            MemoryKind::Decision,
            &["billing".into()],
            &Default::default(),
        )
        .await
        .unwrap();
    engine
        .memory
        .memorize(
            "ada",
            "Ada likes hiking",
            MemoryKind::Preference,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    let app = app(engine, secrets(&[("k", "ada")]), WebConfig::default());
    let ada = log_in(&app, "k").await;
    let page = ada.get(&app, "/?kinds=decision").await;
    assert!(page.body.contains("Stripe") && !page.body.contains("hiking"));
    let page = ada.get(&app, "/?tags=billing").await;
    assert!(page.body.contains("Stripe") && !page.body.contains("hiking"));
    let page = ada.get(&app, "/?until=2000-01-01").await;
    assert!(page.body.contains("No memories here."));

    let page = ada.get(&app, "/search?q=Stripe+billing").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("BM25 rank") && page.body.contains("Dense rank"));
    assert!(
        page.body.contains(r#"<td class="num bm25">1</td>"#),
        "{}",
        page.body
    );
    let page = ada.get(&app, "/search?q=Stripe&kinds=preference").await;
    assert!(!page.body.contains("Stripe moved") && !page.body.contains("Billing moved"));
}

#[tokio::test]
async fn a_read_only_login_sees_everything_and_changes_nothing() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada prefers green tea").await;
    let login = std::sync::Arc::new(Secrets(
        [(
            "r".to_owned(),
            cortex_web::Viewer {
                user: "ada".into(),
                scope: cortex_core::keys::Scope::Read,
                key_id: None,
            },
        )]
        .into(),
    ));
    let app = app(engine.clone(), login, WebConfig::default());
    let reader = log_in(&app, "r").await;
    let page = reader.get(&app, &format!("/memory/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Ada prefers green tea"));
    for form in ["/forget", "/retag", "/replace"] {
        assert!(!page.body.contains(form), "a {form} form for a reader");
    }
    for (path, form) in [
        ("forget", vec![("confirm", "yes")]),
        ("retag", vec![("add", "x")]),
        ("replace", vec![("content", "Ada prefers black tea")]),
    ] {
        let refused = reader
            .post(&app, &format!("/memory/{id}/{path}"), &form)
            .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{path}");
        assert!(refused.body.contains("can only read"), "{}", refused.body);
    }
    let history = engine.memory.history("ada", &id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(engine.memory.count("ada").await.unwrap(), 1);
    // Logging out is not a change to the memories: a reader may.
    let out = reader.post(&app, "/logout", &[]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn failed_logins_are_throttled_per_client() {
    let config = WebConfig {
        login_failures: 3,
        ..WebConfig::default()
    };
    let app = app(engine(), secrets(&[("k", "ada")]), config);
    let try_secret = |secret: &'static str| {
        let app = app.clone();
        async move {
            let form = send(&app, get("/login", None)).await;
            let cookie = format!("cortex_login={}", form.cookie("cortex_login").unwrap());
            let csrf = form.csrf();
            send(
                &app,
                post(
                    "/login",
                    Some(&cookie),
                    &[("csrf", &csrf), ("secret", secret)],
                ),
            )
            .await
        }
    };
    for _ in 0..3 {
        assert_eq!(try_secret("wrong").await.status, StatusCode::UNAUTHORIZED);
    }
    let held = try_secret("k").await;
    assert_eq!(held.status, StatusCode::TOO_MANY_REQUESTS, "{}", held.body);
    assert!(held.headers.contains_key("retry-after"));
    assert!(held.cookie("cortex_session").is_none());
    // The link login counts too.
    let link = send(&app, get("/login?token=k", None)).await;
    assert_eq!(link.status, StatusCode::TOO_MANY_REQUESTS);
}
