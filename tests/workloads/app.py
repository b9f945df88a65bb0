# The README's Python example: load() builds a list per line with parse().
import sys


def parse(line):
    return line.split(",")


def load(n):
    lines = [f"{i},{i * 2},name{i},{i % 7}" for i in range(n)]
    return [parse(line) for line in lines]


rows = load(300_000)
print(len(rows), "rows", file=sys.stderr)
