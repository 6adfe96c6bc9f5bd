#!/usr/bin/env python3
"""snowseq benchmarks: measure (bench/measure.py), judge the targets
(bench/targets.py), write the report (bench/report.py).

Started by bench/run.sh against a throwaway server it has set up (PGHOST,
PGPORT, PGUSER and PGDATABASE in the environment).  The results of a run are
saved as results.json next to the report, so that the report, the plots and
README.md's speed section can be written again without measuring
(--from-json, and bench/report.py --readme).
"""

import argparse
import datetime
import json
import os
import re
import sys
import time

from measure import (BENCH_DIR, ENV, FULL, OPTIONAL_GENERATORS, SCALING_ENV, SCALING_FULL, SCALING_SMOKE,
                     SETTINGS, SMOKE, HarnessError, add_optional_generators, bench_calls, bench_clients,
                     bench_inserts, bench_scaling, bench_shmem_burst, bench_wal, cpu_topology, finite, log,
                     machine_info, observe, psql, psql_at, query_rows, query_value, shmem_reading)
from report import (judge_scaling, load_results, load_scaling, print_calls, print_scaling, print_summary, ratios,
                    write_plots, write_report, write_scaling_plot, write_scaling_section)
from targets import targets


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["full", "smoke"], default="full")
    ap.add_argument("--out", required=True, help="directory of benchmarks.md and the PNGs")
    ap.add_argument("--data", required=True, help="directory of raw results and plot data")
    ap.add_argument("--tmp", help="scratch directory")
    ap.add_argument("--only", choices=["calls", "scaling"],
                    help="calls: measure section 1 (call cost) only and print it, no report, no plots; "
                    "scaling: the client-scaling run of bench/clients.sh, its section of benchmarks.md, its "
                    "plot and scaling.json")
    ap.add_argument("--main-data", help="scaling: the data directory of the server of PGPORT")
    ap.add_argument("--wide-port", type=int, help="scaling: the port of the server with the wide layout")
    ap.add_argument("--wide-data", help="scaling: its data directory")
    ap.add_argument("--from-json", metavar="RESULTS",
                    help="measure nothing: redraw the report and plots from a results.json (or scaling.json)")
    args = ap.parse_args()
    if args.from_json:
        return rerender(args)
    if not args.tmp:
        ap.error("--tmp is required")
    if args.only == "scaling":
        if not (args.main_data and args.wide_port and args.wide_data):
            ap.error("--only scaling needs --main-data, --wide-port and --wide-data")
        return scaling(args)

    cfg = sizes(FULL if args.mode == "full" else SMOKE, ENV)
    for k in ("reps", "client_reps", "insert_reps"):
        if cfg[k] < 1:
            raise SystemExit("%s must be at least 1" % ENV[k])
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.data, exist_ok=True)

    start = time.time()
    ctx = {"mode": args.mode, "cfg": cfg, "machine": machine_info(),
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "png": {"calls": "bench-call-cost.png", "clients": "bench-clients.png",
                   "inserts": "bench-inserts.png"}}
    psql("\\i %s\n" % os.path.join(BENCH_DIR, "setup.sql"))
    ctx["pg_version"] = query_value("SELECT version()")
    ctx["settings"] = [tuple(r) for r in query_rows(
        "SELECT name, current_setting(name), source FROM pg_settings WHERE name IN (%s) ORDER BY name"
        % ", ".join("'%s'" % s for s in SETTINGS))]
    m = ctx["machine"]
    short_pg = re.sub(r" on .*", "", ctx["pg_version"])
    ctx["subtitle"] = "%s, %d cores; %s; %s" % (m["cpu"], m["nproc"], short_pg, ctx["date"][:10])
    log("machine: %s, %d cores, %.1f GiB; %s" % (m["cpu"], m["nproc"], m["mem_gib"], ctx["pg_version"]))
    log("settings:")
    for name, value, source in ctx["settings"]:
        log("  %-28s %-24s (%s)" % (name, value, source))
    log("sizes: " + ", ".join("%s=%s" % (ENV[k], cfg[k]) for k in ENV))

    if args.only == "calls":
        add_optional_generators()
        ctx["calls"] = bench_calls(cfg)
        print_calls(ctx)
        return 0 if all(finite(r["ns"]) and r["ns"] > 0 for r in ctx["calls"]) else 1

    ctx["load"] = []

    def load(section):
        """The machine's load average when a section starts (the run shares it)."""
        with open("/proc/loadavg") as f:
            ctx["load"].append((section, " ".join(f.read().split()[:3])))

    load("start")
    shmem = {"before": shmem_reading()}
    have, ctx["skipped"] = add_optional_generators()
    ctx["optional"] = [{"key": k, "label": l, "expr": e}
                       for k, l, e, _, _ in OPTIONAL_GENERATORS if k in have]
    for o in ctx["optional"]:
        log("compared: %s" % o["label"])
    for label, why in ctx["skipped"]:
        log("skipped: %s: %s" % (label, why))
    ctx["observations"] = observe(args.mode, args.tmp)
    load("1. call cost")
    ctx["calls"] = bench_calls(cfg)
    load("2. clients")
    ctx["clients"], ctx["client_res"] = bench_clients(cfg, args.tmp)
    ctx["clock_caught_up"] = True
    load("3. inserts")
    ctx["inserts"] = bench_inserts(cfg)
    load("4. WAL")
    ctx["wal"] = bench_wal(cfg)
    bench_shmem_burst(cfg)
    load("end")
    shmem["after"] = shmem_reading()
    ctx["shmem"] = shmem
    ctx["targets"] = targets(ctx["calls"], ctx["clients"], ctx["client_res"], ctx["inserts"],
                             ctx["wal"], shmem, ctx["skipped"])
    ctx["elapsed"] = time.time() - start

    for d in (args.data, args.out):
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump(ctx, f, indent=1, default=str)
    return finish(ctx, args, start)


