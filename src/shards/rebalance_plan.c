/*
 * rebalance_plan.c
 *		The rebalance planner: from the loads of a table's partitions (and of
 *		the other tables of its placement group) on the servers of the map,
 *		the moves that bring every server to at most threshold x the mean
 *		load, and everything off the drained ones, then the merges of
 *		neighbouring partitions whose load together is small.
 *
 * The loads come as one jsonb document (docs/elastic-shards.md, "The
 * planner"): snowseq_rebalance_plan_from collects them from the servers and
 * the catalog, this file plans.  snowseq_rebalance_plan_json(loads) reads
 * nothing but its argument: a cut sized by a histogram takes it from the
 * loads ("histogram": rows per gene), so the algorithm is tested without
 * servers.  snowseq_rebalance_plan_counted(loads) is the same planner where
 * a partition that names its oid and key and brings no histogram has its
 * histogram counted where its rows live (snowseq_shard_histogram, as the
 * caller), only for the partitions a step cuts.
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/tuplestore.h"

#include "sqlrun.h"

#define HIST_BUCKETS 64
#define MAX_STEPS 1000

typedef enum
{
	BY_ROWS,
	BY_BYTES,
	BY_WRITES
} Strategy;

/* rows and rows written of one gene, as the loads give a histogram */
typedef struct GeneCount
{
	int			gene;
	double		rows;
	double		written;
} GeneCount;

/* a partition of the table, or of another table of its group */
typedef struct Part
{
	int			first;			/* genes */
	int			last;
	char	   *server;			/* where it is now, as the plan moves it */
	char	   *server0;		/* where it was read (NULL: a piece cut by the plan) */
	double		rows;			/* table: with its group's share */
	double		bytes;
	double		load;			/* rows, bytes or writes per second planned on */
	char	   *table;			/* the remote table read (NULL: moved or cut) */
	char	   *name;			/* its name on this router, for messages */
	Oid			oid;			/* its partition here (InvalidOid: none) */
	char	   *key;			/* its table's partition key */
	bool		has_since;		/* writes: its server's next xid at the first reading */
	int64		since;
	GeneCount  *hist;			/* from the loads (NULL: none given) */
	int			nhist;
	bool		pinned;			/* no step takes genes from it */
	int64		pin_move;		/* the revertable move that pins it (0: a step) */
	/* group partitions: as the plan's steps leave them */
	int			cfirst;
	int			clast;
	char	   *cserver;
} Part;

/* a server, and a table name a revertable move keeps on one */
typedef struct Server
{
	char	   *name;
	bool		drain;
	double		load;
	double		rows;			/* what breaks ties of load */
} Server;

typedef struct Kept
{
	char	   *server;
	char	   *table;
} Kept;

typedef struct Rebalance
{
	Strategy	strategy;
	double		threshold;
	double		merge_below;
	double		seconds;
	bool		keep;
	bool		histograms;
	bool		count_here;		/* histograms counted where they live */
	const char *ext;			/* snowseq's schema, quoted */
	char	   *table_name;
	char	   *sample;
	Server	   *sv;
	int			nsv;
	Part	   *p;				/* the table's partitions, pieces appended */
	int			np;
	int			maxp;
	Part	   *g;				/* the group's */
	int			ng;
	Kept	   *x;
	int			nx;
	int			maxx;
	Tuplestorestate *out;
	TupleDesc	desc;
	int			n;				/* steps so far */
} Rebalance;

/* ---- the loads, from jsonb ---- */

static void
BadLoads(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("rebalance loads: %s", what),
			 errhint("The loads are an object: strategy (rows, bytes or writes), threshold, servers (names), "
					 "partitions ([{first, last, server, rows, bytes, writes, table}]), and optionally drain, group, "
					 "revertable, merge_below, keep, seconds, histograms; see snowseq_rebalance_plan_json's documentation.")));
}

static JsonbValue *
Key(JsonbContainer *c, const char *key)
{
	JsonbValue *v = getKeyJsonValueFromContainer(c, key, strlen(key), NULL);

	return (v == NULL || v->type == jbvNull) ? NULL : v;
}

static JsonbContainer *
Container(JsonbValue *v, bool array, const char *what)
{
	if (v == NULL || v->type != jbvBinary ||
		(array ? !JsonContainerIsArray(v->val.binary.data) : !JsonContainerIsObject(v->val.binary.data)))
		BadLoads(psprintf("%s is not %s", what, array ? "an array" : "an object"));
	return v->val.binary.data;
}

static double
Num(JsonbContainer *c, const char *key, const char *what, bool required, double dflt)
{
	JsonbValue *v = Key(c, key);

	if (v == NULL && !required)
		return dflt;
	if (v == NULL || v->type != jbvNumeric)
		BadLoads(psprintf("%s of %s is %s", key, what, v ? "not a number" : "missing"));
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

static int64
Int(JsonbContainer *c, const char *key, const char *what, bool required, bool *given)
{
	double		d = Num(c, key, what, required, NAN);

	if (given)
		*given = !isnan(d);
	if (isnan(d))
		return 0;
	if (d != floor(d))
		BadLoads(psprintf("%s of %s is %g, not a whole number", key, what, d));
	/* exactly, past the 53 bits of a double */
	return DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(Key(c, key)->val.numeric)));
}

