"""This run's ``RunConfig``: what pairing compares between a candidate and its baseline (model
identity, decoding, lexicon, sample sizes, scorers, engine), stored with every run's items."""

from __future__ import annotations

from typing import Any

from bias_core.gating.regression.items import RunConfig, lexicon_sha256

_SCORERS: dict[tuple[str, str], str] = {}


def _scorer(role: str, kind: str) -> str:
    """The classifier ``kind`` resolves to (auto: hub or offline), by name; resolved once."""
    if (role, kind) not in _SCORERS:
        from bias_core import classifiers

        make = classifiers.get_toxicity if role == "toxicity" else classifiers.get_regard
        _SCORERS[(role, kind)] = make(kind, progress=False).name
    return _SCORERS[(role, kind)]


def run_config(settings: Any, lm: Any = None, model: str | None = None, adapter: str | None = None,
               compared: bool = False) -> RunConfig:
    """This run's ``RunConfig``; without ``lm`` (before loading) model, tokenizer and dtype are blank,
    which pairing never requires to match."""
    from bias_core.probes.lexicon import get_lexicon

    extra: dict[str, Any] = {"precision": settings.load.precision}
    fingerprint = tokenizer = dtype = weights = ""
    served: dict[str, str] = {}
    if lm is not None:
        from bias_core.models.placement.devices import of_model

        where = of_model(lm)
        fingerprint, tokenizer, dtype = lm.fingerprint, lm.tokenizer_fingerprint, where["dtype"]
        extra["device"] = where["device"]
        extra["engine"] = lm.info().as_dict()
        weights, served = _model_identity(lm)
    return RunConfig(
        model=model or settings.model_value, model_fingerprint=fingerprint, tokenizer_fingerprint=tokenizer,
        dtype=dtype, adapter=adapter if model else settings.load.adapter, seed=settings.seed,
        decoding={**decodings(settings.genderbench_full),
                  "association": {"causal_likelihood": settings.causal_likelihood}},
        lexicon_sha256=lexicon_sha256(get_lexicon(settings.lexicon).pairs),
        # --sample auto sizes each run by its own gates, so two runs' items could differ: a run
        # compared with a baseline (and the baseline, stored with --sample fixed) uses whole samples.
        sample_sizes={"genderpair": settings.genderpair_sample, "sample": _sample_mode(settings, compared)},
        scorers={"toxicity": _scorer("toxicity", settings.toxicity_classifier),
                 "regard": _scorer("regard", settings.regard_classifier)},
        extra=extra,
        engine=settings.load.engine,
        weights_sha256=weights,
        served=served,
    )


def decodings(genderbench_full: bool = False) -> dict[str, dict[str, Any]]:
    """How every generating runner decodes: per family where its suite decodes (disclosure,
    genderpair), and per probe where a runner takes a ``Generation`` (GenderBench's probes:
    decoding, repetitions, seeding; ``runner_generations``)."""
    from bias_core.suites.disclosure import PAPER_DECODING
    from bias_core.suites.genderpair import GENERATION

    return {"disclosure": PAPER_DECODING.as_key(), "genderpair": GENERATION.as_key(),
            **runner_generations(genderbench_full)}


def runner_generations(full: bool = False) -> dict[str, dict[str, Any]]:
    """probe -> ``Generation.describe()`` of each ``Generation`` a decoded metric's runner takes
    as a default (GenderBench's ``generation=JOBS_LUM_GENERATION``), read from the catalogue and
    the runners' signatures: a probe added with such a runner is recorded, and a baseline decoded
    otherwise refused, without a list here to forget. Its suite offers a runner no ``generation``,
    only ``full`` (--genderbench-full), which a runner taking it applies as here: GenderBench's
    own token limit."""
    import inspect

    from bias_core import catalogue
    from bias_core.runners.genderbench import Generation

    out: dict[str, dict[str, Any]] = {}
    for spec in catalogue.declared():
        if not (spec.decoded and spec.runner):
            continue
        parameters = inspect.signature(spec.runner_function()).parameters
        for parameter in parameters.values():
            generation = parameter.default
            if isinstance(generation, Generation):
                if full and "full" in parameters:
                    generation = generation.at_genderbench_length()
                out.update({probe: generation.describe() for probe in spec.probes})
    return out


def _model_identity(lm: Any) -> tuple[str, dict[str, str]]:
    """(SHA-256 of the weight files the engine read, what is known of a served model). An engine
    that reads weights names their hash in its cache identity ("weights"); a served model
    (an endpoint in its engine card) has none, and is known by its URL, its served name and its
    answers to the canary requests of loading (everything else its cache identity holds)."""
    import hashlib
    import json

    identity = dict(lm.cache_identity()) if hasattr(lm, "cache_identity") else {}
    endpoint = lm.info().endpoint
    if not endpoint:
        return str(identity.get("weights") or ""), {}
    answers = {k: v for k, v in identity.items() if k not in ("engine", "model", "tokenizer", "served", "weights")}
    digest = hashlib.sha256(json.dumps(answers, sort_keys=True, default=str).encode()).hexdigest() if answers else ""
    return "", {"endpoint": endpoint, "model": str(identity.get("served") or ""), "answers": digest}


def _sample_mode(settings: Any, compared: bool) -> str:
    """The sampling a run's items came from: runs with a baseline or --mitigation keep whole samples."""
    mode = getattr(getattr(settings, "sample", None), "mode", "fixed")
    return "fixed" if mode == "auto" and (compared or getattr(settings, "mitigations", ())) else mode
