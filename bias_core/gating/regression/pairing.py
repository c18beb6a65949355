"""Pairing a candidate run with a baseline: same configuration, same probes, same items.

Everything that would make per-item differences mean something other than "the model changed"
is refused with ``BaselineMismatch`` (a usage error), naming what differs: the seed, decoding,
lexicon, sample sizes or scorers (``RunConfig.MUST_MATCH``), a probe's version or content, or
its items. Model, tokenizer and dtype may differ: prompts are text, and the comparison is
between models; ``ConfigComparison`` says which of them differ so the report can state it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bias_core.errors import BaselineMismatch, some_of
from bias_core.gating.regression.items import ItemsFile, MetricItems, RunConfig

_SHOW = 5
# The largest share of a probe's items that may lack a value in either run before its comparison
# errors (--baseline-max-missing): the paired metrics give every item a value, but for GenderPair's
# BPR, whose undecided responses have none.
MAX_MISSING_SHARE = 0.05


def _show(ids: Sequence[Any]) -> str:
    return some_of([repr(i) for i in ids], _SHOW)


def _brief(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)[:200]


@dataclass(frozen=True)
class ConfigComparison:
    """What differs between two runs that pairing allows to differ, and what is known of it.

    ``same_model`` is true only when both runs recorded the SHA-256 of the weight files they read
    and those (and the fingerprints, which carry an adapter) are equal. A served model's weights
    are never seen (``served``: what is known instead); a file from before weights were recorded
    leaves them ``unverified``."""

    same_model: bool
    dtype_differs: bool
    tokenizer_differs: bool
    candidate_dtype: str
    baseline_dtype: str
    engine: str = ""  # the engine both runs used (pairing refuses two engines)
    unverified: str = ""  # why the weights could not be compared ("" when they were)
    served: tuple[str, ...] = ()  # for served models: endpoint, name, answers to the canary requests

    def describe(self) -> str:
        if self.served:
            parts = ["served model: weights not verifiable", *self.served]
        elif self.unverified:
            parts = [f"model weights not verified ({self.unverified})"]
        else:
            parts = ["same model weights" if self.same_model else "different model weights"]
        if self.served and not self.dtype_differs:
            parts.append(f"dtype not known ({self.candidate_dtype or 'unknown'})")
        elif self.dtype_differs:
            parts.append(f"different dtypes (candidate {self.candidate_dtype}, baseline {self.baseline_dtype})")
        else:
            parts.append(f"same dtype ({self.candidate_dtype or 'unknown'})")
        if self.tokenizer_differs:
            parts.append("different tokenizers (prompts are paired as text)")
        if self.engine:
            parts.append(f"engine {self.engine} in both runs")
        return "; ".join(parts)


def _same_or_not(what: str, candidate: str, baseline: str) -> str:
    if candidate == baseline:
        return f"same {what}" + (f" ({candidate})" if candidate and len(candidate) < 80 else "")
    return f"different {what} (candidate {candidate or 'unknown'}, baseline {baseline or 'unknown'})"


def _served(candidate: RunConfig, baseline: RunConfig) -> tuple[str, ...]:
    """What two runs of a served model know of it: the local folder (tokenizer and config, not the
    served weights), the endpoint, the served name, and whether its answers to the canary requests
    of loading were equal (a digest: equal answers do not prove equal weights; different ones
    prove different models or serving)."""
    c, b = candidate.served, baseline.served
    local = "same local folder" if candidate.model_fingerprint == baseline.model_fingerprint else "different local folders"
    out = [f"{local} (tokenizer and config; not the served weights)",
           _same_or_not("endpoint", c.get("endpoint", ""), b.get("endpoint", "")),
           _same_or_not("served model name", c.get("model", ""), b.get("model", ""))]
    if c.get("answers") and b.get("answers"):
        out.append("same answers to the canary requests" if c["answers"] == b["answers"]
                   else "different answers to the canary requests (another model or another serving)")
    else:
        out.append("answers to the canary requests not recorded")
    return tuple(out)


def _unverified(candidate: RunConfig, baseline: RunConfig) -> str:
    missing = [name for name, run in (("candidate", candidate), ("baseline", baseline)) if not run.weights_sha256]
    if not missing:
        return ""
    return (f"the {' and the '.join(missing)} recorded no hash of {'their' if len(missing) > 1 else 'its'} weight files"
            + (": its items were written by an older bias-core" if missing == ["baseline"] else ""))


def check_configs(candidate: RunConfig, baseline: RunConfig, where: str = "baseline") -> ConfigComparison:
    """Refuse a baseline made with another seed, decoding, lexicon, sample size or scorer."""
    problems = []
    for name in RunConfig.MUST_MATCH:
        c, b = getattr(candidate, name), getattr(baseline, name)
        if c == b:
            continue
        if isinstance(c, dict) and isinstance(b, dict):
            keys = sorted(k for k in set(c) | set(b) if c.get(k) != b.get(k))
            both = [k for k in keys if c.get(k) is not None and b.get(k) is not None]
            # probes or families one run never recorded (e.g. added since the baseline): named, not
            # dumped, so that the values both runs hold stay readable
            one = {side: [k for k in keys if run.get(k) is None] for side, run in (("baseline", b), ("candidate", c))}
            detail = "; ".join([f"{k}: candidate {_brief(c.get(k))}, baseline {_brief(b.get(k))}" for k in both]
                               + [f"not recorded by the {side}: {some_of(ks, 6)}" for side, ks in one.items() if ks])
        else:
            detail = f"candidate {_brief(c)}, baseline {_brief(b)}"
        problems.append(f"{name} differs ({detail})")
    engines = (candidate.engine or "transformers", baseline.engine or "transformers")
    if engines[0] != engines[1]:
        problems.append(f"engine differs (candidate {engines[0]}, baseline {engines[1]}): two engines' numbers differ "
                        "in their last digits and near-ties, so the comparison would measure the engines, not the models")
    if candidate.dtype and baseline.dtype and candidate.dtype != baseline.dtype:
        problems.append(f"dtype differs (candidate {candidate.dtype}, baseline {baseline.dtype}): half precision moves "
                        "log-likelihoods by up to a few nats, more than the changes the gate looks for")
    if problems:
        raise BaselineMismatch(
            f"{where} was made with another configuration: " + "; ".join(problems)
            + ". Fix: re-run the baseline with the candidate's options (or the candidate with the baseline's)."
        )
    served = _served(candidate, baseline) if candidate.served or baseline.served else ()
    unverified = "" if served else _unverified(candidate, baseline)
    return ConfigComparison(
        same_model=not (served or unverified) and candidate.weights_sha256 == baseline.weights_sha256
        and bool(candidate.model_fingerprint) and candidate.model_fingerprint == baseline.model_fingerprint,
        dtype_differs=candidate.dtype != baseline.dtype,
        tokenizer_differs=candidate.tokenizer_fingerprint != baseline.tokenizer_fingerprint,
        candidate_dtype=candidate.dtype,
        baseline_dtype=baseline.dtype,
        engine=engines[0],
        unverified=unverified,
        served=served,
    )


def check_probes(candidate: Mapping[str, tuple[str, str]], baseline: ItemsFile, where: str = "baseline") -> None:
    """``candidate``: probe -> (version, content sha256) of this run's probes (known before any
    model loads). Refuses probes the baseline lacks or holds in another version or content."""
    stored: dict[str, tuple[str, str]] = {}
    for block in baseline.blocks.values():
        stored.setdefault(block.probe, (block.probe_version, block.probe_sha256))
    problems = []
    missing = sorted(p for p in candidate if p not in stored)
    if missing:
        problems.append(f"{len(missing)} probe(s) not in the baseline: {_show(missing)}")
    for probe in sorted(p for p in candidate if p in stored):
        (cv, ch), (bv, bh) = candidate[probe], stored[probe]
        if cv != bv:
            problems.append(f"{probe}: version {cv!r} here, {bv!r} in the baseline")
        elif ch != bh:
            problems.append(f"{probe}: same version {cv!r} but other items or prompts "
                            f"(content {ch[:12]} here, {bh[:12]} in the baseline)")
    if problems:
        truncated = " (its per-item file was cut short)" if baseline.truncated else ""
        raise BaselineMismatch(f"{where}{truncated} does not hold this run's probes: " + "; ".join(problems)
                               + ". Fix: audit the baseline with this bias-core version, data and probe selection.")


@dataclass(frozen=True)
class PairedItems:
    """One probe x metric on the items both runs have a value for, in the baseline's order."""

    probe: str
    metric: str
    ids: tuple[str, ...]
    candidate: np.ndarray
    baseline: np.ndarray
    groups: tuple[str, ...] | None
    prompts: tuple[str, ...]
    candidate_output: tuple[str | None, ...]
    baseline_output: tuple[str | None, ...]
    candidate_value: float  # the metric values as each run reported them
    baseline_value: float
    n_dropped: int = 0  # items the metric uses with a value in one run only (left out of the comparison)
    missing_candidate: int = 0  # of those, items without a value in the candidate
    missing_baseline: int = 0  # and in the baseline
    # items of the probe with a value in neither run: not used by the metric (BBQ's other context
    # condition, WinoGender's female sentences for the gap), never "missing"
    n_unused: int = 0

    @property
    def n_items(self) -> int:
        """The items the metric uses (a value in either run), paired or not."""
        return len(self.ids) + self.n_dropped

    def swapped(self) -> "PairedItems":
        """The same pairs with candidate and baseline exchanged."""
        return PairedItems(self.probe, self.metric, self.ids, self.baseline, self.candidate, self.groups,
                           self.prompts, self.baseline_output, self.candidate_output, self.baseline_value,
                           self.candidate_value, self.n_dropped, self.missing_baseline, self.missing_candidate,
                           self.n_unused)

    def pairs_text(self) -> str:
        """"40 pairs", "3 pairs of 40 items (37 without a value in the baseline)", and the probe's
        items the metric does not use where there are any."""
        return pairs_text(len(self.ids), self.n_items, self.missing_candidate, self.missing_baseline, self.n_unused)


