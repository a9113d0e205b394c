#!/usr/bin/python3
"""Runs inside the test VM (tests/vm/vm-run --mode hostroot): containerd 1.7.27
(NRI v0.8.0) with Debian's runc 1.1.5 on a real cgroup v2, and podshimd in
front of it, driven through CRI by `cririg` (the kubelet's side).

  1. podshimd as an external NRI plugin: pods and containers through CRI,
     in-place cpu/memory increases and decreases (UpdateContainerResources)
     with the cgroup files read back; shrinks below anonymous and below
     shmem usage refused (process alive, oom_kill unchanged); a shrink over
     page cache applied by reclaim; podshimd stopped and restarted while
     containers run (and one is created meanwhile): it resynchronizes and
     reports every container with allocated and actual values, actual CPU
     equal to the request with the default weight_formula (auto).
  2. podshimd pre-installed in /opt/nri/plugins (containerd starts it): the
     same reporting and a refused shrink.

Started by containerd_interop.py on the host; every path is the host's
(hostroot mode shares the host root read-only under a tmpfs overlay).
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

T0 = time.monotonic()
MI = 1 << 20
CG = "/sys/fs/cgroup"
CTD_SOCK = "/run/containerd/containerd.sock"
NRI_SOCK = "/var/run/nri/nri.sock"
WORK = "/run/podshim-interop"
problems = []


def log(msg):
    print(f"[{time.monotonic() - T0:7.1f}s] {msg}", flush=True)


def check(cond, msg):
    if cond:
        log(f"ok: {msg}")
    else:
        log(f"FAILED: {msg}")
        problems.append(msg)
    return cond


def die(msg):
    log(f"FATAL: {msg}")
    for f in ("/tmp/containerd.log", f"{WORK}/podshimd.log", f"{WORK}/podshimd-pre.log"):
        if os.path.exists(f):
            print(f"--- {f} (tail)\n" + open(f, errors="replace").read()[-6000:], flush=True)
    sys.exit(1)


def run(*cmd, check_rc=True, timeout=180, input=None):
    r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=input)
    if check_rc and r.returncode != 0:
        die(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()} {r.stdout.strip()}")
    return r


def read(path):
    with open(path) as f:
        return f.read().strip()


def events(cg, key):
    for line in read(f"{cg}/memory.events").splitlines():
        k, v = line.split()
        if k == key:
            return int(v)
    return 0


def wait_for(pred, timeout, what, step=0.2):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    die(f"timed out after {timeout} s waiting for {what}")


class Cri:
    def __init__(self, cririg):
        self.cririg = cririg

    def __call__(self, *args, check_rc=True, timeout=180):
        return run(self.cririg, *args, check_rc=check_rc, timeout=timeout)

    def runp(self, name, uid):
        return self("runp", name, uid, f"/kubepods/burstable/pod{uid}").stdout.split()[-1]

    def create(self, pod, name, mem, shares, quota, period, *cmd):
        out = self("create", pod, name, "docker.io/rig/busybox:1", str(mem), str(shares), str(quota),
                   str(period), "--", *cmd).stdout.split()
        return out[-1]

    def update(self, cid, **kv):
        r = self("update", cid, *[f"{k}={v}" for k, v in kv.items()], check_rc=False)
        return r.returncode, (r.stdout + r.stderr).strip()

    def state(self, cid):
        return self("state", cid).stdout.split()


class Podshimd:
    def __init__(self, exe, ctl, tag):
        self.exe, self.ctl, self.tag = exe, ctl, tag
        self.sock = f"{WORK}/{tag}.sock"
        self.state = f"{WORK}/{tag}-state"
        self.config = f"{WORK}/{tag}.yaml"
        self.log_path = f"{WORK}/{tag}.log"
        os.makedirs(self.state, exist_ok=True)
        os.makedirs(f"{WORK}/cdi", exist_ok=True)
        with open(self.config, "w") as f:
            # weight_formula stays at its default (auto) unless
            # PODSHIM_INTEROP_WEIGHT_FORMULA says otherwise (to watch the
            # actual-CPU checks fail with the wrong fixed formula).
            f.write(f"log_level: info\ncdi:\n  spec_dirs: [{WORK}/cdi]\n")
            if os.environ.get("PODSHIM_INTEROP_WEIGHT_FORMULA"):
                f.write(f"cgroup:\n  weight_formula: {os.environ['PODSHIM_INTEROP_WEIGHT_FORMULA']}\n")
        self.args = ["--config", self.config, "--socket", self.sock, "--state-dir", self.state,
                     "--cgroup-root", CG, "--nri-socket", NRI_SOCK]
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([self.exe] + self.args, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "a"), stdin=subprocess.DEVNULL)

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


def cgroup_of(cid):
    hits = glob.glob(f"{CG}/kubepods/**/{cid}", recursive=True)
    if not hits:
        die(f"no cgroup directory for container {cid}")
    return hits[0]


def linear_weight(shares):
    return 1 + ((shares - 2) * 9999) // 262142


def expect_cgroup(cg, weight, cpu_max, mem_max, what):
    got = (read(f"{cg}/cpu.weight"), read(f"{cg}/cpu.max"), read(f"{cg}/memory.max"))
    check(got == (str(weight), cpu_max, str(mem_max)),
          f"{what}: cpu.weight/cpu.max/memory.max = {got}, want {(str(weight), cpu_max, str(mem_max))}")


def check_reported(d, cids, what):
    """Every running container: allocated and actual present, actual CPU request
    and limit equal to the allocated (requested) ones, memory limit too."""
    cs = d.containers()
    for cid in cids:
        c = cs.get(cid)
        if not check(c is not None, f"{what}: podshimd knows {cid[:12]}"):
            continue
        al, ac = c.get("allocated") or {}, c.get("actual")
        if not check(isinstance(ac, dict), f"{what}: {cid[:12]} ({c.get('name')}) has actual values"):
            continue
        check(ac.get("cpuRequestMilli") == al.get("cpuRequestMilli") and al.get("cpuRequestMilli"),
              f"{what}: {c.get('name')} actual cpu request {ac.get('cpuRequestMilli')}m == requested "
              f"{al.get('cpuRequestMilli')}m")
        check(ac.get("cpuLimitMilli") == al.get("cpuLimitMilli"),
              f"{what}: {c.get('name')} actual cpu limit {ac.get('cpuLimitMilli')}m == {al.get('cpuLimitMilli')}m")
        check(ac.get("memoryLimitBytes") == al.get("memoryLimitBytes"),
              f"{what}: {c.get('name')} actual memory limit {ac.get('memoryLimitBytes')} == "
              f"{al.get('memoryLimitBytes')}")
    ctl = run(d.ctl, "--socket", d.sock, "get", "containers", check_rc=False).stdout
    print(ctl, flush=True)


def formula_status(d):
    st = d.ctl_json("status")
    cur = [f for f in st.get("weightFormulas", []) if f.get("current")]
    return st, (cur[0] if cur else {})


def setup(a):
    os.makedirs(WORK, exist_ok=True)
    # containerd's root on a block-backed filesystem (the native snapshotter
    # copies layers there), which also makes files written inside containers
    # reclaimable page cache: an ext4 on a brd RAM disk. The guest kernel's
    # brd.ko is in vm-run's kernel cache, which the guest sees through the
    # host root.
    # The generic kernel has ext4 and brd as modules; without modules.dep
    # (the kernel is unpacked, not installed) they are loaded in dependency
    # order by hand: crc32c first, which jbd2/ext4 ask the crypto API for.
    # vm-run names the module tree of the kernel it booted (PODSHIM_VM_KMODS).
    kmods = os.environ.get("PODSHIM_VM_KMODS", "")
    if not kmods or os.path.basename(kmods) != os.uname().release:
        die(f"vm-run gave no module tree for {os.uname().release} (PODSHIM_VM_KMODS={kmods!r})")
    mods = [os.path.join(kmods, "kernel")]
    if not os.path.isdir(mods[0]):
        die(f"no {mods[0]} in vm-run's kernel cache")
    loaded = read("/proc/modules")
    for ko, args in (("crypto/crc32c_generic.ko", []), ("lib/crc16.ko", []), ("fs/mbcache.ko", []),
                     ("fs/jbd2/jbd2.ko", []), ("fs/ext4/ext4.ko", []),
                     ("drivers/block/brd.ko", ["rd_nr=1", "rd_size=524288"])):
        name = os.path.basename(ko)[:-3].replace("-", "_")
        if re.search(rf"^{name} ", loaded, re.M):
            continue
        r = run("/usr/bin/busybox", "insmod", os.path.join(mods[0], ko), *args, check_rc=False)
        if r.returncode != 0 and "File exists" not in r.stderr:
            die(f"insmod {ko}: {r.stderr.strip()}")
    run("mke2fs", "-q", "-F", "-t", "ext4", "-O", "^has_journal", "/dev/ram0")
    os.makedirs("/var/lib/containerd", exist_ok=True)
    run("mount", "-t", "ext4", "/dev/ram0", "/var/lib/containerd")
    for d in ("/run/containerd", "/var/run/nri", "/opt/nri/plugins", "/etc/nri/conf.d"):
        os.makedirs(d, exist_ok=True)
    os.environ["PATH"] = f"{a.ctd}/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    log(f"runc: {run('/usr/sbin/runc', '--version').stdout.splitlines()[0]}")


def start_containerd(a):
    if os.path.exists(NRI_SOCK):
        os.unlink(NRI_SOCK)
    p = subprocess.Popen([f"{a.ctd}/bin/containerd", "--config", f"{a.ctd}/config.toml"],
                         stdout=open("/tmp/containerd.log", "a"), stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL)
    wait_for(lambda: os.path.exists(CTD_SOCK) and run(f"{a.ctd}/bin/ctr", "version", check_rc=False).returncode == 0,
             120, "containerd")
    return p


def stop_containerd(p):
    p.terminate()
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def ctr_log_len():
    return os.path.getsize("/tmp/containerd.log")


def ctr_log_drops(start=0, end=None):
    """containerd's lines about closing or dropping a plugin, between two
    offsets of its log."""
    with open("/tmp/containerd.log", "rb") as f:
        f.seek(start)
        text = f.read(None if end is None else end - start).decode(errors="replace")
    return [l for l in text.splitlines()
            if re.search(r"clos(e|ing) plugin|plugin .*(disconnected|closed)|failed to synchronize", l, re.I)]


def external_phase(a, cri):
    log("=== podshimd as an external NRI plugin")
    d = Podshimd(a.podshimd, a.podshimctl, "podshimd")
    d.start()
    wait_for(lambda: "NRI: registered and synchronized" in d.log(), 60, "podshimd to register with containerd")
    m = re.search(r"configured by (\S+) (\S+)", d.log())
    log(f"podshimd registered with {m.group(1)} {m.group(2)}")

    uid = "11111111-2222-4333-8444-555555555555"
    pod = cri.runp("pod-a", uid)
    log(f"pod sandbox {pod[:12]}")
    # c1: a plain container, 500m request / 1 CPU limit / 256Mi.
    c1 = cri.create(pod, "c1", 256 * MI, 512, 100000, 100000, "/bin/sleep", "999999")
    cg1 = cgroup_of(c1)
    log(f"c1 {c1[:12]} cgroup {cg1}")
    expect_cgroup(cg1, linear_weight(512), "100000 100000", 256 * MI, "c1 as created (runc 1.1.5: linear)")
    time.sleep(0.5)
    check_reported(d, [c1], "after create")
    st, f = formula_status(d)
    check(f.get("formula") == "linear" and f.get("source") == "learned",
          f"podshimctl status: formula learned for containerd 1.7.27 + runc 1.1.5: {f}")

    # In-place increase and decrease of cpu and memory, read back.
    rc, out = cri.update(c1, mem=512 * MI, shares=1024, quota=200000, period=100000)
    check(rc == 0, f"increase cpu+memory: {out}")
    expect_cgroup(cg1, linear_weight(1024), "200000 100000", 512 * MI, "c1 after the increase")
    rc, out = cri.update(c1, mem=128 * MI, shares=256, quota=50000, period=100000)
    check(rc == 0, f"decrease cpu+memory above usage: {out}")
    expect_cgroup(cg1, linear_weight(256), "50000 100000", 128 * MI, "c1 after the decrease")
    time.sleep(0.5)
    check_reported(d, [c1], "after resizes")

    # A shrink below anonymous usage: refused, the hog alive, no OOM kill.
    c2 = cri.create(pod, "anon", 256 * MI, 256, 100000, 100000, "/bin/hog", "anon", "100")
    cg2 = cgroup_of(c2)
    wait_for(lambda: int(read(f"{cg2}/memory.current")) > 90 * MI, 60, "the anon hog to charge 100 MiB")
    kills = events(cg2, "oom_kill")
    rc, out = cri.update(c2, mem=48 * MI, shares=256, quota=100000, period=100000)
    check(rc != 0 and "below current usage" in out, f"shrink below anon usage refused: {out}")
    time.sleep(1)
    check(cri.state(c2)[0] == "RUNNING", f"anon hog still running: {cri.state(c2)}")
    check(events(cg2, "oom_kill") == kills, f"anon: oom_kill unchanged ({events(cg2, 'oom_kill')})")
    check(read(f"{cg2}/memory.max") == str(256 * MI), f"anon: memory.max kept ({read(f'{cg2}/memory.max')})")

    # A shrink below shmem usage (48 MiB in /dev/shm): refused the same way.
    c3 = cri.create(pod, "shm", 256 * MI, 256, 100000, 100000, "/bin/hog", "shm", "48")
    cg3 = cgroup_of(c3)
    wait_for(lambda: int(dict(l.split() for l in read(f"{cg3}/memory.stat").splitlines()).get("shmem", 0)) > 40 * MI,
             60, "the shm hog to charge 48 MiB of shmem")
    kills = events(cg3, "oom_kill")
    rc, out = cri.update(c3, mem=16 * MI, shares=256, quota=100000, period=100000)
    check(rc != 0 and "below current usage" in out, f"shrink below shmem usage refused: {out}")
    time.sleep(1)
    check(cri.state(c3)[0] == "RUNNING", f"shm hog still running: {cri.state(c3)}")
    check(events(cg3, "oom_kill") == kills, f"shm: oom_kill unchanged ({events(cg3, 'oom_kill')})")

    # A shrink over page cache (a 96 MiB file in the container's rootfs on
    # ext4): applied, podshimd reclaiming first.
    c4 = cri.create(pod, "cache", 256 * MI, 256, 100000, 100000, "/bin/hog", "file", "/data/cache", "96")
    cg4 = cgroup_of(c4)
    wait_for(lambda: int(dict(l.split() for l in read(f"{cg4}/memory.stat").splitlines()).get("file", 0)) > 80 * MI,
             60, "the page-cache hog to charge 96 MiB of file pages")
    before = int(read(f"{cg4}/memory.current"))
    rc, out = cri.update(c4, mem=32 * MI, shares=256, quota=100000, period=100000)
    check(rc == 0, f"shrink over page cache ({before} bytes in use) applied: {out}")
    check(read(f"{cg4}/memory.max") == str(32 * MI), f"cache: memory.max = {read(f'{cg4}/memory.max')}")
    check(int(read(f"{cg4}/memory.current")) <= 32 * MI, f"cache: usage now {read(f'{cg4}/memory.current')}")
    check(events(cg4, "oom_kill") == 0, "cache: no OOM kill")
    check(cri.state(c4)[0] == "RUNNING", f"cache hog still running: {cri.state(c4)}")
    m = re.search(r"^podshim_memory_reclaimed_bytes_total (\S+)$",
                  run("curl", "-s", "--unix-socket", d.sock, "http://localhost/metrics").stdout, re.M)
    check(m and float(m.group(1)) > 0, f"podshimd reports reclaimed bytes: {m.group(1) if m else None}")

    # podshimd stopped and restarted while containers run; containerd goes on
    # (a container is created meanwhile), podshimd resynchronizes.
    running = [c1, c2, c3, c4]
    drops = ctr_log_drops()
    check(not drops, f"containerd logged no closing/dropping of podshimd while it ran: {drops}")
    d.stop()
    log("podshimd stopped")
    c5 = cri.create(pod, "while-away", 64 * MI, 768, 150000, 100000, "/bin/sleep", "999999")
    check(all(cri.state(c)[0] == "RUNNING" for c in running + [c5]),
          "containerd kept every container running while podshimd was away")
    running.append(c5)
    t = time.monotonic()
    mark = len(d.log())
    d.start()
    wait_for(lambda: "NRI: registered and synchronized" in d.log()[mark:], 60, "podshimd to resynchronize")
    ctr_mark = ctr_log_len()
    log(f"podshimd restarted and resynchronized in {time.monotonic() - t:.1f} s (TCG)")
    check_reported(d, running, "after podshimd restart")
    st, f = formula_status(d)
    check(f.get("formula") == "linear" and f.get("source") == "learned", f"formula after restart: {f}")
    check(st.get("containers") == len(running), f"podshimctl status counts {st.get('containers')} containers")
    print(run(d.ctl, "--socket", d.sock, "status", check_rc=False).stdout, flush=True)
    # (While podshimd was stopped containerd of course closed it; after the
    # restart it must not again.)
    drops = ctr_log_drops(ctr_mark)
    check(not drops, f"containerd logged no closing/dropping after the restart: {drops}")

    for c in running:
        cri("rm", c, check_rc=False)
    cri("rmp", pod, check_rc=False)
    d.stop()


def preinstalled_phase(a, cri, ctd_proc):
    log("=== podshimd pre-installed in /opt/nri/plugins (containerd starts it)")
    stop_containerd(ctd_proc)
    d = Podshimd(a.podshimd, a.podshimctl, "podshimd-pre")
    # containerd runs the plugin with only NRI_PLUGIN_* in the environment and
    # no stdout/stderr; the wrapper gives podshimd its temp paths and a log.
    wrapper = "/opt/nri/plugins/10-podshim"
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec " + " ".join([a.podshimd] + d.args) + f" 2>>{d.log_path}\n")
    os.chmod(wrapper, 0o755)
    ctr_start = ctr_log_len()
    p = start_containerd(a)
    wait_for(lambda: "NRI: registered and synchronized" in d.log(), 90, "containerd to start podshimd")
    check("pre-installed mode" in d.log(), "podshimd ran in pre-installed mode")
    uid = "22222222-3333-4444-8555-666666666666"
    pod = cri.runp("pod-b", uid)
    c1 = cri.create(pod, "pre", 128 * MI, 512, 50000, 100000, "/bin/hog", "anon", "64")
    cg1 = cgroup_of(c1)
    expect_cgroup(cg1, linear_weight(512), "50000 100000", 128 * MI, "pre: as created")
    wait_for(lambda: int(read(f"{cg1}/memory.current")) > 60 * MI, 60, "the hog to charge 64 MiB")
    time.sleep(0.5)
    check_reported(d, [c1], "pre-installed")
    rc, out = cri.update(c1, mem=32 * MI, shares=512, quota=50000, period=100000)
    check(rc != 0 and "below current usage" in out, f"pre-installed: shrink below usage refused: {out}")
    check(cri.state(c1)[0] == "RUNNING", "pre-installed: hog alive")
    rc, out = cri.update(c1, mem=256 * MI, shares=1024, quota=100000, period=100000)
    check(rc == 0, f"pre-installed: increase applied: {out}")
    expect_cgroup(cg1, linear_weight(1024), "100000 100000", 256 * MI, "pre: after the increase")
    drops = ctr_log_drops(ctr_start)
    check(not drops, f"pre-installed: containerd logged no closing/dropping of podshimd: {drops}")
    cri("rm", c1, check_rc=False)
    cri("rmp", pod, check_rc=False)
    stop_containerd(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctd", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--podshimd", required=True)
    ap.add_argument("--podshimctl", required=True)
    a = ap.parse_args()
    if not os.environ.get("PODSHIM_IN_VM"):
        print("containerd_guest.py runs inside tests/vm/vm-run only", file=sys.stderr)
        return 2
    setup(a)
    p = start_containerd(a)
    log(f"containerd up: {run(a.ctd + '/bin/cririg', 'version').stdout.strip()}")
    run(f"{a.ctd}/bin/ctr", "-n", "k8s.io", "images", "import", "--snapshotter", "native", a.image, timeout=300)
    cri = Cri(f"{a.ctd}/bin/cririg")
    external_phase(a, cri)
    preinstalled_phase(a, cri, p)
    if problems:
        log(f"{len(problems)} problem(s):")
        for pr in problems:
            print(f"  - {pr}")
        return 1
    log("PASS: containerd 1.7.27 + runc 1.1.5 + podshimd")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.TimeoutExpired as e:
        die(f"timed out: {e}")
