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

This is the transformers engine's causal side (models/protocol.py's ``Engine``): it computes and
never caches; ``load_model`` puts it inside the one result cache (cached.py). models/engines/hf/masked.py holds
the masked-LM and BART side; their batching and padding helpers live in models/batching.py.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import torch

from bias_core.models.batching import (  # noqa: F401 - re-exported: models/precision/half.py, mitigation and tests import them from here
    GEN_PAD_MULTIPLE,
    LOGIT_BUDGET,
    PAD_MULTIPLE,
    finite_rows,
    left_pad,
    non_finite,
    padded_width,
    slot_split,
    top_whole_words,
    width_batches,
)
from bias_core.models.decoding import DecodingConfig, Seeds, row_seeds
from bias_core.models.engines.hf.shared import HFText
from bias_core.models.progress import progress_bar
from bias_core.models.tokens import CausalTokens


@dataclass
class CausalLM(CausalTokens, HFText):
    model: Any
    tokenizer: Any
    name: str
    fingerprint: str
    tokenizer_fingerprint: str
    batch_size: int = 32
    progress: bool = True
    load_notes: tuple[str, ...] = ()  # what loading chose or dropped, for the run card (models/weights/load_report.py)
    weights_sha256: str = ""  # hash of the weight files verified at load (models/weights/integrity.py)
    # GPU throughput settings (models/placement/memory.py); the defaults are the CPU behaviour.
    plan: Any = None  # a BatchPlan: rows per pass also capped by what fits in memory at each width
    compact_fraction: float = 0.0  # share of finished rows at which a decoding batch drops them
    kind: ClassVar[str] = "causal"
    capabilities: ClassVar[frozenset[str]] = frozenset(
        {"generation", "scoring", "next_word", "topk", "embeddings", "training", "adapters"})

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

    # ----- batched forward ---------------------------------------------------------------------
    def _left_pad(self, seqs: Sequence[Sequence[int]], multiple: int = PAD_MULTIPLE) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return left_pad(seqs, self.tokenizer.pad_token_id, self.device, multiple)

    def _batches(self, seqs: Sequence[Sequence[int]], multiple: int = PAD_MULTIPLE, new_tokens: int = 0) -> list[list[int]]:
        """Indices of seqs grouped into batches of one padded width, longest first, at most
        batch_size (and, with a plan, what fits with ``new_tokens`` more per row)."""
        rows_for = None if self.plan is None else (lambda width: self.plan.rows(width + new_tokens))
        return width_batches([len(s) for s in seqs], self.batch_size, multiple, rows_for)

    def _forward(self, ids, mask, positions, keep: int = 0, past=None):
        # The mask is passed even when all ones. transformers 5.x with SDPA still drops an all-ones
        # mask (is_causal instead), so a batch of rows all at full width takes another attention
        # kernel than one with a shorter mate: the same bits on a CPU (checked on the tiny model),
        # possibly not on a GPU (docs/gpu.md, batch-size invariance).
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
                # This batch's KV cache goes before the next batch's is built (the names would
                # keep it to the end of the next forward pass: 0.5 GB at 128 prompts of 90 tokens).
                del out, first
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
                cache = rows_in_passing(past, rows)
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
        """log P(continuation | context) for each (context, continuation)."""
        toks = self.split_requests(requests)
        for (ctx_ids, cont_ids), (context, _) in zip(toks, requests):
            self._check_length(ctx_ids + cont_ids, 0, context)
        return [float(x) for x in self._score_tokens(toks, desc)] if toks else []

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = "word probabilities") -> np.ndarray:
        """P(word is the next word after prompt), shape (len(prompts), len(words)).

        Each word is scored as the continuation " word" (leading space, as in running text); a
        word of several tokens gets the product of its tokens' conditional probabilities.
        """
        words = list(words)
        result = np.zeros((len(prompts), len(words)), dtype=np.float64)
        owners = [(i, j) for i in range(len(prompts)) for j in range(len(words))]
        if not owners:
            return result
        requests = self.split_requests([(prompts[i], " " + words[j]) for i, j in owners])
        for (i, _), (ctx_ids, cont_ids) in zip(owners, requests):
            self._check_length(ctx_ids + cont_ids, 0, prompts[i])
        for (i, j), score in zip(owners, self._score_tokens(requests, desc)):
            result[i, j] = float(np.exp(score))
        return result

    # ----- the scoring protocol shared with masked LMs -------------------------------------------
    def sentence_logprob(self, sentences: Sequence[str], desc: str = "sentence log-probabilities") -> np.ndarray:
        """log P(sentence) as lm-evaluation-harness scores a request with an empty context.

        The context is the prefix token alone and the continuation is the sentence tokenized
        without special tokens, so every token of the sentence is scored (the first one too).
        """
        requests = self.sentence_requests(sentences)
        scores = self._score_tokens(requests, desc) if requests else []
        return np.asarray(scores, dtype=np.float64).reshape(len(sentences))

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = "fill probabilities") -> np.ndarray:
        """P(word is the next word) at the final MASK slot of each text; see word_probs."""
        return self.word_probs([self._prefix_of(t) for t in texts], words, desc)

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = "top-k fills") -> list[list[tuple[str, float]]]:
        """The k most probable next whole words after each text (which ends in MASK).

        A token counts as a whole word when the word it decodes to, written after the prompt
        with a space (as word_probs scores it), tokenizes back to exactly that token: this drops
        word pieces and special tokens, and makes a word's probability here equal fill_probs'.
        Sorted by probability, then token id.
        """
        prefixes = [self._prefix_of(t) for t in texts]
        encoded = [self.encode(p) for p in prefixes]
        for prefix, ids in zip(prefixes, encoded):
            self._check_length(ids, 0, prefix)
        out: dict[int, list[list[Any]]] = {}
        bar = progress_bar(total=len(encoded), desc=desc, enabled=self.progress)
        with torch.inference_mode():
            for batch in self._batches(encoded):
                ids, mask, positions = self._left_pad([encoded[j] for j in batch])
                logits = self._forward(ids, mask, positions, keep=1).logits[:, -1, :]
                logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
                finite = finite_rows(logprobs)
                for row, j in enumerate(batch):
                    if not finite[row]:
                        raise non_finite(self, desc, prefixes[j])
                    out[j] = top_whole_words(logprobs[row], k, self.tokenizer, self.whole_word_test(prefixes[j]))
                del logits, logprobs  # before the next batch's forward pass
                bar.update(len(batch))
        bar.close()
        return [[(str(w), float(p)) for w, p in out[j]] for j in range(len(encoded))]

    def embed(self, sentences: Sequence[str], desc: str = "embedding") -> np.ndarray:
        """Last-layer hidden state of each sentence's last token (special tokens added as usual)."""
        encoded = [self.encode(s) for s in sentences]
        for sentence, ids in zip(sentences, encoded):
            self._check_length(ids, 0, sentence)
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
                        raise non_finite(self, desc, sentences[j])
                    out[j] = last[row].tolist()
                bar.update(len(batch))
        bar.close()
        return _matrix([out[j] for j in range(len(encoded))], len(encoded))

    def generate(
        self, prompts: Sequence[str], config: DecodingConfig = DecodingConfig(), seed: Seeds = 0, desc: str = "generating"
    ) -> list[str]:
        """Continuations (without the prompt)."""
        config = config or DecodingConfig()
        seeds = row_seeds(seed, len(prompts))
        encoded = [self.encode(p) for p in prompts]
        for prompt, ids in zip(prompts, encoded):
            self._check_length(ids, config.max_new_tokens, prompt)
        return [str(x) for x in self._generate_ids(encoded, config, seeds, list(prompts), desc)] if encoded else []

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """The sentence tokenized without special tokens: every token after the prefix token."""
        return np.asarray(self.token_counts(texts), dtype=np.int64)

    # ----- decoding ---------------------------------------------------------------------------
    def _row_generators(self, prompts: Sequence[str], seed: Seeds) -> list[torch.Generator]:
        # One generator per prompt, seeded from (its seed, prompt): a sampled continuation does not
        # depend on which other prompts share its batch.
        gens = []
        for prompt, row_seed in zip(prompts, row_seeds(seed, len(prompts))):
            digest = hashlib.sha256(f"{row_seed}\x00{prompt}".encode()).digest()
            gens.append(torch.Generator(device="cpu").manual_seed(int.from_bytes(digest[:8], "little") >> 1))
        return gens

    def _generate_ids(self, encoded, config: DecodingConfig, seed: Seeds, prompts, desc: str) -> list[str]:
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


