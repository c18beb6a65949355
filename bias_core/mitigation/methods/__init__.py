"""Debiasing methods: each makes a mitigated variant of the session's model.

- ``variants``: the variants by name (``--mitigation``); ``names``: the names, light to import;
- ``debias_tuning``: Debias Tuning (Dong et al. 2024); ``cda``: GenderCARE's CDA fine-tuning;
- ``corpus_tuning``: CDS and ER fine-tuning; ``sentence_debias``: SentenceDebias (DA-Gender);
- ``decoding_variants``: the decoding-hyperparameter sweep and instruction guiding;
- ``swap``: gender swapping of running text (CDS, ER, SentenceDebias).

May import ``mitigation.training``, the model seam, ``probes``, ``metrics`` and ``errors``.
A new method goes here, with its name in ``names`` and ``variants``.
"""
