#!/usr/bin/env python3
"""pstrain's ps data plane beside ps-lite's, measured in the same minutes.

    bench/pslite/build.sh /path/to/ps-lite /tmp/pslite-bench
    bazel build --config=opt //bench:ps_throughput //ps:ps
    bench/ps_side_by_side.py --pslite /tmp/pslite-bench/pslite_throughput \
        --mb 4 40 --runs 3 [--busy] [--ps 2 --workers 2]

For each size, runs bench/ps_throughput (ours) and bench/pslite/
pslite_throughput (ps-lite, the same model and measurement) alternately,
--runs times each, and prints per size the median over runs of the mean
per-worker push and pull MB/s and of the aggregate MB/s (all bytes moved
over the wall time), the spread (min-max over runs), and the ratios
ours / ps-lite. --busy keeps one core busy with a spinning process
for the whole measurement, as another job on a shared host would.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         timeout=600).stdout
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    result = json.loads(line)
    return (statistics.mean(result["push_mb_per_s"]),
            statistics.mean(result["pull_mb_per_s"]),
            result["aggregate_mb_per_s"])


def summary(values):
    return "%d (%d-%d)" % (statistics.median(values), min(values), max(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pslite", required=True,
                        help="pslite_throughput built by bench/pslite/build.sh")
    parser.add_argument("--ours", default="bazel-bin/bench/ps_throughput")
    parser.add_argument("--ps_binary", default="bazel-bin/ps/ps")
    parser.add_argument("--mb", type=float, nargs="+", default=[4, 40])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--ps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--busy", action="store_true",
                        help="a spinning process holds one core throughout")
    args = parser.parse_args()
    for path in (args.pslite, args.ours, args.ps_binary):
        if not os.access(path, os.X_OK):
            sys.exit("%s: not an executable (see the usage above)" % path)

    busy = None
    if args.busy:
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        print("| %s ps x %s workers%s, MB per round | pstrain push / pull / "
              "aggregate MB/s | ps-lite push / pull / aggregate MB/s "
              "| ratio push / pull / aggregate |" %
              (args.ps, args.workers, ", busy core" if args.busy else ""))
        print("|---|---|---|---|")
        common = ["--ps", str(args.ps), "--workers", str(args.workers),
                  "--rounds", str(args.rounds)]
        for mb in args.mb:
            ours, theirs = [], []
            for _ in range(args.runs):
                ours.append(run([args.ours, "--ps_binary", args.ps_binary,
                                 "--mb", str(mb)] + common))
                theirs.append(run([args.pslite, "--mb", str(mb)] + common))
            ours, theirs = list(zip(*ours)), list(zip(*theirs))
            print("| %g | %s | %s | %s |" % (
                mb, " / ".join(summary(v) for v in ours),
                " / ".join(summary(v) for v in theirs),
                " / ".join("%.2fx" % (statistics.median(o) /
                                      statistics.median(t))
                           for o, t in zip(ours, theirs))))
            sys.stdout.flush()
    finally:
        if busy:
            busy.kill()


if __name__ == "__main__":
    main()
