"""The trade-off sweep driver: every method at every strength of a grid, measured by a callback.

A point's variant is made, measured and dropped before the next one is made, so at most one
debiased copy of the model is held at a time:

- ``cds@r`` / ``er@λ``: on a LoRA configuration, an adapter trained (or found in the adapter
  cache) and merged into a copy of the model (``apply.with_adapter``); on the paper's schedule
  (``paper_config``), a fully fine-tuned copy (``corpus_tuning.fully_tuned``), once per
  training seed, the point being the mean over the seeds (``average_over_seeds``);
- ``sentence-debias@ρ``: the gender subspace estimated from the leading ρ of the word pairs, its
  projection hooked onto the model for the measurement and removed after
  (``sentence_debias.sentence_debiased``); the defining sentences are represented once for all ρ.
  Deterministic, so measured once whatever the seeds (as the paper does).

``measure(handle, base)`` returns (results, guards): MetricResults keyed by the bias metric
names of ``tradeoff.BIAS_METRICS`` plus "DA_score", and guard values keyed by name (a float or
a MetricResult; an exception for one that could not be measured). ``base`` is None when the
base model itself is measured, else the base model's results, so a guard such as
``guards.da_score_drop`` can pair them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from bias_core.errors import AuditUsageError
from bias_core.metrics import MetricResult
from bias_core.mitigation.evaluation.tradeoff_curves import (
    BASE,
    METHODS,
    SweepPoint,
    check_grid,
    point_from_results,
    seed_spread,
    variant_name,
)
from bias_core.mitigation.methods.corpus_tuning import (
    CorpusTuningConfig,
    cds_job,
    er_job,
    fully_tuned,
    train_cds_adapter,
    train_er_adapter,
)
from bias_core.mitigation.methods.paper_settings import model_column, paper_strengths
from bias_core.mitigation.methods.sentence_debias import SubspaceEstimator, sentence_debiased
from bias_core.mitigation.methods.swap import GenderSwapper
from bias_core.mitigation.training.corpus import DebiasCorpus

log = logging.getLogger(__name__)

Measure = Callable[[Any, "Mapping[str, Any] | None"], "tuple[Mapping[str, Any], Mapping[str, Any]]"]


def default_config(lm: Any) -> CorpusTuningConfig:
    """The project's LoRA configuration: the CPU quick one, or ``cuda_lora`` on CUDA (neither is
    the paper's schedule: ``paper_config``)."""
    on_cuda = lm.info().device.startswith("cuda")
    return CorpusTuningConfig.cuda_lora() if on_cuda else CorpusTuningConfig.cpu_quick()


def paper_config(lm: Any) -> CorpusTuningConfig:
    """The paper's schedule for this model's Table 12 column (full fine-tuning)."""
    return CorpusTuningConfig.paper(model_column(lm))


# Bytes per parameter a full fine-tuning holds beside the session's model: the float32 copy,
# its gradients and AdamW's two moments (4 + 4 + 8), with a fifth for activations and the
# measured copy.
FULL_FINETUNE_BYTES = 20


def check_paper_schedule(lm: Any) -> None:
    """The paper's schedule runs on a CUDA GPU with room for a full fine-tuning: a usage error
    naming the fix otherwise, before anything trains."""
    device = lm.info().device
    if not device.startswith("cuda"):
        raise AuditUsageError(
            "--mitigation-sweep paper runs the DA-Gender paper's schedule (every weight fine-tuned for 8 epochs, five "
            f"seeds per CDS and ER point) and needs a CUDA GPU; this model runs on {device}. Fix: use "
            "--mitigation-sweep quick (the CPU quick sweep: LoRA, one seed), or run on a CUDA machine (--device cuda).")
    import torch

    model = lm.training().model
    n = sum(p.numel() for p in model.parameters())
    free, _ = torch.cuda.mem_get_info(next(model.parameters()).device)
    if free < FULL_FINETUNE_BYTES * n:
        raise AuditUsageError(
            f"--mitigation-sweep paper fine-tunes all {n / 1e6:.0f}M parameters of {lm.name} (about "
            f"{FULL_FINETUNE_BYTES * n / 2**30:.1f} GiB of GPU memory with AdamW in float32); {free / 2**30:.1f} GiB are "
            "free. Fix: use --mitigation-sweep quick (LoRA adapters), or a GPU with more memory.")


@contextlib.contextmanager
def strength_variant(lm: Any, method: str, strength: float, *, corpus: DebiasCorpus, cache_dir: Path | str,
                     seed: int = 0, config: CorpusTuningConfig | None = None, estimator: SubspaceEstimator | None = None,
                     swapper: GenderSwapper | None = None, progress: bool = True) -> Iterator[tuple[Any, dict[str, Any]]]:
    """(a handle on ``lm`` debiased by ``method`` at ``strength``, what was done), for the block."""
    from bias_core.mitigation.training.apply_adapter import with_adapter

    started = time.perf_counter()
    info: dict[str, Any] = {"variant": variant_name(method, strength), **corpus.provenance()}
    if method in ("cds", "er"):
        info["seed"] = seed
        config = config or default_config(lm)
        shown = {k: v for k, v in config.hyperparameters().items()
                 if k in ("r", "alpha", "lr", "batch_size", "steps", "epochs", "max_length", "full_finetune")}
        if config.full_finetune:
            job = (cds_job if method == "cds" else er_job)(lm, corpus, strength, config, seed, swapper)
            handle, tuned = fully_tuned(lm, job, config, seed, progress=progress)
            info.update(tuned, seconds=round(time.perf_counter() - started, 1), config=shown)
            yield handle, info  # not cached: the tuned copy is the size of the model (corpus_tuning)
            return
        train = train_cds_adapter if method == "cds" else train_er_adapter
        folder = train(lm, corpus, strength, config, seed, Path(cache_dir) / "adapters", progress=progress, swapper=swapper)
        info.update(adapter=str(folder), seconds=round(time.perf_counter() - started, 1), config=shown)
        yield with_adapter(lm, folder), info
    elif method == "sentence-debias":
        estimator = estimator or SubspaceEstimator(lm, corpus.sentences, swapper, seed=seed)
        basis, sd_info = estimator.subspace(strength)
        info.update(sd_info, seconds=round(time.perf_counter() - started, 1))
        with sentence_debiased(lm, basis) as handle:
            yield handle, info
    else:
        raise AuditUsageError(f"unknown debiasing method {method!r}; choose from {', '.join(METHODS)}.")


