//! OAuth for MCP clients, against a mock issuer this test starts: it publishes Ed25519
//! keys it makes itself and signs tokens with them. One server takes API keys and JWTs
//! at once (`CORTEX_HTTP_AUTH=keys,oauth`): two users by key and two by JWT, each seeing
//! only their own memories. Refused: expired, not yet valid, wrong audience, wrong
//! issuer, signed by a key the issuer does not publish, `alg: none`, a key id nobody
//! published; accepted after the issuer publishes a new key, refused after it withdraws
//! one. A 401 names the protected-resource metadata, which the server serves.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

#[path = "support/mcp_http.rs"]
mod mcp_http;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use axum::Router;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use cortex_core::keys::KeyStore;
use cortex_core::keys::{self, Scope};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use mcp_http::{Client, Server, TestStore, contents};
use serde_json::{Value, json};

const RESOURCE: &str = "http://127.0.0.1/mcp";

/// A signing key of the mock issuer.
struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
    public: Vec<u8>,
}

impl SigningKey {
    fn new(kid: &str) -> Self {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        Self {
            kid: kid.to_owned(),
            pkcs8: pkcs8.as_ref().to_vec(),
            public: pair.public_key().as_ref().to_vec(),
        }
    }

    fn jwk(&self) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA", "use": "sig",
               "kid": self.kid, "x": URL_SAFE_NO_PAD.encode(&self.public)})
    }

    /// A token with `claims`, signed by this key but naming `kid`.
    fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ed_der(&self.pkcs8)).unwrap()
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }
}

/// The mock issuer: its metadata and its current key set, which a test may replace.
struct Issuer {
    url: String,
    published: Arc<Mutex<Vec<Value>>>,
}

impl Issuer {
    async fn start(keys: &[&SigningKey]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let published = Arc::new(Mutex::new(keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()));
        let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")}).to_string();
        let set = Arc::clone(&published);
        let app = Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || {
                    let metadata = metadata.clone();
                    async move { metadata }
                }),
            )
            .route(
                "/jwks",
                get(move || {
                    let keys = set.lock().unwrap().clone();
                    async move { json!({ "keys": keys }).to_string() }
                }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, published }
    }

    fn publish(&self, keys: &[&SigningKey]) {
        *self.published.lock().unwrap() = keys.iter().map(|k| k.jwk()).collect();
    }

    fn claims(&self, sub: &str) -> Value {
        let now = Utc::now().timestamp();
        json!({"iss": self.url, "aud": RESOURCE, "sub": sub, "iat": now, "exp": now + 600})
    }
}

