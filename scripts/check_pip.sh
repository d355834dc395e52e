#!/usr/bin/env bash
# Installs the Python package the way a user does (pip, from python/, nothing downloaded) into a
# temporary target directory, then runs the Python test suite against that installed copy: the
# tests import kvcanary from the target, never from a build tree (checked before they run); then
# the Python examples run against it.
#
#   bash scripts/check_pip.sh          (KVCANARY_CMAKE_ARGS passes CMake arguments to the build;
#                                       default -DKVCANARY_CUDA=OFF)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/kvcanary-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
python=/usr/bin/python3

echo "== check_pip: pip install --no-build-isolation ./python into $work/site"
KVCANARY_BUILD_DIR=$work/build KVCANARY_CMAKE_ARGS=${KVCANARY_CMAKE_ARGS:--DKVCANARY_CUDA=OFF} \
  "$python" -m pip install --quiet --no-build-isolation --no-deps --no-index \
  --target "$work/site" ./python >"$work/pip.log" 2>&1 || { tail -40 "$work/pip.log"; exit 1; }

# From a directory outside the repository, so neither python/ nor a build tree can shadow it.
cd "$work"
location=$(PYTHONPATH=$work/site "$python" -c 'import kvcanary; print(kvcanary.__file__)')
[[ $location == "$work/site/"* ]] || { echo "check_pip: kvcanary imported from $location"; exit 1; }
echo "== check_pip: kvcanary $(PYTHONPATH=$work/site "$python" -c \
  'import kvcanary; print(kvcanary.__version__)') imported from $location"
PYTHONPATH=$work/site PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest "$root/python/tests" -q \
  -p no:cacheprovider
echo "== check_pip: examples/python/engine_loop.py against the installed package"
PYTHONPATH=$work/site "$python" "$root/examples/python/engine_loop.py"
echo "== check_pip: examples/python/runtime_loop.py against the installed package"
PYTHONPATH=$work/site "$python" "$root/examples/python/runtime_loop.py"
echo "== check_pip: PASS"
