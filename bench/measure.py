#!/usr/bin/env python3
"""snowseq benchmarks, the measuring: what is compared, and how.

snowseq's generators are measured side by side, in one run, with what
PostgreSQL ships: nextval() with CACHE 1 and CACHE 100, bigserial and
identity columns, gen_random_uuid(), PostgreSQL 18's uuidv7() where the
server has it, and the usual PL/pgSQL recipes (Instagram-style IDs and
UUIDv7; bench/setup.sql).  Nothing else is installed.

Every measurement is repeated; the repetitions alternate between the
generators (A B C, then C B A, ...) so that drift of the machine is spread
over all of them, and every result is a median of one run.  The targets
(bench/targets.py) and the report (bench/report.py) only read the results.
Python standard library only; the work is done by psql (client-side
\\timing) and pgbench.
"""

import glob
import math
import os
import re
import shutil
import statistics
import subprocess
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))

# --------------------------------------------------------------------------
# sizes

FULL = {
    "reps": 5,                # call cost and WAL repetitions
    "call_n": 3000000,        # IDs per call-cost query
    "clients": "1 2 4 8",
    "seconds": 6,             # pgbench -T
    "client_reps": 5,
    "insert_rows": "1000000 5000000",
    "insert_reps": 3,
    "buyers": 100000,
    "wal_n": 1000000,
    "shmem_n": 10000000,      # IDs generated between the two shmem readings
}
SMOKE = {
    "reps": 2,
    "call_n": 20000,
    "clients": "1 2",
    "seconds": 1,
    "client_reps": 1,
    "insert_rows": "2000 10000",
    "insert_reps": 2,
    "buyers": 1000,
    "wal_n": 20000,
    "shmem_n": 100000,
}
ENV = {
    "reps": "BENCH_REPS",
    "call_n": "BENCH_CALL_N",
    "clients": "BENCH_CLIENTS",
    "seconds": "BENCH_SECONDS",
    "client_reps": "BENCH_CLIENT_REPS",
    "insert_rows": "BENCH_INSERT_ROWS",
    "insert_reps": "BENCH_INSERT_REPS",
    "buyers": "BENCH_BUYERS",
    "wal_n": "BENCH_WAL_N",
    "shmem_n": "BENCH_SHMEM_N",
}

NEXT_N_MAX = 1 << 22          # snowseq_next_n(n) takes at most 2^22 per call

# --------------------------------------------------------------------------
# what is measured

