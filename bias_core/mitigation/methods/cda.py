"""GenderCARE's debiasing fine-tuning (Tang et al., CCS 2024, arXiv:2408.12494): supervised
LoRA fine-tuning on a counterfactual (CDA) set of anti-biased descriptor pairs.

Each example asks for a text using a gender target (a noun or a name) and an anti-biased
descriptor (e.g. "nurturing" for a male target, "decisive" for a female one), and answers with
a sentence of the same sentiment for every gender group. Offline, the set is built from
``bias_core/data/debias_training_cda_templates.json``: the response frame is picked by the
descriptor alone, so every target, whatever its group, gets the very same sentence around the
same descriptor. With ``--data-dir`` the published CDA pairs
(``GenderCARE-ccs24/merged_3groups_ft_validate.json``: prompt + expert-written sentence) can be
used instead.

The loss is on response tokens only. Upstream (DeepSpeed-Chat ``create_dataset_split``, train
phase 1) sets labels = input_ids over the whole sequence padded to max_seq_len, so the model
was also trained to reproduce the instruction and to predict its own padding tokens.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from bias_core.errors import AuditUsageError, DataSourceMissing
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
from bias_core.probes.published import GENDERCARE_CDA, find_in_data_dir, read_cda_pairs

METHOD = "gendercare-cda-sft"
TEMPLATES_FILE = "debias_training_cda_templates.json"
PUBLISHED_CDA = GENDERCARE_CDA.candidates[0]
IGNORE = -100  # label of tokens that carry no loss (torch cross_entropy's ignore_index)


@dataclass(frozen=True)
class SFTExample:
    prompt: str
    response: str


@dataclass(frozen=True)
class SFTConfig(LoraTrainConfig):
    @classmethod
    def gendercare(cls) -> "SFTConfig":
        """Upstream's run_llama2_13b_debiasing.sh: LoRA dim 128, lr 1e-4, weight decay 0.1,
        Adam betas (0.9, 0.95), cosine schedule without warmup, 2 epochs, batch 8 (4 per GPU x
        2 GPUs), max length 512. Upstream also updated the base weights (it did not pass
        --only_optimize_lora), which no LoRA-only run reproduces; alpha = r (scale 1) here."""
        return cls(r=128, alpha=128, dropout=0.0, lr=1e-4, batch_size=8, steps=0, epochs=2, max_length=512,
                   weight_decay=0.1, betas=(0.9, 0.95), lr_scheduler="cosine")

    @classmethod
    def cpu_quick(cls) -> "SFTConfig":
        """Plain LoRA for SmolLM2-135M on CPU: r=8, alpha=16, lr 5e-4, 100 steps of 8 examples
        (responses of ~20 tokens after ~60-token prompts: a step costs about 4x a Debias Tuning
        step, so 100 steps stays near 10 minutes)."""
        return cls(r=8, alpha=16, dropout=0.05, lr=5e-4, batch_size=8, steps=100, max_length=256,
                   weight_decay=0.1, betas=(0.9, 0.95), lr_scheduler="cosine")


# ----- the CDA set -------------------------------------------------------------------------------
def load_templates() -> dict[str, Any]:
    from bias_core.probes.sources import project_data

    return json.loads(project_data(TEMPLATES_FILE).read_text(encoding="utf-8"))


def _subject(target: str) -> tuple[str, str]:
    """(sentence-initial, mid-sentence) forms: a common noun takes "the", a name stands alone."""
    if target[:1].islower():
        return f"The {target}", f"the {target}"
    return target, target


def _pick(descriptor: str, n: int) -> int:
    # By the descriptor alone (stable across runs, unlike hash()), so all groups get one frame.
    return int.from_bytes(hashlib.sha256(descriptor.encode("utf-8")).digest()[:8], "big") % n


def build_cda_set(
    targets: Sequence[str], traits: Sequence[str] = (), roles: Sequence[str] = (), templates: dict[str, Any] | None = None
) -> list[SFTExample]:
    """targets x anti-biased descriptors, as instruction + same-sentiment response.

    ``traits`` are adjectives ("gentle"), ``roles`` are role nouns ("nurse", "flight
    attendant"): they need different sentence frames. Pass the anti-biased descriptors of each
    target's group (e.g. GenderPair's ``format1_anti`` first elements) with that group's targets.
    """
    if isinstance(targets, str) or isinstance(traits, str) or isinstance(roles, str):
        raise TypeError("build_cda_set: targets, traits and roles must be lists of strings, not one string")
    if not targets or not (traits or roles):
        raise ValueError("build_cda_set: need at least one target and one trait or role")
    tpl = templates or load_templates()
    out = []
    for target in targets:
        Subject, subject = _subject(target)
        for kind, words in (("trait", traits), ("role", roles)):
            frames = tpl[kind]
            for word in words:
                frame = frames[_pick(word, len(frames))]
                response = frame.format(
                    Subject=Subject, subject=subject, mark="{" + word + "}",
                    article="an" if word[:1].lower() in "aeiou" else "a",
                )
                out.append(SFTExample(tpl["instruction"].format(target=target, descriptor=word), response))
    return out


def load_published_cda(data_dir: Path | None) -> list[SFTExample]:
    """The published CDA validation pairs (the training split is not in the public snapshot)."""
    path = find_in_data_dir(data_dir, GENDERCARE_CDA)  # checked against the published copy
    if path is None:
        where = f"--data-dir {data_dir} has no {PUBLISHED_CDA}" if data_dir else "no --data-dir given"
        raise DataSourceMissing(f"GenderCARE CDA pairs not available: {where}. Fix: pass --data-dir pointing at a "
                                "copy of the GenderCARE-ccs24 data, or build the set with build_cda_set.")
    return [SFTExample(prompt, sentence) for prompt, sentence in read_cda_pairs(path)]


# ----- tokenization and the response-only loss ---------------------------------------------------
def encode_example(tokenizer: Any, example: SFTExample, max_length: int) -> tuple[list[int], list[int]]:
    """(input_ids, labels): the prompt (in the model's chat template when it has one) and the
    response followed by EOS; labels are IGNORE over the prompt. Prompt and response are
    tokenized apart, so the boundary is exact whatever the tokenizer merges."""
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": example.prompt}], tokenize=False,
                                             add_generation_prompt=True)
        prompt_ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    else:
        prompt_ids = list(tokenizer(example.prompt + "\n", add_special_tokens=True)["input_ids"])
    response_ids = list(tokenizer(example.response, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]
    if len(prompt_ids) >= max_length:
        raise AuditUsageError(
            f"CDA prompt of {len(prompt_ids)} tokens leaves no room for a response within max_length {max_length}. "
            f"Prompt starts {example.prompt[:80]!r}. Fix: raise max_length or shorten the prompt."
        )
    response_ids = response_ids[: max_length - len(prompt_ids)]
    return prompt_ids + response_ids, [IGNORE] * len(prompt_ids) + response_ids


def collate(encoded: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch; pad positions get attention 0 and label IGNORE."""
    width = max(len(ids) for ids, _ in encoded)
    input_ids = torch.full((len(encoded), width), pad_id, dtype=torch.long)
    labels = torch.full((len(encoded), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, (ids, labs) in enumerate(encoded):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(labs)] = torch.tensor(labs)
        mask[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def response_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood over labelled tokens (position t predicts token t+1)."""
    shifted = labels[:, 1:]
    if not bool((shifted != IGNORE).any()):
        raise ValueError("response_loss: the batch has no response tokens")
    return torch.nn.functional.cross_entropy(
        logits[:, :-1, :].float().reshape(-1, logits.shape[-1]), shifted.reshape(-1), ignore_index=IGNORE
    )


# ----- training ----------------------------------------------------------------------------------
def train_sft_adapter(
    lm: Any, examples: Sequence[SFTExample], config: SFTConfig, seed: int, cache_dir: Path | str, progress: bool = True
) -> Path:
    """Train (or reuse from the cache) a CDA fine-tuning adapter on ``lm``; returns its folder."""
    t = lm.training()  # the torch module and tokenizer (the "training" capability)
    check_quantization(config, t.model)
    examples = list(examples)
    if not examples:
        raise AuditUsageError("CDA fine-tuning: no examples. Fix: build them with build_cda_set or load_published_cda.")
    key = adapter_key(t, METHOD, config.hyperparameters(), data_hash([[e.prompt, e.response] for e in examples]), seed)

    def build(folder: Path) -> None:
        encoded = [encode_example(t.tokenizer, e, config.max_length) for e in examples]
        schedule = batch_schedule(len(examples), config.batch_size, config.total_steps(len(examples)), seed)
        device = t.device
        with seeded(seed), attached_lora(t.model, config) as peft_model:

            def step_loss(batch):
                b = {k: v.to(device) for k, v in collate([encoded[i] for i in batch], t.tokenizer.pad_token_id).items()}
                logits = peft_model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], use_cache=False).logits
                return response_loss(logits, b["labels"]), {}

            history = optimise(peft_model, config, schedule, step_loss, f"CDA fine-tuning {t.name}", progress)
            save_adapter(peft_model, folder)
        (folder / "training_log.json").write_text(json.dumps({"key": key, "history": history}, indent=1))

    return AdapterCache(cache_dir).get_or_build(key, build)
