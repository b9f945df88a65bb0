#!/usr/bin/env python3
"""Plots bench/run.py's markdown tables as standalone SVG (standard library only).

  bench/plot.py RUN_OUTPUT.txt [--out-dir DIR]      (DIR defaults to bench/)

Writes DIR/overhead.svg: the "overhead ns" (median minus untraced) of every
configuration, one group of bars per thread count, on a log axis, with the
"floor: null probes, placed" configuration drawn as a reference line and each
bar labelled with its "x floor overhead". If the output also has the processes
table, writes DIR/processes.svg: overhead per pair against the number of traced
processes, per-process probes (-p) against system-wide ones (--all -p).
"""
import argparse
import math
import os
import sys
import textwrap
from xml.sax.saxutils import escape

WIDTH = 800
CHAR_W = 6.6  # rough width of a 12px sans-serif character, for layout only
FLOOR = "floor: null probes, placed"
COLORS = {"floor": "#9a9a9a", "allocscope": "#3b6fb6", "other": "#e08a2c"}
SERIES_COLORS = ["#3b6fb6", "#e08a2c", "#4a9a5a", "#9a4ab0"]
REF_COLOR = "#c0392b"
GRID_COLOR = "#e4e4e4"


# ---------------------------------------------------------------- parsing

def parse_tables(text):
    """Markdown tables in text as dicts: caption (the last plain line before
    the table), header (cell list) and rows (cell lists, separator dropped)."""
    tables, caption, current = [], "", None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if current is None:
                current = {"caption": caption, "header": cells, "rows": []}
                tables.append(current)
            elif not all(set(c) <= set("-: ") for c in cells):
                current["rows"].append(cells)
        else:
            current = None
            if line and not line.startswith("round "):
                caption = line
    return tables


def find_table(tables, *columns):
    """The last table whose header has all of columns, or None."""
    found = [t for t in tables if set(columns) <= set(t["header"])]
    return found[-1] if found else None


def number(cell):
    """A table cell as a float, or None when it is empty or not a number."""
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return None


# ---------------------------------------------------------------- scales

def nice(v, up, mantissas=(1, 2, 5)):
    """The nearest 1-2-5 x 10^k value (or other mantissas) at or above (up) /
    below v (v > 0)."""
    exp = math.floor(math.log10(v))
    steps = [m * 10.0 ** e for e in (exp - 1, exp, exp + 1) for m in mantissas]
    return min(s for s in steps if s >= v * (1 - 1e-9)) if up else \
        max(s for s in steps if s <= v * (1 + 1e-9))


class Scale:
    """Maps the domain [lo, hi] to the pixel range [a, b], linearly or in log."""

    def __init__(self, lo, hi, a, b, log=False):
        self.lo, self.hi, self.a, self.b, self.log = lo, hi, a, b, log

    def __call__(self, v):
        f = (lambda x: math.log10(x)) if self.log else (lambda x: x)
        t = (f(v) - f(self.lo)) / (f(self.hi) - f(self.lo))
        return self.a + t * (self.b - self.a)

    def ticks(self):
        """Log: 1-2-5 ticks, decades only if crowded, 1-1.5-2-3-5-7 if sparse.
        Linear: about five evenly spaced round ticks."""
        if self.log:
            def steps(mantissas):
                out, v = [], nice(self.lo, True, mantissas)
                while v <= self.hi * (1 + 1e-9):
                    out.append(v)
                    v = nice(v * 1.001, True, mantissas)
                return out
            out = steps((1, 2, 5))
            if len(out) > 9:
                out = [v for v in out if math.log10(v).is_integer()]
            return out if len(out) >= 4 else steps((1, 1.5, 2, 3, 5, 7))
        step = nice((self.hi - self.lo) / 5, up=True)
        first = math.ceil(self.lo / step)
        return [i * step for i in range(first, int(self.hi / step + 1e-9) + 1)]


