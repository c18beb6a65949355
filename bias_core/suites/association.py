"""The association audits (issue 5): each probe's loader and runner, behind ``result(probe, metric)``.

Every runner talks to the model only through the scoring protocol (``sentence_logprob``,
``fill_probs``, ``topk_fills``, ``embed``), so one probe serves causal, masked and seq2seq
models; runners choose the paper's method for the model kind themselves.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bias_core import catalogue
from bias_core.metrics import MetricResult
from bias_core.models.scored_tokens import DEFAULT_CAUSAL_LIKELIHOOD
from bias_core.probes.disclosure import DEFAULT_ARTICLES
from bias_core.suites import ASSOCIATION_CASES
from bias_core.suites.base import Suite


# The DA-Gender paper evaluates Kurita and SEAT on its test split of targets and professions
# (the validation split tunes debiasing methods), so the audit does too.
PAPER_SPLIT = "test"


def _loaders() -> dict[str, Callable[[Path | None], Any]]:
    """probe -> loader(data_dir)."""
    from bias_core.probes import crows_pairs, da_gender, kurita, seat, sentiment_templates, stereoset

    declared = {m.probes[0]: m.probe_loader_function() for m in catalogue.metrics_of("association") if m.probe_loader}
    return {**declared,
        "da-gender": lambda d: da_gender.load_da_gender(),
        "logprob-professions": lambda d: kurita.load_logprob_professions(PAPER_SPLIT),
        "seat-v1": lambda d: seat.load_seat_v1(PAPER_SPLIT),
        "seat-v2": lambda d: seat.load_seat_v2(PAPER_SPLIT),
        "stereoset-gender": stereoset.stereoset_probe,
        "crows-pairs-gender": crows_pairs.crows_pairs_probe,
        "sentiment-templates": lambda d: sentiment_templates.sentiment_templates_probe(),
    }


def _runner(metrics: tuple[str, ...]) -> Callable[..., Any]:
    # one run per probe gives all its metrics (StereoSet: stereo_score and lm_score), so they
    # must name the same runner in the catalogue
    specs = [catalogue.spec(m) for m in metrics]
    if len({s.runner for s in specs}) != 1 or specs[0].runner is None:
        raise RuntimeError(f"catalogue: {', '.join(metrics)} come from one probe but name runners "
                           f"{sorted(str(s.runner) for s in specs)}")
    return specs[0].runner_function()


def _probe_table() -> dict[str, tuple[Callable[[Path | None], Any], Callable[..., Any]]]:
    """probe -> (loader(data_dir), runner(lm, probe, seed) -> MetricResult or {metric: MetricResult})."""
    loaders = _loaders()
    return {probe: (loaders[probe], _runner(metrics)) for probe, metrics in ASSOCIATION_CASES.items()}


def _takes_causal(runner: Callable[..., Any]) -> bool:
    """Runners of probes whose papers compare a causal LM's sentences by likelihood take
    ``causal`` ("mean" per token, the papers' GPT-2 code, or "total"): --causal-likelihood."""
    return "causal" in inspect.signature(runner).parameters


@dataclass
class AssociationAudit(Suite):
    causal_likelihood: str = DEFAULT_CAUSAL_LIKELIHOOD
    articles: str = DEFAULT_ARTICLES
    _table: dict = field(default_factory=_probe_table, repr=False)
    _runs: dict[str, Any] = field(default_factory=dict, repr=False)

    def load_probe(self, name: str) -> Any:
        if name == "da-gender":  # the only association probe whose upstream text has a wrong article
            from bias_core.probes.da_gender import load_da_gender

            return load_da_gender(self.articles)
        return self._table[name][0](self.data_dir)

    def _run(self, probe_name: str) -> Any:
        runner = self._table[probe_name][1]
        options = {"causal": self.causal_likelihood} if _takes_causal(runner) else {}
        return runner(self.lm, self.probe(probe_name), seed=self.seed, **options)

    def compute(self, probe_name: str, metric: str) -> MetricResult:
        # One run per probe: StereoSet yields stereo_score and lm_score from the same scores.
        out = self._remembered(self._runs, probe_name, lambda: self._run(probe_name))
        if isinstance(out, MetricResult):
            if out.metric != metric:
                raise KeyError(f"{probe_name} gives {out.metric}, not {metric}")
            return out
        return out[metric]
