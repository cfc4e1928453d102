//! `cortex ui` over a real store: it listens on 127.0.0.1 only, prints a link whose token
//! logs one browser in, once, and the page shows that user's memories and no one else's.
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

#[tokio::test]
async fn the_printed_link_logs_in_once_and_shows_the_users_memories() {
    let dir = tempfile::tempdir().unwrap();
    let env = sqlite_env(&dir.path().join("memory.db"));
    ok(&env, &["add", "Ada keeps <b>bees</b> on the roof"]);
    ok(&env, &["add", "Bob's secret recipe", "--user", "bob"]);

    let mut cmd = command(&env, &[], &["ui", "--no-open"]);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut server = Server(cmd.spawn().unwrap());
    let mut link = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut link)
        .unwrap();
    let link = link.trim().to_owned();
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