def value_scale(values, a, b, log_ratio=None):
    """A scale over positive values: log from a 1-2-5 value below the minimum to
    one above the maximum when log_ratio is None or max/min exceeds it, else
    linear from 0."""
    lo, hi = min(values), max(values)
    if log_ratio is None or hi / lo > log_ratio:
        return Scale(nice(lo, up=False), nice(hi, up=True), a, b, log=True)
    return Scale(0, nice(hi, up=True), a, b)


def fmt(v):
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


# ---------------------------------------------------------------- SVG

class Svg:
    """Collects SVG elements; str() gives the document."""

    def __init__(self, width, height):
        self.width, self.height, self.parts = width, height, []

    def add(self, tag, text=None, **attrs):
        a = " ".join(f'{k.rstrip("_").replace("_", "-")}="{escape(str(v), {chr(34): "&quot;"})}"'
                     for k, v in attrs.items())
        self.parts.append(f"<{tag} {a}/>" if text is None else f"<{tag} {a}>{escape(text)}</{tag}>")

    def text(self, x, y, s, **attrs):
        self.add("text", s, x=round(x, 1), y=round(y, 1), **attrs)

    def line(self, x1, y1, x2, y2, stroke, **attrs):
        self.add("line", x1=round(x1, 1), y1=round(y1, 1), x2=round(x2, 1), y2=round(y2, 1),
                 stroke=stroke, **attrs)

    def heading(self, title, caption, y=26):
        """Bold title plus the wrapped caption; returns the y below them."""
        self.text(WIDTH / 2, y, title, class_="title", text_anchor="middle")
        for part in textwrap.wrap(caption, 115):
            y += 17
            self.text(WIDTH / 2, y, part, class_="note", text_anchor="middle")
        return y + 14

    def __str__(self):
        return "\n".join([
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{round(self.height)}" '
            f'viewBox="0 0 {self.width} {round(self.height)}">',
            "<style>svg{fill:#222}text{font-family:sans-serif;font-size:12px}"
            ".title{font-size:15px;font-weight:bold}.group{font-weight:bold}"
            ".note{fill:#555}.tick{fill:#555;font-size:11px}"
            ".halo{paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}</style>",
            f'<rect width="100%" height="100%" fill="#fff"/>',
            *self.parts, "</svg>", ""])


# ---------------------------------------------------------------- charts

def category(name):
    if name.startswith("floor"):
        return "floor"
    return "allocscope" if name.startswith("allocscope") else "other"


