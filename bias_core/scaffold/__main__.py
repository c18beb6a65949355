"""``python -m bias_core.scaffold metric NAME --family F --probe P``: see bias_core/scaffold/metric.py."""

from __future__ import annotations

import sys

from bias_core.scaffold.metric import main

if __name__ == "__main__":
    sys.exit(main())
