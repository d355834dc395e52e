# EXPERIMENT: one table of the A/B runs' medians (us), the lowest of the runs per combination.
import glob, json, re, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(f"{out}/bench_row*_r*.json")):
    row, rep = re.search(r"bench_row(\d+)_r(\d+)", path).groups()
    for c in json.load(open(path))["cases"]:
        cell = rows.setdefault((c["case"], c["real_kv"]), {}).setdefault(f"row{row}", [])
        cell.append(tuple(c[k]["median_us"] for k in ("fused_verify", "verify", "step", "planned_step", "gather")))
names = ("fused verify", "verify", "step", "planned step", "gather")
print("case|kv|" + "|".join(f"{n} search|{n} guess" for n in names))
for key, cells in rows.items():
    vals = []
    for i in range(len(names)):
        for combo in ("row0", "row1"):
            vals.append(f"{min(x[i] for x in cells[combo]):.1f}" if combo in cells else "-")
    print(f"{key[0]}|{key[1]}|" + "|".join(vals))
