//! `cortex ui`: the web page over the local store, for one person at their own machine.
//! It listens on 127.0.0.1 only and logs in with a random token that works once, printed
//! (and opened) as a link, as notebook servers do: the login trades it for a session
//! cookie and redirects, so the token leaves the address bar.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use cortex_web::{OneTimeToken, Ready, WebConfig, WebState};

use super::{AdminError, Context};
use crate::cli::UiArgs;

pub async fn ui(args: UiArgs) -> Result<(), AdminError> {
    let (engine, user) = Context::engine_for(args.user.user.as_deref()).await?;
    let token = Arc::new(OneTimeToken::new(user.clone()));
    // One person's own store: Stats may show its size on disk.
    let config = WebConfig {
        show_store_size: true,
        ..WebConfig::default()
    };
    let state = WebState::with_config(Arc::new(Ready(Arc::new(engine))), token.clone(), config);
    let router = cortex_web::router(state);
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let io = |source| AdminError::Io {
        path: PathBuf::from(address.to_string()),
        source,
    };
    let listener = tokio::net::TcpListener::bind(address).await.map_err(io)?;
    let bound = listener.local_addr().map_err(io)?;
    let link = format!("http://{bound}{}", token.login_path());
    // The link is the one line a script reads; the rest is for the person.
    println!("{link}");
    eprintln!(
        "cortex ui: the memories of user {user:?}, on {bound} only. The link above logs one \
         browser in, once; press Ctrl-C to stop."
    );
    if !args.no_open && webbrowser::open(&link).is_err() {
        eprintln!("cortex ui: no browser could be opened; open the link yourself.");
    }
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(io)
}
