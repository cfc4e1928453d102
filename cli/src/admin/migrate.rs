//! `cortex migrate`: copies a store into another backend, then verifies every user.

use cortex_app::transfer::format::{FORMAT_NAME, FORMAT_VERSION, Header};
use cortex_app::transfer::pager::Pager;
use cortex_core::transfer::TransferStore;

use crate::admin::error::AdminError;
use crate::admin::import::writer::{Importer, Tally, Vectors};
use crate::admin::progress::Progress;
use crate::admin::summary::{Summary, summarize};

/// One user's verification: the source's summary, equal to the copy's.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verified {
    pub user: String,
    pub summary: Summary,
}

/// Copies `users` from `source` into `target` with their vectors (streamed a page at a
/// time; a copy interrupted anywhere is finished by running it again), then compares each
/// user's counts and checksum on both sides.
pub async fn migrate(
    source: &dyn TransferStore,
    target: &dyn TransferStore,
    users: &[String],
    progress: &Progress,
) -> Result<(Tally, Vec<Verified>), AdminError> {
    let Some(signature) = source.signature().await? else {
        return Ok((Tally::default(), Vec::new()));
    };
    if let Some(stored) = target.signature().await?
        && stored != signature
    {
        return Err(AdminError::Usage(format!(
            "the target holds vectors of {stored} and the source of {signature}; migrate into \
             an empty store or one of the same model"
        )));
    }
    let header = Header {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        exported_at: cortex_core::memory::now(),
        signature: Some(signature.clone()),
        vectors: true,
        users: users.to_vec(),
    };
    let mut importer = Importer::new(target, Vectors::FromFile { signature }, &header, None);
    let mut record = 0usize;
    for user in users {
        let mut pager = Pager::new(source, user, true);
        while let Some(page) = pager.next_page().await? {
            let batch: Vec<_> = page
                .into_iter()
                .map(|line| {
                    record += 1;
                    (record, line)
                })
                .collect();
            importer.write(&batch).await?;
            progress.inc(batch.len() as u64);
        }
    }
    let mut verified = Vec::with_capacity(users.len());
    for user in users {
        let (want, got) = (
            summarize(source, user).await?,
            summarize(target, user).await?,
        );
        if want != got {
            return Err(AdminError::Verify(format!(
                "user {user:?}: the source has {:?} (checksum {}), the copy {:?} (checksum {})",
                want.counts, want.checksum, got.counts, got.checksum
            )));
        }
        verified.push(Verified {
            user: user.clone(),
            summary: want,
        });
    }
    Ok((importer.tally, verified))
}
