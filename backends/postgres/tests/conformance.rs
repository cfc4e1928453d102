//! The conformance suite against PostgreSQL, twice: with the search pushdown, and with it
//! turned off so the engine takes the build_index path. Each scenario gets its own schema.

mod support;

mod pushdown {
    use super::support::Pg;
    use cortex_conformance::{conformance_suite, enrichment_suite, key_suite, transfer_suite};

    conformance_suite!(Pg { pushdown: true });
    enrichment_suite!(Pg { pushdown: true });
    transfer_suite!(Pg { pushdown: true });
    // Keys do not touch the search: one run of their scenarios is enough.
    key_suite!(Pg { pushdown: true });
}

mod build_index {
    use super::support::Pg;
    use cortex_conformance::{conformance_suite, enrichment_suite, transfer_suite};

    conformance_suite!(Pg { pushdown: false });
    enrichment_suite!(Pg { pushdown: false });
    transfer_suite!(Pg { pushdown: false });
}