def overhead_chart(table):
    """Horizontal log-scale bars of overhead ns, grouped by thread count."""
    col = {name: i for i, name in enumerate(table["header"])}
    groups = {}
    for row in table["rows"]:
        name, ov = row[col["configuration"]], number(row[col["overhead ns"]])
        if name == "untraced" or not ov or ov <= 0:
            continue
        xfloor = number(row[col["x floor overhead"]]) if "x floor overhead" in col else None
        groups.setdefault(row[col["threads"]], []).append((name, ov, xfloor))

    left, right, row_h, bar_h = 262, WIDTH - 24, 22, 14
    x = value_scale([ov for g in groups.values() for _, ov, _ in g], left, right)
    height = 100 + sum(60 + row_h * len(g) for g in groups.values()) + 40
    svg = Svg(WIDTH, height)
    y = svg.heading("Tracing overhead per malloc+free pair (median minus untraced)", table["caption"])

    lx = 12  # legend: bar colours and the floor line
    present = {category(name) for g in groups.values() for name, _, _ in g}
    for label, key in (("null-probe floors", "floor"), ("allocscope", "allocscope"), ("other tools", "other")):
        if key not in present:
            continue
        color = COLORS[key]
        svg.add("rect", x=lx, y=y - 10, width=12, height=12, fill=color)
        svg.text(lx + 17, y, label)
        lx += 36 + CHAR_W * len(label)
    svg.line(lx, y - 4, lx + 18, y - 4, REF_COLOR, stroke_width=2, stroke_dasharray="5,3")
    svg.text(lx + 24, y, f'reference: "{FLOOR}"')
    y += 24

    for threads, rows in groups.items():
        svg.text(12, y + 12, f"{threads} thread{'' if threads == '1' else 's'}", class_="group")
        top, bottom = y + 20, y + 20 + row_h * len(rows)
        for t in x.ticks():
            svg.line(x(t), top, x(t), bottom, GRID_COLOR)
            svg.text(x(t), bottom + 15, fmt(t), class_="tick", text_anchor="middle")
        labels = []  # drawn last, over the floor line
        for i, (name, ov, xfloor) in enumerate(rows):
            by = top + i * row_h + (row_h - bar_h) / 2
            end, color = x(ov), COLORS[category(name)]
            svg.text(left - 8, by + bar_h - 3, name, text_anchor="end")
            svg.add("rect", x=left, y=round(by, 1), width=round(end - left, 1), height=bar_h, fill=color)
            label = f"{fmt(ov)} ns" + (f"  ×{xfloor:.2f} floor" if xfloor is not None else "")
            if end + 6 + CHAR_W * len(label) <= WIDTH - 4:
                labels.append((end + 6, by + bar_h - 3, label, {}))
            else:  # no room to the right: inside the bar's end
                labels.append((end - 6, by + bar_h - 3, label,
                               {"text_anchor": "end", "fill": "#fff", "style": f"stroke:{color}"}))
        svg.line(left, bottom, right, bottom, "#888")
        floor = next((ov for name, ov, _ in rows if name == FLOOR), None)
        if floor:
            svg.line(x(floor), top - 4, x(floor), bottom, REF_COLOR, stroke_width=2,
                     stroke_dasharray="5,3")
            svg.text(x(floor) + 5, y + 12, f"floor {fmt(floor)} ns", fill=REF_COLOR)
        for lx, ly, label, attrs in labels:
            svg.text(lx, ly, label, class_="halo", **attrs)
        y = bottom + 40

    svg.text((left + right) / 2, y - 6, "overhead per malloc+free pair, ns (log scale)",
             text_anchor="middle")
    svg.height = y + 10
    return svg


def processes_chart(table):
    """Overhead ns against processes traced, one line per "overhead ns" column
    (named after the column before it), log x axis, log y axis if spread > 5x."""
    header = table["header"]
    xs = [number(r[0]) for r in table["rows"]]
    series = [(header[i - 1], [number(r[i]) for r in table["rows"]])
              for i, h in enumerate(header) if h == "overhead ns"]

    height, left, right, top, bottom = 480, 90, WIDTH - 30, 0, 430
    svg = Svg(WIDTH, height)
    top = svg.heading("Overhead per malloc+free pair vs processes traced at once",
                      table["caption"]) + 10
    x = Scale(min(xs) / 1.6, max(xs) * 1.6, left, right, log=True)
    values = [v for _, vs in series for v in vs if v and v > 0]
    y = value_scale(values, bottom, top, log_ratio=5)

    for t in y.ticks():
        svg.line(left, y(t), right, y(t), GRID_COLOR)
        svg.text(left - 6, y(t) + 4, fmt(t), class_="tick", text_anchor="end")
    for t in xs:
        svg.line(x(t), top, x(t), bottom, GRID_COLOR)
        svg.text(x(t), bottom + 16, fmt(t), class_="tick", text_anchor="middle")
    svg.add("rect", x=left, y=round(top, 1), width=right - left, height=round(bottom - top, 1),
            fill="none", stroke="#888")
    svg.text((left + right) / 2, bottom + 36, "processes traced (log scale)", text_anchor="middle")
    svg.text(20, (top + bottom) / 2, "overhead per pair, ns" + (" (log scale)" if y.log else ""),
             text_anchor="middle", transform=f"rotate(-90 20 {(top + bottom) / 2:.1f})")

    for k, (name, vs) in enumerate(series):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        pts = [(x(a), y(b)) for a, b in zip(xs, vs) if b and b > 0]
        svg.add("polyline", points=" ".join(f"{px:.1f},{py:.1f}" for px, py in pts),
                fill="none", stroke=color, stroke_width=2)
        for j, ((px, py), v) in enumerate(zip(pts, [b for b in vs if b and b > 0])):
            above = v >= max(s[1][j] or 0 for s in series)
            if k % 2:
                svg.add("rect", x=round(px - 4.5, 1), y=round(py - 4.5, 1), width=9, height=9, fill=color)
            else:
                svg.add("circle", cx=round(px, 1), cy=round(py, 1), r=5, fill=color)
            svg.text(px + 8, py + (-8 if above else 16), fmt(v), fill=color, class_="halo")
        ly = top + 20 + 20 * k  # legend, top left inside the plot
        svg.line(left + 14, ly - 4, left + 40, ly - 4, color, stroke_width=2)
        if k % 2:
            svg.add("rect", x=left + 22.5, y=ly - 8.5, width=9, height=9, fill=color)
        else:
            svg.add("circle", cx=left + 27, cy=ly - 4, r=5, fill=color)
        svg.text(left + 48, ly, name)
    return svg


