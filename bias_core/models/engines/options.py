"""The engine's command-line options (``--engine`` and the options of the engines that take them).

Parsed here into ``LoadOptions`` fields; each engine's ``check`` (models/engines/*.py) validates
them before any model loads, and ``check_options`` refuses an option the chosen engine does not
take (``--engine-url`` with vLLM, ``--tensor-parallel-size`` with an HTTP endpoint, ...).
"""

from __future__ import annotations

from typing import Any, Callable

from bias_core.errors import AuditUsageError
from bias_core.models.engines import BUILTIN, DEFAULT_ENGINE


def add_engine_options(group: Any) -> None:
    group.addoption("--engine", default=DEFAULT_ENGINE,
                    help=f"what runs the model: {', '.join(BUILTIN)} or an installed package's engine "
                         f"(default: {DEFAULT_ENGINE}; docs/engines.md)")
    group.addoption("--engine-url", default=None,
                    help="--engine openai: the server's base URL, e.g. http://127.0.0.1:8000 (requests go there only)")
    group.addoption("--api-key-env", default=None,
                    help="--engine openai: the environment variable holding the API key (never the key itself)")
    group.addoption("--served-model", default=None,
                    help="--engine openai: the model name the server serves (default: its only model)")
    group.addoption("--tensor-parallel-size", default=None, help="--engine vllm: GPUs one model is split over")
    group.addoption("--pipeline-parallel-size", default=None, help="--engine vllm: pipeline stages (nodes, with Ray)")
    group.addoption("--max-concurrency", default=None, help="--engine openai: requests in flight at once (default: 8)")
    group.addoption("--request-timeout", default=None,
                    help="--engine openai: seconds one try of a request may take, connection to last byte (default: 120)")
    group.addoption("--max-response-mb", default=None,
                    help="--engine openai: the largest answer read from the server, in MiB (default: 16)")


def _number(option: str, value: Any, kind: Callable[[str], Any]) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except (TypeError, ValueError):
        what, example = ("a positive integer", "2") if kind is int else \
            ("a positive number of MiB", "16") if option.endswith("-mb") else ("a positive number of seconds", "60")
        raise AuditUsageError(f"{option} {value}: must be {what}. Fix: e.g. {option} {example}.") from None


def engine_fields(opt: Callable[[str], Any]) -> dict[str, Any]:
    """``LoadOptions`` keyword arguments from the command line's engine options."""
    return {"engine": opt("--engine"), "engine_url": opt("--engine-url"), "api_key_env": opt("--api-key-env"),
            "served_model": opt("--served-model"),
            "tensor_parallel_size": _number("--tensor-parallel-size", opt("--tensor-parallel-size"), int),
            "pipeline_parallel_size": _number("--pipeline-parallel-size", opt("--pipeline-parallel-size"), int),
            "max_concurrency": _number("--max-concurrency", opt("--max-concurrency"), int),
            "request_timeout": _number("--request-timeout", opt("--request-timeout"), float),
            "max_response_mb": _number("--max-response-mb", opt("--max-response-mb"), float),
            "adapters_expected": any(opt(o, None) for o in ("--adapter", "--baseline-adapter", "--mitigation",
                                                             "--mitigation-sweep"))}
