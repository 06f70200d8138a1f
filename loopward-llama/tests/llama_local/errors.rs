//! Errors a user can hit: a missing or foreign model file, a full context, a dropped request.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_model_file_is_a_clear_error() {
    let err = LlamaModel::load(LlamaConfig::new("models/no-such-model.gguf")).unwrap_err();
    assert!(matches!(err, ModelError::Local(_)));
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_is_not_gguf_is_refused_before_llama_cpp_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weights.gguf");
    std::fs::write(&path, "<html>404 Not Found</html>").unwrap();
    let err = LlamaModel::load(LlamaConfig::new(&path)).unwrap_err();
    assert!(err.to_string().contains("is not a GGUF model"), "{err}");
    std::fs::write(&path, "GG").unwrap();
    let err = LlamaModel::load(LlamaConfig::new(&path)).unwrap_err();
    assert!(err.to_string().contains("is not a GGUF model"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_context_is_an_error_and_the_model_still_answers_after() {
    // llama.cpp rounds the context up to a multiple of 256.
    let model = load(LlamaConfig::new(model_path()).n_ctx(256));
    let long = "word ".repeat(400);
    let err = model
        .clone()
        .oneshot(ask_person(long, vec![], 8))
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Local(_)));
    assert!(
        err.to_string()
            .contains("but the context holds 256: raise n_ctx"),
        "{err}"
    );
    let ok: ChatResponse = model.oneshot(ask_person("Hi", vec![], 4)).await.unwrap();
    assert!(ok.usage.output_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_that_fills_the_context_is_an_error() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(256));
    let filler = "Once upon a time. ".repeat(35);
    let err = model
        .oneshot(ask_person(
            format!("{filler}Write a long story about a dragon."),
            vec![],
            500,
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("filled up"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_request_stops_and_the_next_one_is_served() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048));
    let long = ask_person("Write a long story about a dragon.", vec![], 2000);
    let pending = model.clone().oneshot(long);
    // Poll once so the job is queued, then drop it.
    let raced = tokio::time::timeout(std::time::Duration::ZERO, pending).await;
    assert!(raced.is_err(), "the long job cannot have finished already");
    let next = model
        .clone()
        .oneshot(ask_person("Say hi.", vec![], 8))
        .await
        .unwrap();
    assert!(next.usage.output_tokens > 0);
    assert_eq!(model.cancelled_jobs(), 1);
}
