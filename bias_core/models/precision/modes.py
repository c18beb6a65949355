"""Precision modes (``--precision``): ``auto`` (the default: exact on CUDA, fp32 on CPU), ``exact``, ``fp32`` and ``half``.

- ``fp32``: the model as loaded, in fp32: the reference, and today's numbers exactly.
- ``half``: every score and continuation from the half-precision handle (models/precision/half.py): fast, with
  the drift docs/precision.md documents.
- ``exact``: an ExactLM: the half-precision handle does the work, and the fp32 handle re-does
  exactly the items whose outcome the half-precision error could change, judged against the
  model's calibrated bound (models/precision/calibration.py):

  * pairwise decisions: ``sentence_logprob`` / ``loglikelihood`` take the ``pairs`` a runner
    compares (``compared_sentence_logprob`` / ``compared_loglikelihood`` pass them on and
    accept any handle); every item of a pair whose half-precision margin is within the two
    items' bounds is re-scored in fp32, so every listed comparison comes out as fp32's;
  * greedy decoding: models/precision/exact_decoding.py; sampled decoding runs in fp32;
  * continuous values (word probabilities, top-k fills, embeddings) are half-precision values;
    gating/precision_recheck.py decides when a gated metric must be recomputed on ``lm.fp32()``.

Cache: the half handle's values are cached under keys naming the half dtype, the fp32 handle's
under today's fp32 keys, so ``--precision fp32`` and ``exact`` share the fp32 entries and exact
mode caches nothing of its own but its greedy continuations (keyed with ``precision: exact``);
its decisions are re-derived from cached values on every run.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np

from bias_core.errors import AuditUsageError

if TYPE_CHECKING:
    from bias_core.models.precision.calibration import PrecisionBound

PRECISIONS = ("auto", "exact", "fp32", "half")

# Why auto is fp32 on a CPU: on this project's AVX512-BF16 CPU exact scored CrowS-Pairs 1.5x
# slower than fp32 and decoded at 0.64x its speed (benchmarks/RESULTS.md, "--precision exact"):
# the calibrated bound flags ~45% of sentences and nearly every decoded row for an fp32 re-check,
# so exact pays a bf16 pass on top of fp32's work. Both give the same numbers, so auto takes the
# faster one; on CUDA, where half precision is several times faster, exact.
AUTO_CPU_NOTE = ("--precision auto chose fp32 on this CPU: exact (bf16 plus fp32 re-checks) gives the same "
                 "numbers but measured slower than fp32 on CPUs; --precision exact opts in")


def check_precision(value: str) -> str:
    if value not in PRECISIONS:
        raise AuditUsageError(f"--precision {value}: choose one of {', '.join(PRECISIONS)} "
                              "(auto: exact on CUDA, fp32 on CPU; exact: half-precision speed with fp32 decisions; "
                              "fp32: the reference; half: fastest, values drift).")
    return value


def effective_precision(mode: str, device: str) -> str:
    """The mode a run on ``device`` uses: ``auto`` is exact on CUDA and fp32 elsewhere."""
    if mode != "auto":
        return mode
    return "exact" if str(device).startswith("cuda") else "fp32"


@dataclass
class Rechecks:
    """How much work exact mode re-did in fp32, per kind of work: [re-checked, seen]; and the
    seconds its fp32 work took (re-checks, rows decoded in fp32, metrics computed in fp32), which
    is what exact mode costs beyond the half-precision pass."""

    counts: dict[str, list[int]] = field(default_factory=dict)
    seconds: float = 0.0

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        # Each timed call returns host values (lists, numpy), so the device work is done when it ends.
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started

    def add(self, what: str, rechecked: int, seen: int) -> None:
        c = self.counts.setdefault(what, [0, 0])
        c[0] += int(rechecked)
        c[1] += int(seen)

    def snapshot(self) -> dict[str, list[int]]:
        return {k: list(v) for k, v in self.counts.items()}

    @staticmethod
    def delta(before: dict[str, list[int]], after: dict[str, list[int]]) -> dict[str, list[int]]:
        out = {}
        for k, (r, s) in after.items():
            r0, s0 = before.get(k, [0, 0])
            if s - s0:
                out[k] = [r - r0, s - s0]
        return out


def settle_pairs(values: np.ndarray, bounds: np.ndarray, pairs: Sequence[tuple[int, int]],
                 weights: np.ndarray | None, rescore) -> tuple[np.ndarray, int]:
    """Re-score (with ``rescore(indices) -> values``) the items of every pair whose comparison the
    errors ``bounds`` could flip, until none can; returns (values, how many were re-scored).

    A pair (i, j) compares w_i * v_i with w_j * v_j; it is safe when |w_i v_i - w_j v_j| exceeds
    w_i b_i + w_j b_j (b = 0 once re-scored). Re-scoring one item never makes another pair
    unsafe: its value moves by at most its bound while its bound drops to 0.
    """
    values = np.asarray(values, dtype=np.float64).copy()
    bounds = np.asarray(bounds, dtype=np.float64).copy()
    w = np.ones_like(values) if weights is None else np.asarray(weights, dtype=np.float64)
    exact = np.zeros(values.size, dtype=bool)
    if not len(pairs):
        return values, 0
    p = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    while True:
        i, j = p[:, 0], p[:, 1]
        margin = np.abs(w[i] * values[i] - w[j] * values[j])
        close = margin <= w[i] * bounds[i] + w[j] * bounds[j]
        todo = np.unique(np.concatenate([i[close], j[close]]))
        todo = todo[~exact[todo]]
        if todo.size == 0:
            return values, int(exact.sum())
        values[todo] = np.asarray(rescore(todo.tolist()), dtype=np.float64)
        bounds[todo] = 0.0
        exact[todo] = True


class ExactLM:
    """Half-precision work, fp32 decisions: the ``exact`` precision mode (see module doc).

    ``full`` and ``half`` are cached handles (cached.py) on the fp32 and the half-precision
    engine. Anything of the ``ScoringModel`` surface not defined here (name, fingerprint, kind,
    token counts, training, ...) is the fp32 handle's.
    """

    precision = "exact"

    def __init__(self, full: Any, half: Any, bound: "PrecisionBound", note: str = ""):
        self.full, self.half, self.bound, self.note = full, half, bound, note
        self.recheck = True  # tests switch it off to show what it prevents
        self.rechecks = Rechecks()
        self.setup_seconds: dict[str, float] = {}  # apply_precision's: the half copy, the calibration

    def __getattr__(self, name: str) -> Any:
        if name in ("full", "half"):
            raise AttributeError(name)
        return getattr(self.full, name)

    def fp32(self) -> Any:
        """The fp32 handle: the reference view, for recomputing a metric in fp32."""
        return self.full

    # The protocol's members, spelled out: from Python 3.12, isinstance against a runtime-checkable
    # Protocol looks attributes up statically (inspect.getattr_static), so __getattr__ alone left
    # an ExactLM outside ScoringModel there (seen on the GPU machine's Python 3.12).
    name = property(lambda self: self.full.name)
    kind = property(lambda self: self.full.kind)
    fingerprint = property(lambda self: self.full.fingerprint)
    tokenizer_fingerprint = property(lambda self: self.full.tokenizer_fingerprint)
    capabilities = property(lambda self: self.full.capabilities)

    def cache_identity(self) -> dict[str, str]:
        return self.full.cache_identity()

    def cache_stats(self) -> dict[str, Any]:
        return self.full.cache_stats()

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return self.full.token_counts(texts)

    def scored_token_counts(self, texts: Sequence[str]) -> np.ndarray:
        return self.full.scored_token_counts(texts)

    def render_chat(self, text: str) -> str:
        return self.full.render_chat(text)

    def training(self) -> Any:
        return self.full.training()

    def with_adapter(self, folder: str, tag: str) -> Any:
        return self.full.with_adapter(folder, tag)

    @property
    def batch_size(self) -> int:
        return self.half.batch_size

    @batch_size.setter
    def batch_size(self, value: int) -> None:
        self.full.batch_size = self.half.batch_size = value

    @property
    def stats(self) -> dict[str, int]:
        return self.half.stats

    @property
    def half_dtype(self) -> str:
        return self.half.engine.half

    def info(self) -> Any:
        return self.half.info()

    def word_bound(self, words: Sequence[str]) -> float:
        """Calibrated bound on a word's next-word log-probability (its tokens' sum)."""
        return self.bound.of_sum(max(self.full.token_counts([" " + w for w in words])))

    def precision_info(self) -> dict[str, Any]:
        return {"mode": "exact", "half_dtype": self.half_dtype, "fp32_positions": self.half.engine.fp32_positions,
                "bound": self.bound.as_dict(), "rechecked": self.rechecks.snapshot(),
                "fp32_seconds": round(self.rechecks.seconds, 3), "setup_seconds": dict(self.setup_seconds),
                "note": self.note}

    # ----- pairwise decisions ---------------------------------------------------------------------
    def _sum_bounds(self, lengths: Sequence[int]) -> np.ndarray:
        return np.array([self.bound.of_sum(n) for n in lengths], dtype=np.float64)

    def sentence_logprob(self, sentences: Sequence[str], desc: str = "sentence log-probabilities",
                         pairs: Sequence[tuple[int, int]] | None = None,
                         weights: Sequence[float] | None = None) -> np.ndarray:
        """Half-precision values, except that every item of a listed pair the error could decide
        is fp32's (pairs compare value times weight). Without ``pairs``: half-precision values."""
        values = self.half.sentence_logprob(sentences, desc=desc)
        if not pairs:
            return values
        lengths = self.full.token_counts(sentences)
        bounds = self._sum_bounds(lengths) if self.recheck else np.zeros(len(sentences))
        def rescore(idx: list[int]) -> np.ndarray:
            with self.rechecks.timed():
                return self.full.sentence_logprob([sentences[i] for i in idx], desc=f"{desc} (fp32 re-check)")

        out, n = settle_pairs(values, bounds, pairs, None if weights is None else np.asarray(weights, dtype=np.float64),
                              rescore)
        self.rechecks.add("sentences", n, len(set(np.asarray(pairs).ravel().tolist())))
        return out

    def loglikelihood(self, requests: Sequence[tuple[str, str]], desc: str = "scoring",
                      pairs: Sequence[tuple[int, int]] | None = None, weights: Sequence[float] | None = None) -> list[float]:
        """As sentence_logprob, for log P(continuation | context); ``weights`` scale each value in
        the comparisons (a per-character normalisation)."""
        values = np.asarray(self.half.loglikelihood(requests, desc=desc), dtype=np.float64)
        if not pairs:
            return values.tolist()
        lengths = [len(cont) for _, cont in self.full.engine.split_requests(requests)]
        bounds = self._sum_bounds(lengths) if self.recheck else np.zeros(len(requests))
        def rescore(idx: list[int]) -> list[float]:
            with self.rechecks.timed():
                return self.full.loglikelihood([requests[i] for i in idx], desc=f"{desc} (fp32 re-check)")

        out, n = settle_pairs(values, bounds, pairs, None if weights is None else np.asarray(weights), rescore)
        self.rechecks.add("loglikelihood", n, len(set(np.asarray(pairs).ravel().tolist())))
        return out.tolist()

    # ----- continuous values: half precision -------------------------------------------------------
    def word_probs(self, prompts, words, desc: str = "word probabilities") -> np.ndarray:
        return self.half.word_probs(prompts, words, desc=desc)

    def fill_probs(self, texts, words, desc: str = "fill probabilities") -> np.ndarray:
        return self.half.fill_probs(texts, words, desc=desc)

    def topk_fills(self, texts, k: int, desc: str = "top-k fills"):
        return self.half.topk_fills(texts, k, desc=desc)

    def embed(self, sentences, desc: str = "embedding") -> np.ndarray:
        return self.half.embed(sentences, desc=desc)

    # ----- generation ------------------------------------------------------------------------------
    def generate(self, prompts, config=None, seed=0, desc: str = "generating") -> list[str]:
        from bias_core.models.engines.hf.causal import DecodingConfig
        from bias_core.models.precision.exact_decoding import exact_generate

        config = config or DecodingConfig()
        if config.do_sample:
            # A sampled token is exact only if the fp32 distribution is: sample on the fp32 handle.
            with self.rechecks.timed():
                return self.full.generate(prompts, config, seed=seed, desc=desc)
        return exact_generate(self, prompts, config, desc=desc, seed=seed)


