"""Compare two versions of ``tests/golden/reports.json``: the same cases, the
same keys in every report, and which values changed.

    python tests/tools/golden_diff.py OLD.json NEW.json
    git show HEAD:tests/golden/reports.json > /tmp/old.json && python tests/tools/golden_diff.py /tmp/old.json tests/golden/reports.json

Prints, for each key path (list indices and case names folded), how many
values changed across all cases, and exits 1 if a case or a key was added or
removed (a regeneration must only move numbers)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any


def leaves(x: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of a JSON value by its path (``a.b[3].c``)."""
    if isinstance(x, dict):
        out: dict[str, Any] = {}
        for k, v in x.items():
            out.update(leaves(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(x, list):
        out = {}
        for i, v in enumerate(x):
            out.update(leaves(v, f"{path}[{i}]"))
        return out
    return {path: x}


def folded(path: str) -> str:
    """The path with list indices and the names of observes, pools, stages … kept,
    but numbers in brackets folded (``a[3].b`` → ``a[].b``)."""
    out, depth = [], 0
    for ch in path:
        if ch == "[":
            depth += 1
            out.append("[]")
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def compare(old: dict[str, str], new: dict[str, str]) -> tuple[bool, Counter[str], Counter[str], int]:
    """(same cases and keys, changed values per folded path, values per folded path, cases changed)."""
    ok = sorted(old) == sorted(new)
    if not ok:
        print(f"cases differ: only old {sorted(set(old) - set(new))}, only new {sorted(set(new) - set(old))}")
    changed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    cases = 0
    for name in sorted(set(old) & set(new)):
        a, b = leaves(json.loads(old[name])), leaves(json.loads(new[name]))
        if a.keys() != b.keys():
            ok = False
            print(f"{name}: keys differ: only old {sorted(a.keys() - b.keys())[:5]}, only new {sorted(b.keys() - a.keys())[:5]}")
        moved = False
        for k in a.keys() & b.keys():
            total[folded(k)] += 1
            if a[k] != b[k]:
                changed[folded(k)] += 1
                moved = True
        cases += moved
    return ok, changed, total, cases


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    old, new = (json.loads(open(p, encoding="utf-8").read()) for p in argv)
    ok, changed, total, cases = compare(old, new)
    print(f"{cases} of {len(new)} cases changed; {sum(changed.values())} of {sum(total.values())} values")
    by_leaf: Counter[str] = Counter()
    for path, c in changed.items():
        by_leaf[path.rsplit(".", 1)[-1]] += c
    print("changed values by field: " + ", ".join(f"{k} {v}" for k, v in sorted(by_leaf.items())))
    for path in sorted(changed):
        print(f"  {path}: {changed[path]} of {total[path]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
