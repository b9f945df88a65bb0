"""A WSGI application with allocation sites of known sizes, for allocscope's
tests under uWSGI (which embeds CPython through libpython3.X.so).

Each request to /run runs every site once (application -> site -> build ->
allocate, as python_sites.py) and answers its truth as one JSON object: per
site, objects, bytes each as the allocator is asked, kept or not, and the
process that ran it. /ping answers "pong" and allocates nothing of note.
"""
import json
import os
import sys

kept = []
SCALE = int(os.environ.get("WSGI_SITES_SCALE_PCT", "20"))


def allocate(size, count):
    out = []
    for _ in range(count):
        out.append(bytes(size))
    return out


def build(size, count):
    return allocate(size, count)


def large_kept(count):
    kept.append(build(3033, count))


def large_freed(count):
    build(1533, count)


SITES = [(large_kept, 3033, 25000, True), (large_freed, 1533, 25000, False)]


def run_sites():
    truth = {"pid": os.getpid()}
    for site, length, count, keep in SITES:
        n = count * SCALE // 100
        site(n)
        truth[site.__name__] = {"objects": n, "size": sys.getsizeof(bytes(length)), "kept": keep}
    return truth


def application(environ, start_response):
    body = b"pong"
    if environ.get("PATH_INFO") == "/run":
        body = json.dumps(run_sites()).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
