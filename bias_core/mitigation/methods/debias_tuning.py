"""Debias Tuning (Dong et al. 2024, arXiv:2402.11190, section 5.3).

A LoRA adapter trained to minimise L_d + L_g + L_l (``mitigation/training/losses.py``) on the next-word
distribution after gender-neutral training prompts "My friend {predicate}, and". Each word's
probability comes from raw logits (no temperature or top-p warping: the upstream scripts stored
warped distributions) and a word of several tokens gets the product of its tokens'
conditionals, with the leading-space form tokenized jointly with the prompt, as
``CausalLM.word_probs`` scores it: the training target is the audited quantity.

Training prompts: offline, ``bias_core/data/debias_training_predicates.txt`` (project-written,
disjoint from the audit prompts); with ``--data-dir``, the paper's training split
``Debias-LLMs/total_neutral_train.csv`` (STS-B + SNLI train), or the two per-corpus files.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from bias_core.errors import AuditUsageError
from bias_core.mitigation.training.adapter_cache import AdapterCache, adapter_key, data_hash
from bias_core.mitigation.training.lora import (
    LoraTrainConfig,
    attached_lora,
    batch_schedule,
    check_quantization,
    optimise,
    save_adapter,
    seeded,
)
from bias_core.mitigation.training.losses import DEFAULT_EPS, LossSwitches, debias_loss
from bias_core.models.training import cache_rows, left_pad
from bias_core.probes.lexicon import PAPER_PAIRS
from bias_core.probes.published import DEBIAS_TRAINING, find_in_data_dir

METHOD = "debias-tuning"
PROMPT_TEMPLATE = "My friend {}, and"
TRAINING_FILE = "debias_training_predicates.txt"


@dataclass(frozen=True)
class DebiasTuningConfig(LoraTrainConfig):
    """Defaults are the paper's QLoRA run, except load_in_4bit (see ``paper()``)."""

    switches: LossSwitches = LossSwitches()
    eps: float = DEFAULT_EPS
    # True: score only each word's first token (cheaper; an upper bound on the word's probability).
    first_token_only: bool = False

    @classmethod
    def paper(cls) -> "DebiasTuningConfig":
        """QLoRA r=64, alpha=16, dropout 0.1, lr 2e-4, batch 16, 500 steps, max length 512 (CUDA)."""
        return cls(load_in_4bit=True)

    @classmethod
    def cpu_quick(cls) -> "DebiasTuningConfig":
        """Plain fp32 LoRA sized for SmolLM2-135M on 2 CPU cores in about 10 minutes.

        r=8 with alpha=16 (scale 2) and lr 1e-3 for 150 steps of 8 prompts (1,200 prompt
        visits): fewer, larger updates than the paper's 500 x 16 at scale 0.25, since the step
        count is what costs time here. ``CPU_QUICK_ESTIMATE`` gives the arithmetic behind the
        size; it is an estimate, to be replaced by a timing of the real run.
        """
        return cls(r=8, alpha=16, dropout=0.1, lr=1e-3, batch_size=8, steps=150)

    def hyperparameters(self) -> dict[str, Any]:
        hp = super().hyperparameters()
        hp["switches"] = dataclasses.asdict(self.switches)
        return hp


# FLOPs of one cpu_quick step on SmolLM2-135M (30 layers, 106M non-embedding parameters, tied
# 576 x 49152 head): 8 prompts of ~12 tokens plus 4 two-token gender words per prompt (boyfriend,
# mr, mrs, niece) run as 1-token extensions = 128 body tokens x 2 x 106M = 27 GFLOP, plus 40
# head positions x 2 x 28M = 2.3 GFLOP; forward + backward ~3x = ~88 GFLOP a step. At the
# ~165 GFLOP/s DESIGN.md measured for batched fp32 forwards, and half that for small training
# batches, a step takes 0.5-1.1 s: 150 steps in 1.5-3 minutes, under 10 minutes even at a
# third of that speed on shared cores. (The tiny test model's 0.7 s a step is all Python and
# dispatch overhead, so it cannot be scaled by FLOPs.)
CPU_QUICK_ESTIMATE = {"gflop_per_step": 88, "steps": 150, "minutes_at_55_gflops": 4.0}


