"""The default audit through each engine, in one run on this machine: time, tokens/s, and how
many gated values and verdicts differ from the reference (the transformers engine, fp32).

    .venv/bin/python benchmarks/bench_engines.py [--data-dir ../shared/data] [--generate 800] [--out DIR]
        [--engines transformers,vllm,vllm-bf16,endpoint] [-- PYTEST ARGS, e.g. -k "bbq or winobias"]

Each engine audits from a fresh result cache (every number computed by that engine): the
transformers engine with this interpreter, vLLM in fp32 and in bf16 with the interpreter that
has vLLM (this one, or .venv-vllm), and the endpoint engine (`--engine openai`, this
interpreter) against vLLM's OpenAI-compatible server in fp32 on 127.0.0.1, started from that
interpreter for the audit and stopped after it. Before the audits (in-process engines only), a generation benchmark: ``--generate``
distinct prompts (the disclosure and GenderPair prompts), greedy, at most 50 new tokens, with
each engine: new tokens/s and continuations identical to the reference's. vLLM instances run
one at a time (the tests' lock file). Prints markdown tables for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = Path(tempfile.gettempdir()) / "bias-core-vllm.lock"
# (label, audit arguments, where it runs: "local" in this interpreter, "vllm" in vLLM's, "server":
# this interpreter's --engine openai against vLLM's OpenAI-compatible server in fp32).
ENGINES = (("transformers fp32", [], "local"), ("vllm fp32", ["--engine", "vllm"], "vllm"),
           ("vllm bf16", ["--engine", "vllm", "--dtype", "bfloat16"], "vllm"),
           ("endpoint fp32", ["--engine", "openai"], "server"))
SHORT = {"transformers fp32": "transformers", "vllm fp32": "vllm", "vllm bf16": "vllm-bf16", "endpoint fp32": "endpoint"}
SERVER_START_S = 900
# A fixed 1e-5, named in the table (relative; absolute for values below 1, as a gender lean of
# 2e-4 has no meaningful relative error): stricter than the tests' fp32 error model
# (tests/tolerances.py) for the probability metrics, whose bounds there are ~1e-4 and up.
TOL = 1e-5

GENERATE = r'''
import json, sys, time
def main():
    from pathlib import Path
    from bias_core.models import DecodingConfig, LoadOptions, load_model, resolve_model
    engine, dtype, cache, prompts_file, out = sys.argv[1:6]
    cache = Path(cache)
    prompts = json.load(open(prompts_file))
    t0 = time.perf_counter()
    lm = load_model(resolve_model("smollm2-135m"), LoadOptions(engine=engine, dtype=dtype, cache_dir=cache,
                                                               use_cache=False, progress=False))
    loaded = time.perf_counter() - t0
    t1 = time.perf_counter()
    texts = lm.generate(prompts, DecodingConfig(max_new_tokens=50))
    seconds = time.perf_counter() - t1
    json.dump({"load_s": loaded, "generate_s": seconds, "new_tokens": lm.stats["new_tokens"], "texts": texts},
              open(out, "w"))
if __name__ == "__main__":
    main()
'''


def vllm_python() -> str | None:
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    candidate = ROOT / ".venv-vllm" / "bin" / "python"
    return str(candidate) if candidate.is_file() else None


def vllm_env() -> dict[str, str]:
    """vLLM's CPU KV cache at 1 GiB unless set: its default takes far more of a 24 GiB machine."""
    return {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}


def run(cmd: list[str], vllm: bool) -> tuple[subprocess.CompletedProcess, float]:
    with one_vllm_at_a_time(vllm):
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=vllm_env(), capture_output=True, text=True)
    return done, time.perf_counter() - start


@contextlib.contextmanager
def one_vllm_at_a_time(vllm: bool = True):
    """vLLM instances take turns (the tests' lock file): two on two cores would each starve."""
    if not vllm:
        yield
        return
    from filelock import FileLock

    with FileLock(str(LOCK), timeout=7200):
        yield


def served_folder(spec, cache_dir: Path) -> str:
    """The folder the server loads: the one the transformers engine reads (a converted GGUF's too)."""
    from bias_core.models import LoadOptions
    from bias_core.models.loading import _weights_dir

    return _weights_dir(spec, LoadOptions(cache_dir=cache_dir))[0]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@contextlib.contextmanager
