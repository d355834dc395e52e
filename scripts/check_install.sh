#!/usr/bin/env bash
# Checks that kvcanary installs and links like a library, as an engine would use it:
#   1. configure (Release, tests off) and build; or, with --reuse BUILD_DIR, take a built tree
#      (what the ctest test install_consumer does: no second build of the library);
#   2. cmake --install into a temporary prefix; the headers, version.h, the CMake package and the
#      pkg-config file are there;
#   3. examples/cpp built against it with find_package(kvcanary) + kvcanary::runtime, and run: with
#      KVCANARY_MODE=log the corrupted record is caught (exit 0); with the mode unset Install
#      returns null and the example says so;
#   4. the same example built with `pkg-config --cflags --libs kvcanary`, and run;
#   5. the README's runtime snippets are excerpts of the example (same code);
#   6. without --reuse: examples/subdirectory, kvcanary built with add_subdirectory, and run.
#
#   bash scripts/check_install.sh                    (everything; JOBS=N parallel builds, default 1)
#   bash scripts/check_install.sh --reuse build/default
#   bash scripts/check_install.sh --deb build/default   (as root: the tree packed with cpack -G DEB,
#        installed with dpkg -i into /usr, the examples built against it, the package removed again;
#        what .ci/run does)
# KVCANARY_CMAKE_ARGS adds arguments to the configure steps (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/kvcanary-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
jobs=${JOBS:-1}
read -r -a extra_args <<<"${KVCANARY_CMAKE_ARGS:-}"
consumer=(cmake -DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null && consumer+=(-G Ninja)
[[ -n ${CXX:-} ]] && consumer+=(-DCMAKE_CXX_COMPILER="$CXX")
configure=("${consumer[@]}" "${extra_args[@]}")
say() { echo "== check_install: $*"; }

if [[ ${1:-} == --reuse || ${1:-} == --deb ]]; then
  build=$(cd "$2" && pwd)
else
  build=$work/build
  say "configure and build kvcanary (Release, tests off) in $build"
  "${configure[@]}" -S . -B "$build" -DKVCANARY_BUILD_TESTS=OFF -DKVCANARY_BUILD_PYTHON=OFF \
    >"$work/configure.log"
  nice cmake --build "$build" -j "$jobs" >"$work/build.log"
fi

if [[ ${1:-} == --deb ]]; then
  if dpkg-query -W kvcanary >/dev/null 2>&1; then
    echo "check_install: a kvcanary package is already installed; not replacing it"; exit 1
  fi
  say "pack $build with cpack -G DEB and install it with dpkg -i"
  (cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" >"$work/cpack.log") ||
    { cat "$work/cpack.log"; exit 1; }
  deb=$(ls "$work"/*.deb)
  dpkg-deb --info "$deb" | grep -E '^ (Package|Version):'
  dpkg -i "$deb" >"$work/dpkg.log"
  trap 'dpkg -r kvcanary >/dev/null; rm -rf "$work"' EXIT
  prefix=/usr
else
  prefix=$work/prefix
  say "install into $prefix"
  cmake --install "$build" --prefix "$prefix" >"$work/install.log"
fi
config=$(find "$prefix/lib" "$prefix/share" -name kvcanaryConfig.cmake 2>/dev/null | head -1)
pc=$(find "$prefix/lib" "$prefix/share" -name kvcanary.pc 2>/dev/null | head -1)
for file in include/kvcanary/kvcanary.h include/kvcanary/version.h \
            include/kvcanary/runtime/canary_manager.h; do
  [[ -f $prefix/$file ]] || { echo "missing after install: $file"; exit 1; }
done
[[ -f $config && -f $(dirname "$config")/kvcanaryConfigVersion.cmake && -f $pc ]] ||
  { echo "missing after install: the CMake package or kvcanary.pc"; exit 1; }

# run_example BINARY: mode log catches the corruption; mode none installs nothing.
run_example() {
  KVCANARY_MODE=log "$1" >"$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
  grep '^PASS' "$work/run.log"
  env -u KVCANARY_MODE "$1" | grep 'kvcanary is off' ||
    { echo "mode none: the example did not report the null install"; exit 1; }
}

say "examples/cpp, copied out of the repository, with find_package(kvcanary)"
# A consumer outside the source tree: only the installed package can satisfy its includes.
cp -r examples/cpp "$work/consumer"
"${consumer[@]}" -S "$work/consumer" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/example.log"
cmake --build "$work/example" >>"$work/example.log" || { cat "$work/example.log"; exit 1; }
run_example "$work/example/engine_loop"

say "examples/cpp with pkg-config"
read -r -a pc_flags <<<"$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs kvcanary)"
"${CXX:-c++}" -std=c++20 -O1 examples/cpp/engine_loop.cpp "${pc_flags[@]}" -o "$work/engine_loop_pc"
# pkg-config gives no run path: a shared build's libraries are found through LD_LIBRARY_PATH.
LD_LIBRARY_PATH="$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir kvcanary)" \
  run_example "$work/engine_loop_pc"

say "README snippets are excerpts of examples/cpp/engine_loop.cpp"
python3 - "$root/README.md" "$root/examples/cpp/engine_loop.cpp" <<'PY'
import re, sys, textwrap
readme, example = (open(path).read() for path in sys.argv[1:])
regions = re.findall(r"// \[readme (\w+)\]\n(.*?)\s*// \[readme \1\]", example, re.S)
assert regions, "no [readme NAME] regions in the example"
for name, text in regions:
    snippet = textwrap.dedent(text)
    if snippet not in readme:
        sys.exit(f"README.md lacks the example's '{name}' region, dedented:\n{snippet}")
print(f"{len(regions)} regions found in README.md")
PY

if [[ ${1:-} != --reuse ]]; then  # the ctest test skips it: it would build kvcanary again
  say "examples/subdirectory: kvcanary through add_subdirectory"
  "${configure[@]}" -S examples/subdirectory -B "$work/subdirectory" >"$work/subdirectory.log"
  nice cmake --build "$work/subdirectory" -j "$jobs" --target engine_loop \
    >>"$work/subdirectory.log" || { tail -30 "$work/subdirectory.log"; exit 1; }
  run_example "$work/subdirectory/engine_loop"
fi
say "PASS"