/// The 401 of `token`, with its challenge.
fn refused(server: &Server, token: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "0"}}});
    let (status, head, body) = server.post(token, None, &init);
    assert_eq!(status, 401, "{head}{body}");
    head
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_and_keys_on_sqlite() {
    let store = TestStore::sqlite();
    jwts_and_keys(store.keys.clone(), &store.env()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwts_and_keys_on_postgres() {
    let Some(store) = TestStore::postgres("oauth").await else {
        return;
    };
    jwts_and_keys(store.keys.clone(), &store.env()).await;
    store.remove().await;
}

/// Two users by JWT and two by API key on one server over the store `env` names.
async fn jwts_and_keys(store: Arc<dyn KeyStore>, env: &[(&str, &str)]) {
    let first = SigningKey::new("first");
    let issuer = Issuer::start(&[&first]).await;
    let mut api_keys = Vec::new();
    for user in ["kim", "lee"] {
        let issued = keys::issue(user, Scope::Write, None, None, Utc::now()).unwrap();
        store.insert_key(&issued.stored).await.unwrap();
        api_keys.push(issued.token);
    }
    let auth = [
        ("CORTEX_HTTP_AUTH", "keys,oauth"),
        ("CORTEX_OAUTH_ISSUER", issuer.url.as_str()),
        ("CORTEX_OAUTH_RESOURCE", RESOURCE),
    ];
    let server = Server::start(&[&auth[..], env].concat());

    // Four users on one server: two by JWT, two by API key.
    let ana = first.sign(&issuer.claims("ana"));
    let ben = first.sign(&issuer.claims("ben"));
    let users = [
        ("ana", Client::open(&server, &ana)),
        ("ben", Client::open(&server, &ben)),
        ("kim", Client::open(&server, &api_keys[0])),
        ("lee", Client::open(&server, &api_keys[1])),
    ];
    for (name, client) in &users {
        client.ok("memorize", json!({"content": format!("{name} keeps bees")}));
    }
    for (name, client) in &users {
        let listed = contents(&client.ok("list_memories", json!({})), "memories");
        assert_eq!(listed, vec![format!("{name} keeps bees")], "{name}");
        let recalled = contents(&client.ok("recall", json!({"query": "bees"})), "memories");
        assert_eq!(recalled, vec![format!("{name} keeps bees")], "{name}");
    }

    // A token whose scopes leave out memory:write reads and cannot write.
    let mut claims = issuer.claims("ana");
    claims["scope"] = json!("openid memory:read");
    let reader = Client::open(&server, &first.sign(&claims));
    let listed = contents(&reader.ok("list_memories", json!({})), "memories");
    assert_eq!(listed, vec!["ana keeps bees"]);
    let (failed, text) = reader.call("memorize", json!({"content": "not allowed"}));
    assert!(
        failed && text.as_str().unwrap().contains("scope read"),
        "{text}"
    );

    // Every refusal names the metadata; the metadata names the issuer.
    let metadata =
        "resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\"";
    let now = Utc::now().timestamp();
    let stranger = SigningKey::new("first");
    let mut bad = Vec::new();
    let mut expired = issuer.claims("ana");
    expired["exp"] = json!(now - 120);
    bad.push(("expired", first.sign(&expired)));
    let mut early = issuer.claims("ana");
    early["nbf"] = json!(now + 600);
    bad.push(("not yet valid", first.sign(&early)));
    let mut audience = issuer.claims("ana");
    audience["aud"] = json!("https://another.example/mcp");
    bad.push(("wrong audience", first.sign(&audience)));
    let mut other_issuer = issuer.claims("ana");
    other_issuer["iss"] = json!("https://evil.example");
    bad.push(("wrong issuer", first.sign(&other_issuer)));
    bad.push(("wrong key", stranger.sign(&issuer.claims("ana"))));
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT","kid":"first"}"#),
        URL_SAFE_NO_PAD.encode(issuer.claims("ana").to_string())
    );
    bad.push(("alg none", unsigned));
    let mut no_user = issuer.claims("ana");
    no_user.as_object_mut().unwrap().remove("sub");
    bad.push(("no sub", first.sign(&no_user)));
    for (what, token) in &bad {
        let head = refused(&server, token);
        assert!(head.contains("error=\"invalid_token\""), "{what}: {head}");
        assert!(head.contains(metadata), "{what}: {head}");
    }
    let (status, head, _) = server.post("", None, &json!({}));
    assert_eq!(status, 401);
    assert!(
        head.contains(metadata) && !head.contains("invalid_token"),
        "{head}"
    );
    let (status, _, body) = server.get("/.well-known/oauth-protected-resource/mcp");
    assert_eq!(status, 200);
    let document: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(document["resource"], RESOURCE);
    assert_eq!(document["authorization_servers"], json!([issuer.url]));

    // A key id nobody published is refused; once the issuer publishes it, it works (the
    // server fetches the keys again on an unknown id, at most every two seconds).
    let second = SigningKey::new("second");
    let token = second.sign(&issuer.claims("ana"));
    tokio::time::sleep(Duration::from_millis(2100)).await;
    refused(&server, &token);
    issuer.publish(&[&first, &second]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let client = Client::open(&server, &token);
    let listed = contents(&client.ok("list_memories", json!({})), "memories");
    assert_eq!(listed, vec!["ana keeps bees"]);

    // Rotation: the issuer withdraws the first key; after the next fetch its tokens fail
    // and the new key's still work.
    let third = SigningKey::new("third");
    issuer.publish(&[&second, &third]);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    Client::open(&server, &third.sign(&issuer.claims("ben")));
    refused(&server, &first.sign(&issuer.claims("ben")));
    Client::open(&server, &second.sign(&issuer.claims("ben")));
}
