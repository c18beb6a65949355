"""The half-precision error bound of a model, measured at load time and cached.

``--precision exact`` re-checks in fp32 whatever the half-precision error could decide. How
large that error can be is measured, not assumed: the fixed calibration text shipped with the
project (``bias_core/data/precision_calibration.txt``) is scored by the half-precision handle
and by the fp32 one, through the same code paths the audits use, and the largest differences,
times SAFETY, become the bound:

- ``token``: |fp32 - half| log-probability of one token (read at every position of the
  calibration texts computed in half precision);
- ``margin``: the change of a log-probability difference at one position, between fp32's most
  probable token and each of its TOP_K runners-up; greedy decoding re-checks a step whose
  top-2 margin is within it;
- ``per_sqrt_token``: |fp32 - half| of whole sentence and continuation log-likelihoods, over the
  square root of their token count (per-token errors largely cancel in a sum: measured on
  CrowS-Pairs they grow like sqrt(n), not n).

The bound of a sum of n token log-probabilities is SAFETY * max(token, per_sqrt_token * sqrt(n)).
Bounds are cached as JSON keyed by the model and tokenizer fingerprints, the half dtype, the
device, the calibration text's hash and this module's CALIBRATION_VERSION.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bias_core.storage.files import atomic_write_text
from bias_core.storage.result_cache import OLD_FORMAT, canonical_key, checksum, note_rejected

CALIBRATION_VERSION = 1
SAFETY = 2.0
TOP_K = 10


@dataclass(frozen=True)
class PrecisionBound:
    """Calibrated bounds on |fp32 - half| (natural-log units), already times ``safety``."""

    token: float
    margin: float
    per_sqrt_token: float
    safety: float = SAFETY
    measured_on: int = 0  # calibration texts
    half_positions: int = 0  # token positions computed in half precision among them

    def of_sum(self, n_tokens: int) -> float:
        """Bound on the error of a log-likelihood summed over ``n_tokens`` tokens."""
        return max(self.token, self.per_sqrt_token * math.sqrt(max(1, int(n_tokens))))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibration_texts() -> list[str]:
    text = resources.files("bias_core.data").joinpath("precision_calibration.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _texts_for(lm: Any) -> list[str]:
    """The calibration lines, plus a few rendered with the chat template when the model has one
    (GenderPair prompts reach chat models that way); lines too long for the model are left out."""
    tokenizer = lm.tokenizer
    texts = calibration_texts()
    if getattr(tokenizer, "chat_template", None):
        for line in texts[18:22]:
            texts.append(tokenizer.apply_chat_template([{"role": "user", "content": line}], tokenize=False,
                                                       add_generation_prompt=True))
    return [t for t in texts if len(lm.encode(t)) + 1 < lm.max_length]


def _continuations(texts: list[str]) -> list[tuple[str, str]]:
    """(context, continuation) splits: the next word, and the rest of the text, at two points."""
    out = []
    for text in texts:
        words = text.split(" ")
        for cut in {len(words) // 3, 2 * len(words) // 3}:
            if 0 < cut < len(words):
                context = " ".join(words[:cut])
                out.append((context, " " + words[cut]))
                out.append((context, " " + " ".join(words[cut:])))
    return out


def _position_errors(full: Any, half: Any, texts: list[str]) -> tuple[float, float, int]:
    """(max token error, max margin error, half positions) over full-logit passes of ``texts``."""
    encoded = [full.encode(t) for t in texts]
    token = margin = 0.0
    positions = 0
    with torch.inference_mode():
        for batch in half._batches(encoded):
            ids, mask, pos = half._left_pad([encoded[i] for i in batch])
            f = torch.log_softmax(full._forward(ids, mask, pos).logits.float(), dim=-1)
            h = torch.log_softmax(half._forward(ids, mask, pos).logits.float(), dim=-1)
            start = half.fp32_columns
            for row, i in enumerate(batch):
                first = max(start, ids.shape[1] - len(encoded[i]))
                cols = torch.arange(first, ids.shape[1])
                if cols.numel() == 0:
                    continue
                positions += cols.numel()
                nxt = cols[:-1]
                if nxt.numel():
                    target = ids[row, nxt + 1]
                    token = max(token, float((h[row, nxt, target] - f[row, nxt, target]).abs().max()))
                top = f[row, cols].topk(TOP_K, dim=-1).indices
                fd = f[row, cols].gather(-1, top)
                hd = h[row, cols].gather(-1, top)
                change = (fd[:, :1] - fd) - (hd[:, :1] - hd)
                margin = max(margin, float(change.abs().max()))
    return token, margin, positions


def _sum_errors(full: Any, half: Any, texts: list[str]) -> float:
    """Max |fp32 - half| / sqrt(tokens) of sentence and continuation log-likelihoods."""
    ratios = []
    f, h = full.sentence_logprob(texts), half.sentence_logprob(texts)
    for t, a, b in zip(texts, f, h):
        n = len(full.tokenizer(t, add_special_tokens=False)["input_ids"])
        ratios.append(abs(a - b) / math.sqrt(max(1, n)))
    pairs = _continuations(texts)
    f, h = full.loglikelihood(pairs), half.loglikelihood(pairs)
    for (_, cont_ids), a, b in zip(full.split_requests(pairs), f, h):
        ratios.append(abs(a - b) / math.sqrt(max(1, len(cont_ids))))
    return float(max(ratios))


def measure(full: Any, half: Any, safety: float = SAFETY) -> PrecisionBound:
    """Score the calibration text with both engines (uncached: calibration values are not audit
    results) and return the bound."""
    texts = _texts_for(full)
    progress = full.progress, half.progress
    full.progress = half.progress = False
    try:
        token, margin, positions = _position_errors(full, half, texts)
        per_sqrt = _sum_errors(full, half, texts)
    finally:
        full.progress, half.progress = progress
    return PrecisionBound(token=safety * token, margin=safety * margin, per_sqrt_token=safety * per_sqrt,
                          safety=safety, measured_on=len(texts), half_positions=positions)


def _key(full: Any, half: Any) -> dict[str, Any]:
    text = "\n".join(_texts_for(full))
    return {"op": "precision_bound", "version": CALIBRATION_VERSION, "model": full.fingerprint,
            "tokenizer": full.tokenizer_fingerprint, "half": half.cache_identity()["dtype"],
            "device": str(full.device), "torch": torch.__version__, "safety": SAFETY,
            "calibration": hashlib.sha256(text.encode()).hexdigest()}


def calibrated_bound(full: Any, half: Any, cache_dir: Path | None) -> PrecisionBound:
    """The model's bound, from the JSON cache under ``cache_dir/precision`` or measured now.

    A stored bound is used only when its key is this one and its SHA-256 matches (as result-cache
    entries, storage/result_cache.py); any other is measured again, stored, and counted."""
    key = _key(full, half)
    path = digest = None
    if cache_dir is not None:
        digest = hashlib.sha256(canonical_key(key).encode()).hexdigest()
        path = Path(cache_dir) / "precision" / f"{digest}.json"
        if path.is_file():
            stored = _stored_bound(path, key, digest)
            if stored is not None:
                return stored
    bound = measure(full, half)
    if not all(np.isfinite([bound.token, bound.margin, bound.per_sqrt_token])):
        raise RuntimeError(f"{full.name}: the half-precision calibration gave a non-finite error bound {bound}")
    if path is not None and digest is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"key": key, "bound": bound.as_dict(), "sha256": _seal(digest, bound.as_dict())},
                                           indent=1, sort_keys=True))
    return bound


def _seal(digest: str, bound: dict[str, Any]) -> str:
    return checksum(digest, "", json.dumps(bound, sort_keys=True, separators=(",", ":")).encode())


def _stored_bound(path: Path, key: dict[str, Any], digest: str) -> PrecisionBound | None:
    """The bound stored at ``path`` when it proves ``key`` and its value; else None, counted."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(stored, dict) or not isinstance(stored.get("bound"), dict):
            why = "not a calibration"
        elif stored.get("key") != json.loads(json.dumps(key)):
            why = "its stored key is not the key looked up"
        elif "sha256" not in stored:
            why = OLD_FORMAT
        elif stored["sha256"] != _seal(digest, stored["bound"]):
            why = "its value does not match its checksum (edited or corrupt)"
        else:
            return PrecisionBound(**stored["bound"])
    except (OSError, ValueError, TypeError):
        why = "unreadable or not a calibration"
    note_rejected(digest, path, why, why == OLD_FORMAT)
    return None
