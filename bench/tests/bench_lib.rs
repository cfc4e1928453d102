//! The harness as a library: QA with scripted models, and backends that must agree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use cortex_bench::backend::{Backend, BackendKind};
use cortex_bench::dataset::{self, Question};
use cortex_bench::error::BenchError;
use cortex_bench::ingest::{CorpusOptions, Granularity, Labels, Roles};
use cortex_bench::longmemeval::{RunModels, RunOptions, run};
use cortex_bench::qa::QaSettings;
use cortex_bench::report::{QaSetup, RunConfig, summarize};
use cortex_bench::retrieve::Retriever;
use cortex_core::{
    engine::EngineConfig, error::ProviderError, provider::LLMProvider, reranker::RerankHit,
    reranker::Reranker,
};
use cortex_providers::FakeProvider;

fn questions() -> Vec<Question> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/longmemeval_mini.json");
    dataset::load(&path).unwrap()
}

fn options(granularity: Granularity, retrievers: Vec<Retriever>) -> RunOptions {
    RunOptions {
        corpus: CorpusOptions {
            granularity,
            roles: Roles::User,
            labels: Labels::Official,
            max_bytes: EngineConfig::default().max_content_bytes,
        },
        depth: 20,
        retrievers,
        engine: EngineConfig::default(),
        lists: None,
    }
}

fn config(options: &RunOptions, backend: BackendKind) -> RunConfig {
    RunConfig {
        dataset: "mini".into(),
        granularity: options.corpus.granularity,
        roles: options.corpus.roles,
        labels: options.corpus.labels,
        backend,
        depth: options.depth,
        ks: vec![1, 3, 5, 10],
        retrievers: options.retrievers.clone(),
        embedding_model: "fake-hash".into(),
        embedding_dimension: 64,
        tier: "cheap".into(),
        limit: None,
    }
}

#[tokio::test]
async fn qa_reads_judges_and_scores_abstention_separately() {
    let all = questions();
    // One answerable question and the abstention one.
    let picked: Vec<Question> = all
        .iter()
        .filter(|q| q.question_id == "mini_ssu_01" || q.question_id.ends_with("_abs"))
        .cloned()
        .collect();
    assert_eq!(picked.len(), 2);
    // Reader and judge share one scripted queue: reader, judge, reader, judge.
    let llm = Arc::new(FakeProvider::new(64));
    llm.push_answer("ANSWER: A Shiba Inu\nNOTES:\n- [1] adopted a Shiba Inu named Kuma");
    llm.push_answer("yes");
    llm.push_answer("ANSWER: I don't know\nNOTES:\n- no memory mentions a cat");
    llm.push_answer("Yes.");
    let shared: Arc<dyn LLMProvider> = llm.clone();
    let options = options(
        Granularity::Session,
        vec![Retriever::Hybrid, Retriever::Bm25],
    );
    let models = RunModels {
        embedder: Arc::new(FakeProvider::new(64)),
        warm: false,
        qa: Some(QaSettings {
            reader: shared.clone(),
            judge: shared,
            reader_model: "scripted".into(),
            judge_model: "scripted".into(),
            reader_k: 3,
            reader_max_tokens: 256,
            judge_max_tokens: 16,
        }),
        reranker: None,
    };
    let backend = Backend::open(BackendKind::Memory).await.unwrap();
    let mut seen = Vec::new();
    let output = run(&picked, &options, &models, &backend, &mut |q| {
        seen.push(q.question_id.clone())
    })
    .await
    .unwrap();
    assert_eq!(seen, ["mini_ssu_01", "mini_ssu_11_abs"]);
    assert_eq!(llm.generate_calls(), 4);

    let answered = &output.results[0];
    let qa = answered.qa.as_ref().unwrap();
    assert_eq!(qa.hypothesis, "A Shiba Inu");
    assert!(qa.correct && !qa.abstained);
    assert_eq!(answered.retrieval.len(), 2);

    let abstained = &output.results[1];
    assert!(abstained.abstention);
    assert!(abstained.retrieval.is_empty(), "not scored for retrieval");
    let qa = abstained.qa.as_ref().unwrap();
    assert!(qa.abstained && qa.correct);
    assert_eq!(output.usage["fake"].generate_calls, 4);

    let setup = QaSetup {
        retriever: Retriever::Hybrid,
        reader_model: "scripted".into(),
        judge_model: "scripted".into(),
        reader_k: 3,
        reader_max_tokens: 256,
    };
    let (counts, retrieval, qa) = summarize(
        &config(&options, BackendKind::Memory),
        &output.results,
        Some(&setup),
    );
    assert_eq!((counts.evaluated, counts.skipped_abstention), (1, 1));
    assert_eq!(retrieval[&Retriever::Bm25].overall.questions, 1);
    let qa = qa.unwrap();
    assert_eq!((qa.overall.questions, qa.overall.correct), (2, 2));
    assert_eq!((qa.abstention.questions, qa.abstention.accuracy), (1, 1.0));
    assert_eq!(qa.by_type["single-session-user"].questions, 2);
}

#[tokio::test]
async fn a_failing_reader_fails_the_run_naming_the_question() {
    let picked: Vec<Question> = questions().into_iter().take(1).collect();
    let llm: Arc<dyn LLMProvider> = Arc::new(FakeProvider::new(64)); // nothing scripted
    let models = RunModels {
        embedder: Arc::new(FakeProvider::new(64)),
        warm: false,
        qa: Some(QaSettings {
            reader: llm.clone(),
            judge: llm,
            reader_model: "scripted".into(),
            judge_model: "scripted".into(),
            reader_k: 3,
            reader_max_tokens: 256,
            judge_max_tokens: 16,
        }),
        reranker: None,
    };
    let backend = Backend::open(BackendKind::Memory).await.unwrap();
    let err = run(
        &picked,
        &options(Granularity::Turn, vec![Retriever::Dense]),
        &models,
        &backend,
        &mut |_| {},
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("mini_ssu_01"), "{err}");
}

