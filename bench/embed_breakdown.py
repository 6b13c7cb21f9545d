#!/usr/bin/env python3
"""Where a process's peak RSS is (issue 22): runs a command, samples its
/proc/PID/status every INTERVAL seconds, keeps /proc/PID/smaps from the
sample with the highest VmRSS, and prints that snapshot grouped: each
library's pages (clean: read from the file; dirty: relocated or written),
its .bss, the main heap, the other threads' malloc arenas, thread stacks,
large allocations (malloc's own mmaps) and the main stack. A sampler can
miss a short spike: the last line compares the snapshot with the kernel's
peak (VmHWM, GNU time's figure) read at the last sample.

  bench/embed_breakdown.py [--interval S] [--json FILE] -- COMMAND [ARG...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HEAP_MAX = 64 << 20  # glibc's per-thread arena reservation on 64-bit
MAP_RE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \S+\s*(.*)$")


def read_smaps(pid):
    """The mappings of pid: dicts with start, end, perms, path, and the
    smaps fields in kB."""
    maps = []
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = MAP_RE.match(line)
            if m:
                cur = {"start": int(m.group(1), 16), "end": int(m.group(2), 16),
                       "perms": m.group(3), "path": m.group(4).strip()}
                maps.append(cur)
                continue
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                cur[key] = int(parts[0])
    return maps


def status(pid):
    """VmRSS and VmHWM of pid in kB (this process image's own: the
    kernel's peak of the program, not of the interpreter that started it)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(rest.split()[0])
    if "VmRSS" not in out:
        raise ProcessLookupError  # a zombie has no memory left
    return out


def thread_names(pid):
    """Each thread's name; the main thread's with its state (R: running,
    as while the app trains; S: waiting, as on the network)."""
    names = []
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "?"
    for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            names.append(f"{name} ({state})" if int(tid) == pid else name)
        except OSError:
            pass
    return names


def classify(maps):
    """(group, kind) -> {rss, dirty} in kB, kinds: clean, dirty, bss,
    heap, arena, stack, large, other."""
    groups = {}

    def add(group, kind, m):
        g = groups.setdefault((group, kind), {"rss": 0, "dirty": 0, "n": 0})
        g["rss"] += m.get("Rss", 0)
        g["dirty"] += m.get("Private_Dirty", 0) + m.get("Shared_Dirty", 0)
        g["n"] += 1

    for i, m in enumerate(maps):
        path = m["path"]
        prev = maps[i - 1] if i else None
        nxt = maps[i + 1] if i + 1 < len(maps) else None
        if path.startswith("/"):
            name = os.path.basename(path)
            add(name, "file", m)
        elif path == "[heap]":
            add("[heap]", "heap", m)
        elif path == "[stack]":
            add("[stack] main thread", "stack", m)
        elif path.startswith("["):
            add(path, "other", m)
        elif m["perms"].startswith("---"):
            continue  # guard pages and reserved arena space hold nothing
        elif (prev and prev["end"] == m["start"] and prev["path"].startswith("/")):
            add(os.path.basename(prev["path"]), "bss", m)
        elif (prev and prev["end"] == m["start"] and prev["perms"] == "---p"
              and prev["end"] - prev["start"] == 4096):
            add("thread stacks", "stack", m)
        elif (m["start"] % HEAP_MAX == 0 and nxt and nxt["start"] == m["end"]
              and nxt["perms"] == "---p"
              and nxt["end"] - m["start"] == HEAP_MAX):
            add("thread arenas (malloc)", "arena", m)
        elif m["start"] % HEAP_MAX == 0 and m["end"] - m["start"] == HEAP_MAX:
            add("thread arenas (malloc)", "arena", m)
        else:
            add("large allocations (mmap)", "large", m)
    return groups


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=0.002)
    ap.add_argument("--json")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    # The program runs at the lowest priority, so that on a loaded machine
    # the sampler still sees it often (nice execs it: same pid).
    p = subprocess.Popen(["nice", "-n", "19"] + cmd)
    best_rss, best_maps, best_threads, samples, hwm = -1, None, [], 0, 0
    while p.poll() is None:
        try:
            st = status(p.pid)
            rss, hwm = st.get("VmRSS", 0), st.get("VmHWM", hwm)
            if rss > best_rss:
                maps, names = read_smaps(p.pid), thread_names(p.pid)
                if sum(m.get("Rss", 0) for m in maps) >= rss * 0.9:
                    best_rss, best_maps, best_threads = rss, maps, names
            samples += 1
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass  # exiting
        time.sleep(a.interval)
    rc = p.returncode
    if best_maps is None:
        print(f"no sample taken; kernel peak (VmHWM) {hwm} kB; exit {rc}")
        return rc
    groups = classify(best_maps)
    rows = sorted(groups.items(), key=lambda kv: -kv[1]["rss"])
    total = sum(g["rss"] for g in groups.values())
    print(f"{'what':40} {'kind':6} {'rss kB':>8} {'dirty':>8} {'maps':>5}")
    for (name, kind), g in rows:
        if g["rss"]:
            print(f"{name:40} {kind:6} {g['rss']:8d} {g['dirty']:8d} {g['n']:5d}")
    by_kind = {}
    for (name, kind), g in groups.items():
        by_kind[kind] = by_kind.get(kind, 0) + g["rss"]
    print("by kind: " + ", ".join(f"{k} {v} kB" for k, v in
                                  sorted(by_kind.items(), key=lambda kv: -kv[1])))
    print(f"threads at the snapshot: {', '.join(best_threads)}")
    print(f"snapshot {total} kB with {len(best_threads)} threads; kernel peak "
          f"(VmHWM) {hwm} kB; {samples} samples; exit {rc}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"total_kb": total, "hwm_kb": hwm, "threads": best_threads,
                       "groups": [{"name": n, "kind": k, **g}
                                  for (n, k), g in rows]}, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
