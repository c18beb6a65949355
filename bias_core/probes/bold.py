"""BOLD's gender prompts (Dhamala et al., FAccT 2021) as GenderCARE ships them: "Please complete
the following sentence: <Name> is an American actor ...", one file per group (actors,
actresses), read from ``--data-dir``. GenderCARE re-audits its CDA debiasing on them
(``bias_core/mitigation/evaluation/gendercare_reaudit.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bias_core.errors import DataFileError, DataSourceMissing
from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.data_walk import DataWalk
from bias_core.probes.published import CARE, DataDirFile
from bias_core.probes.sources import RESTORE, check_text, csv_records

NAME = "bold-gender"
GROUPS = ("actors", "actresses")
SAMPLE = 100  # prompts per group audited unless told otherwise


def read_bold_csv(path: Path) -> list[dict[str, str]]:
    """The rows with a prompt of one group's file (Type, Name, Prompt), every row checked."""
    rows = []
    for line, row in csv_records(path, {"Prompt"}):
        prompt = check_text(path, f"line {line}", row["Prompt"].strip())
        if not prompt:
            raise DataFileError(f"{path} line {line}: Prompt is empty. {RESTORE}")
        rows.append({"prompt": prompt, "name": row.get("Name", "")})
    return rows


# Read as given, as they always were: not checked against the published copies (SHA-256
# 6c5320b9... with 2,048 actor prompts, b4944012... with 1,156 actress prompts), because the
# re-audit's and the trade-off stand-in corpus's audit tests read small copies under these names.
FILES: dict[str, DataDirFile] = {
    group: DataDirFile((f"GenderCARE-ccs24/bold_gender_{group}_prompts.csv",), f"GenderCARE's BOLD {group} prompts",
                       None, None, CARE, None)
    for group in GROUPS}
#: Where the items come from: both groups' files, each needed (the catalogue's declaration, walked by the loader).
SOURCES = tuple(FILES.values())


def load_bold(data_dir: Path | None = None, seed: int = 0, sample: int | None = SAMPLE) -> Probe:
    """A seeded sample of ``sample`` prompts per group (None: all), each item's ``meta["group"]``
    its group; both files must be there, checked against the published copies."""
    # unlike the other probes' sources these are not alternatives: every one found is kept
    found = {f.source: f.path for f in DataWalk(data_dir, SOURCES)}
    if len(found) < len(SOURCES):
        where = f"--data-dir {data_dir}" if data_dir is not None else "no --data-dir given"
        looked = ", ".join(c for file in SOURCES for c in file.candidates)
        raise DataSourceMissing(f"BOLD gender prompts not available ({where}; looked for {looked}). Fix: pass "
                                "--data-dir with GenderCARE-ccs24/bold_gender_actors_prompts.csv and "
                                "bold_gender_actresses_prompts.csv (GenderCARE's copy of BOLD).")
    paths = {g: found[FILES[g]] for g in GROUPS}
    items = []
    for k, group in enumerate(GROUPS):
        rows = read_bold_csv(paths[group])
        order = np.arange(len(rows))
        if sample is not None and sample < len(rows):
            order = np.sort(np.random.default_rng([seed, k]).permutation(len(rows))[:sample])
        items += [ProbeItem(id=f"{group}-{i}", prompt=rows[i]["prompt"], meta={"group": group, "name": rows[i]["name"]})
                  for i in order.tolist()]
    provenance = {"source": "BOLD (Dhamala et al. 2021) gender prompts, GenderCARE's copy",
                  "loaded_from": " + ".join(map(str, paths.values())), "licence": "CC BY-SA 4.0",
                  "sample": f"{sample} per group, seed {seed}" if sample is not None else "all"}
    return Probe(NAME, "1", tuple(items), provenance)
