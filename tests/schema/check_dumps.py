#!/usr/bin/python3
"""Validates JSON graph dumps against schemas/graph.schema.json.

usage: check_dumps.py SCHEMA FILE_OR_COMMAND...
Each argument is a .json file, or a command (prefixed with 'run:') whose
standard output is a dump. Prints one line per document and a summary.
"""
import json
import shlex
import subprocess
import sys

import jsonschema


def main(argv):
    schema = json.load(open(argv[1]))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    passed = failed = 0
    for item in argv[2:]:
        if item.startswith("run:"):
            text = subprocess.run(shlex.split(item[4:]), check=True,
                                  capture_output=True, text=True).stdout
        else:
            text = open(item).read()
        doc = json.loads(text)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        if errors:
            failed += 1
            for e in errors[:5]:
                print(f"FAIL {item}: {'/'.join(map(str, e.path))}: {e.message}")
        else:
            passed += 1
            print(f"ok   {item}")
    # A document that breaks the schema must be caught: the check can fail.
    broken = json.loads(text) if argv[2:] else {}
    broken["version"] = 2
    if validator.is_valid(broken):
        print("FAIL the schema accepts version 2")
        failed += 1
    print(f"schema: {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