def scaling(args):
    """The client-scaling run (bash bench/clients.sh): every generator at
    each client count, judged, its section of benchmarks.md, its plot and
    scaling.json."""
    start = time.time()
    cfg = sizes(SCALING_FULL if args.mode == "full" else SCALING_SMOKE, SCALING_ENV)
    if cfg["reps"] < 1:
        raise SystemExit("%s must be at least 1" % SCALING_ENV["reps"])
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.data, exist_ok=True)
    clusters = {"main": {"port": int(os.environ["PGPORT"]), "data": args.main_data},
                "wide": {"port": args.wide_port, "data": args.wide_data}}
    psql("\\i %s\n" % os.path.join(BENCH_DIR, "setup.sql"))
    ok, _, err = psql_at(args.wide_port, "CREATE EXTENSION IF NOT EXISTS snowseq;")
    if not ok:
        raise HarnessError("CREATE EXTENSION on the wide-layout server: " + err)
    m = cpu_topology()
    ctx = {"kind": "scaling", "mode": args.mode, "cfg": cfg, "machine": m, "png": "bench-scaling.png",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "pg_version": re.sub(r" on .*", "", query_value("SELECT version()"))}
    ctx["subtitle"] = "%s, %d CPUs; %s; %s" % (m["cpu"], m["nproc"], ctx["pg_version"], ctx["date"][:10])
    log("machine: %s, %d logical CPUs, %.1f GiB; %s" % (m["cpu"], m["nproc"], m["mem_gib"], ctx["pg_version"]))
    log("sizes: " + ", ".join("%s=%s" % (SCALING_ENV[k], cfg[k]) for k in SCALING_ENV))
    ctx["scaling"] = bench_scaling(cfg, clusters, args.tmp)
    ctx["targets"] = judge_scaling(ctx)
    ctx["elapsed"] = time.time() - start
    for d in (args.data, args.out):
        with open(os.path.join(d, "scaling.json"), "w") as f:
            json.dump(ctx, f, indent=1, default=str)
    return finish_scaling(ctx, args)


def finish_scaling(ctx, args):
    write_scaling_plot(ctx, args.out, args.data)
    write_scaling_section(os.path.join(args.out, "benchmarks.md"), ctx)
    print_scaling(ctx)
    # the harness itself must have worked, whatever the numbers say
    bad = [(r["key"], c) for r in ctx["scaling"]["rows"] for c in ctx["scaling"]["clients"]
           if not finite(r["ids_per_s"][c]) or r["ids_per_s"][c] <= 0 or not finite(r["scaling"][c])]
    png = os.path.join(args.out, ctx["png"])
    if bad or not os.path.isfile(png) or os.path.getsize(png) == 0:
        log("harness broken: IDs/s that are not positive numbers %s, plot %s" % (bad, png))
        return 1
    log("\nwrote %s and %s (%.1f min)" % (os.path.join(args.out, "benchmarks.md"), png, ctx["elapsed"] / 60.0))
    return 0


def sizes(defaults, env):
    """The sizes of a run: defaults, overridden by the environment."""
    cfg = dict(defaults)
    for k, var in env.items():
        if os.environ.get(var):
            cfg[k] = type(cfg[k])(os.environ[var])
    return cfg


def rerender(args):
    """Report and plots again from saved results (after a change of the report)."""
    with open(args.from_json) as f:
        kind = json.load(f).get("kind")
    if kind == "scaling":
        ctx = load_scaling(args.from_json)
        os.makedirs(args.out, exist_ok=True)
        os.makedirs(args.data, exist_ok=True)
        return finish_scaling(ctx, args)
    ctx = load_results(args.from_json)
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.data, exist_ok=True)
    return finish(ctx, args, time.time())


def finish(ctx, args, start):
    write_plots(ctx, args.out, args.data)
    write_report(os.path.join(args.out, "benchmarks.md"), ctx)
    print_summary(ctx)

    # the harness itself must have worked, whatever the numbers say
    bad = [x for x in ratios(ctx) if not finite(x) or x < 0]
    missing = [p for p in ["benchmarks.md"] + list(ctx["png"].values())
               if not os.path.isfile(os.path.join(args.out, p))
               or os.path.getsize(os.path.join(args.out, p)) == 0]
    if missing or bad:
        log("harness broken: missing files %s, ratios that are not numbers %s" % (missing, bad))
        return 1
    log("\nwrote %s (%.1f min)" % (", ".join(os.path.join(args.out, p) for p in
                                            ["benchmarks.md"] + list(ctx["png"].values())),
                                  (time.time() - start) / 60.0))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        log("harness error: %s" % e)
        sys.exit(1)

