#!/usr/bin/env python3
"""Turns real /metrics scrapes (drive-daemon.py's initial/before/after.prom)
into promtool input_series and writes a complete `promtool test rules` file
from TEMPLATE (whose `input_series` is replaced).

Timeline, 1m scrape interval: initial.prom for PHASE minutes, before.prom for
PHASE, after.prom for 2*PHASE. Names, labels and values are the daemon's own,
so a renamed metric or label breaks the rules' tests, with two rewrites:
  - podshim_container_last_resize_timestamp_seconds holds wall-clock time;
    each distinct value is mapped to the test minute it first appeared at
    (promtool's clock starts at 0);
  - VARIANTS (below) derive a second node from the same series where the
    fake cgroup tree cannot produce the state: an NRI-mode node that is
    disconnected, and an out-of-band memory.max change (drift). Their
    names and labels are still taken from the scrape.
Every series gets job="podshim", instance="node-a:9464" (node-b for variants).

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

    node_labels = lambda node: (("instance", f"{node}:9464"), ("job", "podshim"))
    input_series = []
    for key in keys:
        input_series.append({"series": series_text(key[0], key[1] + node_labels("node-a")),
                             "values": values(key, "node-a")})

    # node-b: the same daemon's series, as an NRI-mode node that lost its
    # runtime and whose app container's memory.max was lowered out of band.
    def variant(key):
        name, labels = key
        if name == "podshim_nri_enabled":
            return lambda v: 1.0
        if (name == "podshim_container_actual_limits" and ("container", "app") in labels
                and ("resource", "memory") in labels):
            return lambda v: v - (16 << 20)
        return None

    node_b = ("podshim_nri_enabled", "podshim_nri_connected", "podshim_container_allocated_limits",
              "podshim_container_actual_limits")
    for key in keys:
        if key[0] in node_b:
            input_series.append({"series": series_text(key[0], key[1] + node_labels("node-b")),
                                 "values": values(key, "node-b", variant(key))})

    doc = yaml.safe_load(open(template))
    for t in doc["tests"]:
        t["input_series"] = input_series
    with open(out, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False, width=1000)


if __name__ == "__main__":
    main()
