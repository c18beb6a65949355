"""The scoring protocol for masked LMs (BERT/RoBERTa family) and BART mask filling.

The same rules as the causal handle (models/engines/hf/causal.py): scores come from raw logits (log-softmax in
float32, sums in float64), every result is cached, and no result depends on the batch size. An
encoder sees a sequence and its padding at once, so each sequence is RIGHT padded to a width
fixed by its own length alone (the next multiple of PAD_MULTIPLE) and a batch only holds
sequences of one width: a row is computed the same way whatever it is batched with.

BART (kind "seq2seq") fills a mask as the Hugging Face fill-mask pipeline does: the encoder
reads the masked text, the decoder reads the default decoder_input_ids (the input shifted right
by one), and the logits at the mask's position are the prediction for the masked token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import numpy as np
import torch

from bias_core.errors import AuditUsageError
from bias_core.models.batching import (
    PAD_MULTIPLE,
    finite_rows,
    non_finite,
    padded_width,
    slot_split,
    top_whole_words,
    width_batches,
)
from bias_core.models.engines.hf.shared import HFText
from bias_core.models.progress import progress_bar
from bias_core.probes.placeholders import CONTEXT_MASK, MASK

KINDS = ("masked", "seq2seq")


@dataclass
class MaskedLM(HFText):
    model: Any  # AutoModelForMaskedLM, or BartForConditionalGeneration for kind "seq2seq"
    tokenizer: Any
    name: str
    fingerprint: str
    tokenizer_fingerprint: str
    kind: str = "masked"
    batch_size: int = 32
    progress: bool = True
    load_notes: tuple[str, ...] = ()  # what loading chose or dropped, for the run card (models/weights/load_report.py)
    weights_sha256: str = ""  # hash of the weight files verified at load (models/weights/integrity.py)
    # No generation and no next-word probabilities: a masked LM fills slots inside a sentence.
    capabilities: ClassVar[frozenset[str]] = frozenset({"scoring", "mask_filling", "embeddings", "training", "adapters"})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"MaskedLM kind must be one of {KINDS}, got {self.kind!r}")
        tok = self.tokenizer
        for role in ("mask", "pad"):
            if getattr(tok, f"{role}_token_id") is None:
                raise AuditUsageError(
                    f"{self.name}: the tokenizer has no {role} token, which mask filling needs. "
                    "Fix: use the tokenizer the masked LM was trained with."
                )
        tok.padding_side = "right"
        self.device = next(self.model.parameters()).device
        self.model.eval()
        limits = [int(getattr(self.model.config, "max_position_embeddings", 0) or 0)]
        if tok.model_max_length and tok.model_max_length < 1_000_000:  # "unset" is a huge sentinel
            limits.append(int(tok.model_max_length))
        self.max_length = min(x for x in limits if x > 0) if any(limits) else 512

    # ----- tokenization -----------------------------------------------------------------------
    def _encode(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids with special tokens, and which of them are special."""
        enc = self.tokenizer(text, add_special_tokens=True, return_special_tokens_mask=True)
        ids = list(enc["input_ids"])
        self._check_length(ids, text)
        return ids, list(enc["special_tokens_mask"])

    def _check_length(self, ids: Sequence[int], text: str) -> None:
        if len(ids) > self.max_length:
            raise AuditUsageError(
                f"text too long for {self.name}: {len(ids)} tokens > {self.max_length}. Text starts "
                f"{text[:80]!r}. Fix: shorten the probe's texts."
            )

    def _unscored(self, text: str) -> str:
        """The text with every CONTEXT_MASK replaced by the model's own mask token."""
        rest = text.replace(CONTEXT_MASK, "")
        if "[MASK_" in rest:
            raise AuditUsageError(f"text {text[:80]!r} holds an unknown mask marker. Fix: use {MASK} for the "
                                  f"scored slot and {CONTEXT_MASK} for masked words that are not scored.")
        return text.replace(CONTEXT_MASK, self.tokenizer.mask_token)

    def _slot_ids(self, text: str) -> tuple[list[int], int]:
        """The text with the model's own mask token in the slot, and the slot's position."""
        before, after = (self._unscored(part) for part in slot_split(text))
        mask = self.tokenizer.mask_token
        enc = self.tokenizer(before + mask + after, add_special_tokens=True, return_offsets_mapping=True)
        ids = list(enc["input_ids"])
        self._check_length(ids, text)
        start, end = len(before), len(before) + len(mask)
        masks = [i for i, t in enumerate(ids) if t == self.tokenizer.mask_token_id]
        at = [i for i in masks if enc["offset_mapping"][i][0] < end and enc["offset_mapping"][i][1] > start]
        if len(at) != 1 or len(masks) != 1 + text.count(CONTEXT_MASK):
            raise AuditUsageError(
                f"text {text[:80]!r} holds the model's mask token {mask!r} itself. "
                f"Fix: mark the slot with {MASK} only."
            )
        return ids, at[0]

    def _word_in_slot(self, text: str, word: str) -> tuple[list[int], list[int]] | None:
        """(ids of the text with word in the slot, positions of the word's tokens), or None when
        a token there also covers text beside the word.

        Tokenizing the filled text gives the word the form it has in running text: WordPiece
        pieces, or the leading-space form ("Ġshe") of byte-level BPE when a space precedes the
        slot. Masking these positions gives the model the slot as it would see it.
        """
        before, after = (self._unscored(part) for part in slot_split(text))
        filled = before + word + after
        enc = self.tokenizer(filled, add_special_tokens=True, return_offsets_mapping=True,
                             return_special_tokens_mask=True)
        start, end = len(before), len(before) + len(word)
        positions = []
        for i, ((a, b), special) in enumerate(zip(enc["offset_mapping"], enc["special_tokens_mask"])):
            if special or not (a < end and b > start):
                continue
            if filled[a:start].strip() or filled[end:b].strip():
                return None
            positions.append(i)
        if not positions or positions != list(range(positions[0], positions[-1] + 1)):
            return None
        return list(enc["input_ids"]), positions

    # ----- batched forward ---------------------------------------------------------------------
    def _right_pad(self, seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = min(max(padded_width(len(s), PAD_MULTIPLE) for s in seqs), self.max_length)
        ids = torch.full((len(seqs), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, seq in enumerate(seqs):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        return ids.to(self.device), mask.to(self.device)

    def _logits(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.kind == "seq2seq":
            # No decoder_input_ids: the model shifts input_ids right, as the fill-mask pipeline does.
            return self.model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        return self.model(input_ids=ids, attention_mask=mask).logits

    def _encoder_states(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        body = self.model.get_encoder() if self.kind == "seq2seq" else self.model.base_model
        return body(input_ids=ids, attention_mask=mask).last_hidden_state

    def _forward_rows(self, seqs: Sequence[Sequence[int]], positions: Sequence[Sequence[int]],
                      use: Callable[[int, torch.Tensor], None], desc: str) -> None:
        """Run each sequence once; call use(i, log-softmax rows at positions[i]) as batches finish."""
        bar = progress_bar(total=len(seqs), desc=desc, enabled=self.progress)
        with torch.inference_mode():
            for batch in width_batches([len(s) for s in seqs], self.batch_size):
                ids, mask = self._right_pad([seqs[i] for i in batch])
                logits = self._logits(ids, mask)
                for row, i in enumerate(batch):
                    logprobs = torch.log_softmax(logits[row, list(positions[i])].float(), dim=-1)
                    if not bool(finite_rows(logprobs[None]).all()):
                        raise non_finite(self, desc, self.tokenizer.decode(list(seqs[i]), skip_special_tokens=False))
                    use(i, logprobs)
                del logits, logprobs  # before the next batch's (rows x width x vocabulary) are made
                bar.update(len(batch))
        bar.close()

    def _token_logprobs(self, requests: Sequence[tuple[tuple[int, ...], int, int]], desc: str) -> list[float]:
        """log P(token at pos | seq) for (seq, pos, token) requests; each distinct seq runs once."""
        seq_index: dict[tuple[int, ...], int] = {}
        reads: list[dict[int, set[int]]] = []
        for seq, pos, token in requests:
            s = seq_index.setdefault(seq, len(seq_index))
            if s == len(reads):
                reads.append({})
            reads[s].setdefault(pos, set()).add(token)
        seqs = list(seq_index)
        positions = [sorted(r) for r in reads]
        values: dict[tuple[int, int, int], float] = {}

        def use(s: int, logprobs: torch.Tensor) -> None:
            for row, pos in enumerate(positions[s]):
                for token in reads[s][pos]:
                    values[s, pos, token] = float(logprobs[row, token])

        self._forward_rows(seqs, positions, use, desc)
        return [values[seq_index[seq], pos, token] for seq, pos, token in requests]

    # ----- the scoring protocol -----------------------------------------------------------------
    def sentence_logprob(self, sentences: Sequence[str], desc: str = "pseudo-log-likelihoods") -> np.ndarray:
        """Pseudo-log-likelihood (Salazar et al. 2020): sum over the sentence's non-special tokens
        of log P(token | the sentence with that one token masked). One masked copy per token,
        all batched together."""
        mask_id = self.tokenizer.mask_token_id
        requests, owner = [], []
        for j, sentence in enumerate(sentences):
            ids, special = self._encode(sentence)
            for pos, (token, is_special) in enumerate(zip(ids, special)):
                if not is_special:
                    requests.append((tuple(ids[:pos] + [mask_id] + ids[pos + 1 :]), pos, token))
                    owner.append(j)
        totals = [0.0] * len(sentences)
        for j, lp in zip(owner, self._token_logprobs(requests, desc) if requests else []):
            totals[j] += lp
        return np.asarray(totals, dtype=np.float64).reshape(len(sentences))

    def fill_probs(self, texts: Sequence[str], words: Sequence[str], desc: str = "fill probabilities") -> np.ndarray:
        """P(word fills the MASK slot) for each text and word, shape (len(texts), len(words)).

        A word of n tokens is written into the slot, its n tokens are masked, and they are
        filled left to right: P = P(t1 | all masked) * P(t2 | t1, rest masked) * ... (the
        chain rule with the model's own conditionals; Kurita et al. score one-token words only).
        Raw softmax, no renormalisation over the word list.
        """
        words = list(words)
        mask_id = self.tokenizer.mask_token_id
        requests, owner = [], []
        for j, text in enumerate(texts):
            for w, word in enumerate(words):
                found = self._word_in_slot(text, word)
                if found is None:
                    raise AuditUsageError(
                        f"word {word!r} in {text[:80]!r}: a token joins the word to the text "
                        f"beside the {MASK}, so the word cannot be scored on its own. Fix: put a "
                        f"space or punctuation around {MASK}."
                    )
                ids, positions = found
                self._check_length(ids, text)
                seq = list(ids)
                for pos in positions:
                    seq[pos] = mask_id
                for pos in positions:
                    requests.append((tuple(seq), pos, ids[pos]))
                    owner.append((j, w))
                    seq[pos] = ids[pos]  # filled for the next token's conditional
        logs = np.zeros((len(texts), len(words)), dtype=np.float64)
        for (j, w), lp in zip(owner, self._token_logprobs(requests, desc) if requests else []):
            logs[j, w] += lp
        return np.exp(logs)

    def topk_fills(self, texts: Sequence[str], k: int, desc: str = "top-k fills") -> list[list[tuple[str, float]]]:
        """The k most probable whole-word tokens at each text's MASK slot, with probabilities.

        A token counts as a whole word when the text with the word it decodes to written into
        the slot tokenizes to the masked text with exactly that token in the slot: "##s" pieces,
        and byte-level tokens lacking the leading space a space before the slot asks for, are
        skipped, and a word's probability here equals its fill_probs. Sorted by probability,
        then token id.
        """
        slots = [self._slot_ids(t) for t in texts]
        out: dict[int, list[list[Any]]] = {}

        def use(j: int, logprobs: torch.Tensor) -> None:
            text, (ids, pos) = texts[j], slots[j]

            def accept(t: int, word: str) -> bool:
                found = self._word_in_slot(text, word)
                return found is not None and found[1] == [pos] and found[0] == ids[:pos] + [t] + ids[pos + 1 :]

            out[j] = top_whole_words(logprobs[0], k, self.tokenizer, accept)

        if slots:
            self._forward_rows([ids for ids, _ in slots], [[pos] for _, pos in slots], use, desc)
        return [[(str(w), float(p)) for w, p in out[j]] for j in range(len(texts))]

    def embed(self, sentences: Sequence[str], desc: str = "embedding") -> np.ndarray:
        """Mean of the last hidden states over non-special, non-pad tokens (for BART: of the
        encoder's), shape (len(sentences), hidden size), float64."""
        encoded = [self._encode(self._unscored(s)) for s in sentences]
        for sentence, (_, special) in zip(sentences, encoded):
            if all(special):
                raise AuditUsageError(f"sentence {sentence!r} has no tokens to embed. Fix: drop empty sentences.")
        out: dict[int, list[float]] = {}
        bar = progress_bar(total=len(encoded), desc=desc, enabled=self.progress)
        with torch.inference_mode():
            for batch in width_batches([len(ids) for ids, _ in encoded], self.batch_size):
                ids, mask = self._right_pad([encoded[j][0] for j in batch])
                keep = torch.zeros(ids.shape, dtype=torch.float64)
                for row, j in enumerate(batch):
                    keep[row, : len(encoded[j][1])] = 1.0 - torch.tensor(encoded[j][1], dtype=torch.float64)
                hidden = self._encoder_states(ids, mask).double().cpu()
                means = (hidden * keep[..., None]).sum(1) / keep.sum(1, keepdim=True)
                finite = finite_rows(means)
                for row, j in enumerate(batch):
                    if not finite[row]:
                        raise non_finite(self, desc, sentences[j])
                    out[j] = means[row].tolist()
                bar.update(len(batch))
        bar.close()
        rows = [out[j] for j in range(len(encoded))]
        return np.asarray(rows, dtype=np.float64) if rows else np.zeros((0, 0))

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Each non-special token is scored (pseudo-log-likelihood)."""
        counts = []
        for t in texts:
            enc = self.tokenizer(t, add_special_tokens=True, return_special_tokens_mask=True)
            counts.append(len(enc["input_ids"]) - int(sum(enc["special_tokens_mask"])))
        return np.asarray(counts, dtype=np.int64)

    def word_probs(self, prompts: Sequence[str], words: Sequence[str], desc: str = "word probabilities") -> np.ndarray:
        raise AuditUsageError(f"{self.name} is a {self.kind} model: next-word probabilities need a causal LM. "
                              f"Fix: ask fill_probs for a {MASK} slot.")

    def generate(self, prompts: Sequence[str], config: Any = None, seed: int = 0, desc: str = "generating") -> list[str]:
        raise AuditUsageError(f"{self.name} is a {self.kind} model and does not generate text. Fix: use a causal LM.")

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = "scoring") -> list[float]:
        raise AuditUsageError(
            f"{self.name} is a {self.kind} model: log P(continuation | context) needs a causal LM. "
            "Fix: score masked models with sentence_logprob (pseudo-log-likelihood) or fill_probs."
        )
