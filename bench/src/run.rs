//! Runs a benchmark: turns `cortex-bench` arguments into a run, shows progress on
//! stderr, and writes the report.

use std::path::{Path, PathBuf};
use std::time::Instant;

use std::sync::Arc;

use cortex_core::{engine::EngineConfig, profile::Tier, reranker::Reranker};
use cortex_providers::RerankerConfig;
use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{BenchArgs, Format};
use crate::backend::Backend;
use crate::error::BenchError;
use crate::ingest::{CorpusOptions, Granularity};
use crate::locomo::report::{
    LOCOMO_REPORT_FORMAT, LocomoConfig, LocomoCounts, LocomoReport, markdown as locomo_markdown,
    summarize as locomo_summarize,
};
use crate::locomo::{self, LocomoOptions, MEMORY_TEMPLATE, Split};
use crate::longmemeval::{RunModels, RunOptions, run};
use crate::providers::{QaModelChoice, RunProviders, default_cache_path};
use crate::qa::QaSettings;
use crate::report::{BenchReport, QaSetup, REPORT_FORMAT, RunConfig, markdown, summarize};
use crate::retrieve::Retriever;
use crate::{dataset, metrics};

/// Fewest memories a retriever must return for the metrics' largest k.
const MIN_DEPTH: usize = 10;

