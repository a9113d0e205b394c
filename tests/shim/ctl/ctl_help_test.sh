#!/bin/sh
# podshimctl --help lists every registered command with its summary and the
# documented exit codes; bad command lines exit 2; an absent daemon exits 3.
set -u
ctl=$1
fail() { echo "FAIL: $*"; exit 1; }
out=$("$ctl" --help) || fail "--help exited $?"
for cmd in status get resize watch; do
  echo "$out" | grep -Eq "^  $cmd +[a-z]" || fail "--help does not list '$cmd' with a summary"
done
for code in 0 1 2 3 4; do
  echo "$out" | grep -Eq "^  $code  " || fail "--help does not document exit code $code"
done
"$ctl" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command must exit 2"
"$ctl" -o yaml status >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad -o must exit 2"
"$ctl" resize >/dev/null 2>&1; [ $? -eq 2 ] || fail "resize without ID must exit 2"
"$ctl" --socket /nonexistent/podshim.sock status >/dev/null 2>&1; [ $? -eq 3 ] || fail "absent daemon must exit 3"
"$ctl" --socket /nonexistent/podshim.sock get containers >/dev/null 2>&1; [ $? -eq 3 ] || fail "absent daemon must exit 3 (get)"
echo "podshimctl help ok"
