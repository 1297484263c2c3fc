"""Shared by the tests: bench/ on sys.path (so `netchar_bench` imports however the tests are
started) and the raw fixtures in bench/results/raw/."""

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
RAW = BENCH / "results" / "raw"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))


def raw(name):
    """The text of fixture NAME."""
    return (RAW / name).read_text()


def run_module(module, *args, stdin=None, env=None):
    """python3 -m netchar_bench.MODULE ARGS, as the bench scripts run it (bench/ on PYTHONPATH)."""
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = str(BENCH)
    return subprocess.run([sys.executable, "-m", f"netchar_bench.{module}", *map(str, args)],
                          input=stdin, capture_output=True, text=True, env=e, timeout=60)
