"""SEAT-v1 and SEAT-v2 (``SEAT_effect``) on a loaded model's sentence encodings."""

from __future__ import annotations

import numpy as np

from bias_core.metrics.association import PAPER_ALTERNATIVE, association_effect, cosine_rows, weat_effect
from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import ScoringModel
from bias_core.probes.base import Probe
from bias_core.probes.placeholders import CONTEXT_MASK, MASK
from bias_core.probes.seat import WeatProbe


def _embed(lm: ScoringModel, sentences: list[str], desc: str) -> dict[str, np.ndarray]:
    unique = list(dict.fromkeys(sentences))
    emb = np.asarray(lm.embed(unique, desc=desc), dtype=float)
    return dict(zip(unique, emb))


def run_seat_effect(lm: ScoringModel, probe: WeatProbe | Probe, seed: int = 0,
                    alternative: str = PAPER_ALTERNATIVE) -> MetricResult:
    """``SEAT_effect`` for ``seat-v1`` (WEAT effect size) or ``seat-v2`` (paper's SEAT-v2);
    bootstrap CI over target sentences / targets. Both p-values are one-sided, as the paper's
    Appendix A (and WEAT) define the test; ``alternative="two-sided"`` tests as its code does."""
    if isinstance(probe, WeatProbe):
        emb = _embed(lm, probe.sentences, "SEAT-v1: sentence encodings")

        def stack(ss):
            return np.stack([emb[s] for s in ss])

        result = weat_effect(stack(probe.x), stack(probe.y), stack(probe.a), stack(probe.b),
                             x_labels=probe.x, y_labels=probe.y, seed=seed, alternative=alternative)
        result.breakdown["variant"] = "seat-v1 (WEAT)"
        return result
    metas = [it.meta for it in probe.items]
    # Nothing is scored here, so the target's slot is an unscored mask like the attribute's.
    literal = MASK if lm.kind == "causal" else CONTEXT_MASK
    tm = [m["tm"].replace(MASK, CONTEXT_MASK).replace(CONTEXT_MASK, literal) for m in metas]
    am = [m["am"].replace(CONTEXT_MASK, literal) for m in metas]
    emb = _embed(lm, tm + am, "SEAT-v2: masked sentence encodings")
    cos = cosine_rows(np.stack([emb[s] for s in tm]), np.stack([emb[s] for s in am]))
    result = association_effect(
        "SEAT_effect", cos, [m["target"] for m in metas], [m["target_gender"] for m in metas],
        [m["profession_gender"] for m in metas], ids=probe.ids, prompts=probe.prompts, seed=seed,
        attributes=[m["profession"] for m in metas], alternative=alternative)
    result.breakdown["variant"] = "seat-v2 (cos of target-masked and attribute-masked encodings)"
    return result