static char *
Str(JsonbContainer *c, const char *key, const char *what, bool required)
{
	JsonbValue *v = Key(c, key);

	if (v == NULL && !required)
		return NULL;
	if (v == NULL || v->type != jbvString)
		BadLoads(psprintf("%s of %s is %s", key, what, v ? "not a string" : "missing"));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static bool
Bool(JsonbContainer *c, const char *key, bool dflt)
{
	JsonbValue *v = Key(c, key);

	if (v == NULL)
		return dflt;
	if (v->type != jbvBool)
		BadLoads(psprintf("%s is not true or false", key));
	return v->val.boolean;
}

/* the elements of an array of the loads (none where it is absent) */
static int
Elements(JsonbContainer *c, const char *key, bool required, JsonbContainer **arr)
{
	JsonbValue *v = Key(c, key);

	if (v == NULL && !required)
		return 0;
	if (v == NULL)
		BadLoads(psprintf("%s is missing", key));
	*arr = Container(v, true, key);
	return JsonContainerSize(*arr);
}

static int
ServerIndex(Rebalance *pl, const char *name)
{
	for (int i = 0; i < pl->nsv; i++)
		if (strcmp(pl->sv[i].name, name) == 0)
			return i;
	return -1;
}

static void
ReadPart(Rebalance *pl, JsonbContainer *c, Part *p, const char *what)
{
	JsonbContainer *h;
	bool		given;
	int			nh;

	memset(p, 0, sizeof(Part));
	p->first = (int) Int(c, "first", what, true, NULL);
	p->last = (int) Int(c, "last", what, true, NULL);
	if (p->first < 0 || p->last > 65535 || p->first > p->last)
		BadLoads(psprintf("genes %d to %d of %s are not a gene range", p->first, p->last, what));
	p->server = Str(c, "server", what, true);
	if (ServerIndex(pl, p->server) < 0)
		BadLoads(psprintf("server \"%s\" of %s is not in servers", p->server, what));
	p->server0 = p->server;
	p->rows = Num(c, "rows", what, false, 0);
	p->bytes = Num(c, "bytes", what, false, 0);
	p->table = Str(c, "table", what, false);
	p->name = Str(c, "name", what, false);
	p->oid = (Oid) Int(c, "oid", what, false, NULL);
	p->key = Str(c, "key", what, false);
	p->since = Int(c, "since", what, false, &given);
	p->has_since = given;
	if (pl->strategy == BY_ROWS)
		p->load = p->rows;
	else if (pl->strategy == BY_BYTES)
		p->load = p->bytes;
	else
		p->load = Num(c, "writes", what, false, 0) / pl->seconds;
	nh = Elements(c, "histogram", false, &h);
	if (Key(c, "histogram") != NULL)
		p->hist = palloc0(sizeof(GeneCount) * Max(nh, 1));
	for (int i = 0; i < nh; i++)
	{
		JsonbValue *e = getIthJsonbValueFromContainer(h, i);
		JsonbContainer *ec = Container(e, true, "an entry of a histogram");
		int			ne = JsonContainerSize(ec);
		double		v[3];

		if (ne < 2 || ne > 3)
			BadLoads(psprintf("an entry of the histogram of %s is not [gene, rows] or [gene, rows, written]", what));
		for (int j = 0; j < ne; j++)
		{
			JsonbValue *x = getIthJsonbValueFromContainer(ec, j);

			if (x->type != jbvNumeric)
				BadLoads(psprintf("an entry of the histogram of %s holds no number", what));
			v[j] = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(x->val.numeric)));
		}
		p->hist[i].gene = (int) v[0];
		p->hist[i].rows = v[1];
		p->hist[i].written = ne == 3 ? v[2] : v[1];
	}
	p->nhist = nh;
	p->cfirst = p->first;
	p->clast = p->last;
	p->cserver = p->server;
}

static void
AddKept(Rebalance *pl, char *server, char *table)
{
	if (pl->nx == pl->maxx)
	{
		pl->maxx = pl->maxx * 2 + 8;
		pl->x = pl->x ? repalloc(pl->x, sizeof(Kept) * pl->maxx) : palloc(sizeof(Kept) * pl->maxx);
	}
	pl->x[pl->nx].server = server;
	pl->x[pl->nx].table = table;
	pl->nx++;
}

