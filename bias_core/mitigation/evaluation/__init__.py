"""Did mitigation work, and at what cost: the original and the mitigated model compared.

- ``bias_reduction``: did mitigation lower bias (a paired test on the same items);
- ``guards``: did it remove genuine knowledge or fluency (over-debiasing and damage);
- ``results_table``: the mitigation results table (Dong et al.'s Tables 1-3);
- ``strength_sweep``: every method at every strength of a grid, one variant held at a time;
- ``tradeoff_curves``: the grids, the points, the chosen point and the curves of DA-Gender's
  Figure 2 (the audit family that runs the sweep is ``bias_core.suites.tradeoff``).

May import ``mitigation.methods``, ``mitigation.training``, ``metrics``, ``stats`` and the
model seam.
"""
