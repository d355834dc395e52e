# EXPERIMENT (untracked): one table of the A/B runs' medians (us): fused verify, verify, step, planned step.
import glob, json, re, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(f"{out}/bench_v*_p*_o*_r*.json")):
    v, p, o, r = re.search(r"bench_v(\d+)_p(\d+)_o(\d+)_r(\d+)", path).groups()
    for c in json.load(open(path))["cases"]:
        key = (c["case"], c["real_kv"])
        cell = rows.setdefault(key, {}).setdefault(f"v{v}p{p}o{o}", [])
        cell.append((c["fused_verify"]["median_us"], c["verify"]["median_us"], c["step"]["median_us"],
                     c["planned_step"]["median_us"], c["gather"]["median_us"]))
combos = sorted({k for r in rows.values() for k in r})
for what, i in (("fused verify", 0), ("verify", 1), ("step", 2), ("planned step", 3), ("gather", 4)):
    print(f"\n{what}, us (the lower of the two runs' medians)")
    print("case|kv|" + "|".join(combos))
    for key, cells in rows.items():
        print(f"{key[0]}|{key[1]}|" + "|".join(f"{min(x[i] for x in cells[c]):.1f}" if c in cells else "-" for c in combos))
