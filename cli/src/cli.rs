//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cortex_core::Tier;

use crate::bench::backend::BackendKind;
use crate::bench::ingest::{Granularity, Labels, Roles};
use crate::bench::retrieve::Retriever;

/// A benchmark's data format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Longmemeval,
    Locomo,
}

/// Cortex: long-term memory for AI agents.
#[derive(Debug, Parser)]
#[command(name = "cortex", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs a retrieval benchmark: LongMemEval (session-level recall and nDCG, and
    /// optionally reader accuracy judged by an LLM) or LoCoMo (recall of evidence turns
    /// and sessions).
    Bench(BenchArgs),
}

/// `cortex bench`. Providers come from the environment (CORTEX_EMBED_PROVIDER,
/// CORTEX_LLM_PROVIDER, keys; see docs/PROVIDERS.md).
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The dataset: a LongMemEval JSON file (an array of questions), or with `--format
    /// locomo` LoCoMo's `locomo10.json`, one of its per-conversation files, or a directory
    /// of them.
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

    /// Retrievers to score, comma-separated: hybrid (the engine's recall), dense, bm25.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "hybrid")]
    pub retriever: Vec<Retriever>,

    /// Writes the full JSON report here.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Writes the markdown tables here (they are always printed on stdout).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,

    /// The provider cache file (SQLite); reruns are answered from it.
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
