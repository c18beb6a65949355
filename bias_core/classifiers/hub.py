"""A Hugging Face sequence classifier as label probabilities, loaded on first use.

Offline (HF_HUB_OFFLINE / BIAS_CORE_OFFLINE) it only looks in the local hub cache, so a model
downloaded once still works and a missing one fails at once with a message naming the fix,
instead of sitting through the hub client's retries.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bias_core.classifiers.base import ClassifierUnavailable, run_in_fixed_blocks
from bias_core.models.progress import progress_bar
from bias_core.probes.sources import online_allowed

# A text's padded width depends on its own length alone (next multiple of this), and a block
# holds texts of one width only, so padding never depends on which texts share a block.
PAD_MULTIPLE = 16
BLOCK_ROWS = 16


class HubLabelProbs:
    def __init__(self, model_id: str, revision: str | None = None, device: str = "cpu", max_length: int = 512, progress: bool = True):
        self.model_id = model_id
        self.revision = revision
        self.device = device
        self.max_length = max_length
        self.progress = progress
        self._model = None
        self._tokenizer = None
        self.labels: tuple[str, ...] = ()

    def _load(self) -> None:
        if self._model is not None:
            return
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        local_only = not online_allowed()
        try:
            kw = {"revision": self.revision, "local_files_only": local_only}
            tokenizer = AutoTokenizer.from_pretrained(self.model_id, **kw)
            model = AutoModelForSequenceClassification.from_pretrained(self.model_id, **kw)
        except (OSError, ValueError) as exc:
            why = ("online loading is off (HF_HUB_OFFLINE/BIAS_CORE_OFFLINE) and it is not in the local hub cache"
                   if local_only else f"{type(exc).__name__}: {str(exc)[:200]}")
            raise ClassifierUnavailable(
                f"classifier model {self.model_id!r} could not be loaded: {why}. Fix: download it once with network "
                f"access (huggingface-cli download {self.model_id}), or choose the offline classifier (kind='offline')."
            ) from exc
        self.labels = tuple(str(model.config.id2label[i]).lower() for i in range(model.config.num_labels))
        self._tokenizer, self._model = tokenizer, model.to(self.device).eval()

    def probs(self, texts: Sequence[str], desc: str) -> tuple[tuple[str, ...], np.ndarray]:
        """(label names, float64 softmax probabilities of shape (n, n_labels))."""
        import torch

        self._load()
        texts = list(texts)
        enc = self._tokenizer(texts, truncation=True, max_length=self.max_length)["input_ids"]
        pad_id = self._tokenizer.pad_token_id if self._tokenizer.pad_token_id is not None else 0
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float64)
        by_width: dict[int, list[int]] = {}
        for i, ids in enumerate(enc):
            by_width.setdefault(-(-len(ids) // PAD_MULTIPLE) * PAD_MULTIPLE, []).append(i)

        def run(width: int, members: list[int]):
            def block(idx: list[int]) -> np.ndarray:
                ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(idx), width), dtype=torch.long)
                for row, j in enumerate(idx):
                    seq = enc[members[j]]
                    ids[row, : len(seq)] = torch.tensor(seq)
                    mask[row, : len(seq)] = 1
                with torch.inference_mode():
                    logits = self._model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
                return torch.softmax(logits.double(), dim=-1).cpu().numpy()

            return run_in_fixed_blocks(len(members), BLOCK_ROWS, block, bar)

        bar = progress_bar(total=len(texts), desc=desc, enabled=self.progress)
        try:
            for width, members in sorted(by_width.items()):
                for j, row in enumerate(run(width, members)):
                    out[members[j]] = row
        finally:
            bar.close()
        return self.labels, out
