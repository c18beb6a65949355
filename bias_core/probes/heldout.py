"""The held-out neutral text the perplexity guard scores (``perplexity_rise``): 154 sentences of
ordinary prose the project wrote, about things, places and weather, with no person in them
(``bias_core/data/heldout_neutral_text.md``)."""

from __future__ import annotations

from pathlib import Path

from bias_core.probes.base import Probe, ProbeItem
from bias_core.probes.sources import project_data, read_lines

NAME = "heldout-neutral-text"
DATA_FILE = "heldout_neutral_text.txt"


def load_heldout_text(data_dir: Path | str | None = None) -> Probe:
    """One item per sentence of the shipped file, whatever ``data_dir`` says: a perplexity-rise
    threshold is calibrated on one fixed text set, and the paper's ``*_neutral_validation.csv``
    files are "My friend ..." predicates of the same kind as the audit and training prompts, not
    independent prose, so swapping them in would change both the baseline and what the guard
    measures between runs."""
    del data_dir
    lines = read_lines(project_data(DATA_FILE), unique="sentence")
    return Probe(NAME, "1", tuple(ProbeItem(f"heldout:{k}", text) for k, text in enumerate(lines)),
                 {"source": "written by the project (bias_core/data/heldout_neutral_text.md)", "licence": "Apache-2.0",
                  "loaded_from": "project data"})
