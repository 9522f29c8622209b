#!/usr/bin/python3
"""Checks schemas/plan.schema.json against the sample plans.

usage: check_plans.py SCHEMA PLANS_DIR
Every file under PLANS_DIR/good must be valid and every file under
PLANS_DIR/bad invalid. test_plan.c holds the C loader to the same split, so
the schema and the C validator agree on every sample. A repeated key is an
error in both (jansson's JSON_REJECT_DUPLICATES).
"""
import glob
import json
import os
import sys

import jsonschema


def reject_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key '{key}'")
        seen[key] = value
    return seen


def verdict(validator, path):
    try:
        doc = json.load(open(path), object_pairs_hook=reject_duplicates)
    except ValueError as e:
        return f"parse: {e}"
    errors = list(validator.iter_errors(doc))
    if errors:
        e = errors[0]
        return f"{'/'.join(map(str, e.path)) or '(top)'}: {e.message}"
    return None


def main(argv):
    schema = json.load(open(argv[1]))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    wrong = 0
    for kind in ("good", "bad"):
        files = sorted(glob.glob(os.path.join(argv[2], kind, "*.json")))
        if not files:
            print(f"FAIL no sample plans in {kind}/")
            wrong += 1
        for path in files:
            why = verdict(validator, path)
            ok = (why is None) == (kind == "good")
            wrong += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {kind}/{os.path.basename(path)}"
                  f"{': ' + why if why else ''}")
    print(f"{wrong} disagreement(s)")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
