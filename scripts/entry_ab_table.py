# EXPERIMENT: one table of the A/B runs' medians (us), the lowest of the runs per variant.
import glob, json, re, sys
out = sys.argv[1]
rows, variants = {}, set()
for path in sorted(glob.glob(f"{out}/bench_v*_r*.json")):
    v = re.search(r"bench_(v\d+w\d+)_r\d+", path).group(1)
    variants.add(v)
    for c in json.load(open(path))["cases"]:
        cell = rows.setdefault((c["case"], c["real_kv"]), {}).setdefault(v, [])
        cell.append({k: c[k]["median_us"] for k in ("fused_verify", "verify", "step", "planned_step", "gather") if k in c})
variants = sorted(variants)
for name in ("fused_verify", "verify", "step", "planned_step"):
    print(f"\n{name} (gather beside)\ncase|kv|" + "|".join(v for v in variants) + "|gather")
    for key, cells in rows.items():
        vals = [f"{min(x[name] for x in cells[v]):.1f}" if v in cells and name in cells[v][0] else "-" for v in variants]
        g = min(x["gather"] for c in cells.values() for x in c if "gather" in x) if any("gather" in x for c in cells.values() for x in c) else 0
        print(f"{key[0]}|{key[1]}|" + "|".join(vals) + f"|{g:.1f}")
