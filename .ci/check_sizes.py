#!/usr/bin/env python3
"""Fails when a source file of the product is over 500 lines.

The product is user/, cli/ and bpf/: a file past the bound does more than one
job and is split along them (the house's rule; tests are not bound by it).
Prints each offender with its length and exits 1.
"""
import pathlib
import sys

LIMIT = 500
PRODUCT = ("user", "cli", "bpf")
SUFFIXES = {".c", ".cpp", ".h", ".inc"}


def oversized(root):
    for top in PRODUCT:
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
