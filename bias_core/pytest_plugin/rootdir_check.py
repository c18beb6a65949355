"""Did pytest root the run somewhere else because it read an option's value as a path?

pytest fixes its rootdir before it knows the plugin's options: in ``--cache-dir DIR`` (two
words) it takes ``DIR`` for a path to test, and without a configuration file it roots the run at
the common ancestor of that folder and ``audits/``. The default report folder is then under that
ancestor, and the names of the folders between it and the tests join every test's keywords, so
``-k`` may select more than it names. The run goes on; the warning names the fix.
"""

from __future__ import annotations

from pathlib import Path


def swallowed_values(args: list[str], positional: list[str], invocation_dir: Path) -> list[tuple[str, str]]:
    """(option, value) pairs written as two words whose value is an existing path and not one of
    the run's own positional arguments: the values pytest's rootdir search counted as paths."""
    found = []
    for option, value in zip(args, args[1:]):
        if (option.startswith("--") and "=" not in option and not value.startswith("-") and value not in positional
                and (invocation_dir / value).exists()):
            found.append((option, value))
    return found


def rootdir_notice(config) -> str | None:
    """A warning's text when the run's rootdir is not the one its own paths give, else None."""
    if getattr(config.option, "inifilename", None) or getattr(config.option, "rootdir", None):
        return None  # chosen by the user (-c, --rootdir)
    params = config.invocation_params
    positional = [str(a) for a in config.args]
    swallowed = swallowed_values([str(a) for a in params.args], positional, params.dir)
    if not swallowed:
        return None
    try:  # pytest's own search, on the run's positional arguments alone (a private API: skip if it moves)
        from _pytest.config.findpaths import determine_setup

        expected = determine_setup(inifile=None, override_ini=None, args=positional, rootdir_cmd_arg=None,
                                   invocation_dir=params.dir)[0]
    except Exception:  # noqa: BLE001
        return None
    if Path(expected) == Path(config.rootpath):
        return None
    option, value = swallowed[0]
    return (f"pytest rooted this run at {config.rootpath}, not {expected}: with no pytest configuration file in the "
            f"project it read the value of {', '.join(o for o, _ in swallowed)} as a path to test. Reports go to "
            f"{config.rootpath}/reports unless --report-dir says otherwise, and -k also matches the names of the "
            f"folders between. Fix: add a pytest.ini (or [tool.pytest.ini_options] in pyproject.toml) to the project, "
            f"or write {option}={value}.")