def compared_sentence_logprob(lm: Any, sentences: Sequence[str], pairs: Sequence[tuple[int, int]],
                              desc: str = "sentence log-probabilities", weights: Sequence[float] | None = None) -> np.ndarray:
    """``lm.sentence_logprob`` for a runner that compares ``pairs`` of the sentences (each value
    times its weight, e.g. 1 / tokens): with an ExactLM every listed comparison equals fp32's;
    other handles score as usual."""
    if getattr(lm, "precision", None) == "exact" and len(pairs):
        return lm.sentence_logprob(sentences, desc=desc, pairs=pairs, weights=weights)
    return lm.sentence_logprob(sentences, desc=desc)


def compared_loglikelihood(lm: Any, requests: Sequence[tuple[str, str]], pairs: Sequence[tuple[int, int]],
                           desc: str = "scoring", weights: Sequence[float] | None = None) -> list[float]:
    """``lm.loglikelihood`` for a runner that compares ``pairs`` (see compared_sentence_logprob)."""
    if getattr(lm, "precision", None) == "exact":
        return lm.loglikelihood(requests, desc=desc, pairs=pairs, weights=weights)
    return lm.loglikelihood(requests, desc=desc)


def precision_info(lm: Any) -> dict[str, Any]:
    """What the report says about the precision of ``lm``'s numbers."""
    info = getattr(lm, "precision_info", None)
    if callable(info):
        return info()
    return {"mode": getattr(lm, "precision", "fp32"), "note": getattr(lm, "precision_note", "")}