static bool
Eq(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static bool
Overlaps(int f1, int l1, int f2, int l2)
{
	return f1 <= l2 && l1 >= f2;
}

/* a revertable move pins the partitions it touched (its genes, its partition) */
static void
PinRevertable(Rebalance *pl, JsonbContainer *c)
{
	int64		move = Int(c, "move", "a revertable move", true, NULL);
	int			first = (int) Int(c, "first", "a revertable move", true, NULL);
	int			last = (int) Int(c, "last", "a revertable move", true, NULL);
	Oid			part = (Oid) Int(c, "oid", "a revertable move", false, NULL);
	char	   *table = Str(c, "table", "a revertable move", false);

	AddKept(pl, Str(c, "dest", "a revertable move", true), table);
	AddKept(pl, Str(c, "source", "a revertable move", true), table);
	for (int k = 0; k < pl->np; k++)
	{
		Part	   *p = &pl->p[k];
		bool		hit = Overlaps(p->first, p->last, first, last) ||
			(part != InvalidOid && p->oid == part);

		if (p->pinned)
			continue;
		for (int j = 0; !hit && j < pl->ng; j++)
			hit = part != InvalidOid && pl->g[j].oid == part && Eq(pl->g[j].server, p->server) &&
				Overlaps(pl->g[j].first, pl->g[j].last, p->first, p->last);
		if (hit)
		{
			p->pinned = true;
			p->pin_move = move;
		}
	}
}

static void
ReadLoads(Rebalance *pl, Jsonb *loads)
{
	JsonbContainer *root = &loads->root;
	JsonbContainer *a;
	char	   *s;
	int			n;
	int			kept = 0;

	if (!JsonContainerIsObject(root))
		BadLoads("they are not a JSON object");
	s = Str(root, "strategy", "the loads", true);
	if (strcmp(s, "rows") == 0)
		pl->strategy = BY_ROWS;
	else if (strcmp(s, "bytes") == 0)
		pl->strategy = BY_BYTES;
	else if (strcmp(s, "writes") == 0)
		pl->strategy = BY_WRITES;
	else
		BadLoads(psprintf("strategy \"%s\" is none of rows, bytes, writes", s));
	pl->threshold = Num(root, "threshold", "the loads", true, 0);
	if (!(pl->threshold >= 1))
		BadLoads("threshold is below 1");
	pl->merge_below = Num(root, "merge_below", "the loads", false, 0);
	if (!(pl->merge_below >= 0 && pl->merge_below <= 1))
		BadLoads("merge_below is not between 0 and 1");
	pl->seconds = Num(root, "seconds", "the loads", pl->strategy == BY_WRITES, 1);
	if (!(pl->seconds > 0))
		BadLoads("seconds is not above 0");
	pl->keep = Bool(root, "keep", false);
	pl->histograms = Bool(root, "histograms", true);
	pl->table_name = Str(root, "table", "the loads", false);
	pl->sample = Str(root, "sample", "the loads", false);

	n = Elements(root, "servers", true, &a);
	pl->sv = palloc0(sizeof(Server) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(a, i);

		if (v->type != jbvString)
			BadLoads("an element of servers is not a string");
		pl->sv[i].name = pnstrdup(v->val.string.val, v->val.string.len);
		if (ServerIndex(pl, pl->sv[i].name) >= 0)
			BadLoads(psprintf("server \"%s\" comes twice in servers", pl->sv[i].name));
		pl->nsv = i + 1;
	}
	n = Elements(root, "drain", false, &a);
	for (int i = 0; i < n; i++)
	{
		JsonbValue *v = getIthJsonbValueFromContainer(a, i);
		int			k;

		if (v->type != jbvString)
			BadLoads("an element of drain is not a string");
		k = ServerIndex(pl, pnstrdup(v->val.string.val, v->val.string.len));
		if (k < 0)
			BadLoads("a server to drain is not in servers");
		pl->sv[k].drain = true;
	}
	for (int i = 0; i < pl->nsv; i++)
		kept += pl->sv[i].drain ? 0 : 1;
	if (kept < 1)
		BadLoads("every server is drained: there is nowhere to move genes");

	n = Elements(root, "group", false, &a);
	pl->g = palloc0(sizeof(Part) * Max(n, 1));
	for (int i = 0; i < n; i++)
		ReadPart(pl, Container(getIthJsonbValueFromContainer(a, i), false, "a partition of group"),
				 &pl->g[pl->ng++], "a partition of group");

	/* the table's partitions, each with its group's of its genes on its server */
	n = Elements(root, "partitions", true, &a);
	pl->maxp = n + 16;
	pl->p = palloc0(sizeof(Part) * pl->maxp);
	for (int i = 0; i < n; i++)
	{
		Part	   *p = &pl->p[pl->np++];
		double		grows = 0,
					gbytes = 0,
					gload = 0;
		Server	   *s;

		ReadPart(pl, Container(getIthJsonbValueFromContainer(a, i), false, "a partition"), p, "a partition");
		for (int j = 0; j < pl->ng; j++)
		{
			Part	   *q = &pl->g[j];
			double		ov;

			if (!Eq(q->server, p->server) || !Overlaps(q->first, q->last, p->first, p->last))
				continue;
			ov = (double) (Min(q->last, p->last) - Max(q->first, p->first) + 1) / (double) (q->last - q->first + 1);
			grows += q->rows * ov;
			gbytes += q->bytes * ov;
			gload += q->load * ov;
		}
		p->rows += grows;
		p->bytes += gbytes;
		p->load += gload;
		s = &pl->sv[ServerIndex(pl, p->server)];
		s->load += p->load;
		s->rows += p->rows;
	}
	n = Elements(root, "revertable", false, &a);
	for (int i = 0; i < n; i++)
		PinRevertable(pl, Container(getIthJsonbValueFromContainer(a, i), false, "a revertable move"));
}

/* ---- steps ---- */

static int64
ToInt8(double d)
{
	return DatumGetInt64(DirectFunctionCall1(dtoi8, Float8GetDatum(d)));
}

static void
Emit(Rebalance *pl, int first, int last, const char *from, const char *to, int64 rows, int64 bytes)
{
	Datum		v[7];
	bool		nulls[7] = {false};

	pl->n++;
	v[0] = Int32GetDatum(pl->n);
	v[1] = Int32GetDatum(first);
	v[2] = Int32GetDatum(last);
	v[3] = DirectFunctionCall1(namein, CStringGetDatum(from));
	v[4] = DirectFunctionCall1(namein, CStringGetDatum(to));
	v[5] = Int64GetDatum(rows);
	v[6] = Int64GetDatum(bytes);
	tuplestore_putvalues(pl->out, pl->desc, v, nulls);
}

/* a table of that name is read on server s, or kept there by a move */
static bool
NameTakenOn(Rebalance *pl, const char *s, const char *table)
{
	if (table == NULL)
		return false;
	for (int j = 0; j < pl->np; j++)
		if (Eq(pl->p[j].server, s) && Eq(pl->p[j].table, table))
			return true;
	for (int j = 0; j < pl->ng; j++)
		if (Eq(pl->g[j].server, s) && Eq(pl->g[j].table, table))
			return true;
	for (int j = 0; j < pl->nx; j++)
		if (Eq(pl->x[j].server, s) && Eq(pl->x[j].table, table))
			return true;
	return false;
}

/* the group's partitions (as read) on p's first server within genes f..l */
static bool
GroupAlong(Rebalance *pl, Part *q, Part *p, int f, int l)
{
	return Eq(q->server, p->server0) && Overlaps(q->first, q->last, f, l);
}

/*
 * A group partition, as the steps leave it, that a move of genes mf..last
 * of p to server to cannot take them from: one holding mf off to, unless
 * it is on p's server and the move takes the whole of it or genes at one end.
 */
static bool
GroupCannotGive(Part *c, Part *p, int mf, const char *to)
{
	return !Eq(c->cserver, to) && c->cfirst <= mf && c->clast >= mf &&
		!(Eq(c->cserver, p->server) && c->clast >= p->last && (c->cfirst == mf || c->clast == p->last));
}

/* the group's partitions as a move of genes mf..last of p to server to leaves them */
static void
GroupGive(Rebalance *pl, Part *p, int mf, char *to)
{
	for (int i = 0; i < pl->ng; i++)
	{
		Part	   *c = &pl->g[i];

		if (!Eq(c->cserver, p->server) || c->cfirst > mf || c->clast < mf)
			continue;
		if (c->cfirst == mf && c->clast == p->last)
			c->cserver = to;
		else if (c->cfirst == mf)
			c->cfirst = p->last + 1;
		else
			c->clast = mf - 1;
	}
}

/*
 * A revertable step of genes mf..last of p to server to: neither p nor what
 * its group's partitions leave moves again; the names stay on both servers
 * until it is finalized.
 */
static void
KeepStep(Rebalance *pl, Part *p, int mf, char *to)
{
	p->pinned = true;
	AddKept(pl, to, p->table);
	AddKept(pl, p->server, p->table);
	for (int j = 0; j < pl->ng; j++)
		if (GroupAlong(pl, &pl->g[j], p, mf, p->last))
			AddKept(pl, to, pl->g[j].table);
	for (int k = 0; k < pl->np; k++)
	{
		Part	   *o = &pl->p[k];

		if (o->pinned || !Eq(o->server, p->server0) || !Eq(o->server0, p->server0))
			continue;
		for (int j = 0; j < pl->ng; j++)
			if (GroupAlong(pl, &pl->g[j], p, mf, p->last) &&
				Overlaps(pl->g[j].first, pl->g[j].last, o->first, o->last))
			{
				o->pinned = true;
				break;
			}
	}
}

/* a double as SQL prints it (RAISE's %) */
static char *
FloatText(double d)
{
	return DatumGetCString(DirectFunctionCall1(float8out, Float8GetDatum(d)));
}

/* ---- the drain ---- */

static Rebalance *sort_plan;

static int
DrainOrder(const void *a, const void *b)
{
	Part	   *p = &sort_plan->p[*(const int *) a];
	Part	   *q = &sort_plan->p[*(const int *) b];

	if (p->load != q->load)
		return p->load > q->load ? -1 : 1;
	if (p->rows != q->rows)
		return p->rows > q->rows ? -1 : 1;
	return *(const int *) a - *(const int *) b;
}

static int
Drained(Rebalance *pl, int *order)
{
	int			n = 0;

	for (int i = 0; i < pl->np; i++)
		if (pl->sv[ServerIndex(pl, pl->p[i].server)].drain)
			order[n++] = i;
	sort_plan = pl;
	qsort(order, n, sizeof(int), DrainOrder);
	return n;
}

/* a receiver of p's tables: no table of their names is read there */
static bool
CanReceive(Rebalance *pl, Part *p, const char *s)
{
	if (NameTakenOn(pl, s, p->table))
		return false;
	for (int j = 0; j < pl->ng; j++)
		if (GroupAlong(pl, &pl->g[j], p, p->first, p->last) && NameTakenOn(pl, s, pl->g[j].table))
			return false;
	return true;
}

static char *
GroupTables(Rebalance *pl, Part *p)
{
	StringInfoData b;

	initStringInfo(&b);
	if (p->table)
		appendStringInfoString(&b, p->table);
	for (int j = 0; j < pl->ng; j++)
		if (GroupAlong(pl, &pl->g[j], p, p->first, p->last) && pl->g[j].table)
			appendStringInfo(&b, "%s%s", b.len ? ", " : "", pl->g[j].table);
	return b.data;
}

static int
NameOrder(const void *a, const void *b)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* drained servers give every partition, the biggest first, to the least loaded server kept */
static void
Drain(Rebalance *pl)
{
	int		   *order = palloc(sizeof(int) * Max(pl->np, 1));
	bool		found;
	int			n;

	do
	{
		found = false;
		n = Drained(pl, order);
		for (int o = 0; o < n && !found; o++)
		{
			Part	   *p = &pl->p[order[o]];
			int			lo = -1;
			int			hi;
			bool		bad = false;

			if (p->pinned && p->pin_move == 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("genes %d to %d of server \"%s\" cannot be drained with moves kept revertable: an earlier step of the drain takes along a partition of its placement group that holds them too, whose next move is refused until that step's move is finalized",
								p->first, p->last, p->server),
						 errhint("Drain with snowseq.move_revert_window = 0, or drain again once the moves of the first drain are finalized.")));
			if (p->pinned)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("genes %d to %d of server \"%s\" cannot be drained: move " INT64_FORMAT " can still revert them",
								p->first, p->last, p->server, p->pin_move),
						 errhint("Finalize it first, CALL snowseq_move_finalize(" INT64_FORMAT "), or revert it, CALL snowseq_move_revert(" INT64_FORMAT ").",
								 p->pin_move, p->pin_move)));
			for (int k = 0; k < pl->nsv; k++)
			{
				Server	   *s = &pl->sv[k];

				if (!s->drain &&
					(lo < 0 || s->load < pl->sv[lo].load ||
					 (s->load == pl->sv[lo].load && s->rows < pl->sv[lo].rows)) &&
					CanReceive(pl, p, s->name))
					lo = k;
			}
			if (lo < 0)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("no server can take genes %d to %d of server \"%s\": each reads a table named as one that they are read from there (%s)",
								p->first, p->last, p->server, GroupTables(pl, p)),
						 errhint("A move copies a table into the table of the same name on the destination: give the shard tables of different servers different names, add a server, or finalize the revertable moves that keep a table of that name there.")));
			/* one the group cannot give now may be given once another one is */
			for (int j = 0; j < pl->ng && !bad; j++)
				bad = GroupCannotGive(&pl->g[j], p, p->first, pl->sv[lo].name);
			if (bad)
				continue;
			GroupGive(pl, p, p->first, pl->sv[lo].name);
			hi = ServerIndex(pl, p->server);
			pl->sv[hi].load -= p->load;
			pl->sv[lo].load += p->load;
			pl->sv[hi].rows -= p->rows;
			pl->sv[lo].rows += p->rows;
			Emit(pl, p->first, p->last, p->server, pl->sv[lo].name, ToInt8(p->rows), ToInt8(p->bytes));
			if (pl->keep)
				KeepStep(pl, p, p->first, pl->sv[lo].name);
			p->server = pl->sv[lo].name;
			p->table = NULL;
			found = true;
		}
	} while (found);

	/* what is left on a drained server, the group cannot give */
	if (Drained(pl, order) > 0)
	{
		Part	   *p = &pl->p[order[0]];
		char	  **names = palloc(sizeof(char *) * Max(pl->ng, 1));
		int			nn = 0;
		StringInfoData b;

		for (int j = 0; j < pl->ng; j++)
			if (Eq(pl->g[j].cserver, p->server) && Overlaps(pl->g[j].cfirst, pl->g[j].clast, p->first, p->last))
				names[nn++] = pl->g[j].name ? pl->g[j].name : "?";
		qsort(names, nn, sizeof(char *), NameOrder);
		initStringInfo(&b);
		for (int j = 0; j < nn; j++)
			appendStringInfo(&b, "%s%s", j ? ", " : "", names[j]);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("genes %d to %d of server \"%s\" cannot be drained: a move cannot take them from partitions of their placement group (%s)",
						p->first, p->last, p->server, nn ? b.data : "<NULL>"),
				 errhint("A move takes its genes from one partition of each table of the group, the whole of it or genes at one end: partition the tables of a placement group on the same genes.")));
	}
}

