//! What a slot's tokens become: each token sampled (under the tool grammar when there is one),
//! stop strings, and the reply — an answer or tool calls — sent back to the job.

use super::*;

impl Engine<'_> {
    /// Samples slot `i`'s next token from the logits at batch index `at`.
    pub(super) fn sample(&mut self, i: usize, at: i32) -> Result<Next, ModelError> {
        let n_ctx = self.n_ctx;
        let vocab = self.model.vocab();
        let slot = &mut self.slots[i];
        let Some(a) = slot.job.as_mut() else {
            return Ok(Next::Done { cut_off: false });
        };
        if a.generated >= a.max_tokens {
            return Ok(Next::Done { cut_off: true });
        }
        let tok = if a.constrained {
            let mut candidates = self.ctx.token_data_array_ith(at);
            candidates.apply_sampler(&mut a.sampler);
            let Some(tok) = candidates.selected_token() else {
                return Err(ModelError::Local("the sampler selected no token".into()));
            };
            // Stop before accepting: a grammar that has completed must not see another token.
            if vocab.is_eog(tok) || a.sampler.try_accept(tok).is_err() {
                return Ok(Next::Done { cut_off: false });
            }
            tok
        } else {
            // Without a grammar, llama.cpp's own sample-and-accept (as a direct loop does).
            let tok = a.sampler.sample(&self.ctx, at);
            if vocab.is_eog(tok) {
                return Ok(Next::Done { cut_off: false });
            }
            tok
        };
        a.generated += 1;
        a.answer.extend(vocab.token_to_piece(tok, false, None));
        if let Some(cut) = stop_at(&a.answer, &self.config.stop) {
            a.answer.truncate(cut);
            return Ok(Next::Done { cut_off: false });
        }
        if slot.cached.len() + 1 >= n_ctx {
            return Err(ModelError::Local(format!(
                "the context of {n_ctx} tokens filled up after {} generated tokens (prompt {} \
                 tokens): raise n_ctx or lower max_tokens",
                a.generated,
                a.tokens.len()
            )));
        }
        a.decoded_text.extend(vocab.token_to_piece(tok, true, None));
        Ok(Next::Token(tok))
    }

    /// Answers slot `i`'s job with an error and frees the slot.
    pub(super) fn fail(&mut self, i: usize, e: ModelError) {
        if let Some(a) = self.slots[i].job.take() {
            let _ = a.job.reply.send(Err(e));
        }
    }

    /// Answers slot `i`'s finished job and frees the slot.
    pub(super) fn finish(&mut self, i: usize, cut_off: bool) {
        let Some(a) = self.slots[i].job.take() else {
            return;
        };
        let slot = &mut self.slots[i];
        if slot.cached.len() == a.tokens.len() + a.generated {
            if let Ok(gen) = String::from_utf8(a.decoded_text) {
                slot.cached_text = format!("{}{gen}", a.text);
            }
        }
        let result = self.reply(
            &a.job.request,
            &a.answer,
            a.tokens.len(),
            a.reused,
            a.generated,
            a.max_tokens,
            cut_off,
        );
        let _ = a.job.reply.send(result);
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn reply(
        &mut self,
        req: &ChatRequest,
        answer: &[u8],
        input: usize,
        reused: usize,
        generated: usize,
        max_tokens: usize,
        cut_off: bool,
    ) -> Result<ChatResponse, ModelError> {
        let answer = String::from_utf8_lossy(answer).into_owned();
        let usage = Usage {
            input_tokens: input as u64,
            output_tokens: generated as u64,
            cached_tokens: reused as u64,
            calls: 1,
        };
        match parse_reply(&answer, &req.tools) {
            Ok(Reply::Text(content)) => Ok(ChatResponse {
                content,
                tool_calls: vec![],
                usage,
                model: self.name.clone(),
                // Text that ran into max_tokens is unfinished: the runner does not take it as
                // an answer.
                stop: if cut_off {
                    StopReason::TokenLimit
                } else {
                    StopReason::Finished
                },
            }),
            Ok(Reply::Call { name, arguments }) => {
                self.calls_made += 1;
                let id = CallId::from(format!("call_{}", self.calls_made));
                self.remember_raw(&id, answer.trim().to_owned());
                Ok(ChatResponse {
                    content: String::new(),
                    tool_calls: vec![ToolCall::new(id, name, arguments)],
                    usage,
                    model: self.name.clone(),
                    stop: StopReason::Finished,
                })
            }
            // Never a half call: the request fails as a whole and the model stays usable (the
            // next request re-prefills from where its prompt differs).
            Err(_) if cut_off => Err(ModelError::InvalidResponse(format!(
                "the model's tool call was cut off at max_tokens ({max_tokens}) before it \
                 was complete, so nothing was called: raise max_tokens, or lower the \
                 argument bounds (LlamaConfig::argument_bounds) or the tool's maxLength"
            ))),
            Err(e) => Err(e),
        }
    }

    /// The prompt's tokens for slot `i`, keeping its cached ids verbatim when the prompt extends
    /// the text they came from (re-tokenising an earlier answer may not give the sampled ids
    /// back). `None` when it does not.
    pub(super) fn tokenize_for(&self, i: usize, text: &str) -> Option<Vec<LlamaToken>> {
        let slot = &self.slots[i];
        if slot.cached_text.is_empty() {
            return None;
        }
        let rest = text.strip_prefix(slot.cached_text.as_str())?;
        let mut tokens = slot.cached.clone();
        tokens.extend(self.model.vocab().tokenize(rest.as_bytes(), false, true));
        Some(tokens)
    }

    /// The prompt's tokens from scratch (the same `add_special` choice every time).
    pub(super) fn tokenize_plain(&self, text: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let bos =
            String::from_utf8_lossy(&vocab.token_to_piece(vocab.bos(), true, None)).into_owned();
        let add_bos = vocab.should_add_bos() && (bos.is_empty() || !text.starts_with(&bos));
        vocab.tokenize(text.as_bytes(), add_bos, true)
    }

    pub(super) fn sampler(&self, grammar: Option<&str>) -> Result<LlamaSampler, ModelError> {
        let mut chain = Vec::new();
        if let Some(gbnf) = grammar {
            chain.push(
                LlamaSampler::grammar(self.model, gbnf, "root").map_err(|e| {
                    ModelError::Local(format!("llama.cpp rejected the tool-call grammar: {e}"))
                })?,
            );
        }
        let c = &self.config;
        if c.temperature <= 0.0 {
            chain.push(LlamaSampler::greedy());
        } else {
            if c.top_k > 0 {
                chain.push(LlamaSampler::top_k(
                    i32::try_from(c.top_k).unwrap_or(i32::MAX),
                ));
            }
            if c.top_p < 1.0 {
                chain.push(LlamaSampler::top_p(c.top_p, 1));
            }
            chain.push(LlamaSampler::temp(c.temperature));
            chain.push(LlamaSampler::dist(c.seed));
        }
        Ok(if chain.len() == 1 {
            chain.pop().expect("one sampler")
        } else {
            LlamaSampler::chain_simple(chain)
        })
    }

    pub(super) fn remember_raw(&mut self, id: &CallId, raw: String) {
        self.raw_calls.insert(id.clone(), raw);
        self.raw_order.push_back(id.clone());
        while self.raw_order.len() > RAW_CALLS_KEPT {
            if let Some(old) = self.raw_order.pop_front() {
                self.raw_calls.remove(&old);
            }
        }
    }
}

/// Where the first stop string starts in `answer`, if any.
pub(super) fn stop_at(answer: &[u8], stops: &[String]) -> Option<usize> {
    stops
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| answer.windows(s.len()).position(|w| w == s.as_bytes()))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_cut_at_the_earliest_match() {
        let stops = vec!["END".to_owned(), "\n\n".to_owned()];
        assert_eq!(stop_at(b"one\n\ntwo END", &stops), Some(3));
        assert_eq!(stop_at(b"no stop here", &stops), None);
    }
}
