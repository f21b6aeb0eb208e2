#!/usr/bin/env python3
"""The size rules of the code (issue 27, STYLE.md): no source file over 800 lines and no function
over 150 lines (a bench's `main` included) in src/ and bench/.

    tools/check_sizes.py [--top N] [PATH ...]     (default: src bench, from the repository root)

Prints each file and function over its limit and exits 1 when there is one; --top N also lists
the N longest functions. Needs only Python 3: functions are found by matching braces in the text
with comments, strings and preprocessor lines blanked, which is enough for this code's style (a
brace whose header has a top-level parenthesis at namespace or class scope opens a function,
lambdas and local classes count in the function that holds them). A generated table may say
`check_sizes: generated` in its first lines to be left out of the file rule.
"""

import argparse
import os
import re
import sys

EXTENSIONS = (".cpp", ".cc", ".h", ".hpp", ".cu", ".cuh", ".inc")
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150


def blank_non_code(text):
    """The text with comments, string and character literals and preprocessor lines replaced by
    spaces (newlines kept, so offsets and line numbers stay)."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line, with its continuations
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                j += 1
            blank(i, j)
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            j = n if end < 0 else end + len(m.group(1)) + 2
            blank(i, j)
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i, min(j + 1, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def strip_template_prefix(header):
    """`header` without leading `template <...>` parameter lists."""
    while True:
        m = re.match(r"\s*template\s*<", header)
        if not m:
            return header
        depth, k = 1, m.end()
        while k < len(header) and depth:
            depth += {"<": 1, ">": -1}.get(header[k], 0)
            k += 1
        header = header[k:]


def top_level(header):
    """The characters of `header` outside (), [] and <> (roughly: a < followed by > in the same
    header counts as brackets)."""
    depth, out = 0, []
    for ch in header:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def classify(header):
    """What a `{` at namespace or class scope opens, from the text before it: 'function',
    'member-init' (a brace initializer or a lambda in a constructor's initializer list: part of
    the header), or 'scope' (a namespace, class, enum, a variable's initializer, extern "C")."""
    h = strip_template_prefix(header)
    h = re.sub(r"\boperator\s*(\(\)|[^\s(]+)", "operator", h)
    if re.search(r"\b(namespace|enum)\b", h) or re.match(r"\s*extern\b\s*$", h):
        return "scope"
    if "(" not in h:
        return "scope"
    if re.match(r"\s*(class|struct|union)\b", h) and not re.search(r"\)\s*$", h):
        return "scope"
    if h.count("(") > h.count(")"):  # inside an expression: a lambda in an initializer
        return "member-init"
    outside = top_level(h)
    if "=" in outside:
        return "scope"
    # Constructor initializer list: `X::X(...) : a_(1), b_{` (the `{` of b_, not the body).
    after = h[h.rfind(")") + 1:] if ")" in h else ""
    if re.search(r"(^|[^:]):([^:]|$)", after) and re.search(r"[\w>]\s*$", h):
        return "member-init"
    return "function"


def functions(text):
    """(name, first line, last line) of each function of `text` (code, blanked)."""
    found = []
    stack = []  # per open brace: 'scope', 'function', 'block'
    header_start = 0
    func_start = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "{":
            in_function = any(s == "function" for s in stack)
            if in_function:
                stack.append("block")
            else:
                header = text[header_start:i]
                kind = classify(header)
                if kind == "member-init":
                    depth, j = 1, i + 1
                    while j < n and depth:
                        depth += {"{": 1, "}": -1}.get(text[j], 0)
                        j += 1
                    i = j  # part of the header
                    continue
                if kind == "function":
                    first = header_start + (len(header) - len(header.lstrip()))
                    name = re.findall(r"([~\w:]+)\s*\(", strip_template_prefix(header))
                    func_start = (name[0] if name else "?", text.count("\n", 0, first) + 1)
                stack.append(kind)
            header_start = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "scope"
            if kind == "function":
                found.append((func_start[0], func_start[1], text.count("\n", 0, i) + 1))
            header_start = i + 1
        elif c == ";" and not any(s == "function" for s in stack):
            header_start = i + 1
        i += 1
    return found


def source_files(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for root, _, names in os.walk(p):
            for name in sorted(names):
                if name.endswith(EXTENSIONS):
                    yield os.path.join(root, name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", default=["src", "bench"])
    ap.add_argument("--top", type=int, default=0, help="also list the N longest functions")
    args = ap.parse_args()
    over = []
    lengths = []
    for path in source_files(args.paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        generated = "check_sizes: generated" in "\n".join(text.splitlines()[:5])
        if lines > MAX_FILE_LINES and not generated:
            over.append(f"{path}: {lines} lines (at most {MAX_FILE_LINES})")
        for name, first, last in functions(blank_non_code(text)):
            length = last - first + 1
            lengths.append((length, path, first, name))
            if length > MAX_FUNCTION_LINES:
                over.append(f"{path}:{first}: {name} is {length} lines (at most "
                            f"{MAX_FUNCTION_LINES})")
    for line in over:
        print(line)
    if args.top:
        for length, path, first, name in sorted(lengths, reverse=True)[: args.top]:
            print(f"{length:5d}  {path}:{first}  {name}")
    if not over:
        print(f"sizes OK: no file over {MAX_FILE_LINES} lines, no function over "
              f"{MAX_FUNCTION_LINES}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
