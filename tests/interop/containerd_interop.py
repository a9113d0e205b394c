#!/usr/bin/env python3
"""podshimd against the real containerd 1.7.27 (NRI v0.8.0) with Debian's runc
1.1.5, in the test VM (tests/vm/vm-run --mode hostroot: the host root read-only
under a tmpfs overlay, the guest's own cgroup v2). Unpacks
../shared/peers/containerd-v1.7.27.tar.xz into the cache, builds the busybox
image archive there with its mkimage.py, then runs containerd_guest.py in the
guest (see there for what is checked).

  containerd_interop.py --peers DIR --cache DIR --vm-run EXE --podshimd EXE
                        --podshimctl EXE --hog EXE
"""

import argparse
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    for k in ("peers", "cache", "vm-run", "podshimd", "podshimctl", "hog"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--timeout", default="900")
    a = ap.parse_args()
    P.need_peers(a.peers)
    for tool in ("/usr/sbin/runc", "/usr/bin/busybox"):
        if not os.access(tool, os.X_OK):
            P.fail(f"{tool} is missing (tools/install-deps.sh installs runc and busybox-static)")
    ctd = P.unpack(a.peers, a.cache, "containerd-v1.7.27.tar.xz")
    if not os.access(os.path.join(ctd, "bin", "containerd"), os.X_OK):
        P.fail(f"{ctd}/bin/containerd missing")
    # The image holds busybox and the hog; rebuilt when either changes.
    image = os.path.join(a.cache, "rig-images.tar")
    srcs = ["/usr/bin/busybox", a.hog, os.path.join(ctd, "mkimage.py")]
    if not os.path.exists(image) or any(os.path.getmtime(s) > os.path.getmtime(image) for s in srcs):
        tmp = image + ".tmp"
        subprocess.run([sys.executable, os.path.join(ctd, "mkimage.py"), "/usr/bin/busybox", a.hog, tmp],
                       check=True)
        os.replace(tmp, image)
    guest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "containerd_guest.py")
    # The guest loads ext4 and brd from vm-run's kernel cache, which it sees
    # through the host root; vm-run tells it where (PODSHIM_VM_KMODS).
    cmd = [a.vm_run, "--mode", "hostroot", "--mem", "2G", "--smp", "2", "--timeout", a.timeout, "--",
           "/usr/bin/python3", guest, "--ctd", ctd, "--image", image,
           "--podshimd", os.path.abspath(a.podshimd), "--podshimctl", os.path.abspath(a.podshimctl)]
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
