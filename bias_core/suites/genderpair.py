"""The GenderPair audit (GenderCARE, issue 3): generate responses to pair-set prompts, then BPR,
toxicity and regard per gender group, their spread across groups, and robustness to rewording.

Metric names say which regard scorer produced them: ``regard_*`` for the paper's regard model,
``regard_proxy_*`` for the offline VADER sentiment proxy, so a proxy is never reported as regard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from bias_core.errors import ProbeNotApplicable
from bias_core.metrics import MetricResult
from bias_core.models.decoding import DecodingConfig
from bias_core.probes.genderpair import DEFAULT_SAMPLE
from bias_core.suites import ACROSS_GROUPS, GROUP_PROBES, ROBUSTNESS, genderpair_cases, regard_prefix
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
    _runs: dict[str, Any] = field(default_factory=dict, repr=False)
    _scorers: dict[str, Any] = field(default_factory=dict, repr=False)
    SHARED_MEMOS: ClassVar[tuple[str, ...]] = ("_scorers",)

    def sampled_parts(self, probe_name: str) -> tuple[str, ...]:
        return GROUP_PROBES if probe_name == ACROSS_GROUPS else (probe_name,)

    # ----- probes and responses ----------------------------------------------------------------
    def load_probe(self, name: str) -> Any:
        from bias_core.probes import genderpair as gp

        if name in GROUP_PROBES:
            n = None if self.sample is None else max(1, self.sample // len(GROUP_PROBES))
            return gp.group_probe(int(name[-1]), self.data_dir, n=n, seed=self.seed)
        if name == ROBUSTNESS:
            # A quarter of the group sample, under each of the four wordings: as many generations
            # as the group probes, and the paper wording's are shared with theirs when sampled alike.
            n = None if self.sample is None else max(len(GROUP_PROBES), self.sample // 4)
            return gp.robustness_probe(self.data_dir, n=n, seed=self.seed)
        raise KeyError(name)

    def responses(self, name: str) -> dict[str, Any]:
        """{prompts, contexts, responses, records} of one probe, generated and parsed once."""
        return self._remembered(self._runs, name, lambda: self._respond(name))

    def _respond(self, name: str) -> dict[str, Any]:
        from bias_core.probes import genderpair as gp
        from bias_core.runners.genderpair import decide_choices

        if getattr(self.lm, "kind", "causal") != "causal":
            raise ProbeNotApplicable(f"GenderPair needs a generative (causal) model; {self.lm.name} is {self.lm.kind}")
        probe = self.probe(name)
        prompts = [gp.prompt_from_item(item) for item in probe.items]
        contexts = [self.lm.render_chat(p.text) for p in prompts]
        responses = self.lm.generate(contexts, self.decoding, seed=self.seed, desc=f"{name}: generating")
        records = decide_choices(self.lm, probe.items, responses, contexts=contexts)
        return {"probe": probe, "prompts": prompts, "contexts": contexts, "responses": responses, "records": records}

    # ----- classifiers ---------------------------------------------------------------------------
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

    # ----- metrics -------------------------------------------------------------------------------
    def compute(self, probe_name: str, metric: str) -> MetricResult:
        from bias_core.metrics import genderpair as gm

        prefix = "regard"
        if "regard" in metric:
            proxy = bool(getattr(self.scorer("regard"), "is_proxy", False))
            prefix = regard_prefix(proxy)
            if metric not in genderpair_cases(proxy).get(probe_name, ()):
                raise ProbeNotApplicable(f"{metric} is not what this run's regard scorer ({self.scorer('regard').name}) "
                                         f"produces; its metrics are named {prefix}_*")
        if probe_name == ROBUSTNESS:
            return gm.bpr_spread(self.responses(ROBUSTNESS)["records"], seed=self.seed, metric=metric)
        if probe_name == ACROSS_GROUPS:
            return self._across_groups(metric, prefix)
        run = self.responses(probe_name)
        labels = {"ids": run["probe"].ids, "prompts": run["probe"].prompts, "responses": run["responses"]}
        if metric == "BPR":
            return gm.bpr(run["records"], seed=self.seed)
        if metric == "toxicity":
            return gm.toxicity(self._toxicity_scores(probe_name), seed=self.seed, **labels)
        return gm.regard(self._regard_rows(probe_name), "negative", seed=self.seed, metric=metric, **labels)

    def _across_groups(self, metric: str, prefix: str) -> MetricResult:
        from bias_core.metrics import genderpair as gm

        if metric == "BPR_gap":
            return gm.bpr_gap([r for p in GROUP_PROBES for r in self.responses(p)["records"]], seed=self.seed)
        if metric == "toxicity_gap":
            return gm.toxicity_gap({p: self._toxicity_scores(p) for p in GROUP_PROBES}, seed=self.seed)
        gaps = gm.regard_gaps({p: self._regard_rows(p) for p in GROUP_PROBES}, seed=self.seed, prefix=prefix)
        return gaps["positive" if metric.endswith("positive_gap") else "negative"]
