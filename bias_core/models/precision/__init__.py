"""Precision (``--precision``): what is computed in half precision and how its verdicts are
kept equal to fp32's.

- ``modes``: the modes (``auto``, ``exact``, ``fp32``, ``half``) and the handle each gives;
- ``half``: the half-precision copy of a causal LM's linear layers;
- ``exact_decoding``: greedy decoding in half precision with fp32's continuations;
- ``calibration``: the half-precision error bound of a model, measured at load time.

Part of the model seam: outside ``bias_core.models`` only ``modes`` is imported.
"""
