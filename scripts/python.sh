# Interpreter and venv helpers shared by scripts/setup-env.sh and scripts/tfds-env.sh
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
