#!/usr/bin/env bash
# ansible-test sanity on a copy of this collection placed under
# .../ansible_collections/sparkops/specdec (ansible-test needs that path).
# ansible-test bootstraps pip from a host this network cannot reach; it first looks for a
# cached copy, so the stand-in from ../shared/tools is installed there.
set -euo pipefail
dest=${1:?usage: run.sh DEST}
repo=$(cd "$(dirname "$0")/../.." && pwd)
standin="$repo/../shared/tools/ansible-test-get-pip.py"
pip_ver=$(python3 - <<'PY'
import inspect, re
from ansible_test._internal import python_requirements as m
print(re.search(r"pip='([0-9.]+)'", inspect.getsource(m.get_venv_packages)).group(1))
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_ver//./_}.py"
if [ ! -f "$cache" ]; then
  [ -f "$standin" ] || { echo "missing $standin and $cache: ansible-test cannot bootstrap pip" >&2; exit 1; }
  mkdir -p "$(dirname "$cache")" && cp "$standin" "$cache"
fi
rm -rf "$dest" && mkdir -p "$dest"
# The files git knows (tracked, and new ones not ignored), as they are in the work tree.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) \
  | (cd "$repo" && xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' ) \
  | (cd "$repo" && tar --null -T - -cf -) | tar -C "$dest" -xf -
cd "$dest"
ansible-test sanity --python 3.11 --venv --color no
