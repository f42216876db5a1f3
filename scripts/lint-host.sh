#!/usr/bin/env bash
# The linters of what svc runs outside Node: shellcheck over every shell program, pylint over every
# Python program (the host programs beside their features and the Odoo addon). Part of `npm run lint`.
# With arguments, lints only those files.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in shellcheck pylint; do
  command -v "$tool" >/dev/null || { echo "lint: $tool is missing (apt-get install $tool)" >&2; exit 2; }
done

if [ "$#" -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files '*.sh' '*.py'); fi
shell=() python=()
for f in "${files[@]}"; do
  case "$f" in
    *.sh) shell+=("$f") ;;
    *.py) python+=("$f") ;;
  esac
done

status=0
if [ "${#shell[@]}" -gt 0 ]; then shellcheck --severity=style "${shell[@]}" || status=1; fi
if [ "${#python[@]}" -gt 0 ]; then pylint --rcfile=.pylintrc --score=n "${python[@]}" || status=1; fi
exit "$status"
