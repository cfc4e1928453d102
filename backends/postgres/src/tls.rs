//! The URL's `sslmode` to a connector, with libpq's meaning for each mode.
//!
//! tokio-postgres only knows `disable|prefer|require` and refuses unknown keys such as
//! `sslrootcert`, so the TLS keys are taken off the URL here and mapped ourselves:
//!
//! - `disable`: plaintext.
//! - `prefer` (the default, as in libpq) and `allow`: TLS when the server offers it,
//!   plaintext when it refuses. The certificate is **not** verified.
//! - `require`: TLS or fail. As in libpq, the certificate is **not** verified: the link is
//!   encrypted and the handshake signature checked against the presented key, but anyone
//!   on the path can present a key of their own. Use `verify-full` against a server you
//!   reach over an untrusted network.
//! - `verify-ca`: TLS with the chain checked against the roots; the host name is not.
//! - `verify-full`: TLS with the chain and the host name checked.
//!
//! Roots are the file named by `sslrootcert` (PEM) or else the Mozilla roots
//! (webpki-roots). Client certificates (`sslcert`, `sslkey`) are refused with a clear error.

use std::sync::Arc;

use cortex_core::error::StoreError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's sslmode values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PgSslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// How to open connections: the parsed settings and the matching connector.
pub(crate) struct Connection {
    pub config: tokio_postgres::Config,
    pub connector: Connector,
}

// Deliberately not the settings: they may hold a password.
impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tls", &matches!(self.connector, Connector::Tls(_)))
            .finish_non_exhaustive()
    }
}

#[derive(Clone)]
pub(crate) enum Connector {
    Plain,
    Tls(MakeRustlsConnect),
}

/// Parses `url` (a postgres:// URL or libpq key=value text) into settings and a connector.
/// Errors never echo the URL, which may hold a password.
pub(crate) fn parse(url: &str) -> Result<Connection, StoreError> {
    parse_named(url, "CORTEX_DATABASE_URL")
}

/// [`parse`], its errors naming the URL as `setting` (the variable or option it came
/// from). Also refuses what connecting would refuse before sending a byte: no host, or
/// hosts, addresses and ports that do not pair up.
pub(crate) fn parse_named(url: &str, setting: &str) -> Result<Connection, StoreError> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if !is_url && let Some((scheme, _)) = url.split_once("://") {
        // Only a plain scheme is echoed: what precedes "://" may be anything a user pasted.
        let shown = if !scheme.is_empty()
            && scheme.len() <= 20
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        {
            format!("{scheme}://")
        } else {
            "another scheme".to_owned()
        };
        return Err(StoreError::Config(format!(
            "{setting} starts with {shown}; Cortex stores in PostgreSQL, whose URLs start with \
             postgres:// or postgresql:// (or libpq settings: host=... dbname=...); for the \
             embedded SQLite store set CORTEX_DB_PATH instead"
        )));
    }
    let (clean, mode, root_cert) = if is_url {
        split_tls_params(url)?
    } else {
        (url.to_owned(), None, None)
    };
    let mut config: tokio_postgres::Config =
        clean.parse().map_err(|e: tokio_postgres::Error| {
            // The driver's display is only "invalid connection string"; its source names the
            // option at fault (never its value).
            let why = std::error::Error::source(&e).map_or_else(String::new, |s| format!(": {s}"));
            StoreError::Config(format!("{setting} is not a valid PostgreSQL URL: {e}{why}"))
        })?;
    check_hosts(&config, setting)?;
    let mode = mode.unwrap_or(match config.get_ssl_mode() {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Require => PgSslMode::Require,
        _ => PgSslMode::Prefer,
    });
    let connector = match mode {
        PgSslMode::Disable => {
            config.ssl_mode(SslMode::Disable);
            Connector::Plain
        }
        mode => {
            config.ssl_mode(match mode {
                // tokio-postgres has no "allow"; prefer is the nearest.
                PgSslMode::Allow | PgSslMode::Prefer => SslMode::Prefer,
                _ => SslMode::Require,
            });
            Connector::Tls(rustls_connector(mode, root_cert.as_deref())?)
        }
    };
    Ok(Connection { config, connector })
}

/// The driver's own checks at connect time (tokio-postgres `connect`), made when the URL
/// is read so that a URL that can never connect is a configuration error at once.
fn check_hosts(config: &tokio_postgres::Config, setting: &str) -> Result<(), StoreError> {
    let (hosts, addrs) = (config.get_hosts().len(), config.get_hostaddrs().len());
    if hosts == 0 && addrs == 0 {
        return Err(StoreError::Config(format!(
            "{setting} names no host; write postgres://user@host:port/database"
        )));
    }
    if hosts != 0 && addrs != 0 && hosts != addrs {
        return Err(StoreError::Config(format!(
            "{setting} names {hosts} hosts but {addrs} host addresses"
        )));
    }
    let ports = config.get_ports().len();
    if ports > 1 && ports != hosts.max(addrs) {
        return Err(StoreError::Config(format!(
            "{setting} names {ports} ports for {} hosts; give one port, or one per host",
            hosts.max(addrs)
        )));
    }
    Ok(())
}

type Split = (String, Option<PgSslMode>, Option<String>);