/* ---- histograms ---- */

/*
 * The histogram of a partition's genes lo..hi in HIST_BUCKETS buckets of w
 * genes, added to rows and written: from the loads, or counted where the
 * rows live.
 */
static void
Histogram(Rebalance *pl, Part *p, int lo, int hi, int w, bool by_writes, double *rows, double *written)
{
	if (p->hist != NULL)
	{
		for (int i = 0; i < p->nhist; i++)
		{
			GeneCount  *c = &p->hist[i];

			if (c->gene < lo || c->gene > hi)
				continue;
			rows[(c->gene - lo) / w] += c->rows;
			written[(c->gene - lo) / w] += c->written;
		}
		return;
	}
	if (!pl->count_here || p->oid == InvalidOid || p->key == NULL)
		return;
	SPI_connect();
	SpiRunParams(psprintf("SELECT bucket, rows, written FROM %s.snowseq_shard_histogram($1::pg_catalog.oid::pg_catalog.regclass, "
						  "$2::pg_catalog.name, $3::pg_catalog.int4, $4::pg_catalog.int4, $5::pg_catalog.int4, $6::pg_catalog.int8)",
						  pl->ext),
				 SQL_ARGS(psprintf("%u", p->oid), p->key, psprintf("%d", lo), psprintf("%d", hi), psprintf("%d", w),
						  by_writes && p->has_since ? psprintf(INT64_FORMAT, p->since) : NULL),
				 SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int			b = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

		if (b < 0 || b >= HIST_BUCKETS)
			continue;
		rows[b] += (double) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
		written[b] += (double) DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
	}
	SPI_finish();
}

