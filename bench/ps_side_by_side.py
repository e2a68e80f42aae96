#!/usr/bin/env python3
"""pstrain's ps data plane beside ps-lite's, measured in the same minutes.

    bench/pslite/build.sh /path/to/ps-lite /tmp/pslite-bench
    bazel build --config=opt //bench:ps_throughput //ps:ps
    bench/ps_side_by_side.py --pslite /tmp/pslite-bench/pslite_throughput \
        --mb 4 40 --runs 3 [--busy] [--ps 2 --workers 2] [--transport tcp]

For each size, runs bench/ps_throughput (ours) and bench/pslite/
pslite_throughput (ps-lite, the same model and measurement) alternately,
--runs times each, and prints per size the median over runs of the mean
per-worker push and pull MB/s and of the aggregate MB/s (all bytes moved
over the wall time), the spread (min-max over runs), and the ratios
ours / ps-lite. --busy keeps one core busy with a spinning process
for the whole measurement, as another job on a shared host would.

--transport says how both sides cross between processes on this host:
"local" (the default) lets each use its own same-host transport, as a user
running them on one host gets: ours an abstract Unix socket (the ps's
--local_socket), ps-lite ZeroMQ's ipc:// (DMLC_LOCAL=1); "tcp" keeps both on
loopback TCP, the path between hosts.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys


def run(cmd, timeout):
    """The run's mean push, pull and aggregate MB/s; None if it did not end
    within `timeout` seconds (ps-lite 15b8adf once sat idle in a 400 MB
    round here, never ending it)."""
    # In a process group of its own, so that a run that does not end is
    # killed with every process it started.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    if proc.returncode != 0:
        sys.exit("%s exited with status %d" % (" ".join(cmd), proc.returncode))
    line = [l for l in out.splitlines() if l.startswith("{")][-1]
    result = json.loads(line)
    return (statistics.mean(result["push_mb_per_s"]),
            statistics.mean(result["pull_mb_per_s"]),
            result["aggregate_mb_per_s"])


def summary(values):
    return "%d (%d-%d)" % (statistics.median(values), min(values), max(values))


def ratios(ours, theirs):
    return " / ".join("%.2fx" % (statistics.median(o) / statistics.median(t))
                      for o, t in zip(ours, theirs))


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
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds a run may take before it counts as "
                        "not ended")
    parser.add_argument("--transport", choices=("local", "tcp"),
                        default="local",
                        help="both sides over their same-host transport, or "
                        "both over loopback TCP")
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
        print("| %s ps x %s workers, %s%s, MB per round | pstrain push / "
              "pull / aggregate MB/s | ps-lite push / pull / aggregate MB/s "
              "| ratio push / pull / aggregate |" %
              (args.ps, args.workers, args.transport,
               ", busy core" if args.busy else ""))
        print("|---|---|---|---|")
        common = ["--ps", str(args.ps), "--workers", str(args.workers),
                  "--rounds", str(args.rounds)]
        local = args.transport == "local"
        if local:
            os.environ["DMLC_LOCAL"] = "1"  # read by ps-lite's processes
        else:
            os.environ.pop("DMLC_LOCAL", None)
        for mb in args.mb:
            ours, theirs = [], []
            for _ in range(args.runs):
                ours.append(run([args.ours, "--ps_binary", args.ps_binary,
                                 "--mb", str(mb),
                                 "--local_socket=%s" % str(local).lower()] +
                                common, args.timeout))
                theirs.append(run([args.pslite, "--mb", str(mb)] + common,
                                  args.timeout))
            cells = []
            for runs in (ours, theirs):
                done = [r for r in runs if r is not None]
                cells.append(list(zip(*done)) if done else None)
            missing = lambda runs: ("%d of %d runs did not end in %d s" % (
                runs.count(None), len(runs), args.timeout)
                if None in runs else "")
            print("| %g | %s | %s | %s |" % (
                mb,
                " / ".join(summary(v) for v in cells[0]) if cells[0]
                else missing(ours),
                " / ".join(summary(v) for v in cells[1]) if cells[1]
                else missing(theirs),
                ratios(*cells) if cells[0] and cells[1] else "none") +
                "".join(" %s: %s." % (who, missing(runs))
                        for who, runs in (("pstrain", ours), ("ps-lite", theirs))
                        if cells[0 if who == "pstrain" else 1] and None in runs))
            sys.stdout.flush()
    finally:
        if busy:
            busy.kill()


if __name__ == "__main__":
    main()
