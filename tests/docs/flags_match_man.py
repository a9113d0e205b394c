#!/usr/bin/env python3
"""Every long option a program's --help lists is in its man page, and every
long option its man page lists is one the program takes (its --help says so).

  flags_match_man.py SRC_ROOT PODSHIMD PODSHIMCTL PODSHIM_HOOK

podshimctl's options are the union of its own --help and each command's
(`podshimctl COMMAND --help`, and each subcommand's for cdi)."""
import re
import subprocess
import sys

src, podshimd, podshimctl, hook = sys.argv[1:5]
FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)")


def help_of(argv):
    r = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} --help exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def flags_in(text):
    return set(FLAG.findall(text))


def man_flags(page):
    text = open(f"{src}/packaging/man/{page}").read()
    # roff writes a dash as \- ; fonts as \fB..\fR
    text = text.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "").replace("\\fP", "")
    return flags_in(text)


def ctl_flags():
    top = help_of([podshimctl])
    flags = flags_in(top)
    commands = re.findall(r"^  ([a-z][a-z-]+)  ", top.split("Commands:")[1].split("\n\n")[0], re.M)
    if len(commands) < 5:
        sys.exit(f"could not read podshimctl's commands from its --help: {commands}")
    for c in commands:
        text = help_of([podshimctl, c])
        flags |= flags_in(text)
        if c == "cdi":
            for sub in ("list", "validate", "inject"):
                flags |= flags_in(help_of([podshimctl, c, sub]))
    return flags


# Options of other programs that the texts quote: curl's in podshimd.8's
# example, git's in how podshimctl version names the commit.
OTHERS = {"unix-socket", "always", "dirty"}

failures = []
for name, page, flags in (("podshimd", "podshimd.8", flags_in(help_of([podshimd]))),
                          ("podshim-hook", "podshim-hook.8", flags_in(help_of([hook]))),
                          ("podshimctl", "podshimctl.8", ctl_flags())):
    man = man_flags(page) - OTHERS
    flags = flags - OTHERS
    for f in sorted(flags - man):
        failures.append(f"{name}: --{f} is in --help but not in packaging/man/{page}")
    for f in sorted(man - flags):
        failures.append(f"{name}: packaging/man/{page} documents --{f}, which --help does not list")
    print(f"{name}: {len(flags)} long options in --help, {len(man)} in {page}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
