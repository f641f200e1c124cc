#!/usr/bin/env bash
# Cached venv for the PyTorch dataset (`from ortf.torch import OrtfDataset`) and its tests:
# torch's CPU build + this project (pip install -e ".[torch]") + the test tools its tests and
# its type check use.
#
#   bash scripts/torch-env.sh        (idempotent; a second run takes well under a second)
#
# torch is too heavy for the main .venv that every test run uses (~1 GB, and a CUDA build
# of several GB wherever pip is free to choose), so `make test-torch` and `make lint` build
# this one once and run test/torch and mypy on the torch modules in it.
#
# Only torch==$TORCH_VERSION is installed: on Python 3.11 it is the CPU wheel this machine
# keeps in /opt/wheels (pip's find-links). Anything else (a range, another Python) would let
# pip take PyPI's CUDA build, so the build asks pip first which file it would take and
# stops unless it is a +cpu one. TORCH_PYTHON picks the interpreter (default python3.11,
# looked for among pyenv's versions when not on PATH).
#
# Not `.[test]`: on 3.11 that resolves 125 packages (Ray, Rerun with DataFusion, deltalake,
# pyiceberg, DuckDB, selenium, ...) that no torch test imports. The tools it does need are
# taken from the test extra by name (TEST_TOOLS below), with the versions setup.py pins there.
# Rebuilt when this script, scripts/python.sh, setup.py or setup.cfg change (a stamp file
# holds their hash). Output: one line; the log goes to .cache/torch-env.log and is printed
# on failure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CACHE="$ROOT/.cache"
VENV="$CACHE/torch-venv"
TORCH_VERSION=2.13.0
# from setup.py's test extra: pytest, the S3 tests' server, the type check and the linter
TEST_TOOLS=(pytest pytest-timeout psutil moto mypy ruff types-PyYAML)

# shellcheck source=scripts/python.sh
source "$ROOT/scripts/python.sh"
PY_EXE="$(resolve_python "${TORCH_PYTHON:-python3.11}")"

pip_install() { "$VENV/bin/python" -m pip install --disable-pip-version-check "$@"; }

# the torch file pip would take for this interpreter, refused unless it is a CPU build
check_cpu_wheel() {
  local chosen
  chosen="$("$VENV/bin/python" -m pip install --disable-pip-version-check --dry-run --no-deps --quiet \
    --report - "torch==$TORCH_VERSION" | "$VENV/bin/python" -c \
    'import json, sys; print(json.load(sys.stdin)["install"][0]["download_info"]["url"])')"
  echo "torch==$TORCH_VERSION would come from $chosen"
  if [[ "$chosen" != *+cpu* && "$chosen" != *%2Bcpu* ]]; then
    echo "that is not a CPU build of torch (for $("$VENV/bin/python" --version)): refusing to download it;" \
      "use Python 3.11 (TORCH_PYTHON), for which /opt/wheels has the CPU wheel"
    return 1
  fi
}

# the requirement strings of setup.py's test extra for the names given, as pip installed them
# into the venv's metadata (so the pins live in setup.py alone)
test_requirements() {
  "$VENV/bin/python" - "$@" <<'EOF'
import re
import sys
from importlib.metadata import requires


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


found = {}
for requirement in requires("ortf_ros") or []:
    spec, _, marker = requirement.partition(";")
    if marker.strip() in ('extra == "test"', "extra == 'test'"):
        found[normal(re.match(r"[A-Za-z0-9._-]+", spec.strip()).group(0))] = spec.strip()
missing = [name for name in sys.argv[1:] if normal(name) not in found]
if missing:
    sys.exit(f"setup.py's test extra has no {', '.join(missing)} (without markers): scripts/torch-env.sh needs them")
print("\n".join(found[normal(name)] for name in sys.argv[1:]))
EOF
}

build() {
  rm -rf "$VENV"
  "$PY_EXE" -m venv "$VENV"
  check_cpu_wheel
  pip_install -e ".[torch]" "torch==$TORCH_VERSION"
  local tools
  mapfile -t tools < <(test_requirements "${TEST_TOOLS[@]}")
  echo "test tools: ${tools[*]}"
  pip_install "${tools[@]}" "torch==$TORCH_VERSION"
  "$VENV/bin/python" -c 'import torch, ortf_ros; assert torch.version.cuda is None, torch.version.cuda; print("torch", torch.__version__)'
}

cached_venv torch "$VENV" "$PY_EXE" build
