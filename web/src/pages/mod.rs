//! The pages, one file each, and the filter fields Browse and Search share.

pub mod browse;
pub mod entity;
pub mod export;
pub mod graph;
pub mod login;
pub mod memory;
pub mod search;
pub mod stats;
pub mod timeline;

use cortex_core::memory::MemoryKind;
use maud::{Markup, html};

use crate::params::ListParams;

/// The filter inputs of a Browse or Search form: kinds, tags, since, until.
fn filter_fields(params: &ListParams) -> Markup {
    html! {
        fieldset.filters {
            legend { "Filters" }
            span.kinds {
                @for kind in MemoryKind::ALL {
                    @let checked = params.kinds.iter().any(|k| k.trim().eq_ignore_ascii_case(kind.as_str()));
                    label {
                        input type="checkbox" name="kinds" value=(kind.as_str()) checked[checked];
                        " " (kind.as_str())
                    }
                }
            }
            label { "Tags " input type="text" name="tags" value=(params.tags.join(", ")) placeholder="any of: work, billing"; }
            label { "Since " input type="text" name="since" value=(params.since) placeholder="YYYY-MM-DD"; }
            label { "Until " input type="text" name="until" value=(params.until) placeholder="YYYY-MM-DD (exclusive)"; }
        }
    }
}
