#!/usr/bin/python3
"""Runs inside the test VM (tests/vm/vm-run --mode hostroot): one cell of the
runtime matrix (containerd 1.7.27 + Debian's runc 1.1.5, containerd 2.1.9 or
2.3.4 + runc 1.4.3, CRI-O 1.36.3 + runc 1.4.3) on a real cgroup v2, driven
through CRI by `cririg` (the kubelet's side), first without podshimd and then
with it as an external NRI plugin. Each cell runs the same scenarios:

  1. The same containers and in-place updates (cpu and memory up, then
     down above usage) without and with podshimd: the cgroup files must hold
     identical values. The CRI update's median latency (memory up, memory
     down with room, CPU) is reported with podshimd, without any plugin and
     with the Go stub (nri-null, what any NRI plugin costs the runtime), in
     alternating blocks.
  2. podshimd registers; no drift is reported for a container just created
     (the runtime may write its cgroup after NRI's CreateContainer), nor
     logged anywhere in the cell (nothing edits a cgroup behind it); actual
     values equal the allocated ones, with the weight formula learned
     (linear for runc 1.1.5, quadratic for runc 1.4).
  3. Shrinks below anonymous and below shmem usage refused with the reason:
     the process alive, oom_kill unchanged, memory.max kept; a shrink over
     page cache applied by reclaim.
  4. A CDI device with a device node, a mount, an env var and a poststart
     hook, asked for through the CRI CDIDevices field (what the kubelet
     sends for DRA) and through a cdi.k8s.io annotation: in the OCI spec the
     runtime hands to runc each item appears exactly once (whether the
     runtime applied the spec itself, podshimd did, or both saw it), and the
     container sees the device, the mount and the variable.
  5. podshimd stopped and restarted while containers run (one created
     meanwhile): it resynchronizes and reports every container.
  6. containerd only: podshimd pre-installed in /opt/nri/plugins, started
     by containerd itself.
  7. CRI-O only: hooks.d mode, NRI off. podshim-hook runs from CRI-O's
     hooks directory (the entries packaging/hooks.d ships) at createRuntime
     and poststop; podshimd, told nothing by the runtime, learns each
     container from the hook, reports its actual values, resizes it through
     podshimctl (a shrink below usage refused, the process alive), keeps a
     CDI device's items once, and forgets the container when it is removed.

It ends with one summary line per cell. Started by runtimes_interop.py on the
host; every path is the host's (hostroot mode shares the host root read-only
under a tmpfs overlay).
"""

import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

T0 = time.monotonic()
MI = 1 << 20
CG = "/sys/fs/cgroup"
NRI_SOCK = "/var/run/nri/nri.sock"
WORK = "/run/podshim-interop"
CDI_DIR = "/etc/cdi"
CDI_NODE = "/dev/podshim-cdi0"  # mknod'ed as char 1:7 (/dev/full's numbers)
CDI_MAJ, CDI_MIN = 1, 7
CDI_MOUNT = "/podshim-cdi"
CDI_ENV = "PODSHIM_CDI_TEST"
CDI_HOOK = "/usr/bin/true"
LOGS = []  # files whose tail is printed when the cell dies
problems = []


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


def check(cond, msg):
    if cond:
        log(f"ok: {msg}")
    else:
        log(f"FAILED: {msg}")
        problems.append(msg)
    return bool(cond)


def die(msg):
    log(f"FATAL: {msg}")
    for f in LOGS:
        if os.path.exists(f):
            print(f"--- {f} (tail)\n" + open(f, errors="replace").read()[-6000:], flush=True)
    sys.exit(1)


