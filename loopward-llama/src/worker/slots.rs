//! Which sequence slot a prompt goes to, and filling a batch.

use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use loopward_core::model::ModelError;

pub(super) fn add(
    batch: &mut LlamaBatch<'_>,
    tok: LlamaToken,
    pos: usize,
    seq: i32,
    logits: bool,
) -> Result<(), ModelError> {
    let pos = i32::try_from(pos)
        .map_err(|_| ModelError::Local(format!("token position {pos} is out of range")))?;
    batch
        .add(tok, pos, &[seq], logits)
        .map_err(|e| ModelError::Local(format!("could not fill a batch: {e}")))
}

/// Which free slot a prompt of `prompt_len` tokens goes to, given each free slot's common
/// prefix with it (`prefixes`) and when each was last used (`lru`): the one sharing the longest
/// prefix when that covers at least a tenth of the prompt, else the least recently used — so
/// agents that take turns on one model each keep their own conversation cached instead of
/// overwriting one slot that shares only the chat template's first tokens.
pub(super) fn pick_slot(
    prefixes: &[(usize, usize)],
    lru: &[(usize, u64)],
    prompt_len: usize,
) -> usize {
    let best = prefixes
        .iter()
        .copied()
        .max_by_key(|&(i, len)| (len, std::cmp::Reverse(i)));
    match best {
        Some((i, len)) if len > 0 && len * 10 >= prompt_len => i,
        _ => lru
            .iter()
            .copied()
            .min_by_key(|&(i, used)| (used, i))
            .map_or(0, |(i, _)| i),
    }
}

pub(super) fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_goes_to_the_slot_sharing_a_real_prefix_else_the_least_recently_used() {
        let lru = [(0, 3), (1, 0), (2, 2)];
        // Slot 2 shares half the prompt.
        assert_eq!(pick_slot(&[(0, 4), (1, 0), (2, 50)], &lru, 100), 2);
        // Only the template's first tokens in common: the least recently used (never) slot.
        assert_eq!(pick_slot(&[(0, 4), (1, 0), (2, 4)], &lru, 100), 1);
        // Ties on the prefix go to the lower slot.
        assert_eq!(pick_slot(&[(0, 40), (2, 40)], &[(0, 3), (2, 2)], 100), 0);
        assert_eq!(pick_slot(&[(1, 0)], &[(1, 9)], 100), 1);
    }
}
