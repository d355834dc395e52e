#!/usr/bin/env python3
"""Checks that every test docs/compatibility.md names exists.

Usage: check_compatibility.py REPO_ROOT

The table's last column names tests in backticks: `Suite.Name` for a GoogleTest test (TEST,
TEST_F or TEST_P with that suite and name, anywhere under tests/) or `test_name` for a pytest
function (def test_name under python/tests/). Exits 1 naming each test no source defines, or when
the table names none at all.
"""
import pathlib
import re
import sys


def table_tests(doc):
    names = []
    for line in doc.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("SGLang kv-canary", "---"):
            continue
        names.extend(re.findall(r"`([A-Za-z0-9_.]+)`", cells[-1]))
    return names


def defined_tests(root):
    gtests, pytests = set(), set()
    for path in (root / "tests").rglob("*.cpp"):
        text = path.read_text(errors="replace")
        for suite, name in re.findall(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", text):
            gtests.add(f"{suite}.{name}")
    for path in (root / "python" / "tests").rglob("*.py"):
        pytests.update(re.findall(r"^def (test_\w+)\(", path.read_text(), re.M))
    return gtests, pytests


def main():
    root = pathlib.Path(sys.argv[1])
    names = table_tests((root / "docs" / "compatibility.md").read_text())
    if not names:
        print("docs/compatibility.md names no test")
        return 1
    gtests, pytests = defined_tests(root)
    missing = [n for n in names if n not in (gtests if "." in n else pytests)]
    for name in missing:
        print(f"docs/compatibility.md names {name}, which no test defines")
    print(f"{len(names) - len(missing)} of {len(names)} tests named in the table exist")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