def vllm_server(vpy: str, folder: str, log: Path, env: dict[str, str] | None = None, start_s: float = SERVER_START_S):
    """vLLM's OpenAI-compatible server on 127.0.0.1 in fp32, stopped on the way out; yields its URL.
    The caller holds one_vllm_at_a_time (tests/test_engine_vllm.py starts it too)."""
    import requests

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [vpy, "-m", "vllm.entrypoints.openai.api_server", "--model", folder, "--dtype", "float32", "--host",
           "127.0.0.1", "--port", str(port), "--served-model-name", "smollm2-135m", "--max-logprobs", "20"]
    if not _cuda():  # as --engine vllm's --torch-compile auto: compiling costs minutes a start on a CPU
        cmd.append("--enforce-eager")
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, cwd=ROOT, env=env or vllm_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + start_s
            while True:
                if server.poll() is not None:
                    raise RuntimeError(f"the vLLM server exited with {server.returncode}: {log.read_text()[-3000:]}")
                try:
                    if requests.get(f"{url}/v1/models", timeout=5).ok:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the vLLM server did not answer within {start_s:.0f} s: {log.read_text()[-3000:]}")
                time.sleep(2)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=60)


def prompts(n: int, data_dir: Path | None) -> list[str]:
    from bias_core.probes.disclosure import natural_default_probe, template_probe

    found = [p for topic in ("occupation", "personality", "hobby", "color") for p in template_probe(topic).prompts]
    found += natural_default_probe().prompts
    from bias_core.probes.genderpair import group_probe

    for group in (1, 2, 3):  # GenderPair's prompts (the project's offline pair sets; --data-dir: the paper's)
        found += [it.prompt for it in group_probe(group, data_dir, n=max(1, n // 3), seed=0).items]
    return list(dict.fromkeys(found))[:n]


def generation(out: Path, n: int, data_dir: Path | None, vpy: str | None, engines: tuple) -> list[str]:
    items = prompts(n, data_dir)
    (out / "prompts.json").write_text(json.dumps(items))
    (out / "generate.py").write_text(GENERATE)
    rows, reference = [], None
    for label, extra, where in engines:
        vllm = where == "vllm"
        if where == "server" or (vllm and vpy is None):
            continue
        python = vpy if vllm else sys.executable
        engine = "vllm" if vllm else "transformers"
        dtype = "bfloat16" if "bf16" in label else "float32"
        target = out / f"generate-{label.replace(' ', '-')}.json"
        done, _ = run([python, str(out / "generate.py"), engine, dtype, str(out / "gen-cache"), str(out / "prompts.json"),
                       str(target)], vllm)
        if done.returncode != 0:
            rows.append(f"| {label} | failed: {done.stderr.strip().splitlines()[-1][:120]} | | | |")
            continue
        got = json.loads(target.read_text())
        reference = reference if reference is not None else got["texts"]
        same = sum(a == b for a, b in zip(got["texts"], reference))
        rows.append(f"| {label} | {got['load_s']:.0f} | {got['new_tokens'] / got['generate_s']:.0f} | "
                    f"{got['new_tokens']} | {same} / {len(reference)} |")
    return [f"Generation: {len(items)} distinct prompts, greedy, at most 50 new tokens",
            "", "| engine | load s | new tokens/s | new tokens | continuations = reference |", "|---|---|---|---|---|", *rows]


def audit(out: Path, data_dir: Path | None, vpy: str | None, extra_args: list[str], engines: tuple) -> list[str]:
    rows, reference = [], None
    for label, extra, where in engines:
        if where != "local" and vpy is None:
            rows.append(f"| {label} | not run: no vLLM here nor in .venv-vllm | | | | | | | |")
            continue
        report = out / f"audit-{label.replace(' ', '-')}"
        cmd = [vpy if where == "vllm" else sys.executable, "-m", "pytest", "audits", "-p", "no:cacheprovider", "-q",
               "--cache-dir", str(out / f"cache-{label.replace(' ', '-')}"), "--report-dir", str(report), *extra,
               *extra_args] + (["--data-dir", str(data_dir)] if data_dir else [])
        if where == "server":
            from bias_core.models import resolve_model

            # converted into the audit's own cache folder, where --engine openai finds its local copy
            folder = served_folder(resolve_model("smollm2-135m"), out / f"cache-{label.replace(' ', '-')}")
            with one_vllm_at_a_time(), vllm_server(vpy, folder, out / f"server-{label.replace(' ', '-')}.log") as url:
                done, seconds = run(cmd + ["--engine-url", url], False)
        else:
            done, seconds = run(cmd, where == "vllm")
        runs = sorted(report.iterdir()) if report.is_dir() else []
        if not runs:
            rows.append(f"| {label} | failed (exit {done.returncode}) | | | | | | | |")
            continue
        doc = json.loads((runs[-1] / "results.json").read_text())
        results = {r["test_id"]: r for r in doc["results"]}
        new_tokens = int((doc["run"].get("engine_stats") or {}).get("new_tokens", 0))
        data = _probe_data(runs[-1])
        if reference is None:
            reference, reference_data = results, data
        gated = [t for t, r in reference.items() if r.get("value") is not None]
        served = [t for t in gated if t in results and results[t].get("value") is not None]
        # A row computed from other items (an environment without a data package falls back to
        # another source) is not an engine difference: counted apart, never as "within".
        other_data = [t for t in served if data.get(_key(results[t])) != reference_data.get(_key(reference[t]))]
        compared = [t for t in served if t not in other_data]
        differ = [t for t in compared if not _close(results[t]["value"], reference[t]["value"])]
        largest = max((abs(results[t]["value"] - reference[t]["value"]) / max(1.0, abs(reference[t]["value"]))
                       for t in compared), default=0.0)
        # A test the engine cannot serve (SEAT without hidden states) is skipped, not a verdict
        # that differs: listed in its own column.
        verdicts = [t for t in reference if t in results and "skipped" not in (results[t]["verdict"], reference[t]["verdict"])
                    and results[t]["verdict"] != reference[t]["verdict"]]
        only_here = [t for t in reference if t in results and results[t]["verdict"] == "skipped" != reference[t]["verdict"]]
        skipped = f"{sum(r['verdict'] == 'skipped' for r in results.values())} {_names(only_here)}".strip()
        rows.append(f"| {label} | {seconds / 60:.1f} | {new_tokens / seconds:.0f} | {len(compared) - len(differ)} / {len(gated)} "
                    f"| {largest:.1e} | {len(verdicts)} {_names(verdicts)} | {skipped} | {len(other_data)} {_names(other_data)} "
                    f"| {runs[-1].name}, exit {done.returncode} |")
        (out / f"differences-{label.replace(' ', '-')}.json").write_text(json.dumps(
            {t: [reference[t].get("value"), results.get(t, {}).get("value"), reference[t]["verdict"],
                 results.get(t, {}).get("verdict")] for t in reference}, indent=1))
    return ["Default audit (`pytest audits`" + (" --data-dir ..." if data_dir else "") + "), fresh cache per engine",
            "", "| engine | minutes | new tokens/s (whole run) | values within 1e-5 of the reference "
            "| largest difference (relative; absolute below 1) | verdicts differing | skipped (those only here) | other data "
            "| run, exit status |",
            "|---|---|---|---|---|---|---|---|---|", *rows]


def _close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def _probe_data(run: Path) -> dict[tuple[str, str], str]:
    """Each (probe, metric)'s content hash of its items: what the regression gate pairs runs by."""
    from bias_core.gating.regression.items import locate_items, read_items

    return {key: block.probe_sha256 for key, block in read_items(locate_items(run)).blocks.items()}


def _key(row: dict) -> tuple[str, str]:
    return row["probe"], row["metric"]


def _names(tests: list[str]) -> str:
    return f"({', '.join(tests[:4])}{' ...' if len(tests) > 4 else ''})" if tests else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--generate", type=int, default=800, help="prompts of the generation benchmark (0: skip it)")
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a new temporary one)")
    parser.add_argument("--no-audit", action="store_true", help="the generation benchmark only")
    parser.add_argument("--engines", default=",".join(SHORT.values()),
                        help=f"which engines, comma-separated, of {', '.join(SHORT.values())} (the reference, "
                             "transformers, always runs first)")
    parser.add_argument("audit_args", nargs="*", help="more arguments for each audit, after --")
    args = parser.parse_args()
    wanted = {name.strip() for name in args.engines.split(",") if name.strip()}
    unknown = wanted - set(SHORT.values())
    if unknown:
        parser.error(f"--engines: unknown {', '.join(sorted(unknown))}; choose from {', '.join(SHORT.values())}")
    engines = tuple(e for e in ENGINES if e[2] == "local" or SHORT[e[0]] in wanted)
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-engines-"))
    out.mkdir(parents=True, exist_ok=True)
    vpy = vllm_python()
    lines = [f"machine: {os.cpu_count()} cores; vLLM from {vpy or 'nowhere (not installed)'}; work folder {out}", ""]
    if args.generate:
        lines += generation(out, args.generate, args.data_dir, vpy, engines) + [""]
        print("\n".join(lines), flush=True)
    if not args.no_audit:
        lines += audit(out, args.data_dir, vpy, args.audit_args, engines)
    print("\n".join(lines))
    (out / "RESULTS-engines.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
