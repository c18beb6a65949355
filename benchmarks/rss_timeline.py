"""Where a command's memory peaks: run it, sample the RSS of every process in its tree, and stamp
its output lines with the seconds since the start, so a peak can be matched to the test running.

    .venv/bin/python benchmarks/rss_timeline.py OUT [--every 0.5] -- .venv/bin/python -m pytest audits -v ...

Writes OUT.rss (seconds, the largest process's RSS in GB, the tree's sum in GB; a line every
--every seconds) and OUT.log (the command's output, each line after its time stamp), then prints
the peak and the output line nearest before it (lines are stamped when read from the pipe, so
that line is right to within the pipe's latency: the line just before it may be the one meant). Run the command with PYTHONUNBUFFERED=1 (set
here) so its lines arrive as written. Sampling can miss a spike shorter than --every: for the
exact peak of one process use `/usr/bin/time -v`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def tree_rss_kb(root: int) -> dict[int, int]:
    """RSS (kB) of root and every process below it, read from /proc (Linux)."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/status") as fh:
                rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))
        except (OSError, StopIteration, ValueError, IndexError):
            continue  # gone meanwhile, or a kernel thread without VmRSS
        table[int(entry)] = (ppid, rss)
    found = {root: table[root][1]} if root in table else {}
    frontier = {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier and pid not in found}
        found.update({pid: table[pid][1] for pid in frontier})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="prefix of OUT.rss and OUT.log")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between samples (default 0.5)")
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no command given: put it after --")
    args = parser.parse_args(argv[:argv.index("--")])
    command = argv[argv.index("--") + 1:]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    peak = [0.0, 0.0]

    def sample() -> None:
        with open(f"{args.out}.rss", "w") as fh:
            while proc.poll() is None:
                rss = tree_rss_kb(proc.pid)
                if rss:
                    at, largest = time.monotonic() - start, max(rss.values()) / 1e6
                    fh.write(f"{at:.1f} {largest:.3f} {sum(rss.values()) / 1e6:.3f}\n")
                    fh.flush()
                    if largest > peak[1]:
                        peak[:] = [at, largest]
                time.sleep(args.every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    lines: list[tuple[float, str]] = []
    with open(f"{args.out}.log", "w") as log:
        for line in proc.stdout:
            lines.append((time.monotonic() - start, line.rstrip("\n")))
            log.write(f"{lines[-1][0]:8.1f} {line}")
            log.flush()
    code = proc.wait()
    sampler.join(timeout=2 * args.every + 1)
    before = [text for at, text in lines if at <= peak[0] and text.strip()]
    print(f"exit {code}; peak RSS {peak[1]:.2f} GB (largest process) at {peak[0]:.0f} s; "
          f"the last line before it: {before[-1][:200] if before else '(none)'}")
    raise SystemExit(code)


if __name__ == "__main__":
    main()
