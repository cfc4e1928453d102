//! What the BM25 side's path builders share: one query as they read it, and what a path
//! of several terms builds. A leaf, so that the statement (`lexical`) and the paths it
//! picks between (`maxscore`, `rarest_first`) each depend on it and not on each other.

use sea_query::Expr;

use super::aliases::Col;
use super::cte::Cte;
use super::statistics::Statistics;
use crate::names::Names;

/// One query's BM25 side as the path builders read it.
#[derive(Debug, Clone, Copy)]
pub(super) struct LexicalQuery<'a> {
    pub names: &'a Names,
    pub user: &'a str,
    /// The query terms (bound as one array).
    pub terms: &'a [String],
    /// How many terms the statement is shaped for (see `lexical::shape_width`).
    pub width: usize,
    pub statistics: Statistics,
    pub pool: usize,
    pub budget: i64,
    pub lookup_cost: u64,
}

/// What a path of several terms built: the memories' full scores (`seq, score`), the
/// expression naming the path taken, and the rarest-first path's CTEs when it was built.
#[derive(Debug)]
pub(super) struct Scored {
    pub scored: Cte,
    pub path: Expr,
    pub rarest: Option<RarestFirst>,
}

/// The CTEs of the rarest-first path that the rest of the BM25 side reads.
#[derive(Debug, Clone, Copy)]
pub(super) struct RarestFirst {
    /// `r_gate`: whether the rarest term carries the pool (`ok`).
    pub gate: Cte,
    /// `r_mode`: whether its candidates are looked up (`lookup`) rather than scanned.
    pub mode: Cte,
    /// `r_cand`: the rare term's candidates.
    pub candidates: Cte,
    /// `r_scored` (seq, score): the looked-up candidates' full scores.
    pub scored: Cte,
}

impl RarestFirst {
    /// Whether the path applies.
    pub(super) fn applies(&self) -> String {
        format!("COALESCE({}, false)", self.gate.scalar(Col::Ok))
    }

    /// Whether it scores its candidates by lookups (else every posting is scanned).
    pub(super) fn looks_up(&self) -> String {
        format!("COALESCE({}, false)", self.mode.scalar(Col::Lookup))
    }

    /// The statement's `r_candidates` and `r_looked_up`, counted only where the lookups
    /// ran: the candidates are then read anyway.
    pub(super) fn counts(&self) -> (Expr, Expr) {
        let count = |cte: Cte| {
            Expr::cust(format!(
                "CASE WHEN {} THEN (SELECT count(*) FROM {cte}) ELSE 0 END",
                self.looks_up()
            ))
        };
        (count(self.candidates), count(self.scored))
    }
}