def apply_precision(lm: Any, mode: str, device: str, cache_dir: Any) -> Any:
    """The handle for ``mode`` built on ``lm`` (a cached handle on the transformers engine,
    loaded in fp32), calibrating exact mode's bound. The half handle shares ``lm``'s cache."""
    from bias_core.models.precision.calibration import calibrated_bound
    from bias_core.models.precision.half import HalfCausalLM, half_copy, half_dtype

    check_precision(mode)
    if effective_precision(mode, device) != mode:
        mode = effective_precision(mode, device)
        if mode == "fp32":
            lm.precision, lm.precision_note = "fp32", AUTO_CPU_NOTE
    if mode == "fp32":
        return lm
    dtype, why = half_dtype(device)
    if dtype is None or getattr(lm, "kind", "causal") != "causal":
        if dtype is not None:
            why = (f"{lm.kind} models have no half-precision path yet (the fp32 prefix that keeps the "
                   "attention-sink error small needs a causal model); everything runs in fp32")
        lm.precision = "fp32"
        lm.precision_note = f"--precision {mode}: {why}"
        return lm
    engine = lm.engine
    name = str(dtype).removeprefix("torch.")
    started = time.perf_counter()
    half_model = half_copy(engine.model, dtype)
    plan = getattr(engine, "plan", None)
    if plan is not None:  # a GPU plan made before the copy took its memory: plan again, for both handles
        from bias_core.models.placement.memory import gpu_plan

        plan = engine.plan = gpu_plan(half_model)
    half_engine = HalfCausalLM(model=half_model, tokenizer=engine.tokenizer, name=engine.name,
                               fingerprint=engine.fingerprint, tokenizer_fingerprint=engine.tokenizer_fingerprint,
                               batch_size=engine.batch_size, progress=engine.progress,
                               weights_sha256=engine.weights_sha256,
                               reference=engine.model, half=name, plan=plan,
                               compact_fraction=getattr(engine, "compact_fraction", 0.0))
    half = lm.with_engine(half_engine)
    half.precision = "half"
    half.precision_note = (f"{name} linear layers ({why}); fp32 elsewhere and at the first "
                           f"{half_engine.fp32_positions} positions of every text")
    if mode == "half":
        return half
    copied = time.perf_counter()
    exact = ExactLM(lm, half, calibrated_bound(engine, half_engine, cache_dir), note=half.precision_note)
    exact.setup_seconds = {"half_copy": round(copied - started, 3), "calibration": round(time.perf_counter() - copied, 3)}
    return exact