# ----- training data -----------------------------------------------------------------------------
def _has_gender_word(text: str) -> bool:
    from bias_core.metrics.disclosure import find_gender_words
    from bias_core.probes.lexicon import gendered_words

    return bool(find_gender_words(text, gendered_words()))


def training_predicates(data_dir: Path | None = None) -> tuple[list[str], str]:
    """(predicates, source description). ``data_dir`` with the paper's files wins over the
    project's own file. Predicates naming a gender (a few SNLI rows say "her", "his") are
    dropped: after such a prompt a gendered continuation is correct, not a bias to train away."""
    from bias_core.probes.sources import project_data, read_lines, read_one_column_csv

    if data_dir is not None:
        for group in DEBIAS_TRAINING:
            if all(file.present(data_dir) for file in group):
                paths = [find_in_data_dir(data_dir, file) for file in group]  # checked against the published copies
                rows = [row for p in paths for row in read_one_column_csv(p)]
                source = " + ".join(str(p) for p in paths)
                break
        else:
            raise AuditUsageError(
                f"--data-dir {data_dir}: no Debias Tuning training split found (looked for "
                f"{', '.join(f.candidates[0] for g in DEBIAS_TRAINING for f in g)}). Fix: point --data-dir at a copy of "
                "the Debias-LLMs data, or leave it out to train on the project's own predicates."
            )
    else:
        path = project_data(TRAINING_FILE)
        rows, source = read_lines(path), str(path)
    seen: dict[str, None] = {}
    for row in rows:
        if row not in seen and not _has_gender_word(row):
            seen[row] = None
    return list(seen), source


def training_prompts(data_dir: Path | None = None) -> list[str]:
    predicates, _ = training_predicates(data_dir)
    return [PROMPT_TEMPLATE.format(p) for p in predicates]


# ----- word probabilities with gradients ---------------------------------------------------------
@dataclass(frozen=True)
class _WordRequests:
    words: list[str]  # unique words; pair columns index into this
    female_idx: list[int]
    male_idx: list[int]
    ctx: list[list[int]]  # per prompt
    cont: list[list[list[int]]]  # per prompt, per word


def _requests(t: Any, prompts: Sequence[str], pairs: Sequence[tuple[str, str]], max_length: int) -> _WordRequests:
    words = list(dict.fromkeys(w for pair in pairs for w in pair))
    index = {w: i for i, w in enumerate(words)}
    split = t.split_requests([(p, " " + w) for p in prompts for w in words])
    ctx, cont = [], []
    for k, prompt in enumerate(prompts):
        rows = split[k * len(words) : (k + 1) * len(words)]
        ctx.append(rows[0][0])
        cont.append([c for _, c in rows])
        longest = len(rows[0][0]) + max(len(c) for _, c in rows)
        if longest > max_length:
            raise AuditUsageError(
                f"training prompt too long: {longest} tokens with its longest gender word > max_length "
                f"{max_length}. Prompt starts {prompt[:80]!r}. Fix: shorten it or raise max_length."
            )
    return _WordRequests(words, [index[f] for f, _ in pairs], [index[m] for _, m in pairs], ctx, cont)


