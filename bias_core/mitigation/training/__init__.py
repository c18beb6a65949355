"""Fine-tuning plumbing the methods share: no method of its own.

- ``lora``: LoRA configuration, seeding, batch schedules and the optimiser loop;
- ``losses``: the Debias Tuning losses; ``objectives``: each model kind's pretraining objective
  and the ER loss;
- ``corpus``: the text corpus CDS, ER and SentenceDebias train on;
- ``adapter_cache``: trained adapters cached on disk; ``apply_adapter``: a trained adapter
  applied to the session's model.

May import the model seam (``lm.training()``), ``probes``, ``storage`` and ``errors``.
"""
