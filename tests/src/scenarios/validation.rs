//! Bad input, bad vectors and the embedding signature guard: refused, nothing written.

use std::sync::Arc;

use cortex_core::{
    engine::CortexMemory, engine::EngineConfig, error::CortexError, error::EmbeddingProblem,
    memory::MemoryKind, store::MemoryStore,
};
use cortex_providers::FakeProvider;

use crate::StoreFactory;
use crate::support::{DIM, FixedVectorProvider, engine, remember_all, user};

/// A store written with one model refuses memorize and recall from another, naming both
/// signatures, while list, count and forget keep working.
pub async fn signature_guard_refuses_other_models(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let u = user("signature");
    let (first, _) = engine(store.clone());
    let kept = remember_all(&first, &u, &["written by model a", "second"]).await;

    for other in [
        FakeProvider::new(DIM).with_model("model-b"),
        FakeProvider::new(DIM * 2),
    ] {
        let other = Arc::new(other);
        let got_sig = cortex_core::provider::LLMProvider::embedding_signature(&other);
        let engine = CortexMemory::new(store.clone(), other.clone());
        for result in [
            engine
                .memorize(
                    &u,
                    "from model b",
                    MemoryKind::Note,
                    &[],
                    &Default::default(),
                )
                .await
                .map(|_| ()),
            engine.recall(&u, "model", 3).await.map(|_| ()),
        ] {
            match result {
                Err(CortexError::EmbeddingMismatch { stored, got }) => {
                    assert_eq!(stored.model, cortex_providers::fake::FAKE_MODEL);
                    assert_eq!(stored.dimension, DIM);
                    assert_eq!(got, got_sig);
                }
                other => panic!("expected EmbeddingMismatch, got {other:?}"),
            }
        }
        assert_eq!(
            other.embed_calls(),
            0,
            "a mismatched store costs no embed call"
        );
        assert_eq!(engine.count(&u).await.unwrap(), 2);
        assert_eq!(engine.list_memories(&u, 10).await.unwrap().len(), 2);
    }
    // The store itself refuses a foreign signature inside its write transaction.
    let foreign = cortex_core::signature::EmbeddingSignature::new("model-c", DIM);
    let new =
        cortex_core::new_memory::NewMemory::new(&u, "direct", MemoryKind::Note, &[], 1024).unwrap();
    assert!(matches!(
        store.add(&new, &vec![1.0; DIM], &foreign).await,
        Err(cortex_core::error::StoreError::SignatureMismatch { .. })
    ));
    let mismatched = CortexMemory::new(
        store.clone(),
        Arc::new(FakeProvider::new(DIM).with_model("b")),
    );
    mismatched
        .forget(&u, &kept[0].id.to_string())
        .await
        .unwrap();
    assert_eq!(mismatched.count(&u).await.unwrap(), 1);
}

/// Empty, wrong-dimension, NaN, infinite and all-zero vectors are refused before any write.
pub async fn bad_vectors_write_nothing(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let u = user("bad-vectors");
    let mut nan = vec![0.5; DIM];
    nan[3] = f32::NAN;
    let mut inf = vec![0.5; DIM];
    inf[DIM - 1] = f32::NEG_INFINITY;
    let cases: Vec<(Vec<f32>, EmbeddingProblem)> = vec![
        (vec![], EmbeddingProblem::Empty),
        (
            vec![1.0; DIM - 1],
            EmbeddingProblem::WrongDimension {
                expected: DIM,
                got: DIM - 1,
            },
        ),
        (nan, EmbeddingProblem::NonFinite { index: 3 }),
        (inf, EmbeddingProblem::NonFinite { index: DIM - 1 }),
        (vec![0.0; DIM], EmbeddingProblem::Zero),
    ];
    for (vector, problem) in cases {
        let engine = CortexMemory::new(
            store.clone(),
            Arc::new(FixedVectorProvider::new(DIM, vector)),
        );
        match engine
            .memorize(&u, "doomed", MemoryKind::Note, &[], &Default::default())
            .await
        {
            Err(CortexError::InvalidEmbedding(p)) => assert_eq!(p, problem),
            other => panic!("expected {problem:?}, got {other:?}"),
        }
        assert!(matches!(
            engine.recall(&u, "doomed", 3).await,
            Err(CortexError::InvalidEmbedding(_))
        ));
    }
    assert_eq!(store.count(&u).await.unwrap(), 0);
    assert!(
        store.signature().await.unwrap().is_none(),
        "no signature recorded"
    );
}

