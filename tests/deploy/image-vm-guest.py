#!/usr/bin/env python3
"""Inside the test VM (tests/vm/vm-run --mode hostroot): runs the podshim OCI
image with podman + crun under deploy/base's DaemonSet settings
(daemonset-to-podman.py) against the real NRI peer (containerd/nri's
pkg/adaptation in nri-harness), and checks that podshimd
  1. registers and synchronizes (the harness's Sync and Result),
  2. refuses an unsafe shrink (-shrink-test: 4 MiB asked on a cgroup using
     200 MiB) with the kubelet-form message,
  3. passes the DaemonSet's probes (podman exec of the probe command),
  4. serves /metrics on the TCP listener with NRI connected and the
     refusal counted, and holds no capability after start-up,
  5. on this bare host (no podshim package): the DaemonSet's init container
     puts the image's own podshim-hook at the host path podshimd is given,
     and a container asking for a CDI device (by annotation) gets it with
     the hook named by that host path (podshimd runs from the image's root,
     which has its own copy elsewhere).
Usage: image-vm-guest.py IMAGE_ARCHIVE DEPLOY_DIR NRI_HARNESS WORKDIR"""
import json, os, re, subprocess, sys, time, urllib.request

image, deploy, harness, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
fake = os.path.join(work, "fake-cgroup")
os.makedirs(fake, exist_ok=True)
failures = []
passed = 0


def check(ok, what):
    global passed
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if ok:
        passed += 1
    else:
        failures.append(what)


def sh(*argv, check_rc=True, **kw):
    r = subprocess.run(list(argv), capture_output=True, text=True, **kw)
    if check_rc and r.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


spec = json.loads(sh(sys.executable, os.path.join(here, "daemonset-to-podman.py"), deploy, work,
                     "--host-path", f"/sys/fs/cgroup={fake}").stdout)
for d in spec["mkdirs"]:
    os.makedirs(d, exist_ok=True)
podman = ["podman", "--root", f"{work}/storage", "--runroot", f"{work}/runroot", "--storage-driver", "vfs",
          "--cgroup-manager", "cgroupfs", "--events-backend", "none", "--runtime", "crun"]

t0 = time.monotonic()
loaded = sh(*podman, "load", "-i", image).stdout
m = re.search(r"Loaded image(?:\(s\))?: (\S+)", loaded)
ref = m.group(1) if m else sys.exit(f"podman load said: {loaded}")
print(f"loaded {ref} in {time.monotonic() - t0:.1f}s", flush=True)

# The init containers, in order and to completion, as the kubelet runs them.
for init in spec["init"]:
    r = sh(*podman, "run", "--rm", "--name", init["name"], *init["run"], ref, *init["args"], check_rc=False)
    check(r.returncode == 0, f"init container {init['name']} ({(r.stdout + r.stderr).strip()[-300:]})")
hook_arg = spec["args"][spec["args"].index("--hook-host-path") + 1]
sh(*podman, "create", "--name", "hookref", ref)
sh(*podman, "cp", "hookref:/usr/libexec/podshim/podshim-hook", f"{work}/image-hook")
sh(*podman, "rm", "hookref", check_rc=False)
same = os.path.isfile(hook_arg) and os.access(hook_arg, os.X_OK) and \
    open(hook_arg, "rb").read() == open(f"{work}/image-hook", "rb").read()
check(same, f"podshim-hook installed on the host at {hook_arg}, executable, the image's own")

# A CDI device podshimd can resolve (the host's /etc/cdi is mounted into it).
os.makedirs("/etc/cdi", exist_ok=True)
with open("/etc/cdi/podshim-image-test.yaml", "w") as f:
    f.write("cdiVersion: 0.6.0\nkind: podshim.test/dev\ndevices:\n- name: null0\n  containerEdits:\n"
            "    deviceNodes:\n    - path: /dev/null\n    mounts:\n    - hostPath: /tmp\n"
            "      containerPath: /opt/podshim-test\n      options: [ro, bind]\n")

# The guest's loopback starts down; the pod's metrics port is scraped on it.
sh("ip", "link", "set", "lo", "up")
sock = "/var/run/nri/nri.sock"
if os.path.exists(sock):
    os.unlink(sock)
hout = open(f"{work}/harness.out", "w")
herr = open(f"{work}/harness.err", "w")
h = subprocess.Popen([harness, "-socket", sock, "-plugins", "1", "-sync-pods", "20", "-sync-containers", "200",
                      "-n", "20", "-bench-ops", "UpdateContainer", "-compact", "-shrink-test",
                      "-fake-cgroup-root", fake, "-wait", "300s", "-hold", "90s",
                      "-create-annotation", "cdi.k8s.io/image-test=podshim.test/dev=null0"], stdout=hout, stderr=herr)
for _ in range(100):
    if os.path.exists(sock):
        break
    time.sleep(0.1)

run = sh(*podman, "run", "-d", "--name", "podshim", "--log-driver", "k8s-file", *spec["run"], ref, *spec["args"],
         check_rc=False)
check(run.returncode == 0, f"podman run with the DaemonSet's settings ({run.stderr.strip()[:300]})")
ctr_logs = lambda: sh(*podman, "logs", "podshim", check_rc=False).stderr + sh(*podman, "logs", "podshim", check_rc=False).stdout


