//! How an answer ends and repeats: stop strings, seeds, the token limit and a bounded answer.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_string_ends_the_answer_before_it() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048).stop("Paris"));
    let reply = model
        .oneshot(ask(
            vec![
                Message::system("You are a helpful assistant."),
                Message::human(Person::at_the_keyboard().says("What is the capital of France?")),
            ],
            vec![],
            24,
        ))
        .await
        .unwrap();
    assert_eq!(reply.content, "The capital of France is ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_sampling_repeats_itself_for_the_same_seed() {
    let config = LlamaConfig::new(model_path())
        .n_ctx(1024)
        .sampling(0.9, 0.95, 40, 7);
    let req = ask_person("Invent a name for a cat.", vec![], 16);
    let a = load(config.clone()).oneshot(req.clone()).await.unwrap();
    let b = load(config).oneshot(req).await.unwrap();
    assert_eq!(a.content, b.content);
    assert!(a.usage.output_tokens > 0);
}

/// A text answer that runs into max_tokens says so (the runner does not take it as an answer);
/// one that ends by itself is finished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_answer_cut_by_max_tokens_says_so() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024));
    let cut = model
        .clone()
        .oneshot(ask_person("Write a long story about a dragon.", vec![], 8))
        .await
        .unwrap();
    assert_eq!(cut.stop, StopReason::TokenLimit, "{cut:?}");
    assert_eq!(cut.usage.output_tokens, 8);
    let whole = load(LlamaConfig::new(model_path()).n_ctx(1024))
        .oneshot(ask_person("Say hi.", vec![], 64))
        .await
        .unwrap();
    assert_eq!(whole.stop, StopReason::Finished, "{whole:?}");
}

/// With bounded answers, the same rambling request ends by itself before its budget: one line of
/// printable ASCII, shorter than `max_tokens`, finished — with or without tools offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_answer_ends_before_its_budget_instead_of_being_cut_off() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024).answer_chars(200));
    for tools in [vec![], vec![Weather.spec()]] {
        let reply = model
            .clone()
            .oneshot(ask_person("Write a long story about a dragon.", tools, 64))
            .await
            .unwrap();
        assert_eq!(reply.stop, StopReason::Finished, "{reply:?}");
        if reply.tool_calls.is_empty() {
            assert!(reply.usage.output_tokens < 64, "{reply:?}");
            assert!(reply.content.len() <= 63, "{reply:?}");
            assert!(
                reply.content.chars().all(|c| (' '..='~').contains(&c)),
                "{reply:?}"
            );
        }
    }
}
