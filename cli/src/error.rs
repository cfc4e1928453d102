//! Why a cortex command failed.

/// Any command's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    #[error(transparent)]
    Admin(#[from] crate::admin::AdminError),
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
}
