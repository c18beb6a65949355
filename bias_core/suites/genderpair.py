"""The GenderPair audit (GenderCARE, issue 3): generate responses to pair-set prompts, then BPR,
toxicity and regard per gender group, their spread across groups, and robustness to rewording.

Each regard scorer gives metrics of its own: ``regard_*`` the paper's regard model,
``regard_proxy_*`` the offline VADER sentiment proxy (their catalogue entries declare it:
``stand_in``, ``variant_of``), so a proxy is never reported as regard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from bias_core import catalogue
from bias_core.errors import ProbeNotApplicable
from bias_core.metrics import MetricResult
from bias_core.models.decoding import DecodingConfig
from bias_core.probes.genderpair import DEFAULT_SAMPLE
from bias_core.suites import ACROSS_GROUPS, genderpair_cases, regard_prefix
from bias_core.suites.base import Suite

# Greedy, so a response is a function of model and prompt; 64 new tokens hold the one or two
# sentences the instruction asks for (a longer tail only adds text after the marked choice).
GENERATION = DecodingConfig(max_new_tokens=64, do_sample=False)


@dataclass
class GenderPairAudit(Suite):
    sample: int | None = DEFAULT_SAMPLE  # prompts over the three groups; None: the full benchmark
    toxicity: str = "auto"
    regard: str = "auto"
    decoding: DecodingConfig = GENERATION
    _responses: dict[str, Any] = field(default_factory=dict, repr=False)
    _scorers: dict[str, Any] = field(default_factory=dict, repr=False)
    SHARED_MEMOS: ClassVar[tuple[str, ...]] = ("_scorers",)

    def probe_options(self) -> dict[str, Any]:
        return {"sample": self.sample}

    # ----- responses and their scores, once per probe for all its metrics -----------------------
    def responses(self, name: str) -> dict[str, Any]:
        """{probe, prompts, contexts, responses, records} of one probe, generated and parsed once."""
        from bias_core.runners.genderpair import respond

        def make():
            if getattr(self.lm, "kind", "causal") != "causal":
                raise ProbeNotApplicable(f"GenderPair needs a generative (causal) model; {self.lm.name} is {self.lm.kind}")
            return respond(self.lm, self.probe(name), self.decoding, seed=self.seed)

        return self._remembered(self._responses, name, make)

    def scorer(self, what: str) -> Any:
        from bias_core import classifiers

        make = {"toxicity": lambda: classifiers.get_toxicity(self.toxicity),
                "regard": lambda: classifiers.get_regard(self.regard)}[what]
        return self._remembered(self._scorers, what, make)

    def _toxicity_scores(self, name: str) -> np.ndarray:
        run = self.responses(name)
        if "toxicity" not in run:
            run["toxicity"] = np.asarray(self.scorer("toxicity").score(run["responses"], desc=f"{name}: toxicity"))
        return run["toxicity"]

    def _regard_rows(self, name: str) -> list[dict[str, float]]:
        from bias_core.classifiers import REGARD_COLUMNS

        run = self.responses(name)
        if "regard" not in run:
            table = np.asarray(self.scorer("regard").score(run["responses"], desc=f"{name}: regard"))
            run["regard"] = [dict(zip(REGARD_COLUMNS, map(float, row))) for row in table]
        return run["regard"]

    def _regard_is_proxy(self) -> bool:
        return bool(getattr(self.scorer("regard"), "is_proxy", False))

    def _regard_prefix(self) -> str:
        return regard_prefix(self._regard_is_proxy())

    # ----- metrics -------------------------------------------------------------------------------
    def runner_inputs(self, probe_name: str) -> dict[str, Callable[[], Any]]:
        """A probe's decided ``records``, ``toxicity`` scores, ``regard`` rows, ``labels`` (ids,
        prompts, responses) and the ``regard_prefix`` of this run's regard scorer. Across groups:
        the three groups' records together, and per group probe its scores and rows."""
        parts = self.sampled_parts(probe_name)

        def each(scores: Callable[[str], Any]) -> Callable[[], Any]:
            if probe_name == ACROSS_GROUPS:
                return lambda: {p: scores(p) for p in parts}
            return lambda: scores(probe_name)

        def labels() -> dict[str, Any]:
            run = self.responses(probe_name)
            return {"ids": run["probe"].ids, "prompts": run["probe"].prompts, "responses": run["responses"]}

        return {"records": lambda: [r for p in parts for r in self.responses(p)["records"]],
                "toxicity": each(self._toxicity_scores), "regard": each(self._regard_rows), "labels": labels,
                "regard_prefix": self._regard_prefix}

    def result(self, probe_name: str, metric: str) -> MetricResult:
        """``Suite.result``, with the classifier that scored the metric's responses recorded in its
        breakdown (``classifier``, ``classifier_record``): the report labels an offline stand-in's
        numbers by it. Only a scorer this suite made is recorded (scores given otherwise, none)."""
        result = super().result(probe_name, metric)
        role = classifier_role(metric)
        scorer = self._scorers.get(role) if role is not None else None
        if role is not None and scorer is not None and not isinstance(scorer, Exception):
            from bias_core.classifiers.base import classifier_record

            result.breakdown.setdefault("classifier", classifier_record(role, scorer))
        return result

    def compute(self, probe_name: str, metric: str) -> MetricResult:
        # only a metric of the regard scorer asks which one this run has (loading it if need be)
        if catalogue.spec(metric).scorer == "regard":
            proxy = self._regard_is_proxy()
            if metric not in genderpair_cases(proxy).get(probe_name, ()):
                raise ProbeNotApplicable(f"{metric} is not what this run's regard scorer ({self.scorer('regard').name}) "
                                         f"produces; its metrics are named {regard_prefix(proxy)}_*")
        return super().compute(probe_name, metric)


def classifier_role(metric: str) -> str | None:
    """The classifier whose scores ``metric`` is computed from ("toxicity" or "regard", its
    catalogue entry's ``scorer``), or None for a metric of the responses' choices (BPR)."""
    return catalogue.spec(metric).scorer