def time_chart(title, caption, x_label, y_label, series):
    """Lines of (x, y) points against a linear x from 0 and a linear y from 0:
    series = [(name, [(x, y), ...]), ...]."""
    height, left, right, bottom = 460, 90, WIDTH - 30, 410
    svg = Svg(WIDTH, height)
    top = svg.heading(title, caption) + 10
    xs = [px for _, pts in series for px, _ in pts] or [1]
    ys = [py for _, pts in series for _, py in pts] or [1]
    def ceiling(v):  # the round tick at or above v
        step = nice(v / 5, up=True)
        return math.ceil(v / step - 0.01) * step  # a point a hair above a tick stays inside
    x = Scale(0, ceiling(max(xs)), left, right)
    y = Scale(0, ceiling(max(ys) * 1.1), bottom, top)
    for t in y.ticks():
        svg.line(left, y(t), right, y(t), GRID_COLOR)
        svg.text(left - 6, y(t) + 4, fmt(t), class_="tick", text_anchor="end")
    for t in x.ticks():
        svg.line(x(t), top, x(t), bottom, GRID_COLOR)
        svg.text(x(t), bottom + 16, fmt(t), class_="tick", text_anchor="middle")
    svg.add("rect", x=left, y=round(top, 1), width=right - left, height=round(bottom - top, 1),
            fill="none", stroke="#888")
    svg.text((left + right) / 2, bottom + 36, x_label, text_anchor="middle")
    svg.text(20, (top + bottom) / 2, y_label, text_anchor="middle",
             transform=f"rotate(-90 20 {(top + bottom) / 2:.1f})")
    for k, (name, pts) in enumerate(series):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        svg.add("polyline", points=" ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in pts),
                fill="none", stroke=color, stroke_width=1.5)
        ly = top + 20 + 20 * k  # legend, top left inside the plot
        svg.line(left + 14, ly - 4, left + 40, ly - 4, color, stroke_width=2)
        svg.text(left + 48, ly, name)
    return svg


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_output", help="what bench/run.py printed")
    ap.add_argument("--out-dir", default=os.path.dirname(os.path.abspath(__file__)),
                    help="where to write overhead.svg and processes.svg (default: bench/)")
    args = ap.parse_args()

    with open(args.run_output, encoding="utf-8") as f:
        tables = parse_tables(f.read())
    os.makedirs(args.out_dir, exist_ok=True)
    charts = [("overhead.svg", find_table(tables, "configuration", "threads", "overhead ns"), overhead_chart),
              ("processes.svg", find_table(tables, "processes", "overhead ns"), processes_chart)]
    if charts[0][1] is None:
        sys.exit(f"{args.run_output}: no overhead table (| configuration | threads | ...)")
    for filename, table, chart in charts:
        if table is None:
            print(f"no processes table in {args.run_output}: {filename} not written", file=sys.stderr)
            continue
        path = os.path.join(args.out_dir, filename)
        with open(path, "w", encoding="utf-8") as f:
            f.write(str(chart(table)))
        print(path)


if __name__ == "__main__":
    main()
