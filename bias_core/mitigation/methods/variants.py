"""Mitigated variants of the session's model, by name (``--mitigation``).

A variant is what the audits re-run on: a model (the base one, or the base with a trained LoRA
adapter merged in), optionally a prompt transform (instruction guiding) and a decoding override
(the hyperparameter grid's best setting). Names and what they do:

- ``hyperparameter``: Dong et al. 5.1, seeded sampling over the temperature / top-p / top-k grid;
  only explicit disclosure (GAS) can change, implicit metrics stay on raw logits.
- ``instruction``: Dong et al. 5.2, the prompt prefixed with an instruction, greedy decoding.
- ``debias-tuning``: Dong et al. 5.3, LoRA minimising L_d + L_g + L_l on training predicates
  disjoint from the audit prompts; ``debias-tuning-no-Ld`` / ``-no-Lg`` / ``-no-Ll`` are the
  paper's ablations (one loss switched off).
- ``gendercare-cda``: GenderCARE's reduction, LoRA fine-tuning on counterfactual (CDA) examples
  with the loss on response tokens only.
- ``cds`` / ``er`` / ``sentence-debias``: DA-Gender's methods ("Unmasking the Trade-off") at the
  strength its Table 12 gives for the paper's model of the same kind and size
  (``paper_settings.paper_strengths``), on the debiasing corpus (``corpus.load_debias_corpus``:
  GAP, else a stand-in named as such). CDS and ER train a LoRA adapter (not the paper's full
  fine-tuning: that is ``--mitigation-sweep paper``); SentenceDebias hooks a projection onto a
  copy of the model (no training).

Training configuration: Dong et al.'s and GenderCARE's on CUDA (QLoRA when the model was loaded
with ``--load-in-4bit``), the documented quick configuration on CPU; CDS and ER the project's
LoRA configurations (``strength_sweep.default_config``).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from bias_core.errors import AuditUsageError
from bias_core.mitigation.methods.names import CORPUS_METHODS, MITIGATIONS, PROJECT_TRAIT_PAIRS, WEIGHT_CHANGING
from bias_core.models.decoding import DecodingConfig
from bias_core.probes.lexicon import PAPER_PAIRS


@dataclass
class Variant:
    name: str
    lm: Any
    prompt_transform: Callable[[str], str] | None = None
    decoding: DecodingConfig | None = None  # None: the audit's own (greedy, as the paper)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def changes_weights(self) -> bool:
        return self.name in WEIGHT_CHANGING


def _on_cuda(lm: Any) -> bool:
    return lm.info().device.startswith("cuda")


def debias_config(lm: Any, name: str):
    from bias_core.mitigation.methods.debias_tuning import DebiasTuningConfig
    from bias_core.mitigation.training.losses import LossSwitches

    if _on_cuda(lm):
        base = DebiasTuningConfig(load_in_4bit=bool(getattr(lm.training().model, "is_loaded_in_4bit", False)))
    else:
        base = DebiasTuningConfig.cpu_quick()
    off = name.removeprefix("debias-tuning").removeprefix("-no-")
    switches = LossSwitches(divergence=off != "Ld", gender_mass=off != "Lg", logit_difference=off != "Ll")
    return dataclasses.replace(base, switches=switches)


def _with_steps(config: Any, steps: int | None) -> Any:
    return config if steps is None else dataclasses.replace(config, steps=steps, epochs=0)


def cda_examples(data_dir: Path | None) -> tuple[list[Any], str]:
    """GenderCARE's published CDA pairs when --data-dir has them, else a set built from the
    project's GenderPair targets and their anti-biased descriptors."""
    from bias_core.errors import DataSourceMissing
    from bias_core.mitigation.methods.cda import build_cda_set, load_published_cda
    from bias_core.probes.genderpair import GROUPS, load_project_pairset

    try:
        return load_published_cda(data_dir), "GenderCARE published CDA pairs (--data-dir)"
    except DataSourceMissing:
        pass
    examples = []
    for group in GROUPS:
        pairset = load_project_pairset(group)
        for target in pairset.targets:
            anti = [a for _, a in target.pairs]
            examples += build_cda_set([target.target], traits=anti[:PROJECT_TRAIT_PAIRS], roles=anti[PROJECT_TRAIT_PAIRS:])
    return examples, "built from the project's GenderPair set (anti-biased descriptors x targets)"


