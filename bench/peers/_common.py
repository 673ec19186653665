"""Shared by the native peers of `npm run bench -- index` (see native.ts).

Input, written by the bench into one folder:
  docs.tsv    one line per entity, rowid = line number (1-based): the entity's keyword
              tokens (space separated, one opaque ASCII token per normalised keyword,
              self keyword included), a TAB, its word tokens with multiplicity (the bag)
  probes.tsv  one line per probe: keyword tokens, a TAB, distinct word tokens
  config.json {"time_ms", "budget_s", "k", "check"}
Output: one JSON object on stdout (see result()).
Timing happens inside this process, per query, with time.perf_counter_ns; no process
start, no file reading is in the figures.
"""
import gc
import json
import os
import sys
import time


def load(folder):
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    probes = []
    with open(os.path.join(folder, "probes.tsv")) as f:
        for line in f:
            kws, words = line.rstrip("\n").split("\t")
            probes.append((kws.split(), words.split()))
    return config, probes


def docs(folder):
    """Stream (rowid, keyword tokens, word tokens) without holding the corpus in memory."""
    with open(os.path.join(folder, "docs.tsv")) as f:
        for i, line in enumerate(f):
            kws, words = line.rstrip("\n").split("\t")
            yield i + 1, kws, words


def rss_mb():
    gc.collect()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def dir_mb(path):
    total = 0
    if os.path.isfile(path):
        return os.path.getsize(path) / 2**20
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total / 2**20


def latency(fn, n_probes, time_ms):
    """tinybench-like: warm up, then run fn(p) over rotating probes for time_ms (>= 10 runs)."""
    warm_end = time.perf_counter_ns() + int(min(200, time_ms / 5) * 1e6)
    p = 0
    while time.perf_counter_ns() < warm_end:
        fn(p)
        p = (p + 1) % n_probes
    samples = []
    end = time.perf_counter_ns() + int(time_ms * 1e6)
    p = 0
    while len(samples) < 10 or time.perf_counter_ns() < end:
        t0 = time.perf_counter_ns()
        fn(p)
        samples.append(time.perf_counter_ns() - t0)
        p = (p + 1) % n_probes
    samples.sort()

    def q(x):
        return samples[min(len(samples) - 1, int(x * len(samples)))] / 1000.0

    return {"p50_us": q(0.5), "p99_us": q(0.99), "samples": len(samples)}


def check_sets(match_rowids, n_probes, count):
    """Size and checksum (Σ rowid − 1, i.e. Σ input index) of the first `count` matched sets."""
    out = []
    for p in range(min(count, n_probes)):
        ids = match_rowids(p)
        out.append([len(ids), sum(ids) - len(ids)])
    return out


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
