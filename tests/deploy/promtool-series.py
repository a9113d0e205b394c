#!/usr/bin/env python3
"""Turns real /metrics scrapes (drive-daemon.py's initial/before/after.prom)
into promtool input_series and writes a complete `promtool test rules` file
from TEMPLATE (every test whose `input_series` is GENERATED gets them; a test
with its own input_series keeps it).

Timeline, 1m scrape interval: initial.prom for PHASE minutes, before.prom for
PHASE, after.prom for 2*PHASE. Names, labels and values are the daemon's own,
so a renamed metric or label breaks the rules' tests, with two rewrites:
  - podshim_container_last_resize_timestamp_seconds holds wall-clock time;
    each distinct value is mapped to the test minute it first appeared at
    (promtool's clock starts at 0);
  - every series gets the target labels podshim-scrape.yaml gives it:
    job="podshim", node, and instance (the pod's IP:9464).
Nodes (`up` is what Prometheus itself records for each target):
  node-a  the daemon's series as scraped; up 1 throughout (healthy)
  node-b  the same daemon's series as an NRI-mode node that lost its
          runtime (podshim_nri_enabled 1, podshim_nri_connected 0); up 1
  node-c  up 1 until PHASE, then 0 (podshimd down: its target stays, every
          scrape fails, its series go stale)
  node-d  up 1 until PHASE, then no target at all (the pod is gone)
  node-e  every other scrape fails (up 1, 0, 1, ...)

Usage: promtool-series.py SCRAPE_DIR TEMPLATE OUT
"""
import re, sys
import yaml

PHASE = 10
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(path):
    out = {}
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        if not m:
            sys.exit(f"{path}: unparsable line: {line}")
        labels = tuple(LABEL.findall(m.group(3) or ""))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def series_text(name, labels):
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels) + "}"


def main():
    d, template, out = sys.argv[1:4]
    phases = [("initial", PHASE), ("before", PHASE), ("after", 2 * PHASE)]
    scrapes = [(parse(f"{d}/{n}.prom"), length) for n, length in phases]
    keys = []
    for s, _ in scrapes:
        for k in s:
            if k not in keys:
                keys.append(k)
    stamp_minute = {}
    minute = 0
    for s, length in scrapes:
        for (name, _), v in s.items():
            if name == "podshim_container_last_resize_timestamp_seconds":
                stamp_minute.setdefault(v, minute)
        minute += length

    def values(key, node, tweak=None):
        vals = []
        for s, length in scrapes:
            v = s.get(key)
            if v is not None and key[0] == "podshim_container_last_resize_timestamp_seconds":
                v = stamp_minute[v] * 60
            if v is not None and tweak:
                v = tweak(v)
            vals += ["_" if v is None else repr(v)] * length
        return " ".join(vals)

    minutes = sum(length for _, length in scrapes)
    ips = {"node-a": "10.244.1.7", "node-b": "10.244.2.7", "node-c": "10.244.3.7", "node-d": "10.244.4.7",
           "node-e": "10.244.5.7"}
    node_labels = lambda node: (("instance", f"{ips[node]}:9464"), ("job", "podshim"), ("node", node))
    input_series = []
    for key in keys:
        input_series.append({"series": series_text(key[0], key[1] + node_labels("node-a")),
                             "values": values(key, "node-a")})

    # node-b: the same daemon's series, as an NRI-mode node that lost its runtime.
    def variant(key):
        if key[0] == "podshim_nri_enabled":
            return lambda v: 1.0
        return None

    for key in keys:
        if key[0] in ("podshim_nri_enabled", "podshim_nri_connected"):
            input_series.append({"series": series_text(key[0], key[1] + node_labels("node-b")),
                                 "values": values(key, "node-b", variant(key))})

    # Target health. A failed scrape (up 0) or a target that is gone marks
    # every series of the target stale, as Prometheus does.
    up = {
        "node-a": ["1"] * minutes,
        "node-b": ["1"] * minutes,
        "node-c": ["1"] * PHASE + ["0"] * (minutes - PHASE),
        "node-d": ["1"] * PHASE + ["stale"] + ["_"] * (minutes - PHASE - 1),
        "node-e": ["1" if m % 2 == 0 else "0" for m in range(minutes)],
    }
    build_info = next(k for k in keys if k[0] == "podshim_build_info")
    for node, vals in up.items():
        input_series.append({"series": series_text("up", node_labels(node)), "values": " ".join(vals)})
        if node in ("node-a",):
            continue  # its build_info is among the scraped series above
        seen, scraped = False, []
        for v in vals:
            scraped.append("1" if v == "1" else ("stale" if seen else "_"))
            seen = v == "1"
        input_series.append({"series": series_text(build_info[0], build_info[1] + node_labels(node)),
                             "values": " ".join(scraped)})

    doc = yaml.safe_load(open(template))
    for t in doc["tests"]:
        if t["input_series"] == "GENERATED":
            t["input_series"] = input_series
    with open(out, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False, width=1000)


if __name__ == "__main__":
    main()