# call cost: (key, label, expression evaluated once per row).  Keys are
# constants, so key construction is not timed (repeat() is IMMUTABLE and is
# folded into a constant when the query is planned).
KEY8_TEXT = "buyer-42"
PUBLIC_ID_SOURCE = (4242 << 48) | 123456789   # a gene ID; bench/setup.sql encrypts it too
KEY36_TEXT = "0b7e6a4e-5d8c-4f5e-9a57-3c0d1f2e4b6a"
# the instants of snowseq_id_at() and snowseq_uuid_at(): one per ms from
# here on (after the default snowseq.epoch, and N ms before now)
PAST_INSTANT = "2025-06-01 00:00:00+00"
# the call-cost rows whose series is one of instants, and the loop they are
# measured over
INSTANT_KEYS = ("loop_ts", "snowseq_id_at", "snowseq_uuid_at")
CALL_GENERATORS = [
    ("loop", "(loop only: count(i))", None),
    ("clock_timestamp", "clock_timestamp() (floor)", "clock_timestamp()"),
    ("random", "random() (floor)", "random()"),
    ("snowseq_next", "snowseq_next()", "snowseq_next()"),
    ("snowseq_scatter", "snowseq_scatter(snowseq_next(), 2)", "snowseq_scatter(snowseq_next(), 2)"),
    ("snowseq_next_n_from", "snowseq_next_n(N), FROM clause", None),
    ("snowseq_next_n_select", "snowseq_next_n(N), SELECT list", None),
    ("gene_int8", "snowseq_gene_next(bigint)", "snowseq_gene_next(4242424242::bigint)"),
    ("gene_text8", "snowseq_gene_next(8-byte text)",
     "snowseq_gene_next('%s'::text)" % KEY8_TEXT),
    ("gene_text36", "snowseq_gene_next(36-byte uuid text)",
     "snowseq_gene_next('%s'::text)" % KEY36_TEXT),
    ("gene_text1k", "snowseq_gene_next(1 KB text)", "snowseq_gene_next(repeat('k', 1024))"),
    # public IDs: encrypt and decrypt one constant ID (the public ID is read
    # once per query by an InitPlan), so no generator cost is mixed in; and
    # a fresh gene ID encrypted, what an application does per order
    ("snowseq_encrypt", "snowseq_encrypt(constant ID)", "snowseq_encrypt(%d::bigint)" % PUBLIC_ID_SOURCE),
    ("snowseq_decrypt", "snowseq_decrypt(constant public ID)",
     "snowseq_decrypt((SELECT public_id FROM bench_public))"),
    ("snowseq_encrypt_gene", "snowseq_encrypt(snowseq_gene_next(bigint))",
     "snowseq_encrypt(snowseq_gene_next(4242424242::bigint))"),
    # public IDs as text (14 characters of base32 with a check character):
    # the same constant ID, and the code bench/setup.sql made of it
    ("snowseq_public_text", "snowseq_public_text(constant ID)",
     "snowseq_public_text(%d::bigint)" % PUBLIC_ID_SOURCE),
    ("snowseq_from_public_text", "snowseq_from_public_text(constant code)",
     "snowseq_from_public_text((SELECT code FROM bench_public))"),
    # IDs for past instants: one call per instant of a timestamp series
    # (the instants ascend, so every call is the cheap case: no step back in
    # time within a query); "loop over instants" is that series alone
    ("loop_ts", "(loop over instants only: count(t))", None),
    ("snowseq_id_at", "snowseq_id_at(ts), ts ascending", "snowseq_id_at(t)"),
    ("snowseq_uuid_at", "snowseq_uuid_at(ts), ts ascending", "snowseq_uuid_at(t)"),
    # UUID range bounds of a constant instant (STABLE: evaluated per row)
    ("snowseq_uuid_min", "snowseq_uuid_min(constant ts)",
     "snowseq_uuid_min('%s'::timestamptz)" % PAST_INSTANT),
    ("snowseq_uuid_max", "snowseq_uuid_max(constant ts)",
     "snowseq_uuid_max('%s'::timestamptz)" % PAST_INSTANT),
    # 128-bit gene IDs, beside snowseq_gene_next() of the same keys
    ("gene_uuid_int8", "snowseq_gene_uuid(bigint)", "snowseq_gene_uuid(4242424242::bigint)"),
    ("gene_uuid_text8", "snowseq_gene_uuid(8-byte text)", "snowseq_gene_uuid('%s'::text)" % KEY8_TEXT),
    # shard_of(uuid) is IMMUTABLE: its argument is read once per query by an
    # InitPlan (a constant argument would be folded when the query is planned)
    ("shard_of_uuid", "shard_of(uuid)", "shard_of((SELECT id FROM bench_gene_uuid))"),
    # the public form of 128-bit gene IDs: encrypt the constant one of
    # bench/setup.sql and decrypt its public form (both read once per query
    # by an InitPlan); and a fresh one encrypted, as per order
    ("snowseq_encrypt_uuid", "snowseq_encrypt_uuid(constant uuid)",
     "snowseq_encrypt_uuid((SELECT id FROM bench_gene_uuid))"),
    ("snowseq_decrypt_uuid", "snowseq_decrypt_uuid(constant public uuid)",
     "snowseq_decrypt_uuid((SELECT public_id FROM bench_gene_uuid))"),
    ("snowseq_encrypt_gene_uuid", "snowseq_encrypt_uuid(snowseq_gene_uuid(bigint))",
     "snowseq_encrypt_uuid(snowseq_gene_uuid(4242424242::bigint))"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')"),
    ("counter", "snowseq_counter_next(name)", "snowseq_counter_next('bench_counter')"),
    ("serial", "snowseq_serial('INV-YYYYMMDD-##########')", "snowseq_serial('bench_serial')"),
    ("serial_glue", "to_char() || lpad(nextval()) (same text)",
     "'INV-' || to_char(clock_timestamp(), 'YYYYMMDD') || '-' || lpad(nextval('bench_seq_cache1')::text, 10, '0')"),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()"),
    ("uuidv7", "UUIDv7 (PL/pgSQL)", "bench_uuidv7()"),
    ("instagram", "Instagram-style (PL/pgSQL)", "bench_instagram_id()"),
]

# many clients: (key, label, expression)
CLIENT_GENERATORS = [
    ("snowseq_next", "snowseq_next()", "snowseq_next()"),
    ("nextval", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')"),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()"),
]
CLIENT_SCRIPTS = [(1, "SELECT {e};\n"),
                  (1000, "SELECT count({e}) FROM generate_series(1, 1000);\n")]
# the 1-ID script mostly measures round trips: only these run it
CLIENT_ONE_ID = ("snowseq_next", "nextval", "gen_random_uuid")


def client_scripts(key):
    return [(p, t) for p, t in CLIENT_SCRIPTS if p != 1 or key in CLIENT_ONE_ID]

# inserts: (key, label, id column DDL, extra DDL, INSERT statement)
INS_PLAIN = "INSERT INTO bench_t (buyer, amount) SELECT buyer, n FROM bench_src LIMIT {n}"
INSERT_VARIANTS = [
    ("snowseq_next", "DEFAULT snowseq_next()",
     "id bigint PRIMARY KEY DEFAULT snowseq_next()", "", INS_PLAIN),
    ("bigserial", "bigserial", "id bigserial PRIMARY KEY", "", INS_PLAIN),
    ("identity", "identity", "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "", INS_PLAIN),
    ("nextval_c100", "DEFAULT nextval() CACHE 100",
     "id bigint PRIMARY KEY DEFAULT nextval('bench_seq_cache100')", "", INS_PLAIN),
    ("gen_random_uuid", "DEFAULT gen_random_uuid()",
     "id uuid PRIMARY KEY DEFAULT gen_random_uuid()", "", INS_PLAIN),
    ("uuidv7", "DEFAULT UUIDv7 (PL/pgSQL)", "id uuid PRIMARY KEY DEFAULT bench_uuidv7()", "",
     INS_PLAIN),
    ("instagram", "DEFAULT Instagram-style (PL/pgSQL)",
     "id bigint PRIMARY KEY DEFAULT bench_instagram_id()", "", INS_PLAIN),
    ("gene_trigger", "gene ID, trigger", "id bigint PRIMARY KEY",
     "CREATE TRIGGER bench_t_gene BEFORE INSERT ON bench_t FOR EACH ROW "
     "EXECUTE FUNCTION snowseq_fill_gene_id('id', 'buyer');", INS_PLAIN),
    ("gene_select", "gene ID, INSERT ... SELECT", "id bigint PRIMARY KEY", "",
     "INSERT INTO bench_t (id, buyer, amount) "
     "SELECT snowseq_gene_next(buyer), buyer, n FROM bench_src LIMIT {n}"),
]

# WAL with no insert: (key, label, expression)
WAL_GENERATORS = [
    ("snowseq_next", "snowseq_next()", "snowseq_next()"),
    ("gene_int8", "snowseq_gene_next(bigint)", "snowseq_gene_next(4242424242::bigint)"),
    ("counter", "snowseq_counter_next(name)", "snowseq_counter_next('bench_counter')"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')"),
]

# Generators that exist only on some servers: PostgreSQL 18's built-in
# uuidv7(), and snowseq's own UUIDv7 when this build has it.  (key, label,
# expression, SQL type, the function's signature.)  Each joins the call
# cost, inserts, clients (1,000 IDs per transaction) and WAL measurements and
# the correctness observations.
OPTIONAL_GENERATORS = [
    ("uuidv7_builtin", "uuidv7() (built-in)", "uuidv7()", "uuid", "pg_catalog.uuidv7()"),
    ("snowseq_uuid", "snowseq_uuid()", "snowseq_uuid()", "uuid", "snowseq_uuid()"),
]

# the generators whose behaviour the correctness observations record:
# (key, label, expression, SQL type)
OBSERVED_GENERATORS = [
    ("snowseq_next", "snowseq_next()", "snowseq_next()", "bigint"),
    ("gene_int8", "snowseq_gene_next(bigint), one key", "snowseq_gene_next(4242424242::bigint)", "bigint"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')", "bigint"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')", "bigint"),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()", "uuid"),
    ("uuidv7", "UUIDv7 (PL/pgSQL)", "bench_uuidv7()", "uuid"),
    ("instagram", "Instagram-style (PL/pgSQL)", "bench_instagram_id()", "bigint"),
]


def add_optional_generators():
    """Add the optional generators this server has to the measurement lists.
    Returns (available keys, [(label, why skipped)])."""
    skipped = []
    have = []
    for key, label, expr, typ, name in OPTIONAL_GENERATORS:
        if query_value("SELECT to_regprocedure('%s') IS NOT NULL" % name) != "t":
            skipped.append((label, "no %s on this server" % name))
            continue
        have.append(key)
        CALL_GENERATORS.append((key, label, expr))
        CLIENT_GENERATORS.append((key, label, expr))
        INSERT_VARIANTS.append((key, "DEFAULT " + label,
                                "id %s PRIMARY KEY DEFAULT %s" % (typ, expr), "", INS_PLAIN))
        WAL_GENERATORS.append((key, label, expr))
        OBSERVED_GENERATORS.append((key, label, expr, typ))
    return have, skipped


SETTINGS = [
    "shared_buffers", "work_mem", "maintenance_work_mem", "wal_buffers", "fsync",
    "synchronous_commit", "full_page_writes", "wal_level", "wal_compression",
    "max_wal_size", "checkpoint_timeout", "autovacuum", "jit", "max_connections",
    "huge_pages", "data_checksums", "server_encoding", "lc_collate",
    "shared_preload_libraries", "snowseq.node_id", "snowseq.backfill_node_id", "snowseq.time_bits",
    "snowseq.node_bits", "snowseq.seq_bits", "snowseq.reserve_buffer_ms",
]


# --------------------------------------------------------------------------
# running things

class HarnessError(Exception):
    pass


def log(msg=""):
    print(msg, flush=True)


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        raise HarnessError("%s failed (%d):\n%s%s" % (" ".join(cmd[:3]), p.returncode,
                                                      p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def psql(script):
    """Run a psql script in one session; returns its unaligned output."""
    return run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-f", "-"], script)


TIME_RE = re.compile(r"^Time: ([0-9.]+) ms", re.M)


def timed(setup, stmt, after=""):
    """Time stmt with psql \\timing (client side, one round trip) in a fresh
    session after setup.  Returns (ms, {key: value}) where the key/value
    pairs are the two-column rows of the setup and after queries."""
    out = psql("%s\n\\timing on\n%s;\n\\timing off\n%s\n" % (setup, stmt, after))
    times = TIME_RE.findall(out)
    if len(times) != 1:
        raise HarnessError("expected one timing, got %r from:\n%s" % (times, out[-2000:]))
    kv = {}
    for line in out.splitlines():
        if line.count("|") == 1:
            k, v = line.split("|")
            kv[k] = v
    return float(times[0]), kv


def query_rows(sql):
    return [line.split("|") for line in psql(sql + ";\n").splitlines() if line]


def query_value(sql):
    rows = query_rows(sql)
    return rows[0][0]


def alternate(items, rep):
    """A B C on even repetitions, C B A on odd ones."""
    return list(items) if rep % 2 == 0 else list(reversed(items))


def median(xs):
    return statistics.median(xs)


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


# --------------------------------------------------------------------------
# 1. call cost

def call_query(key, expr, n):
    """The query that issues n IDs and the number it really issues."""
    if key == "loop":
        return "SELECT count(i) FROM generate_series(1, %d) i" % n, n
    if key in INSTANT_KEYS:
        series = ("generate_series('%s'::timestamptz, '%s'::timestamptz + interval '%d ms', "
                  "interval '1 ms') t" % (PAST_INSTANT, PAST_INSTANT, n - 1))
        return "SELECT count(%s) FROM %s" % (expr or "t", series), n
    if key.startswith("snowseq_next_n"):
        calls = max(1, -(-n // NEXT_N_MAX))
        per = n // calls
        if key == "snowseq_next_n_from":
            if calls == 1:
                return "SELECT count(*) FROM snowseq_next_n(%d)" % per, per
            return ("SELECT count(*) FROM generate_series(1, %d) c, LATERAL snowseq_next_n(%d)"
                    % (calls, per), per * calls)
        if calls == 1:
            return "SELECT count(x) FROM (SELECT snowseq_next_n(%d) AS x) s" % per, per
        return ("SELECT count(x) FROM (SELECT snowseq_next_n(%d) AS x FROM generate_series(1, %d)) s"
                % (per, calls), per * calls)
    return "SELECT count(%s) FROM generate_series(1, %d)" % (expr, n), n


def call_generators():
    """The call-cost generators this server has (add_optional_generators()
    has appended the optional ones it found)."""
    return list(CALL_GENERATORS)


def bench_calls(cfg):
    n = cfg["call_n"]
    generators = call_generators()
    samples = {k: [] for k, _, _ in generators}
    issued = {}
    log("== 1. call cost in one backend: %d IDs per query, %d repetitions" % (n, cfg["reps"]))
    for rep in range(cfg["reps"]):
        line = []
        for key, label, expr in alternate(generators, rep):
            q, real_n = call_query(key, expr, n)
            warm, _ = call_query(key, expr, 1000)
            ms, _ = timed(warm + ";", q)
            samples[key].append(ms * 1e6 / real_n)
            issued[key] = real_n
            line.append("%s %.0f" % (key, ms * 1e6 / real_n))
        log("  rep %d (ns/ID): %s" % (rep + 1, ", ".join(line)))
    res = []
    floor = median(samples["clock_timestamp"])
    for key, label, expr in generators:
        ns = median(samples[key])
        # the cost over the loop the query runs: the series of instants for
        # the functions of an instant, the integer series for the others
        base = "loop_ts" if key in INSTANT_KEYS else "loop"
        res.append({
            "key": key, "label": label,
            "query": call_query(key, expr, n)[0],
            "ns": ns, "min": min(samples[key]), "max": max(samples[key]),
            "samples": samples[key], "ids": issued[key],
            "x_floor": ns / floor, "over_loop": ns - median(samples[base]), "loop": base,
        })
    return res


# --------------------------------------------------------------------------
# 2. many clients

# generators that take the cluster's logical clock: at most 2^seq_bits IDs
# per time unit in the long run (4,096,000 IDs/s with the default layout),
# more only by borrowing time ahead, up to snowseq.max_lead_ms
CLOCK_GENERATORS = ("snowseq_next", "snowseq_uuid")


def clock_caught_up(limit_s=30.0):
    """Wait until the logical clock no longer leads the wall clock, so that
    every many-client run of a clock generator starts alike (with the whole
    of snowseq.max_lead_ms to borrow) whatever ran before it."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if query_value("SELECT drift <= interval '0' FROM snowseq_status") == "t":
            return
        time.sleep(0.2)
    raise HarnessError("the snowseq clock still leads the wall clock after %.0f s" % limit_s)


def bench_clients(cfg, tmp):
    clients = [int(c) for c in cfg["clients"].split()]
    nproc = os.cpu_count() or 1
    scripts = {}
    for key, label, expr in CLIENT_GENERATORS:
        for per_tx, tmpl in client_scripts(key):
            path = os.path.join(tmp, "pgbench_%s_%d.sql" % (key, per_tx))
            with open(path, "w") as f:
                f.write(tmpl.format(e=expr))
            scripts[(key, per_tx)] = path
    runs = [(key, per_tx, c) for key, _, _ in CLIENT_GENERATORS
            for per_tx, _ in client_scripts(key) for c in clients]
    samples = {r: [] for r in runs}
    log("== 2. many clients: pgbench -n -M prepared -T %d, clients %s, %d repetitions"
        % (cfg["seconds"], cfg["clients"], cfg["client_reps"]))
    for rep in range(cfg["client_reps"]):
        for key, per_tx, c in alternate(runs, rep):
            if key in CLOCK_GENERATORS:
                clock_caught_up()
            out = run(["pgbench", "-n", "-M", "prepared", "-T", str(cfg["seconds"]),
                       "-c", str(c), "-j", str(min(c, nproc)), "-f", scripts[(key, per_tx)]])
            m = re.search(r"^tps = ([0-9.]+) \(without initial connection time\)", out, re.M)
            if not m:
                raise HarnessError("no tps in pgbench output:\n" + out[-2000:])
            samples[(key, per_tx, c)].append(float(m.group(1)) * per_tx)
        log("  rep %d: %s" % (rep + 1, ", ".join(
            "%s/%d/%dc %.0f" % (k, p, c, samples[(k, p, c)][-1]) for k, p, c in runs)))
    res = []
    for key, label, expr in CLIENT_GENERATORS:
        for per_tx, tmpl in client_scripts(key):
            ids = {c: median(samples[(key, per_tx, c)]) for c in clients}
            base = ids[clients[0]]
            res.append({
                "key": key, "label": label, "per_tx": per_tx,
                "script": tmpl.format(e=expr).strip(),
                "ids_per_s": ids, "scaling": {c: ids[c] / base for c in clients},
                "samples": {c: samples[(key, per_tx, c)] for c in clients},
            })
    return clients, res


# --------------------------------------------------------------------------
# client scaling (bash bench/clients.sh): every generator at 1 .. 16 clients

SCALING_FULL = {
    "clients": "1 2 4 8 16",
    "seconds": 4,             # pgbench -T of each timed run
    "transactions": 0,        # pgbench -t instead of -T when above 0
    "reps": 3,
    "ids": 10000,             # IDs per transaction
    "perf_seconds": 2,        # pgbench -T of each run counted by perf stat
}
SCALING_SMOKE = {"clients": "1 2", "seconds": 1, "transactions": 5, "reps": 1, "ids": 1000, "perf_seconds": 1}
SCALING_ENV = {
    "clients": "BENCH_SCALING_CLIENTS",
    "seconds": "BENCH_SCALING_SECONDS",
    "transactions": "BENCH_SCALING_TRANSACTIONS",
    "reps": "BENCH_SCALING_REPS",
    "ids": "BENCH_SCALING_IDS",
    "perf_seconds": "BENCH_SCALING_PERF_SECONDS",
}

# (key, label, expression of i, the row's number in the series, and of
# :client_id; the cluster it runs on; the function it needs, None if it is
# always there; whether the scaling target applies).  "main" is a cluster
# with the default layout; "wide" one whose layout holds about a billion
# IDs/s (bench/clients.sh), so that the clock's word is measured, not the
# default layout's 4,096,000 IDs/s.
SCALING_GENERATORS = [
    ("loop", "(loop only: count(i))", "i", "main", None, False),
    ("snowseq_next", "snowseq_next()", "snowseq_next()", "main", None, True),
    ("snowseq_next_wide", "snowseq_next(), wide layout", "snowseq_next()", "wide", None, True),
    ("gene_keys", "snowseq_gene_next(bigint), a key per ID",
     "snowseq_gene_next(:client_id::bigint * 1000000000 + i)", "main", None, True),
    ("gene_one", "snowseq_gene_next(bigint), one key", "snowseq_gene_next(4242424242::bigint)", "main", None, True),
    ("counter", "snowseq_counter_next(name)", "snowseq_counter_next('bench_counter')", "main", None, True),
    ("snowseq_uuid", "snowseq_uuid()", "snowseq_uuid()", "main", "snowseq_uuid()", True),
    ("snowseq_uuid_wide", "snowseq_uuid(), wide layout", "snowseq_uuid()", "wide", "snowseq_uuid()", True),
    ("serial", "snowseq_serial(name)", "snowseq_serial('bench_serial')", "main", None, True),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')", "main", None, False),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')", "main", None, False),
    ("gen_random_uuid", "gen_random_uuid()", "gen_random_uuid()", "main", None, False),
    ("uuidv7_builtin", "uuidv7() (built-in)", "uuidv7()", "main", "pg_catalog.uuidv7()", False),
]
SCALING_SCRIPT = "SELECT count({e}) FROM generate_series(1, {n}) i;\n"
# one round trip with (almost) nothing in it, at one client
ROUND_TRIP_SCRIPT = "SELECT 1;\n"

# what perf stat is asked to count in the server's backends, and the unit
# of a value per ID
PERF_EVENTS = [("task-clock", "ns"), ("cycles", ""), ("instructions", ""), ("cache-misses", ""),
               ("L1-dcache-load-misses", "")]
# a pause after pgbench, so that its backends have exited (their counts
# reach the postmaster's inherited counters when they exit)
PERF_SETTLE_S = 0.5


def perf_event_name(name):
    """An event name as perf stat -x prints it, without a PMU (cpu_core/cycles/)
    or a modifier (cycles:u)."""
    name = name.strip()
    if name.endswith("/") and "/" in name[:-1]:
        name = name[:-1].rsplit("/", 1)[1]
    return name.split(":", 1)[0]


def perf_parse(text):
    """perf stat -x, output: {event: value} of the events it counted, and
    {event: why not} of the others (<not supported>, <not counted>)."""
    counted, missing = {}, {}
    names = {e for e, _ in PERF_EVENTS}
    for line in text.splitlines():
        f = line.split(",")
        if len(f) < 3 or perf_event_name(f[2]) not in names:
            continue
        ev = perf_event_name(f[2])
        try:
            counted[ev] = counted.get(ev, 0.0) + float(f[0])
        except ValueError:
            if ev not in counted:
                missing[ev] = f[0].strip().strip("<>") or "no value"
    for ev in counted:
        missing.pop(ev, None)
    return counted, missing


def perf_available():
    """The PERF_EVENTS perf stat counts on this machine; {event: why not} of
    the others (<not supported> where a virtual machine does not expose the
    CPU's counters); and, when it counts none, why."""
    names = [e for e, _ in PERF_EVENTS]
    if not shutil.which("perf"):
        return [], {}, "perf is not installed (Debian: linux-perf)"
    p = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(names), "true"], capture_output=True, text=True)
    counted, missing = perf_parse(p.stderr)
    if not counted:
        first = next((l for l in p.stderr.splitlines() if l.strip()), "no output").strip()
        return [], missing, "perf stat counts none of %s here (%s)" % (
            ", ".join(names), "; ".join("%s: %s" % kv for kv in missing.items()) or first)
    return [e for e in names if e in counted], missing, ""


def postmaster_pid(data):
    with open(os.path.join(data, "postmaster.pid")) as f:
        return int(f.readline())


def cpus():
    """The logical CPUs this process may run on, as nproc counts them."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_topology():
    """Logical CPUs (nproc), the CPU model, threads per core and sockets."""
    m = machine_info()
    m["nproc"] = cpus()
    sockets, cores, threads = set(), set(), 0
    try:
        with open("/proc/cpuinfo") as f:
            phys = "0"
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "processor":
                    threads += 1
                elif k == "physical id":
                    phys = v
                    sockets.add(v)
                elif k == "core id":
                    cores.add((phys, v))
    except OSError:
        pass
    m["sockets"] = max(1, len(sockets))
    m["threads_per_core"] = (threads // len(cores)) if cores and threads % len(cores) == 0 else None
    return m


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


LAYOUT_SETTINGS = ["snowseq.time_bits", "snowseq.node_bits", "snowseq.seq_bits", "snowseq.time_unit_ms",
                   "snowseq.max_lead_ms"]


def cluster_layout(port):
    """The snowflake layout of the server at port: {setting: integer}."""
    ok, out, err = psql_at(port, "SELECT name, setting FROM pg_settings WHERE name IN (%s);"
                           % ", ".join(sql_literal(s) for s in LAYOUT_SETTINGS))
    if not ok:
        raise HarnessError("the layout of the server at port %d: %s" % (port, err))
    got = dict(line.split("|") for line in out.splitlines() if line)
    return {k.split(".", 1)[1]: int(got[k]) for k in LAYOUT_SETTINGS}


def layout_rate(layout):
    """IDs per second a clock of this layout issues in the long run."""
    return (1 << layout["seq_bits"]) * 1000.0 / layout["time_unit_ms"]


def scaling_generators(ports):
    """The rows of SCALING_GENERATORS whose function the server has, and
    (label, why not) for the others."""
    have, skipped = [], []
    for g in SCALING_GENERATORS:
        key, label, expr, cluster, needs, target = g
        if needs:
            ok, out, err = psql_at(ports[cluster], "SELECT to_regprocedure('%s') IS NOT NULL;" % needs)
            if not ok or out.strip() != "t":
                skipped.append((label, "no %s on this server" % needs))
                continue
        have.append(g)
    return have, skipped


def scaling_pgbench(cfg, port, script, c, seconds, nproc):
    cmd = ["pgbench", "-n", "-M", "prepared", "-p", str(port), "-c", str(c), "-j", str(min(c, nproc)),
           "-f", script]
    return cmd + (["-t", str(cfg["transactions"])] if cfg["transactions"] > 0 else ["-T", str(seconds)])


def pgbench_result(out):
    """(transactions per second without connection time, transactions
    processed) of a pgbench run."""
    m = re.search(r"^tps = ([0-9.]+) \(without initial connection time\)", out, re.M)
    n = re.search(r"^number of transactions actually processed: ([0-9]+)", out, re.M)
    if not m or not n:
        raise HarnessError("no tps in pgbench output:\n" + out[-2000:])
    return float(m.group(1)), int(n.group(1))


def perf_counted_run(cmd, events, pid, tmp):
    """Run the pgbench command cmd with perf stat counting events in every
    process the postmaster pid forks meanwhile (its backends).  Returns
    (pgbench output, {event: count})."""
    out_file = os.path.join(tmp, "perf.csv")
    wrapped = ["perf", "stat", "-x,", "-o", out_file, "--inherit", "-e", ",".join(events), "-p", str(pid),
               "--", "sh", "-c", '"$@"; rc=$?; sleep %s; exit $rc' % PERF_SETTLE_S, "sh"] + cmd
    out = run(wrapped)
    with open(out_file) as f:
        counted, _ = perf_parse(f.read())
    return out, counted


def bench_scaling(cfg, clusters, tmp):
    """Every generator at each client count of cfg: IDs/s (medians of
    alternating repetitions), the ratio to the first count, and perf
    counters per ID in a separate pass.  clusters: {"main": {"port",
    "data"}, "wide": {...}}."""
    clients = [int(c) for c in cfg["clients"].split()]
    nproc = cpus()
    ports = {k: v["port"] for k, v in clusters.items()}
    gens, skipped = scaling_generators(ports)
    n = cfg["ids"]
    scripts = {}
    for key, label, expr, cluster, needs, target in gens:
        scripts[key] = os.path.join(tmp, "scaling_%s.sql" % key)
        with open(scripts[key], "w") as f:
            f.write(SCALING_SCRIPT.format(e=expr, n=n))
    rt_script = os.path.join(tmp, "scaling_round_trip.sql")
    with open(rt_script, "w") as f:
        f.write(ROUND_TRIP_SCRIPT)
    # client-count major: the runs of one generator are far apart, so the
    # clock of the default layout catches up in between
    runs = [(c, g) for c in clients for g in gens]
    samples = {(g[0], c): [] for c, g in runs}
    rt = []
    load = [("start", loadavg())]
    how = ("-t %d" % cfg["transactions"]) if cfg["transactions"] > 0 else ("-T %d" % cfg["seconds"])
    log("== client scaling: pgbench -n -M prepared %s, %s IDs per transaction, clients %s, %d repetitions; "
        "%d cores (nproc)" % (how, fmt_int(n), cfg["clients"], cfg["reps"], nproc))
    for label, why in skipped:
        log("  skipped: %s (%s)" % (label, why))

    def prepare(key, cluster):
        if cluster == "main" and key in CLOCK_GENERATORS:
            clock_caught_up()

    for rep in range(cfg["reps"]):
        out = run(scaling_pgbench(cfg, ports["main"], rt_script, 1, cfg["seconds"], nproc))
        rt.append(1e6 / pgbench_result(out)[0])
        for c, (key, label, expr, cluster, needs, target) in alternate(runs, rep):
            prepare(key, cluster)
            out = run(scaling_pgbench(cfg, ports[cluster], scripts[key], c, cfg["seconds"], nproc))
            samples[(key, c)].append(pgbench_result(out)[0] * n)
        load.append(("after repetition %d" % (rep + 1), loadavg()))
        log("  rep %d (IDs/s): %s" % (rep + 1, "; ".join(
            "%s %s" % (g[0], " ".join(fmt_int(samples[(g[0], c)][-1]) for c in clients)) for g in gens)))

    events, perf_missing, perf_why = perf_available()
    perf = {}
    if events:
        log("  perf stat: %s%s" % (", ".join(events), "; not counted here: " + ", ".join(
            "%s (%s)" % kv for kv in perf_missing.items()) if perf_missing else ""))
        for c, (key, label, expr, cluster, needs, target) in runs:
            prepare(key, cluster)
            try:
                out, counted = perf_counted_run(
                    scaling_pgbench(cfg, ports[cluster], scripts[key], c, cfg["perf_seconds"], nproc),
                    events, postmaster_pid(clusters[cluster]["data"]), tmp)
            except HarnessError as e:
                # perf may count a process of its own but not attach to the
                # server's (perf_event_paranoid): the timed figures stand
                events, perf = [], {}
                perf_why = "perf stat -p failed: %s" % str(e).splitlines()[-1]
                log("  " + perf_why)
                break
            ids = pgbench_result(out)[1] * n
            perf[(key, c)] = {ev: v * (1e6 if ev == "task-clock" else 1.0) / ids for ev, v in counted.items()}
        load.append(("after perf stat", loadavg()))
    else:
        log("  perf stat: %s" % perf_why)

    rows = []
    for key, label, expr, cluster, needs, target in gens:
        ids = {c: median(samples[(key, c)]) for c in clients}
        rows.append({
            "key": key, "label": label, "cluster": cluster, "target": target,
            "script": SCALING_SCRIPT.format(e=expr, n=n).strip(),
            "ids_per_s": ids, "scaling": {c: ids[c] / ids[clients[0]] for c in clients},
            "samples": {c: samples[(key, c)] for c in clients},
            "perf": {c: perf[(key, c)] for c in clients if (key, c) in perf},
        })
    layouts = {name: cluster_layout(port) for name, port in ports.items()}
    return {"clients": clients, "rows": rows, "skipped": skipped, "layouts": layouts, "round_trip_us": median(rt),
            "round_trip_samples": rt, "perf_events": events, "perf_missing": perf_missing, "perf_why": perf_why,
            "load": load}


# --------------------------------------------------------------------------
# 3. inserts

def bench_inserts(cfg):
    sizes = [int(s) for s in cfg["insert_rows"].split()]
    reps = cfg["insert_reps"]
    log("== 3. inserts: %s rows, %d buyers, %d repetitions"
        % (", ".join(str(s) for s in sizes), cfg["buyers"], reps))
    # the payload, precomputed once: the same rows for every variant
    psql("SELECT setseed(0.42);\n"
         "DROP TABLE IF EXISTS bench_src;\n"
         "CREATE TABLE bench_src AS SELECT n::integer AS n, "
         "(1 + floor(random() * %d))::bigint AS buyer FROM generate_series(1, %d) n;\n"
         "VACUUM (FREEZE, ANALYZE) bench_src;\n" % (cfg["buyers"], max(sizes)))
    res = []
    for size in sizes:
        samples = {v[0]: [] for v in INSERT_VARIANTS}
        for rep in range(reps):
            for key, label, idcol, extra, ins in alternate(INSERT_VARIANTS, rep):
                setup = ("DROP TABLE IF EXISTS bench_t;\n"
                         "CREATE TABLE bench_t (%s, buyer bigint NOT NULL, amount integer NOT NULL);\n"
                         "%s\nCHECKPOINT;\n"
                         "SELECT pg_current_wal_lsn() AS lsn0 \\gset\n" % (idcol, extra))
                after = ("SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');\n"
                         "SELECT 'rows', count(*) FROM bench_t;\n"
                         "SELECT 'table', pg_relation_size('bench_t');\n"
                         "SELECT 'index', pg_relation_size(conindid) FROM pg_constraint "
                         "WHERE conrelid = 'bench_t'::regclass AND contype = 'p';\n"
                         "DROP TABLE bench_t;\n")
                ms, kv = timed(setup, ins.format(n=size), after)
                if int(kv["rows"]) != size:
                    raise HarnessError("%s: %s rows inserted, expected %d" % (key, kv["rows"], size))
                samples[key].append({"ms": ms, "wal": float(kv["wal"]),
                                     "table": int(kv["table"]), "index": int(kv["index"])})
            log("  %d rows, rep %d (rows/s): %s" % (size, rep + 1, ", ".join(
                "%s %.0f" % (k, size * 1000.0 / samples[k][-1]["ms"]) for k, *_ in INSERT_VARIANTS)))
        rows = []
        for key, label, idcol, extra, ins in INSERT_VARIANTS:
            s = samples[key]
            ms = median([x["ms"] for x in s])
            rows.append({
                "key": key, "label": label, "ddl": idcol, "trigger": extra,
                "insert": ins.format(n=size),
                "rows_per_s": size * 1000.0 / ms, "seconds": ms / 1000.0,
                "rows_per_s_samples": [size * 1000.0 / x["ms"] for x in s],
                "table_bytes": median([x["table"] for x in s]),
                "index_bytes": median([x["index"] for x in s]),
                "wal_bytes": median([x["wal"] for x in s]),
            })
        base = next(r for r in rows if r["key"] == "bigserial")
        uuid = next(r for r in rows if r["key"] == "gen_random_uuid")
        for r in rows:
            r["x_bigserial"] = r["rows_per_s"] / base["rows_per_s"]
            r["x_uuid"] = r["rows_per_s"] / uuid["rows_per_s"]
            r["index_x_bigserial"] = r["index_bytes"] / base["index_bytes"]
            r["wal_per_row"] = r["wal_bytes"] / size
        res.append({"rows": size, "variants": rows})
    psql("DROP TABLE bench_src;\n")
    return res


# --------------------------------------------------------------------------
# 4. WAL per 1M IDs, no insert

def bench_wal(cfg):
    n = cfg["wal_n"]
    samples = {k: [] for k, _, _ in WAL_GENERATORS}
    adv = {k: [] for k, _, _ in WAL_GENERATORS}
    log("== 4. WAL per 1M IDs with no insert: %d IDs per query, %d repetitions" % (n, cfg["reps"]))
    for rep in range(cfg["reps"]):
        for key, label, expr in alternate(WAL_GENERATORS, rep):
            setup = ("SELECT count(%s) FROM generate_series(1, 1000);\n"
                     "SELECT pg_sleep(0.2);\n"
                     "SELECT pg_current_wal_lsn() AS lsn0 \\gset\n"
                     "SELECT sum(advances) AS adv0 FROM snowseq_reservations \\gset\n" % expr)
            # the reservation worker writes asynchronously: give it time to
            # finish before the end of the WAL is read
            after = ("SELECT pg_sleep(0.2);\n"
                     "SELECT 'wal', pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');\n"
                     "SELECT 'adv', sum(advances) - :adv0 FROM snowseq_reservations;\n")
            ms, kv = timed(setup, "SELECT count(%s) FROM generate_series(1, %d)" % (expr, n), after)
            samples[key].append(float(kv["wal"]) * 1e6 / n)
            adv[key].append(int(kv["adv"]))
        log("  rep %d (bytes per 1M IDs): %s" % (rep + 1, ", ".join(
            "%s %.0f" % (k, samples[k][-1]) for k, _, _ in WAL_GENERATORS)))
    res = []
    for key, label, expr in WAL_GENERATORS:
        res.append({"key": key, "label": label, "expr": expr,
                    "bytes_per_1m": median(samples[key]), "samples": samples[key],
                    "advances": median(adv[key])})
    base = next(r for r in res if r["key"] == "nextval_c1")
    for r in res:
        r["x_nextval"] = r["bytes_per_1m"] / base["bytes_per_1m"]
    return res


# --------------------------------------------------------------------------
# 5. shared memory

SHMEM_SQL = ("SELECT s.shmem_bytes, s.ids_issued, "
             "(SELECT sum(size) FROM pg_shmem_allocations WHERE name = 'snowseq' OR name LIKE 'snowseq %') "
             "FROM snowseq_status s")


def shmem_reading():
    b, ids, alloc = query_rows(SHMEM_SQL)[0]
    return {"shmem_bytes": int(b), "ids_issued": int(ids), "allocation": int(alloc)}


def bench_shmem_burst(cfg):
    n = cfg["shmem_n"]
    per = min(n, NEXT_N_MAX)
    calls = max(1, n // per)
    log("== 5. shared memory: %d more IDs (snowseq_next_n, snowseq_next, snowseq_gene_next)"
        % (calls * per + 2 * cfg["wal_n"]))
    psql("SELECT count(*) FROM generate_series(1, %d) c, LATERAL snowseq_next_n(%d);\n"
         "SELECT count(snowseq_next()) FROM generate_series(1, %d);\n"
         "SELECT count(snowseq_gene_next(i)) FROM generate_series(1, %d) i;\n"
         % (calls, per, cfg["wal_n"], cfg["wal_n"]))


# --------------------------------------------------------------------------
# 0. correctness observations: what a user sees, measured on this server
#    (and on a standby and a second cluster under libfaketime)

OBS_SIZES = {"full": {"series": 2000, "interleaved": 1000, "clock": 200},
             "smoke": {"series": 200, "interleaved": 100, "clock": 20}}

INTERLEAVED_FN = r"""
CREATE OR REPLACE FUNCTION pg_temp.bench_interleaved(expr text, typ text, n integer, conn text,
	OUT out_of_order integer, OUT repeated integer)
LANGUAGE plpgsql AS $$
DECLARE
	cur text;
	prev text;
	back boolean;
	seen text[] := '{}';
BEGIN
	PERFORM dblink_connect('bench_a', conn);
	PERFORM dblink_connect('bench_b', conn);
	out_of_order := 0;
	FOR i IN 1 .. n LOOP
		SELECT t.v INTO cur FROM dblink(CASE WHEN i % 2 = 1 THEN 'bench_a' ELSE 'bench_b' END,
			'SELECT (' || expr || ')::text') AS t(v text);
		IF prev IS NOT NULL THEN
			EXECUTE format('SELECT $1::%s <= $2::%s', typ, typ) INTO back USING cur, prev;
			IF back THEN out_of_order := out_of_order + 1; END IF;
		END IF;
		seen := seen || cur;
		prev := cur;
	END LOOP;
	SELECT count(*) - count(DISTINCT v) INTO repeated FROM unnest(seen) v;
	PERFORM dblink_disconnect('bench_a');
	PERFORM dblink_disconnect('bench_b');
END
$$;
"""


def as_server(cmd, env=()):
    """A command run as the server's user (PostgreSQL refuses root), from
    the root directory when that user is another one (it may not be able to
    enter ours: PostgreSQL's programs would complain); every path given is
    absolute."""
    pre = ["env", "PATH=" + os.environ["PATH"]] + list(env)
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", "env", "-C", "/"] + pre + cmd
    return pre + cmd


def psql_at(port, script, db="postgres"):
    """A psql script on the server at port; returns (ok, output, first error).
    The error is an observation of what a generator does (a standby or a
    read-only transaction refusing it), so the console and the report say
    "refused: ...", not the server's "ERROR: ...", which reads as a broken
    run."""
    p = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-p", str(port),
                        "-d", db, "-f", "-"], input=script, capture_output=True, text=True)
    err = ""
    for line in p.stderr.splitlines():
        m = re.search(r"(ERROR|FATAL):\s+(.*)", line)
        if m:
            err = "%s: %s" % ("refused" if m.group(1) == "ERROR" else m.group(1), m.group(2))
            break
    return p.returncode == 0, p.stdout, err


def short_error(err, n=70):
    return err if len(err) <= n else err[:n - 1] + "…"


def ordered(values, typ):
    """Values as received, comparable in their SQL type's order (uuid text
    is fixed-width lower-case hex, so its string order is the uuid order)."""
    return [int(v) for v in values] if typ == "bigint" else list(values)


def order_cell(out_of_order, repeated, steps):
    if out_of_order == 0 and repeated == 0:
        return "yes"
    cell = "no: %s of %s steps go back" % (fmt_int(out_of_order), fmt_int(steps))
    if repeated:
        cell += ", %s repeated" % fmt_int(repeated)
    return cell


def clock_cell(before, phase, typ):
    """What the IDs taken after the clock stepped back did, against those
    taken before it."""
    if phase.get("error"):
        return short_error(phase["error"])
    after = ordered(phase["ids"], typ)
    prev = ordered(before, typ)
    if not after:
        return "no IDs"
    cells = []
    if phase["seconds"] > 2:
        cells.append("wait %.1f s" % phase["seconds"])
    repeated = len(set(after) & set(prev))
    if min(after) <= max(prev):
        cells.append("go back" + (", %s repeated" % fmt_int(repeated) if repeated else ""))
    else:
        cells.append("increase")
    return "; ".join(cells)


def faketime_library():
    for pattern in ("/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def observe(mode, tmp):
    """The correctness observations table: for every generator, measured
    here.  Returns {"rows": [...], "notes": [...]}."""
    sizes = OBS_SIZES[mode]
    gens = OBSERVED_GENERATORS
    host, port = os.environ["PGHOST"], int(os.environ["PGPORT"])
    res = {key: {"label": label} for key, label, _, _ in gens}
    notes = []
    log("== 0. correctness observations (%d generators)" % len(gens))

    # within one session, and two sessions taking turns (dblink)
    for key, label, expr, typ in gens:
        n = sizes["series"]
        row = query_rows("SELECT count(*) FILTER (WHERE x <= p), count(p), count(*) - count(DISTINCT x) FROM "
                         "(SELECT x, lag(x) OVER (ORDER BY i) p FROM "
                         "(SELECT i, %s AS x FROM generate_series(1, %d) i) s) t" % (expr, n))[0]
        res[key]["session"] = order_cell(int(row[0]), int(row[2]), int(row[1]))
    ok, _, err = psql_at(port, "CREATE EXTENSION IF NOT EXISTS dblink;")
    if ok:
        conn = "host=%s port=%d dbname=%s user=%s" % (host, port, os.environ["PGDATABASE"],
                                                     os.environ["PGUSER"])
        for key, label, expr, typ in gens:
            n = sizes["interleaved"]
            ok, out, err = psql_at(port, INTERLEAVED_FN + "SELECT out_of_order || '|' || repeated FROM "
                                   "pg_temp.bench_interleaved(%s, '%s', %d, %s);"
                                   % (sql_literal(expr), typ, n, sql_literal(conn)))
            if ok:
                back, rep = [int(x) for x in out.strip().split("|")]
                res[key]["sessions"] = order_cell(back, rep, n - 1)
            else:
                res[key]["sessions"] = short_error(err)
    else:
        notes.append("Two sessions: not measured, dblink is not available (%s)." % err)

    # a read-only transaction
    for key, label, expr, typ in gens:
        ok, _, err = psql_at(port, "BEGIN READ ONLY;\nSELECT %s;\nCOMMIT;" % expr)
        res[key]["read_only"] = "works" if ok else short_error(err)

    # a hot standby of this server
    standby = os.path.join(tmp, "standby")
    sport = port + 1
    try:
        run(as_server(["pg_basebackup", "-D", standby, "-X", "stream", "-R", "-c", "fast",
                       "-h", host, "-p", str(port)]))
        with open(os.path.join(standby, "postgresql.auto.conf"), "a") as f:
            f.write("port = %d\n" % sport)
        run(as_server(["pg_ctl", "-D", standby, "-l", standby + ".log", "-w", "-t", "60", "start"]))
        try:
            for key, label, expr, typ in gens:
                ok, _, err = psql_at(sport, "SELECT %s;" % expr)
                res[key]["standby"] = "works" if ok else short_error(err)
        finally:
            run(as_server(["pg_ctl", "-D", standby, "-m", "fast", "-w", "stop"]))
    except HarnessError as e:
        notes.append("Hot standby: not measured, the standby did not start (%s)." % str(e).splitlines()[0])
    shutil.rmtree(standby, ignore_errors=True)

    # the clock stepped back 10 s: a second cluster under libfaketime
    lib = faketime_library()
    if lib:
        clock_step(gens, res, sizes["clock"], tmp, host, port + 2, lib, notes)
    else:
        notes.append("Clock step: not measured, libfaketime is not installed (Debian package faketime).")

    rows = []
    for key, label, expr, typ in gens:
        r = res[key]
        rows.append({"key": key, "label": label, "expr": expr,
                     "session": r.get("session", "—"), "sessions": r.get("sessions", "—"),
                     "read_only": r.get("read_only", "—"), "standby": r.get("standby", "—"),
                     "clock_same": r.get("clock_same", "—"), "clock_new": r.get("clock_new", "—"),
                     "clock_restart": r.get("clock_restart", "—")})
        log("  %-36s %s" % (label, " | ".join(rows[-1][k] for k in OBS_COLUMNS)))
    return {"rows": rows, "notes": notes, "sizes": sizes}


OBS_COLUMNS = ["session", "sessions", "read_only", "standby", "clock_same", "clock_new", "clock_restart"]
OBS_HEADERS = ["increasing within a session", "increasing across 2 sessions taking turns",
               "in a READ ONLY transaction", "on a hot standby", "clock 10 s back: same session",
               "clock 10 s back: new session", "clock 10 s back: after a restart"]


def sql_literal(s):
    return "'" + s.replace("'", "''") + "'"


def clock_step(gens, res, n, tmp, host, port, lib, notes):
    data = os.path.join(tmp, "faketime")
    offset = os.path.join(tmp, "faketime.offset")

    def set_offset(o):
        with open(offset + ".tmp", "w") as f:
            f.write(o + "\n")
        os.chmod(offset + ".tmp", 0o644)
        os.rename(offset + ".tmp", offset)

    env = ["LD_PRELOAD=" + lib, "FAKETIME_TIMESTAMP_FILE=" + offset, "FAKETIME_NO_CACHE=1",
           "FAKETIME_DONT_FAKE_MONOTONIC=1"]
    set_offset("+0")
    run(as_server(["initdb", "-D", data, "-U", "postgres", "-E", "UTF8", "--locale=C", "-A", "trust",
                   "--no-sync"]))
    with open(os.path.join(data, "postgresql.conf"), "a") as f:
        f.write("listen_addresses = ''\nunix_socket_directories = '%s'\nport = %d\n"
                "shared_preload_libraries = 'snowseq'\nsnowseq.node_id = 1\n"
                "jit = off\n" % (host, port))
    pg_ctl = lambda *a: run(as_server(["pg_ctl", "-D", data, "-l", data + ".log", "-w", "-t", "60"] + list(a),
                                      env))
    pg_ctl("start")
    try:
        ok, _, err = psql_at(port, "\\i %s\n" % os.path.join(BENCH_DIR, "setup.sql"))
        if not ok:
            raise HarnessError("setup of the libfaketime cluster: " + err)
        series = "SELECT %s FROM generate_series(1, " + str(n) + ");"
        before = {}
        # the same session: IDs, the step back (psql's \! runs a shell command), IDs
        for key, label, expr, typ in gens:
            ok, out, err = psql_at(port, "%s\n\\echo STEP\n\\! echo -10 > %s\n%s\n\\! echo +0 > %s\n"
                                   % (series % expr, offset, series % expr, offset))
            set_offset("+0")
            ids = out.split()
            if "STEP" not in ids:
                res[key]["clock_same"] = short_error(err)
                continue
            cut = ids.index("STEP")
            before[key] = ids[:cut]
            res[key]["clock_same"] = clock_cell(before[key], {"ids": ids[cut + 1:], "seconds": 0,
                                                              "error": err}, typ)

        def phase(column):
            for key, label, expr, typ in gens:
                if key not in before:
                    continue
                t0 = time.time()
                ok, out, err = psql_at(port, series % expr)
                res[key][column] = clock_cell(before[key], {"ids": out.split(), "seconds": time.time() - t0,
                                                            "error": "" if ok else err}, typ)
        set_offset("-10")
        phase("clock_new")
        pg_ctl("restart")
        phase("clock_restart")
    except HarnessError as e:
        notes.append("Clock step: not measured (%s)." % str(e).splitlines()[0])
    finally:
        set_offset("+0")
        try:
            pg_ctl("-m", "fast", "stop")
        except HarnessError:
            pass
        shutil.rmtree(data, ignore_errors=True)


# --------------------------------------------------------------------------
# numbers as the console, the targets and the report print them

def fmt_int(x):
    return "{:,}".format(int(round(x)))


def fmt_mb(b):
    return "%.1f" % (b / 1048576.0)


def fmt_x(x):
    return "%.2fx" % x


# --------------------------------------------------------------------------
# the machine

def machine_info():
    model = "unknown"
    virtual = False
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and " hypervisor" in line:
                    virtual = True
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    os_name = ""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    os_name = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "virtual": virtual, "mem_gib": mem / 1073741824.0,
            "os": os_name, "kernel": os.uname().release}


