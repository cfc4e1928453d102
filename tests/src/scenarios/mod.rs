//! The scenarios, one async function each, grouped by concern.

mod corrections;
mod enrichment;
mod expiry;
mod filters;
mod forget;
mod keys;
mod layers;
mod memories;
mod pushdown;
mod retrieval;
mod structure;
mod transfer;
mod validation;

pub use corrections::*;
pub use enrichment::*;
pub use expiry::*;
pub use filters::*;
pub use forget::*;
pub use keys::*;
pub use layers::*;
pub use memories::*;
pub use pushdown::*;
pub use retrieval::*;
pub use structure::*;
pub use transfer::*;
pub use validation::*;
