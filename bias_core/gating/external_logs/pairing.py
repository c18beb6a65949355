"""Pairing two logs' samples of one task x metric: the same sample id AND the same content.

An id alone is not enough: lm-eval's ``doc_id`` is a position in the task's documents, so another
data file or ``process_docs`` gives the same ids to other documents; inspect's ids are the data
set's. A pair needs equal identity digests as well (lm-eval's doc, prompt and target hashes;
inspect's input hash). Samples on one side only, samples whose digests differ, and samples
without a value on one side are left out and counted; more than ``max_share`` of them (the
project's ``MAX_MISSING_SHARE``, 5%, the release gate's ``--baseline-max-missing``) and the row is
an error: what is left may be the samples that happen to agree.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from bias_core.errors import BaselineMismatch
from bias_core.gating.external_logs.records import ExternalItem, MetricLog
from bias_core.gating.regression.pairing import MAX_MISSING_SHARE, PairedItems

_SHOW = 5


@dataclass(frozen=True)
class Unpaired:
    """Samples of one row left out of the comparison, by why."""

    only_candidate: int = 0
    only_baseline: int = 0
    identity_differs: int = 0
    no_value_candidate: int = 0
    no_value_baseline: int = 0
    examples: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return (self.only_candidate + self.only_baseline + self.identity_differs + self.no_value_candidate
                + self.no_value_baseline)

    def describe(self, where: str = "baseline") -> str:
        parts = [f"{n} {what}" for n, what in (
            (self.only_candidate, "only in the candidate"), (self.only_baseline, f"only in the {where}"),
            (self.identity_differs, "with the same id but other content (hashes differ)"),
            (self.no_value_candidate, "without a value in the candidate"),
            (self.no_value_baseline, f"without a value in the {where}")) if n]
        return ", ".join(parts) or "none"


def _key(item: ExternalItem, ignore: Collection[str]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in item.identity if k not in ignore)


def pair_metric(candidate: MetricLog, baseline: MetricLog, ignore: Collection[str] = (),
                max_share: float = MAX_MISSING_SHARE, where: str = "baseline") -> tuple[PairedItems, Unpaired]:
    """The pairs of one row in the baseline's order, and what was left out; ``BaselineMismatch``
    when more than ``max_share`` of the samples are left out or none pair. ``ignore`` names identity
    digests not to compare (``prompt_hash`` when a chat template differs, by ``allow``)."""
    what = f"{candidate.task} {candidate.metric}" + (f" (filter {candidate.filter})" if candidate.filter != "none" else "")
    cand = {it.id: it for it in candidate.items}
    base = {it.id: it for it in baseline.items}
    ids, examples = [], []
    only_c = [i for i in cand if i not in base]
    only_b = [i for i in base if i not in cand]
    differs = no_c = no_b = unused = 0
    for i in (i for i in base if i in cand):
        b, c = base[i], cand[i]
        if _key(b, ignore) != _key(c, ignore):
            differs += 1
            examples.append(f"{i!r} ({', '.join(k for (k, v), (_, w) in zip(_key(b, ignore), _key(c, ignore)) if v != w)})")
        elif b.value is None and c.value is None:
            unused += 1
        elif c.value is None:
            no_c += 1
        elif b.value is None:
            no_b += 1
        else:
            ids.append(i)
    examples = [f"{i!r} (only in the candidate)" for i in only_c[:_SHOW]] + [
        f"{i!r} (only in the {where})" for i in only_b[:_SHOW]] + examples
    unpaired = Unpaired(len(only_c), len(only_b), differs, no_c, no_b, tuple(examples[:_SHOW]))
    n_items = len(ids) + unpaired.total
    fix = (f"Fix: run both sides on the same documents (same data, task version and limit); if only the prompt's "
           f"formatting differs (another chat template), allow={{'prompt_hash'}}; to accept more left out, raise "
           f"max_missing_share (now {max_share:g}).")
    if not ids:
        raise BaselineMismatch(f"{what}: no sample of the candidate ({candidate.source}) pairs with the {where} "
                               f"({baseline.source}): {unpaired.describe(where)}; e.g. {', '.join(unpaired.examples)}. {fix}")
    if unpaired.total / n_items > max_share:
        raise BaselineMismatch(
            f"{what}: only {len(ids)} of {n_items} samples pair between the candidate ({candidate.source}) and the "
            f"{where} ({baseline.source}): {unpaired.describe(where)} ({100 * unpaired.total / n_items:.0f}% left out, "
            f"more than the {100 * max_share:g}% a comparison may leave out); e.g. {', '.join(unpaired.examples)}. {fix}")
    paired = PairedItems(
        probe=candidate.task, metric=candidate.metric, ids=tuple(ids),
        candidate=np.array([cand[i].value for i in ids], dtype=np.float64),
        baseline=np.array([base[i].value for i in ids], dtype=np.float64),
        groups=None, prompts=tuple(base[i].prompt for i in ids),
        candidate_output=tuple(cand[i].output for i in ids), baseline_output=tuple(base[i].output for i in ids),
        candidate_value=float(candidate.reported or 0.0), baseline_value=float(baseline.reported or 0.0),
        n_dropped=unpaired.total, missing_candidate=len(only_b) + no_c, missing_baseline=len(only_c) + no_b,
        n_unused=unused,
    )
    return paired, unpaired
