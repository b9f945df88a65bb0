#!/usr/bin/env python3
"""Fails when a C or C++ file of the product or of its tests is over 500 lines.

The product is user/, cli/ and bpf/, its tests tests/: a file past the bound
does more than one job and is split along them (the house's rule; a test file
along its topics, what its tests share in a header beside it).
Prints each offender with its length and exits 1.
"""
import pathlib
import sys

LIMIT = 500
CHECKED = ("user", "cli", "bpf", "tests")
SUFFIXES = {".c", ".cpp", ".h", ".inc"}


def oversized(root):
    for top in CHECKED:
        for path in sorted((root / top).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file():
                lines = len(path.read_text(errors="replace").splitlines())
                if lines > LIMIT:
                    yield path.relative_to(root), lines


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    bad = list(oversized(root))
    for path, lines in bad:
        print(f"{path}: {lines} lines (at most {LIMIT}: split it along its jobs)")
    print(f"check_sizes: {len(bad)} file(s) over {LIMIT} lines" if bad else "check_sizes: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
