#!/usr/bin/env bash
# The documentation check, as CI runs it (its tests are part of tests/static, so of scripts/test.sh): every
# link and anchor between the documents leads somewhere; every path and smtrain name the documents,
# docstrings and comments mention exists; the settings the code reads are the ones the README documents; no
# figure in a guide without the benchmark that measures it; no run diary, no stray date; every guide's code
# block complete or a fragment that says what it assumes; the README's generated tables as their
# declarations print them (scripts/readme-tables.py rewrites them). A few seconds.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
exec "${SMTRAIN_VENV:-/opt/smtrain/venv}/bin/python" -m pytest -q -p no:cacheprovider tests/static/test_docs.py \
  tests/static/test_layers.py -k "docs or document or link or path or name or readme" "$@"
