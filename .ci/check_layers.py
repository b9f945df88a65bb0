#!/usr/bin/env python3
"""Fails when a file includes a header from a higher layer.

user/ is a stack of layers, lowest first (the order of user/CMakeLists.txt).
A file in layer L may include headers of L and of the layers below it; the
ABI headers (bpf/: the kernel's in bpf/abi/, the preload library's wire in
bpf/abi/preload/) and system headers may be included anywhere, but no layer
includes the preload library's own headers (user/preload/). cli/ is
the top floor and sees only the entry points of record and report and the
base layer (and the agent's). user/preload/ is a C library loaded into traced programs: it
includes no layer at all. Inside a layer with rooms (ROOMS), a file includes its layer's
top-level headers and those of its own room and the rooms before it; a top-level header
includes no room. runtime/ holds a room per language runtime (SIBLINGS): a room includes
runtime/'s top-level headers and its own, never another runtime's; no file outside a room
includes it but the registry (REGISTRY), so a new runtime is one folder and one line there.
Prints each offending include as file:line and exits 1.
"""
import pathlib
import re
import sys

LAYERS = ["base", "stats", "model", "host", "symbols", "output", "probe", "runtime", "inject", "record", "report", "agent", "check"]
CLI_ALLOWED = {"record/record.h", "report/report.h", "agent/agent.h", "check/check.h"}
ROOMS = {
    "probe": ["placement", "features", "tables", "session"],
    "record": ["events", "discovery", "view", "session"],
}
SIBLINGS = {"runtime"}
REGISTRY = {"runtime/registry.cpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(header):
    first = header.split("/", 1)[0]
    return first if "/" in header and first in LAYERS else None


def room_of(parts):
    """The room of a path's parts below user/ ('' for a layer's top level)."""
    return parts[1] if len(parts) > 2 and parts[1] in ROOMS.get(parts[0], []) else ""


def sibling_violation(own_parts, header):
    """Why an include reaches into a runtime's room from outside it, or None."""
    target = header.split("/")
    if target[0] not in SIBLINGS or len(target) < 3:
        return None
    own_room = own_parts[1] if own_parts[0] == target[0] and len(own_parts) > 2 else None
    if own_room == target[1] or "/".join(own_parts) in REGISTRY:
        return None
    return f"{header} is {target[1]}'s room of {target[0]}/: only that room and {sorted(REGISTRY)} include it"


def room_violation(own_parts, header):
    """Why an include from a file (its parts below user/) breaks its layer's rooms, or None."""
    sibling = sibling_violation(own_parts, header)
    if sibling:
        return sibling
    layer, rooms = own_parts[0], ROOMS.get(own_parts[0])
    target = header.split("/")
    if not rooms or target[0] != layer:
        return None
    own_room, target_room = room_of(own_parts), room_of(target)
    rank = lambda room: rooms.index(room) + 1 if room else 0
    if rank(target_room) > rank(own_room):
        return f"{layer}/{own_room or '(top)'} includes {header} from the later room {target_room}"
    return None


def includes(path):
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = INCLUDE.match(line)
        if m:
            yield n, m.group(1)


def violations(root):
    bad = []
    for path in sorted((root / "user").rglob("*")):
        if path.suffix not in (".h", ".c", ".cpp", ".inc"):
            continue
        own = path.relative_to(root / "user").parts[0]
        if own == "preload":  # loaded into traced programs: no layer of the library
            bad += [(path, n, f"preload includes {h} from the library")
                    for n, h in includes(path) if layer_of(h)]
            continue
        if own not in LAYERS:
            bad.append((path, 0, f"{own}/ is not a layer: add it to LAYERS and user/CMakeLists.txt"))
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = layer_of(m.group(1))
            if m.group(1).startswith("preload/"):
                bad.append((path, n, f"{own} includes {m.group(1)}, the preload library's own: its wire is bpf/abi/preload/"))
            if target and LAYERS.index(target) > LAYERS.index(own):
                bad.append((path, n, f"{own} includes {m.group(1)} from the higher layer {target}"))
            why = room_violation(path.relative_to(root / "user").parts, m.group(1))
            if why:
                bad.append((path, n, why))
    for path in sorted(p for p in (root / "cli").rglob("*") if p.suffix in (".h", ".cpp")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if m and layer_of(m.group(1)) not in (None, "base") and m.group(1) not in CLI_ALLOWED:
                bad.append((path, n, f"cli includes {m.group(1)}: only {sorted(CLI_ALLOWED)} and base/"))
    return bad


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    bad = violations(root)
    for path, n, why in bad:
        print(f"{path.relative_to(root)}:{n}: {why}")
    print(f"check_layers: {len(bad)} include(s) against the layers" if bad else "check_layers: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