typedef struct Cut
{
	int			k;				/* genes taken from the end */
	bool		has_rows;		/* cut_rows known from a histogram */
	double		rows;
	bool		has_load;		/* writes: load from the histogram */
	double		load;
} Cut;

/*
 * How many of the last genes of p hold amount: by a histogram over 64
 * buckets of its genes (of its rows, or of the rows written for writes),
 * the bucket the cut falls in counted again; without one, its load taken
 * as even over its genes.
 */
static void
SizeCut(Rebalance *pl, Part *p, double amount, Cut *cut)
{
	double		share = p->load;
	int			genes = p->last - p->first + 1;
	bool		by_writes = pl->strategy == BY_WRITES;
	double		hsum = 0,
				cut_v = 0,
				need = 0;
	int			lo_g = p->first,
				hi_g = p->last;

	cut->k = 0;
	cut->has_rows = true;
	cut->rows = 0;
	cut->has_load = false;
	if (p->server0 != NULL && p->rows > 0 && pl->histograms)
	{
		for (int level = 1; level <= 2; level++)
		{
			int			w = (hi_g - lo_g + 1 + HIST_BUCKETS - 1) / HIST_BUCKETS;
			double		hcount[HIST_BUCKETS] = {0};
			double		hwrit[HIST_BUCKETS] = {0};
			double	   *hv;
			bool		refine = false;

			Histogram(pl, p, lo_g, hi_g, w, by_writes, hcount, hwrit);
			for (int j = 0; j < pl->ng; j++)
				if (GroupAlong(pl, &pl->g[j], p, p->first, p->last))
					Histogram(pl, &pl->g[j], lo_g, hi_g, w, by_writes, hcount, hwrit);
			hv = by_writes ? hwrit : hcount;
			if (level == 1)
			{
				for (int b = 0; b < HIST_BUCKETS; b++)
					hsum += hv[b];
				if (hsum <= 0)
					break;
				need = amount * (by_writes ? hsum : p->rows) / share;
			}
			for (int bg = (hi_g - lo_g) / w; bg >= 0; bg--)
			{
				double		cnt = hv[bg];
				double		hr = hcount[bg];
				int			bw = Min(w, hi_g - lo_g + 1 - bg * w);

				if (cut_v + cnt >= need)
				{
					double		frac;

					if (level == 1 && bw > 1)
					{
						lo_g = lo_g + bg * w;
						hi_g = lo_g + bw - 1;
						refine = true;
						break;
					}
					frac = Min(1.0, (need - cut_v) / cnt);
					cut->k += Max(1, (int) ceil(bw * frac));
					cut_v += cnt * frac;
					cut->rows += hr * frac;
					break;
				}
				cut_v += cnt;
				cut->rows += hr;
				cut->k += bw;
			}
			if (!refine)
				break;
		}
	}
	if (hsum > 0)
	{
		if (cut->k >= genes)
		{
			cut->k = genes;
			cut->has_rows = false;
		}
		else if (by_writes)
		{
			cut->has_load = true;
			cut->load = share * cut_v / hsum;
		}
	}
	else
	{
		cut->k = DatumGetInt32(DirectFunctionCall1(dtoi4, Float8GetDatum(rint(genes * amount / share))));
		cut->has_rows = false;
		if (cut->k < 1)
			cut->k = 1;
		if (cut->k >= genes)
			cut->k = genes;
	}
}

