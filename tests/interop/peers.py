"""Shared helpers of the interop tests: the real peers (../shared/peers),
their cache, podshimd in a temp dir, the NRI harness's JSON output.

The peers are prebuilt binaries of containerd/nri's own runtime side
(pkg/adaptation, driven by `nri-harness`) and of a Go plugin on pkg/stub
(`nri-null`); see ../shared/peers/README.md. End users have no ../shared, so
every test skips (77) with the reason when the directory is absent.
"""

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

SKIP = 77
NRI_VERSIONS = ("v0.4.0", "v0.8.0", "v0.12.2")

# Lines pkg/adaptation logs when it gives up on a plugin: "closing plugin",
# "plugin ... disconnected", "removing plugin", "failed to synchronize"
# (pkg/adaptation/adaptation.go and plugin.go at v0.4.0 … v0.12.2), and the
# harness's own summary when adaptation dropped one.
DROP_RE = re.compile(
    r"clos(e|ed|ing) plugin|plugin .*(disconnected|closed|dropped|stopped)|removing plugin|"
    r"drop(ped|ping)? (the )?plugin|failed to (synchronize|configure)|plugin does not handle",
    re.IGNORECASE)


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def skip(msg):
    print(f"SKIP: {msg}", flush=True)
    sys.exit(SKIP)


def need_peers(peers):
    if not os.path.isdir(peers):
        skip(f"{peers} is absent: the real NRI/containerd peers exist only next to a "
             "development checkout (../shared/peers)")