def pairs_text(n: int, n_items: int, missing_candidate: int = 0, missing_baseline: int = 0, unused: int = 0) -> str:
    """How many pairs a comparison stands on, of how many items the metric uses, what of those was
    left out (a value in one run only), and how many of the probe's items the metric does not use
    (the n every report shows)."""
    text = f"{n} pair{'s' if n != 1 else ''}"
    if n_items > n:
        why = [f"{k} without a value in the {side}" for k, side in ((missing_baseline, "baseline"),
                                                                   (missing_candidate, "candidate")) if k]
        text += f" of {n_items} items ({', '.join(why) or f'{n_items - n} unpaired'})"
    if unused:
        text += f"; {unused} other item{'s' if unused != 1 else ''} of the probe not used by this metric"
    return text


def missing_problem(paired: PairedItems, max_share: float = MAX_MISSING_SHARE) -> str | None:
    """Why a comparison would not stand for its metric: more than ``max_share`` of the items the
    metric uses with a value in one run only (None when within it). The rest may be the items that
    happen to agree; a baseline whose items were set to null reads this way, and so does a model
    that leaves many items undecided. Items with a value in neither run are not the metric's
    (another condition's), and are not counted."""
    left_out = paired.n_dropped
    if paired.n_items == 0 or left_out / paired.n_items <= max_share:
        return None
    sides = ", ".join(f"{k} without one in the {side}" for k, side in (
        (paired.missing_baseline, "baseline"), (paired.missing_candidate, "candidate")) if k)
    return (f"{paired.probe} {paired.metric}: only {len(paired.ids)} of the {paired.n_items} items it uses have a value in both "
            f"runs ({sides}): {100 * left_out / paired.n_items:.0f}% left out, more than the {100 * max_share:g}% a "
            "comparison may leave out (--baseline-max-missing), so no verdict is given. Fix: if the baseline's "
            "items were set to null, copy its run folder again or re-run the baseline audit; if the models "
            "really leave these items undecided, allow it with --baseline-max-missing "
            f"{min(0.99, round(left_out / paired.n_items + 0.005, 2)):g}.")