/* ---- evening out ---- */

/* the partition of server hi that comes closest to amount for server lo */
static int
Closest(Rebalance *pl, int hi, int lo, double amount, bool *group_held)
{
	int			best = -1;

	for (int k = 0; k < pl->np; k++)
	{
		Part	   *p = &pl->p[k];
		bool		held = false;

		if (!Eq(p->server, pl->sv[hi].name) || p->pinned)
			continue;
		/* nor one whose last gene a partition of the group holds with genes after it */
		for (int j = 0; j < pl->ng && !held; j++)
			held = Eq(pl->g[j].cserver, p->server) && pl->g[j].cfirst <= p->last && pl->g[j].clast > p->last;
		if (held)
		{
			*group_held = true;
			continue;
		}
		if (NameTakenOn(pl, pl->sv[lo].name, p->table) || p->load <= 0)
			continue;
		if (best < 0)
			best = k;
		else if (p->load <= amount)
		{
			if (pl->p[best].load > amount || p->load > pl->p[best].load)
				best = k;
		}
		else if (pl->p[best].load > amount && p->load > pl->p[best].load)
			best = k;
	}
	return best;
}

static int
ServerOrder(const void *a, const void *b)
{
	Server	   *s = &sort_plan->sv[*(const int *) a];
	Server	   *t = &sort_plan->sv[*(const int *) b];

	if (s->load != t->load)
		return s->load < t->load ? -1 : 1;
	if (s->rows != t->rows)
		return s->rows < t->rows ? -1 : 1;
	return *(const int *) a - *(const int *) b;
}

