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
for code in 0 1 2 3 4 5 6; do
  echo "$out" | grep -Eq "^  $code  " || fail "--help does not document exit code $code"
done
"$ctl" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command must exit 2"
"$ctl" -o xml status >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad -o must exit 2"
"$ctl" resize >/dev/null 2>&1; [ $? -eq 2 ] || fail "resize without ID must exit 2"
"$ctl" --socket /nonexistent/podshim.sock status >/dev/null 2>&1; [ $? -eq 3 ] || fail "absent daemon must exit 3"
"$ctl" --socket /nonexistent/podshim.sock get containers >/dev/null 2>&1; [ $? -eq 3 ] || fail "absent daemon must exit 3 (get)"
# A quantity the kernel cannot take is refused before any request (exit 2,
# not 3 for the absent daemon), naming the kernel's limit.
err=$("$ctl" --socket /nonexistent/podshim.sock resize c1 --cpu-limit 10000000000000 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "a cpu limit of 10^13 cores must exit 2, not $rc"
echo "$err" | grep -q "max_cfs_runtime" || fail "the refusal must name the kernel's limit: $err"
"$ctl" --socket /nonexistent/podshim.sock resize c1 --memory 100 >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "a memory limit below one page must exit 2, not $rc"
"$ctl" --socket /nonexistent/podshim.sock resize c1 --cpu-limit 175921860444m >/dev/null 2>&1; rc=$?
[ $rc -eq 3 ] || fail "the largest cpu limit the kernel takes must reach the (absent) daemon, exit 3, not $rc"
echo "podshimctl help ok"
