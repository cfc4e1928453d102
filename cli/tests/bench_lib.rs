//! The harness as a library: QA with scripted models, and backends that must agree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use cortex_cli::bench::backend::{Backend, BackendKind};
use cortex_cli::bench::dataset::{self, Question};
use cortex_cli::bench::ingest::{CorpusOptions, Granularity, Labels, Roles};
use cortex_cli::bench::qa::QaSettings;
use cortex_cli::bench::report::{QaSetup, RunConfig, summarize};
use cortex_cli::bench::retrieve::Retriever;
use cortex_cli::bench::{RunModels, RunOptions, run};
use cortex_core::{EngineConfig, LLMProvider};
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
