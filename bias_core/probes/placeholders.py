"""Placeholders a probe writes into its texts; each model kind maps them to its own form.

A leaf module: probes write these and models read them, and neither layer imports the other.
"""

# The placeholder probes write for the slot a model fills; each model kind maps it to its own form.
MASK = "[MASK]"
# A masked-out word that is not scored (Kurita's prior: the attribute hidden while the target
# is scored); masked models put their own mask token there.
CONTEXT_MASK = "[MASK_CONTEXT]"
