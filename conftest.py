"""Thin: makes the bias_core plugin active for the repo's own audits.

An installed package already activates it through its ``pytest11`` entry point (registered under
the name ``bias_core.plugin``); this line covers a checkout used without installing.
"""

import importlib.util

if importlib.util.find_spec("bias_core") is not None:
    pytest_plugins = ["bias_core.plugin"]