/* the most loaded server gives to the least loaded one until none is above threshold x the mean */
static void
EvenOut(Rebalance *pl, double mean)
{
	int		   *order = palloc(sizeof(int) * pl->nsv);
	bool		group_held = false;

	for (;;)
	{
		int			hi = -1,
					lo = -1,
					best = -1,
					no = 0,
					genes = 0,
					mf;
		bool		found = false;
		Cut			cut;
		Part	   *p;
		Part		piece;
		double		moved;
		int64		rows,
					bytes;

		for (int k = 0; k < pl->nsv; k++)
			if (!pl->sv[k].drain && (hi < 0 || pl->sv[k].load > pl->sv[hi].load))
				hi = k;
		if (pl->sv[hi].load <= pl->threshold * mean || pl->n >= MAX_STEPS)
			break;
		for (int k = 0; k < pl->nsv; k++)
			if (!pl->sv[k].drain && k != hi)
				order[no++] = k;
		sort_plan = pl;
		qsort(order, no, sizeof(int), ServerOrder);
		for (int c = 0; c < no && !found; c++)
		{
			double		amount;
			bool		skip = false;

			lo = order[c];
			/* what to move: down to the mean, without taking the receiver above it */
			amount = Min(pl->sv[hi].load - mean, mean - pl->sv[lo].load);
			if (amount <= 0 || (best = Closest(pl, hi, lo, amount, &group_held)) < 0)
				continue;
			p = &pl->p[best];
			genes = p->last - p->first + 1;
			if (p->load <= amount)
			{
				cut.k = genes;
				cut.has_rows = cut.has_load = false;
			}
			else
				SizeCut(pl, p, amount, &cut);
			/* a whole partition that would only swap the two servers' places gains nothing */
			if (cut.k == genes && p->load >= pl->sv[hi].load - pl->sv[lo].load)
				continue;
			/* nor a cut that carries none of the load */
			if (cut.k < genes &&
				(pl->strategy == BY_WRITES ? (cut.has_load ? cut.load : p->load * cut.k / genes) :
				 cut.has_rows ? rint(cut.rows) : (double) ToInt8(p->rows * cut.k / genes)) <= 0)
				continue;
			mf = p->last - cut.k + 1;
			/* the tables of the group the move takes along must not be named as a table read there */
			for (int j = 0; j < pl->ng && !skip; j++)
				skip = GroupAlong(pl, &pl->g[j], p, mf, p->last) && NameTakenOn(pl, pl->sv[lo].name, pl->g[j].table);
			if (skip)
				continue;
			/* and the group's partitions must give the genes */
			for (int j = 0; j < pl->ng && !skip; j++)
				skip = GroupCannotGive(&pl->g[j], p, mf, pl->sv[lo].name);
			if (skip)
			{
				group_held = true;
				continue;
			}
			found = true;
		}
		if (!found)
		{
			if (group_held)
				ereport(NOTICE,
						(errmsg("the plan leaves server \"%s\" above %s x the mean: the partitions of its placement group cannot give the genes it would move",
								pl->sv[hi].name, FloatText(pl->threshold)),
						 errhint("A move takes its genes from one partition of each table of the group, the whole of it or genes at one end: partition the tables of a placement group on the same genes.")));
			break;
		}
		p = &pl->p[best];
		mf = p->last - cut.k + 1;
		GroupGive(pl, p, mf, pl->sv[lo].name);
		if (pl->keep)
			KeepStep(pl, p, mf, pl->sv[lo].name);
		if (cut.k == genes)
		{
			rows = ToInt8(p->rows);
			bytes = ToInt8(p->bytes);
			Emit(pl, p->first, p->last, pl->sv[hi].name, pl->sv[lo].name, rows, bytes);
			p->server = pl->sv[lo].name;
			p->table = NULL;
			moved = p->load;
		}
		else
		{
			/* the last genes: the partition keeps its first ones */
			if (cut.has_rows)
			{
				rows = ToInt8(rint(cut.rows));
				bytes = ToInt8(p->bytes * cut.rows / p->rows);
			}
			else
			{
				rows = ToInt8(p->rows * cut.k / genes);
				bytes = ToInt8(p->bytes * cut.k / genes);
			}
			Emit(pl, mf, p->last, pl->sv[hi].name, pl->sv[lo].name, rows, bytes);
			moved = pl->strategy == BY_ROWS ? (double) rows : pl->strategy == BY_BYTES ? (double) bytes :
				cut.has_load ? cut.load : p->load * cut.k / genes;
			memset(&piece, 0, sizeof(Part));
			piece.first = mf;
			piece.last = p->last;
			piece.server = pl->sv[lo].name;
			piece.rows = (double) rows;
			piece.bytes = (double) bytes;
			piece.load = moved;
			piece.pinned = pl->keep;
			p->last = mf - 1;
			p->rows -= rows;
			p->bytes -= bytes;
			p->load -= moved;
			if (pl->np == pl->maxp)
			{
				pl->maxp *= 2;
				pl->p = repalloc(pl->p, sizeof(Part) * pl->maxp);
			}
			pl->p[pl->np++] = piece;
		}
		pl->sv[hi].load -= moved;
		pl->sv[lo].load += moved;
		pl->sv[hi].rows -= rows;
		pl->sv[lo].rows += rows;
	}
}

