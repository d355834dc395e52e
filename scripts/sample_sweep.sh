#!/usr/bin/env bash
# Runs `kvcanary sim --verify-sample K` for K = 1, 2, 4, 8, 16 and prints a markdown table of the
# detection latency against K: per scenario, detected of injected, false positives, and the median
# and maximum latency in wall steps and in the victims' forwards (docs/sampled_verify.md).
#
#   scripts/sample_sweep.sh [SIM FLAGS...]     e.g. --scenario all, --seed 3
#   KVC_SWEEP_BIN   the kvcanary binary (default build/default/cli/kvcanary)
#   KVC_SWEEP_KS    the rates (default "1 2 4 8 16")
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${KVC_SWEEP_BIN:-build/default/cli/kvcanary}
rates=${KVC_SWEEP_KS:-1 2 4 8 16}
work=$(mktemp -d -t kvc-sweep.XXXXXX)
trap 'rm -rf "${work}"' EXIT

for k in ${rates}; do
  # Exit 1 (a missed fault) still has a report to tabulate; 2 and 3 do not.
  status=0
  "${bin}" sim --progress off --quiet --verify-sample "${k}" --json "${work}/k${k}.json" "$@" \
      >/dev/null || status=$?
  if [[ ${status} -gt 1 ]]; then
    echo "sample_sweep: kvcanary sim --verify-sample ${k} $* exited ${status}" >&2
    exit "${status}"
  fi
done

python3 - "${work}" ${rates} <<'PY'
import json
import sys

work, rates = sys.argv[1], [int(k) for k in sys.argv[2:]]


def number(value):
    if value is None:
        return "–"
    return f"{value:g}"


# One row per scenario and rate, each scenario's rates together, in the order the runs gave.
rows = {}
for k in rates:
    with open(f"{work}/k{k}.json", encoding="utf-8") as handle:
        report = json.load(handle)
    for scenario in report["scenarios"]:
        total = scenario["total"]
        rows.setdefault(scenario["scenario"], []).append(
            f"| {scenario['scenario']} | {k} | {total['detected']} of {total['injected']} | "
            f"{len(scenario['false_positives'])} | {number(total['latency_median'])} | "
            f"{number(total['latency_max'])} | {number(total['latency_forwards_median'])} | "
            f"{number(total['latency_forwards_max'])} |")
print("| scenario | K | detected | false positives | steps median | steps max | "
      "forwards median | forwards max |")
print("|---|--:|--:|--:|--:|--:|--:|--:|")
for lines in rows.values():
    print("\n".join(lines))
PY
