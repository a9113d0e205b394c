#!/usr/bin/env python3
"""Checks deploy/grafana/podshim-dashboard.json against a real podshimd's
/metrics (drive-daemon.py's scrapes): every podshim_* metric a panel or
variable queries must be one the daemon serves (histograms by their _bucket
series), every panel has a unique id, a grid position that overlaps no other
panel and a Prometheus target; the dashboard has a `node` variable (the
target label podshim-scrape.yaml / podshim-podmonitor.yaml add) and every
selector of a podshim series (and of podshimd's `up`) in every panel and in
the namespace variable filters on it with node=~"$node"; then `promtool
check` parses each expression with the template variables substituted.
Usage: dashboard-check.py DASHBOARD SCRAPE_DIR"""
import json, re, subprocess, sys, tempfile, os

dash_path, scrapes = sys.argv[1:3]
dash = json.load(open(dash_path))
served = set()
for name in ("initial", "before", "after"):
    for line in open(os.path.join(scrapes, name + ".prom")):
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            served.add(m.group(1))
            if m.group(2) == "histogram":
                served.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
errors, exprs = [], []
ids, cells = set(), {}
for p in dash["panels"]:
    if p["id"] in ids:
        errors.append(f"panel id {p['id']} repeated")
    ids.add(p["id"])
    g = p.get("gridPos", {})
    if not {"x", "y", "w", "h"} <= set(g):
        errors.append(f"panel {p['title']}: no gridPos")
    else:
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    errors.append(f"panel {p['title']} overlaps panel {cells[(x, y)]}")
                    break
                cells[(x, y)] = p["title"]
            else:
                continue
            break
    if not p.get("targets"):
        errors.append(f"panel {p['title']}: no targets")
    exprs += [(p["title"], t["expr"]) for t in p.get("targets", [])]

variables = {v["name"]: v for v in dash["templating"]["list"]}
node = variables.get("node")
if not node or node["type"] != "query" or not re.fullmatch(r"label_values\(.*,\s*node\)", node["query"]["query"]):
    errors.append("no `node` query variable: label_values(..., node)")
queries = []
for v in variables.values():
    if v["type"] == "query":
        m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", v["query"]["query"])
        if not m:
            errors.append(f"variable {v['name']}: not label_values(SELECTOR, LABEL)")
            continue
        exprs.append((f"variable {v['name']}", m.group(1)))
        if v["name"] != "node":
            queries.append((f"variable {v['name']}", m.group(1)))

# Every selector of a podshim series (or podshimd's up) filters on $node.
SELECTOR = re.compile(r'\b(podshim_[a-z_]+|up)\b(\{[^}]*\})?')
for where, e in [(w, e) for w, e in exprs if not w.startswith("variable ")] + queries:
    for m in SELECTOR.finditer(e):
        if m.group(1) == "up" and 'job="podshim"' not in (m.group(2) or ""):
            continue
        if 'node=~"$node"' not in (m.group(2) or ""):
            errors.append(f'{where}: {m.group(0)} does not filter on node=~"$node"')

for where, e in exprs:
    for metric in set(re.findall(r"\bpodshim_[a-z_]+", e)):
        if metric not in served:
            errors.append(f"{where}: queries {metric}, which podshimd does not serve")
# promtool parses rule expressions: wrap each in a recording rule.
subst = lambda e: re.sub(r"\$(namespace|node)\b", ".*", e)
rules = {"groups": [{"name": "dashboard", "rules": [
    {"record": f"dashboard:expr{i}", "expr": subst(e)} for i, (_, e) in enumerate(exprs)]}]}
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump(rules, f)
r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
os.unlink(f.name)
if r.returncode != 0:
    errors.append("promtool cannot parse a dashboard expression:\n" + r.stdout + r.stderr)
for e in errors:
    print("FAIL:", e)
print(f"dashboard: {len(dash['panels'])} panels, {len(exprs)} expressions, {len(errors)} problems")
sys.exit(1 if errors else 0)
