"""Mitigation (issue 4): ``pytest audits --mitigation debias-tuning[,instruction,...]``.

For every named variant the disclosure audit re-runs on the same items; each probe x metric is
a paired comparison with the original (a reduction whose CI must lie above 0, with its
permutation p-value), and a variant that changed the weights must pass the over-debiasing and
damage guards (DA-score, held-out perplexity, StereoSet LM-score). ``gendercare-cda`` is also
re-audited as GenderCARE re-audits its debiasing: GenderPair per group, StereoSet and BOLD, each
a paired reduction (bias_core/mitigation/evaluation/gendercare_reaudit.py).
"""

import pytest

from bias_core import catalogue
from bias_core.mitigation.methods.names import WEIGHT_CHANGING
from bias_core.suites import DISCLOSURE_PROBES, MITIGATION_GUARDS, proxied

NO_MITIGATION = pytest.param(None, None, None, marks=pytest.mark.skip(reason="no --mitigation given"), id="none")
GENDERCARE = "gendercare-cda"
NO_REAUDIT = pytest.param(None, None, None, marks=pytest.mark.skip(reason="no --mitigation gendercare-cda given"),
                          id="no-gendercare-cda")


def _names(config):
    from bias_core.mitigation.methods.names import parse_mitigations

    return parse_mitigations(config.getoption("--mitigation"))


def pytest_generate_tests(metafunc):
    names = _names(metafunc.config)
    if metafunc.function.__name__ == "test_gendercare_reaudit":
        from bias_core.classifiers import get_regard

        proxy = get_regard(metafunc.config.getoption("--regard-classifier")).is_proxy
        cases = [pytest.param(GENDERCARE, p, m.name, id=f"{GENDERCARE}-{p}-{m.name}")
                 for m in catalogue.reaudits() if GENDERCARE in names
                 if m.audited_with(proxied(proxy)) for p in m.probes]
        metafunc.parametrize(("variant", "probe", "metric"), cases or [NO_REAUDIT])
    elif metafunc.function.__name__ == "test_mitigation_reduces_bias":
        cases = [pytest.param(v, p, m.name, id=f"{v}-{p}-{m.name}")
                 for v in names for p in DISCLOSURE_PROBES for m in catalogue.reductions() if p in m.probes]
        metafunc.parametrize(("variant", "probe", "metric"), cases or [NO_MITIGATION])
    else:
        cases = [pytest.param(v, p, m, id=f"{v}-{m}")
                 for v in names if v in WEIGHT_CHANGING for m, p in MITIGATION_GUARDS.items()]
        metafunc.parametrize(("variant", "probe", "metric"), cases or [NO_MITIGATION])


@pytest.mark.audit(family="mitigation")
def test_mitigation_reduces_bias(variant, probe, metric, mitigation_audit, gate):
    result = mitigation_audit.reduction(variant, probe, catalogue.spec(metric).of)
    gate(result, probe=probe, metric=metric, variant=variant)


@pytest.mark.audit(family="mitigation")
def test_mitigation_guard(variant, probe, metric, mitigation_audit, gate):
    gate(mitigation_audit.guard(variant, metric), probe=probe, metric=metric, variant=variant)


@pytest.mark.audit(family="mitigation")
def test_gendercare_reaudit(variant, probe, metric, mitigation_audit, gate):
    gate(mitigation_audit.reaudit(variant, probe, metric), probe=probe, metric=metric, variant=variant)