def unpack(peers, cache, rel):
    """Unpacks peers/REL (a .tar.xz) once into CACHE and returns the directory it
    holds. Keyed by the archive's size and mtime; concurrent tests wait on a
    lock, and a half-written unpack is never visible (rename at the end)."""
    src = os.path.join(peers, rel)
    if not os.path.isfile(src):
        skip(f"{src} is absent")
    os.makedirs(cache, exist_ok=True)
    st = os.stat(src)
    stem = os.path.basename(rel)
    for ext in (".tar.xz", ".tar.gz", ".tar"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
    key = f"{st.st_size}-{int(st.st_mtime)}"
    dest = os.path.join(cache, stem)
    stamp = os.path.join(dest, ".interop-key")
    with open(os.path.join(cache, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if open(stamp).read() == key:
                return os.path.join(dest, stem) if os.path.isdir(os.path.join(dest, stem)) else dest
        except OSError:
            pass
        tmp = tempfile.mkdtemp(prefix=f".{stem}.", dir=cache)
        with tarfile.open(src) as t:
            for m in t.getmembers():
                if m.name.startswith("/") or ".." in m.name.split("/"):
                    fail(f"{src}: unsafe member {m.name!r}")
            t.extractall(tmp)
        with open(os.path.join(tmp, ".interop-key"), "w") as f:
            f.write(key)
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
    return os.path.join(dest, stem) if os.path.isdir(os.path.join(dest, stem)) else dest


def nri_bin(peers, cache, version, name):
    d = unpack(peers, cache, f"nri/nri-{version}.tar.xz")
    p = os.path.join(d, "bin", name)
    if not os.access(p, os.X_OK):
        fail(f"{p} missing from nri-{version}.tar.xz")
    return p


def json_stream(text):
    """Every JSON object in TEXT (the harness prints one per line with
    -compact, pretty-printed ones without)."""
    dec = json.JSONDecoder()
    out, i = [], 0
    while True:
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        if i >= len(text):
            return out
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            # Not JSON (a stray line): skip it.
            nl = text.find("\n", i)
            if nl < 0:
                return out
            i = nl + 1
            continue
        out.append(obj)


def first(objs, key):
    for o in objs:
        if key in o:
            return o
    return None


def all_of(objs, key):
    return [o for o in objs if key in o]


class Harness:
    """One nri-harness process: the runtime side at one NRI version."""

    def __init__(self, exe, sock, workdir, args, tag):
        self.out_path = os.path.join(workdir, f"harness-{tag}.out")
        self.err_path = os.path.join(workdir, f"harness-{tag}.err")
        self.cmd = [exe, "-socket", sock] + list(args)
        self.proc = subprocess.Popen(self.cmd, stdout=open(self.out_path, "w"),
                                     stderr=open(self.err_path, "w"), stdin=subprocess.DEVNULL)
        self.t0 = time.monotonic()

    def wait_listening(self, sock, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if os.path.exists(sock):
                return
            if self.proc.poll() is not None:
                fail(f"nri-harness exited {self.proc.returncode} before listening:\n{self.stderr()}")
            time.sleep(0.01)
        fail("nri-harness did not create its socket")

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail(f"nri-harness did not finish in {timeout} s: {' '.join(self.cmd)}\n{self.stderr()[-4000:]}")
        self.elapsed = time.monotonic() - self.t0
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stdout(self):
        return open(self.out_path).read()

    def stderr(self):
        return open(self.err_path).read()

    def objects(self):
        return json_stream(self.stdout())

    def drop_lines(self):
        return [l for l in self.stderr().splitlines() if DROP_RE.search(l)]


def write_config(path, cdi_dir, log_level="info", extra=""):
    with open(path, "w") as f:
        f.write(f"log_level: {log_level}\n"
                f"cdi:\n  spec_dirs: [{cdi_dir}]\n"
                "node:\n  allocatable: {cpu: \"64\", memory: 256Gi}\n" + extra)


class Podshimd:
    """podshimd under a temp dir: never its default paths (config, status
    socket, state and cgroup root all live in WORKDIR)."""

    def __init__(self, exe, workdir, nri_socket, tag="podshimd", cgroup_root=None, cdi_dir=None,
                 log_level="info", extra_config=""):
        self.exe = exe
        self.dir = workdir
        self.sock = os.path.join(workdir, f"{tag}.sock")
        self.state = os.path.join(workdir, f"{tag}-state")
        self.cgroot = cgroup_root or os.path.join(workdir, f"{tag}-cgroup")
        self.cdi = cdi_dir or os.path.join(workdir, f"{tag}-cdi")
        self.config = os.path.join(workdir, f"{tag}.yaml")
        self.log_path = os.path.join(workdir, f"{tag}.log")
        for d in (self.state, self.cgroot, self.cdi):
            os.makedirs(d, exist_ok=True)
        write_config(self.config, self.cdi, log_level, extra_config)
        self.cmd = [exe, "--config", self.config, "--nri-socket", nri_socket, "--socket", self.sock,
                    "--state-dir", self.state, "--cgroup-root", self.cgroot]
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "a"),
                                     stdin=subprocess.DEVNULL)
        return self.proc.pid

    def wait_ready(self, timeout=20):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                fail(f"podshimd exited {self.proc.returncode}:\n{self.log()[-4000:]}")
            if os.path.exists(self.sock):
                try:
                    st, _ = http_get(self.sock, "/readyz")
                    if st == 200:
                        return
                except OSError:
                    pass
            time.sleep(0.02)
        fail(f"podshimd not ready after {timeout} s:\n{self.log()[-4000:]}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            return open(self.log_path, errors="replace").read()
        except OSError:
            return ""

    def metrics(self):
        st, body = http_get(self.sock, "/metrics")
        if st != 200:
            fail(f"GET /metrics: HTTP {st}")
        return body

    def wait_log(self, pattern, timeout, after=0):
        """Waits for a log line matching PATTERN at offset >= AFTER; returns
        (match, seconds waited)."""
        rx = re.compile(pattern)
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            m = rx.search(self.log()[after:])
            if m:
                return m, time.monotonic() - t0
            if not self.alive():
                fail(f"podshimd died:\n{self.log()[-4000:]}")
            time.sleep(0.01)
        return None, time.monotonic() - t0


def http_get(sock_path, path, timeout=10):
    """A minimal HTTP/1.1 GET over a unix socket (the status socket)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock_path)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            n, _, rest = rest.partition(b"\r\n")
            n = int(n, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, body.decode(errors="replace")


def podshimctl(exe, sock, *args, check=True):
    r = subprocess.run([exe, "--socket", sock, "-o", "json", *args], capture_output=True, text=True,
                       timeout=60)
    if check and r.returncode != 0:
        fail(f"podshimctl {' '.join(args)} exited {r.returncode}: {r.stderr}{r.stdout}")
    try:
        return json.loads(r.stdout) if r.stdout.strip() else None
    except json.JSONDecodeError:
        fail(f"podshimctl {' '.join(args)}: not JSON: {r.stdout[:500]}")


def metric_value(text, name, labels=None):
    """The value of one series in a Prometheus text exposition (None if absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if labels and any(got.get(k) != v for k, v in labels.items()):
            continue
        return float(m.group(3))
    return None


def proc_status_kb(pid, field):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