#[tokio::test]
async fn memory_and_sqlite_backends_score_identically() {
    let qs = questions();
    let retrievers = vec![Retriever::Hybrid, Retriever::Dense, Retriever::Bm25];
    for granularity in [Granularity::Turn, Granularity::Session] {
        let options = options(granularity, retrievers.clone());
        let mut scored = Vec::new();
        for kind in [BackendKind::Memory, BackendKind::Sqlite] {
            let models = RunModels {
                embedder: Arc::new(FakeProvider::new(64)),
                warm: false,
                qa: None,
                reranker: None,
            };
            let backend = Backend::open(kind).await.unwrap();
            let output = run(&qs, &options, &models, &backend, &mut |_| {})
                .await
                .unwrap();
            let (_, retrieval, _) = summarize(&config(&options, kind), &output.results, None);
            let per_question: Vec<_> = output
                .results
                .iter()
                .map(|r| (r.question_id.clone(), r.retrieval.clone()))
                .collect();
            scored.push((retrieval, per_question));
        }
        assert_eq!(scored[0], scored[1], "{granularity:?}");
    }
}

#[tokio::test]
async fn the_ablations_are_the_two_lists_hybrid_fuses() {
    // RRF: whatever hybrid ranks above the gold session is ahead of it in the dense or
    // the BM25 list, so its hybrid position is at most the sum of its two positions.
    let qs: Vec<Question> = questions().into_iter().take(10).collect();
    let options = options(
        Granularity::Session,
        vec![Retriever::Hybrid, Retriever::Dense, Retriever::Bm25],
    );
    let models = RunModels {
        embedder: Arc::new(FakeProvider::new(64)),
        warm: false,
        qa: None,
        reranker: None,
    };
    let backend = Backend::open(BackendKind::Memory).await.unwrap();
    let output = run(&qs, &options, &models, &backend, &mut |_| {})
        .await
        .unwrap();
    for r in &output.results {
        let first_gold = |retriever: Retriever| {
            r.retrieval[&retriever]
                .top_sessions
                .iter()
                .position(|s| r.gold.contains(s))
                .unwrap_or(usize::MAX)
        };
        if r.gold.is_empty() {
            continue;
        }
        let (h, d, b) = (
            first_gold(Retriever::Hybrid),
            first_gold(Retriever::Dense),
            first_gold(Retriever::Bm25),
        );
        assert!(
            h <= d.saturating_add(b),
            "{}: hybrid {h}, dense {d}, bm25 {b}",
            r.question_id
        );
        assert!(
            h < usize::MAX,
            "{}: hybrid finds every session",
            r.question_id
        );
    }
}

/// Keeps the fused order (`score = -index`), or fails every call.
#[derive(Debug)]
struct ScriptedReranker {
    fail: bool,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Reranker for ScriptedReranker {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn rerank(
        &self,
        _query: &str,
        documents: &[String],
        top_n: usize,
    ) -> Result<Vec<RerankHit>, ProviderError> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.fail {
            return Err(ProviderError::Config("scripted failure".into()));
        }
        Ok((0..documents.len().min(top_n))
            .map(|index| RerankHit {
                index,
                score: -(index as f64),
            })
            .collect())
    }
}

#[tokio::test]
async fn the_reranked_retriever_recalls_through_the_reranker_and_never_reports_a_fallback() {
    let qs: Vec<Question> = questions().into_iter().take(6).collect();
    let options = options(
        Granularity::Session,
        vec![Retriever::Hybrid, Retriever::Reranked],
    );
    let keeping = Arc::new(ScriptedReranker {
        fail: false,
        calls: Default::default(),
    });
    let models = RunModels {
        embedder: Arc::new(FakeProvider::new(64)),
        warm: false,
        qa: None,
        reranker: Some(keeping.clone()),
    };
    let backend = Backend::open(BackendKind::Memory).await.unwrap();
    let output = run(&qs, &options, &models, &backend, &mut |_| {})
        .await
        .unwrap();
    let scored: Vec<_> = output.results.iter().filter(|r| !r.abstention).collect();
    assert!(!scored.is_empty());
    for r in &scored {
        // A reranker that keeps the fused order returns the fused list.
        assert_eq!(
            r.retrieval[&Retriever::Reranked].top_sessions,
            r.retrieval[&Retriever::Hybrid].top_sessions,
            "{}",
            r.question_id
        );
    }
    assert_eq!(
        keeping.calls.load(std::sync::atomic::Ordering::Relaxed),
        scored.len(),
        "one rerank call per scored question"
    );

    // A failing reranker would leave the fused order under the reranker's name.
    let failing = RunModels {
        reranker: Some(Arc::new(ScriptedReranker {
            fail: true,
            calls: Default::default(),
        })),
        ..models
    };
    let backend = Backend::open(BackendKind::Memory).await.unwrap();
    let err = run(&qs, &options, &failing, &backend, &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, BenchError::RerankFailed(_)), "{err}");

    // Asked for without a reranker, the retriever refuses to run.
    let none = RunModels {
        reranker: None,
        ..failing
    };
    let backend = Backend::open(BackendKind::Memory).await.unwrap();
    let err = run(&qs, &options, &none, &backend, &mut |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, BenchError::NoReranker), "{err}");
}
