"""Greedy decoding in half precision whose continuations equal fp32's (``--precision exact``).

1. Every batch is decoded by the half-precision handle; at each step the top-2 margin of each
   row's next-token logits is recorded (a logit difference is a log-probability difference).
2. A row with any step whose margin is within the calibrated ``margin`` bound is re-checked in
   fp32: one teacher-forced fp32 pass over its prompt and continuation, up to its last flagged
   step, gives fp32's greedy choice at every step up to there, batched across rows. The
   continuation equals fp32's greedy one when every step matches (an end-of-sequence step
   included) and the later steps are unflagged.
3. At the first step that does not match, the continuation takes fp32's token and decoding
   resumes from there (in half precision, checked the same way), at most ``HALF_RESUMES``
   times per row: a row corrected once more is decoded from there in fp32 outright (counted as
   ``fp32_rows``). Resuming in half precision costs another half decode and fp32 pass per
   correction, so a row whose half and fp32 choices part at most steps (random weights, on the
   first GPU run: 75 of 78 rows corrected) cost O(steps²) before; the fallback bounds a row at
   ``HALF_RESUMES + 1`` half decodes, as many fp32 passes and one fp32 decode.

Rows without a near tie are kept as decoded: at every step their margin exceeded the bound on
how far half precision can move it, so fp32 picks the same token. Re-checking whole rows in one
pass, rather than each near-tie step as it comes, costs one fp32 pass per row instead of one per
step (a prompt's fp32 pass dominates either way); a mismatch at a step no margin flagged would
mean the bound was too small, and is counted (``unflagged_mismatches``) rather than trusted away.
fp32's own greedy decoding reads its logits from a KV cache, the re-check from one pass: they
agree to ~1e-6, so fp32 choices between tokens closer than that are as batch-dependent here as
they are in fp32 runs themselves.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from bias_core.models.decoding import row_seeds
from bias_core.models.engines.hf.causal import GEN_PAD_MULTIPLE, LOGIT_BUDGET, DecodingConfig
from bias_core.models.progress import progress_bar

HALF_RESUMES = 2


def exact_generate(lm: Any, prompts: Sequence[str], config: DecodingConfig, desc: str = "generating",
                   seed: Any = 0) -> list[str]:
    """Greedy continuations of ``prompts`` equal to fp32's, cached per prompt (see module doc)
    in the half handle's cache, under keys marked ``precision: exact``."""
    half = lm.half.engine
    prompts = list(prompts)

    def compute(missing: list[int]) -> list[str]:
        encoded = [half.encode(prompts[i]) for i in missing]
        for i, ids in zip(missing, encoded):
            half._check_length(ids, config.max_new_tokens, prompts[i])
        before = half.stats["new_tokens"]
        tokens = decode_exact(lm, encoded, [config.max_new_tokens] * len(encoded), desc)
        half.stats["new_tokens"] = before + sum(len(t) for t in tokens)
        return [half.tokenizer.decode(toks, skip_special_tokens=True) for toks in tokens]

    parts = [{"prompt": p, "config": config.as_key(), "seed": s, "precision": "exact"}
             for p, s in zip(prompts, row_seeds(seed, len(prompts)))]
    return [str(x) for x in lm.half.cached("generate", parts, compute)]


def _half_decode(half: Any, seqs: list[list[int]], budgets: list[int], desc: str):
    """(tokens, per-step top-2 margins, ended by EOS) of greedy decoding by the engine ``half``
    (the half-precision one; the fp32 one for rows past ``HALF_RESUMES``)."""
    tokens: dict[int, list[int]] = {}
    margins: dict[int, list[float]] = {i: [] for i in range(len(seqs))}
    bar = progress_bar(total=len(seqs), desc=desc, enabled=half.progress)
    with torch.inference_mode():
        for budget in sorted(set(budgets)):
            group = [i for i, b in enumerate(budgets) if b == budget]
            config = DecodingConfig(max_new_tokens=budget)
            for batch in half._batches([seqs[i] for i in group], GEN_PAD_MULTIPLE):
                rows = [group[j] for j in batch]

                def observe(alive: list[int], logits: torch.Tensor, rows=rows) -> None:
                    top = logits.float().topk(2, dim=-1).values
                    for r, m in zip(alive, (top[:, 0] - top[:, 1]).tolist()):
                        margins[rows[r]].append(m)

                decoded = half._decode_batch([seqs[i] for i in rows], config, None, observe=observe)
                tokens.update(zip(rows, decoded))
                bar.update(len(rows))
    bar.close()
    ended = [len(margins[i]) > len(tokens[i]) for i in range(len(seqs))]  # one more step: the EOS
    return [tokens[i] for i in range(len(seqs))], [margins[i] for i in range(len(seqs))], ended


