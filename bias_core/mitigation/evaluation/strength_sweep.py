"""The trade-off sweep driver: every method at every strength of a grid, measured by a callback.

A point's variant is made, measured and dropped before the next one is made, so at most one
debiased copy of the model is held at a time:

- ``cds@r`` / ``er@λ``: a LoRA adapter trained (or found in the adapter cache) and merged into a
  copy of the model (``apply.with_adapter``);
- ``sentence-debias@ρ``: the gender subspace estimated from the leading ρ of the word pairs, its
  projection hooked onto the model for the measurement and removed after
  (``sentence_debias.sentence_debiased``); the defining sentences are represented once for all ρ.

``measure(handle, base)`` returns (results, guards): MetricResults keyed by the bias metric
names of ``tradeoff.BIAS_METRICS`` plus "DA_score", and guard values keyed by name (a float or
a MetricResult). ``base`` is None when the base model itself is measured, else the base model's
results, so a guard such as ``guards.da_score_drop`` can pair them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from bias_core.errors import AuditUsageError
from bias_core.mitigation.evaluation.tradeoff_curves import BASE, METHODS, SweepPoint, check_grid, point_from_results, variant_name
from bias_core.mitigation.methods.corpus_tuning import CorpusTuningConfig, train_cds_adapter, train_er_adapter
from bias_core.mitigation.methods.sentence_debias import SubspaceEstimator, sentence_debiased
from bias_core.mitigation.methods.swap import GenderSwapper
from bias_core.mitigation.training.corpus import DebiasCorpus

log = logging.getLogger(__name__)

Measure = Callable[[Any, "Mapping[str, Any] | None"], "tuple[Mapping[str, Any], Mapping[str, Any]]"]


def default_config(lm: Any) -> CorpusTuningConfig:
    """The paper-like schedule on CUDA, the CPU quick one elsewhere (as the other mitigations)."""
    on_cuda = lm.info().device.startswith("cuda")
    return CorpusTuningConfig.paper() if on_cuda else CorpusTuningConfig.cpu_quick()


@contextlib.contextmanager
def strength_variant(lm: Any, method: str, strength: float, *, corpus: DebiasCorpus, cache_dir: Path | str,
                     seed: int = 0, config: CorpusTuningConfig | None = None, estimator: SubspaceEstimator | None = None,
                     swapper: GenderSwapper | None = None, progress: bool = True) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(a handle on ``lm`` debiased by ``method`` at ``strength``, what was done), for the block."""
    from bias_core.mitigation.training.apply_adapter import with_adapter

    started = time.perf_counter()
    info: dict[str, Any] = {"variant": variant_name(method, strength), **corpus.provenance()}
    if method in ("cds", "er"):
        config = config or default_config(lm)
        train = train_cds_adapter if method == "cds" else train_er_adapter
        folder = train(lm, corpus, strength, config, seed, Path(cache_dir) / "adapters", progress=progress, swapper=swapper)
        info.update(adapter=str(folder), seconds=round(time.perf_counter() - started, 1),
                    config={k: v for k, v in config.hyperparameters().items()
                            if k in ("r", "alpha", "lr", "batch_size", "steps", "epochs", "max_length")})
        yield with_adapter(lm, folder), info
    elif method == "sentence-debias":
        estimator = estimator or SubspaceEstimator(lm, corpus.sentences, swapper, seed=seed)
        basis, sd_info = estimator.subspace(strength)
        info.update(sd_info, seconds=round(time.perf_counter() - started, 1))
        with sentence_debiased(lm, basis) as handle:
            yield handle, info
    else:
        raise AuditUsageError(f"unknown debiasing method {method!r}; choose from {', '.join(METHODS)}.")


# One strength per method when a single variant is asked for (``--mitigation cds``): the values
# the paper's released GPT-2 runs use (gpt2_CDS.slurm, gpt2_ER.slurm, gpt2_sent_debias.slurm).
DEFAULT_STRENGTH = {"cds": 0.9, "er": 0.5, "sentence-debias": 1.0}


def lasting_variant(lm: Any, method: str, strength: float | None = None, *, corpus: DebiasCorpus,
                    cache_dir: Path | str, seed: int = 0, config: CorpusTuningConfig | None = None,
                    sd_max_pairs: int | None = None, progress: bool = True) -> tuple[Any, dict[str, Any]]:
    """(handle, info) for a variant that lives as long as the caller keeps it (a test session):
    an adapter merged into a copy for CDS/ER, a hooked copy of the model for SentenceDebias."""
    from bias_core.mitigation.methods.sentence_debias import debiased_copy

    strength = DEFAULT_STRENGTH[method] if strength is None else float(strength)
    check_grid({method: (strength,)})
    if method == "sentence-debias":
        estimator = SubspaceEstimator(lm, corpus.sentences, max_pairs=sd_max_pairs, seed=seed)
        basis, sd_info = estimator.subspace(strength)
        return debiased_copy(lm, basis), {"variant": variant_name(method, strength), **corpus.provenance(), **sd_info}
    with strength_variant(lm, method, strength, corpus=corpus, cache_dir=cache_dir, seed=seed, config=config,
                          progress=progress) as (handle, info):
        return handle, info


def run_sweep(lm: Any, grid: Mapping[str, Sequence[float]], measure: Measure, *, corpus: DebiasCorpus,
              cache_dir: Path | str, seed: int = 0, config: CorpusTuningConfig | None = None,
              sd_max_pairs: int | None = None, swapper: GenderSwapper | None = None,
              progress: bool = True) -> list[SweepPoint]:
    """The base model's point, then one point per (method, strength) of ``grid``, in grid order."""
    check_grid(grid)
    swapper = swapper or GenderSwapper()
    base_results, base_guards = measure(lm, None)
    points = [point_from_results(BASE, None, base_results, base_guards, corpus.provenance())]
    estimator = None
    for method, strengths in grid.items():
        if method == "sentence-debias":
            estimator = SubspaceEstimator(lm, corpus.sentences, swapper, max_pairs=sd_max_pairs, seed=seed)
        for strength in strengths:
            with strength_variant(lm, method, float(strength), corpus=corpus, cache_dir=cache_dir, seed=seed,
                                  config=config, estimator=estimator, swapper=swapper, progress=progress) as (handle, info):
                started = time.perf_counter()
                results, guards = measure(handle, base_results)
                info["measure_seconds"] = round(time.perf_counter() - started, 1)
            points.append(point_from_results(method, float(strength), results, guards, info))
            log.info("trade-off sweep: %s done (%s)", info["variant"], info)
    return points
