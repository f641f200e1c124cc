# Interpreter and venv helpers shared by scripts/setup-env.sh, tfds-env.sh and torch-env.sh
# (sourced, not run).

# resolve_python NAME: the absolute path of a working interpreter named NAME (a command
# or a path). A pythonX.Y that is not on PATH, or whose pyenv shim refuses it because
# the version is not selected, is looked for among pyenv's installed versions.
resolve_python() {
  local name="$1" exe root candidate
  if exe="$("$name" -c 'import sys; print(sys.executable)' 2>/dev/null)" && [[ -n "$exe" ]]; then
    echo "$exe"
    return 0
  fi
  if [[ "$name" =~ ^python([0-9]+\.[0-9]+)$ ]]; then
    root="${PYENV_ROOT:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")}"
    for candidate in $(ls -d "$root/versions/${BASH_REMATCH[1]}".*/bin/"$name" 2>/dev/null | sort -V -r); do
      if "$candidate" -c 'import sys' >/dev/null 2>&1; then
        echo "$candidate"
        return 0
      fi
    done
  fi
  echo "no working interpreter '$name' (on PATH or among pyenv's versions): set PYTHON to one" >&2
  return 1
}

# default_python: Jazzy's and Kilted's own python3.12 where there is one, else python3.
default_python() {
  if resolve_python python3.12 >/dev/null 2>&1; then echo python3.12; else echo python3; fi
}

# python_tag EXE: py3.12
python_tag() { "$1" -c 'import sys; print("py%d.%d" % sys.version_info[:2])'; }

# absolute_path PATH: PATH made absolute against the current directory (need not exist).
absolute_path() { if [[ "$1" == /* ]]; then echo "$1"; else echo "$PWD/$1"; fi; }

# venv_id VENV: a short name for logs, locks and build trees; empty for the default .venv.
venv_id() { if [[ "$1" == "$ROOT/.venv" ]]; then echo ""; else basename "$1"; fi; }

# cached_venv NAME VENV PY_EXE BUILD: a venv of its own (TFDS's, torch's), built once by the
# function BUILD and rebuilt when its inputs change: PY_EXE, scripts/NAME-env.sh, this file,
# setup.py and setup.cfg (their hash is kept in a stamp file in VENV). One build at a time per
# checkout (a lock in .cache: pytest workers, parallel runs). Says one line; BUILD's output goes
# to .cache/NAME-env.log, printed when it fails (then returns 1).
cached_venv() {
  local name="$1" venv="$2" py_exe="$3" build="$4"
  local cache="$ROOT/.cache" stamp="$venv/.$name-env.stamp" hash file
  local log="$cache/$name-env.log"
  hash="$(
    echo "$py_exe"
    for file in "scripts/$name-env.sh" scripts/python.sh setup.py setup.cfg; do
      if [[ -f "$ROOT/$file" ]]; then sha256sum "$ROOT/$file"; fi
    done | sha256sum | cut -d' ' -f1
  )"
  _cached_venv_ready() { [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$hash" ]]; }
  if _cached_venv_ready; then
    echo "$name environment ready: $venv"
    return 0
  fi
  mkdir -p "$cache"
  exec 9>"$cache/$name-env.lock"
  flock 9
  if _cached_venv_ready; then
    echo "$name environment ready: $venv"
    return 0
  fi
  if ! "$build" >"$log" 2>&1; then
    echo "!!! building $venv failed; its log follows" >&2
    cat "$log" >&2
    return 1
  fi
  echo "$hash" >"$stamp"
  echo "$name environment ready: $venv (built; log: ${log#"$ROOT"/})"
}
