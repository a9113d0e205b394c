#!/bin/sh
# Fails if a component includes a header from a layer it may not see:
# cgroup/, cdi/ and selinux/ may include only base/ (and themselves);
# base/ includes only base/.
set -eu
root=${1:?usage: layering.sh SOURCE_ROOT}
bad=0
check() {
  dir=$1; shift
  allowed=$*
  [ -d "$root/$dir" ] || return 0
  for f in $(find "$root/$dir" -name '*.h' -o -name '*.cc' | sort); do
    grep -Eo '#include "[a-z_]+/' "$f" | sed 's/#include "//; s/\/$//' | sort -u | while read -r inc; do
      ok=0
      for a in $dir $allowed; do [ "$inc" = "$a" ] && ok=1; done
      if [ $ok -eq 0 ]; then
        echo "layering violation: ${f#$root/} includes $inc/ (allowed: $dir $allowed)"
        echo x >> "$tmp"
      fi
    done
  done
}
tmp=$(mktemp); trap 'rm -f "$tmp"' EXIT
check base
check cgroup base
check cdi base
check selinux base
if [ -s "$tmp" ]; then exit 1; fi
echo "layering ok"