def pair(candidate: MetricItems, baseline: MetricItems, where: str = "baseline") -> PairedItems:
    """Pair two runs' items of one probe x metric by item id; ``BaselineMismatch`` when the item
    sets, probe versions or contents differ (naming counts and the first differing ids)."""
    what = f"{candidate.probe} {candidate.metric}"
    if candidate.key != baseline.key:
        raise ValueError(f"pair: {what} cannot be paired with {baseline.probe} {baseline.metric}")
    if candidate.probe_version != baseline.probe_version:
        raise BaselineMismatch(f"{what}: probe version {candidate.probe_version!r} here, {baseline.probe_version!r} "
                               f"in the {where}. Fix: audit the baseline with the same probe version.")
    cand = {it.id: it for it in candidate.items}
    base = {it.id: it for it in baseline.items}
    only_c = [i for i in cand if i not in base]
    only_b = [i for i in base if i not in cand]
    if only_c or only_b or candidate.probe_sha256 != baseline.probe_sha256:
        parts = []
        if only_c:
            parts.append(f"{len(only_c)} item(s) only in this run: {_show(only_c)}")
        if only_b:
            parts.append(f"{len(only_b)} item(s) only in the {where}: {_show(only_b)}")
        if not parts:
            changed = [i for i in base if base[i].prompt != cand[i].prompt]
            parts.append("the probe's content differs" + (f"; {len(changed)} prompt(s) differ: {_show(changed)}"
                                                          if changed else " (item metadata)"))
        raise BaselineMismatch(f"{what}: the {where} is not on the same items ({'; '.join(parts)}). "
                               "Fix: audit both with the same probe data, version and sample size.")
    ids = [i for i in base if base[i].value is not None and cand[i].value is not None]
    if not ids:
        raise BaselineMismatch(f"{what}: none of the {len(base)} items has a value in both runs "
                               f"({sum(base[i].value is None for i in base)} without one in the {where}, "
                               f"{sum(cand[i].value is None for i in base)} in this run), so nothing can be paired. "
                               "Fix: re-run the baseline audit, or copy its run folder again.")
    missing_candidate = sum(cand[i].value is None and base[i].value is not None for i in base)
    missing_baseline = sum(base[i].value is None and cand[i].value is not None for i in base)
    groups = None
    if any(base[i].group is not None for i in ids):
        differing = [i for i in ids if base[i].group != cand[i].group]
        if differing:
            raise BaselineMismatch(f"{what}: {len(differing)} item(s) are averaged in another group in the {where}: "
                                   f"{_show(differing)}.")
        groups = tuple(str(base[i].group) for i in ids)
    return PairedItems(
        probe=candidate.probe, metric=candidate.metric, ids=tuple(ids),
        candidate=np.array([cand[i].value for i in ids], dtype=np.float64),
        baseline=np.array([base[i].value for i in ids], dtype=np.float64),
        groups=groups, prompts=tuple(base[i].prompt for i in ids),
        candidate_output=tuple(cand[i].output for i in ids), baseline_output=tuple(base[i].output for i in ids),
        candidate_value=float(candidate.value), baseline_value=float(baseline.value),
        n_dropped=missing_candidate + missing_baseline,
        missing_candidate=missing_candidate, missing_baseline=missing_baseline,
        n_unused=sum(base[i].value is None and cand[i].value is None for i in base),
    )


def pair_runs(candidate: ItemsFile, baseline: ItemsFile, keys: Sequence[tuple[str, str]] | None = None,
              where: str = "baseline") -> tuple[ConfigComparison, dict[tuple[str, str], PairedItems]]:
    """Check the two runs' configurations, then pair every probe x metric in ``keys`` (default:
    all of the candidate's). A key the baseline lacks is a mismatch."""
    comparison = check_configs(candidate.run, baseline.run, where)
    keys = list(candidate.blocks) if keys is None else list(keys)
    missing = [k for k in keys if k not in baseline.blocks]
    if missing:
        cut = " (its per-item file was cut short)" if baseline.truncated else ""
        raise BaselineMismatch(f"the {where}{cut} has no items for {len(missing)} probe x metric(s): "
                               f"{_show([f'{p} {m}' for p, m in missing])}. Fix: audit the baseline with the same "
                               "families and probes, or deselect these.")
    return comparison, {k: pair(candidate.blocks[k], baseline.blocks[k], where) for k in keys}
