"""The one place that says which fields of the evaluation's results the figures read.

fields.json maps each results file (a glob under the results folder) to a kind, and each kind to
its groups ("" = the document, "scenarios[]" = every element of the list "scenarios",
"table3[].pipelines[]" = nested) and the dotted field paths read in each group. The plotter reads
the results only through Record, which refuses a path the schema does not declare, and
check_fields.py checks that real results hold every declared path: a renamed field fails the
check (and CI), not the figure. Standard library only (the check runs without matplotlib).
"""
import fnmatch
import json
import os

SCHEMA = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fields.json")))
_MISSING = object()


def kind_of(relpath):
    """The kind of a results file, by the first pattern of fields.json "files" it matches."""
    for pattern, kind in SCHEMA["files"].items():
        if fnmatch.fnmatch(relpath, pattern):
            return kind
    raise KeyError(f"{relpath}: no pattern of fields.json 'files' matches it")


def read_json(path):
    """A JSON document, or a list of them for a .jsonl file (one per line)."""
    with open(path) as f:
        if path.endswith(".jsonl"):
            return [json.loads(line) for line in f if line.strip()]
        return json.load(f)


def resolve(data, path):
    """The value at a dotted path ("methods.eth.iteration_ms"), or _MISSING."""
    for key in path.split(".") if path else []:
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
    return data


def group_elements(data, group):
    """The elements a group path names: [data] for "", every element of each "x[]" step."""
    items = [data]
    for step in [s for s in group.split(".") if s]:
        assert step.endswith("[]"), f"group step {step!r} must end in []"
        key = step[:-2]
        nxt = []
        for item in items:
            value = item if key == "" else resolve(item, key)
            if not isinstance(value, list):
                raise KeyError(f"group {group!r}: {key or 'the document'} is not a list")
            nxt.extend(value)
        items = nxt
    return items


class Record:
    """One element of a group, readable only at the paths fields.json declares for it."""

    def __init__(self, kind, group, data, where):
        self.kind, self.group, self.data, self.where = kind, group, data, where

    def __getitem__(self, path):
        declared = SCHEMA["kinds"][self.kind].get(self.group, [])
        if path not in declared:
            raise KeyError(f"{self.kind} {self.group or '(document)'}: {path!r} is not declared "
                           "in tools/evaluation/fields.json; declare it there first")
        value = resolve(self.data, path)
        if value is _MISSING:
            raise KeyError(f"{self.where}: {self.group}{'.' if self.group else ''}{path} missing")
        return value

    def rows(self, sub):
        """The records of a nested group: rows("pipelines[]") inside "table3[]"."""
        group = f"{self.group}.{sub}" if self.group else sub
        if group not in SCHEMA["kinds"][self.kind]:
            raise KeyError(f"{self.kind}: group {group!r} is not declared in fields.json")
        return [Record(self.kind, group, d, self.where) for d in group_elements(self.data, sub)]


def load(results, relpath):
    """The document at results/relpath as a Record of its kind's "" group."""
    path = os.path.join(results, relpath)
    return Record(kind_of(relpath), "", read_json(path), path)