def rechecks_snapshot(lm: Any) -> dict[str, list[int]]:
    found = getattr(lm, "rechecks", None)
    return found.snapshot() if isinstance(found, Rechecks) else {}


def fp32_seconds(lm: Any) -> float:
    """Seconds of exact mode's fp32 work so far (0 for other handles)."""
    found = getattr(lm, "rechecks", None)
    return found.seconds if isinstance(found, Rechecks) else 0.0


def test_precision_fields(lm: Any, before: dict[str, list[int]], seconds_before: float | None = None) -> dict[str, Any]:
    """What one audit test records about precision (report row and JUnit properties): the mode,
    the calibrated bound, the work re-checked in fp32 while the test ran ([re-checked, seen]) and
    the seconds that fp32 work took (``fp32_s``, where ``seconds_before`` was taken)."""
    info = precision_info(lm)
    fields: dict[str, Any] = {"precision": info["mode"]}
    if "bound" in info:
        b = info["bound"]
        fields["precision_bound"] = (f"token {b['token']:.4g}, margin {b['margin']:.4g}, "
                                     f"per sqrt(token) {b['per_sqrt_token']:.4g} nats (x{b['safety']:g} safety)")
        delta = Rechecks.delta(before, rechecks_snapshot(lm))
        fields["rechecked"] = "; ".join(f"{k} {r}/{s}" for k, (r, s) in sorted(delta.items())) or "none"
        if seconds_before is not None:
            fields["fp32_s"] = round(fp32_seconds(lm) - seconds_before, 3)
    return fields