/* ---- merges ---- */

static int
GeneOrder(const void *a, const void *b)
{
	int			f = sort_plan->p[*(const int *) a].first;
	int			g = sort_plan->p[*(const int *) b].first;

	return f < g ? -1 : f > g ? 1 : *(const int *) a - *(const int *) b;
}

/*
 * Neighbours on one server (not drained, none pinned) whose loads together
 * are at most merge_below x the mean load of a partition, the longest such
 * run from each, where the group's partitions of their genes lie inside
 * them on that server, become one.
 */
static void
Merges(Rebalance *pl)
{
	int		   *ord = palloc(sizeof(int) * pl->np);
	double		mmean = 0;
	int			ma = 0;

	if (!(pl->merge_below > 0) || pl->np <= 1)
		return;
	for (int i = 0; i < pl->np; i++)
	{
		mmean += pl->p[i].load;
		ord[i] = i;
	}
	mmean /= pl->np;
	sort_plan = pl;
	qsort(ord, pl->np, sizeof(int), GeneOrder);
	while (ma < pl->np - 1)
	{
		Part	   *p = &pl->p[ord[ma]];
		double		macc = p->load;
		double		rows = 0,
					bytes = 0;
		int			best = -1;

		for (int mb = ma + 1; mb < pl->np; mb++)
		{
			Part	   *q = &pl->p[ord[mb]];
			bool		outside = false;

			if (p->pinned || q->pinned || !Eq(q->server, p->server) ||
				pl->sv[ServerIndex(pl, p->server)].drain || q->first != pl->p[ord[mb - 1]].last + 1)
				break;
			macc += q->load;
			if (macc > pl->merge_below * mmean)
				break;
			for (int j = 0; j < pl->ng && !outside; j++)
			{
				Part	   *c = &pl->g[j];

				outside = c->cfirst <= q->last && c->clast >= p->first &&
					(c->cfirst < p->first || c->clast > q->last || !Eq(c->cserver, p->server));
			}
			if (!outside)
				best = mb;
		}
		if (best < 0)
		{
			ma++;
			continue;
		}
		for (int o = ma; o <= best; o++)
		{
			rows += pl->p[ord[o]].rows;
			bytes += pl->p[ord[o]].bytes;
		}
		Emit(pl, p->first, pl->p[ord[best]].last, p->server, p->server, ToInt8(rows), ToInt8(bytes));
		ma = best + 1;
	}
}

/* ---- the SQL functions ---- */

static Datum
PlanRebalance(FunctionCallInfo fcinfo, bool count_here)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Rebalance	   *pl = palloc0(sizeof(Rebalance));
	double		total = 0;
	int			kept = 0;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the loads of a rebalance plan must not be NULL"),
				 errhint("Pass the loads as a jsonb object: strategy, threshold, servers, partitions.")));
	InitMaterializedSRF(fcinfo, 0);
	pl->out = rsinfo->setResult;
	pl->desc = rsinfo->setDesc;
	pl->count_here = count_here;
	if (count_here)
		pl->ext = ExtSchemaQuoted(fcinfo->flinfo->fn_oid);
	ReadLoads(pl, PG_GETARG_JSONB_P(0));

	for (int i = 0; i < pl->np; i++)
		total += pl->p[i].load;
	for (int i = 0; i < pl->nsv; i++)
		kept += pl->sv[i].drain ? 0 : 1;
	if (pl->strategy == BY_WRITES && total == 0)
		ereport(NOTICE,
				(errmsg("no server counted a write of table %s in the %s sample: nothing to even out",
						pl->table_name ? pl->table_name : "?", pl->sample ? pl->sample : "?"),
				 errhint("Plan by writes while the table is written to, or over a longer sample.")));
	Drain(pl);
	EvenOut(pl, total / kept);
	Merges(pl);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_plan_json);

/*
 * snowseq_rebalance_plan_json(loads jsonb) of 1.3: the plan from the loads
 * alone; it reads nothing else.
 */
Datum
snowseq_rebalance_plan_json(PG_FUNCTION_ARGS)
{
	return PlanRebalance(fcinfo, false);
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_plan_counted);

/*
 * snowseq_rebalance_plan_counted(loads jsonb) of 1.3: the plan from the
 * loads, the histogram of a partition that a step cuts counted where its
 * rows live (snowseq_shard_histogram, as the caller) unless the loads give it.
 */
Datum
snowseq_rebalance_plan_counted(PG_FUNCTION_ARGS)
{
	return PlanRebalance(fcinfo, true);
}
