"""The tokenizer side of a model handle, shared by every engine that scores with a local
Hugging Face tokenizer: token counts and chat rendering (``TokenizerText``), and a causal LM's
tokenization rules (``CausalTokens``): how a (context, continuation) request splits into token
ids, which token an empty context stands for, which slot a causal LM can fill, which top tokens
are whole words. The transformers engine (models/engines/hf/causal.py) and the engines that score through prompt
log-probabilities (engines/prompt_logprobs.py) tokenize identically, so their numbers agree token
for token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bias_core.errors import AuditUsageError
from bias_core.models.batching import slot_split
from bias_core.probes.placeholders import MASK


def render_chat(text: str, tokenizer: Any) -> str:
    """What the model is given: the chat template for chat models, the plain prompt otherwise.

    A tokenizer with a ``chat_template`` gets one user turn and the generation prompt. When the
    template writes the BOS token itself and the tokenizer also adds BOS on encoding, the
    template's copy is dropped, so encoding with special tokens does not produce two BOS tokens.
    """
    if not getattr(tokenizer, "chat_template", None):
        return text
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True)
    bos = getattr(tokenizer, "bos_token", None)
    if bos and rendered.startswith(bos):
        probe = tokenizer("x", add_special_tokens=True)["input_ids"]
        if probe and probe[0] == tokenizer.bos_token_id:
            rendered = rendered[len(bos):]
    return rendered


class TokenizerText:
    """Needs ``self.tokenizer`` (a Hugging Face tokenizer)."""

    tokenizer: Any

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        if not len(texts):
            return []
        return [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]]

    def render_chat(self, text: str) -> str:
        return render_chat(text, self.tokenizer)


class CausalTokens(TokenizerText):
    """A causal LM's tokenization rules; needs ``self.tokenizer``, ``self.name``, ``self.max_length``."""

    name: str
    max_length: int

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=True)["input_ids"])

    def split_request(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Token ids of context and continuation, tokenized jointly (lm-eval's rule).

        Encoding the pair together and splitting at the context's length gives the continuation
        the token form it has in running text: " she" for byte-level BPE, "▁she" for
        SentencePiece. A word that is several tokens keeps all of them.
        """
        return self.split_requests([(context, continuation)])[0]

    def split_requests(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        """split_request for many pairs, with one batched tokenizer call per kind of text."""
        moved = []
        for context, continuation in pairs:
            n_space = len(context) - len(context.rstrip(" "))
            if n_space:  # trailing spaces belong to the continuation's first token
                context, continuation = context[:-n_space], context[-n_space:] + continuation
            moved.append((context, continuation))
        contexts = sorted({c for c, _ in moved})
        ctx_ids = dict(zip(contexts, self._encode_many(contexts)))
        wholes = self._encode_many([c + w for c, w in moved])
        out = []
        for (context, continuation), whole in zip(moved, wholes):
            ctx = ctx_ids[context]
            if whole[: len(ctx)] != ctx:  # a merge across the boundary: encode the parts apart
                out.append((ctx, list(self.tokenizer(continuation, add_special_tokens=False)["input_ids"])))
            else:
                out.append((ctx, whole[len(ctx) :]))
        return out

    def _encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        return [list(ids) for ids in self.tokenizer(list(texts), add_special_tokens=True)["input_ids"]]

    def _check_length(self, ids: Sequence[int], extra: int, text: str) -> None:
        if len(ids) + extra > self.max_length:
            raise AuditUsageError(
                f"prompt too long for {self.name}: {len(ids)} tokens + {extra} new > context of "
                f"{self.max_length} tokens. Prompt starts {text[:80]!r}. Fix: shorten the probe's "
                "prompts or lower the number of new tokens."
            )

    def prefix_token_id(self) -> int:
        """The token an empty context stands for: BOS whenever the tokenizer defines one, else EOS.

        lm-evaluation-harness's HFLM rule, kept for agreement with it: for a tokenizer that
        defines a BOS it never prepends (SmolLM2), the other choice (EOS) moved CrowS-Pairs
        log-likelihoods by up to 5.75 nats and changed 26 of 262 pair decisions.
        """
        tok = self.tokenizer
        if tok.bos_token_id is not None:
            return int(tok.bos_token_id)
        if tok.eos_token_id is None:
            raise AuditUsageError(
                f"{self.name}: the tokenizer neither prepends BOS nor defines EOS, so a sentence has no "
                "token to be scored after. Fix: use a tokenizer with a BOS or EOS token."
            )
        return int(tok.eos_token_id)

    def sentence_requests(self, sentences: Sequence[str]) -> list[tuple[list[int], list[int]]]:
        """(context, continuation) token ids scoring a whole sentence: the prefix token, then the
        sentence tokenized without special tokens (lm-evaluation-harness's empty-context rule)."""
        prefix = [self.prefix_token_id()] if len(sentences) else []
        requests = []
        for sentence in sentences:
            cont = list(self.tokenizer(sentence, add_special_tokens=False)["input_ids"])
            if not cont:
                raise AuditUsageError(f"sentence {sentence!r} has no tokens to score. Fix: drop empty sentences.")
            self._check_length(prefix + cont, 0, sentence)
            requests.append((prefix, cont))
        return requests

    def _prefix_of(self, text: str) -> str:
        before, after = slot_split(text)
        if after.strip():
            raise AuditUsageError(
                f"text {text[:80]!r}: a causal LM ({self.name}) can only fill a {MASK} at the end of the "
                f"text. Fix: end the prompt at {MASK}, or use a masked LM for mid-sentence slots."
            )
        prefix = before.rstrip(" ")
        if not prefix:
            raise AuditUsageError(f"text {text!r}: nothing before {MASK} to condition on. Fix: add a prompt.")
        return prefix

    def whole_word_test(self, prefix: str):
        """accept(token, word): does " word" after ``prefix`` tokenize to exactly that one token?"""
        return lambda t, word: self.split_request(prefix, " " + word)[1] == [t]
