"""Hand-written references for the causal-LM scoring surface: prompts and words that exercise
batching, and the same quantities computed directly with the Hugging Face model, one unpadded
sequence at a time, without bias_core's batching, caching or KV-cache decoding (tests/test_models.py,
test_devices.py, test_memory.py, test_models_masked.py)."""

from __future__ import annotations

import torch

from tolerances import Forward, longest_word_tokens

WORDS = ["she", "he", "her", "his", "nurses", "hairdresser"]

# Different token lengths, with some lengths shared so that batch size 16 really batches.
PROMPTS = [
    "My friend is a nurse, and",
    "My friend is a doctor, and",
    "My friend is a pilot, and",
    "My neighbour is a teacher, and",
    "My cousin is a dancer, and",
    "The person said that",
    "The man said",
    "The woman said",
    "Our colleague is an engineer, and",
    "My friend likes to read books, and",
    "She said",
    "He said",
    "My friend is a secretary and a mechanic, and",
    "The father and the mother said that",
    "The boy",
    "The girl",
    "My friend is a nurse, and she said that",
    "My neighbour said that the job is hard, and",
    "Our colleague, the pilot, said",
    "My cousin",
]


def word_bound(lm, prompts=PROMPTS, words=WORDS) -> float:
    """The fp32 bound (tests/tolerances.py) on a word's log-probability for these prompts."""
    return Forward.of(lm, prompts, words).word_logprob_atol(longest_word_tokens(lm, words))


def token_bound(lm, prompts=PROMPTS) -> float:
    """... on one token's log-probability (a greedy step's margin is compared with it)."""
    return Forward.of(lm, prompts).token_logprob_atol()


def ids_of(tokenizer, text: str, special: bool = True) -> list[int]:
    return list(tokenizer(text, add_special_tokens=special)["input_ids"])


def next_token_logits(model, ids: list[int]) -> torch.Tensor:
    """Raw last-position logits of one unpadded sequence, no mask, no cache."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids], device=model.device)).logits[0, -1].double()


def direct_word_prob(lm, prompt: str, word: str) -> float:
    """P(" word" | prompt) as the product of chained conditionals, one forward per token."""
    prompt_ids = ids_of(lm.engine.tokenizer, prompt)
    word_ids = ids_of(lm.engine.tokenizer, " " + word, special=False)
    prob = 1.0
    for k, tok in enumerate(word_ids):
        prob *= float(torch.softmax(next_token_logits(lm.engine.model, prompt_ids + word_ids[:k]), dim=-1)[tok])
    return prob


def direct_loglikelihood(lm, context: str, continuation: str) -> float:
    ctx = ids_of(lm.engine.tokenizer, context)
    cont = ids_of(lm.engine.tokenizer, continuation, special=False)
    with torch.no_grad():
        logits = lm.engine.model(input_ids=torch.tensor([ctx + cont], device=lm.engine.model.device)).logits[0].double()
    logprobs = torch.log_softmax(logits, dim=-1)
    return float(sum(logprobs[len(ctx) - 1 + k, tok] for k, tok in enumerate(cont)))


def direct_greedy_ids(model, ids: list[int], max_new_tokens: int, eos_id: int) -> list[int]:
    """Greedy decoding by full re-forward of the whole sequence at every step."""
    out: list[int] = []
    for _ in range(max_new_tokens):
        tok = int(next_token_logits(model, ids + out).argmax())
        if tok == eos_id:
            break
        out.append(tok)
    return out


class ForwardCounter:
    """Counts top-level forward passes of a model."""

    def __init__(self, model):
        self.calls = 0
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.calls += 1

    def reset(self) -> int:
        calls, self.calls = self.calls, 0
        return calls
