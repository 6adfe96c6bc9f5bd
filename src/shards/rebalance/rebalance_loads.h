/*
 * rebalance_loads.h
 *		The rebalance planner's input, typed: servers, the partitions of the
 *		table and of its placement group, revertable moves; read from the
 *		loads (jsonb) by rebalance_loads.c, planned by rebalance_plan.c.
 */
#ifndef SNOWSEQ_REBALANCE_LOADS_H
#define SNOWSEQ_REBALANCE_LOADS_H

#include "access/tupdesc.h"
#include "utils/jsonb.h"
#include "utils/tuplestore.h"

#define HIST_BUCKETS 64			/* of a histogram a cut is sized by */
#define MAX_STEPS 1000			/* of one plan */

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

/* a move kept revertable (snowseq.move_revert_window) of the table or its group */
typedef struct Revertable
{
	int64		move;
	int			first;
	int			last;
	char	   *source;
	char	   *dest;
	char	   *table;
	Oid			oid;			/* its partition here (InvalidOid: none) */
} Revertable;

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
	Revertable *rv;				/* revertable moves, in the order of their ids */
	int			nrv;
	Kept	   *x;
	int			nx;
	int			maxx;
	Tuplestorestate *out;
	TupleDesc	desc;
	int			n;				/* steps so far */
} Rebalance;

/* two names, neither NULL, the same (NULL: as SQL compares it, never) */
static inline bool
RebalanceSame(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* genes f1..l1 and f2..l2 share one */
static inline bool
RebalanceOverlap(int f1, int l1, int f2, int l2)
{
	return f1 <= l2 && l1 >= f2;
}

extern void RebalanceReadLoads(Rebalance *pl, Jsonb *loads);
extern int	RebalanceServerIndex(Rebalance *pl, const char *name);
extern void RebalanceHistogram(Rebalance *pl, Part *p, int lo, int hi, int w, bool by_writes,
							   double *rows, double *written);

#endif
