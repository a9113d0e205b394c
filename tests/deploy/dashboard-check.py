#!/usr/bin/env python3
"""Checks deploy/grafana/podshim-dashboard.json against a real podshimd's
/metrics (drive-daemon.py's scrapes): every podshim_* metric a panel or
variable queries must be one the daemon serves (histograms by their _bucket
series), every panel has a unique id, a grid position and a Prometheus
target; then `promtool check` parses each expression with the template
variables substituted. Usage: dashboard-check.py DASHBOARD SCRAPE_DIR"""
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
ids = set()
for p in dash["panels"]:
    if p["id"] in ids:
        errors.append(f"panel id {p['id']} repeated")
    ids.add(p["id"])
    if not {"x", "y", "w", "h"} <= set(p.get("gridPos", {})):
        errors.append(f"panel {p['title']}: no gridPos")
    if not p.get("targets"):
        errors.append(f"panel {p['title']}: no targets")
    exprs += [(p["title"], t["expr"]) for t in p.get("targets", [])]
for v in dash["templating"]["list"]:
    if v["type"] == "query":
        exprs.append((f"variable {v['name']}", re.sub(r"label_values\((\w+),.*\)", r"\1", v["query"]["query"])))
for where, e in exprs:
    for metric in set(re.findall(r"\bpodshim_[a-z_]+", e)):
        if metric not in served:
            errors.append(f"{where}: queries {metric}, which podshimd does not serve")
# promtool parses rule expressions: wrap each in a recording rule.
rules = {"groups": [{"name": "dashboard", "rules": [
    {"record": f"dashboard:expr{i}", "expr": e.replace("$namespace", ".*")} for i, (_, e) in enumerate(exprs)]}]}
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
