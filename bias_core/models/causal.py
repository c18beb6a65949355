"""The scoring surface of a causal LM: word-set probabilities, log-likelihoods, generation.

In the spirit of lm-evaluation-harness's ``LM`` API. Batching, padding, dtype and device are
this module's business alone, and results do not depend on the batch size. Padding is the
usual culprit (lm-eval issues #1645, #879): masked attention over a different number of pad
keys sums in another order and moved probabilities by ~5e-5 here. So every sequence is left
padded to a width fixed by its own length alone (the next multiple of PAD_MULTIPLE for
scoring, GEN_PAD_MULTIPLE for generation) and a batch only holds sequences of one width: a row
is computed the same way whatever it is batched with, and batch 1 agrees with batch 32 to ~1e-6.
Scores always come from raw logits (log-softmax in float32), never from a temperature/top-p-warped
sampling distribution.

sentence_logprob, fill_probs, topk_fills and embed are the scoring protocol every model kind
exposes (masked.py holds the masked-LM and BART side; models/protocol.py types it); their
batching, padding and caching helpers live in models/batching.py, shared by both.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np
import torch

from bias_core.cache import ResultCache
from bias_core.errors import AuditUsageError
from bias_core.models.batching import (  # noqa: F401 - re-exported: half.py, mitigation and tests import them from here
    GEN_PAD_MULTIPLE,
    LOGIT_BUDGET,
    PAD_MULTIPLE,
    cached_map,
    finite_rows,
    left_pad,
    non_finite,
    padded_width,
    result_key,
    slot_split,
    top_whole_words,
    width_batches,
)
from bias_core.placeholders import MASK
from bias_core.progress import progress_bar


@dataclass(frozen=True)
class DecodingConfig:
    """How continuations are decoded. Greedy unless do_sample."""

    max_new_tokens: int = 50
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0

    def as_key(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("max_new_tokens", "do_sample", "temperature", "top_p", "top_k")}


@dataclass
class CausalLM:
    model: Any
    tokenizer: Any
    name: str
    fingerprint: str
    tokenizer_fingerprint: str
    batch_size: int = 32
    cache: ResultCache = field(default_factory=lambda: ResultCache(None, enabled=False))
    progress: bool = True
    load_notes: tuple[str, ...] = ()  # what loading chose or dropped, for the run card (models/load_report.py)
    weights_sha256: str = ""  # hash of the weight files verified at load (integrity.py)
    # GPU throughput settings (models/memory.py); the defaults are the CPU behaviour.
    plan: Any = None  # a BatchPlan: rows per pass also capped by what fits in memory at each width
    compact_fraction: float = 0.0  # share of finished rows at which a decoding batch drops them
    kind: ClassVar[str] = "causal"
    mask_token: ClassVar[str] = MASK

    def __post_init__(self) -> None:
        tok = self.tokenizer
        tok.padding_side = "left"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self.device = next(self.model.parameters()).device
        self.model.eval()
        params = inspect.signature(self.model.forward).parameters
        self._takes_position_ids = "position_ids" in params
        self._takes_logits_to_keep = "logits_to_keep" in params
        self.max_length = int(getattr(self.model.config, "max_position_embeddings", 0) or 2048)
        eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos_ids = set(eos if isinstance(eos, list) else [eos]) | {tok.eos_token_id}
        self.eos_ids = sorted(i for i in eos_ids if i is not None)
        # Work done by the network, for throughput figures: real (non-pad) tokens through the
        # body, positions through the output projection, and pad tokens computed in vain.
        self.stats = {"body_tokens": 0, "head_positions": 0, "pad_tokens": 0, "new_tokens": 0}

    # ----- keys -------------------------------------------------------------------------------
    def _key(self, op: str, **parts: Any) -> dict[str, Any]:
        return result_key(self, op, **parts)

    # ----- tokenization -----------------------------------------------------------------------
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

    # ----- batched forward ---------------------------------------------------------------------
    def _left_pad(self, seqs: Sequence[Sequence[int]], multiple: int = PAD_MULTIPLE) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return left_pad(seqs, self.tokenizer.pad_token_id, self.device, multiple)

    def _batches(self, seqs: Sequence[Sequence[int]], multiple: int = PAD_MULTIPLE, new_tokens: int = 0) -> list[list[int]]:
        """Indices of seqs grouped into batches of one padded width, longest first, at most
        batch_size (and, with a plan, what fits with ``new_tokens`` more per row)."""
        rows_for = None if self.plan is None else (lambda width: self.plan.rows(width + new_tokens))
        return width_batches([len(s) for s in seqs], self.batch_size, multiple, rows_for)

    def _forward(self, ids, mask, positions, keep: int = 0, past=None):
        # The mask is passed even when all ones, so every row takes the same attention kernel.
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "use_cache": past is not None}
        if self._takes_position_ids:
            kwargs["position_ids"] = positions
        if self._takes_logits_to_keep and keep:
            kwargs["logits_to_keep"] = keep
        if past is not None:
            kwargs["past_key_values"] = past
        return self.model(**kwargs)

    def _score_tokens(self, requests: Sequence[tuple[list[int], list[int]]], desc: str) -> list[float]:
        """Sum of log P(cont | ctx) for token-id requests.

        Each distinct context is run once; every continuation's first token is read from that
        pass. Continuations of several tokens then run only their own tokens on top of the
        context's KV cache (grouped by length, so no padding enters), instead of re-running the
        whole prompt per word.
        """
        by_ctx: dict[tuple[int, ...], list[int]] = {}
        for r, (ctx, cont) in enumerate(requests):
            if not cont:
                raise ValueError("empty continuation")
            by_ctx.setdefault(tuple(ctx), []).append(r)
        ctxs = list(by_ctx)
        scores = [0.0] * len(requests)
        bar = progress_bar(total=len(ctxs), desc=desc, enabled=self.progress)
        with torch.inference_mode():
            for idx in self._batches(ctxs):
                batch = [ctxs[i] for i in idx]
                ids, mask, positions = self._left_pad(batch)
                longer = [(row, r) for row, c in enumerate(batch) for r in by_ctx[c] if len(requests[r][1]) > 1]
                real = int(mask.sum())
                self.stats["body_tokens"] += real
                self.stats["pad_tokens"] += mask.numel() - real
                self.stats["head_positions"] += len(batch)
                out = self._forward(ids, mask, positions, keep=1, past=_new_cache() if longer else None)
                first = torch.log_softmax(out.logits[:, -1, :].float(), dim=-1)
                # One gather and one device-to-host copy per batch (a read per request would
                # wait on the GPU once per word).
                reads = [(row, r) for row, c in enumerate(batch) for r in by_ctx[c]]
                at = torch.tensor([[row, requests[r][1][0]] for row, r in reads], device=first.device)
                for (_, r), value in zip(reads, first[at[:, 0], at[:, 1]].tolist()):
                    scores[r] = value
                if longer:
                    self._score_extensions(requests, longer, out.past_key_values, mask, positions, scores)
                bar.update(len(batch))
        bar.close()
        for r, score in enumerate(scores):
            if not math.isfinite(score):
                ctx, cont = requests[r]
                raise non_finite(self, desc, self.tokenizer.decode(list(ctx) + list(cont), skip_special_tokens=True))
        return scores

    def _score_extensions(self, requests, longer, past, mask, positions, scores) -> None:
        by_len: dict[int, list[tuple[int, int]]] = {}
        for row, r in longer:
            by_len.setdefault(len(requests[r][1]), []).append((row, r))
        for k, items in sorted(by_len.items()):
            # A word's extension is a token or two, so many rows fit in one pass (the pass costs a
            # read of all weights whatever its row count). Whole sentences scored after the prefix
            # token are long: their logits (rows x tokens x vocabulary) are capped at LOGIT_BUDGET
            # floats, or 1,024 rows of 20 tokens would hold ~8 GB of logits and log-probabilities.
            vocab = int(self.model.config.vocab_size)
            rows_per_pass = max(1, min(self.batch_size * 8, LOGIT_BUDGET // ((k - 1) * vocab)))
            if self.plan is not None:
                rows_per_pass = min(rows_per_pass, self.plan.rows(mask.shape[1] + k - 1))
            for start in range(0, len(items), rows_per_pass):
                chunk = items[start : start + rows_per_pass]
                rows = torch.tensor([row for row, _ in chunk], device=mask.device)
                cache = cache_rows(past, rows)
                ext = torch.tensor([requests[r][1][:-1] for _, r in chunk], device=mask.device)
                ext_mask = torch.cat([mask[rows], torch.ones_like(ext)], dim=1)
                ext_pos = positions[rows, -1:] + torch.arange(1, k, device=mask.device)
                logits = self._forward(ext, ext_mask, ext_pos, keep=k - 1, past=cache).logits[:, -(k - 1) :, :]
                self.stats["body_tokens"] += ext.numel()
                self.stats["head_positions"] += ext.numel()
                logprobs = torch.log_softmax(logits.float(), dim=-1)
                targets = torch.tensor([requests[r][1][1:] for _, r in chunk], device=logprobs.device)
                # Summed per row on the host, in token order, as one row's k-1 values.
                picked = logprobs.gather(2, targets[:, :, None])[:, :, 0].cpu()
                for j, (_, r) in enumerate(chunk):
                    scores[r] += float(picked[j].sum())

    # ----- public API -------------------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = "scoring") -> list[float]:
        """log P(continuation | context) for each (context, continuation), cached per request."""
        def compute(idx: list[int]) -> list[float]:
            toks = self.split_requests([requests[i] for i in idx])
            for i, (ctx_ids, cont_ids) in zip(idx, toks):
                self._check_length(ctx_ids + cont_ids, 0, requests[i][0])
            return self._score_tokens(toks, desc)

        keys = [self._key("loglikelihood", context=ctx, continuation=cont) for ctx, cont in requests]
        return [float(x) for x in cached_map(self.cache, keys, compute)]

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = "word probabilities") -> np.ndarray:
        """P(word is the next word after prompt), shape (len(prompts), len(words)).

        Each word is scored as the continuation " word" (leading space, as in running text); a
        word of several tokens gets the product of its tokens' conditional probabilities.
        """
        words = list(words)

        def compute(idx: list[int]) -> list[list[float]]:
            owners = [(i, j) for i in idx for j in range(len(words))]
            requests = self.split_requests([(prompts[i], " " + words[j]) for i, j in owners])
            for (i, _), (ctx_ids, cont_ids) in zip(owners, requests):
                self._check_length(ctx_ids + cont_ids, 0, prompts[i])
            rows = {i: np.zeros(len(words), dtype=np.float64) for i in idx}
            for (i, j), score in zip(owners, self._score_tokens(requests, desc)):
                rows[i][j] = float(np.exp(score))
            return [rows[i].tolist() for i in idx]

        keys = [self._key("word_probs", prompt=prompt, words=words) for prompt in prompts]
        result = np.zeros((len(prompts), len(words)), dtype=np.float64)
        for i, row in enumerate(cached_map(self.cache, keys, compute)):
            result[i] = row
        return result

    # ----- the scoring protocol shared with masked LMs -------------------------------------------
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

    def sentence_logprob(self, sentences: Sequence[str], desc: str = "sentence log-probabilities") -> np.ndarray:
        """log P(sentence) as lm-evaluation-harness scores a request with an empty context.

        The context is the prefix token alone and the continuation is the sentence tokenized
        without special tokens, so every token of the sentence is scored (the first one too).
        Cached per sentence.
        """
        def compute(idx: list[int]) -> list[float]:
            prefix = [self.prefix_token_id()]
            requests = []
            for i in idx:
                cont = list(self.tokenizer(sentences[i], add_special_tokens=False)["input_ids"])
                if not cont:
                    raise AuditUsageError(
                        f"sentence {sentences[i]!r} has no tokens to score. Fix: drop empty sentences.")
                self._check_length(prefix + cont, 0, sentences[i])
                requests.append((prefix, cont))
            return self._score_tokens(requests, desc)

        keys = [self._key("sentence_logprob", sentence=s) for s in sentences]
        return np.asarray(cached_map(self.cache, keys, compute), dtype=np.float64).reshape(len(sentences))

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

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = "fill probabilities") -> np.ndarray:
        """P(word is the next word) at the final MASK slot of each text; see word_probs."""
        return self.word_probs([self._prefix_of(t) for t in texts], words, desc)

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = "top-k fills") -> list[list[tuple[str, float]]]:
        """The k most probable next whole words after each text (which ends in MASK).

        A token counts as a whole word when the word it decodes to, written after the prompt
        with a space (as word_probs scores it), tokenizes back to exactly that token: this drops
        word pieces and special tokens, and makes a word's probability here equal fill_probs'.
        Sorted by probability, then token id. Cached per text and k.
        """
        prefixes = [self._prefix_of(t) for t in texts]

        def compute(idx: list[int]) -> list[list[list[Any]]]:
            encoded = [self.encode(prefixes[i]) for i in idx]
            for i, ids in zip(idx, encoded):
                self._check_length(ids, 0, prefixes[i])
            out: dict[int, list[list[Any]]] = {}
            bar = progress_bar(total=len(encoded), desc=desc, enabled=self.progress)
            with torch.inference_mode():
                for batch in self._batches(encoded):
                    ids, mask, positions = self._left_pad([encoded[j] for j in batch])
                    logits = self._forward(ids, mask, positions, keep=1).logits[:, -1, :]
                    logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
                    finite = finite_rows(logprobs)
                    for row, j in enumerate(batch):
                        prefix = prefixes[idx[j]]
                        if not finite[row]:
                            raise non_finite(self, desc, prefix)
                        accept = lambda t, word, prefix=prefix: self.split_request(prefix, " " + word)[1] == [t]  # noqa: E731
                        out[j] = top_whole_words(logprobs[row], k, self.tokenizer, accept)
                    bar.update(len(batch))
            bar.close()
            return [out[j] for j in range(len(idx))]

        keys = [self._key("topk_fills", prompt=p, k=k) for p in prefixes]
        return [[(str(w), float(p)) for w, p in row] for row in cached_map(self.cache, keys, compute)]

    def embed(self, sentences: Sequence[str], desc: str = "embedding") -> np.ndarray:
        """Last-layer hidden state of each sentence's last token (special tokens added as usual)."""
        def compute(idx: list[int]) -> list[list[float]]:
            encoded = [self.encode(sentences[i]) for i in idx]
            for i, ids in zip(idx, encoded):
                self._check_length(ids, 0, sentences[i])
            out: dict[int, list[float]] = {}
            bar = progress_bar(total=len(encoded), desc=desc, enabled=self.progress)
            with torch.inference_mode():
                for batch in self._batches(encoded):
                    ids, mask, positions = self._left_pad([encoded[j] for j in batch])
                    kwargs = {"input_ids": ids, "attention_mask": mask, "output_hidden_states": True}
                    if self._takes_position_ids:
                        kwargs["position_ids"] = positions
                    if self._takes_logits_to_keep:
                        kwargs["logits_to_keep"] = 1
                    # Left padding puts every row's last real token in the last column.
                    last = self.model(**kwargs).hidden_states[-1][:, -1, :].double().cpu()
                    finite = finite_rows(last)
                    for row, j in enumerate(batch):
                        if not finite[row]:
                            raise non_finite(self, desc, sentences[idx[j]])
                        out[j] = last[row].tolist()
                    bar.update(len(batch))
            bar.close()
            return [out[j] for j in range(len(idx))]

        keys = [self._key("embed", sentence=s) for s in sentences]
        return _matrix(cached_map(self.cache, keys, compute), len(sentences))

    def generate(
        self, prompts: Sequence[str], config: DecodingConfig = DecodingConfig(), seed: int = 0, desc: str = "generating"
    ) -> list[str]:
        """Continuations (without the prompt), cached per prompt, config and seed."""
        def compute(idx: list[int]) -> list[str]:
            encoded = [self.encode(prompts[i]) for i in idx]
            for i, ids in zip(idx, encoded):
                self._check_length(ids, config.max_new_tokens, prompts[i])
            return self._generate_ids(encoded, config, seed, [prompts[i] for i in idx], desc)

        keys = [self._key("generate", prompt=prompt, config=config.as_key(), seed=seed) for prompt in prompts]
        return [str(x) for x in cached_map(self.cache, keys, compute)]

    # ----- decoding ---------------------------------------------------------------------------
    def _row_generators(self, prompts: Sequence[str], seed: int) -> list[torch.Generator]:
        # One generator per prompt, seeded from (seed, prompt): a sampled continuation does not
        # depend on which other prompts share its batch.
        gens = []
        for prompt in prompts:
            digest = hashlib.sha256(f"{seed}\x00{prompt}".encode()).digest()
            gens.append(torch.Generator(device="cpu").manual_seed(int.from_bytes(digest[:8], "little") >> 1))
        return gens

    def _generate_ids(self, encoded, config: DecodingConfig, seed: int, prompts, desc: str) -> list[str]:
        results: dict[int, list[int]] = {}
        gens = self._row_generators(prompts, seed) if config.do_sample else None
        bar = progress_bar(total=len(encoded), desc=desc, enabled=self.progress)
        with torch.inference_mode():
            for batch in self._batches(encoded, GEN_PAD_MULTIPLE, config.max_new_tokens):
                rows = self._decode_batch(
                    [encoded[i] for i in batch], config, [gens[i] for i in batch] if gens else None
                )
                results.update(zip(batch, rows))
                bar.update(len(batch))
        bar.close()
        return [self.tokenizer.decode(results[i], skip_special_tokens=True) for i in range(len(encoded))]

    def _pick(self, logits: torch.Tensor, config: DecodingConfig, gens) -> torch.Tensor:
        """Next token per row: argmax, or a draw from the row's own generator (on the host, so
        a sample does not depend on the device). A row whose generator is None (it has finished
        and waits to leave the batch) draws nothing."""
        if not config.do_sample:
            return logits.argmax(dim=-1)
        from transformers.generation.logits_process import (
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        scores = logits.float()
        if config.temperature != 1.0:
            scores = TemperatureLogitsWarper(config.temperature)(None, scores)
        if config.top_k:
            scores = TopKLogitsWarper(config.top_k)(None, scores)
        if config.top_p < 1.0:
            scores = TopPLogitsWarper(config.top_p)(None, scores)
        probs = torch.softmax(scores, dim=-1).cpu()
        picks = [torch.multinomial(probs[r], 1, generator=g)[0] if g is not None else probs[r].argmax()
                 for r, g in enumerate(gens)]
        return torch.stack(picks).to(logits.device)

    def _decode_batch(self, seqs, config: DecodingConfig, gens, observe=None) -> list[list[int]]:
        """Decode one batch of equal-length prompts; rows leave the batch at end of sequence.

        Finished rows are dropped from the batch (and its KV cache) once they make up at least
        ``compact_fraction`` of it: 0 drops them at once; on a GPU a larger share saves copying
        the whole cache at every row's end. A finished row left in the batch computes steps
        nobody reads, and no row's numbers depend on its batch mates.

        ``observe(rows, logits)``, when given, sees each step's next-token logits of the rows
        still decoding (exact precision reads the top-2 margins there).
        """
        ids, mask, positions = self._left_pad(seqs, GEN_PAD_MULTIPLE)
        out = self._forward(ids, mask, positions, keep=1, past=_new_cache())
        past = out.past_key_values
        # Bookkeeping stays in Python lists: only the index handed to the tensors goes to the device.
        alive = list(range(len(seqs)))  # original row of each batch row
        live = [True] * len(seqs)  # batch rows still decoding
        generated: list[list[int]] = [[] for _ in seqs]
        next_pos = positions[:, -1:] + 1
        eos = set(self.eos_ids)
        for step in range(config.max_new_tokens):
            # NaN logits would still give an argmax (and a continuation with no gendered word)
            finite = finite_rows(out.logits[:, -1, :]).tolist()
            bad = [i for i, on in enumerate(live) if on and not finite[i]]
            if bad:
                raise non_finite(self, "generation", self.tokenizer.decode(seqs[alive[bad[0]]], skip_special_tokens=True))
            if observe is not None:
                decoding = [i for i, flag in enumerate(live) if flag]
                last = out.logits[:, -1, :]
                observe([alive[i] for i in decoding], last if len(decoding) == len(live) else last[decoding])
            row_gens = [gens[a] if on else None for a, on in zip(alive, live)] if gens else None
            picks = self._pick(out.logits[:, -1, :], config, row_gens)
            new = 0
            for i, token in enumerate(picks.tolist()):  # one device-to-host copy per step
                if not live[i]:
                    continue
                if token in eos:
                    live[i] = False
                else:
                    generated[alive[i]].append(token)
                    new += 1
            self.stats["new_tokens"] += new
            if step == config.max_new_tokens - 1:
                break
            done = live.count(False)
            if done == len(live):
                break
            if done and done >= self.compact_fraction * len(live):
                keep = [i for i, on in enumerate(live) if on]
                index = torch.tensor(keep, device=picks.device)
                alive, live = [alive[i] for i in keep], [True] * len(keep)
                picks, mask, next_pos = picks[index], mask[index.to(mask.device)], next_pos[index.to(next_pos.device)]
                select_rows(past, index)
            mask = torch.cat([mask, torch.ones((mask.shape[0], 1), dtype=mask.dtype, device=mask.device)], dim=1)
            out = self._forward(picks[:, None].to(mask.device), mask, next_pos, keep=1, past=past)
            next_pos = next_pos + 1
        return generated


def _matrix(rows: Sequence[Sequence[float]], n: int) -> np.ndarray:
    out = np.asarray(rows, dtype=np.float64)
    return out if n else out.reshape(0, 0)


def _new_cache():
    from transformers import DynamicCache

    return DynamicCache()


def select_rows(past: Any, rows: torch.Tensor) -> None:
    """Keep only the given batch rows of a KV cache, in place. Each layer takes the index on its
    own device: under ``--device-map`` the layers sit on several GPUs."""
    for layer in past.layers:
        keys = getattr(layer, "keys", None)
        if isinstance(keys, torch.Tensor):
            layer.batch_select_indices(rows.to(keys.device))


def cache_rows(past: Any, rows: torch.Tensor) -> Any:
    """A new KV cache holding the given batch rows of ``past``, which is left as it was.

    Only the chosen rows are copied (a deepcopy of the whole cache first would briefly double
    it: gigabytes for a 7B model), and autograd graphs survive (Debias Tuning trains through it).
    """
    out = copy.copy(past)
    out.layers = [copy.copy(layer) for layer in past.layers]
    select_rows(out, rows)
    return out