/// Runs the benchmark `args` ask for with `env` as the environment, and returns its
/// report as markdown.
pub async fn execute(
    args: &BenchArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, BenchError> {
    Ok(match args.format {
        Format::Longmemeval => markdown(&bench(args, env).await?),
        Format::Locomo | Format::Memories => locomo_markdown(&bench_locomo(args, env).await?),
        Format::Dev => bench_dev(args, env).await?,
    })
}

/// The retrieval depth: `--top-k`, else the tier's, deeper at LongMemEval's turn
/// granularity where several memories share a session (LoCoMo recalls the tier's limit).
pub fn depth(args: &BenchArgs) -> Result<usize, BenchError> {
    let base = args.tier.profile().top_k.max(MIN_DEPTH);
    let depth = args.top_k.unwrap_or(match (args.format, args.granularity) {
        (Format::Longmemeval, Granularity::Turn) => base * 5,
        _ => base,
    });
    if !(MIN_DEPTH..=cortex_core::listing::MAX_LIMIT).contains(&depth) {
        return Err(BenchError::option(
            "--top-k",
            format!(
                "must be between {MIN_DEPTH} (the largest k scored) and {}; got {depth}",
                cortex_core::listing::MAX_LIMIT
            ),
        ));
    }
    Ok(depth)
}

/// Runs `cortex-bench` with `env` as the environment and writes `--out` and `--markdown`.
pub async fn bench(
    args: &BenchArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<BenchReport, BenchError> {
    let started = Instant::now();
    let depth = depth(args)?;
    if args.limit == Some(0) {
        return Err(BenchError::option("--limit", "must be at least 1"));
    }
    let tier: Tier = args.tier;
    let mut questions = dataset::load(&args.data)?;
    if let Some(limit) = args.limit {
        questions.truncate(limit);
    }
    let cache = cache_path(args);
    let choice = args.qa.then(|| QaModelChoice {
        reader_model: args.reader_model.clone(),
        judge_model: args.judge_model.clone(),
    });
    let providers = RunProviders::from_env(env, cache.as_deref(), tier, choice.as_ref()).await?;
    let (qa, qa_setup) = qa_settings(args, &providers, tier);
    let engine = engine_config(args, tier)?;
    let options = RunOptions {
        corpus: CorpusOptions {
            granularity: args.granularity,
            roles: args.roles,
            labels: args.labels,
            max_bytes: engine.max_content_bytes,
        },
        depth,
        retrievers: dedup(&args.retriever),
        engine,
        lists: args.lists.clone(),
    };
    let signature = providers.embedder.embedding_signature();
    let models = RunModels {
        embedder: providers.embedder.clone(),
        warm: providers.cached,
        qa,
        reranker: reranker(args, env).await?,
    };
    let backend = Backend::open(args.backend).await?;
    tracing::info!(
        questions = questions.len(),
        embedder = %signature,
        backend = ?args.backend,
        depth,
        "running LongMemEval"
    );

    let bar = progress_bar(questions.len() as u64);
    let results = run(&questions, &options, &models, &backend, &mut |q| {
        bar.set_message(q.question_id.clone());
        bar.inc(1);
    })
    .await;
    bar.finish_and_clear();
    let output = results?;

    let config = run_config(args, depth, &options, signature);
    let (counts, retrieval, qa_summary) = summarize(&config, &output.results, qa_setup.as_ref());
    let report = BenchReport {
        format: REPORT_FORMAT,
        created_at: chrono::Utc::now().to_rfc3339(),
        config,
        counts,
        retrieval,
        qa: qa_summary,
        usage: output.usage,
        cache: providers.cache_stats(),
        elapsed_seconds: started.elapsed().as_secs_f64(),
        questions: output.results,
    };
    if let Some(stats) = &report.cache {
        tracing::info!(hits = stats.hits, misses = stats.misses, "provider cache");
    }
    if let Some(path) = &args.out {
        write(path, &serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = &args.markdown {
        write(path, &markdown(&report))?;
    }
    Ok(report)
}

/// The reader and judge of `--qa` (with the tier's defaults), and how the report names
/// them; `None` without `--qa`.
fn qa_settings(
    args: &BenchArgs,
    providers: &RunProviders,
    tier: Tier,
) -> (Option<QaSettings>, Option<QaSetup>) {
    let profile = tier.profile();
    let reader_k = args.reader_k.unwrap_or(profile.top_k).max(1);
    let reader_max_tokens = args
        .reader_max_tokens
        .unwrap_or(profile.reader_max_output_tokens);
    let qa = providers.qa.as_ref().map(|m| QaSettings {
        reader: m.reader.clone(),
        judge: m.judge.clone(),
        reader_model: m.reader_model.clone(),
        judge_model: m.judge_model.clone(),
        reader_k,
        reader_max_tokens,
        judge_max_tokens: args.judge_max_tokens,
    });
    let setup = qa.as_ref().map(|s| QaSetup {
        retriever: args.retriever.first().copied().unwrap_or(Retriever::Hybrid),
        reader_model: s.reader_model.clone(),
        judge_model: s.judge_model.clone(),
        reader_k: s.reader_k,
        reader_max_tokens: s.reader_max_tokens,
    });
    (qa, setup)
}

/// What a LongMemEval report says it ran.
fn run_config(
    args: &BenchArgs,
    depth: usize,
    options: &RunOptions,
    signature: cortex_core::signature::EmbeddingSignature,
) -> RunConfig {
    RunConfig {
        dataset: args.data.display().to_string(),
        granularity: args.granularity,
        roles: args.roles,
        labels: args.labels,
        backend: args.backend,
        depth,
        ks: metrics::KS.to_vec(),
        retrievers: options.retrievers.clone(),
        embedding_model: signature.model,
        embedding_dimension: signature.dimension,
        tier: args.tier.as_str().to_owned(),
        limit: args.limit,
    }
}

/// Runs `cortex-bench --format locomo` with `env` as the environment and writes `--out`
/// and `--markdown`.
pub async fn bench_locomo(
    args: &BenchArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<LocomoReport, BenchError> {
    if args.qa {
        return Err(BenchError::option(
            "--qa",
            "answering is scored on LongMemEval only; LoCoMo runs score retrieval",
        ));
    }
    if args.limit == Some(0) {
        return Err(BenchError::option("--limit", "must be at least 1"));
    }
    let samples = match args.format {
        Format::Memories => vec![locomo::memory_set::load(&args.data)?],
        _ => locomo::dataset::load(&args.data)?,
    };
    bench_samples(args, env, samples).await
}

/// [`bench_locomo`] on samples already read (`args.format` says how they split and how a
/// memory is written).
async fn bench_samples(
    args: &BenchArgs,
    env: &dyn Fn(&str) -> Option<String>,
    samples: Vec<locomo::dataset::Sample>,
) -> Result<LocomoReport, BenchError> {
    let started = Instant::now();
    let tier: Tier = args.tier;
    let depth = depth(args)?;
    let providers = RunProviders::from_env(env, cache_path(args).as_deref(), tier, None).await?;
    let options = LocomoOptions {
        depth,
        retrievers: dedup(&args.retriever),
        engine: engine_config(args, tier)?,
        limit: args.limit,
        split: match args.format {
            Format::Memories => Split::Question,
            _ => Split::Conversation,
        },
        lists: args.lists.clone(),
    };
    let signature = providers.embedder.embedding_signature();
    let models = RunModels {
        embedder: providers.embedder.clone(),
        warm: providers.cached,
        qa: None,
        reranker: reranker(args, env).await?,
    };
    let backend = Backend::open(args.backend).await?;
    let questions: usize = samples.iter().map(|s| s.questions.len()).sum();
    let questions = args.limit.map_or(questions, |l| l.min(questions));
    tracing::info!(
        conversations = samples.len(),
        questions,
        embedder = %signature,
        backend = ?args.backend,
        depth,
        "running LoCoMo"
    );
    let bar = progress_bar(questions as u64);
    let output = locomo::run(&samples, &options, &models, &backend, &mut || bar.inc(1)).await;
    bar.finish_and_clear();
    let output = output?;
    let scored = output
        .results
        .iter()
        .filter(|r| !r.retrieval.is_empty())
        .count();
    let report = LocomoReport {
        format: LOCOMO_REPORT_FORMAT,
        created_at: chrono::Utc::now().to_rfc3339(),
        config: LocomoConfig {
            dataset: args.data.display().to_string(),
            backend: args.backend,
            depth,
            retrievers: options.retrievers.clone(),
            embedding_model: signature.model,
            embedding_dimension: signature.dimension,
            tier: tier.as_str().to_owned(),
            limit: args.limit,
            memory_template: match args.format {
                Format::Memories => "{content}",
                _ => MEMORY_TEMPLATE,
            },
        },
        counts: LocomoCounts {
            conversations: output.conversations,
            memories: output.memories,
            questions: output.results.len(),
            scored,
            without_evidence: output.results.len() - scored,
            unresolved_evidence: output.unresolved_evidence,
        },
        retrieval: locomo_summarize(&options.retrievers, &output.results),
        usage: output.usage,
        cache: providers.cache_stats(),
        elapsed_seconds: started.elapsed().as_secs_f64(),
        questions: output.results,
    };
    if let Some(path) = &args.out {
        write(path, &serde_json::to_string_pretty(&report)?)?;
    }
    if let Some(path) = &args.markdown {
        write(path, &locomo_markdown(&report))?;
    }
    Ok(report)
}

/// `cortex-bench --format dev`: every dev set, one after another, with the same providers
/// and backend: the committed memory set, LoCoMo (`--data`) and the LongMemEval-format set
/// (`--synthetic`) at turn and at session granularity, each reported by half. `--out`
/// writes one JSON object of the four reports; the markdown is theirs, one after another.
pub async fn bench_dev(
    args: &BenchArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, BenchError> {
    let synthetic = args.synthetic.clone().ok_or_else(|| {
        BenchError::option(
            "--synthetic",
            "the dev sets include the LongMemEval-format set: give its path",
        )
    })?;
    if args.limit.is_some() || args.qa {
        return Err(BenchError::option(
            "--format dev",
            "runs every question of every set, retrieval only (no --limit, no --qa)",
        ));
    }
    let part = |format: Format, data: PathBuf, granularity: Granularity| BenchArgs {
        format,
        data,
        granularity,
        out: None,
        markdown: None,
        lists: args.lists.clone(),
        ..args.clone()
    };
    let mut text = String::new();
    let mut reports = serde_json::Map::new();

    for (key, title, name, data) in [
        (
            "memories",
            "The memory set",
            MEMORY_SET_NAME,
            locomo::memory_set::COMMITTED,
        ),
        (
            "coding",
            "The coding-agent set",
            CODING_SET_NAME,
            locomo::memory_set::CODING,
        ),
    ] {
        let memories = part(Format::Memories, PathBuf::from(name), args.granularity);
        let set = locomo::memory_set::parse(data)?;
        let report = bench_samples(&memories, env, vec![set]).await?;
        text_push(&mut text, title, &locomo_markdown(&report));
        reports.insert(key.into(), serde_json::to_value(&report)?);
    }

    let report = bench_locomo(
        &part(Format::Locomo, args.data.clone(), args.granularity),
        env,
    )
    .await?;
    text_push(&mut text, "LoCoMo", &locomo_markdown(&report));
    reports.insert("locomo".into(), serde_json::to_value(&report)?);

    for granularity in [Granularity::Turn, Granularity::Session] {
        let name = format!("synthetic-{}", crate::report::name(&granularity));
        let report = bench(
            &part(Format::Longmemeval, synthetic.clone(), granularity),
            env,
        )
        .await?;
        text.push_str(&format!("## {name}\n\n{}\n", markdown(&report)));
        reports.insert(name, serde_json::to_value(&report)?);
    }
    if let Some(path) = &args.out {
        write(path, &serde_json::to_string_pretty(&reports)?)?;
    }
    if let Some(path) = &args.markdown {
        write(path, &text)?;
    }
    Ok(text)
}

/// How the committed memory sets are named in a dev run's report.
const MEMORY_SET_NAME: &str = "bench/tests/fixtures/personal_memories.json (built in)";
const CODING_SET_NAME: &str = "bench/tests/fixtures/coding_memories.json (built in)";

fn text_push(text: &mut String, title: &str, table: &str) {
    text.push_str(&format!("## {title}\n\n{table}\n"));
}

/// The provider cache file: `--cache`, else the default, none with `--no-cache`.
fn cache_path(args: &BenchArgs) -> Option<PathBuf> {
    match (&args.cache, args.no_cache) {
        (_, true) => None,
        (Some(path), false) => Some(path.clone()),
        (None, false) => Some(default_cache_path()),
    }
}

/// The engine's settings for a run: the tier's, with `--rerank-depth`. A reranker gets
/// all the time it needs: a benchmark must rank with it, never with the fallback.
fn engine_config(args: &BenchArgs, tier: Tier) -> Result<EngineConfig, BenchError> {
    let mut config = EngineConfig::default().with_tier(tier);
    if let Some(depth) = args.rerank_depth {
        if depth == 0 {
            return Err(BenchError::option("--rerank-depth", "must be at least 1"));
        }
        config.rerank_depth = depth;
    }
    match args.same_topic.as_deref() {
        None => {}
        Some("off") => config.same_topic = None,
        Some(text) => match text.parse::<f32>() {
            Ok(cosine) if (-1.0..=1.0).contains(&cosine) => config.same_topic = Some(cosine),
            _ => {
                return Err(BenchError::option(
                    "--same-topic",
                    "must be a cosine between -1 and 1, or off",
                ));
            }
        },
    }
    config.rerank_timeout = std::time::Duration::from_secs(3600);
    Ok(config)
}

/// The reranker of `CORTEX_RERANK_PROVIDER`, loaded when the `reranked` retriever is
/// asked for.
async fn reranker(
    args: &BenchArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<dyn Reranker>>, BenchError> {
    if !args.retriever.contains(&Retriever::Reranked) {
        return Ok(None);
    }
    let config = RerankerConfig::from_env_map(env)?.ok_or(BenchError::NoReranker)?;
    Ok(Some(config.build().await?))
}

/// The retrievers in the order given, each once.
fn dedup(retrievers: &[Retriever]) -> Vec<Retriever> {
    let mut out = Vec::new();
    for r in retrievers {
        if !out.contains(r) {
            out.push(*r);
        }
    }
    out
}

/// A bar on stderr; indicatif draws nothing when stderr is not a terminal.
fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} questions, eta {eta} {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| BenchError::Io {
        path: path.to_owned(),
        source,
    })
}