def harness_lines():
    out = []
    for line in open(f"{work}/harness.out"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


deadline = time.monotonic() + 300
shrink = None
while time.monotonic() < deadline and run.returncode == 0:
    lines = harness_lines()
    shrink = next((l["Shrink"] for l in lines if "Shrink" in l), None)
    if shrink or h.poll() is not None:
        break
    time.sleep(1)
lines = harness_lines()
sync = next((l["Sync"] for l in lines if "Sync" in l), None)
# A registration whose Synchronize missed the runtime's deadline is retried
# by podshimd (reconnect); the check is that one completes without error.
done = [s for s in (sync or []) if not s.get("error") and s.get("containers") == 200]
check(bool(done), f"registered and synchronized 20 pods / 200 containers: {sync}")
if sync and len(sync) > 1:
    print(f"note: {len(sync)} registrations; earlier ones: {sync[:-1]}", flush=True)
check(bool(shrink) and "below current usage" in shrink.get("error", ""),
      f"unsafe shrink refused: {shrink and shrink.get('error', '')[-160:]}")

# The lifecycle container asked for the CDI device: injected, with the hook
# named by its host path (the hook itself was found through the mount).
for _ in range(60):
    if "injected CDI devices podshim.test/dev=null0" in ctr_logs():
        break
    time.sleep(1)
logs = ctr_logs()
check(f"injecting podshim-hook as {hook_arg}" in logs, f"podshimd injects podshim-hook as the host's {hook_arg}")
check("injected CDI devices podshim.test/dev=null0" in logs, "a container asking for a CDI device got it")

# The DaemonSet's probes, exactly as the kubelet would exec them.
for name, cmd in spec["probes"].items():
    r = sh(*podman, "exec", "podshim", *cmd, check_rc=False)
    check(r.returncode == 0, f"{name} `{' '.join(cmd)}` exits 0 ({(r.stdout + r.stderr).strip()[-200:]})")

port = re.search(r'listen: "[^"]*:(\d+)"', spec["config"]).group(1)
try:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=20).read().decode()
except OSError as e:
    text = ""
    check(False, f"scrape :{port}/metrics: {e}")
vals = {}
for line in text.splitlines():
    m = re.match(r"^([a-z_]+)(?:\{[^}]*\})? (\S+)$", line)
    if m:
        vals[m.group(1)] = vals.get(m.group(1), 0) + float(m.group(2))
check(vals.get("podshim_nri_connected") == 1 and vals.get("podshim_nri_enabled") == 1,
      f"metrics: NRI connected ({vals.get('podshim_nri_connected')}) in NRI mode ({vals.get('podshim_nri_enabled')})")
check(vals.get("podshim_containers", 0) >= 200, f"metrics: podshim_containers {vals.get('podshim_containers')}")
check(vals.get("podshim_memory_shrinks_refused_total", 0) >= 1,
      f"metrics: shrink refusal counted ({vals.get('podshim_memory_shrinks_refused_total')})")
check("podshim_container_allocated_limits{" in text, "metrics: per-container families present")
check(vals.get("podshim_cdi_hook_injected") == 1 and vals.get("podshim_cdi_injections_total", 0) >= 1,
      f"metrics: hook injected ({vals.get('podshim_cdi_hook_injected')}), CDI injections "
      f"({vals.get('podshim_cdi_injections_total')})")

pid = sh(*podman, "inspect", "-f", "{{.State.Pid}}", "podshim", check_rc=False).stdout.strip()
if pid.isdigit():
    status = open(f"/proc/{pid}/status").read()
    caps = {k: v for k, v in re.findall(r"^(Cap\w+):\s+(\w+)$", status, re.M)}
    nnp = re.search(r"^NoNewPrivs:\s+(\d)", status, re.M).group(1)
    sec = re.search(r"^Seccomp:\s+(\d)", status, re.M).group(1)
    rss = re.search(r"^VmHWM:\s+(\d+)", status, re.M).group(1)
    check(all(int(caps[k], 16) == 0 for k in ("CapPrm", "CapEff", "CapBnd", "CapAmb")),
          f"podshimd holds no capability after start-up: {caps}")
    check(nnp == "1" and sec == "2", f"no_new_privs {nnp}, seccomp mode {sec} (2 = filter)")
    print(f"podshimd VmHWM {rss} kB with 200 containers, in the container", flush=True)
else:
    check(False, f"podman inspect pid: {pid}")
for f in ("/bin/sh", "/bin/bash", "/usr/bin/sh"):
    r = sh(*podman, "exec", "podshim", f, "-c", "true", check_rc=False)
    check(r.returncode != 0, f"no {f} in the image")

stop = sh(*podman, "stop", "-t", "20", "podshim", check_rc=False)
code = sh(*podman, "inspect", "-f", "{{.State.ExitCode}}", "podshim", check_rc=False).stdout.strip()
check(code == "0", f"podshimd exits 0 on SIGTERM (exit code {code})")
h.terminate()
h.wait()
if failures:
    print("--- container log\n" + ctr_logs()[-4000:])
    print("--- harness\n" + open(f"{work}/harness.out").read()[-3000:] + open(f"{work}/harness.err").read()[-3000:])
print(f"{passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
