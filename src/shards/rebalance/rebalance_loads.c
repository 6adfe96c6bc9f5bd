/*
 * rebalance_loads.c
 *		The rebalance planner's loads, from jsonb (docs/elastic-shards.md,
 *		"The planner"), into the typed structs of rebalance_loads.h; a field
 *		missing or of the wrong type is an ERROR that names it.  And the
 *		histograms a cut is sized by: from the loads, or counted where the
 *		rows live (snowseq_shard_histogram, as the caller).
 */
#include "postgres.h"

#include <math.h>

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "rebalance_loads.h"
#include "sqlrun.h"

/* ---- the loads, from jsonb ---- */

static void
BadLoads(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("rebalance loads: %s", what),
			 errhint("The loads are an object: strategy (rows, bytes or writes), threshold, servers (names), "
					 "partitions ([{first, last, server, rows, bytes, writes, table}]), and optionally drain, group, "
					 "revertable_moves, merge_below, keep, seconds, histograms; see snowseq_rebalance_plan_json's documentation.")));
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

/* the index of a server in pl->sv (-1: none) */
int
RebalanceServerIndex(Rebalance *pl, const char *name)
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
	if (RebalanceServerIndex(pl, p->server) < 0)
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

/*
 * The loads read into pl: every field checked, the group's partitions of
 * each of the table's genes on its server counted with it (shared out by
 * genes where one spans more), the servers' loads summed.
 */
void
RebalanceReadLoads(Rebalance *pl, Jsonb *loads)
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
		if (RebalanceServerIndex(pl, pl->sv[i].name) >= 0)
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
		k = RebalanceServerIndex(pl, pnstrdup(v->val.string.val, v->val.string.len));
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

			if (!RebalanceSame(q->server, p->server) || !RebalanceOverlap(q->first, q->last, p->first, p->last))
				continue;
			ov = (double) (Min(q->last, p->last) - Max(q->first, p->first) + 1) / (double) (q->last - q->first + 1);
			grows += q->rows * ov;
			gbytes += q->bytes * ov;
			gload += q->load * ov;
		}
		p->rows += grows;
		p->bytes += gbytes;
		p->load += gload;
		s = &pl->sv[RebalanceServerIndex(pl, p->server)];
		s->load += p->load;
		s->rows += p->rows;
	}
	n = Elements(root, "revertable_moves", false, &a);
	pl->rv = palloc0(sizeof(Revertable) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		JsonbContainer *c = Container(getIthJsonbValueFromContainer(a, i), false, "a revertable move");
		Revertable *r = &pl->rv[pl->nrv++];
		const char *what = "a revertable move";

		r->move = Int(c, "move", what, true, NULL);
		r->first = (int) Int(c, "first", what, true, NULL);
		r->last = (int) Int(c, "last", what, true, NULL);
		r->source = Str(c, "source", what, true);
		r->dest = Str(c, "dest", what, true);
		r->table = Str(c, "table", what, false);
		r->oid = (Oid) Int(c, "oid", what, false, NULL);
	}
}

/*
 * The histogram of a partition's genes lo..hi in HIST_BUCKETS buckets of w
 * genes, added to rows and written: from the loads, or counted where the
 * rows live.
 */
void
RebalanceHistogram(Rebalance *pl, Part *p, int lo, int hi, int w, bool by_writes, double *rows, double *written)
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
