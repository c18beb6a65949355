"""The ``pytest11`` entry point (and the name the repo's conftest.py activates): loads the plugin.

The plugin itself is the package ``bias_core.pytest_plugin``: its hooks in ``hooks``, its
fixtures in ``fixtures``. This module keeps the entry point's name stable for ``-p no:bias_core.plugin`` and
for installed packages that name it; pytest imports what ``pytest_plugins`` lists when it
registers a module, whether from an entry point or a conftest.py.
"""

pytest_plugins = ["bias_core.pytest_plugin.hooks", "bias_core.pytest_plugin.fixtures"]