def rows_in_passing(past: Any, rows: torch.Tensor) -> Any:
    """A KV cache reading the given batch rows of ``past`` (left as it was) for one more forward
    pass whose cache is not kept: each layer selects its rows when it runs and keeps nothing, so
    the pass holds one layer's rows at a time, not a copy of every layer's (``cache_rows``).

    Scoring the continuations after a batch of GenderPair prompts, that copy stood beside the
    prompts' own cache at the audit's memory peak: 128 rows of ~90 tokens are 0.5 GB of keys and
    values, and each prompt has two continuations. Each layer computes exactly what it computes
    on ``cache_rows(past, rows)``: the same layer class selects the same rows and updates them."""
    out = copy.copy(past)
    out.layers = [_layer_in_passing(layer, rows) for layer in past.layers]
    return out


def _layer_in_passing(layer: Any, rows: torch.Tensor) -> Any:
    keys = getattr(layer, "keys", None)
    view = copy.copy(layer)  # the same class and lengths (the cache's checks and masks read them), the source's tensors
    if isinstance(keys, torch.Tensor):
        view.update = functools.partial(_select_then_update, layer, rows.to(keys.device))
    return view


def _select_then_update(source: Any, rows: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    chosen = copy.copy(source)
    chosen.batch_select_indices(rows)
    return chosen.update(*args, **kwargs)  # the states it returns; ``chosen`` and what it stored go


def cache_rows(past: Any, rows: torch.Tensor) -> Any:
    """A new KV cache holding the given batch rows of ``past``, which is left as it was.

    Only the chosen rows are copied (a deepcopy of the whole cache first would briefly double
    it: gigabytes for a 7B model), and autograd graphs survive (Debias Tuning trains through it).
    """
    out = copy.copy(past)
    out.layers = [copy.copy(layer) for layer in past.layers]
    select_rows(out, rows)
    return out
