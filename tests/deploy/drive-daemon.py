#!/usr/bin/env python3
"""Starts a real podshimd (--nri=off, fake cgroup tree under a temp dir, never
/sys/fs/cgroup) with the TCP metrics listener on 127.0.0.1:0, drives resizes
through its status socket, and writes what its /metrics served at three moments:

  OUT/initial.prom four containers registered, nothing resized yet
  OUT/before.prom  applied, infeasible, deferred and refused-shrink resizes done
  OUT/after.prom   later: an OOM kill seen after a resize, and drift (memory.max
                   changed behind podshim's back after a resize, reported by the
                   periodic read-back: podshim_drift 1)
  OUT/socket.prom  the status socket's /metrics at the end (the same families)

Usage: drive-daemon.py PODSHIMD OUTDIR
"""
import http.client, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request, uuid

MiB = 1 << 20


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(self.path)


def req(sock, method, target, body=None):
    c = UnixHTTP(sock)
    c.request(method, target, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def fake_cgroup(root, rel, current=1000, anon=0, limit=""):
    d = os.path.join(root, rel.lstrip("/"))
    os.makedirs(d, exist_ok=True)
    files = {"cpu.weight": "", "cpu.max": "", "memory.max": f"{limit}", "memory.high": "", "memory.min": "",
             "memory.low": "", "memory.current": f"{current}\n",
             "memory.stat": f"anon {anon}\nfile 0\nshmem 0\n",
             "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}
    for f, v in files.items():
        with open(os.path.join(d, f), "w") as fh:
            fh.write(v)
    return d


def main():
    podshimd, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="podshim-deploy-")
    cg, sock, log = os.path.join(tmp, "cg"), os.path.join(tmp, "s.sock"), os.path.join(tmp, "daemon.log")
    os.makedirs(cg)
    cfg = os.path.join(tmp, "config.yaml")
    with open(cfg, "w") as f:
        f.write("node:\n  allocatable: {cpu: \"4\", memory: 8Gi}\n"
                "cgroup:\n  driver: cgroupfs\n  shrink_timeout_ms: 20\n"
                "metrics:\n  listen: 127.0.0.1:0\n"
                "readback:\n  interval_ms: 100\n"
                f"access:\n  - methods: [\"*\"]\n    uids: [{os.getuid()}]\n")
    logf = open(log, "w")
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    p = subprocess.Popen([podshimd, "--nri=off", "--config", cfg, "--socket", sock, "--state-dir",
                          os.path.join(tmp, "state"), "--cgroup-root", cg], stdout=logf, stderr=logf, env=env)
    try:
        addr = None
        for _ in range(600):
            if p.poll() is not None:
                sys.exit(f"podshimd exited {p.returncode}:\n" + open(log).read())
            m = re.search(r"Serving /metrics on (\S+)", open(log).read())
            if m and os.path.exists(sock):
                addr = m.group(1)
                break
            time.sleep(0.05)
        if not addr:
            sys.exit("podshimd never served /metrics:\n" + open(log).read())

        def scrape(name):
            with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
                text = r.read().decode()
            with open(os.path.join(out, name), "w") as f:
                f.write(text)
            return text

        def register(cid, pod, ns, name, resources, current=1000, anon=0, limit=""):
            uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ns}/{pod}"))  # a pod uid, the same in every run
            rel = f"/kubepods/burstable/pod{uid}/{cid}"
            fake_cgroup(cg, rel, current, anon, limit)
            st, body = req(sock, "POST", "/v1/containers", {
                "id": cid, "podUid": uid, "podName": pod, "podNamespace": ns, "name": name,
                "cgroupPath": rel, "resources": resources})
            if st != 201:
                sys.exit(f"registering {cid}: {st} {body}")
            return os.path.join(cg, rel.lstrip("/"))

        def resize(cid, resources, want):
            st, body = req(sock, "POST", f"/v1/containers/{cid}/resize", {"resources": resources})
            got = json.loads(body).get("result") if body.startswith("{") else None
            if got != want:
                sys.exit(f"resize {cid}: want {want}, got {st} {body}\n" + open(log).read())

        app = register("c-app", "web-1", "shop", "app",
                       {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}})
        register("c-big", "batch-1", "jobs", "big", {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                      "limits": {"memory": "128Mi"}})
        register("c-worker", "queue-1", "jobs", "worker", {"requests": {"cpu": "100m"}})
        register("c-db", "store-1", "shop", "db",
                 {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
                 current=700 * MiB, anon=700 * MiB, limit=1 << 30)
        scrape("initial.prom")
        # Read-only and /metrics only: the status API is not reachable over TCP.
        for method, path, want in (("GET", "/healthz", 404), ("GET", "/v1/containers", 404),
                                   ("POST", "/metrics", 405), ("DELETE", "/v1/containers/c-app", 404)):
            c = http.client.HTTPConnection(*addr.rsplit(":", 1), timeout=10)
            c.request(method, path)
            got = c.getresponse().status
            c.close()
            if got != want:
                sys.exit(f"metrics listener: {method} {path} answered {got}, want {want}")
        resize("c-app", {"limits": {"cpu": "500m", "memory": "256Mi"}}, "applied")
        resize("c-big", {"requests": {"memory": "9Gi"}, "limits": {"memory": "9Gi"}}, "infeasible")
        resize("c-worker", {"requests": {"cpu": "3900m"}}, "deferred")
        resize("c-db", {"requests": {"memory": "256Mi"}, "limits": {"memory": "256Mi"}}, "error")
        scrape("before.prom")

        # An OOM kill after a resize, seen by the next read-back; and drift:
        # memory.max lowered behind podshim's back after a cpu-only resize,
        # reported once the allocation has settled (2 s) by the read-back.
        with open(os.path.join(app, "memory.events"), "w") as f:
            f.write("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
        resize("c-app", {"limits": {"cpu": "600m"}}, "applied")
        with open(os.path.join(app, "memory.max"), "w") as f:
            f.write(f"{200 * MiB}\n")
        drifting = re.compile(r'^podshim_drift\{[^}]*container="app",resource="memory_limit"\} 1$', re.M)
        for _ in range(200):
            if drifting.search(scrape("after.prom")):
                break
            time.sleep(0.05)
        else:
            sys.exit("memory.max changed out of band was not reported as podshim_drift 1:\n"
                     + open(os.path.join(out, "after.prom")).read())
        st, body = req(sock, "GET", "/metrics")
        if st != 200:
            sys.exit(f"status socket /metrics: {st} {body}")
        with open(os.path.join(out, "socket.prom"), "w") as f:
            f.write(body)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
