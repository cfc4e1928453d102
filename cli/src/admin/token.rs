//! `cortex token`: the API keys a hosted server accepts, each naming one user. The secret
//! is printed once, by `create`; the store keeps only its digest.

use chrono::{DateTime, Utc};
use cortex_app::StoreSettings;
use cortex_app::engine::open_key_store;
use cortex_core::keys::KeyStore;
use cortex_core::keys::{self, Scope, StoredKey};
use serde_json::json;

use crate::admin::error::AdminError;
use crate::cli::{ScopeArg, TokenArgs, TokenCommand, TokenCreateArgs, TokenListArgs};

pub async fn token(args: TokenArgs) -> Result<(), AdminError> {
    let settings = StoreSettings::from_env()?;
    let store = open_key_store(&settings.storage).await?;
    match args.command {
        TokenCommand::Create(args) => create(&*store, args).await,
        TokenCommand::List(args) => list(&*store, args).await,
        TokenCommand::Revoke(args) => {
            let revoked = store.revoke_key(&args.id, Utc::now()).await?;
            match (revoked, store.find_key(&args.id).await?) {
                (true, _) => println!("revoked {}", args.id),
                (false, Some(_)) => println!("{} was revoked already", args.id),
                (false, None) => {
                    return Err(AdminError::Usage(format!(
                        "no key {}; `cortex token list` shows the ids",
                        args.id
                    )));
                }
            }
            Ok(())
        }
    }
}

async fn create(store: &dyn KeyStore, args: TokenCreateArgs) -> Result<(), AdminError> {
    let now = Utc::now();
    let expires_at = args
        .expires
        .as_deref()
        .map(|text| expiry(text, now))
        .transpose()?;
    let scope = match args.scope {
        ScopeArg::Read => Scope::Read,
        ScopeArg::Write => Scope::Write,
    };
    let issued = keys::issue(&args.user, scope, args.label.as_deref(), expires_at, now)
        .map_err(|e| AdminError::Usage(e.to_string()))?;
    store.insert_key(&issued.stored).await?;
    let key = &issued.stored;
    if args.json {
        let text = json!({"token": issued.token, "key": shown(key)});
        println!("{text}");
        return Ok(());
    }
    println!("{}", issued.token);
    eprintln!(
        "key {} for user {:?}, scope {}{}: shown once; store it now, only its digest is kept",
        key.id,
        key.user_id,
        key.scope,
        key.expires_at
            .map(|at| format!(", expires {}", show_time(at)))
            .unwrap_or_default()
    );
    Ok(())
}

async fn list(store: &dyn KeyStore, args: TokenListArgs) -> Result<(), AdminError> {
    let found = store.list_keys(args.user.as_deref()).await?;
    if args.json {
        let shown: Vec<_> = found.iter().map(shown).collect();
        let text = serde_json::to_string_pretty(&shown)
            .map_err(|e| AdminError::Usage(format!("cannot write JSON: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    let now = Utc::now();
    for key in &found {
        println!("{}", line(key, now));
    }
    Ok(())
}

/// A key as JSON: every field but the digest, which nothing outside the store needs.
fn shown(key: &StoredKey) -> serde_json::Value {
    json!({
        "id": key.id,
        "user_id": key.user_id,
        "scope": key.scope,
        "label": key.label,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "revoked_at": key.revoked_at,
    })
}

/// One key, as `list` shows it: never its digest.
fn line(key: &StoredKey, now: DateTime<Utc>) -> String {
    let state = match (key.revoked_at, key.expires_at) {
        (Some(at), _) => format!("revoked {}", show_time(at)),
        (None, Some(at)) if at <= now => format!("expired {}", show_time(at)),
        (None, Some(at)) => format!("active, expires {}", show_time(at)),
        (None, None) => "active".to_owned(),
    };
    let label = key
        .label
        .as_deref()
        .map(|l| format!("  {l:?}"))
        .unwrap_or_default();
    format!(
        "{}  {:<5}  {}  created {}  {state}{label}",
        key.id,
        key.scope.as_str(),
        key.user_id,
        show_time(key.created_at)
    )
}

fn show_time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// `--expires`: a duration from now (`90d`, `12h`, `2w`) or an RFC 3339 time.
fn expiry(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, AdminError> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    let bad = || {
        AdminError::Usage(format!(
            "--expires {text:?}: give a duration from now (90d, 12h, 2w) or an RFC 3339 time"
        ))
    };
    let duration = humantime::parse_duration(text).map_err(|_| bad())?;
    let duration = chrono::Duration::from_std(duration).map_err(|_| bad())?;
    now.checked_add_signed(duration).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_takes_durations_and_times() {
        let now: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
        assert_eq!(
            expiry("90d", now).unwrap(),
            "2027-03-02T12:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            expiry("12h", now).unwrap(),
            "2026-12-03T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(
            expiry("2027-01-01T00:00:00+01:00", now).unwrap(),
            "2026-12-31T23:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        for bad in ["", "soon", "90", "-1d", "999999999999y"] {
            assert!(expiry(bad, now).is_err(), "{bad:?}");
        }
    }
}