def word_log_probs(model: Any, t: Any, req: _WordRequests, batch: Sequence[int], first_token_only: bool) -> torch.Tensor:
    """log P(word | prompt) for the batch's prompts, shape [len(batch), n_words], differentiable.

    One pass over the prompts gives every word's first token; a word of k > 1 tokens then runs
    its other k-1 tokens on top of its prompt's KV cache, grouped by k.
    """
    device = t.device  # the session model's; ``model`` is it, or it wrapped in LoRA layers
    ctx = [req.ctx[i] for i in batch]
    ids, mask, positions = left_pad(ctx, t.tokenizer.pad_token_id, device)
    longer = [] if first_token_only else [
        (row, w) for row, i in enumerate(batch) for w, c in enumerate(req.cont[i]) if len(c) > 1
    ]
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=bool(longer), logits_to_keep=1)
    first = torch.log_softmax(out.logits[:, -1, :].float(), dim=-1)
    firsts = torch.tensor([[c[0] for c in req.cont[i]] for i in batch], device=device)
    logp = first.gather(1, firsts)
    if not longer:
        return logp
    extra = torch.zeros_like(logp)
    by_len: dict[int, list[tuple[int, int]]] = {}
    for row, w in longer:
        by_len.setdefault(len(req.cont[batch[row]][w]), []).append((row, w))
    for k, items in sorted(by_len.items()):
        rows = torch.tensor([row for row, _ in items], device=device)
        conts = [req.cont[batch[row]][w] for row, w in items]
        cache = cache_rows(out.past_key_values, rows)
        ext = torch.tensor([c[:-1] for c in conts], device=device)
        ext_mask = torch.cat([mask[rows], torch.ones_like(ext)], dim=1)
        ext_pos = positions[rows, -1:] + torch.arange(1, k, device=device)
        logits = model(input_ids=ext, attention_mask=ext_mask, position_ids=ext_pos, past_key_values=cache,
                       use_cache=True, logits_to_keep=k - 1).logits[:, -(k - 1) :, :]
        targets = torch.tensor([c[1:] for c in conts], device=device)
        rest = torch.log_softmax(logits.float(), dim=-1).gather(2, targets[:, :, None]).squeeze(2).sum(dim=1)
        extra = extra.index_put((rows, torch.tensor([w for _, w in items], device=device)), rest)
    return logp + extra


def pair_probabilities(model: Any, t: Any, req: _WordRequests, batch: Sequence[int], first_token_only: bool = False):
    """(p_female, p_male), each [len(batch), n_pairs], from raw logits."""
    probs = word_log_probs(model, t, req, batch, first_token_only).exp()
    return probs[:, req.female_idx], probs[:, req.male_idx]


# ----- training ----------------------------------------------------------------------------------
def train_debias_adapter(
    lm: Any,
    prompts: Sequence[str],
    config: DebiasTuningConfig,
    seed: int,
    cache_dir: Path | str,
    progress: bool = True,
    pairs: Sequence[tuple[str, str]] = PAPER_PAIRS,
) -> Path:
    """Train (or reuse from the cache) a Debias Tuning adapter; returns its folder.

    ``lm`` is a ``CausalLM``; its model is left unchanged (LoRA layers are attached for the
    run and removed after). The same base model, prompts, pairs, config and seed give the same
    adapter, bit for bit on the same CPU (on a GPU, to the rounding of its backward kernels).
    """
    t = lm.training()  # the torch module and tokenizer (the "training" capability)
    check_quantization(config, t.model)
    prompts = list(prompts)
    if not prompts:
        raise AuditUsageError("Debias Tuning: no training prompts. Fix: pass at least one prompt.")
    pairs = [tuple(p) for p in pairs]
    key = adapter_key(t, METHOD, config.hyperparameters(), data_hash([prompts, pairs]), seed)

    def build(folder: Path) -> None:
        req = _requests(t, prompts, pairs, config.max_length)
        schedule = batch_schedule(len(prompts), config.batch_size, config.total_steps(len(prompts)), seed)
        with seeded(seed), attached_lora(t.model, config) as peft_model:

            def step_loss(batch):
                p_f, p_m = pair_probabilities(peft_model, t, req, batch, config.first_token_only)
                return debias_loss(p_f, p_m, config.switches, config.eps)

            history = optimise(peft_model, config, schedule, step_loss, f"debias tuning {t.name}", progress)
            save_adapter(peft_model, folder)
        (folder / "training_log.json").write_text(json.dumps({"key": key, "history": history}, indent=1))

    return AdapterCache(cache_dir).get_or_build(key, build)
