//! `cortex ui` over a real store: it listens on 127.0.0.1 only, prints a link whose token
//! logs one browser in, once, and the page shows that user's memories and no one else's;
//! its Browse and Stats pages count memories as `cortex stats` does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use admin_support::*;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `cortex ui --no-open` on `env`'s store: the server and the link it printed.
fn start_ui(env: &Env) -> (Server, String) {
    let mut cmd = command(env, &[], &["ui", "--no-open"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut server = Server(cmd.spawn().unwrap());
    let mut link = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut link)
        .unwrap();
    (server, link.trim().to_owned())
}

#[tokio::test]
async fn the_printed_link_logs_in_once_and_shows_the_users_memories() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    ok(&env, &["add", "Ada keeps <b>bees</b> on the roof"]);
    ok(&env, &["add", "Bob's secret recipe", "--user", "bob"]);

    let (_server, link) = start_ui(&env);
    assert!(link.starts_with("http://127.0.0.1:"), "{link}");
    assert!(link.contains("/login?token="), "{link}");
    let base = link.split("/login").next().unwrap().to_owned();

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = client.get(&link).send().await.unwrap();
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        login.headers()[LOCATION],
        "/",
        "the token leaves the address"
    );
    let cookie = login
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("cortex_session="))
        .unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Secure"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_owned();

    let page = client
        .get(format!("{base}/"))
        .header(COOKIE, &session)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let body = page.text().await.unwrap();
    assert!(
        body.contains("Ada keeps &lt;b&gt;bees&lt;/b&gt; on the roof"),
        "{body}"
    );
    assert!(!body.contains("secret recipe"), "another user's memory");

    let again = client.get(&link).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    assert_ne!(again.headers()[LOCATION], "/", "the token works once");
    assert!(
        again
            .headers()
            .get(SET_COOKIE)
            .is_none_or(|c| !c.to_str().unwrap().starts_with("cortex_session="))
    );
    let anonymous = client.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::SEE_OTHER);
}

/// The text of the element with `id` on a page (`<dd id="live">2</dd>` gives "2").
fn element_text<'a>(body: &'a str, id: &str) -> &'a str {
    let marker = format!(r#"id="{id}">"#);
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no #{id} in {body}"))
        + marker.len();
    let len = body[start..].find('<').unwrap();
    &body[start..start + len]
}

/// One memory expired (imported with its expiry passed), one superseded, two live:
/// `cortex stats`, the Browse page's header and the Stats page give the same counts. They
/// disagreed: stats counted the expired memory as live, Browse said "3 live memories"
/// above two rows.
#[tokio::test]
async fn stats_browse_and_the_stats_page_count_alike() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    ok(&env, &["add", "Ada keeps bees on the roof"]);
    let old = json(&ok(&env, &["add", "Ada prefers green tea", "--json"]));
    ok(
        &env,
        &[
            "add",
            "Ada prefers oolong now",
            "--replaces",
            old["id"].as_str().unwrap(),
        ],
    );
    let file = dir.path().join("in.jsonl");
    std::fs::write(
        &file,
        format!(
            "{}\n{}\n",
            r#"{"type":"header","format":"cortex-export","version":1,"exported_at":"2024-01-01T00:00:00Z","vectors":false,"users":["ada"]}"#,
            format_args!(
                r#"{{"type":"memory","id":"{}","user_id":"ada","content":"The office is closed until Friday","kind":"fact","tags":[],"created_at":"2019-12-01T00:00:00Z","expires_at":"2020-01-01T00:00:00Z","superseded":false}}"#,
                uuid::Uuid::new_v4()
            )
        ),
    )
    .unwrap();
    ok(&env, &["import", path(&file)]);

    let stats = json(&ok(&env, &["stats", "--json"]));
    assert_eq!(
        (&stats["live"], &stats["expired"], &stats["superseded"]),
        (&2.into(), &1.into(), &1.into()),
        "{stats}"
    );
    let text = ok(&env, &["stats"]);
    assert!(
        text.contains("2 live, 1 expired (not yet pruned), 1 superseded"),
        "{text}"
    );

    let (_server, link) = start_ui(&env);
    let base = link.split("/login").next().unwrap().to_owned();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = client.get(&link).send().await.unwrap();
    let session = login
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("cortex_session="))
        .unwrap();
    let session = session.split(';').next().unwrap().to_owned();
    let page = |path: &str| {
        let request = client.get(format!("{base}{path}")).header(COOKIE, &session);
        async move {
            let answer = request.send().await.unwrap();
            assert_eq!(answer.status(), StatusCode::OK);
            answer.text().await.unwrap()
        }
    };
    let browse = page("/").await;
    assert_eq!(element_text(&browse, "live-count"), "2", "{browse}");
    assert_eq!(element_text(&browse, "expired-count"), "1", "{browse}");
    let rows: std::collections::BTreeSet<&str> = browse
        .split(r#"href="/memory/"#)
        .skip(1)
        .map(|rest| &rest[..36])
        .collect();
    assert_eq!(rows.len(), 2, "as many rows as live memories: {browse}");
    let counts = page("/stats").await;
    assert_eq!(element_text(&counts, "live"), "2", "{counts}");
    assert_eq!(element_text(&counts, "expired"), "1", "{counts}");
    assert_eq!(element_text(&counts, "superseded"), "1", "{counts}");
}
