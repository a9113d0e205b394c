#!/usr/bin/env python3
"""Translates deploy/base's DaemonSet and ConfigMap (kustomization.yaml's
configMapGenerator: the ConfigMap the DaemonSet names, without kustomize's
hash suffix) into a `podman run`, so the
image test runs the image with the manifests' own settings, not a copy of
them: user, capabilities, no-new-privileges, read-only root, seccomp
(RuntimeDefault = podman's default profile), host mounts and their
read-only flags, emptyDirs as tmpfs, the memory limit, args, and the probe
commands; init containers likewise, each under "init" (run them to
completion, in order, before the main container). Differences a pod would not have: `--network host` (so the guest
can scrape the pod's metrics port), and host paths can be substituted
(--host-path HOST=REPLACEMENT) to point the cgroup mount at the NRI peer's
fake tree.

Usage: daemonset-to-podman.py DEPLOY_DIR WORKDIR [--host-path A=B]... > run.json
Writes the ConfigMap's files under WORKDIR/configmap-NAME/."""
import json, os, re, sys
import yaml

deploy, work = sys.argv[1], sys.argv[2]
subst = {}
rest = sys.argv[3:]
while rest:
    if rest[0] != "--host-path" or len(rest) < 2 or "=" not in rest[1]:
        sys.exit(f"usage: {sys.argv[0]} DEPLOY_DIR WORKDIR [--host-path A=B]...")
    a, b = rest[1].split("=", 1)
    subst[a] = b
    rest = rest[2:]

base = os.path.join(deploy, "base")
objs = [d for d in yaml.safe_load_all(open(os.path.join(base, "daemonset.yaml"))) if d]
ds = next(o for o in objs if o["kind"] == "DaemonSet")
cms = {}
for g in yaml.safe_load(open(os.path.join(base, "kustomization.yaml"))).get("configMapGenerator", []):
    data = {}
    for f in g.get("files", []):
        key, _, file = f.rpartition("=")
        data[key or os.path.basename(file)] = open(os.path.join(base, file)).read()
    cms[g["name"]] = {"data": data}
pod = ds["spec"]["template"]["spec"]
(main,) = pod["containers"]

def unsupported(what):
    sys.exit(f"daemonset-to-podman: {what} has no translation here; extend the script")

if pod.get("hostIPC") or pod.get("hostNetwork"):
    unsupported("hostIPC/hostNetwork")
vols = {v["name"]: v for v in pod["volumes"]}
mkdirs = []


def translate(c):
    sc = c.get("securityContext", {})
    run = ["--network", "host", "--pid", "host" if pod.get("hostPID") else "private"]
    if "runAsUser" in sc:
        run += ["--user", f"{sc['runAsUser']}:{sc.get('runAsGroup', sc['runAsUser'])}"]
    if sc.get("privileged"):
        run.append("--privileged")
    for cap in sc.get("capabilities", {}).get("drop", []):
        run += ["--cap-drop", cap]
    for cap in sc.get("capabilities", {}).get("add", []):
        run += ["--cap-add", cap]
    if sc.get("allowPrivilegeEscalation") is False:
        run += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        # podman adds tmpfs /tmp, /run, /var/tmp to --read-only unless told not to;
        # a pod gets only what its volumes say.
        run += ["--read-only", "--read-only-tmpfs=false"]
    seccomp = {**pod.get("securityContext", {}).get("seccompProfile", {}), **sc.get("seccompProfile", {})}
    if seccomp.get("type") not in ("RuntimeDefault", None):
        unsupported(f"seccompProfile {seccomp}")
    for m in c["volumeMounts"]:
        v = vols[m["name"]]
        ro = ":ro" if m.get("readOnly") else ""
        if "hostPath" in v:
            host = subst.get(v["hostPath"]["path"], v["hostPath"]["path"])
            if v["hostPath"].get("type") == "DirectoryOrCreate":
                mkdirs.append(host)
            run += ["-v", f"{host}:{m['mountPath']}{ro}"]
        elif "configMap" in v:
            d = os.path.join(work, "configmap-" + v["configMap"]["name"])
            os.makedirs(d, exist_ok=True)
            for k, text in cms[v["configMap"]["name"]]["data"].items():
                with open(os.path.join(d, k), "w") as f:
                    f.write(text)
            run += ["-v", f"{d}:{m['mountPath']}{ro}"]
        elif "emptyDir" in v:
            size = v["emptyDir"].get("sizeLimit", "")
            run += ["--tmpfs", m["mountPath"] + (":size=" + size.replace("Mi", "m") if size else "")]
        else:
            unsupported(f"volume {v}")
    lim = c.get("resources", {}).get("limits", {})
    if "memory" in lim:
        m = re.fullmatch(r"(\d+)Mi", lim["memory"]) or unsupported(f"memory limit {lim['memory']}")
        run += ["--memory", f"{m.group(1)}m"]
    return run


probes = {p: main[p]["exec"]["command"] for p in ("startupProbe", "readinessProbe", "livenessProbe") if p in main}
init = [{"name": c["name"], "run": translate(c), "command": c.get("command"), "args": c.get("args", [])}
        for c in pod.get("initContainers", [])]
for c in pod.get("initContainers", []):
    if c.get("image") != main.get("image"):
        unsupported(f"init container {c['name']} with another image ({c.get('image')})")
run = translate(main)
json.dump({"run": run, "command": main.get("command"), "args": main.get("args", []), "probes": probes,
           "init": init, "mkdirs": sorted(set(mkdirs)), "config": cms["podshim-config"]["data"]["config.yaml"]},
          sys.stdout, indent=1)
