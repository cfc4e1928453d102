//! The `cortex ui` flow over a real listener on 127.0.0.1, as a browser sees it: the
//! one-time link, the cookie, a page, a same-origin form post.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

mod support;

use std::sync::Arc;

use cortex_web::{OneTimeToken, WebConfig};
use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
use support::{app, engine, remember};

#[tokio::test]
async fn the_one_time_link_works_over_http() {
    let engine = engine();
    let id = remember(&engine, "ada", "Ada <i>prefers</i> green tea").await;
    let token = Arc::new(OneTimeToken::new("ada"));
    let router = app(engine.clone(), token.clone(), WebConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = client
        .get(format!("{base}{}", token.login_path()))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    assert_eq!(login.headers()[LOCATION], "/");
    let set = login
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("cortex_session="))
        .unwrap();
    let cookie = set.split(';').next().unwrap().to_owned();

    let home = client
        .get(format!("{base}/"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), StatusCode::OK);
    assert!(home.headers().contains_key("content-security-policy"));
    let body = home.text().await.unwrap();
    assert!(body.contains("Ada &lt;i&gt;prefers&lt;/i&gt; green tea"));
    let marker = r#"name="csrf" value=""#;
    let start = body.find(marker).unwrap() + marker.len();
    let csrf = &body[start..start + 64];

    let form = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([("csrf", csrf), ("kind", "preference"), ("add", "drinks")])
        .finish();
    let retag = |origin: String| {
        client
            .post(format!("{base}/memory/{id}/retag"))
            .header(COOKIE, &cookie)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ORIGIN, origin)
            .body(form.clone())
            .send()
    };
    let refused = retag("http://evil.example".to_owned()).await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let done = retag(base.clone()).await.unwrap();
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    let page = client
        .get(format!(
            "{base}{}",
            done.headers()[LOCATION].to_str().unwrap()
        ))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("retagged") && page.contains(">drinks<"));

    let css = client
        .get(format!("{base}/assets/cortex.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(css.status(), StatusCode::OK);
    server.abort();
}
