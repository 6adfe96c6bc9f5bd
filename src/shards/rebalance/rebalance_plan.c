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
 * the catalog, rebalance_loads.c reads them into typed structs, this file
 * plans over those structs.  snowseq_rebalance_plan_json(loads) reads
 * nothing but its argument: a cut sized by a histogram takes it from the
 * loads ("histogram": rows per gene), so the algorithm is tested without
 * servers.  snowseq_rebalance_plan_counted(loads) is the same planner where
 * a partition that names its oid and key and brings no histogram has its
 * histogram counted where its rows live (snowseq_shard_histogram, as the
 * caller), only for the partitions a step cuts.
 */
#include "postgres.h"

#include <math.h>

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/tuplestore.h"

#include "rebalance_loads.h"
#include "sqlrun.h"

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

/* a revertable move pins the partitions it touched (its genes, its partition) */
static void
PinRevertable(Rebalance *pl, Revertable *r)
{
	int64		move = r->move;
	int			first = r->first;
	int			last = r->last;
	Oid			part = r->oid;

	AddKept(pl, r->dest, r->table);
	AddKept(pl, r->source, r->table);
	for (int k = 0; k < pl->np; k++)
	{
		Part	   *p = &pl->p[k];
		bool		hit = RebalanceOverlap(p->first, p->last, first, last) ||
			(part != InvalidOid && p->oid == part);

		if (p->pinned)
			continue;
		for (int j = 0; !hit && j < pl->ng; j++)
			hit = part != InvalidOid && pl->g[j].oid == part && RebalanceSame(pl->g[j].server, p->server) &&
				RebalanceOverlap(pl->g[j].first, pl->g[j].last, p->first, p->last);
		if (hit)
		{
			p->pinned = true;
			p->pin_move = move;
		}
	}
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
		if (RebalanceSame(pl->p[j].server, s) && RebalanceSame(pl->p[j].table, table))
			return true;
	for (int j = 0; j < pl->ng; j++)
		if (RebalanceSame(pl->g[j].server, s) && RebalanceSame(pl->g[j].table, table))
			return true;
	for (int j = 0; j < pl->nx; j++)
		if (RebalanceSame(pl->x[j].server, s) && RebalanceSame(pl->x[j].table, table))
			return true;
	return false;
}

/* the group's partitions (as read) on p's first server within genes f..l */
static bool
GroupAlong(Rebalance *pl, Part *q, Part *p, int f, int l)
{
	return RebalanceSame(q->server, p->server0) && RebalanceOverlap(q->first, q->last, f, l);
}

/*
 * A group partition, as the steps leave it, that a move of genes mf..last
 * of p to server to cannot take them from: one holding mf off to, unless
 * it is on p's server and the move takes the whole of it or genes at one end.
 */
static bool
GroupCannotGive(Part *c, Part *p, int mf, const char *to)
{
	return !RebalanceSame(c->cserver, to) && c->cfirst <= mf && c->clast >= mf &&
		!(RebalanceSame(c->cserver, p->server) && c->clast >= p->last && (c->cfirst == mf || c->clast == p->last));
}

/* the group's partitions as a move of genes mf..last of p to server to leaves them */
static void
GroupGive(Rebalance *pl, Part *p, int mf, char *to)
{
	for (int i = 0; i < pl->ng; i++)
	{
		Part	   *c = &pl->g[i];

		if (!RebalanceSame(c->cserver, p->server) || c->cfirst > mf || c->clast < mf)
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

		if (o->pinned || !RebalanceSame(o->server, p->server0) || !RebalanceSame(o->server0, p->server0))
			continue;
		for (int j = 0; j < pl->ng; j++)
			if (GroupAlong(pl, &pl->g[j], p, mf, p->last) &&
				RebalanceOverlap(pl->g[j].first, pl->g[j].last, o->first, o->last))
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
		if (pl->sv[RebalanceServerIndex(pl, pl->p[i].server)].drain)
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
			hi = RebalanceServerIndex(pl, p->server);
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
			if (RebalanceSame(pl->g[j].cserver, p->server) && RebalanceOverlap(pl->g[j].cfirst, pl->g[j].clast, p->first, p->last))
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

			RebalanceHistogram(pl, p, lo_g, hi_g, w, by_writes, hcount, hwrit);
			for (int j = 0; j < pl->ng; j++)
				if (GroupAlong(pl, &pl->g[j], p, p->first, p->last))
					RebalanceHistogram(pl, &pl->g[j], lo_g, hi_g, w, by_writes, hcount, hwrit);
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

		if (!RebalanceSame(p->server, pl->sv[hi].name) || p->pinned)
			continue;
		/* nor one whose last gene a partition of the group holds with genes after it */
		for (int j = 0; j < pl->ng && !held; j++)
			held = RebalanceSame(pl->g[j].cserver, p->server) && pl->g[j].cfirst <= p->last && pl->g[j].clast > p->last;
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

			if (p->pinned || q->pinned || !RebalanceSame(q->server, p->server) ||
				pl->sv[RebalanceServerIndex(pl, p->server)].drain || q->first != pl->p[ord[mb - 1]].last + 1)
				break;
			macc += q->load;
			if (macc > pl->merge_below * mmean)
				break;
			for (int j = 0; j < pl->ng && !outside; j++)
			{
				Part	   *c = &pl->g[j];

				outside = c->cfirst <= q->last && c->clast >= p->first &&
					(c->cfirst < p->first || c->clast > q->last || !RebalanceSame(c->cserver, p->server));
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
	RebalanceReadLoads(pl, PG_GETARG_JSONB_P(0));
	for (int i = 0; i < pl->nrv; i++)
		PinRevertable(pl, &pl->rv[i]);

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