def run(*cmd, check_rc=True, timeout=180, env=None):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                       env=None if env is None else {**os.environ, **env})
    if check_rc and r.returncode != 0:
        die(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")
    return r


def read(path):
    with open(path) as f:
        return f.read().strip()


def keyed(path):
    return {k: int(v) for k, v in (l.split() for l in read(path).splitlines())}


def release(tarball_dir, default):
    """The tag in a peers tarball's VERSION file ("tag: v2.3.4"), as text and
    as a tuple of ints."""
    text = read(f"{tarball_dir}/VERSION") if os.path.exists(f"{tarball_dir}/VERSION") else f"tag: {default}"
    m = re.search(r"^tag: (v(\d+)\.(\d+)\.(\d+))", text, re.M)
    if not m:
        die(f"{tarball_dir}/VERSION names no tag")
    return m.group(1), tuple(int(x) for x in m.groups()[1:])


def wait_for(pred, timeout, what=None, step=0.2):
    """pred() until it holds or `timeout` s have passed. Running out of time
    is fatal when `what` names the condition; without it, pred()'s last value
    is returned (a condition a later check judges)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= end:
            if what:
                die(f"timed out after {timeout} s waiting for {what}")
            return v
        time.sleep(step)


class Cri:
    """cririg, one CRI call per invocation."""

    def __init__(self, cririg, endpoint):
        self.cririg, self.endpoint = cririg, endpoint

    def __call__(self, *args, check_rc=True, timeout=180, env=None):
        return run(self.cririg, "-s", self.endpoint, *args, check_rc=check_rc, timeout=timeout, env=env)

    def runp(self, name, uid):
        return self("runp", name, uid, f"/kubepods/burstable/pod{uid}").stdout.split()[-1]

    def create(self, pod, name, mem, shares, quota, *cmd, cdi=None, annotations=None):
        # The container's name as the kubelet passes it (CRI-O reports NRI's
        # container name from this annotation).
        ann = {"io.kubernetes.container.name": name, **(annotations or {})}
        env = {"CRIRIG_ANNOTATIONS": ";".join(f"{k}={v}" for k, v in ann.items())}
        if cdi:
            env["CRIRIG_CDI"] = cdi
        out = self("create", pod, name, "docker.io/rig/busybox:1", str(mem), str(shares), str(quota),
                   "100000", "--", *cmd, env=env).stdout.split()
        return out[-1]

    def update(self, cid, **kv):
        r = self("update", cid, *[f"{k}={v}" for k, v in kv.items()], check_rc=False)
        return r.returncode, (r.stdout + r.stderr).strip()

    def timed_update(self, cid, **kv):
        rc, out = self.update(cid, **kv)
        m = re.match(r"OK (\S+)", out)
        if rc != 0 or not m:
            die(f"update {cid[:12]} {kv}: {out}")
        return float(m.group(1))

    def state(self, cid):
        return self("state", cid).stdout.split()


class Runtime:
    """One runtime of the matrix: how it starts, where it keeps things."""

    tag = ""
    proc = None
    log_path = ""

    def running_runc(self):
        return run(self.runc_path(), "--version").stdout.splitlines()[0]

    def runc_path(self):
        return "/usr/sbin/runc"

    def stop(self):
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def log_len(self):
        return os.path.getsize(self.log_path)

    def drops(self, start=0):
        """The runtime's log lines about closing or dropping an NRI plugin."""
        with open(self.log_path, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        return [l for l in text.splitlines()
                if re.search(r"clos(e|ing) plugin|plugin .*(disconnected|closed)|failed to synchronize", l, re.I)]


class Containerd(Runtime):
    def __init__(self, a):
        self.dir = a.dir
        # 1.7.27's tarball has no VERSION file
        self.version, self.release = release(a.dir, "v1.7.27")
        self.major = self.release[0]
        self.tag = f"containerd-{self.version}"
        self.log_path = "/tmp/containerd.log"
        self.cri = Cri(a.cririg, "unix:///run/containerd/containerd.sock")
        self.image = a.image

    def start(self):
        if os.path.exists(NRI_SOCK):
            os.unlink(NRI_SOCK)
        self.proc = subprocess.Popen([f"{self.dir}/bin/containerd", "--config", f"{self.dir}/config.toml"],
                                     stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists("/run/containerd/containerd.sock") and
                 run(f"{self.dir}/bin/ctr", "version", check_rc=False).returncode == 0, 120, "containerd")

    def import_images(self):
        # 2.x: --local keeps the client-side import (the transfer service
        # would unpack to overlayfs, which the guest has not).
        local = ["--local"] if self.major >= 2 else []
        run(f"{self.dir}/bin/ctr", "-n", "k8s.io", "images", "import", *local, "--snapshotter", "native",
            self.image, timeout=300)

    def oci_spec(self, cid):
        return json.load(open(f"/run/containerd/io.containerd.runtime.v2.task/k8s.io/{cid}/config.json"))

    def runtime_cdi(self):
        return self.major >= 2  # enable_cdi: off in 1.7's config, on (the default) in 2.x

    def sees_cdi_field(self):
        # NRI v0.12 (containerd 2.3) carries the CRI CDIDevices list to
        # plugins; v0.8 (1.7, 2.1) has no such field.
        return self.release >= (2, 3, 0)


class Crio(Runtime):
    def __init__(self, a):
        self.dir = a.dir
        self.version, self.release = release(a.dir, "")
        self.tag = f"crio-{self.version}"
        self.log_path = "/tmp/crio.log"
        self.cri = Cri(a.cririg, "unix:///var/run/crio/crio.sock")
        self.oci_dir = a.oci_dir

    def start(self, extra=()):
        if os.path.exists(NRI_SOCK):
            os.unlink(NRI_SOCK)
        self.proc = subprocess.Popen(["/usr/local/bin/crio", "--config", "/etc/crio/crio.conf", *extra],
                                     stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists("/var/run/crio/crio.sock") and
                 self.cri("version", check_rc=False).returncode == 0, 120, "CRI-O")

    def import_images(self):
        # copyimg puts an image into containers-storage without a registry;
        # the OCI layout's index 0 is busybox, 1 the pause image.
        for idx, name in ((0, "docker.io/rig/busybox:1"), (1, "docker.io/rig/pause:1")):
            run("/usr/local/bin/copyimg", "--root", "/var/lib/containers/storage", "--runroot",
                "/run/containers/storage", "--storage-driver", "vfs", "--signature-policy",
                "/etc/containers/policy.json", "--image-name", name, "--import-from",
                f"oci:{self.oci_dir}:@{idx}", timeout=300)

    def oci_spec(self, cid):
        return json.load(open(f"/run/containers/storage/vfs-containers/{cid}/userdata/config.json"))

    def runtime_cdi(self):
        return True  # always on in CRI-O

    def sees_cdi_field(self):
        return False  # CRI-O 1.36.3 fills no CDI_devices in the NRI container


class Podshimd:
    def __init__(self, exe, ctl, tag, extra_config=""):
        self.exe, self.ctl, self.tag = exe, ctl, tag
        self.sock = f"{WORK}/{tag}.sock"
        self.state = f"{WORK}/{tag}-state"
        self.config = f"{WORK}/{tag}.yaml"
        self.log_path = f"{WORK}/{tag}.log"
        LOGS.append(self.log_path)
        os.makedirs(self.state, exist_ok=True)
        with open(self.config, "w") as f:
            # weight_formula stays at its default (auto) unless
            # PODSHIM_INTEROP_WEIGHT_FORMULA says otherwise (to watch the
            # actual-CPU checks fail with the wrong fixed formula);
            # PODSHIM_INTEROP_SETTLE_MS sets cgroup.shrink_settle_ms (to see
            # what the shrink's watch costs a CRI update).
            f.write(f"log_level: info\ncdi:\n  spec_dirs: [{CDI_DIR}]\n")
            cgroup = {"weight_formula": os.environ.get("PODSHIM_INTEROP_WEIGHT_FORMULA"),
                      "shrink_settle_ms": os.environ.get("PODSHIM_INTEROP_SETTLE_MS")}
            if any(cgroup.values()):
                f.write("cgroup:\n" + "".join(f"  {k}: {v}\n" for k, v in cgroup.items() if v))
            f.write(extra_config)
        self.args = ["--config", self.config, "--socket", self.sock, "--state-dir", self.state,
                     "--cgroup-root", CG, "--nri-socket", NRI_SOCK]
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([self.exe] + self.args, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "a"), stdin=subprocess.DEVNULL)

    def start_registered(self, why="podshimd to register"):
        """Starts podshimd and waits until it has registered with the
        runtime and synchronized (what its log says from this start on)."""
        mark = len(self.log())
        self.start()
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if "NRI: registered and synchronized" in self.log()[mark:]:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        # Where it is: exited (with what), or each thread's kernel stack.
        pid, rc = self.proc.pid, self.proc.poll()
        log(f"podshimd (pid {pid}) {'exited with ' + str(rc) if rc is not None else 'still running'}; "
            f"its log since this start: {self.log()[mark:]!r}")
        for task in sorted(os.listdir(f"/proc/{pid}/task")) if rc is None else []:
            for f in ("comm", "wchan", "syscall", "stack"):
                try:
                    log(f"  task {task} {f}: {read(f'/proc/{pid}/task/{task}/{f}')!r}")
                except OSError as e:
                    log(f"  task {task} {f}: {e}")
        die(f"timed out after 60 s waiting for {why}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)

    def log(self):
        return open(self.log_path, errors="replace").read() if os.path.exists(self.log_path) else ""

    def ctl_json(self, *args):
        r = run(self.ctl, "--socket", self.sock, "-o", "json", *args, check_rc=False)
        if r.returncode not in (0, 1):
            die(f"podshimctl {' '.join(args)}: exit {r.returncode} {r.stderr}")
        return json.loads(r.stdout)

    def containers(self):
        return {c["id"]: c for c in self.ctl_json("get", "containers")["items"]}


class NriNull:
    """nri-null (containerd/nri pkg/stub, every event answered empty) as
    an external plugin of the runtime under test."""

    def __init__(self, exe):
        self.exe, self.log_path, self.proc = exe, f"{WORK}/nri-null.log", None
        LOGS.append(self.log_path)

    def start(self):
        mark = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        self.proc = subprocess.Popen([self.exe, "-socket", NRI_SOCK, "-name", "null", "-idx", "50"],
                                     stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        # pkg/stub's plugin prints this once Synchronize is answered.
        wait_for(lambda: "nri-null: synchronized" in open(self.log_path, errors="replace").read()[mark:], 60,
                 "nri-null to register")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def cgroup_of(cid):
    # containerd: .../pod<uid>/<id>; CRI-O: .../pod<uid>/crio-<id>
    hits = glob.glob(f"{CG}/kubepods/**/{cid}", recursive=True) + \
        glob.glob(f"{CG}/kubepods/**/crio-{cid}", recursive=True)
    if not hits:
        die(f"no cgroup directory for container {cid}")
    return hits[0]


def cgroup_triple(cg):
    return (read(f"{cg}/cpu.weight"), read(f"{cg}/cpu.max"), read(f"{cg}/memory.max"))


def wait_actual(d, cids, timeout=10):
    """Until podshimd reports actual values for every container of CIDS (read
    from the kernel after the runtime's events or a sync, within a read-back
    period); check_reported() then judges them. Not a failure by itself."""
    wait_for(lambda: all(isinstance((d.containers().get(c) or {}).get("actual"), dict) for c in cids), timeout,
             step=0.1)


def check_reported(d, cids, what):
    """Every running container: allocated and actual present, actual CPU request
    and limit equal to the allocated (requested) ones, memory limit too, no
    drift."""
    cs = d.containers()
    equal = 0
    for cid in cids:
        c = cs.get(cid)
        if not check(c is not None, f"{what}: podshimd knows {cid[:12]}"):
            continue
        al, ac = c.get("allocated") or {}, c.get("actual")
        if not check(isinstance(ac, dict), f"{what}: {cid[:12]} ({c.get('name')}) has actual values"):
            continue
        ok = check(ac.get("cpuRequestMilli") == al.get("cpuRequestMilli") and al.get("cpuRequestMilli"),
                   f"{what}: {c.get('name')} actual cpu request {ac.get('cpuRequestMilli')}m == requested "
                   f"{al.get('cpuRequestMilli')}m")
        ok &= check(ac.get("cpuLimitMilli") == al.get("cpuLimitMilli"),
                    f"{what}: {c.get('name')} actual cpu limit {ac.get('cpuLimitMilli')}m == "
                    f"{al.get('cpuLimitMilli')}m")
        ok &= check(ac.get("memoryLimitBytes") == al.get("memoryLimitBytes"),
                    f"{what}: {c.get('name')} actual memory limit {ac.get('memoryLimitBytes')} == "
                    f"{al.get('memoryLimitBytes')}")
        ok &= check(not c.get("drift"), f"{what}: {c.get('name')} no drift ({c.get('drift')})")
        equal += bool(ok)
    print(run(d.ctl, "--socket", d.sock, "get", "containers", check_rc=False).stdout, flush=True)
    return equal


# The kubelet's in-place updates of one container: created with 500m / 1 CPU
# / 256Mi, raised, lowered above usage.
UPDATES = [dict(mem=512 * MI, shares=1024, quota=200000, period=100000),
           dict(mem=128 * MI, shares=256, quota=50000, period=100000)]


def update_sequence(rt, pod, name):
    """Creates a container, applies UPDATES, returns the cgroup values after
    creation and after each update."""
    c = rt.cri.create(pod, name, 256 * MI, 512, 100000, "/bin/sleep", "999999")
    cg = cgroup_of(c)
    seen = [cgroup_triple(cg)]
    for u in UPDATES:
        rc, out = rt.cri.update(c, **u)
        check(rc == 0, f"{name}: update {u}: {out}")
        seen.append(cgroup_triple(cg))
    return c, seen


def latency(rt, pod, name, rounds, into):
    """CRI update latencies (ms) of memory up, memory down with room and CPU
    changes, alternating, on an idle container, appended to INTO[kind]."""
    c = rt.cri.create(pod, name, 256 * MI, 512, 100000, "/bin/sleep", "999999")
    kinds = {
        "memory up": (dict(mem=256 * MI), dict(mem=384 * MI)),
        "memory down": (dict(mem=384 * MI), dict(mem=256 * MI)),
        "cpu": (dict(shares=1024, quota=200000, period=100000), dict(shares=512, quota=100000, period=100000)),
    }
    for kind, (prep, change) in kinds.items():
        for _ in range(rounds):
            rt.cri.timed_update(c, **prep)
            into.setdefault(kind, []).append(rt.cri.timed_update(c, **change))
    rt.cri("rm", c, check_rc=False)


def write_cdi_spec():
    os.makedirs(CDI_DIR, exist_ok=True)
    os.makedirs(f"{WORK}/cdi-data", exist_ok=True)
    with open(f"{WORK}/cdi-data/hello", "w") as f:
        f.write("from the CDI mount\n")
    if not os.path.exists(CDI_NODE):
        run("mknod", CDI_NODE, "c", str(CDI_MAJ), str(CDI_MIN))
    spec = {
        "cdiVersion": "0.6.0",
        "kind": "podshim.test/dev",
        "devices": [{"name": "a", "containerEdits": {
            "deviceNodes": [{"path": CDI_NODE}],
            "mounts": [{"hostPath": f"{WORK}/cdi-data", "containerPath": CDI_MOUNT, "options": ["ro", "bind"]}],
            "env": [f"{CDI_ENV}=1"],
            "hooks": [{"hookName": "poststart", "path": CDI_HOOK, "args": ["true", "podshim-cdi-test"]}],
        }}],
    }
    with open(f"{CDI_DIR}/podshim-test.json", "w") as f:
        json.dump(spec, f)


def cdi_counts(spec):
    """How often each item of the CDI device appears in an OCI spec."""
    lin = spec.get("linux") or {}
    rules = [r for r in (lin.get("resources") or {}).get("devices") or []
             if r.get("allow") and r.get("major") == CDI_MAJ and r.get("minor") == CDI_MIN]
    return {
        "device node": sum(d.get("path") == CDI_NODE for d in lin.get("devices") or []),
        "allow rule": len(rules),
        "mount": sum(m.get("destination") == CDI_MOUNT for m in spec.get("mounts") or []),
        "env": sum(e.startswith(CDI_ENV + "=") for e in (spec.get("process") or {}).get("env") or []),
        "hook": sum(h.get("path") == CDI_HOOK and "podshim-cdi-test" in (h.get("args") or [])
                    for h in (spec.get("hooks") or {}).get("poststart") or []),
    }


def cdi_phase(rt, pod, summary):
    """A CDI device by field and by annotation: each item once in the spec
    runc gets, and visible in the container."""
    write_cdi_spec()
    ways = [("annotation", dict(annotations={"cdi.k8s.io/podshim-test": "podshim.test/dev=a"}))]
    if isinstance(rt, Crio) or rt.major >= 2:
        ways.insert(0, ("CDIDevices field", dict(cdi="podshim.test/dev=a")))
    once = total = 0
    for way, kw in ways:
        if way == "annotation" and not rt.runtime_cdi():
            who = "podshimd alone (the runtime's CDI is off)"
        elif way == "annotation" or rt.sees_cdi_field():
            who = "the runtime, and podshimd sees the request"
        else:
            who = "the runtime alone (its NRI does not pass the field to plugins)"
        c = rt.cri.create(pod, f"cdi-{way.split()[0].lower()}", 64 * MI, 256, 100000, "/bin/sleep", "999999",
                          **kw)
        counts = cdi_counts(rt.oci_spec(c))
        log(f"CDI by {way}, applied by {who}: {counts}")
        for item, n in counts.items():
            total += 1
            once += check(n == 1, f"CDI by {way}: the {item} appears exactly once in the OCI spec (got {n})")
        # Seen from the container's own root and environment (through /proc:
        # runc 1.4's exec needs /proc/sys, which the guest's /proc lacks).
        pid = rt.cri.state(c)[3]
        root = f"/proc/{pid}/root"
        node = os.stat(f"{root}{CDI_NODE}") if os.path.exists(f"{root}{CDI_NODE}") else None
        mounted = read(f"{root}{CDI_MOUNT}/hello") if os.path.exists(f"{root}{CDI_MOUNT}/hello") else None
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        check(node is not None and os.major(node.st_rdev) == CDI_MAJ and os.minor(node.st_rdev) == CDI_MIN and
              mounted == "from the CDI mount" and f"{CDI_ENV}=1".encode() in env,
              f"CDI by {way}: the container sees the device ({node and (os.major(node.st_rdev), os.minor(node.st_rdev))}), "
              f"the mount ({mounted!r}) and the env")
        rt.cri("rm", c, check_rc=False)
    summary["CDI items exactly once"] = f"{once}/{total}"


def shrink_phase(rt, pod, summary):
    """Shrinks below anon and shmem usage refused; over page cache applied."""
    refused = kills = 0
    cids = []
    for kind, mib, to in (("anon", 100, 48), ("shm", 48, 16)):
        c = rt.cri.create(pod, kind, 256 * MI, 256, 100000, "/bin/hog", kind, str(mib))
        cids.append(c)
        cg = cgroup_of(c)
        stat_key = "anon" if kind == "anon" else "shmem"
        wait_for(lambda: keyed(f"{cg}/memory.stat").get(stat_key, 0) > (mib - 10) * MI or
                 int(read(f"{cg}/memory.current")) > (mib + 20) * MI, 90, f"the {kind} hog to charge {mib} MiB")
        before = keyed(f"{cg}/memory.events").get("oom_kill", 0)
        rc, out = rt.cri.update(c, mem=to * MI, shares=256, quota=100000, period=100000)
        refused += check(rc != 0 and "below current usage" in out, f"shrink below {kind} usage refused: {out}")
        time.sleep(1)  # a window for a kill to show, not a wait for podshimd
        check(rt.cri.state(c)[0] == "RUNNING", f"{kind} hog still running: {rt.cri.state(c)}")
        k = keyed(f"{cg}/memory.events").get("oom_kill", 0) - before
        kills += k
        check(k == 0, f"{kind}: no OOM kill ({k})")
        check(read(f"{cg}/memory.max") == str(256 * MI), f"{kind}: memory.max kept ({read(f'{cg}/memory.max')})")
    # A shrink over page cache (a 96 MiB file in the container's rootfs on
    # ext4): applied, podshimd reclaiming first.
    c = rt.cri.create(pod, "cache", 256 * MI, 256, 100000, "/bin/hog", "file", "/data/cache", "96")
    cids.append(c)
    cg = cgroup_of(c)
    wait_for(lambda: keyed(f"{cg}/memory.stat").get("file", 0) > 80 * MI, 90,
             "the page-cache hog to charge 96 MiB of file pages")
    rc, out = rt.cri.update(c, mem=32 * MI, shares=256, quota=100000, period=100000)
    # The hog's file pages are dirty until the flusher writes them (30 s by
    # default). Reclaim passes over dirty pages, so a shrink can time out on
    # them (seen on 6.12 with 4 vCPUs under TCG); podshimd then refuses,
    # saying so, and the same shrink must pass once they are written back.
    if rc != 0 and "dirty or under writeback" in out:
        log(f"shrink over dirty page cache refused, as it says: {out}")
        run("sync")
        rc, out = rt.cri.update(c, mem=32 * MI, shares=256, quota=100000, period=100000)
        summary["page-cache shrink"] = "applied after writeback (first refused: dirty pages)"
    else:
        summary["page-cache shrink"] = "applied"
    check(rc == 0, f"shrink over page cache applied: {out}")
    check(read(f"{cg}/memory.max") == str(32 * MI), f"cache: memory.max = {read(f'{cg}/memory.max')}")
    kills += keyed(f"{cg}/memory.events").get("oom_kill", 0)
    check(keyed(f"{cg}/memory.events").get("oom_kill", 0) == 0, "cache: no OOM kill")
    check(rt.cri.state(c)[0] == "RUNNING", f"cache hog still running: {rt.cri.state(c)}")
    summary["shrinks refused"] = f"{refused}/2"
    summary["kills"] = kills
    return cids


def no_drift_at_creation(d, rt, pod):
    """Polls podshimd from the moment a container exists: drift must never
    be reported for it (the runtime writes the cgroup after NRI's
    CreateContainer; read-back must not look before that)."""
    c = rt.cri.create(pod, "fresh", 192 * MI, 768, 150000, "/bin/sleep", "999999")
    seen = set()
    end = time.monotonic() + 3
    while time.monotonic() < end:
        x = d.containers().get(c)
        if x and x.get("drift"):
            seen.update(f"{dr.get('resource')}" for dr in x["drift"])
        time.sleep(0.1)
    check(not seen, f"no drift reported for a new container in its first 3 s (saw: {sorted(seen)})")
    return c


def podshimd_cell(a, rt, base, summary):
    d = Podshimd(a.podshimd, a.podshimctl, f"podshimd-{rt.tag}")
    d.start_registered()
    m = re.search(r"configured by (\S+) (\S+)", d.log())
    log(f"podshimd registered with {m.group(1)} {m.group(2)}")
    pod = rt.cri.runp("pod-a", "11111111-2222-4333-8444-555555555555")

    c1, seen = update_sequence(rt, pod, "c1")
    same = check(seen == base, f"cgroup values with podshimd {seen} == without {base}")
    summary["values identical"] = "yes" if same else "NO"
    fresh = no_drift_at_creation(d, rt, pod)
    running = [c1, fresh]
    want = "linear" if "1.1." in rt.running_runc() else "quadratic"

    def current_formula():
        cur = [f for f in d.ctl_json("status").get("weightFormulas", []) if f.get("current")]
        return cur[0] if cur else {}
    # Learned from the weights runc wrote, read after the runtime's events:
    # waited for (a read-back period at most), then checked.
    wait_for(lambda: current_formula().get("source") == "learned", 10, step=0.1)
    f = current_formula()
    check(f.get("formula") == want and f.get("source") == "learned",
          f"weight formula learned for {rt.running_runc()}: {f} (want {want})")

    running += shrink_phase(rt, pod, summary)
    cdi_phase(rt, pod, summary)

    # The CRI update latencies with podshimd, without any plugin and with
    # the Go stub (nri-null: what any NRI plugin costs this runtime). A TCG
    # guest's pace drifts by tens of percent within a minute (seen: 1.00x
    # and then 1.45x for the same build, CPU updates included), so the sides
    # take turns in short blocks, each block starting with the next side.
    drops = rt.drops()
    check(not drops, f"{rt.tag} logged no closing/dropping of podshimd while it ran: {drops}")
    lat, base_lat, null_lat = {}, {}, {}
    null = NriNull(a.nri_null) if a.nri_null else None
    sides = [("podshimd", lat), ("none", base_lat)] + ([("stub", null_lat)] if null else [])
    running_side = "podshimd"
    for i in range(a.blocks):
        for side, into in sides[i % len(sides):] + sides[:i % len(sides)]:
            if running_side == "podshimd":
                d.stop()
            elif running_side == "stub":
                null.stop()
            if side == "podshimd":
                d.start_registered("podshimd to re-register")
            elif side == "stub":
                null.start()
            running_side = side
            latency(rt, pod, f"lat-{side}-{i}", a.rounds, into)
    if running_side == "podshimd":
        d.stop()
    elif running_side == "stub":
        null.stop()
    for k in lat:
        log(f"update ms, {k}: with podshimd {lat[k]}; without {base_lat[k]}" +
            (f"; with the Go stub {null_lat[k]}" if null else ""))
    med = {k: statistics.median(v) for k, v in lat.items()}
    ref = {k: statistics.median(v) for k, v in base_lat.items()}
    summary["update median ms (without / with podshimd)"] = ", ".join(
        f"{k} {ref[k]:.0f}/{med[k]:.0f} ({med[k] / ref[k]:.2f}x)" for k in med)
    if null:
        stub = {k: statistics.median(v) for k, v in null_lat.items()}
        summary["with the Go stub (nri-null)"] = ", ".join(
            f"{k} {stub[k]:.0f} ({stub[k] / ref[k]:.2f}x; podshimd {med[k] / stub[k]:.2f}x the stub)" for k in med)
    summary["update samples"] = f"{len(lat['memory down'])} per kind and side, {a.blocks} blocks taking turns"
    # podshimd is away now; the runtime goes on (a container is created
    # meanwhile), and podshimd resynchronizes when it starts again.
    away = rt.cri.create(pod, "while-away", 64 * MI, 768, 150000, "/bin/sleep", "999999")
    check(all(rt.cri.state(c)[0] == "RUNNING" for c in running + [away]),
          f"{rt.tag} kept every container running while podshimd was away")
    running.append(away)
    t = time.monotonic()
    d.start_registered("podshimd to resynchronize")
    rt_mark = rt.log_len()
    log(f"podshimd restarted and resynchronized in {time.monotonic() - t:.1f} s (TCG)")
    wait_actual(d, running)
    n = check_reported(d, running, "after podshimd restart")
    summary["actual = allocated"] = f"{n}/{len(running)}"
    st = d.ctl_json("status")
    check(st.get("containers") == len(running), f"podshimctl status counts {st.get('containers')} containers")
    print(run(d.ctl, "--socket", d.sock, "status", check_rc=False).stdout, flush=True)
    drops = rt.drops(rt_mark)
    check(not drops, f"{rt.tag} logged no closing/dropping after the restart: {drops}")
    # Nothing in this cell edits a cgroup behind podshimd, so any drift it
    # logged is a false one (a read while the runtime was still writing).
    drift = [ln for ln in d.log().splitlines() if "Drift: " in ln]
    check(not drift, f"podshimd logged no drift in the whole cell: {drift[:3]}")
    summary["drift logged"] = str(len(drift))
    if problems:
        # What podshimd did with each resize (outcome, reclaimed, ms), for
        # the failure's reader: the runtime's side is in its own log.
        lines = [ln for ln in d.log().splitlines() if "resize " in ln]
        log(f"podshimd's resize lines ({len(lines)}, the last 40):")
        for ln in lines[-40:]:
            print(f"    {ln}", flush=True)
    for c in running:
        rt.cri("rm", c, check_rc=False)
    rt.cri("rmp", pod, check_rc=False)
    d.stop()


def preinstalled_phase(a, rt):
    log("=== podshimd pre-installed in /opt/nri/plugins (containerd starts it)")
    rt.stop()
    d = Podshimd(a.podshimd, a.podshimctl, f"podshimd-pre-{rt.tag}")
    # containerd runs the plugin with only NRI_PLUGIN_* in the environment and
    # no stdout/stderr; the wrapper gives podshimd its temp paths and a log.
    wrapper = "/opt/nri/plugins/10-podshim"
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec " + " ".join([a.podshimd] + d.args) + f" 2>>{d.log_path}\n")
    os.chmod(wrapper, 0o755)
    start = rt.log_len()
    rt.start()
    wait_for(lambda: "NRI: registered and synchronized" in d.log(), 90, "containerd to start podshimd")
    check("pre-installed mode" in d.log(), "podshimd ran in pre-installed mode")
    pod = rt.cri.runp("pod-b", "22222222-3333-4444-8555-666666666666")
    c1 = rt.cri.create(pod, "pre", 128 * MI, 512, 50000, "/bin/hog", "anon", "64")
    cg1 = cgroup_of(c1)
    wait_for(lambda: int(read(f"{cg1}/memory.current")) > 60 * MI, 60, "the hog to charge 64 MiB")
    wait_actual(d, [c1])
    check_reported(d, [c1], "pre-installed")
    rc, out = rt.cri.update(c1, mem=32 * MI, shares=512, quota=50000, period=100000)
    check(rc != 0 and "below current usage" in out, f"pre-installed: shrink below usage refused: {out}")
    check(rt.cri.state(c1)[0] == "RUNNING", "pre-installed: hog alive")
    rc, out = rt.cri.update(c1, mem=256 * MI, shares=1024, quota=100000, period=100000)
    check(rc == 0, f"pre-installed: increase applied: {out}")
    check(read(f"{cg1}/memory.max") == str(256 * MI), "pre-installed: memory.max after the increase")
    drops = rt.drops(start)
    check(not drops, f"pre-installed: containerd logged no closing/dropping of podshimd: {drops}")
    rt.cri("rm", c1, check_rc=False)
    rt.cri("rmp", pod, check_rc=False)
    os.unlink(wrapper)


def hooksd_phase(a, rt, summary):
    """CRI-O with NRI off and podshim-hook in its hooks directory: what a node
    gets from the deb/rpm's hooks.d entries."""
    log("=== hooks.d mode: CRI-O with NRI off, podshim-hook from its hooks directory")
    rt.stop()
    d = Podshimd(a.podshimd, a.podshimctl, f"podshimd-hooks-{rt.tag}", "nri:\n  enabled: false\n")
    hooks_dir = f"{WORK}/hooks.d"
    os.makedirs(hooks_dir, exist_ok=True)
    # The packaged entries, pointed at this build's hook and this podshimd's
    # socket (the packages install the hook in /usr/libexec/podshim and the
    # daemon listens on /run/podshim/podshim.sock).
    for src in sorted(glob.glob(f"{a.hooks_d}/*.json")):
        entry = json.load(open(src))
        entry["hook"]["path"] = a.hook
        entry["hook"]["args"] = entry["hook"]["args"] + ["--socket", d.sock]
        with open(os.path.join(hooks_dir, os.path.basename(src)), "w") as f:
            json.dump(entry, f)
    stages = sorted(st for src in glob.glob(f"{hooks_dir}/*.json") for st in json.load(open(src))["stages"])
    check(stages == ["createRuntime", "poststop"], f"hooks.d entries for createRuntime and poststop: {stages}")
    d.start()
    wait_for(lambda: os.path.exists(d.sock), 30, "podshimd's socket")
    check("NRI: registered" not in d.log(), "podshimd in hooks mode does not register over NRI")
    rt.start(["--enable-nri=false", "--hooks-dir", hooks_dir])
    pod = rt.cri.runp("pod-h", "33333333-4444-4555-8666-777777777777")
    manage = {"podshim.io/manage": "true"}
    c1 = rt.cri.create(pod, "hooked", 256 * MI, 512, 100000, "/bin/hog", "anon", "100", annotations=manage)
    cg = cgroup_of(c1)
    wait_for(lambda: c1 in d.containers(), 30, "podshimd to learn the container from podshim-hook")
    wait_for(lambda: keyed(f"{cg}/memory.stat").get("anon", 0) > 90 * MI or
             int(read(f"{cg}/memory.current")) > 120 * MI, 90, "the hog to charge 100 MiB")
    wait_for(lambda: isinstance(d.containers()[c1].get("actual"), dict), 30, "actual values of the container")
    c = d.containers()[c1]
    check(c.get("cgroupPath", "").endswith(f"crio-{c1}") or cg.endswith(c.get("cgroupPath", "-")),
          f"hooks.d: podshimd has the container's cgroup ({c.get('cgroupPath')}, kernel {cg})")
    check((c.get("actual") or {}).get("memoryLimitBytes") == 256 * MI,
          f"hooks.d: actual memory limit {(c.get('actual') or {}).get('memoryLimitBytes')} == 256Mi")
    ok = 0
    r = run(d.ctl, "--socket", d.sock, "resize", c1, "--memory-limit", "384Mi", "--cpu-limit", "1500m",
            check_rc=False)
    ok += check(r.returncode == 0 and read(f"{cg}/memory.max") == str(384 * MI) and
                read(f"{cg}/cpu.max") == "150000 100000",
                f"hooks.d: podshimctl resize raised memory.max to {read(f'{cg}/memory.max')} and cpu.max to "
                f"{read(f'{cg}/cpu.max')} ({r.stdout.strip()} {r.stderr.strip()})")
    before = keyed(f"{cg}/memory.events").get("oom_kill", 0)
    r = run(d.ctl, "--socket", d.sock, "resize", c1, "--memory-limit", "48Mi", check_rc=False)
    ok += check(r.returncode != 0 and "below current usage" in (r.stdout + r.stderr),
                f"hooks.d: a shrink below usage refused ({r.returncode}: {(r.stdout + r.stderr).strip()})")
    ok += check(read(f"{cg}/memory.max") == str(384 * MI) and rt.cri.state(c1)[0] == "RUNNING" and
                keyed(f"{cg}/memory.events").get("oom_kill", 0) == before,
                f"hooks.d: after the refusal memory.max is kept ({read(f'{cg}/memory.max')}), the hog runs, no kill")
    c2 = rt.cri.create(pod, "hooked-cdi", 64 * MI, 256, 100000, "/bin/sleep", "999999",
                       annotations={**manage, "cdi.k8s.io/podshim-test": "podshim.test/dev=a"})
    counts = cdi_counts(rt.oci_spec(c2))
    ok += check(all(n == 1 for n in counts.values()), f"hooks.d: CDI items once in the OCI spec: {counts}")
    wait_for(lambda: c2 in d.containers(), 30, "podshimd to learn the CDI container")
    rt.cri("rm", c2, check_rc=False)
    wait_for(lambda: c2 not in d.containers(), 30, "podshimd to forget the removed container (poststop)")
    ok += 1
    plain = rt.cri.create(pod, "not-managed", 64 * MI, 256, 100000, "/bin/sleep", "999999")
    time.sleep(1)  # a window for a wrong registration to show, not a wait for podshimd
    ok += check(plain not in d.containers(), "hooks.d: a container without the annotations runs no hook")
    summary["hooks.d mode"] = f"{ok}/6"
    for x in (c1, plain):
        rt.cri("rm", x, check_rc=False)
    rt.cri("rmp", pod, check_rc=False)
    d.stop()


def load_modules():
    # The runtime's root on a block-backed filesystem (the native and vfs
    # storage copy layers there), which also makes files written inside
    # containers reclaimable page cache: an ext4 on a brd RAM disk. The
    # generic kernel has ext4 and brd as modules; without modules.dep (the
    # kernel is unpacked, not installed) they are loaded in dependency order
    # by hand from the module tree vm-run names (PODSHIM_VM_KMODS).
    kmods = os.environ.get("PODSHIM_VM_KMODS", "")
    if not kmods or os.path.basename(kmods) != os.uname().release:
        die(f"vm-run gave no module tree for {os.uname().release} (PODSHIM_VM_KMODS={kmods!r})")
    mods = os.path.join(kmods, "kernel")
    if not os.path.isdir(mods):
        die(f"no {mods} in vm-run's kernel cache")
    loaded = read("/proc/modules")
    for ko, args in (("crypto/crc32c_generic.ko", []), ("lib/crc16.ko", []), ("fs/mbcache.ko", []),
                     ("fs/jbd2/jbd2.ko", []), ("fs/ext4/ext4.ko", []),
                     ("drivers/block/brd.ko", ["rd_nr=1", "rd_size=786432"])):
        name = os.path.basename(ko)[:-3].replace("-", "_")
        if re.search(rf"^{name} ", loaded, re.M):
            continue
        r = run("/usr/bin/busybox", "insmod", os.path.join(mods, ko), *args, check_rc=False)
        if r.returncode != 0 and "File exists" not in r.stderr:
            die(f"insmod {ko}: {r.stderr.strip()}")


def setup(a):
    os.makedirs(WORK, exist_ok=True)
    load_modules()
    run("mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "/dev/ram0")
    os.makedirs("/mnt/rd", exist_ok=True)
    run("mount", "-t", "ext4", "/dev/ram0", "/mnt/rd")
    for d in ("/var/lib/containerd", "/var/lib/containers"):
        os.makedirs(f"/mnt/rd{d}", exist_ok=True)
        os.makedirs(d, exist_ok=True)
        run("mount", "--bind", f"/mnt/rd{d}", d)
    for d in ("/run/containerd", "/var/run/nri", "/opt/nri/plugins", "/etc/nri/conf.d", "/var/tmp",
              "/var/lib/crio", "/var/log/crio/pods", "/run/runc"):
        os.makedirs(d, exist_ok=True)
    if a.runc:
        # runc 1.4.3 where the runtimes' configs look for runc, copied into
        # the guest's own root: bind-mounted from the host share, its
        # containers fail to start ("can't get final child's PID from pipe:
        # invalid character '\x00'").
        shutil.copy(a.runc, "/usr/sbin/runc")
    if a.runtime == "crio":
        for b in ("crio", "pinns", "copyimg"):
            shutil.copy(f"{a.dir}/bin/{b}", f"/usr/local/bin/{b}")
        shutil.copytree(f"{a.dir}/etc", "/etc", dirs_exist_ok=True)
    os.environ["PATH"] = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", choices=["containerd", "crio"], required=True)
    ap.add_argument("--dir", required=True, help="the unpacked runtime tarball")
    ap.add_argument("--runc", help="runc binary to use instead of Debian's /usr/sbin/runc")
    ap.add_argument("--cririg", required=True,
                    help="CRI client: containerd 2.3.4's, the one that sends CDIDevices and annotations")
    ap.add_argument("--image", help="containerd: the OCI archive to import")
    ap.add_argument("--oci-dir", help="CRI-O: the OCI layout directory to copy images from")
    ap.add_argument("--podshimd", required=True)
    ap.add_argument("--podshimctl", required=True)
    ap.add_argument("--hook", help="CRI-O: podshim-hook, for the hooks.d phase")
    ap.add_argument("--hooks-d", help="CRI-O: the hooks.d entries the packages ship (packaging/hooks.d)")
    ap.add_argument("--rounds", type=int, default=3, help="latency: updates per kind, side and block")
    ap.add_argument("--nri-null", help="the Go plugin on containerd/nri pkg/stub that answers every event "
                    "empty: the update latency is measured with it too")
    ap.add_argument("--blocks", type=int, default=5,
                    help="latency: alternating blocks with and without podshimd")
    a = ap.parse_args()
    if not os.environ.get("PODSHIM_IN_VM"):
        print("runtimes_guest.py runs inside tests/vm/vm-run only", file=sys.stderr)
        return 2
    setup(a)
    rt = Containerd(a) if a.runtime == "containerd" else Crio(a)
    LOGS.insert(0, rt.log_path)
    rt.start()
    rt.import_images()
    log(f"=== {rt.tag} with {rt.running_runc()}: {rt.cri('version').stdout.strip()}")
    summary = {}

    log("--- without podshimd: the reference values")
    pod = rt.cri.runp("pod-ref", "99999999-2222-4333-8444-555555555555")
    c0, base = update_sequence(rt, pod, "ref")
    log(f"cgroup values (cpu.weight, cpu.max, memory.max) as created, raised, lowered: {base}")
    rt.cri("rm", c0, check_rc=False)
    rt.cri("rmp", pod, check_rc=False)

    log("--- with podshimd as an external NRI plugin")
    podshimd_cell(a, rt, base, summary)
    if isinstance(rt, Containerd):
        preinstalled_phase(a, rt)
    elif a.hook and a.hooks_d:
        hooksd_phase(a, rt, summary)
    else:
        check(False, "CRI-O: no --hook and --hooks-d given, the hooks.d phase cannot run")
    rt.stop()
    print(f"CELL {rt.tag} + {rt.running_runc()} (Linux {os.uname().release}, {os.cpu_count()} CPUs): " +
          "; ".join(f"{k}: {v}" for k, v in summary.items()),
          flush=True)
    if problems:
        log(f"{len(problems)} problem(s):")
        for pr in problems:
            print(f"  - {pr}")
        return 1
    log(f"PASS: {rt.tag} + {rt.running_runc()} + podshimd")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.TimeoutExpired as e:
        die(f"timed out: {e}")
