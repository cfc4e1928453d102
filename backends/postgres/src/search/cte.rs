//! Typed handles to common table expressions: a builder adds a CTE and gets back a [`Cte`],
//! and whatever reads it later takes that handle (its name, its scalar reads) instead of a
//! string naming it, so a reader cannot name a CTE that was never built or misspell one.

use sea_query::{CommonTableExpression, IdenStatic, SelectStatement, WithClause};

use super::aliases::CteName;

/// A CTE already in the statement's WITH clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cte(CteName);

impl Cte {
    /// Its name, to read it in FROM or JOIN.
    pub(crate) fn name(self) -> CteName {
        self.0
    }

    /// `(SELECT {expr} FROM cte)`: a one-row CTE's value as a scalar subquery (`expr` a
    /// column of it, or an expression over its columns).
    pub(crate) fn scalar(self, expr: impl AsRef<str>) -> String {
        format!("(SELECT {} FROM {self})", expr.as_ref())
    }
}

impl std::fmt::Display for Cte {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_str())
    }
}

/// A statement's WITH clause as it is built: each CTE added returns its handle.
#[derive(Debug, Default)]
pub(crate) struct Ctes(WithClause);

impl Ctes {
    pub(crate) fn new() -> Self {
        Self(WithClause::new())
    }

    /// Adds `select` as the CTE `name`.
    pub(crate) fn add(&mut self, name: CteName, select: SelectStatement) -> Cte {
        self.0.cte(
            CommonTableExpression::new()
                .query(select)
                .table_name(name)
                .to_owned(),
        );
        Cte(name)
    }

    /// Adds `select` as the CTE `name`, materialised: computed once however often it is
    /// read.
    pub(crate) fn add_materialized(&mut self, name: CteName, select: SelectStatement) -> Cte {
        self.0.cte(
            CommonTableExpression::new()
                .query(select)
                .table_name(name)
                .materialized(true)
                .to_owned(),
        );
        Cte(name)
    }

    pub(crate) fn finish(self) -> WithClause {
        self.0
    }
}