def _fp32_choices(full: Any, seqs: list[list[int]], new: list[int], steps: list[int]) -> list[list[int]]:
    """fp32's greedy choices after each of the last ``new[i] + 1`` tokens of ``seqs[i]`` (the
    prompt's last token and ``new[i]`` decoded ones), ``steps[i]`` of them, in one pass."""
    out: dict[int, list[int]] = {}
    vocab = int(full.model.config.vocab_size)
    with torch.inference_mode():
        for batch in full._batches(seqs):
            keep = max(new[i] + 1 for i in batch)
            rows_per_pass = max(1, LOGIT_BUDGET // (keep * vocab))
            for start in range(0, len(batch), rows_per_pass):
                chunk = batch[start : start + rows_per_pass]
                ids, mask, positions = full._left_pad([seqs[i] for i in chunk])
                picks = full._forward(ids, mask, positions, keep=keep).logits[:, -keep:, :].argmax(dim=-1)
                for row, i in enumerate(chunk):
                    first = keep - new[i] - 1
                    out[i] = picks[row, first : first + steps[i]].tolist()
    return [out[i] for i in range(len(seqs))]


def decode_exact(lm: Any, seqs: list[list[int]], budgets: list[int], desc: str, resumes: int = 0) -> list[list[int]]:
    """New tokens of each sequence (at most ``budgets[i]``), equal to fp32's greedy ones;
    ``resumes``: how many corrections these sequences' rows have had already."""
    half, full, bound = lm.half.engine, lm.full.engine, lm.bound.margin
    eos = set(half.eos_ids)
    tokens, margins, ended = _half_decode(half, seqs, budgets, desc)
    flagged = [i for i in range(len(seqs)) if lm.recheck and any(m <= bound for m in margins[i])]
    lm.rechecks.add("decoding_rows", len(flagged), len(seqs))
    lm.rechecks.add("decoding_steps", sum(sum(m <= bound for m in margins[i]) for i in flagged),
                    sum(len(m) for m in margins))
    if not flagged:
        return tokens
    # Steps after a row's last flagged one need no check (the prefix is checked up to there):
    # the fp32 pass stops at it.
    last = [max(k for k, m in enumerate(margins[i]) if m <= bound) for i in flagged]
    with lm.rechecks.timed():
        choices = _fp32_choices(full, [seqs[i] + tokens[i][:s] for i, s in zip(flagged, last)], last,
                                [s + 1 for s in last])
    redo: list[tuple[int, list[int]]] = []  # (row, tokens so far) resuming after a corrected step
    for i, fp32 in zip(flagged, choices):
        decoded = (tokens[i] + ([next(iter(eos))] if ended[i] else []))[: len(fp32)]
        s = next((k for k, (a, b) in enumerate(zip(decoded, fp32)) if a != b and not (a in eos and b in eos)), None)
        if s is None:
            continue
        if margins[i][s] > bound:
            lm.rechecks.add("unflagged_mismatches", 1, 0)
        kept = tokens[i][:s]
        if fp32[s] in eos:
            tokens[i] = kept
        elif s + 1 >= budgets[i]:
            tokens[i] = kept + [fp32[s]]
        else:
            redo.append((i, kept + [fp32[s]]))
    if redo:
        lm.rechecks.add("corrected_rows", len(redo), 0)
        more, left = [seqs[i] + so_far for i, so_far in redo], [budgets[i] - len(so_far) for i, so_far in redo]
        if resumes < HALF_RESUMES:
            tails = decode_exact(lm, more, left, f"{desc} (resumed after fp32 re-check)", resumes + 1)
        else:  # corrected again and again: fp32 decides the rest of these rows directly
            lm.rechecks.add("fp32_rows", len(redo), 0)
            with lm.rechecks.timed():
                tails = _half_decode(full, more, left, f"{desc} (in fp32 after {resumes + 1} corrections)")[0]
        for (i, so_far), tail in zip(redo, tails):
            tokens[i] = so_far + tail
    return tokens
