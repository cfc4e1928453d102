//! The `cortex-bench` command line: the same flags `cortex bench` took before the
//! benchmarks left the product binary.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use cortex_core::profile::Tier;

use crate::backend::BackendKind;
use crate::ingest::{Granularity, Labels, Roles};
use crate::retrieve::Retriever;

/// A benchmark's data format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Longmemeval,
    Locomo,
    /// A memory set (bench/src/locomo/memory_set.rs): one person's memories and
    /// questions naming the memories that answer them.
    Memories,
    /// Every dev set: the memory set built into the binary, LoCoMo from `--data` and the
    /// LongMemEval-format set from `--synthetic` at both granularities.
    Dev,
}

/// Runs a retrieval benchmark: LongMemEval (session-level recall and nDCG, and optionally
/// reader accuracy judged by an LLM), LoCoMo (recall of evidence turns and sessions), a
/// memory set, or every dev set at once. Providers come from the environment
/// (CORTEX_EMBED_PROVIDER,
/// CORTEX_LLM_PROVIDER, keys; see docs/PROVIDERS.md).
#[derive(Debug, Clone, Parser)]
#[command(name = "cortex-bench", version)]
pub struct BenchArgs {
    /// The dataset: a LongMemEval JSON file (an array of questions); with `--format
    /// locomo` (and `--format dev`) LoCoMo's `locomo10.json`, one of its per-conversation
    /// files, or a directory of them; with `--format memories` a memory set.
    #[arg(long, value_name = "PATH")]
    pub data: PathBuf,

    /// The dataset's format. LoCoMo writes one memory per turn (`speaker: text`, with a
    /// shared image's caption) and one user per conversation, and scores each question
    /// by its evidence turns; `--granularity`, `--roles`, `--labels` and `--qa` are
    /// LongMemEval's.
    #[arg(long, value_enum, default_value_t = Format::Longmemeval)]
    pub format: Format,

    /// One memory per turn, or per session (long sessions split into chunks).
    #[arg(long, value_enum, default_value_t = Granularity::Turn)]
    pub granularity: Granularity,

    /// Which turns become memories: user turns (as the official retrievers) or all.
    #[arg(long, value_enum, default_value_t = Roles::User)]
    pub roles: Roles,

    /// Gold labelling: `official` credits only has_answer turns, as LongMemEval's
    /// script; `session` credits any memory of an answer session.
    #[arg(long, value_enum, default_value_t = Labels::Official)]
    pub labels: Labels,

    /// Where memories live: a fresh store per question (memory, sqlite) or a unique
    /// user per question in CORTEX_DATABASE_URL (postgres).
    #[arg(long, value_enum, default_value_t = BackendKind::Memory)]
    pub backend: BackendKind,

    /// Memories retrieved per question, 10 to 1000. Default: the tier's top_k (at least
    /// 10), times 5 at LongMemEval's turn granularity so the ranking spans 10 sessions;
    /// LoCoMo recalls the tier's top_k (the limit an agent asks for).
    #[arg(long, value_name = "N")]
    pub top_k: Option<usize>,

    /// Only the first N questions (LoCoMo: in file order, over the conversations).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,

    /// Retrievers to score, comma-separated: hybrid (the engine's recall), dense, bm25,
    /// reranked (recall with the reranker of CORTEX_RERANK_PROVIDER).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "hybrid")]
    pub retriever: Vec<Retriever>,

    /// With `reranked`: fused candidates the reranker orders (default: the tier's).
    #[arg(long, value_name = "N")]
    pub rerank_depth: Option<usize>,

    /// The cosine from which two recalled memories count as one topic, the later-written
    /// going first (default: the engine's), or `off` for fusion's order.
    #[arg(long, value_name = "COSINE|off")]
    pub same_topic: Option<String>,

    /// Writes the full JSON report here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// With `--format dev`: the LongMemEval-format set (a JSON file).
    #[arg(long, value_name = "PATH")]
    pub synthetic: Option<PathBuf>,

    /// Appends each scored question's dense and BM25 lists (depth 200, with their scores
    /// and each query term's idf) to this file as JSON Lines, for offline fusion studies.
    #[arg(long, value_name = "FILE")]
    pub lists: Option<PathBuf>,

    /// Writes the markdown tables here (they are always printed on stdout).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// The provider cache file (SQLite); reruns are answered from it. Default:
    /// ~/.cache/cortex/bench-providers.sqlite ($XDG_CACHE_HOME/cortex/ when set; without
    /// a home, .cache/bench-cache.db in the working directory).
    #[arg(long, value_name = "FILE", conflicts_with = "no_cache")]
    pub cache: Option<PathBuf>,

    /// Calls the providers every time.
    #[arg(long)]
    pub no_cache: bool,

    /// Also answers each question with the Chain-of-Note reader and grades it with an
    /// LLM judge (needs CORTEX_LLM_PROVIDER).
    #[arg(long)]
    pub qa: bool,

    /// The tier whose profile sets top_k, the reader model and its budget.
    #[arg(long, env = "CORTEX_TIER", default_value = "cheap")]
    pub tier: Tier,

    /// The reader model (default: CORTEX_LLM_MODEL, else the tier's model on Gemini,
    /// else the provider's default).
    #[arg(long, value_name = "MODEL")]
    pub reader_model: Option<String>,

    /// The judge model (default: the reader model).
    #[arg(long, value_name = "MODEL")]
    pub judge_model: Option<String>,

    /// Memories shown to the reader (default: the tier's top_k).
    #[arg(long, value_name = "N")]
    pub reader_k: Option<usize>,

    /// The reader's output budget (default: the tier's).
    #[arg(long, value_name = "TOKENS")]
    pub reader_max_tokens: Option<u32>,

    /// The judge's output budget (room for models that think before answering).
    #[arg(long, value_name = "TOKENS", default_value_t = 512)]
    pub judge_max_tokens: u32,

    /// No markdown on stdout.
    #[arg(long)]
    pub quiet: bool,
}
