#!/usr/bin/env python3
"""One cell of the runtime matrix, in the test VM (tests/vm/vm-run --mode
hostroot: the host root read-only under a tmpfs overlay, the guest's own
cgroup v2): podshimd against a real container runtime and runc.

  containerd-v1.7.27  with Debian's runc 1.1.5 (NRI v0.8.0, CDI off)
  containerd-v2.1.9   with runc 1.4.3 (NRI v0.8.0, CDI on)
  containerd-v2.3.4   with runc 1.4.3 (NRI v0.12.0, CDI on)
  crio-v1.36.3        with runc 1.4.3 and Debian's conmon (NRI v0.11.0, CDI on)

Unpacks what the cell needs from ../shared/peers into the cache, builds the
busybox+hog image there with the tarball's mkimage.py (an OCI archive for
containerd, an OCI layout directory for CRI-O), then runs runtimes_guest.py in
the guest (see there for what is checked).

  runtimes_interop.py --peers DIR --cache DIR --vm-run EXE --podshimd EXE
                      --podshimctl EXE --hog EXE CELL
"""

import argparse
import os
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers as P  # noqa: E402

CELLS = {
    "containerd-v1.7.27": ("containerd", None),
    "containerd-v2.1.9": ("containerd", "runc-v1.4.3.tar.xz"),
    "containerd-v2.3.4": ("containerd", "runc-v1.4.3.tar.xz"),
    "crio-v1.36.3": ("crio", "runc-v1.4.3.tar.xz"),
}
# The Go plugin on pkg/stub (nri-null) each cell's update latency is also
# measured with: the NRI version nearest below the one the runtime vendors
# (1.7.27 and 2.1.9: v0.8.0; CRI-O 1.36: v0.11.0; 2.3.4: v0.12.0).
NRI_NULL = {
    "containerd-v1.7.27": "v0.8.0",
    "containerd-v2.1.9": "v0.8.0",
    "containerd-v2.3.4": "v0.12.2",
    "crio-v1.36.3": "v0.8.0",
}


def build_image(mkimage, hog, out):
    """The OCI archive holding busybox and the hog; rebuilt when either
    changes."""
    srcs = ["/usr/bin/busybox", hog, mkimage]
    if not os.path.exists(out) or any(os.path.getmtime(s) > os.path.getmtime(out) for s in srcs):
        tmp = out + ".tmp"
        subprocess.run([sys.executable, mkimage, "/usr/bin/busybox", hog, tmp], check=True)
        os.replace(tmp, out)
    return out


def main():
    ap = argparse.ArgumentParser()
    for k in ("peers", "cache", "vm-run", "podshimd", "podshimctl", "hog"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--hook", help="podshim-hook, for CRI-O's hooks.d phase")
    ap.add_argument("--kernel", default="stable", choices=["stable", "backports"],
                    help="the guest's Debian kernel (vm-run --kernel): bookworm's 6.1 or bookworm-backports' newer one")
    ap.add_argument("--timeout", default="900")
    ap.add_argument("cell", choices=sorted(CELLS))
    a = ap.parse_args()
    P.need_peers(a.peers)
    runtime, runc_tar = CELLS[a.cell]
    needs = ["/usr/bin/busybox"] + (["/usr/sbin/runc"] if runc_tar is None else []) + \
        (["/usr/bin/conmon"] if runtime == "crio" else [])
    for tool in needs:
        if not os.access(tool, os.X_OK):
            P.fail(f"{tool} is missing (tools/install-deps.sh installs runc, conmon and busybox-static)")
    rdir = P.unpack(a.peers, a.cache, f"{a.cell}.tar.xz")
    # The CRI client of containerd 2.3.4 drives every cell: it sends the
    # CDIDevices field and container annotations (1.7.27's does neither) and
    # the image's user_specified_image (CRI-O requires it).
    cririg = os.path.join(P.unpack(a.peers, a.cache, "containerd-v2.3.4.tar.xz"), "bin", "cririg")
    image = build_image(os.path.join(rdir, "mkimage.py"), a.hog, os.path.join(a.cache, "rig-images.tar"))
    guest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtimes_guest.py")
    args = ["--runtime", runtime, "--dir", rdir, "--cririg", cririg,
            "--podshimd", os.path.abspath(a.podshimd), "--podshimctl", os.path.abspath(a.podshimctl)]
    if runc_tar:
        args += ["--runc", os.path.join(P.unpack(a.peers, a.cache, runc_tar), "bin", "runc")]
    args += ["--nri-null", P.nri_bin(a.peers, a.cache, NRI_NULL[a.cell], "nri-null")]
    if runtime == "crio":
        if not a.hook:
            P.fail("the CRI-O cell needs --hook (podshim-hook) for its hooks.d phase")
        hooks_d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packaging", "hooks.d")
        args += ["--hook", os.path.abspath(a.hook), "--hooks-d", os.path.abspath(hooks_d)]
        # copyimg takes an OCI layout directory, not the archive.
        oci = os.path.join(a.cache, "rig-images-oci")
        if not os.path.isdir(oci) or os.path.getmtime(image) > os.path.getmtime(oci):
            tmp = oci + ".tmp"
            subprocess.run(["rm", "-rf", tmp, oci], check=True)
            with tarfile.open(image) as t:
                t.extractall(tmp)
            os.replace(tmp, oci)
        args += ["--oci-dir", oci]
    else:
        args += ["--image", image]
    # The guest loads ext4 and brd from vm-run's kernel cache, which it sees
    # through the host root; vm-run tells it where (PODSHIM_VM_KMODS).
    # PODSHIM_INTEROP_* settings reach the guest (runtimes_guest.py reads them).
    envs = [x for k, v in os.environ.items() if k.startswith("PODSHIM_INTEROP_") for x in ("--env", f"{k}={v}")]
    # The newer kernel with 4 vCPUs, as the engine's *-backports kernel tests (per-CPU effects).
    smp = "4" if a.kernel == "backports" else "2"
    cmd = [a.vm_run, "--mode", "hostroot", "--kernel", a.kernel, "--mem", "3G", "--smp", smp, "--timeout", a.timeout,
           *envs, "--",
           "/usr/bin/python3", guest] + args
    # One host thread for all vCPUs: a cell is long and busy enough to meet
    # qemu 7.2 MTTCG's races (6.12: an oops on a stale int3 in 1 run of 3;
    # 6.1: both vCPUs in a 45 s soft lockup under runc and runc init, in 1
    # run of about 12). The guest still sees its 2 or 4 CPUs.
    env = {**os.environ, "PODSHIM_VM_TCG_THREAD": os.environ.get("PODSHIM_VM_TCG_THREAD", "single")}
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
