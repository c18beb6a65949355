"""Which suite audits a family: the project's own families here, another package's through the
extension registry (bias_core.pytest_plugin.hookspec). The plugin and the regression session's live baseline
both make their suites here, so neither lists the families."""

from __future__ import annotations

from typing import Any, Callable

from bias_core.pytest_plugin.options import AuditSettings
from bias_core.pytest_plugin.session_state import plan, sampling, terminal


def _precision_check(lm, settings: AuditSettings):
    """--precision exact: the suites' results must have fp32's verdicts (bias_core/gating/precision_recheck.py)."""
    if getattr(lm, "precision", None) != "exact" or settings.thresholds is None:
        return None
    from bias_core.gating.precision_recheck import ExactGate

    return ExactGate(lambda metric, probe: settings.thresholds.lookup(metric, probe, settings.model_value),
                     propagated_in_fp32=bool(settings.mitigations))


def _disclosure(lm, settings: AuditSettings, common: dict[str, Any], config):
    from bias_core.probes.lexicon import get_lexicon
    from bias_core.suites.disclosure import DisclosureAudit

    return DisclosureAudit(lm, **common, lexicon=get_lexicon(settings.lexicon), articles=settings.articles,
                           precision_check=_precision_check(lm, settings))


def _association(lm, settings: AuditSettings, common: dict[str, Any], config):
    from bias_core.suites.association import AssociationAudit

    return AssociationAudit(lm, **common, causal_likelihood=settings.causal_likelihood, articles=settings.articles,
                            precision_check=_precision_check(lm, settings))


def _genderpair(lm, settings: AuditSettings, common: dict[str, Any], config):
    from bias_core.suites import GROUP_PROBES
    from bias_core.suites.genderpair import GenderPairAudit

    sampled = config is not None and plan(config).samples(GROUP_PROBES[0])
    return GenderPairAudit(lm, **common, sample=None if sampled else settings.genderpair_sample,
                           toxicity=settings.toxicity_classifier, regard=settings.regard_classifier)


def _genderbench(lm, settings: AuditSettings, common: dict[str, Any], config):
    from bias_core.suites.genderbench import GenderBenchAudit

    return GenderBenchAudit(lm, **common, full=settings.genderbench_full)


#: The project's families -> (lm, settings, common suite arguments, pytest config or None) -> suite.
BUILTIN: dict[str, Callable[..., Any]] = {"disclosure": _disclosure, "association": _association,
                                          "genderpair": _genderpair, "genderbench": _genderbench}


def make_suite(family: str, lm, settings: AuditSettings, config=None):
    """The audit suite of ``family`` on ``lm`` (the session model, or a live regression baseline);
    with ``config``, the run's sample plan sizes its probes and its computations show progress
    bars. ``lm`` None: for loading probes only, as the run will load them (so ``config`` too, where
    the plan cuts a probe to its fixed size: a probe's content is that of the items audited)."""
    if family in BUILTIN:
        common = {"data_dir": settings.data_dir, "seed": settings.seed}
        if config is not None:  # --sample: the run's plan (a live baseline shares the candidate's)
            common.update(sampling(config, settings))
        suite = BUILTIN[family](lm, settings, common, config)
    else:
        from bias_core.pytest_plugin.extensions import EXTENSIONS

        if family not in EXTENSIONS.suites:
            raise KeyError(f"no suite for family {family!r}: neither the project's ({', '.join(BUILTIN)}) nor "
                           f"registered by an installed package ({', '.join(EXTENSIONS.suites) or 'none'})")
        suite = EXTENSIONS.suites[family](lm, settings, dict(EXTENSIONS.probes))
    return suite if config is None or lm is None else WithTerminal(suite, config)


class WithTerminal:
    """Runs a suite's computations with capture suspended, so progress bars show."""

    def __init__(self, suite, config):
        self._suite, self._config = suite, config

    @property
    def suite(self):
        """The wrapped suite, for code that must hand it on (the mitigation audit's originals)."""
        return self._suite

    def __getattr__(self, name):
        found = getattr(self._suite, name)
        if not callable(found):
            return found

        def with_terminal(*args, **kwargs):
            with terminal(self._config):
                return found(*args, **kwargs)

        return with_terminal
