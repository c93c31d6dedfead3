#!/usr/bin/env bash
# Run every benchmark and print its table (a few minutes; starts its own PostgreSQL if installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for bench in parallel_sleep makespan overhead llm_calls checkpoint_bytes load thread_lock tool_listing; do
  "$PY" "bench/$bench.py"
done
