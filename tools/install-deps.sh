#!/usr/bin/env bash
# Installs every Debian 12 package that podshim's build, tests, VM rig and packaging need.
# Idempotent: packages already present are skipped, so a second run costs one dpkg query.
set -Eeuo pipefail
trap 'rc=$?; echo "install-deps: failed (status $rc) at line $LINENO: $BASH_COMMAND" >&2; exit $rc' ERR

pkgs=(
  # build
  meson ninja-build pkg-config g++ clang libclang-rt-14-dev
  libsystemd-dev libseccomp-dev libcap-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libfmt-dev libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libyaml-dev libselinux1-dev libexpected-dev libboost-dev
  # tests and tools
  curl python3 selinux-utils attr
  # SELinux kernel test: Debian's reference policy, loaded only inside the VM guest
  selinux-policy-default
  # CDI differential test and benchmark: the Debian-packaged Go reference (v0.5.2)
  golang-go golang-github-container-orchestrated-devices-container-device-interface-dev
  # packages: tools/build-packages (dpkg-buildpackage + lintian, rpmbuild)
  debhelper lintian rpm python3-yaml
  # real-kernel VM rig
  qemu-system-x86 busybox-static cpio
  # OCI runtimes for the hook tests (inside the VM, from the host root); conmon and the
  # libraries the prebuilt CRI-O and runc 1.4 of the runtime matrix link
  crun runc conmon libseccomp2 libsqlite3-0
  # podman: the hooks.d match test (containers/common pkg/hooks, the matcher CRI-O uses)
  podman
  # deploy/: promtool for the alert-rule tests; mmdebstrap and umoci for tools/build-image
  prometheus
  mmdebstrap
  umoci
)

# deploy/ schema test: node and npm fetch the Kubernetes schema packages. Machines of our kind
# ship Node.js (with npm) from outside Debian, whose nodejs conflicts with Debian's npm package;
# take Debian's only where no npm is there at all.
if ! command -v npm >/dev/null 2>&1; then
  pkgs+=(nodejs npm)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=300 -y --no-install-recommends)
t0=$SECONDS
# About 50 s for the full list on a fresh machine of 2 cores (measured 2026-12-01); a few seconds
# for one or two packages.
echo "install-deps: installing ${#missing[@]} Debian package(s), about a minute for all of them: ${missing[*]}"
echo "install-deps: apt-get update"
apt-get -o DPkg::Lock::Timeout=300 update -qq
echo "install-deps: apt-get install (this is the long part)"
# apt's own output goes to a log, shown only when it fails: the list above says what is coming.
log=$(mktemp "${TMPDIR:-/tmp}/install-deps.XXXXXX")
if ! apt-get "${apt_opts[@]}" install "${missing[@]}" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "install-deps: apt-get install failed (full log: $log)" >&2
  exit 1
fi
rm -f "$log"
echo "install-deps: installed ${#missing[@]} package(s) in $((SECONDS - t0)) s"
