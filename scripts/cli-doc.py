#!/usr/bin/env python3
"""Keeps docs/cli.md's reference section equal to the tool's own help, and
docs/ops.md's op table equal to the registry.

  cli-doc.py CCGRAPH DOCS_CLI_MD --check   exit 1 (showing a diff) when the
                                           section differs from the help
  cli-doc.py CCGRAPH DOCS_CLI_MD --write   rewrite the section
  cli-doc.py CCGRAPH DOCS_OPS_MD --check|--write --ops
                                           the same for 'ccgraph ops --markdown'

The section lies between the lines '<!-- reference: begin -->' and
'<!-- reference: end -->': for every command listed by 'ccgraph --help',
its name as a heading and its 'ccgraph COMMAND --help' text verbatim."""
import difflib
import re
import subprocess
import sys

BEGIN, END = "<!-- reference: begin -->", "<!-- reference: end -->"


def help_of(tool, *args):
    r = subprocess.run([tool, *args, "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"cli-doc: {tool} {' '.join(args)} --help exited {r.returncode}")
    return r.stdout + r.stderr


def section(tool):
    main = help_of(tool)
    cmds = re.findall(r"^  ([a-z]+)  +\S", main.split("Commands:")[1], re.M)
    if not cmds:
        sys.exit("cli-doc: no commands in 'ccgraph --help'")
    out = [BEGIN, "", "Generated from each command's `--help` by "
           "`scripts/cli-doc.py` (the `cli_doc` test fails when they differ).",
           ""]
    for c in cmds:
        out += [f"### ccgraph {c}", "", "```text", help_of(tool, c).rstrip("\n"),
                "```", ""]
    out.append(END)
    return "\n".join(out)


def ops_section(tool):
    r = subprocess.run([tool, "ops", "--markdown"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        sys.exit(f"cli-doc: {tool} ops --markdown exited {r.returncode}")
    return "\n".join([BEGIN, "", "Generated from the op registry by "
                      "`scripts/cli-doc.py ... --ops` (the `ops_doc` test "
                      "fails when they differ).", "", r.stdout.rstrip("\n"),
                      "", END])


def main():
    args = sys.argv[1:]
    ops = "--ops" in args
    if ops:
        args.remove("--ops")
    if len(args) != 3 or args[2] not in ("--check", "--write"):
        sys.exit(__doc__)
    tool, path, mode = args
    text = open(path, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        sys.exit(f"cli-doc: {path} has no '{BEGIN}' ... '{END}' section")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    old = BEGIN + old + END
    new = ops_section(tool) if ops else section(tool)
    if mode == "--write":
        open(path, "w", encoding="utf-8").write(head + new + tail)
        return 0
    if old != new:
        sys.stdout.writelines(difflib.unified_diff(
            old.splitlines(True), new.splitlines(True), path,
            "ccgraph ops --markdown" if ops else "ccgraph --help"))
        print(f"\ncli-doc: {path} differs from the tool's "
              f"{'op registry' if ops else 'help'}; run scripts/cli-doc.py "
              f"{tool} {path} --write{' --ops' if ops else ''}")
        return 1
    print(f"cli-doc: {path} matches "
          f"{'the op registry' if ops else 'the help of every command'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
