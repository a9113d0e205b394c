#!/usr/bin/env python3
"""Checks the metrics a real podshimd serves (drive-daemon.py's scrapes of the
TCP listener, initial/before/after.prom, and of the status socket,
socket.prom) against the docs, the alert rules, the dashboard and
Prometheus' conventions:

  - both endpoints serve the same families;
  - every family is documented in docs/metrics.md, and every podshim_* name
    docs/metrics.md mentions is served (no stale or renamed names);
  - every podshim_* name the alert rules query is served, and the rules
    select the job podshim-scrape.yaml defines (the dashboard's queries:
    dashboard-check.py);
  - names: podshim_ prefix, snake_case, HELP text, counters and only
    counters end in _total, base units only (no _percent, _ms, ...);
  - every series with a `container` label starts with kube-state-metrics'
    namespace, pod, uid, container, none of them empty;
  - every node-wide counter or histogram series of a later scrape was in the
    first one already (at 0), so increase() sees its first increment;
  - podshim_build_info: one series, 1, version = meson's project version.

Usage: metrics-check.py SRCDIR SCRAPE_DIR"""
import os, re, sys

import yaml

src, scrapes = sys.argv[1:3]
errors = []
fail = errors.append

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(name):
    """families {name: (type, help)}, series [(name, ((k, v), ...), value)]"""
    families, series = {}, []
    helps = {}
    for line in open(os.path.join(scrapes, name)):
        line = line.rstrip("\n")
        if m := re.match(r"# HELP (\S+) ?(.*)", line):
            helps[m.group(1)] = m.group(2)
        elif m := re.match(r"# TYPE (\S+) (\S+)", line):
            families[m.group(1)] = (m.group(2), helps.get(m.group(1), ""))
        elif line and not line.startswith("#"):
            m = LINE.match(line)
            if not m:
                fail(f"{name}: unparsable line: {line}")
                continue
            series.append((m.group(1), tuple(LABEL.findall(m.group(3) or "")), float(m.group(4))))
    return families, series


def family_of(sample, families):
    if sample in families:
        return sample
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample[: -len(suffix)] if sample.endswith(suffix) else None
        if base and families.get(base, ("",))[0] == "histogram":
            return base
    return None


scraped = {n: parse(n + ".prom") for n in ("initial", "before", "after", "socket")}
families = {}
for fams, _ in scraped.values():
    families.update(fams)

# Both endpoints, the same families.
tcp, sock = set(scraped["after"][0]), set(scraped["socket"][0])
for f in sorted(tcp - sock):
    fail(f"{f}: served on the TCP listener but not on the status socket's /metrics")
for f in sorted(sock - tcp):
    fail(f"{f}: served on the status socket's /metrics but not on the TCP listener (metrics.listen)")


def served(name):
    return family_of(name, families) is not None


# docs/metrics.md, both ways.
docs = open(os.path.join(src, "docs/metrics.md")).read()
documented = set(re.findall(r"`(podshim_[a-z0-9_]+)", docs))
for f in sorted(families):
    if f not in documented:
        fail(f"{f}: served but not documented in docs/metrics.md")
for name in sorted(set(re.findall(r"\bpodshim_[a-z0-9_]+", docs))):
    if not served(name):
        fail(f"docs/metrics.md names {name}, which podshimd does not serve")

# Alert rules and dashboard.
rules = yaml.safe_load(open(os.path.join(src, "deploy/prometheus/podshim-alerts.yaml")))
scrape_cfg = yaml.safe_load(open(os.path.join(src, "deploy/prometheus/podshim-scrape.yaml")))
job = scrape_cfg["scrape_configs"][0]["job_name"]
for g in rules["groups"]:
    for r in g["rules"]:
        for name in set(re.findall(r"\bpodshim_[a-z0-9_]+", r["expr"])):
            if not served(name):
                fail(f"alert {r['alert']}: queries {name}, which podshimd does not serve")
        for j in re.findall(r'\bjob="([^"]*)"', r["expr"]):
            if j != job:
                fail(f"alert {r['alert']}: job=\"{j}\", but podshim-scrape.yaml's job is {job}")

# Names.
NON_BASE = ("percent", "ms", "milliseconds", "us", "microseconds", "ns", "nanoseconds", "minutes", "hours",
            "days", "kb", "kib", "kilobytes", "mb", "mib", "megabytes", "gb", "gib", "gigabytes", "millicores",
            "millicpu", "cores")
for f, (kind, help_) in sorted(families.items()):
    if not re.fullmatch(r"podshim_[a-z][a-z0-9_]*[a-z0-9]", f):
        fail(f"{f}: not podshim_ and snake_case")
    if not help_.strip():
        fail(f"{f}: no HELP text")
    if (kind == "counter") != f.endswith("_total"):
        fail(f"{f}: a {kind}; counters, and only counters, end in _total")
    for word in f.split("_"):
        if word in NON_BASE:
            fail(f"{f}: '{word}' is not a base unit (seconds, bytes, ratio; docs/metrics.md)")
    if f.endswith("_info") and kind != "gauge":
        fail(f"{f}: an info metric is a gauge")

# Per-container label conventions.
KSM = ["namespace", "pod", "uid", "container"]
for n, (_, series) in scraped.items():
    for name, labels, _ in series:
        keys = [k for k, _ in labels]
        if "container" not in keys:
            continue
        if keys[:4] != KSM:
            fail(f"{n}: {name}{{{','.join(keys)}}}: per-container labels must start with {', '.join(KSM)}")
        elif any(not v for _, v in labels[:4]):
            fail(f"{n}: {name}{dict(labels)}: an empty namespace, pod, uid or container")

# Counters and histograms: every node-wide series exists from the first scrape.
initial = {(name, labels) for name, labels, _ in scraped["initial"][1]}
for n in ("before", "after"):
    for name, labels, _ in scraped[n][1]:
        fam = family_of(name, families)
        if not fam or families[fam][0] not in ("counter", "histogram") or any(k == "container" for k, _ in labels):
            continue
        if (name, labels) not in initial:
            fail(f"{name}{{{','.join(f'{k}={v!r}' for k, v in labels)}}} first appears in {n}.prom: "
                 "not preset at 0, so increase() misses its first increment")

# Build info.
version = re.search(r"^\s*version\s*:\s*'([^']+)'", open(os.path.join(src, "meson.build")).read(), re.M)
info = [(labels, v) for name, labels, v in scraped["after"][1] if name == "podshim_build_info"]
if len(info) != 1:
    fail(f"podshim_build_info: {len(info)} series, want 1")
else:
    labels, v = dict(info[0][0]), info[0][1]
    if v != 1 or labels.get("version") != version.group(1) or not labels.get("commit"):
        fail(f"podshim_build_info{labels} {v}: want version=\"{version.group(1)}\", a commit, value 1")

for e in errors:
    print("FAIL:", e)
print(f"metrics: {len(families)} families, {len(documented)} documented names, {len(errors)} problems")
sys.exit(1 if errors else 0)
