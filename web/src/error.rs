//! Every way a page can fail, each with its status code, shown as plain text inside the
//! layout (escaped like everything else).

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use cortex_app::FilterError;
use cortex_core::{error::CortexError, error::StoreError};
use maud::html;

use crate::html::layout;

/// A page's failure.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(&'static str),
    #[error("there is no page at {0}")]
    NoSuchPage(String),
    #[error("the form is larger than {0} bytes")]
    TooLarge(usize),
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error(transparent)]
    Engine(#[from] CortexError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine could not be built (a store that is down, a missing setting).
    #[error("the memory store is not reachable right now: {0}")]
    Unavailable(String),
}

impl WebError {
    pub fn status(&self) -> StatusCode {
        match self {
            WebError::BadRequest(_) | WebError::Filter(_) => StatusCode::BAD_REQUEST,
            WebError::Forbidden(_) => StatusCode::FORBIDDEN,
            WebError::NoSuchPage(_) => StatusCode::NOT_FOUND,
            WebError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            WebError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            WebError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            WebError::Engine(e) => match e {
                CortexError::NotFound { .. } => StatusCode::NOT_FOUND,
                CortexError::AmbiguousPrefix { .. } | CortexError::InvalidInput { .. } => {
                    StatusCode::BAD_REQUEST
                }
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    /// What the page says: the error itself when it is the caller's, a plain sentence
    /// when it is the server's (the detail goes to the log).
    fn message(&self) -> String {
        if self.status() == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(error = %self, "a web page has no engine");
            "The memory store is not reachable right now; try again in a moment.".to_owned()
        } else if self.status().is_server_error() {
            tracing::error!(error = %self, "a web page failed");
            "Something went wrong on the server; the log says what.".to_owned()
        } else {
            self.to_string()
        }
    }
}

impl IntoResponse for WebError {
    fn into_response(self) -> Response {
        let status = self.status();
        let title = status.canonical_reason().unwrap_or("Error");
        let page = layout(
            title,
            None,
            html! {
                p.error { (self.message()) }
                p { a href="/" { "Back to your memories" } }
            },
        );
        (status, Html(page.into_string())).into_response()
    }
}
