#!/usr/bin/python3
"""Checks that an evaluation results folder holds every field the figures read.

Usage: check_fields.py RESULTS_DIR

For every file pattern of fields.json at least one file must exist, every declared group must be
non-empty, and every element of it must hold every declared field (null is allowed: a method
with no plan that fits). Prints each problem and exits 1 if there is any. Run by
scripts/evaluate.sh before drawing and by the CTest `evaluation_fields` on a --quick run.
"""
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fields  # noqa: E402


def check(results):
    problems = []
    checked = 0
    for pattern, kind in fields.SCHEMA["files"].items():
        paths = sorted(glob.glob(os.path.join(results, pattern)))
        if not paths:
            problems.append(f"{pattern}: no such file in {results}")
        for path in paths:
            rel = os.path.relpath(path, results)
            if fields.kind_of(rel) != kind:
                continue  # an earlier, more specific pattern owns it
            try:
                data = fields.read_json(path)
            except ValueError as e:
                problems.append(f"{rel}: not JSON: {e}")
                continue
            for group, names in fields.SCHEMA["kinds"][kind].items():
                try:
                    elements = fields.group_elements(data, group)
                except KeyError as e:
                    problems.append(f"{rel}: {e}")
                    continue
                if not elements:
                    problems.append(f"{rel}: group {group!r} is empty")
                for i, element in enumerate(elements):
                    for name in names:
                        checked += 1
                        if fields.resolve(element, name) is fields._MISSING:
                            problems.append(f"{rel}: {group or '(document)'} element {i}: "
                                            f"field {name!r} missing")
    return problems, checked


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 1
    problems, checked = check(sys.argv[1])
    for p in problems[:50]:
        print("check_fields:", p, file=sys.stderr)
    if problems:
        print(f"check_fields: {len(problems)} problem(s) (tools/evaluation/fields.json)",
              file=sys.stderr)
        return 1
    print(f"check_fields: {checked} field values present in {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
