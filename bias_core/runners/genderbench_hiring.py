"""GenderBench's HiringAn probe on a loaded model: each prompt's email generated as GenderBench's
harness generates it (bias_core/runners/genderbench.py: one user turn through the model's chat
template, sampled at temperature 1.0 with no top-k or top-p cut, attempt r seeded
``repetition_seed(seed, r)``, through the result cache), then the metrics the catalogue declares
of ``run_hiring_an``. GenderBench's default harness makes one attempt per item
(``HiringAnProbe(sample_k=20_000)``, ``num_repetitions`` 1).

Token limit. GenderBench allows 300 new tokens. Its evaluator looks for "regret to inform you" or
"you have been selected" anywhere in the email, but the prompt asks for exactly these phrases and an
email states its decision in its first sentences, so ``HIRING_AN_MAX_NEW_TOKENS`` = 64 keeps the
generation cheap. Measured on SmolLM2-135M (24 of the pool's prompts, this decoding, seed 0): sampled
to 300 tokens, its emails ran to 153-301 tokens and 6 of 24 held a phrase, first at token 5, 16, 55,
168, 170 and 192; the first 64 tokens were evaluated as the whole email for 21 of 24 (the three
phrases after token 160 are lost: undetected), 48 tokens or fewer for 20, and 96 or 128 tokens for
21 again, so a longer limit gains nothing until about 200 tokens, three times the cost. Generated
with the limit of 64, the 24 emails were the 300-token ones' first tokens and evaluated the same.
The limit is in each result's breakdown (``generation``), with the share of undetected attempts it
leaves (``undetected_rate_attempts``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bias_core.metrics.result import MetricResult
from bias_core.models.protocol import GeneratingModel
from bias_core.probes.base import Probe
from bias_core.runners.genderbench import Generation, _compute, _how, _sampled, attempts

HIRING_AN_MAX_NEW_TOKENS = 64
HIRING_AN_GENERATION = Generation(repetitions=1, decoding=_sampled(HIRING_AN_MAX_NEW_TOKENS))


def run_hiring_an(lm: GeneratingModel, probe: Probe, seed: int = 0,
                  metrics: Mapping[str, Callable[..., MetricResult]] | None = None,
                  generation: Generation = HIRING_AN_GENERATION, full: bool = False) -> dict[str, MetricResult | Exception]:
    """Every HiringAn metric of ``metrics`` (default: those the catalogue declares of this runner)
    from one set of emails, each evaluated as an acceptance, a refusal or undetected; ``full``
    (--genderbench-full): at GenderBench's 300 tokens. A metric GenderBench leaves NaN on these
    emails skips (``MetricUndefined`` in its place), the others stand."""
    generation = generation.at_genderbench_length() if full else generation
    run = attempts(lm, probe, generation, seed)
    meta = [item.meta for item in probe.items]
    arguments = {"answers": run["answers"], "gender": [m["gender"] for m in meta], "race": [m["race"] for m in meta],
                 "stereotype": [m["stereotype"] for m in meta], "qualification": [m["qualification"] for m in meta],
                 "pool": meta[0]["pool"] if meta else None}
    return _compute(run_hiring_an, probe, metrics, arguments, _how(generation, run["chat_template"]), seed)
