#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
#   - a virtualenv in .venv with accelbench and its test and ray extras
#   - Debian's chromium for the HTML report's browser test (when root and missing)
#   - Debian's prometheus and prometheus-alertmanager for the monitoring tests (likewise)
#   - llama.cpp's llama-server: built by accelbench itself on first use, cached in
#     ~/.cache/accelbench (about 5 minutes on 2 cores, once per machine)
#   - vLLM's CPU build: installed by accelbench into a virtualenv of its own in the same
#     cache (about 2 minutes and 3.5 GB, once per machine). If that cannot work (no
#     registry, no disk) the vLLM tests FAIL and "vLLM NOT TESTED: <reason>" is printed;
#     ACCELBENCH_SKIP_VLLM=1 skips them on purpose (and prints the same line).
#   - NVIDIA's AIConfigurator 0.12.0 (`accelbench[whatif]`) in a virtualenv of its own in
#     the same cache (~850 MB, once per machine), for the test that runs the real package;
#     if it cannot install, that test FAILS and "AIConfigurator NOT TESTED" is printed.
# Extra arguments go to pytest (e.g. scripts/test.sh -k sse).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[engine,test,ray]'
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian chromium for the browser test" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "could not install chromium: the browser test will FAIL" >&2
fi
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus-alertmanager >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian prometheus and prometheus-alertmanager for the monitoring tests" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends prometheus prometheus-alertmanager >/dev/null) \
      || echo "could not install prometheus: the monitoring tests will FAIL" >&2
  fi
fi
echo "building (or reusing) llama-server and the test model" >&2
.venv/bin/accelbench serve llama --build-only
vllm_note=""
if [ "${ACCELBENCH_SKIP_VLLM:-}" = 1 ]; then
  vllm_note="vLLM NOT TESTED: ACCELBENCH_SKIP_VLLM=1 (its tests are skipped)"
else
  echo "installing (or reusing) vLLM's CPU build" >&2
  vllm_log=$(mktemp)
  if ! .venv/bin/accelbench serve vllm --install-only >/dev/null 2>"$vllm_log"; then
    vllm_note="vLLM NOT TESTED: $(tail -n 1 "$vllm_log") (its tests will FAIL)"
  fi
  cat "$vllm_log" >&2
  rm -f "$vllm_log"
fi
[ -z "$vllm_note" ] || echo "*** $vllm_note ***" >&2
aic="${ACCELBENCH_CACHE:-$HOME/.cache/accelbench}/peers/aiconfigurator-0.12.0"
if [ ! -f "$aic/.accelbench-installed" ]; then
  echo "installing AIConfigurator 0.12.0 into $aic (the whatif test)" >&2
  if "$PY" -m venv "$aic" >&2 && "$aic/bin/python" -m pip install -q \
      aiconfigurator==0.12.0 aiconfigurator-core==0.12.0 >&2; then
    echo "installed by scripts/test.sh" >"$aic/.accelbench-installed"
  else
    echo "*** AIConfigurator NOT TESTED: pip install failed (its test will FAIL) ***" >&2
  fi
fi
export ACCELBENCH_TEST_WHATIF=1 ACCELBENCH_WHATIF_PYTHON="$aic/bin/python"
.venv/bin/python -m ruff check src tests benchmarks
.venv/bin/python -m mypy
rc=0
.venv/bin/python -m pytest -q "$@" || rc=$?
[ -z "$vllm_note" ] || echo "*** $vllm_note ***" >&2
exit $rc
