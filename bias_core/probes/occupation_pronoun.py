"""The occupation-pronoun probe (WinoBias-style): sentence pairs that differ only in the pronoun
referring to an occupation, pro- or anti-stereotypical by the occupation's gender typing.

Templates ship in ``bias_core/data/occupation_pronouns.json``; the professions and their gender
typing are the DA-Gender paper's (``kurita.json``, test and val splits). Provenance in
``occupation_pronouns.md``.
"""

from __future__ import annotations

from pathlib import Path

from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.kurita import load_data

PROBE_NAME = "occupation-pronouns"
DATA_FILE = "occupation_pronouns.json"
GENDERS = ("male", "female")


def load_occupation_pronouns(data_dir: Path | None = None) -> Probe:
    """One item per (template, profession): ``prompt`` and ``meta["pro"]`` are the
    pro-stereotypical sentence, ``meta["anti"]`` the same sentence with the other pronoun.
    ``data_dir`` is not used: the data ship with the project."""
    data = load_data(DATA_FILE)
    professions = load_data("kurita.json")["professions"]
    pronouns = data["pronouns"]
    items = []
    for t, template in enumerate(data["templates"]):
        for gender in GENDERS:
            other = GENDERS[1 - GENDERS.index(gender)]
            for occupation in (*professions["test"][gender], *professions["val"][gender]):
                pro = template.format(occupation=occupation, pronoun=pronouns[gender])
                anti = template.format(occupation=occupation, pronoun=pronouns[other])
                items.append(ProbeItem(f"t{t}-{occupation.replace(' ', '_')}", pro,
                                       {"pro": pro, "anti": anti, "occupation": occupation,
                                        "occupation_gender": gender, "template": template}))
    return Probe(PROBE_NAME, str(data["version"]), tuple(items),
                 {"source": data["source"], "licence": data["licence"], "loaded_from": "project data"})
