#!/usr/bin/env python3
"""Writes a prometheus.yml that loads deploy/prometheus/podshim-alerts.yaml and
holds podshim-scrape.yaml's job, for `promtool check config` (the job's
relabelling, the rule file). Debian's Prometheus is built without Kubernetes
service discovery, so the job's kubernetes_sd_configs become one static
target carrying the __meta labels pod discovery would give the DaemonSet's
pod; validate-manifests.js checks the discovery part against the DaemonSet.
Usage: scrape-config.py SRCDIR OUT"""
import sys

import yaml

src, out = sys.argv[1:3]
jobs = yaml.safe_load(open(f"{src}/deploy/prometheus/podshim-scrape.yaml"))["scrape_configs"]
for j in jobs:
    if "kubernetes_sd_configs" not in j:
        sys.exit(f"scrape-config: job {j.get('job_name')} has no kubernetes_sd_configs")
    del j["kubernetes_sd_configs"]
    j["static_configs"] = [{"targets": ["10.244.1.7:9464"],
                            "labels": {"__meta_kubernetes_pod_container_port_name": "metrics",
                                       "__meta_kubernetes_pod_node_name": "node-a"}}]
yaml.safe_dump({"global": {"scrape_interval": "30s"},
                "rule_files": [f"{src}/deploy/prometheus/podshim-alerts.yaml"],
                "scrape_configs": jobs}, open(out, "w"), sort_keys=False)
