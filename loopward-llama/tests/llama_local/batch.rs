//! The prompt cache and the shared batch: only new tokens prefilled, concurrent requests each
//! with its own cache, more requests than slots waiting their turn.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_turn_prefills_only_the_new_tokens() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(2048));
    let mut messages = vec![
        Message::system("You are a helpful assistant."),
        Message::human(Person::at_the_keyboard().says("What is the capital of France?")),
    ];
    let first = model
        .clone()
        .oneshot(ask(messages.clone(), vec![], 24))
        .await
        .unwrap();
    assert!(first.content.contains("Paris"), "{first:?}");
    assert_eq!(first.usage.cached_tokens, 0);
    let first_prompt = first.usage.input_tokens;

    messages.push(Message::model(first.content.clone(), vec![]));
    messages.push(Message::human(
        Person::at_the_keyboard().says("And of Germany?"),
    ));
    let second = model
        .clone()
        .oneshot(ask(messages, vec![], 24))
        .await
        .unwrap();
    let prefilled = second.usage.input_tokens - second.usage.cached_tokens;
    // The cache holds the first prompt and every generated token but the end-of-turn marker.
    assert!(
        second.usage.cached_tokens >= first_prompt + first.usage.output_tokens,
        "first {:?}, second {:?}",
        first.usage,
        second.usage
    );
    // The new part: end-of-turn, "<|im_start|>user\nAnd of Germany?<|im_end|>\n<|im_start|>assistant\n".
    assert!(prefilled <= 16, "prefilled {prefilled}: {:?}", second.usage);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_decoding_is_deterministic_and_a_repeated_prompt_reuses_all_but_one_token() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024));
    let req = ask_person("Name a colour.", vec![], 12);
    assert_eq!(model.decode_time(), std::time::Duration::ZERO);
    let started = std::time::Instant::now();
    let a = model.clone().oneshot(req.clone()).await.unwrap();
    let first = model.decode_time();
    assert!(
        first > std::time::Duration::ZERO && first < started.elapsed(),
        "decode time {first:?} is spent within the request's wall time"
    );
    let b = model.clone().oneshot(req).await.unwrap();
    assert!(
        model.decode_time() > first,
        "the second request decodes too"
    );
    assert_eq!(a.content, b.content);
    assert_eq!(b.usage.cached_tokens, b.usage.input_tokens - 1);
}

/// Four runs on one model with four sequence slots: their requests are decoded together in one
/// batch, each is answered, and each keeps its own KV region: asked again, every request reuses
/// all but one token of its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_batch_and_each_keeps_its_own_cache() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(1024).parallel(4));
    let request = |k: usize| {
        ask(
            vec![
                Message::system(format!("You are assistant number {k}. Answer briefly.")),
                Message::human(Person::at_the_keyboard().says("What is the capital of France?")),
            ],
            vec![],
            24,
        )
    };
    for round in 0..2 {
        let replies =
            futures::future::try_join_all((0..4).map(|k| model.clone().oneshot(request(k))))
                .await
                .unwrap();
        for (k, r) in replies.iter().enumerate() {
            assert!(
                !r.content.trim().is_empty() && r.usage.output_tokens > 0,
                "round {round}, run {k}: {r:?}"
            );
            if round == 1 {
                assert_eq!(
                    r.usage.cached_tokens + 1,
                    r.usage.input_tokens,
                    "run {k} did not find its own prompt in its slot: {:?}",
                    r.usage
                );
            }
        }
    }
    assert!(
        model.peak_batched_requests() >= 3,
        "at most {} requests were decoded together",
        model.peak_batched_requests()
    );
}

/// More requests than slots: the rest wait their turn and every one is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_requests_than_slots_wait_their_turn() {
    let model = load(LlamaConfig::new(model_path()).n_ctx(512).parallel(2));
    let replies = futures::future::try_join_all((0..5).map(|k| {
        model
            .clone()
            .oneshot(ask_person(format!("Say the number {k}."), vec![], 8))
    }))
    .await
    .unwrap();
    assert_eq!(replies.len(), 5);
    assert!(
        replies.iter().all(|r| r.usage.output_tokens > 0),
        "{replies:?}"
    );
    assert_eq!(model.peak_batched_requests(), 2);
}
