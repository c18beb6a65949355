"""The Debias Tuning losses of Dong et al. (2024, arXiv:2402.11190, section 5.3).

Pure torch functions on next-word probabilities ``p_female``/``p_male`` of shape
[batch, pairs]: column i holds P(W_f[i] | prompt) and P(W_m[i] | prompt) for the i-th word pair
right after each training prompt, from raw logits (softmax at temperature 1). Each loss is the
differentiable twin of a disclosure metric in ``bias_core.metrics.disclosure``, averaged over
the batch the way the metric averages over prompts:

- L_d (ADD-like): 1/(2B) Σ_x Σ_i [a log(2a/(a+b)) + b log(2b/(a+b))], a = Pf+ε, b = Pm+ε.
  Pulls each female word's probability towards its male counterpart's.
- L_g: 1/B Σ_x Σ_i (Pf + Pm), the gender-word mass. Pushes gendered continuations down
  altogether (a model can have L_d = 0 while still naming a gender every time).
- L_l (GLD-like): 1/B Σ_x |ΣPf − ΣPm| / (ΣPf + ΣPm). Balances the total mass per side, which
  L_d alone does not: L_d weighs a pair by its size, L_l is scale free.

The paper's training code is not in its public repository (only the scripts that load the
trained adapter), so these follow the paper's formulas and the metric definitions, on the same
one-to-one word pairs (``bias_core.probes.lexicon``). The paper sums over the training prompts
(Σ_x); these average over the batch: the same relative weights of the three terms, and a
constant factor (the batch size) that AdamW's update divides out but for its epsilon and weight decay.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DEFAULT_EPS = 1e-10


def _check(p_female: torch.Tensor, p_male: torch.Tensor, name: str) -> None:
    if p_female.shape != p_male.shape:
        raise ValueError(f"{name}: p_female has shape {tuple(p_female.shape)} but p_male has {tuple(p_male.shape)}")
    if p_female.dim() != 2 or p_female.shape[0] == 0 or p_female.shape[1] == 0:
        raise ValueError(f"{name}: expected non-empty [batch, pairs] tensors, got shape {tuple(p_female.shape)}")


def divergence_loss(p_female: torch.Tensor, p_male: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """L_d: the ADD of the batch (mean over prompts of half the per-pair JS-like terms)."""
    _check(p_female, p_male, "divergence_loss")
    if not eps > 0:
        # ε > 0 keeps the log finite and its gradient defined when a probability underflows to 0.
        raise ValueError(f"divergence_loss: eps must be > 0, got {eps}")
    a, b = p_female + eps, p_male + eps
    log_mid = torch.log((a + b) / 2)
    terms = a * (torch.log(a) - log_mid) + b * (torch.log(b) - log_mid)
    return terms.sum(dim=1).mean() / 2


def gender_mass_loss(p_female: torch.Tensor, p_male: torch.Tensor) -> torch.Tensor:
    """L_g: mean over prompts of the summed probability of all gender words (both sides)."""
    _check(p_female, p_male, "gender_mass_loss")
    return (p_female.sum(dim=1) + p_male.sum(dim=1)).mean()


def logit_difference_loss(p_female: torch.Tensor, p_male: torch.Tensor) -> torch.Tensor:
    """L_l: the GLD of the batch; a prompt with no gender mass at all scores 0, as in ``gld``."""
    _check(p_female, p_male, "logit_difference_loss")
    sum_f, sum_m = p_female.sum(dim=1), p_male.sum(dim=1)
    total = sum_f + sum_m
    # Dividing by 1 where total == 0 gives 0/1 = 0 and a zero (not NaN) gradient there.
    safe = torch.where(total > 0, total, torch.ones_like(total))
    return ((sum_f - sum_m).abs() / safe).mean()


@dataclass(frozen=True)
class LossSwitches:
    """Which terms enter the objective; the paper's ablation drops one at a time."""

    divergence: bool = True  # L_d
    gender_mass: bool = True  # L_g
    logit_difference: bool = True  # L_l

    def __post_init__(self) -> None:
        if not (self.divergence or self.gender_mass or self.logit_difference):
            raise ValueError("LossSwitches: all three losses are switched off; enable at least one of L_d, L_g, L_l")

    @property
    def label(self) -> str:
        on = [n for n, flag in (("L_d", self.divergence), ("L_g", self.gender_mass), ("L_l", self.logit_difference)) if flag]
        return "+".join(on)


def debias_loss(
    p_female: torch.Tensor, p_male: torch.Tensor, switches: LossSwitches = LossSwitches(), eps: float = DEFAULT_EPS
) -> tuple[torch.Tensor, dict[str, float]]:
    """The Debias Tuning objective: the sum of the switched-on terms, plus every term's value
    (computed whether on or off, so an ablation run still logs what it did not optimise)."""
    parts = {
        "L_d": divergence_loss(p_female, p_male, eps),
        "L_g": gender_mass_loss(p_female, p_male),
        "L_l": logit_difference_loss(p_female, p_male),
    }
    chosen = [parts["L_d"]] * switches.divergence + [parts["L_g"]] * switches.gender_mass + [parts["L_l"]] * switches.logit_difference
    total = torch.stack(chosen).sum()
    return total, {name: float(value.detach()) for name, value in parts.items()}