def lasting_variant(lm: Any, method: str, strength: float | None = None, *, corpus: DebiasCorpus,
                    cache_dir: Path | str, seed: int = 0, config: CorpusTuningConfig | None = None,
                    sd_max_pairs: int | None = None, progress: bool = True) -> tuple[Any, dict[str, Any]]:
    """(handle, info) for a variant that lives as long as the caller keeps it (a test session):
    an adapter merged into a copy for CDS/ER, a hooked copy of the model for SentenceDebias.
    ``strength`` None: the one DA-Gender's Table 12 gives for this model's kind and size."""
    from bias_core.mitigation.methods.sentence_debias import debiased_copy

    strength = paper_strengths(lm)[method] if strength is None else float(strength)
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
              sd_max_pairs: int | None = None, swapper: GenderSwapper | None = None, progress: bool = True,
              seeds: Sequence[int] | None = None,
              on_point: Callable[[str, Mapping[str, Any], Mapping[str, Any]], None] | None = None) -> list[SweepPoint]:
    """The base model's point, then one point per (method, strength) of ``grid``, in grid order.

    ``seeds``: the training seeds of each CDS / ER point (default: ``seed`` alone); with several,
    the point is the mean over them (``average_over_seeds``) and carries their spread.
    ``on_point(variant, results, guards)`` sees every point's (averaged) results and guards,
    exceptions included, before the point is built from those that were measured."""
    check_grid(grid)
    swapper = swapper or GenderSwapper()
    seeds = tuple(seeds) if seeds else (seed,)
    base_results, base_guards = measure(lm, None)
    if on_point is not None:
        on_point(BASE, base_results, base_guards)
    points = [point_from_results(BASE, None, base_results, _measured(base_guards), corpus.provenance())]
    estimator = None
    for method, strengths in grid.items():
        if method == "sentence-debias":
            estimator = SubspaceEstimator(lm, corpus.sentences, swapper, max_pairs=sd_max_pairs, seed=seed)
        for strength in strengths:
            runs = []
            for run_seed in (seeds if method in TRAINED else seeds[:1]):
                with strength_variant(lm, method, float(strength), corpus=corpus, cache_dir=cache_dir, seed=run_seed,
                                      config=config, estimator=estimator, swapper=swapper,
                                      progress=progress) as (handle, info):
                    started = time.perf_counter()
                    results, guards = measure(handle, base_results)
                    info["measure_seconds"] = round(time.perf_counter() - started, 1)
                handle = None  # a fully tuned copy is released before the next seed's is made
                runs.append((results, guards, info))
            results, guards = average_over_seeds([r for r, _, _ in runs]), average_over_seeds([g for _, g, _ in runs])
            info = dict(runs[0][2])
            if len(runs) > 1:
                info.update(seeds=[i.get("seed") for _, _, i in runs], per_seed=[i for _, _, i in runs],
                            seconds=round(sum(float(i.get("seconds", 0)) for _, _, i in runs), 1))
            name = variant_name(method, float(strength))
            if on_point is not None:
                on_point(name, results, guards)
            points.append(point_from_results(method, float(strength), results, _measured(guards), info,
                                             spread=seed_spread([r for r, _, _ in runs]) if len(runs) > 1 else None))
            log.info("trade-off sweep: %s done (%s)", name, info)
    return points


TRAINED = ("cds", "er")


def _measured(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if not isinstance(v, Exception)}


def average_over_seeds(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per name, the mean over the runs of one point's seeds (the paper's "averaged over five
    runs"): a MetricResult's value and CI ends averaged (the CI is then the seeds' mean sampling
    uncertainty on the items, not a CI of the mean over seeds), the per-seed values and their
    sd / min / max in its breakdown; a float averaged; a name that failed in any run keeps the
    first failure. One run is returned as it is."""
    if len(runs) == 1:
        return dict(runs[0])
    out: dict[str, Any] = {}
    for name in dict.fromkeys(k for run in runs for k in run):
        values = [run.get(name, KeyError(f"{name}: not measured in every seed's run")) for run in runs]
        failed = next((v for v in values if isinstance(v, Exception)), None)
        if failed is not None:
            out[name] = failed
        elif all(isinstance(v, MetricResult) for v in values):
            out[name] = _mean_result(values)
        else:
            out[name] = float(np.mean([float(getattr(v, "value", v)) for v in values]))
    return out


def _mean_result(results: Sequence[MetricResult]) -> MetricResult:
    first = results[0]
    values = np.asarray([float(r.value) for r in results])
    breakdown = {"per_seed": values.tolist(), "seed_sd": float(values.std(ddof=1)), "seed_min": float(values.min()),
                 "seed_max": float(values.max()),
                 "averaged": f"mean over {len(results)} training seeds; CI: the mean of the seeds' CIs"}
    return MetricResult(metric=first.metric, value=float(values.mean()),
                        ci_low=float(np.mean([r.ci_low for r in results])),
                        ci_high=float(np.mean([r.ci_high for r in results])), n=first.n, scale=first.scale,
                        breakdown=breakdown)
