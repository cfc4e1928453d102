//! The names the search statements give what they build: their CTEs, the columns they
//! compute and the aliases of what they read. None is a table or a column of the store
//! (those are `crate::tables`); each is written once here, so that the part of a
//! statement that names a column and the part (or the decoder) that reads it cannot
//! disagree. A leaf. Raw fragments (`Expr::cust`) still spell them in their text.

use sea_query::IdenStatic;

/// The CTEs of the search statements (see [`super::cte`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, IdenStatic)]
pub(crate) enum CteName {
    // The BM25 side.
    QTerms,
    Stats,
    LIdf,
    LSplit,
    LOnce,
    CPart,
    CCut,
    LEss,
    Gate,
    CEss,
    CCut2,
    LMode,
    LRow,
    LPruned,
    LFull,
    LScored,
    ISeed,
    IFloor,
    ICand,
    RTerm,
    RSeed,
    RRow,
    RGate,
    RCand,
    RMode,
    REdges,
    #[iden = "r_s1"]
    RS1,
    #[iden = "r_s2"]
    RS2,
    #[iden = "r_s3"]
    RS3,
    RScored,
    Lexical,
    // The dense side.
    DAll,
    DCut,
    DCand,
    DGaps,
    DRuns,
    DKeyed,
    DFirst,
    DScored,
    Dense,
    // Fusion.
    Fused,
    Around,
    Linked,
    Smoothed,
    Top,
}

/// The columns the search statements compute (or pass on from a CTE), and the
/// statements' result columns the decoders read.
#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Col {
    // Ranked memories, per side and fused.
    Seq,
    Score,
    Rnk,
    Dist,
    DRank,
    LRank,
    Share,
    Next,
    NextScore,
    Joined,
    // The dense tie-break.
    Step,
    Run,
    Probe,
    Embedding,
    Zero,
    Nth,
    RunSize,
    // The dense side's first two embeddings, for the weights.
    First,
    Second,
    // The query terms and their statistics.
    Term,
    Ord,
    Idf,
    Ub,
    MaxTf,
    Tf,
    Cum,
    Tail,
    AllDf,
    // The user's BM25 statistics (`stats`).
    N,
    Avgdl,
    Uid,
    K1p1,
    K1,
    Omb,
    B,
    // Per-term scores, partial sums and the pruning's floors and gates.
    V,
    Partial,
    Cut,
    Rest,
    NPruned,
    Ok,
    Once,
    Essential,
    Lookup,
    E1,
    E2,
    // The result rows (see `decode_lexical`, `Ranked::decode` and `fusion::decode`).
    Seqs,
    Ranks,
    Scores,
    LexicalPath,
    RCandidates,
    RLookedUp,
    Live,
    Dfs,
    /// How many HNSW candidates the index scan returned (see `dense_side::Walked`).
    Found,
}

/// The aliases (`FROM ... AS x`) under which a search statement reads its tables, CTEs
/// and subqueries.
#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum As {
    A,
    B,
    C,
    D,
    E,
    F,
    G,
    I,
    K,
    L,
    M,
    P,
    Q,
    R,
    S,
    T,
    X,
    Z,
}