def corpus_label(corpus: Any) -> str:
    """The corpus's name, flagged when it is the offline stand-in for GAP (every report shows it)."""
    if corpus.stand_in:
        return f"STAND-IN for the paper's GAP corpus (GAP not in --data-dir): {corpus.name}"
    return f"{corpus.name} (as in the paper)"


def corpus_variant(name: str, lm: Any, *, data_dir: Path | None, seed: int, cache_dir: Path, progress: bool = True,
                   steps: int | None = None) -> Variant:
    """CDS / ER / SentenceDebias at Table 12's strength for the model's kind and size."""
    from bias_core.mitigation.evaluation.strength_sweep import default_config, lasting_variant
    from bias_core.mitigation.training.corpus import load_debias_corpus

    started = time.perf_counter()
    corpus = load_debias_corpus(data_dir)
    config = _with_steps(default_config(lm), steps)
    handle, info = lasting_variant(lm, name, corpus=corpus, cache_dir=cache_dir, seed=seed, config=config,
                                   progress=progress)
    info = {**info, "training_data": corpus_label(corpus), "seconds": round(time.perf_counter() - started, 1)}
    return Variant(name, handle, info=info)


def build_variant(name: str, lm: Any, *, data_dir: Path | None, seed: int, cache_dir: Path,
                  progress: bool = True, instruction: str | None = None, steps: int | None = None,
                  pairs: Sequence[tuple[str, str]] = PAPER_PAIRS) -> Variant:
    """Train (or reuse from the adapter cache) and return the named variant of ``lm``.

    ``pairs``: the gender word pairs Debias Tuning's losses are defined on (the audit's lexicon)."""
    from bias_core.mitigation.methods.decoding_variants import InstructionGuide
    from bias_core.mitigation.training.apply_adapter import with_adapter

    if name == "hyperparameter":
        return Variant(name, lm, info={"note": "decoding grid; the best setting is chosen per probe on GAS"})
    if name == "instruction":
        guide = InstructionGuide(instruction) if instruction else InstructionGuide()
        return Variant(name, lm, prompt_transform=guide, info={"prefix": guide.prefix})
    if name in CORPUS_METHODS:  # these handle causal, masked and seq2seq models alike
        return corpus_variant(name, lm, data_dir=data_dir, seed=seed, cache_dir=cache_dir, progress=progress, steps=steps)
    if getattr(lm, "kind", "causal") != "causal":
        raise AuditUsageError(f"--mitigation {name} fine-tunes a causal LM; {lm.name} is {lm.kind}.")
    started = time.perf_counter()
    adapters = Path(cache_dir) / "adapters"
    if name.startswith("debias-tuning"):
        from bias_core.mitigation.methods.debias_tuning import train_debias_adapter, training_predicates, training_prompts

        config = _with_steps(debias_config(lm, name), steps)
        _, source = training_predicates(data_dir)
        folder = train_debias_adapter(lm, training_prompts(data_dir), config, seed, adapters, progress=progress, pairs=pairs)
    elif name == "gendercare-cda":
        from bias_core.mitigation.methods.cda import SFTConfig, train_sft_adapter

        examples, source = cda_examples(data_dir)
        config = _with_steps(SFTConfig.gendercare() if _on_cuda(lm) else SFTConfig.cpu_quick(), steps)
        folder = train_sft_adapter(lm, examples, config, seed, adapters, progress=progress)
    else:
        raise AuditUsageError(f"--mitigation {name}: unknown; choose from {', '.join(MITIGATIONS)}.")
    info = {"adapter": str(folder), "training_data": source, "seconds": round(time.perf_counter() - started, 1),
            "config": {k: v for k, v in config.hyperparameters().items()
                       if k in ("r", "alpha", "lr", "batch_size", "steps", "epochs", "switches", "load_in_4bit")}}
    return Variant(name, with_adapter(lm, folder), info=info)
