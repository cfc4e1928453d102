//! API keys that name a user: what a hosted server checks each request against, so that
//! one server serves many users and no caller reaches another's memories.
//!
//! A key is `cx_<id>_<secret>`: the id (16 hex digits) is public and finds the stored key
//! (`cortex token list` and `revoke` show and take it); the secret (64 hex digits, 256 bits
//! from the operating system's generator) is shown once, when the key is made, and only its
//! SHA-256 is stored. A secret that random needs no slow hash: nothing about it can be
//! guessed from the digest. The digest is compared in constant time.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};
use rand::TryRngCore;
use rand::rngs::OsRng;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::StoreResult;
use crate::memory::validate_user;

/// What every key starts with, so a leaked one is recognisable (secret scanners, logs).
pub const KEY_PREFIX: &str = "cx_";
const ID_BYTES: usize = 8;
const SECRET_BYTES: usize = 32;

/// What a key allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Recall, list and the keyed reads (timeline, dossier).
    Read,
    /// Everything `Read` allows, and memorize and forget.
    Write,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            _ => None,
        }
    }

    /// Whether a key of this scope may do what `needed` names.
    pub fn allows(self, needed: Scope) -> bool {
        self == Scope::Write || needed == Scope::Read
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A key as stored: never the secret, only its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredKey {
    /// The public part of the key (16 hex digits).
    pub id: String,
    pub user_id: String,
    pub scope: Scope,
    /// What the operator called it, for `cortex token list`.
    pub label: Option<String>,
    /// SHA-256 of the secret, 64 hex digits.
    pub digest: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl StoredKey {
    /// Whether the key still opens the door at `now`.
    pub fn is_active(&self, now: DateTime<Utc>) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }
}

/// A key just made: the record to store and the one text that carries its secret.
pub struct IssuedKey {
    pub stored: StoredKey,
    /// `cx_<id>_<secret>`: printed once, never stored, never logged.
    pub token: String,
}

impl fmt::Debug for IssuedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedKey")
            .field("stored", &self.stored)
            .field("token", &"***")
            .finish()
    }
}

/// Why a key was not made or not accepted. The presented text is never part of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("the user id must be 1-256 bytes of printable text")]
    BadUser,
    #[error("the label must be at most 200 characters of printable text")]
    BadLabel,
    #[error("the expiry must be in the future")]
    ExpiryInThePast,
    #[error("the operating system's random generator failed: {0}")]
    Random(String),
    /// Not of the form `cx_<16 hex>_<64 hex>`.
    #[error("not a Cortex API key")]
    Malformed,
    /// No key with that id, or the secret does not match: one answer for both, so a caller
    /// cannot tell which ids exist.
    #[error("unknown API key")]
    Unknown,
    #[error("this API key was revoked")]
    Revoked,
    #[error("this API key expired")]
    Expired,
}