/// Takes `sslmode` and `sslrootcert` off a URL's query string.
fn split_tls_params(url: &str) -> Result<Split, StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None, None));
    };
    let (mut mode, mut root_cert) = (None, None);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|s| !s.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => {
                mode = Some(match percent_decode(value).as_str() {
                    "disable" => PgSslMode::Disable,
                    "allow" => PgSslMode::Allow,
                    "prefer" => PgSslMode::Prefer,
                    "require" => PgSslMode::Require,
                    "verify-ca" => PgSslMode::VerifyCa,
                    "verify-full" => PgSslMode::VerifyFull,
                    other => {
                        return Err(StoreError::Config(format!(
                            "sslmode {other:?} is not one of disable, allow, prefer, require, \
                             verify-ca, verify-full"
                        )));
                    }
                })
            }
            "sslrootcert" => root_cert = Some(percent_decode(value)),
            "sslcert" | "sslkey" | "sslcrl" | "sslpassword" => {
                return Err(StoreError::Config(format!(
                    "{key} is not supported (no client certificates or CRLs); authenticate \
                     with a password"
                )));
            }
            _ => kept.push(pair),
        }
    }
    let clean = match kept.is_empty() {
        true => base.to_owned(),
        false => format!("{base}?{}", kept.join("&")),
    };
    Ok((clean, mode, root_cert))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn provider() -> Arc<CryptoProvider> {
    // An explicit provider: ClientConfig::builder() panics when both ring and aws-lc-rs are
    // compiled in somewhere in the graph and no process default was installed.
    Arc::new(rustls::crypto::ring::default_provider())
}

fn root_store(root_cert: Option<&str>) -> Result<RootCertStore, StoreError> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        None | Some("system") => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            let bad =
                |e: &dyn std::fmt::Display| StoreError::Config(format!("sslrootcert {path}: {e}"));
            for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
                roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
        }
    }
    Ok(roots)
}

fn rustls_connector(
    mode: PgSslMode,
    root_cert: Option<&str>,
) -> Result<MakeRustlsConnect, StoreError> {
    let tls_err = |e: rustls::Error| StoreError::Config(format!("TLS setup: {e}"));
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?;
    let config = match mode {
        PgSslMode::VerifyFull => builder
            .with_root_certificates(root_store(root_cert)?)
            .with_no_client_auth(),
        PgSslMode::VerifyCa => {
            let roots = Arc::new(root_store(root_cert)?);
            let inner = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| StoreError::Config(format!("TLS setup: {e}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(inner)))
                .with_no_client_auth()
        }
        _ => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoCertCheck(provider)))
            .with_no_client_auth(),
    };
    Ok(MakeRustlsConnect::new(config))
}

/// libpq's `prefer`/`require`: encrypt, do not check the certificate. Handshake signatures
/// are still verified, so the peer holds the key of the certificate it presents.
#[derive(Debug)]
struct NoCertCheck(Arc<CryptoProvider>);

impl ServerCertVerifier for NoCertCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// libpq's `verify-ca`: the chain must lead to a trusted root; the name may differ.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_keys_leave_the_url_and_map_to_modes() {
        let (clean, mode, root) = split_tls_params(
            "postgres://u:p@h/db?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(clean, "postgres://u:p@h/db?application_name=x");
        assert_eq!(mode, Some(PgSslMode::VerifyFull));
        assert_eq!(root.as_deref(), Some("/tmp/ca.pem"));
        assert!(split_tls_params("postgres://h/db?sslmode=bogus").is_err());
        assert!(split_tls_params("postgres://h/db?sslcert=/x").is_err());
    }

    #[test]
    fn a_url_of_another_scheme_names_the_accepted_ones() {
        for (url, shown) in [
            ("postgress://u:secret@h/db", "postgress://"),
            ("mysql://u:secret@h/db", "mysql://"),
            ("sqlite:///tmp/x.db", "sqlite://"),
            ("u:secret@h://db", "another scheme"),
        ] {
            let Err(StoreError::Config(message)) = parse(url) else {
                panic!("{url} was accepted");
            };
            assert!(message.contains(shown), "{message}");
            assert!(message.contains("postgres://"), "{message}");
            assert!(message.contains("postgresql://"), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
    }

    #[test]
    fn every_mode_builds_a_connector() {
        for (url, plain) in [
            ("postgres://h/db?sslmode=disable", true),
            ("postgres://h/db", false),
            ("postgres://h/db?sslmode=require", false),
            ("postgres://h/db?sslmode=verify-ca", false),
            ("postgres://h/db?sslmode=verify-full", false),
            ("host=h dbname=db sslmode=disable", true),
        ] {
            let conn = parse(url).unwrap();
            assert_eq!(matches!(conn.connector, Connector::Plain), plain, "{url}");
        }
    }

    #[test]
    fn a_url_that_cannot_connect_is_refused_when_read() {
        for (url, says) in [
            ("postgres://", "names no host"),
            ("postgres:///db", "names no host"),
            ("postgresql://u:hunter2@/db", "names no host"),
            ("host=a,b port=1,2,3 user=u", "3 ports for 2 hosts"),
            (
                "host=a,b hostaddr=127.0.0.1 user=u",
                "2 hosts but 1 host addresses",
            ),
        ] {
            let err = parse_named(url, "--to").unwrap_err().to_string();
            assert!(err.contains(says) && err.contains("--to"), "{url}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
        for url in [
            "postgres://u@h/db",
            "host=a,b port=1 user=u",
            "hostaddr=127.0.0.1",
        ] {
            assert!(parse(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn parse_errors_do_not_echo_the_password() {
        let err = parse("postgres://u:hunter2@h:notaport/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(err.contains("`port`"), "names the option at fault: {err}");
    }
}
