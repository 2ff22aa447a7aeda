#!/usr/bin/env bash
# The torch x Python matrix: for each TORCH@PYTHON pair, a fresh venv outside the
# repository, torch==TORCH from PyPI and this package with its test extras, the
# truth-bearing tests (everything but the browser, Binder, wheel and Inductor tests:
# real models, reports, magics, panel, memory, sessions, ranks, exports; the tests
# marked integration included), then the venv is deleted.
#
#   .ci/matrix.sh                      # every pair of MATRIX_PAIRS (see the Makefile)
#   .ci/matrix.sh 2.8.0@3.10 2.15.0@3.13
#
# Environment:
#   MATRIX_DIR   where the venvs go (default ${TMPDIR:-/tmp}/stance_magic-matrix)
#   MATRIX_KEEP  1: keep each venv after its run (for debugging; ~7 GB each)
#   MATRIX_MARK  pytest marker expression (default: "not browser and not slow and not inductor")
#   MATRIX_PYTEST_ARGS  extra pytest arguments (e.g. "-x tests/test_report.py")
#
# PyPI's Linux torch is a CUDA build; it runs on CPU but needs its nvidia-* wheels
# (about 7 GB a venv, a few minutes to install). A pip constraints file that caps
# torch (this machine's pip config does) is lifted for these installs: each pair's
# own pin is the only constraint.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

pairs=("$@")
if [ ${#pairs[@]} -eq 0 ]; then
  read -r -a pairs <<<"${MATRIX_PAIRS:-2.8.0@3.10 2.10.0@3.11 2.12.1@3.11 2.14.1@3.11 2.15.0@3.12 2.15.0@3.13}"
fi
dir=${MATRIX_DIR:-${TMPDIR:-/tmp}/stance_magic-matrix}
mark=${MATRIX_MARK:-not browser and not slow and not inductor}
mkdir -p "$dir"
summary="$dir/summary.txt"
: >"$summary"

find_python() {  # 3.12 -> an interpreter of that version, or nothing
  local want=$1 p
  for p in "$HOME"/.pyenv/versions/"$want".*/bin/python "$(command -v "python$want" || true)"; do
    if [ -x "$p" ] && "$p" -c "import sys; sys.exit(f'{sys.version_info[0]}.{sys.version_info[1]}' != '$want')" 2>/dev/null; then
      echo "$p"
      return
    fi
  done
}

venv=""
cleanup() {
  if [ -n "$venv" ] && [ -d "$venv" ] && [ "${MATRIX_KEEP:-0}" != 1 ]; then rm -rf "$venv"; fi
}
trap cleanup EXIT

failed=0
t_all=$(date +%s)
for pair in "${pairs[@]}"; do
  tv=${pair%@*}
  pv=${pair#*@}
  t0=$(date +%s)
  log="$dir/torch-$tv-py$pv.log"
  echo "== torch $tv, Python $pv (log: $log)"
  py=$(find_python "$pv")
  if [ -z "$py" ]; then
    echo "torch $tv / Python $pv: FAILED (no Python $pv found: pyenv or python$pv on PATH)" | tee -a "$summary"
    failed=1
    continue
  fi
  venv="$dir/torch-$tv-py$pv"
  rm -rf "$venv"
  pins="$dir/pins-$tv.txt"
  echo "torch==$tv" >"$pins"
  {
    "$py" -m venv "$venv" &&
      "$venv/bin/python" -m pip install -q --upgrade pip &&
      PIP_CONSTRAINT="$pins" "$venv/bin/python" -m pip install -q "torch==$tv" &&
      PIP_CONSTRAINT="$pins" "$venv/bin/python" -m pip install -q -e "$repo[test]" &&
      "$venv/bin/python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" &&
      "$venv/bin/python" .ci/torch_facts.py
  } >"$log" 2>&1
  rc=$?
  t1=$(date +%s)
  if [ $rc -ne 0 ]; then
    tail -5 "$log"
    echo "torch $tv / Python $pv: FAILED to install ($((t1 - t0)) s; see $log)" | tee -a "$summary"
    failed=1
    cleanup
    continue
  fi
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pytest -q -rs -m "$mark" ${MATRIX_PYTEST_ARGS:-tests} >>"$log" 2>&1
  rc=$?
  t2=$(date +%s)
  counts=$(grep -E "^(=+ )?[0-9]+ (passed|failed|error|skipped)|no tests ran" "$log" | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
  case $rc in
    0) verdict="ok" ;;
    5) verdict="FAILED (no tests collected: the pair checked nothing)"; failed=1 ;;
    *) verdict="FAILED (pytest exit $rc)"; failed=1 ;;
  esac
  line="torch $tv / Python $pv: $verdict; $counts; install $((t1 - t0)) s, tests $((t2 - t1)) s"
  [ $rc -ne 0 ] && grep -E "^(FAILED|ERROR) " "$log" | head -40
  echo "$line" | tee -a "$summary"
  cleanup
  venv=""
done
echo "== matrix: $(( ($(date +%s) - t_all) / 60 )) min $(( ($(date +%s) - t_all) % 60 )) s"
cat "$summary"
exit $failed