/// Makes a key for `user`. Nothing is stored here: the caller writes `stored` through a
/// [`KeyStore`] and shows `token` once.
pub fn issue(
    user: &str,
    scope: Scope,
    label: Option<&str>,
    expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<IssuedKey, KeyError> {
    validate_user(user).map_err(|_| KeyError::BadUser)?;
    if let Some(label) = label
        && (label.chars().count() > 200 || label.chars().any(char::is_control))
    {
        return Err(KeyError::BadLabel);
    }
    if expires_at.is_some_and(|at| at <= now) {
        return Err(KeyError::ExpiryInThePast);
    }
    // Stores keep microseconds: what is stored reads back equal.
    let (now, expires_at) = (now.trunc_subsecs(6), expires_at.map(|t| t.trunc_subsecs(6)));
    let mut id = [0u8; ID_BYTES];
    let mut secret = [0u8; SECRET_BYTES];
    let mut rng = OsRng;
    rng.try_fill_bytes(&mut id)
        .and_then(|()| rng.try_fill_bytes(&mut secret))
        .map_err(|e| KeyError::Random(e.to_string()))?;
    let (id, secret) = (hex(&id), hex(&secret));
    Ok(IssuedKey {
        stored: StoredKey {
            id: id.clone(),
            user_id: user.to_owned(),
            scope,
            label: label.map(str::to_owned),
            digest: digest(&secret),
            created_at: now,
            expires_at,
            revoked_at: None,
        },
        token: format!("{KEY_PREFIX}{id}_{secret}"),
    })
}

/// The key's id and secret, if `token` has a key's form.
pub fn parse_token(token: &str) -> Result<(&str, &str), KeyError> {
    let rest = token.strip_prefix(KEY_PREFIX).ok_or(KeyError::Malformed)?;
    let (id, secret) = rest.split_once('_').ok_or(KeyError::Malformed)?;
    let well_formed = |text: &str, bytes: usize| {
        text.len() == bytes * 2 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    match well_formed(id, ID_BYTES) && well_formed(secret, SECRET_BYTES) {
        true => Ok((id, secret)),
        false => Err(KeyError::Malformed),
    }
}

/// Checks a presented `token` against what the store holds under its id (`found`), at
/// `now`. The digest comparison takes the same time wherever the two differ.
pub fn verify(
    token: &str,
    found: Option<&StoredKey>,
    now: DateTime<Utc>,
) -> Result<Caller, KeyError> {
    let (id, secret) = parse_token(token)?;
    let key = found.filter(|k| k.id == id).ok_or(KeyError::Unknown)?;
    let presented = digest(secret);
    if !bool::from(presented.as_bytes().ct_eq(key.digest.as_bytes())) {
        return Err(KeyError::Unknown);
    }
    if key.revoked_at.is_some() {
        return Err(KeyError::Revoked);
    }
    if key.expires_at.is_some_and(|at| now >= at) {
        return Err(KeyError::Expired);
    }
    Ok(Caller {
        user_id: key.user_id.clone(),
        scope: key.scope,
        key_id: Some(key.id.clone()),
    })
}

/// Who a request is served as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user_id: String,
    pub scope: Scope,
    /// The key it came with, for logs (the id is public); `None` for other credentials.
    pub key_id: Option<String>,
}

fn digest(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where keys are kept: beside the memories, in the same store, one row per key.
#[async_trait]
pub trait KeyStore: Send + Sync + fmt::Debug {
    /// Stores a new key. An id already in use is an error (ids are random: a clash means
    /// a bug, not bad luck).
    async fn insert_key(&self, key: &StoredKey) -> StoreResult<()>;

    /// The key with this id, revoked or expired ones included.
    async fn find_key(&self, id: &str) -> StoreResult<Option<StoredKey>>;

    /// Every key, or one user's, oldest first.
    async fn list_keys(&self, user: Option<&str>) -> StoreResult<Vec<StoredKey>>;

    /// Marks the key revoked at `at`; `false` when there is no such key or it was revoked
    /// already (the first revocation's time stays).
    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool>;
}

// Forward every method, so a wrapped store is a key store too.
macro_rules! forward_keys {
    ($($ptr:ident),*) => {$(
        #[async_trait]
        impl<S: KeyStore + ?Sized> KeyStore for $ptr<S> {
            async fn insert_key(&self, key: &StoredKey) -> StoreResult<()> {
                (**self).insert_key(key).await
            }
            async fn find_key(&self, id: &str) -> StoreResult<Option<StoredKey>> {
                (**self).find_key(id).await
            }
            async fn list_keys(&self, user: Option<&str>) -> StoreResult<Vec<StoredKey>> {
                (**self).list_keys(user).await
            }
            async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
                (**self).revoke_key(id, at).await
            }
        }
    )*};
}

forward_keys!(Arc, Box);

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        "2026-12-02T12:00:00Z".parse().unwrap()
    }

    #[test]
    fn an_issued_key_verifies_as_its_user_and_scope() {
        let issued = issue("ada", Scope::Read, Some("laptop"), None, now()).unwrap();
        assert!(issued.token.starts_with("cx_"));
        assert_eq!(issued.token.len(), 3 + 16 + 1 + 64);
        assert!(!issued.stored.digest.contains(&issued.token[20..]));
        let caller = verify(&issued.token, Some(&issued.stored), now()).unwrap();
        assert_eq!(caller.user_id, "ada");
        assert_eq!(caller.scope, Scope::Read);
        assert_eq!(caller.key_id.as_deref(), Some(issued.stored.id.as_str()));
        assert!(!format!("{issued:?}").contains(&issued.token));
    }

    #[test]
    fn two_keys_differ() {
        let a = issue("ada", Scope::Write, None, None, now()).unwrap();
        let b = issue("ada", Scope::Write, None, None, now()).unwrap();
        assert_ne!(a.token, b.token);
        assert_ne!(a.stored.id, b.stored.id);
    }

    #[test]
    fn a_wrong_secret_revoked_or_expired_key_is_refused() {
        let issued = issue("ada", Scope::Write, None, None, now()).unwrap();
        let mut wrong = issued.token.clone();
        let last = wrong.pop().unwrap();
        wrong.push(if last == '0' { '1' } else { '0' });
        assert_eq!(
            verify(&wrong, Some(&issued.stored), now()),
            Err(KeyError::Unknown)
        );
        assert_eq!(verify(&issued.token, None, now()), Err(KeyError::Unknown));

        let mut revoked = issued.stored.clone();
        revoked.revoked_at = Some(now());
        assert_eq!(
            verify(&issued.token, Some(&revoked), now()),
            Err(KeyError::Revoked)
        );

        let later = now() + chrono::Duration::days(1);
        let expiring = issue("ada", Scope::Read, None, Some(later), now()).unwrap();
        assert!(verify(&expiring.token, Some(&expiring.stored), now()).is_ok());
        assert_eq!(
            verify(&expiring.token, Some(&expiring.stored), later),
            Err(KeyError::Expired)
        );
        assert!(!expiring.stored.is_active(later));
    }

    #[test]
    fn malformed_tokens_and_bad_settings_are_refused() {
        for token in [
            "",
            "cx_",
            "cx_0123456789abcdef",
            "Bearer cx_x",
            &format!("cx_{}_{}", "0".repeat(16), "0".repeat(63)),
            &format!("cx_{}_{}", "0".repeat(16), "G".repeat(64)),
            &format!("ck_{}_{}", "0".repeat(16), "0".repeat(64)),
        ] {
            assert_eq!(parse_token(token), Err(KeyError::Malformed), "{token:?}");
        }
        assert_eq!(
            issue("", Scope::Read, None, None, now()).err(),
            Some(KeyError::BadUser)
        );
        assert_eq!(
            issue("ada", Scope::Read, Some("a\nb"), None, now()).err(),
            Some(KeyError::BadLabel)
        );
        assert_eq!(
            issue("ada", Scope::Read, None, Some(now()), now()).err(),
            Some(KeyError::ExpiryInThePast)
        );
    }

    #[test]
    fn write_allows_read_and_read_allows_only_read() {
        assert!(Scope::Write.allows(Scope::Read));
        assert!(Scope::Write.allows(Scope::Write));
        assert!(Scope::Read.allows(Scope::Read));
        assert!(!Scope::Read.allows(Scope::Write));
        for scope in [Scope::Read, Scope::Write] {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(Scope::parse("admin"), None);
    }
}
