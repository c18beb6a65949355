"""The model that is audited is the model that was given: what ``from_pretrained`` did not read
from the checkpoint is a usage error, never weights silently initialised at random.

transformers fills a parameter the checkpoint lacks (or holds in another shape) with random
values and only logs it; a config.json that unties the output layer from the embeddings
(``tie_word_embeddings: false`` over a checkpoint without ``lm_head.weight``) then audits a model
that writes gibberish, and every gender metric of gibberish passes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bias_core.errors import AuditUsageError, some_of

# Pretraining heads of BERT-family checkpoints that a masked-LM class has no module for (the
# next-sentence head, the pooler): dropping them changes nothing the audit scores. Named in
# the run card, never refused.
UNUSED_HEADS = re.compile(r"(^|\.)pooler\.|(^|\.)cls\.seq_relationship\.")
_SHOW = 5


def check_loading_info(info: Mapping[str, Any], model: Any, where: str, fix: str) -> tuple[str, ...]:
    """Raise when loading initialised, reshaped or dropped a parameter; return the run-card notes
    (checkpoint weights of unused pretraining heads that were dropped)."""
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda m: str(m[0]))
    unexpected = sorted(info.get("unexpected_keys") or ())
    unused = [k for k in unexpected if UNUSED_HEADS.search(k)]
    unexpected = [k for k in unexpected if k not in unused]
    errors = [str(e).splitlines()[0][:200] for e in info.get("error_msgs") or ()]
    problems = []
    if missing:
        problems.append(f"{len(missing)} parameter(s) the checkpoint lacks, which loading fills with random "
                        f"values: {some_of(missing)}")
    if mismatched:
        shown = [f"{name} ({tuple(ckpt)} in the checkpoint, {tuple(built)} in the model)"
                 for name, ckpt, built, *_ in mismatched]
        problems.append(f"{len(mismatched)} parameter(s) whose checkpoint shape differs from the model's, which "
                        f"loading replaces with random values: {some_of(shown)}")
    if unexpected:
        problems.append(f"{len(unexpected)} checkpoint weight(s) the model has no place for, which loading drops: "
                        f"{some_of(unexpected)}")
    if errors:
        problems.append("loading errors: " + "; ".join(errors[:_SHOW]))
    if problems:
        raise AuditUsageError(f"{where}: the model its config.json describes does not match its weights: "
                              f"{'; '.join(problems)}. The audit would score another model than the one given. "
                              f"Fix: {_tie_fix(missing, model) or fix}.")
    if unused:
        return (f"{len(unused)} checkpoint weight(s) of pretraining heads the audited model does not have were not "
                f"loaded: {some_of(unused)}",)
    return ()


def _tie_fix(missing: list[str], model: Any) -> str | None:
    """The common case named precisely: an output layer the config unties, that the checkpoint
    stores only as the shared input embeddings."""
    tied = getattr(model, "_tied_weights_keys", None) or {}
    untied = getattr(getattr(model, "config", None), "tie_word_embeddings", None) is False
    heads = [k for k in missing if k in tied] if isinstance(tied, Mapping) else []
    if not (heads and untied):
        return None
    shares = ", ".join(f"{k} shares {tied[k]}" for k in heads)
    return (f'config.json sets "tie_word_embeddings": false, but the checkpoint stores no {", ".join(heads)} (when '
            f'tied, {shares}). Set "tie_word_embeddings": true in config.json, or save the model again with its '
            "untied output layer (save_pretrained)")