/// A failed embed call writes nothing.
pub async fn failed_embed_writes_nothing(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = engine(store.clone());
    let u = user("failed-embed");
    fake.set_fail_embeds(true);
    assert!(matches!(
        engine
            .memorize(
                &u,
                "never stored",
                MemoryKind::Fact,
                &[],
                &Default::default()
            )
            .await,
        Err(CortexError::Provider(_))
    ));
    assert!(matches!(
        engine.recall(&u, "never", 3).await,
        Err(CortexError::Provider(_))
    ));
    assert_eq!(store.count(&u).await.unwrap(), 0);
    assert!(store.signature().await.unwrap().is_none());
    fake.set_fail_embeds(false);
    remember_all(&engine, &u, &["stored after recovery"]).await;
    assert_eq!(store.count(&u).await.unwrap(), 1);
}

/// Empty content, bad tags, bad users and out-of-range limits are refused, naming the field,
/// with no provider call and nothing written.
pub async fn invalid_input_writes_nothing(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let (engine, fake) = engine(store.clone());
    let u = user("invalid");
    let field = |r: Result<cortex_core::engine::Memorized, CortexError>| match r {
        Err(CortexError::InvalidInput { field, .. }) => field,
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    assert_eq!(
        field(
            engine
                .memorize(&u, "", MemoryKind::Note, &[], &Default::default())
                .await
        ),
        "content"
    );
    assert_eq!(
        field(
            engine
                .memorize(&u, " \n\t ", MemoryKind::Note, &[], &Default::default())
                .await
        ),
        "content"
    );
    let too_many: Vec<String> = (0..17).map(|i| format!("t{i}")).collect();
    assert_eq!(
        field(
            engine
                .memorize(&u, "ok", MemoryKind::Note, &too_many, &Default::default())
                .await
        ),
        "tags"
    );
    assert_eq!(
        field(
            engine
                .memorize(
                    &u,
                    "ok",
                    MemoryKind::Note,
                    &["x".repeat(65)],
                    &Default::default()
                )
                .await
        ),
        "tags"
    );
    assert_eq!(
        field(
            engine
                .memorize(
                    &u,
                    "ok",
                    MemoryKind::Note,
                    &[" ".into()],
                    &Default::default()
                )
                .await
        ),
        "tags"
    );
    assert_eq!(
        field(
            engine
                .memorize("", "ok", MemoryKind::Note, &[], &Default::default())
                .await
        ),
        "user_id"
    );
    assert!(matches!(
        "opinion".parse::<MemoryKind>(),
        Err(CortexError::InvalidInput { field: "kind", .. })
    ));
    for bad_k in [0, 1001] {
        assert!(matches!(
            engine.recall(&u, "q", bad_k).await,
            Err(CortexError::InvalidInput { field: "top_k", .. })
        ));
    }
    assert!(matches!(
        engine.recall(&u, "   ", 3).await,
        Err(CortexError::InvalidInput { field: "query", .. })
    ));
    assert_eq!(fake.embed_calls(), 0, "refused before any provider call");
    assert_eq!(store.count(&u).await.unwrap(), 0);
}

/// Content of exactly the limit is stored; one byte more is refused.
pub async fn content_size_limit_is_exact(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = storage.connect().await;
    let u = user("size");
    for limit in [cortex_core::memory::DEFAULT_MAX_CONTENT_BYTES, 100] {
        let config = EngineConfig {
            max_content_bytes: limit,
            ..EngineConfig::default()
        };
        let engine =
            CortexMemory::with_config(store.clone(), Arc::new(FakeProvider::new(DIM)), config);
        // Multi-byte characters up to the limit: "é" is two bytes.
        let mut at_limit = "é".repeat(limit / 2 - 1);
        while at_limit.len() < limit {
            at_limit.push('x');
        }
        assert_eq!(at_limit.len(), limit);
        let stored = engine
            .memorize(&u, &at_limit, MemoryKind::Note, &[], &Default::default())
            .await
            .unwrap();
        assert_eq!(
            store
                .get(&u, &stored.memory.id)
                .await
                .unwrap()
                .unwrap()
                .content,
            at_limit
        );
        let over = format!("{at_limit}y");
        assert!(matches!(
            engine
                .memorize(&u, &over, MemoryKind::Note, &[], &Default::default())
                .await,
            Err(CortexError::InvalidInput {
                field: "content",
                ..
            })
        ));
    }
    assert_eq!(store.count(&u).await.unwrap(), 2);
}
