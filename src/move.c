/*
 * move.c
 *		Elastic shards, the router side: snowseq_move_genes and its
 *		conveniences snowseq_split_shard and snowseq_merge_shards,
 *		snowseq_move_cleanup, snowseq_shard_stats.
 *
 * A router's sharded table is partitioned by gene range; each partition is
 * a postgres_fdw foreign table reading one table on one shard server, and
 * snowseq_shard_map names that server (the foreign server) for each gene
 * range.  A move of genes first..last from the server of their partition
 * (the source) to another server (the destination) uses PostgreSQL's own
 * logical replication, the way Citus moves a shard:
 *
 *	prepare  the destination gets a table of its own for the range (never a
 *			 table another partition reads: that partition would show the
 *			 copied rows twice); the source table a fence trigger and a
 *			 publication filtered on the ID range; the destination a
 *			 subscription that copies and then streams; the router a foreign
 *			 table on the new table, not yet attached;
 *	copy	 wait for the initial copy, then catch up;
 *	block	 writes to the range, and only those, wait on the source; wait
 *			 for writers already under way, then for the subscription to
 *			 apply everything up to the source's current WAL position; drop
 *			 the subscription; the held-back writers fail with a
 *			 serialization failure, and their retries reach the new server
 *			 once the router has switched;
 *	switch	 a source transaction deletes the moved rows (a split: the
 *			 source table keeps serving the rest of the partition) and marks
 *			 the fence "moved"; one router transaction takes the parent's
 *			 lock, detaches the partition, attaches what is left of it and
 *			 the new foreign table, and rewrites the map; the source
 *			 transaction locks the source table and is prepared (two-phase),
 *			 the router commits, then the source commits: no query through
 *			 the router sees a row twice or misses one (a router statement
 *			 stuck on the delete makes it run under the router's lock
 *			 instead), and a router that dies between the two commits leaves
 *			 the source table waiting for the outcome its record decides;
 *	finish	 commit the prepared source transaction, drop the publication
 *			 (the slot went with the subscription); a whole-partition move
 *			 deletes the source rows now, in batches.
 *
 * Each step commits, and the record in snowseq_moves says how far a move
 * got (while it copies, also how far the copy got, for
 * snowseq_move_progress); a move holds an advisory lock on the router for
 * its whole life.  A move that fails undoes itself: the old placement never
 * stopped serving.  One whose router died in or after the switch is
 * finished or undone when the router starts again (worker.c's move
 * resolver); one that died earlier, by snowseq_move_cleanup(), which the
 * next move of the same table runs first.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/wait_event.h"

#include "snowseq.h"
#include "move.h"
#include "move_schema.h"
#include "nodes.h"
#include "testpoint.h"

#define MOVE_BLOCK_ATTEMPTS		5	/* tries to hold writes back and catch up */
#define MOVE_LOCKERS_WAIT_MS	2000	/* for writers already under way */
#define MOVE_FINAL_CATCHUP_MS	5000	/* final catch-up, writes held back */
#define MOVE_SWITCH_NOWAIT_MS	1000	/* router lock: tries that never queue */
#define MOVE_SWITCH_MAX_WAIT_MS 2000	/* then queued tries, lock_timeout up to */
#define MOVE_SWITCH_BUDGET_MS	60000	/* give up after */
#define MOVE_TRIGGER_LOCK_MS	100 /* lock_timeout for the fence trigger */
#define MOVE_TRIGGER_ATTEMPTS	50	/* source table lock tries for the trigger */
#define MOVE_DELETE_BATCH		50000
#define MOVE_STALL_MS			(300 * 1000)	/* no progress for so long: fail */
#define MOVE_PROGRESS_MS		500 /* the copy's progress is committed so often */

/* one thing done or left behind, for snowseq_move_cleanup's result */
typedef struct MoveReport
{
	int64		id;				/* 0: no known move */
	Oid			parent;
	int			first;
	int			last;
	char	   *server;
	char	   *object;
	char	   *action;
} MoveReport;

typedef struct Move
{
	int64		id;
	char	   *token;			/* names the publication, slot, subscription */
	Oid			parent;
	char	   *parent_q;		/* qualified and quoted */
	char	   *parent_rel;
	int			first;
	int			last;
	char	   *kind;			/* whole, prefix or suffix of the partition */
	char	   *part_q;			/* the partition the genes are in */
	bool		part_has_lo;	/* false: MINVALUE */
	bool		part_has_hi;	/* false: MAXVALUE */
	int64		part_lo;
	int64		part_hi;
	char	   *new_part_q;		/* the router's foreign table on the new table */
	char	   *src_name;
	char	   *dst_name;
	char	   *src_table;		/* qualified and quoted, on the source */
	char	   *src_rel;		/* unquoted, as the copy lands under this name */
	char	   *dst_table;		/* qualified and quoted, on the destination */
	char	   *dst_nsp;		/* unquoted parts of dst_table (and the schema */
	char	   *dst_rel;		/* of src_table) */
	char	   *id_col;			/* the ID column on the shards, unquoted */
	int			dest_created;	/* 1 created by the move, 0 reused, -1 not yet */
	int			fence_id;		/* 0: none yet */
	Oid			sub_oid;		/* the subscription on the destination */
	Oid			mover;			/* the role that runs the move */
	bool		parent_held;	/* the parent's session lock (MoveHoldParent) */
	char	   *state;			/* as committed in snowseq_moves */
	char	   *node;			/* this router's node id */
	/* what the router needs for the new foreign table */
	char	   *new_cols;
	char	   *new_opts;
	char	   *new_colopts;
	/* sessions */
	RemoteConn *src;
	RemoteConn *lock;			/* source: holds the fence locks and the delete */
	int			lock_pid;		/* its backend there */
	RemoteConn *dst;
	TimestampTz blocked_at;
	TimestampTz copy_start;		/* the copy's clock, for its notices */
	TimestampTz copy_noticed;
	TimestampTz copy_probed;
	bool		copied;			/* the copy is done and caught up */
	List	   *report;			/* MoveReport */
	bool		leftovers;		/* something could not be removed */
	MemoryContext cxt;
} Move;

typedef void (*MoveStep) (Move *m);

static char *ext_nsp = NULL;	/* quoted schema of snowseq on this server */

/* Remember the schema of snowseq here, from the function called. */
static void
SetExtSchema(FunctionCallInfo fcinfo)
{
	if (ext_nsp != NULL)
		pfree(ext_nsp);
	ext_nsp = MemoryContextStrdup(TopMemoryContext,
								  quote_identifier(get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid))));
}

/* ---------------------------------------------------------------------
 * Small helpers
 * ---------------------------------------------------------------------
 */

/* Sleep, interruptibly. */
static void
MoveSleep(long ms)
{
	(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms,
					 PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
}

/* Milliseconds since a moment. */
static double
MsSince(TimestampTz t)
{
	return (double) (GetCurrentTimestamp() - t) / 1000.0;
}

/* Run SQL here through SPI; expect < 0 accepts any success. */
static void
Sql(const char *sql, int expect)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc < 0 || (expect >= 0 && rc != expect))
		elog(ERROR, "snowseq: local statement failed (%s): %s", SPI_result_code_string(rc), sql);
}

/* The first column of the first row of a query here, in cxt, or NULL. */
static char *
SqlValue(MemoryContext cxt, const char *sql)
{
	char	   *v = NULL;

	Sql(sql, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (s != NULL)
			v = MemoryContextStrdup(cxt, s);
	}
	return v;
}

/* The name of one of snowseq's objects here, qualified. */
static char *
Ext(const char *name)
{
	return psprintf("%s.%s", ext_nsp, name);
}

/* The name of one of snowseq's objects on a remote server, qualified. */
static char *
RExt(RemoteConn *rc, const char *name)
{
	return psprintf("%s.%s", rc->extschema, name);
}

/* A bigint, or NULL, as SQL. */
static char *
Int8OrNull(bool has, int64 v)
{
	return has ? psprintf(INT64_FORMAT, v) : "NULL";
}

/* A range partition bound as SQL. */
static char *
BoundSql(bool has, int64 v, const char *infinite)
{
	return has ? psprintf(INT64_FORMAT, v) : (char *) infinite;
}

/* The IDs that move: [lo, hi), either side possibly unbounded. */
static void
MoveIds(Move *m, bool *has_lo, int64 *lo, bool *has_hi, int64 *hi)
{
	*has_lo = m->part_has_lo;
	*lo = m->part_lo;
	*has_hi = m->part_has_hi;
	*hi = m->part_hi;
	if (strcmp(m->kind, "suffix") == 0)
	{
		*has_lo = true;
		*lo = (int64) m->first << SNOWSEQ_SEGMENT_BITS;
	}
	if (strcmp(m->kind, "prefix") == 0)
	{
		*has_hi = true;
		*hi = (int64) (m->last + 1) << SNOWSEQ_SEGMENT_BITS;
	}
}

/* A condition on the ID column that holds for exactly the moving IDs. */
static char *
MoveIdCondition(Move *m)
{
	bool		has_lo,
				has_hi;
	int64		lo,
				hi;
	const char *col = quote_identifier(m->id_col);

	MoveIds(m, &has_lo, &lo, &has_hi, &hi);
	if (has_lo && has_hi)
		return psprintf("%s >= " INT64_FORMAT " AND %s < " INT64_FORMAT, col, lo, col, hi);
	if (has_lo)
		return psprintf("%s >= " INT64_FORMAT, col, lo);
	if (has_hi)
		return psprintf("%s < " INT64_FORMAT, col, hi);
	return psprintf("%s IS NOT NULL", col);
}

/* Add a line to the report of a move. */
static void
MoveNote(Move *m, const char *server, const char *object, const char *action)
{
	MemoryContext old = MemoryContextSwitchTo(m->cxt);
	MoveReport *r = palloc(sizeof(MoveReport));

	r->id = m->id;
	r->parent = m->parent;
	r->first = m->first;
	r->last = m->last;
	r->server = server ? pstrdup(server) : NULL;
	r->object = pstrdup(object);
	r->action = pstrdup(action);
	m->report = lappend(m->report, r);
	MemoryContextSwitchTo(old);
}

/* Update the move's record (committed with the current transaction). */
static void
MoveRecordSet(Move *m, const char *sets)
{
	Sql(psprintf("UPDATE %s SET %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
				 Ext("snowseq_moves"), sets, m->id), SPI_OK_UPDATE);
}

/* Refuse to run inside a transaction block or a function. */
static void
MoveCheckNonAtomic(FunctionCallInfo fcinfo)
{
	if (fcinfo->context == NULL || !IsA(fcinfo->context, CallContext) ||
		((CallContext *) fcinfo->context)->atomic)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_TERMINATION),
				 errmsg("a move of genes must run as a CALL of its own"),
				 errhint("It commits between its steps: CALL it outside BEGIN ... COMMIT and outside functions.")));
}

/*
 * Run a step in a subtransaction.  Returns NULL, or the error it raised,
 * with the subtransaction rolled back, so the caller can undo and go on.
 */
static ErrorData *
MoveTry(Move *m, MoveStep step)
{
	MemoryContext old = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(old);
	PG_TRY();
	{
		step(m);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(m->cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(old);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return edata;
}

/* The session of a move on a server, reopened if it was lost. */
static RemoteConn *
MoveSession(Move *m, RemoteConn **slot, const char *server)
{
	ForeignServer *fs;

	if (RemoteUsable(*slot))
		return *slot;
	fs = GetForeignServerByName(server, false);
	RemoteClose(*slot);
	{
		/* the session outlives the step and the transaction that opened it */
		MemoryContext old = MemoryContextSwitchTo(m->cxt);

		*slot = RemoteConnect(fs->serverid);
		MemoryContextSwitchTo(old);
	}
	if ((*slot)->extschema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq is not installed on server \"%s\"", server),
				 errhint("Run CREATE EXTENSION snowseq in that database.")));
	return *slot;
}

/* The session of a move on its source server. */
static RemoteConn *
Src(Move *m)
{
	return MoveSession(m, &m->src, m->src_name);
}

/* The session of a move on its destination server. */
static RemoteConn *
Dst(Move *m)
{
	return MoveSession(m, &m->dst, m->dst_name);
}

/*
 * The source session that holds the fence locks and the source transaction:
 * opened afresh only at the start of a block attempt, never behind the
 * back of a transaction it holds.
 */
static RemoteConn *
Lock(Move *m)
{
	if (m->lock == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the session holding the fence on server \"%s\" was lost", m->src_name)));
	return m->lock;
}

/* The tables of a move, for move_schema.c. */
static MoveSchemaTables *
MoveTables(Move *m)
{
	MoveSchemaTables *t = palloc(sizeof(MoveSchemaTables));

	t->src = Src(m);
	t->dst = Dst(m);
	t->table = m->src_table;
	t->nsp = m->dst_nsp;
	t->src_rel = m->src_rel;
	t->dst_rel = m->dst_rel;
	return t;
}

/* Close the sessions of a move. */
static void
MoveCloseSessions(Move *m)
{
	RemoteClose(m->lock);
	RemoteClose(m->src);
	RemoteClose(m->dst);
}

/* ---------------------------------------------------------------------
 * Planning on the router
 * ---------------------------------------------------------------------
 */

/* A new, empty move in a memory context that outlives commits. */
static Move *
MoveNew(void)
{
	MemoryContext cxt = AllocSetContextCreate(PortalContext ? PortalContext : TopMemoryContext,
											  "snowseq move", ALLOCSET_DEFAULT_SIZES);
	Move	   *m = MemoryContextAllocZero(cxt, sizeof(Move));

	m->cxt = cxt;
	m->dest_created = -1;
	return m;
}

/* First and last gene of a partition bound; false if not on gene boundaries. */
static bool
PartGenes(bool has_lo, int64 lo, bool has_hi, int64 hi, int *first, int *last)
{
	int64		mask = ((int64) 1 << SNOWSEQ_SEGMENT_BITS) - 1;

	if ((has_lo && (lo < 0 || (lo & mask) != 0)) || (has_hi && (hi <= 0 || (hi & mask) != 0)))
		return false;
	*first = has_lo ? (int) (lo >> SNOWSEQ_SEGMENT_BITS) : 0;
	*last = has_hi ? (int) (hi >> SNOWSEQ_SEGMENT_BITS) - 1 : SNOWSEQ_MAX_GENE;
	return *first <= *last;
}

/* The parent's partition key column; errors if it is not gene-partitionable. */
static char *
MoveParentKey(Move *m)
{
	Relation	rel = table_open(m->parent, AccessShareLock);
	PartitionKey key;
	char	   *col;

	m->parent_rel = MemoryContextStrdup(m->cxt, RelationGetRelationName(rel));
	m->parent_q = MemoryContextStrdup(m->cxt,
									  quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
																 m->parent_rel));
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is not partitioned", m->parent_rel),
				 errhint("Moves take genes of a table partitioned by range on its bigint ID.")));
	key = RelationGetPartitionKey(rel);
	if (key->strategy != PARTITION_STRATEGY_RANGE || key->partnatts != 1 ||
		key->partattrs[0] == 0 || key->parttypid[0] != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("table \"%s\" must be partitioned by range on one bigint column", m->parent_rel),
				 errhint("Moves take genes of a table partitioned by range on its bigint ID.")));
	col = MemoryContextStrdup(m->cxt, get_attname(m->parent, key->partattrs[0], false));
	table_close(rel, NoLock);
	return col;
}

/*
 * Find the partition holding genes first..last and check it can give them
 * up: a postgres_fdw foreign table, gene-aligned, the genes at one end.
 */
static Oid
MovePartition(Move *m)
{
	Oid			part = InvalidOid;
	int			pfirst = 0,
				plast = 0;

	Sql(psprintf("SELECT c.oid, c.relkind, "
				 "pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname), "
				 "CASE WHEN b[1] OPERATOR(pg_catalog.=) 'MINVALUE' THEN NULL ELSE pg_catalog.btrim(b[1], '''')::pg_catalog.int8 END, "
				 "CASE WHEN b[2] OPERATOR(pg_catalog.=) 'MAXVALUE' THEN NULL ELSE pg_catalog.btrim(b[2], '''')::pg_catalog.int8 END, "
				 "b IS NULL, c.relname "
				 "FROM pg_catalog.pg_inherits i "
				 "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid "
				 "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
				 "LEFT JOIN LATERAL pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid), "
				 "'FROM \\((.*)\\) TO \\((.*)\\)') b ON true "
				 "WHERE i.inhparent OPERATOR(pg_catalog.=) %u AND NOT i.inhdetachpending",
				 m->parent), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		lo_null,
					hi_null,
					isnull;
		int64		lo = DatumGetInt64(SPI_getbinval(t, d, 4, &lo_null));
		int64		hi = DatumGetInt64(SPI_getbinval(t, d, 5, &hi_null));
		char	   *name = SPI_getvalue(t, d, 7);
		int			f,
					l;

		if (DatumGetBool(SPI_getbinval(t, d, 6, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" has a default partition, \"%s\"", m->parent_rel, name),
					 errhint("Moves keep every gene in a partition of its own range: detach the default partition first.")));
		if (!PartGenes(!lo_null, lo, !hi_null, hi, &f, &l))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("partition \"%s\" of table \"%s\" is not aligned on gene boundaries", name, m->parent_rel),
					 errhint("Bounds of gene-range partitions are multiples of 2^48.")));
		if (l < m->first || f > m->last)
			continue;
		if (OidIsValid(part) || f > m->first || l < m->last)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genes %d to %d are in more than one partition of table \"%s\"",
							m->first, m->last, m->parent_rel),
					 errdetail("Partition \"%s\" holds genes %d to %d.", name, f, l),
					 errhint("Move the genes of one partition at a time.")));
		part = DatumGetObjectId(SPI_getbinval(t, d, 1, &isnull));
		if (DatumGetChar(SPI_getbinval(t, d, 2, &isnull)) != RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("partition \"%s\" of table \"%s\" is not a foreign table", name, m->parent_rel),
					 errhint("Moves take genes from a postgres_fdw foreign table to another server.")));
		m->part_q = MemoryContextStrdup(m->cxt, SPI_getvalue(t, d, 3));
		m->part_has_lo = !lo_null;
		m->part_lo = lo;
		m->part_has_hi = !hi_null;
		m->part_hi = hi;
		pfirst = f;
		plast = l;
	}
	if (!OidIsValid(part))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds gene %d", m->parent_rel, m->first)));
	if (m->first == pfirst && m->last == plast)
		m->kind = "whole";
	else if (m->first == pfirst)
		m->kind = "prefix";
	else if (m->last == plast)
		m->kind = "suffix";
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("genes %d to %d are in the middle of partition \"%s\", which holds genes %d to %d",
						m->first, m->last, get_rel_name(part), pfirst, plast),
				 errdetail("Two partitions reading one remote table would show its rows twice."),
				 errhint("A move takes genes from one end of a partition: move genes %d to %d, then move genes %d to %d back.",
						 m->first, plast, m->last + 1, plast)));
	return part;
}

/* A foreign server that moves can use: postgres_fdw, with a user mapping. */
static ForeignServer *
MoveServer(const char *name)
{
	ForeignServer *fs = GetForeignServerByName(name, true);

	if (fs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" does not exist", name),
				 errhint("Create it with CREATE SERVER ... FOREIGN DATA WRAPPER postgres_fdw, and a user mapping for it.")));
	if (strcmp(GetForeignDataWrapper(fs->fdwid)->fdwname, "postgres_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a postgres_fdw server", name)));
	(void) GetUserMapping(GetUserId(), fs->serverid);
	return fs;
}

/*
 * The map must name the partition's server for the genes that move, or
 * already the destination (a table placed alike moved them before).
 */
static void
MoveCheckMap(Move *m)
{
	int			g = m->first;

	Sql(psprintf("SELECT upper_gene, shard FROM %s ORDER BY upper_gene", Ext("snowseq_shard_map")),
		SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed && g <= m->last; i++)
	{
		bool		isnull;
		int			upper = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
		char	   *shard = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);

		if (upper < g)
			continue;
		if (strcmp(shard, m->src_name) != 0 && strcmp(shard, m->dst_name) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowseq_shard_map gives genes %d to %d to \"%s\", but partition %s reads them from server \"%s\"",
							g, Min(upper, m->last), shard, m->part_q, m->src_name),
					 errhint("Make the map name the foreign server of each partition before moving genes.")));
		g = upper + 1;
	}
	if (g <= m->last)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gene %d is not covered by snowseq_shard_map", g),
				 errhint("Make the map name the foreign server of each partition before moving genes.")));
}

/* Everything the router can check, and what it needs later. */
static void
MovePlan(Move *m, const char *to_server)
{
	char	   *key = MoveParentKey(m);
	Oid			part;
	ForeignTable *ft;
	ForeignServer *src;
	ForeignServer *dst;
	char	   *schema = NULL;
	char	   *table = NULL;
	ListCell   *lc;
	char	   *v;

	if (m->first < 0 || m->last > SNOWSEQ_MAX_GENE || m->first > m->last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d are not a gene range", m->first, m->last),
				 errhint("Genes go from 0 to %d, and the first is not above the last.", SNOWSEQ_MAX_GENE)));
	v = SqlValue(m->cxt, psprintf("SELECT pg_catalog.pg_has_role(relowner, 'USAGE') FROM pg_catalog.pg_class "
								  "WHERE oid OPERATOR(pg_catalog.=) %u", m->parent));
	if (v == NULL || v[0] != 't')
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", m->parent_rel)));

	part = MovePartition(m);
	ft = GetForeignTable(part);
	src = GetForeignServer(ft->serverid);
	if (strcmp(GetForeignDataWrapper(src->fdwid)->fdwname, "postgres_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("partition %s reads server \"%s\", which is not a postgres_fdw server",
						m->part_q, src->servername)));
	m->src_name = MemoryContextStrdup(m->cxt, src->servername);
	dst = MoveServer(to_server);
	m->dst_name = MemoryContextStrdup(m->cxt, dst->servername);
	(void) MoveServer(m->src_name);
	if (src->serverid == dst->serverid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d of table \"%s\" are already on server \"%s\"",
						m->first, m->last, m->parent_rel, m->dst_name)));
	MoveCheckMap(m);

	/* the remote table and ID column, as postgres_fdw resolves them */
	foreach(lc, ft->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "schema_name") == 0)
			schema = defGetString(d);
		else if (strcmp(d->defname, "table_name") == 0)
			table = defGetString(d);
	}
	if (schema == NULL)
		schema = get_namespace_name(get_rel_namespace(part));
	if (table == NULL)
		table = get_rel_name(part);
	m->src_table = MemoryContextStrdup(m->cxt, quote_qualified_identifier(schema, table));
	m->id_col = key;
	foreach(lc, GetForeignColumnOptions(part, get_attnum(part, key)))
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "column_name") == 0)
			m->id_col = MemoryContextStrdup(m->cxt, defGetString(d));
	}
	m->dst_nsp = MemoryContextStrdup(m->cxt, schema);
	m->src_rel = MemoryContextStrdup(m->cxt, table);

	/* everyone who reads the partition must be able to read the new one */
	v = SqlValue(m->cxt, psprintf(
								  "SELECT pg_catalog.string_agg(s.usename::text, ', ') FROM pg_catalog.pg_user_mappings s "
								  "WHERE s.srvid OPERATOR(pg_catalog.=) %u AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_user_mappings d "
								  "WHERE d.srvid OPERATOR(pg_catalog.=) %u AND (d.umuser OPERATOR(pg_catalog.=) s.umuser OR d.umuser OPERATOR(pg_catalog.=) 0))",
								  src->serverid, dst->serverid));
	if (v != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" lacks user mappings that server \"%s\" has: %s",
						m->dst_name, m->src_name, v),
				 errhint("Create them first: after the move their queries would go to server \"%s\".", m->dst_name)));

	/* the new foreign table: the parent's columns, the partition's options */
	m->new_cols = SqlValue(m->cxt, psprintf(
											"SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) "
											"pg_catalog.format_type(a.atttypid, a.atttypmod) OPERATOR(pg_catalog.||) "
											"CASE WHEN a.attcollation OPERATOR(pg_catalog.<>) t.typcollation "
											"THEN ' COLLATE ' OPERATOR(pg_catalog.||) a.attcollation::pg_catalog.regcollation::text ELSE '' END "
											"OPERATOR(pg_catalog.||) CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY a.attnum) "
											"FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid "
											"WHERE a.attrelid OPERATOR(pg_catalog.=) %u AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
											m->parent));
	m->new_opts = SqlValue(m->cxt, psprintf(
											"SELECT pg_catalog.string_agg(', ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(option_name) "
											"OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(option_value), '') "
											"FROM pg_catalog.pg_options_to_table((SELECT ftoptions FROM pg_catalog.pg_foreign_table "
											"WHERE ftrelid OPERATOR(pg_catalog.=) %u)) "
											"WHERE option_name OPERATOR(pg_catalog.<>) ALL (ARRAY['schema_name', 'table_name'])",
											part));
	m->new_colopts = SqlValue(m->cxt, psprintf(
											   "SELECT pg_catalog.string_agg(', ALTER COLUMN ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(a.attname) "
											   "OPERATOR(pg_catalog.||) ' OPTIONS (' OPERATOR(pg_catalog.||) (SELECT pg_catalog.string_agg("
											   "pg_catalog.quote_ident(o.option_name) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) "
											   "pg_catalog.quote_literal(o.option_value), ', ') FROM pg_catalog.pg_options_to_table(a.attfdwoptions) o) "
											   "OPERATOR(pg_catalog.||) ')', '') FROM pg_catalog.pg_attribute a "
											   "WHERE a.attrelid OPERATOR(pg_catalog.=) %u AND a.attfdwoptions IS NOT NULL AND NOT a.attisdropped",
											   part));
}

/* Whether a live move (one whose advisory lock is held) has this id. */
static bool
MoveIsLive(int64 id)
{
	char	   *v = SqlValue(CurrentMemoryContext, psprintf(
															"SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks WHERE locktype OPERATOR(pg_catalog.=) 'advisory' "
															"AND database OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
															"AND classid OPERATOR(pg_catalog.=) %u AND objid OPERATOR(pg_catalog.=) %u "
															"AND objsubid OPERATOR(pg_catalog.=) 2 AND granted",
															(uint32) SNOWSEQ_LOCK_MOVE, (uint32) id));

	return v != NULL && strcmp(v, "0") != 0;
}

/* This server's node id, which the destination must not share. */
static char *
MoveLocalNode(Move *m)
{
	char	   *node = SqlValue(m->cxt, psprintf("SELECT node_id FROM %s", Ext("snowseq_status")));

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq.node_id is not set on this server"),
				 errhint("Set snowseq.node_id in postgresql.conf to a value no other server uses, and restart.")));
	return node;
}

/* Refuse overlapping moves; record this one and take its lock. */
static void
MoveRecordNew(Move *m)
{
	char	   *part_rel;
	char	   *name;
	char	   *v;

	m->node = MoveLocalNode(m);
	/* one starter at a time; running moves hold no lock that this waits for */
	Sql(psprintf("SELECT pg_catalog.pg_advisory_xact_lock(%d, 0)", SNOWSEQ_LOCK_MOVE), SPI_OK_SELECT);
	Sql(psprintf("SELECT move_id, first_gene, last_gene, dest_server, state, part_name "
				 "FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
				 "AND state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed']) ORDER BY move_id",
				 Ext("snowseq_moves"), m->parent), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
		int			f = DatumGetInt32(SPI_getbinval(t, d, 2, &isnull));
		int			l = DatumGetInt32(SPI_getbinval(t, d, 3, &isnull));
		char	   *dst = SPI_getvalue(t, d, 4);
		char	   *state = SPI_getvalue(t, d, 5);
		char	   *part = SPI_getvalue(t, d, 6);
		SPITupleTable *saved = SPI_tuptable;
		uint64		n = SPI_processed;
		bool		live;

		if ((l < m->first || f > m->last) && strcmp(part, m->part_q) != 0)
			continue;
		live = MoveIsLive(id);
		SPI_tuptable = saved;
		SPI_processed = n;
		if (live)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("genes %d to %d of table \"%s\" are being moved by move " INT64_FORMAT " (to server \"%s\")",
							f, l, m->parent_rel, id, dst),
					 errhint("Wait for it to end: the moves of one partition run one at a time.")));
		if (strcmp(state, "switch") == 0 || strcmp(state, "switched") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("move " INT64_FORMAT " of genes %d to %d of table \"%s\" was interrupted while switching",
							id, f, l, m->parent_rel),
					 errhint("Run SELECT * FROM snowseq_move_cleanup(); once its servers are reachable.")));
	}

	v = SqlValue(m->cxt, psprintf("SELECT pg_catalog.nextval(pg_catalog.pg_get_serial_sequence(%s, 'move_id'))",
								  quote_literal_cstr(Ext("snowseq_moves"))));
	m->id = pg_strtoint64(v);
	m->token = psprintf("snowseq_move_%s_" INT64_FORMAT, m->node, m->id);
	m->token = MemoryContextStrdup(m->cxt, m->token);

	/* names of the new objects: the parent's, with the range */
	name = psprintf("%s_g%d_%d", m->parent_rel, m->first, m->last);
	part_rel = name;
	if (OidIsValid(get_relname_relid(part_rel, get_rel_namespace(m->parent))))
		part_rel = psprintf("%s_m" INT64_FORMAT, name, m->id);
	if (strlen(part_rel) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("the name of the new partition, \"%s\", is too long", part_rel),
				 errhint("Use a shorter table name.")));
	m->new_part_q = MemoryContextStrdup(m->cxt,
										quote_qualified_identifier(get_namespace_name(get_rel_namespace(m->parent)),
																   part_rel));
	m->dst_rel = MemoryContextStrdup(m->cxt, name);
	m->dst_table = MemoryContextStrdup(m->cxt, quote_qualified_identifier(m->dst_nsp, m->dst_rel));

	Sql(psprintf("INSERT INTO %s (move_id, parent, first_gene, last_gene, source_server, dest_server, "
				 "kind, part_name, part_lower, part_upper, new_part_name, source_table, dest_table, id_column, "
				 "token, state) OVERRIDING SYSTEM VALUE VALUES (" INT64_FORMAT ", %u, %d, %d, %s, %s, %s, %s, "
				 "%s, %s, %s, %s, %s, %s, %s, 'prepare')",
				 Ext("snowseq_moves"), m->id, m->parent, m->first, m->last,
				 quote_literal_cstr(m->src_name), quote_literal_cstr(m->dst_name),
				 quote_literal_cstr(m->kind), quote_literal_cstr(m->part_q),
				 Int8OrNull(m->part_has_lo, m->part_lo), Int8OrNull(m->part_has_hi, m->part_hi),
				 quote_literal_cstr(m->new_part_q), quote_literal_cstr(m->src_table),
				 quote_literal_cstr(m->dst_table), quote_literal_cstr(m->id_col),
				 quote_literal_cstr(m->token)), SPI_OK_INSERT);
	/* the resolver at the router's start acts as this role, with its user mappings */
	MoveRecordSet(m, psprintf("mover = %u", GetUserId()));
	m->state = "prepare";
	/* held until the move ends: others see it running */
	Sql(psprintf("SELECT pg_catalog.pg_advisory_lock(%d, %d)", SNOWSEQ_LOCK_MOVE, (int32) m->id),
		SPI_OK_SELECT);
}

/* ---------------------------------------------------------------------
 * Prepare: check the servers, create the objects
 * ---------------------------------------------------------------------
 */

/* A remote server fit for a move: snowseq 1.1 or later, a superuser session. */
static void
MoveCheckServer(RemoteConn *rc)
{
	char	   *v;

	if (rc->extschema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq is not installed on server \"%s\"", rc->server),
				 errhint("Run CREATE EXTENSION snowseq in that database.")));
	if (strcmp(rc->extversion, "1.1") < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq %s on server \"%s\" cannot take part in moves", rc->extversion, rc->server),
				 errhint("Run ALTER EXTENSION snowseq UPDATE there.")));
	v = RemoteValue(rc, "SELECT rolsuper::text OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) rolname "
					"FROM pg_catalog.pg_roles WHERE rolname OPERATOR(pg_catalog.=) CURRENT_USER",
					"look up the role");
	if (v == NULL || strncmp(v, "true", 4) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the user mapping for server \"%s\" connects as \"%s\", which is not a superuser there",
						rc->server, v ? strchr(v, ' ') + 1 : "?"),
				 errhint("Moves create subscriptions, replication slots and triggers: map to a superuser of each shard server.")));
}

/* The node id of a remote server. */
static char *
MoveRemoteNode(RemoteConn *rc)
{
	return RemoteValue(rc, psprintf("SELECT node_id FROM %s", RExt(rc, "snowseq_status")),
					   "read the node id");
}

/* Column definitions of a remote table, for comparing and creating. */
static char *
MoveRemoteColumns(RemoteConn *rc, const char *table)
{
	return RemoteValue(rc, psprintf(
									"SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname) OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) "
									"pg_catalog.format_type(a.atttypid, a.atttypmod) OPERATOR(pg_catalog.||) "
									"CASE WHEN a.attcollation OPERATOR(pg_catalog.<>) t.typcollation "
									"THEN ' COLLATE ' OPERATOR(pg_catalog.||) a.attcollation::pg_catalog.regcollation::text ELSE '' END "
									"OPERATOR(pg_catalog.||) CASE WHEN a.attgenerated OPERATOR(pg_catalog.=) 's' THEN ' GENERATED ALWAYS AS (' "
									"OPERATOR(pg_catalog.||) pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) OPERATOR(pg_catalog.||) ') STORED' ELSE '' END "
									"OPERATOR(pg_catalog.||) CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY a.attnum) "
									"FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid "
									"LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid OPERATOR(pg_catalog.=) a.attrelid "
									"AND ad.adnum OPERATOR(pg_catalog.=) a.attnum "
									"WHERE a.attrelid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass "
									"AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
									quote_literal_cstr(table)),
					   "read the columns of the table");
}

/* The primary key definition of a remote table. */
static char *
MoveRemotePkey(RemoteConn *rc, const char *table)
{
	return RemoteValue(rc, psprintf("SELECT pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint "
									"WHERE conrelid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass AND contype OPERATOR(pg_catalog.=) 'p'",
									quote_literal_cstr(table)),
					   "read the primary key of the table");
}

/* Whether a table exists on a remote server. */
static bool
MoveDstHas(RemoteConn *rc, const char *table)
{
	char	   *v = RemoteValue(rc, psprintf("SELECT pg_catalog.to_regclass(%s) IS NOT NULL",
											 quote_literal_cstr(table)), "look up a table");

	return strcmp(v, "t") == 0;
}

/* Whether a router partition of any table reads a remote table. */
static char *
MoveTableReadBy(Move *m, const char *server, const char *nsp, const char *rel)
{
	return SqlValue(m->cxt, psprintf(
									 "SELECT ft.ftrelid::pg_catalog.regclass::text FROM pg_catalog.pg_foreign_table ft "
									 "JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) ft.ftserver "
									 "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) ft.ftrelid "
									 "WHERE s.srvname OPERATOR(pg_catalog.=) %s "
									 "AND coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
									 "WHERE option_name OPERATOR(pg_catalog.=) 'schema_name'), "
									 "(SELECT nspname FROM pg_catalog.pg_namespace WHERE oid OPERATOR(pg_catalog.=) c.relnamespace)) "
									 "OPERATOR(pg_catalog.=) %s "
									 "AND coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
									 "WHERE option_name OPERATOR(pg_catalog.=) 'table_name'), c.relname::text) OPERATOR(pg_catalog.=) %s "
									 "LIMIT 1",
									 quote_literal_cstr(server), quote_literal_cstr(nsp), quote_literal_cstr(rel)));
}

/* The comment that marks a destination table as a copy made by this move. */
static char *
MoveCopyMark(Move *m)
{
	return psprintf("snowseq %s: copy in progress", m->token);
}

/*
 * Refuse a source table that other rows reference.  The moved rows leave it
 * with triggers off (session_replication_role = replica: the fence would
 * turn the delete away, and a user's delete triggers must not take a move
 * for a deletion), so nothing would cascade, set null or refuse: whatever
 * references them would be left dangling.  A table with such a foreign key
 * does not move.  Checked before the move starts, and again in the source
 * transaction once it holds the table's lock, so that no foreign key can
 * appear between the check and the delete.
 */
static void
MoveRefuseReferenced(Move *m, RemoteConn *rc)
{
	PGresult   *res = RemoteExec(rc, psprintf("SELECT pg_catalog.quote_ident(c.conname), c.conrelid::pg_catalog.regclass::text, "
											  "c.confdeltype::text FROM pg_catalog.pg_constraint c "
											  "WHERE c.contype OPERATOR(pg_catalog.=) 'f' "
											  "AND c.confrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s) "
											  "ORDER BY c.conrelid, c.conname LIMIT 1",
											  quote_literal_cstr(m->src_table)),
								  "look up foreign keys referencing the source table");

	if (PQntuples(res) == 1)
	{
		char	   *con = pstrdup(PQgetvalue(res, 0, 0));
		char	   *tab = pstrdup(PQgetvalue(res, 0, 1));
		char		action = PQgetvalue(res, 0, 2)[0];

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("foreign key %s of table %s on server \"%s\" references table %s, whose rows would move",
						con, tab, m->src_name, m->src_table),
				 errdetail("Moving genes deletes their rows from %s; the rows of %s that reference them would %s.",
						   m->src_table, tab,
						   action == 'c' ? "be deleted with them" :
						   action == 'n' || action == 'd' ? "lose their reference" :
						   "be left without them"),
				 errhint("Drop the foreign key before moving genes of this table, or keep it on one server.")));
	}
	PQclear(res);
}

/* The two-phase name of the source transaction of a move. */
static char *
MoveGid(Move *m)
{
	return quote_literal_cstr(m->token);
}

/*
 * Commit or roll back the prepared source transaction of a move, if it is
 * there: the router's committed state decides (switched: commit).  Until
 * then it holds the source table, so no query reads a half-moved state.
 */
static void
MoveResolvePrepared(Move *m, bool commit)
{
	RemoteConn *src = Src(m);
	char	   *v = RemoteValue(src, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_prepared_xacts "
											  "WHERE gid OPERATOR(pg_catalog.=) %s", MoveGid(m)),
								"look up the prepared source transaction");

	if (strcmp(v, "0") == 0)
		return;
	RemoteCommand(src, psprintf("%s PREPARED %s", commit ? "COMMIT" : "ROLLBACK", MoveGid(m)),
				  commit ? "commit the prepared source transaction" : "roll back the prepared source transaction");
	MoveNote(m, m->src_name, psprintf("prepared transaction %s", m->token),
			 commit ? "committed" : "rolled back");
}

/* Step: check both servers and decide about the destination table. */
static void
MovePrepareChecks(Move *m)
{
	RemoteConn *src = Src(m);
	RemoteConn *dst = Dst(m);
	char	   *src_node;
	char	   *dst_node;
	char	   *v;
	PGresult   *res;

	MoveCheckServer(src);
	MoveCheckServer(dst);
	src_node = MoveRemoteNode(src);
	dst_node = MoveRemoteNode(dst);
	if (dst_node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" has no snowseq.node_id", m->dst_name),
				 errhint("Set snowseq.node_id there to a value no other server uses, and restart it.")));
	if (strcmp(dst_node, m->node) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" has node id %s, the same as this server", m->dst_name, dst_node),
				 errhint("Every server needs its own snowseq.node_id, or the gene IDs they issue collide.")));
	if (src_node != NULL && strcmp(dst_node, src_node) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" has node id %s, the same as server \"%s\"", m->dst_name, dst_node, m->src_name),
				 errhint("Every server needs its own snowseq.node_id, or the gene IDs they issue collide.")));
	/* nor one whose node id another server of the fleet has */
	NodesRefuseCollision(m->dst_name, "move genes there");
	v = RemoteValue(src, "SELECT pg_catalog.current_setting('wal_level')", "read wal_level");
	if (v == NULL || strcmp(v, "logical") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wal_level is \"%s\" on server \"%s\"", v ? v : "?", m->src_name),
				 errhint("Set wal_level = logical on the source server and restart it.")));
	/* the switch commits on the source in two phases */
	v = RemoteValue(src, "SELECT pg_catalog.current_setting('max_prepared_transactions')",
					"read max_prepared_transactions");
	if (v == NULL || strcmp(v, "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("max_prepared_transactions is 0 on server \"%s\"", m->src_name),
				 errhint("Set max_prepared_transactions to 1 or more on the source server and restart it: the switch commits there in two phases.")));

	/* the source table: a plain table whose replica identity holds the ID */
	res = RemoteExec(src, psprintf(
								   "SELECT c.relkind, c.relreplident, a.attnum IS NOT NULL, "
								   "a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype, "
								   "EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid "
								   "AND i.indisprimary AND a.attnum OPERATOR(pg_catalog.=) ANY (i.indkey)) "
								   "FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid "
								   "AND a.attname OPERATOR(pg_catalog.=) %s AND NOT a.attisdropped "
								   "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)",
								   quote_literal_cstr(m->id_col), quote_literal_cstr(m->src_table)),
					 "look up the source table");
	if (PQntuples(res) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table %s does not exist on server \"%s\"", m->src_table, m->src_name)));
	if (strcmp(PQgetvalue(res, 0, 0), "r") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s on server \"%s\" is not a plain table", m->src_table, m->src_name)));
	if (strcmp(PQgetvalue(res, 0, 2), "t") != 0 || strcmp(PQgetvalue(res, 0, 3), "t") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("table %s on server \"%s\" has no bigint column \"%s\"", m->src_table, m->src_name, m->id_col)));
	if (strcmp(PQgetvalue(res, 0, 4), "t") != 0 ||
		(strcmp(PQgetvalue(res, 0, 1), "d") != 0 && strcmp(PQgetvalue(res, 0, 1), "f") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the primary key of table %s on server \"%s\" does not include \"%s\"",
						m->src_table, m->src_name, m->id_col),
				 errhint("Logical replication filters updates and deletes on the replica identity: give the table a primary key on its ID.")));
	PQclear(res);
	MoveRefuseReferenced(m, src);

	/*
	 * The copy lands in a table named like the source table (logical
	 * replication maps tables by name), renamed once replication stops: a
	 * new table, or an empty one that matches and that no partition reads.
	 */
	if (strcmp(m->src_table, m->dst_table) != 0 && MoveDstHas(dst, m->dst_table))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("table %s already exists on server \"%s\"", m->dst_table, m->dst_name),
				 errhint("Drop or rename it: the moved genes get a table of that name.")));
	if (MoveDstHas(dst, m->src_table))
	{
		char	   *cols_src = MoveRemoteColumns(src, m->src_table);
		char	   *cols_dst = MoveRemoteColumns(dst, m->src_table);
		char	   *pk_src = MoveRemotePkey(src, m->src_table);
		char	   *pk_dst = MoveRemotePkey(dst, m->src_table);
		char	   *reader = MoveTableReadBy(m, m->dst_name, m->dst_nsp, m->src_rel);

		if (reader != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("server \"%s\" already has a table %s, read by partition %s",
							m->dst_name, m->src_table, reader),
					 errdetail("Logical replication applies changes to the table of the same name, so the copy cannot land there."),
					 errhint("Move the genes to a server without a table of that name, or give the shard tables of different servers different names.")));
		if (cols_dst == NULL || strcmp(cols_src, cols_dst) != 0 ||
			pk_dst == NULL || strcmp(pk_src, pk_dst) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table %s on server \"%s\" exists and does not match table %s on server \"%s\"",
							m->src_table, m->dst_name, m->src_table, m->src_name),
					 errdetail("Expected columns %s and %s.", cols_src, pk_src ? pk_src : "no primary key"),
					 errhint("Drop or rename it: the copy lands in a table of that name.")));
		v = RemoteValue(dst, psprintf("SELECT EXISTS (SELECT 1 FROM %s)", m->src_table),
						"read the destination table");
		if (strcmp(v, "t") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table %s on server \"%s\" exists and holds rows", m->src_table, m->dst_name),
					 errhint("Drop or rename it: the copy lands in an empty table of that name.")));
		m->dest_created = 0;
	}
	else
		m->dest_created = 1;
	/* a new table gets everything the source table has: can it? */
	if (m->dest_created == 1)
		MoveSchemaCheck(MoveTables(m));
	MoveRecordSet(m, psprintf("dest_created = %s", m->dest_created ? "true" : "false"));
}

/* Create the fence triggers of a remote table (waiting for writers briefly). */
static void
MoveFenceTrigger(RemoteConn *rc, const char *table, const char *col)
{
	char	   *sql;
	char		state[6];
	char	   *v;

	v = RemoteValue(rc, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_trigger WHERE tgrelid "
								 "OPERATOR(pg_catalog.=) %s::pg_catalog.regclass AND tgname OPERATOR(pg_catalog.=) 'snowseq_fence'",
								 quote_literal_cstr(table)), "look up the fence trigger");
	if (strcmp(v, "0") != 0)
		return;
	sql = psprintf("SELECT pg_catalog.set_config('lock_timeout', '%d', true); "
				   "CREATE TRIGGER snowseq_fence BEFORE INSERT OR UPDATE OR DELETE ON %s "
				   "FOR EACH ROW EXECUTE FUNCTION %s(%s); "
				   "CREATE TRIGGER snowseq_fence_truncate BEFORE TRUNCATE ON %s "
				   "FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)",
				   MOVE_TRIGGER_LOCK_MS, table, RExt(rc, "snowseq_fence"), quote_literal_cstr(col),
				   table, RExt(rc, "snowseq_fence"), quote_literal_cstr(col));
	/* the trigger's lock waits for running writes: never long */
	for (int attempt = 1;; attempt++)
	{
		if (RemoteTry(rc, sql, "create the fence trigger", state))
			return;
		if (strcmp(state, "55P03") != 0 || attempt == MOVE_TRIGGER_ATTEMPTS)
			RemoteCommand(rc, sql, "create the fence trigger");
		MoveSleep(20 * attempt);
	}
}

/* Step: create the destination table, fence, publication, foreign table, subscription. */
static void
MovePrepareObjects(Move *m)
{
	RemoteConn *src = Src(m);
	RemoteConn *dst = Dst(m);
	char	   *v;

	if (m->dest_created == 1)
	{
		char	   *cols = MoveRemoteColumns(src, m->src_table);
		char	   *pk = MoveRemotePkey(src, m->src_table);
		char	   *owner = RemoteValue(src, psprintf("SELECT pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(relowner)) "
													  "FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass",
													  quote_literal_cstr(m->src_table)), "read the table owner");
		char	   *grants = RemoteValue(src, psprintf("SELECT pg_catalog.string_agg(pg_catalog.format('GRANT %%s ON TABLE %%s TO %%s', "
													   "x.privilege_type, %s, CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' "
													   "ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(x.grantee)) END), '; ') "
													   "FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) x "
													   "WHERE c.oid OPERATOR(pg_catalog.=) %s::pg_catalog.regclass "
													   "AND x.grantee OPERATOR(pg_catalog.<>) c.relowner",
													   quote_literal_cstr(m->src_table), quote_literal_cstr(m->src_table)),
											 "read the table privileges");
		char	   *check = MoveIdCondition(m);

		/*
		 * One remote transaction: the table exists, marked as the move's, or
		 * not at all.  It is named like the source table until replication
		 * stops; its constraints carry the final name already.
		 */
		RemoteCommand(dst, psprintf("CREATE SCHEMA IF NOT EXISTS %s; "
									"CREATE TABLE %s (%s%s%s%s, CONSTRAINT %s CHECK (%s)); "
									"COMMENT ON TABLE %s IS %s; ALTER TABLE %s OWNER TO %s; %s%s"
									"CREATE TRIGGER snowseq_fence BEFORE INSERT OR UPDATE OR DELETE ON %s "
									"FOR EACH ROW EXECUTE FUNCTION %s(%s); "
									"CREATE TRIGGER snowseq_fence_truncate BEFORE TRUNCATE ON %s "
									"FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)",
									quote_identifier(m->dst_nsp), m->src_table, cols,
									pk ? ", CONSTRAINT " : "", pk ? quote_identifier(psprintf("%s_pkey", m->dst_rel)) : "",
									pk ? psprintf(" %s", pk) : "",
									quote_identifier(psprintf("%s_genes", m->dst_rel)), check,
									m->src_table, quote_literal_cstr(MoveCopyMark(m)), m->src_table, owner,
									grants ? grants : "", grants ? "; " : "",
									m->src_table, RExt(dst, "snowseq_fence"), quote_literal_cstr(m->id_col),
									m->src_table, RExt(dst, "snowseq_fence"), quote_literal_cstr(m->id_col)),
					  "create the destination table");
		MoveSchemaCreate(MoveTables(m));
	}
	else
	{
		/* an empty table that matches: forget its old fences */
		RemoteCommand(dst, psprintf("SELECT %s(%s)", RExt(dst, "snowseq_fence_clear"),
									quote_literal_cstr(m->src_table)), "clear the fences of the destination table");
		MoveFenceTrigger(dst, m->src_table, m->id_col);
	}

	/* the source: fence trigger, an open fence, a publication of the range */
	MoveFenceTrigger(src, m->src_table, m->id_col);
	{
		bool		has_lo,
					has_hi;
		int64		lo,
					hi;

		MoveIds(m, &has_lo, &lo, &has_hi, &hi);
		v = RemoteValue(src, psprintf("SELECT %s(%s, %s, %s, %s, %s)", RExt(src, "snowseq_fence_open"),
									  quote_literal_cstr(m->token), quote_literal_cstr(m->src_table),
									  Int8OrNull(has_lo, lo), Int8OrNull(has_hi, hi),
									  quote_literal_cstr(m->dst_name)),
						"open the fence");
	}
	m->fence_id = pg_strtoint32(v);
	RemoteCommand(src, psprintf("CREATE PUBLICATION %s FOR TABLE ONLY %s WHERE (%s) "
								"WITH (publish = 'insert, update, delete')",
								quote_identifier(m->token), m->src_table, MoveIdCondition(m)),
				  "create the publication");

	/*
	 * The destination subscribes.  The connection string holds no secret:
	 * the destination authenticates to the source with its own password
	 * file or certificate, so nothing in this SQL text is worth hiding.
	 */
	{
		char		state[6];
		char	   *err = RemoteTryMessage(dst, psprintf("CREATE SUBSCRIPTION %s CONNECTION %s PUBLICATION %s "
														 "WITH (slot_name = %s, create_slot = true, copy_data = true, enabled = true, "
														 "streaming = off, binary = false)",
														 quote_identifier(m->token),
														 quote_literal_cstr(RemoteConninfo(GetForeignServerByName(m->src_name, false)->serverid)),
														 quote_identifier(m->token), quote_literal_cstr(m->token)),
										   "create the subscription", state);

		if (err != NULL && strncmp(state, "08", 2) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("server \"%s\" could not connect to server \"%s\" to copy the genes", m->dst_name, m->src_name),
					 errdetail_internal("%s", err),
					 errhint("Moves send no password: give the operating system user of server \"%s\" a password file entry "
							 "for server \"%s\" (~/.pgpass, or the file named by the passfile option of the foreign server), "
							 "or use certificate authentication between shard servers.", m->dst_name, m->src_name)));
		if (err != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("could not create the subscription on server \"%s\": %s", m->dst_name, err)));
	}
	v = RemoteValue(dst, psprintf("SELECT oid FROM pg_catalog.pg_subscription WHERE subname OPERATOR(pg_catalog.=) %s",
								  quote_literal_cstr(m->token)), "look up the subscription");
	m->sub_oid = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;

	/*
	 * The router: a foreign table on the new table, not attached.  Local
	 * writes come last, so that no transaction stays open here while the
	 * servers work.
	 */
	Sql(psprintf("CREATE FOREIGN TABLE %s (%s) SERVER %s OPTIONS (schema_name %s, table_name %s%s)",
				 m->new_part_q, m->new_cols, quote_identifier(m->dst_name),
				 quote_literal_cstr(m->dst_nsp), quote_literal_cstr(m->dst_rel),
				 m->new_opts ? m->new_opts : ""), SPI_OK_UTILITY);
	if (m->new_colopts != NULL)
		Sql(psprintf("ALTER FOREIGN TABLE %s %s", m->new_part_q, m->new_colopts + 1), SPI_OK_UTILITY);

	MoveRecordSet(m, psprintf("state = 'copy', fence_id = %d, sub_oid = %u", m->fence_id, m->sub_oid));
}

/* ---------------------------------------------------------------------
 * Copy and catch up
 * ---------------------------------------------------------------------
 */

/* Fail if the subscription reported an error. */
static void
MoveCheckSubscription(Move *m, const char *errors)
{
	if (errors != NULL && strcmp(errors, "0") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_EXCEPTION),
				 errmsg("copying genes %d to %d of table \"%s\" to server \"%s\" failed",
						m->first, m->last, m->parent_rel, m->dst_name),
				 errdetail("The subscription reported %s errors.", errors),
				 errhint("The server logs of \"%s\" and \"%s\" say why; the move was undone.",
						 m->dst_name, m->src_name)));
}

/* The source's WAL position now, flushed, so the walsender can send it. */
static char *
MoveSourceLsn(Move *m)
{
	/* taking an xid makes the commit flush everything before the position */
	return RemoteValue(Src(m), "SELECT pg_catalog.pg_current_wal_insert_lsn()::text, pg_catalog.txid_current()",
					   "read the WAL position");
}

/*
 * Wait until the subscription has applied everything the source wrote
 * before lsn; false after timeout_ms (0: fail only if nothing moves for
 * MOVE_STALL_MS).
 */
static bool
MoveWaitApplied(Move *m, const char *lsn, int timeout_ms)
{
	TimestampTz start = GetCurrentTimestamp();
	char	   *sql = psprintf("SELECT coalesce(w.latest_end_lsn OPERATOR(pg_catalog.>=) %s::pg_catalog.pg_lsn, false), "
							   "coalesce(w.latest_end_lsn::text, ''), "
							   "(SELECT coalesce(st.sync_error_count, 0) OPERATOR(pg_catalog.+) coalesce(st.apply_error_count, 0) "
							   "FROM pg_catalog.pg_stat_subscription_stats st WHERE st.subname OPERATOR(pg_catalog.=) %s) "
							   "FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_stat_subscription w ON w.subname OPERATOR(pg_catalog.=) %s "
							   "AND w.relid IS NULL",
							   quote_literal_cstr(lsn), quote_literal_cstr(m->token), quote_literal_cstr(m->token));
	char	   *last = NULL;
	TimestampTz progress = start;

	for (;;)
	{
		PGresult   *res = RemoteExec(Dst(m), sql, "read the subscription's progress");
		bool		done = strcmp(PQgetvalue(res, 0, 0), "t") == 0;

		MoveCheckSubscription(m, PQgetisnull(res, 0, 2) ? NULL : PQgetvalue(res, 0, 2));
		if (last == NULL || strcmp(last, PQgetvalue(res, 0, 1)) != 0)
		{
			last = pstrdup(PQgetvalue(res, 0, 1));
			progress = GetCurrentTimestamp();
		}
		PQclear(res);
		if (done)
			return true;
		if (timeout_ms > 0 && MsSince(start) > timeout_ms)
			return false;
		if (timeout_ms == 0 && MsSince(progress) > MOVE_STALL_MS)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_EXCEPTION),
					 errmsg("the subscription on server \"%s\" made no progress for %d seconds",
							m->dst_name, MOVE_STALL_MS / 1000)));
		MoveSleep(timeout_ms > 0 ? 2 : 50);
	}
}

/* Step: the copy begins: the rows it has to copy, for its progress. */
static void
MoveCopyStart(Move *m)
{
	char	   *rows = RemoteValue(Src(m), psprintf("SELECT pg_catalog.count(*) FROM %s WHERE %s",
												   m->src_table, MoveIdCondition(m)),
								   "count the rows to copy");

	m->copy_start = m->copy_noticed = m->copy_probed = GetCurrentTimestamp();
	m->copied = false;
	MoveRecordSet(m, psprintf("rows_total = %s, rows_copied = 0, copy_started_at = pg_catalog.clock_timestamp(), "
							  "progress_at = pg_catalog.clock_timestamp()", rows));
}

/*
 * Record the copy's progress, as the destination and the source see it:
 * rows copied, the copy's size, the subscription's lag.
 */
static void
MoveCopyProgress(Move *m, const char *rows)
{
	char	   *bytes = RemoteValue(Dst(m), psprintf("SELECT pg_catalog.pg_table_size(pg_catalog.to_regclass(%s))",
													 quote_literal_cstr(m->src_table)),
									"read the size of the copy");
	char	   *lag = RemoteValue(Src(m), psprintf("SELECT pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), "
												   "confirmed_flush_lsn)::pg_catalog.int8 FROM pg_catalog.pg_replication_slots "
												   "WHERE slot_name OPERATOR(pg_catalog.=) %s",
												   quote_literal_cstr(m->token)),
								  "read the lag of the subscription");

	MoveRecordSet(m, psprintf("rows_copied = %s, bytes_copied = %s, lag_bytes = %s, "
							  "progress_at = pg_catalog.clock_timestamp()",
							  rows ? rows : "rows_copied", bytes ? bytes : "NULL", lag ? lag : "NULL"));
}

/*
 * Step: watch the copy for a while (MOVE_PROGRESS_MS), then record its
 * progress (committed by the caller, for snowseq_move_progress).  Once the
 * copy is done, catch up twice (the second is short) and set m->copied.
 */
static void
MoveCopyWatch(Move *m)
{
	char	   *sql = psprintf("SELECT sr.srsubstate, coalesce(st.sync_error_count, 0) OPERATOR(pg_catalog.+) "
							   "coalesce(st.apply_error_count, 0), "
							   "(SELECT tuples_processed FROM pg_catalog.pg_stat_progress_copy p "
							   "WHERE p.relid OPERATOR(pg_catalog.=) sr.srrelid LIMIT 1) "
							   "FROM pg_catalog.pg_subscription s "
							   "JOIN pg_catalog.pg_subscription_rel sr ON sr.srsubid OPERATOR(pg_catalog.=) s.oid "
							   "LEFT JOIN pg_catalog.pg_stat_subscription_stats st ON st.subid OPERATOR(pg_catalog.=) s.oid "
							   "WHERE s.subname OPERATOR(pg_catalog.=) %s",
							   quote_literal_cstr(m->token));
	TimestampTz watch = GetCurrentTimestamp();
	char	   *rows = NULL;
	bool		ready = false;

	while (!ready && MsSince(watch) < MOVE_PROGRESS_MS)
	{
		PGresult   *res = RemoteExec(Dst(m), sql, "read the state of the copy");

		if (PQntuples(res) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("subscription %s on server \"%s\" is gone", m->token, m->dst_name)));
		MoveCheckSubscription(m, PQgetvalue(res, 0, 1));
		ready = strcmp(PQgetvalue(res, 0, 0), "r") == 0;
		if (!PQgetisnull(res, 0, 2))
			rows = pstrdup(PQgetvalue(res, 0, 2));
		if (!ready && MsSince(m->copy_noticed) > 10000)
		{
			ereport(NOTICE,
					(errmsg("copying genes %d to %d to server \"%s\": %s rows after %.0f s",
							m->first, m->last, m->dst_name,
							rows ? rows : "?", MsSince(m->copy_start) / 1000)));
			m->copy_noticed = GetCurrentTimestamp();
		}
		PQclear(res);
		if (ready)
			break;
		/* the source going down must not leave the move waiting forever */
		if (MsSince(m->copy_probed) > 2000)
		{
			RemoteCommand(Src(m), "SELECT 1", "reach the source");
			m->copy_probed = GetCurrentTimestamp();
		}
		MoveSleep(100);
	}
	if (!ready)
	{
		MoveCopyProgress(m, rows);
		return;
	}
	/* indexes on the copied rows at once, before the catch-up */
	if (m->dest_created == 1)
		MoveSchemaIndexes(MoveTables(m));
	SNOWSEQ_TESTPOINT("move_after_copy");
	(void) MoveWaitApplied(m, MoveSourceLsn(m), 0);
	(void) MoveWaitApplied(m, MoveSourceLsn(m), 0);
	rows = RemoteValue(Dst(m), psprintf("SELECT pg_catalog.count(*) FROM %s", m->src_table), "count the copied rows");
	ereport(NOTICE,
			(errmsg("copied %s rows of genes %d to %d to server \"%s\" in %.1f s",
					rows, m->first, m->last, m->dst_name, MsSince(m->copy_start) / 1000)));
	MoveCopyProgress(m, rows);
	MoveRecordSet(m, "copied_at = pg_catalog.clock_timestamp()");
	m->copied = true;
}

/* ---------------------------------------------------------------------
 * Block and switch
 * ---------------------------------------------------------------------
 */

/* Set the fence of the move on the source. */
static void
MoveFence(Move *m, const char *state)
{
	RemoteCommand(Src(m), psprintf("SELECT %s(%d, %s)", RExt(Src(m), "snowseq_fence_state"),
								   m->fence_id, quote_literal_cstr(state)), "set the fence");
}

/* Drop the subscription: its worker stops, its slot on the source goes. */
static void
MoveDropSubscription(Move *m)
{
	RemoteConn *dst = Dst(m);
	char	   *exists = RemoteValue(dst, psprintf("SELECT oid FROM pg_catalog.pg_subscription "
												   "WHERE subname OPERATOR(pg_catalog.=) %s",
												   quote_literal_cstr(m->token)), "look up the subscription");
	char		state[6];

	if (exists == NULL)
		return;
	/* its table-sync slots on the source are named after its oid */
	m->sub_oid = (Oid) strtoul(exists, NULL, 10);
	if (RemoteTry(dst, psprintf("DROP SUBSCRIPTION %s", quote_identifier(m->token)),
				  "drop the subscription", state))
		return;
	/* the source cannot be reached: drop it without its slot */
	RemoteCommand(dst, psprintf("ALTER SUBSCRIPTION %s DISABLE", quote_identifier(m->token)),
				  "disable the subscription");
	RemoteCommand(dst, psprintf("ALTER SUBSCRIPTION %s SET (slot_name = NONE)", quote_identifier(m->token)),
				  "detach the subscription from its slot");
	RemoteCommand(dst, psprintf("DROP SUBSCRIPTION %s", quote_identifier(m->token)),
				  "drop the subscription");
}

/*
 * Step: hold back writes to the range, catch up for the last time, stop
 * replicating, and let the held writers fail (and any later ones, until the
 * switch).
 */
static void
MoveBlock(Move *m)
{
	char	   *lsn;
	int			attempt;

	for (attempt = 1;; attempt++)
	{
		char	   *done;

		/* the locks first: a writer that sees the fence finds them held */
		if (!RemoteUsable(m->lock))
		{
			char	   *pid;

			(void) MoveSession(m, &m->lock, m->src_name);
			pid = RemoteValue(Lock(m), "SELECT pg_catalog.pg_backend_pid()", "read the session's process");
			m->lock_pid = pg_strtoint32(pid);
		}
		RemoteCommand(Lock(m), psprintf("SELECT pg_catalog.pg_advisory_lock(%d, %d), pg_catalog.pg_advisory_lock(%d, %d)",
										SNOWSEQ_LOCK_ALIVE, m->fence_id, SNOWSEQ_LOCK_BLOCK, m->fence_id),
					  "take the fence locks");
		MoveFence(m, "block");
		m->blocked_at = GetCurrentTimestamp();
		done = RemoteValue(Src(m), psprintf("SELECT %s(%d, %d)", RExt(Src(m), "snowseq_fence_wait"),
											m->fence_id, MOVE_LOCKERS_WAIT_MS),
						   "wait for running writes");
		if (strcmp(done, "t") == 0)
		{
			lsn = MoveSourceLsn(m);
			if (MoveWaitApplied(m, lsn, MOVE_FINAL_CATCHUP_MS))
				break;
		}
		/* let writes go on and try again later; replication carries on */
		MoveFence(m, "open");
		RemoteCommand(Lock(m), psprintf("SELECT pg_catalog.pg_advisory_unlock(%d, %d)",
										SNOWSEQ_LOCK_BLOCK, m->fence_id), "release the fence lock");
		if (attempt == MOVE_BLOCK_ATTEMPTS)
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not hold back writes to genes %d to %d of table %s on server \"%s\" long enough to catch up",
							m->first, m->last, m->src_table, m->src_name),
					 errdetail("%s", strcmp(done, "t") == 0 ?
							   "The subscription did not catch up in time." :
							   "Transactions writing to the table ran for more than 2 seconds."),
					 errhint("Retry when the source is less busy.")));
		ereport(NOTICE,
				(errmsg("writes to genes %d to %d go on: %s; trying again",
						m->first, m->last, strcmp(done, "t") == 0 ?
						"the subscription did not catch up in time" : "long transactions were writing")));
		MoveSleep(1000L * attempt);
	}

	/* everything up to the block is on the destination: stop replicating */
	MoveDropSubscription(m);
	if (m->dest_created == 1)
		MoveSchemaTriggersOn(MoveTables(m));
	if (strcmp(m->src_table, m->dst_table) != 0)
		RemoteCommand(Dst(m), psprintf("ALTER TABLE %s RENAME TO %s", m->src_table, quote_identifier(m->dst_rel)),
					  "rename the destination table");
	MoveFence(m, "reject");
	RemoteCommand(Lock(m), psprintf("SELECT pg_catalog.pg_advisory_unlock(%d, %d)",
									SNOWSEQ_LOCK_BLOCK, m->fence_id), "release the fence lock");
	MoveRecordSet(m, psprintf("state = 'switch', blocked_at = %s::pg_catalog.timestamptz",
							  quote_literal_cstr(timestamptz_to_str(m->blocked_at))));
}

/*
 * Rewrite the router: the partition's bounds, the new foreign table, the
 * map.  Idempotent: nothing happens if the new table is attached already.
 */
static void
MoveSwitchRouter(Move *m)
{
	char	   *lo;
	char	   *hi;
	char	   *plo = BoundSql(m->part_has_lo, m->part_lo, "MINVALUE");
	char	   *phi = BoundSql(m->part_has_hi, m->part_hi, "MAXVALUE");
	char	   *map = Ext("snowseq_shard_map");
	char	   *v;

	v = SqlValue(m->cxt, psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_inherits WHERE inhparent "
								  "OPERATOR(pg_catalog.=) %u AND inhrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)",
								  m->parent, quote_literal_cstr(m->new_part_q)));
	if (strcmp(v, "0") != 0)
		return;
	lo = strcmp(m->kind, "suffix") == 0 ? psprintf(INT64_FORMAT, (int64) m->first << SNOWSEQ_SEGMENT_BITS) : plo;
	hi = strcmp(m->kind, "prefix") == 0 ? psprintf(INT64_FORMAT, (int64) (m->last + 1) << SNOWSEQ_SEGMENT_BITS) : phi;

	Sql(psprintf("ALTER TABLE %s DETACH PARTITION %s", m->parent_q, m->part_q), SPI_OK_UTILITY);
	if (strcmp(m->kind, "prefix") == 0)
		Sql(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
					 m->parent_q, m->part_q, hi, phi), SPI_OK_UTILITY);
	else if (strcmp(m->kind, "suffix") == 0)
		Sql(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
					 m->parent_q, m->part_q, plo, lo), SPI_OK_UTILITY);
	Sql(psprintf("ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)",
				 m->parent_q, m->new_part_q, lo, hi), SPI_OK_UTILITY);
	if (strcmp(m->kind, "whole") == 0)
		Sql(psprintf("DROP FOREIGN TABLE %s", m->part_q), SPI_OK_UTILITY);

	/* the map: rows ending at first - 1 and last, the range to the new server */
	if (m->first > 0)
		Sql(psprintf("INSERT INTO %s (upper_gene, shard) SELECT %d, (SELECT shard FROM %s WHERE upper_gene "
					 "OPERATOR(pg_catalog.>=) %d ORDER BY upper_gene LIMIT 1) ON CONFLICT (upper_gene) DO NOTHING",
					 map, m->first - 1, map, m->first - 1), SPI_OK_INSERT);
	Sql(psprintf("INSERT INTO %s (upper_gene, shard) SELECT %d, (SELECT shard FROM %s WHERE upper_gene "
				 "OPERATOR(pg_catalog.>=) %d ORDER BY upper_gene LIMIT 1) ON CONFLICT (upper_gene) DO NOTHING",
				 map, m->last, map, m->last), SPI_OK_INSERT);
	Sql(psprintf("DELETE FROM %s WHERE upper_gene OPERATOR(pg_catalog.>=) %d AND upper_gene OPERATOR(pg_catalog.<) %d",
				 map, m->first, m->last), SPI_OK_DELETE);
	Sql(psprintf("UPDATE %s SET shard = %s WHERE upper_gene OPERATOR(pg_catalog.=) %d",
				 map, quote_literal_cstr(m->dst_name), m->last), SPI_OK_UPDATE);
	/* neighbours on the same server become one row */
	Sql(psprintf("DELETE FROM %s WHERE upper_gene OPERATOR(pg_catalog.=) %d AND shard OPERATOR(pg_catalog.=) %s",
				 map, m->first - 1, quote_literal_cstr(m->dst_name)), SPI_OK_DELETE);
	Sql(psprintf("DELETE FROM %s WHERE upper_gene OPERATOR(pg_catalog.=) %d AND shard OPERATOR(pg_catalog.=) "
				 "(SELECT shard FROM %s WHERE upper_gene OPERATOR(pg_catalog.>) %d ORDER BY upper_gene LIMIT 1)",
				 map, m->last, map, m->last), SPI_OK_DELETE);
}

static int	switch_wait_ms = 0;	/* 0: NOWAIT */

/*
 * One try at the parent's lock: without queueing (NOWAIT), or with a short
 * lock_timeout, since a lock request that waits makes every later query of
 * the table wait behind it.
 */
static void
MoveLockParentOnce(Move *m)
{
	if (switch_wait_ms == 0)
		Sql(psprintf("LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE NOWAIT", m->parent_q), SPI_OK_UTILITY);
	else
	{
		Sql(psprintf("SELECT pg_catalog.set_config('lock_timeout', '%d', true)", switch_wait_ms), SPI_OK_SELECT);
		Sql(psprintf("LOCK TABLE ONLY %s IN ACCESS EXCLUSIVE MODE", m->parent_q), SPI_OK_UTILITY);
	}
	/* with the parent locked, nothing else should wait long */
	Sql(psprintf("SELECT pg_catalog.set_config('lock_timeout', '%d', true)", MOVE_SWITCH_MAX_WAIT_MS), SPI_OK_SELECT);
}

/* Whether a backend on the source waits for the source transaction. */
static bool
MoveSourceStuck(Move *m)
{
	char	   *n = RemoteValue(Src(m), psprintf("SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_activity "
												 "WHERE %d OPERATOR(pg_catalog.=) ANY (pg_catalog.pg_blocking_pids(pid))",
												 m->lock_pid),
							  "look for writers waiting on the move");

	return strcmp(n, "0") != 0;
}

/*
 * Take the parent's lock, first without queueing, then queueing briefly.
 * With check_stuck, give up (false) as soon as a backend on the source waits
 * for the open source transaction: a router statement doing so holds the
 * parent's lock, and would never let go of it.
 */
static bool
MoveLockParent(Move *m, bool check_stuck)
{
	TimestampTz start = GetCurrentTimestamp();
	int			tries = 0;

	switch_wait_ms = 0;
	for (;;)
	{
		ErrorData  *err = MoveTry(m, MoveLockParentOnce);

		tries++;
		if (err == NULL)
			break;
		if (err->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE || MsSince(start) > MOVE_SWITCH_BUDGET_MS)
			ReThrowError(err);
		if (check_stuck && tries % 10 == 0 && MoveSourceStuck(m))
			return false;
		/* long queries on the table: queue behind them, briefly, more and more */
		if (MsSince(start) > MOVE_SWITCH_NOWAIT_MS)
			switch_wait_ms = Min(Max(switch_wait_ms * 2, 100), MOVE_SWITCH_MAX_WAIT_MS);
		MoveSleep(switch_wait_ms == 0 ? 2 : 20);
	}
	if (MsSince(start) > MOVE_SWITCH_NOWAIT_MS)
		ereport(NOTICE,
				(errmsg("the switch waited %.1f s (%d tries) for queries on table \"%s\" to end",
						MsSince(start) / 1000, tries, m->parent_rel)));
	return true;
}

/* Open the source transaction: the moved rows go (a split), the fence becomes moved. */
static void
MoveSourceTransaction(Move *m)
{
	RemoteCommand(Lock(m), "BEGIN", "begin the source transaction");
	if (strcmp(m->kind, "whole") != 0)
		RemoteCommand(Lock(m), psprintf("SET LOCAL session_replication_role = replica; DELETE FROM %s WHERE %s",
										m->src_table, MoveIdCondition(m)),
					  "delete the moved rows");
	RemoteCommand(Lock(m), psprintf("SELECT %s(%d, 'moved')", RExt(Lock(m), "snowseq_fence_state"), m->fence_id),
				  "mark the fence moved");
}

/*
 * Hold the parent's lock beyond the router's commit, until the prepared
 * source transaction has committed: a reader planning on the new bounds in
 * between would otherwise read the source table with a snapshot taken
 * before the commit (the snapshot comes before the lock it then waits for)
 * and see the moved rows twice.  A session lock, released by
 * MoveReleaseParent or, if the mover dies, with its backend.
 */
static void
MoveHoldParent(Move *m)
{
	LockRelId	rel = {m->parent, MyDatabaseId};

	LockRelationIdForSession(&rel, AccessExclusiveLock);
	m->parent_held = true;
}

/* Let go of the parent's session lock, if held. */
static void
MoveReleaseParent(Move *m)
{
	LockRelId	rel = {m->parent, MyDatabaseId};

	if (!m->parent_held)
		return;
	UnlockRelationIdForSession(&rel, AccessExclusiveLock);
	m->parent_held = false;
}

/*
 * Step: the switch, in one router transaction.  The source transaction
 * (a split deletes the moved rows in it; the rest of the partition stays in
 * the table) runs first, then the router takes the parent's lock, rewrites
 * partitions and map, and prepares the source transaction while it still
 * holds the lock; the router commits state 'switched' when the step ends,
 * and only then is the prepared source transaction committed (MoveFinish),
 * so the router's record decides, whenever either side dies.  A router
 * statement that updates a moved row while the delete runs waits for the
 * source transaction holding the parent's lock: then the source
 * transaction is rolled back (that writer fails at the fence and retries),
 * the router takes its lock first, and the delete runs under it: no router
 * statement can be waiting on the source then, but every range of the
 * table waits for the delete.
 */
static void
MoveSwitch(Move *m)
{
	MoveSourceTransaction(m);
	if (!MoveLockParent(m, strcmp(m->kind, "whole") != 0))
	{
		ereport(NOTICE,
				(errmsg("writes to moved rows waited on their delete: deleting under the router's lock")));
		RemoteCommand(Lock(m), "ROLLBACK", "roll back the source transaction");
		(void) MoveLockParent(m, false);
		MoveSourceTransaction(m);
	}
	MoveSwitchRouter(m);

	/*
	 * Two commits, one decision: the source transaction is prepared, and
	 * holds the source table until it is resolved; the router's commit of
	 * state 'switched' decides whether it commits (MoveFinish) or rolls back
	 * (MoveRollback).  A router that dies in between leaves no half-moved
	 * state readable: the source table waits for the resolution, which the
	 * router runs at its next start.  No router query runs on the source
	 * now (the router holds the parent's lock), so the lock is quick; it
	 * also keeps foreign keys from appearing between the check and the
	 * commit.
	 */
	RemoteCommand(Lock(m), psprintf("SET LOCAL lock_timeout = %d; LOCK TABLE %s IN ACCESS EXCLUSIVE MODE",
									MOVE_SWITCH_MAX_WAIT_MS, m->src_table),
				  "lock the source table");
	MoveRefuseReferenced(m, Lock(m));
	RemoteCommand(Lock(m), psprintf("PREPARE TRANSACTION %s", MoveGid(m)), "prepare the source transaction");
	MoveHoldParent(m);
	SNOWSEQ_TESTPOINT("move_after_source_commit");
	MoveRecordSet(m, "state = 'switched', switched_at = pg_catalog.clock_timestamp(), "
				  "pause_ms = pg_catalog.round((extract(epoch FROM pg_catalog.clock_timestamp() "
				  "OPERATOR(pg_catalog.-) blocked_at) OPERATOR(pg_catalog.*) 1000)::pg_catalog.numeric, 1)");
}

/* ---------------------------------------------------------------------
 * Finish, undo, resolve
 * ---------------------------------------------------------------------
 */

/* Drop a replication slot, stopping the walsender that uses it first. */
static void
MoveDropSlotNamed(RemoteConn *rc, const char *name)
{
	char	   *lit = quote_literal_cstr(name);
	char	   *drop = psprintf("SELECT pg_catalog.pg_drop_replication_slot(slot_name) FROM pg_catalog.pg_replication_slots "
								"WHERE slot_name OPERATOR(pg_catalog.=) %s", lit);
	char		state[6];

	for (int i = 0;; i++)
	{
		RemoteCommand(rc, psprintf("SELECT pg_catalog.pg_terminate_backend(active_pid) FROM pg_catalog.pg_replication_slots "
								   "WHERE slot_name OPERATOR(pg_catalog.=) %s AND active_pid IS NOT NULL", lit),
					  "stop the walsender of the slot");
		/* a terminated walsender lets go of its slot a moment later */
		if (RemoteTry(rc, drop, "drop the replication slot", state))
			return;
		if (i == 50)
			RemoteCommand(rc, drop, "drop the replication slot");
		MoveSleep(100);
	}
}

/* Drop the replication slots of the move on the source, if any are left. */
static void
MoveDropSlots(Move *m)
{
	RemoteConn *src = Src(m);
	PGresult   *res;

	/* the subscription's slot, and its table-sync slots, named after its oid */
	res = RemoteExec(src, psprintf("SELECT slot_name FROM pg_catalog.pg_replication_slots "
								   "WHERE slot_name OPERATOR(pg_catalog.=) %s OR slot_name::text OPERATOR(pg_catalog.~) %s",
								   quote_literal_cstr(m->token),
								   quote_literal_cstr(OidIsValid(m->sub_oid) ? psprintf("^pg_%u_sync_", m->sub_oid) : "^$")),
					 "list the replication slots");
	for (int i = 0; i < PQntuples(res); i++)
	{
		MoveDropSlotNamed(src, PQgetvalue(res, i, 0));
		MoveNote(m, m->src_name, psprintf("replication slot %s", PQgetvalue(res, i, 0)), "dropped");
	}
	PQclear(res);
}

/* Drop the publication of the move on the source. */
static void
MoveDropPublication(Move *m)
{
	RemoteCommand(Src(m), psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(m->token)),
				  "drop the publication");
}

/* Delete the moved rows left on the source, in batches, as a move (no triggers). */
static void
MoveDeleteSource(Move *m)
{
	RemoteConn *src = Src(m);
	char	   *sql = psprintf("DELETE FROM %s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM %s WHERE %s LIMIT %d))",
							   m->src_table, m->src_table, MoveIdCondition(m), MOVE_DELETE_BATCH);
	int64		total = 0;

	MoveRefuseReferenced(m, src);
	RemoteCommand(src, "SET session_replication_role = replica", "turn triggers off");
	for (;;)
	{
		PGresult   *res = RemoteExec(src, sql, "delete the moved rows");
		int64		n = pg_strtoint64(PQcmdTuples(res));

		PQclear(res);
		total += n;
		if (n == 0)
			break;
	}
	RemoteCommand(src, "RESET session_replication_role", "turn triggers on");
	if (total > 0)
		MoveNote(m, m->src_name, psprintf("%s: " INT64_FORMAT " moved rows", m->src_table, total), "deleted");
}

/* Step: after the switch, remove what the source and destination no longer need. */
static void
MoveFinish(Move *m)
{
	char	   *rows;

	RemoteClose(m->lock);
	MoveResolvePrepared(m, true);
	MoveReleaseParent(m);
	MoveDropSubscription(m);
	MoveDropPublication(m);
	MoveDropSlots(m);
	if (strcmp(m->kind, "whole") == 0)
		MoveDeleteSource(m);
	RemoteCommand(Dst(m), psprintf("COMMENT ON TABLE %s IS %s", m->dst_table,
								   quote_literal_cstr(psprintf("snowseq: genes %d to %d of %s, moved here by %s",
															   m->first, m->last, m->parent_q, m->token))),
				  "mark the destination table");
	rows = RemoteValue(Dst(m), psprintf("SELECT pg_catalog.count(*) OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) "
										"pg_catalog.pg_table_size(%s) FROM %s",
										quote_literal_cstr(m->dst_table), m->dst_table), "count the moved rows");
	MoveRecordSet(m, psprintf("state = 'done', finished_at = pg_catalog.clock_timestamp(), "
							  "(rows_copied, bytes_copied) = (%s)", rows));
	MoveNote(m, NULL, "move", "finished");
}

/* Undo actions, each on its own so that one failing leaves the others done. */
static void
MoveUndoLock(Move *m)
{
	/* closing the session aborts the source transaction and frees the locks */
	RemoteClose(m->lock);
}

/* Undo: roll back the prepared source transaction, if any. */
static void
MoveRollbackSource(Move *m)
{
	MoveResolvePrepared(m, false);
}

/* set by MoveUndoFence: the source transaction had committed */
static bool undo_fence_moved;

/* Undo: remove the fence, unless the source says the move switched. */
static void
MoveUndoFence(Move *m)
{
	char	   *v;

	/* waits for the source transaction: its outcome decides */
	v = RemoteValue(Src(m), psprintf("SELECT %s(%s)", RExt(Src(m), "snowseq_fence_drop"),
									 quote_literal_cstr(m->token)), "remove the fence");
	if (strcmp(v, "t") == 0)
		return;
	v = RemoteValue(Src(m), psprintf("SELECT state FROM %s WHERE token OPERATOR(pg_catalog.=) %s",
									 RExt(Src(m), "snowseq_fence"), quote_literal_cstr(m->token)),
					"read the fence");
	undo_fence_moved = v != NULL && strcmp(v, "moved") == 0;
}

/* Undo: drop the copy the move made, or empty the table it took. */
static void
MoveUndoTable(Move *m)
{
	RemoteConn *dst = Dst(m);
	PGresult   *res;
	char	   *table;
	char	   *rel;
	char	   *mark;

	/* renamed in the block, or still under the source's name */
	res = RemoteExec(dst, psprintf("SELECT t::text, pg_catalog.obj_description(t, 'pg_class'), c.relname "
								   "FROM (SELECT coalesce(pg_catalog.to_regclass(%s), pg_catalog.to_regclass(%s)) t) s "
								   "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.t",
								   quote_literal_cstr(m->dst_table), quote_literal_cstr(m->src_table)),
					 "look up the copy");
	if (PQntuples(res) == 0)
	{
		PQclear(res);
		return;
	}
	table = pstrdup(PQgetvalue(res, 0, 0));
	mark = PQgetisnull(res, 0, 1) ? NULL : pstrdup(PQgetvalue(res, 0, 1));
	rel = pstrdup(PQgetvalue(res, 0, 2));
	PQclear(res);
	if (m->dest_created == 1 && mark != NULL && strcmp(mark, MoveCopyMark(m)) == 0)
	{
		RemoteCommand(dst, psprintf("DROP TABLE %s", table), "drop the copy");
		MoveNote(m, m->dst_name, psprintf("table %s", table), "dropped");
	}
	else if (m->dest_created == 0 && MoveTableReadBy(m, m->dst_name, m->dst_nsp, rel) == NULL)
	{
		/* it was empty before the move */
		RemoteCommand(dst, psprintf("TRUNCATE %s", table), "empty the copy");
		MoveNote(m, m->dst_name, psprintf("table %s", table), "emptied");
	}
}

/* Undo: drop the router's foreign table on the copy, if not attached. */
static void
MoveUndoPartition(Move *m)
{
	char	   *v = SqlValue(m->cxt, psprintf("SELECT NOT c.relispartition FROM pg_catalog.pg_class c "
											  "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)",
											  quote_literal_cstr(m->new_part_q)));

	if (v != NULL && v[0] == 't')
		Sql(psprintf("DROP FOREIGN TABLE %s", m->new_part_q), SPI_OK_UTILITY);
}

/* Run an undo action; on failure, note what is left behind. */
static void
MoveUndoStep(Move *m, MoveStep step, const char *server, const char *object)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
	{
		m->leftovers = true;
		MoveNote(m, server, object, psprintf("left: %s", err->message));
	}
}

typedef enum MoveUndone
{
	UNDONE,						/* the old placement serves, as it always did */
	SWITCHED,					/* the source transaction committed: finish */
	UNKNOWN						/* the source cannot say: nothing was touched */
} MoveUndone;

/*
 * Undo a move that did not switch: the old placement serves throughout.
 * If the source says the move did switch (its transaction committed), or
 * cannot say, nothing is undone.
 */
static MoveUndone
MoveRollback(Move *m)
{
	bool		src_known;

	m->leftovers = false;
	MoveUndoLock(m);
	/* the router did not commit its switch: neither does the source */
	if (strcmp(m->state, "switch") == 0)
	{
		MoveUndoStep(m, MoveRollbackSource, m->src_name, psprintf("prepared transaction %s", m->token));
		if (m->leftovers)
		{
			MoveNote(m, m->src_name, "move", "unresolved: the prepared source transaction could not be rolled back");
			return UNKNOWN;
		}
	}
	/* nothing was created before the checks ended */
	if (strcmp(m->state, "prepare") == 0 && m->dest_created < 0)
	{
		MoveNote(m, NULL, "move", "undone");
		return UNDONE;
	}
	undo_fence_moved = false;
	MoveUndoStep(m, MoveUndoFence, m->src_name, psprintf("fence of %s", m->src_table));
	src_known = !m->leftovers;
	if (undo_fence_moved)
		return SWITCHED;
	if (!src_known && strcmp(m->state, "switch") == 0)
	{
		MoveNote(m, m->src_name, "move", "unresolved: the source cannot tell whether it switched");
		return UNKNOWN;
	}
	MoveUndoStep(m, MoveDropSubscription, m->dst_name, psprintf("subscription %s", m->token));
	if (src_known)
		MoveUndoStep(m, MoveUndoTable, m->dst_name, psprintf("table %s", m->dst_table));
	else
	{
		/* the copy may be all there is of the rows: keep it */
		m->leftovers = true;
		MoveNote(m, m->dst_name, psprintf("table %s", m->dst_table), "kept: the source cannot tell whether the move switched");
	}
	MoveUndoStep(m, MoveDropPublication, m->src_name, psprintf("publication %s", m->token));
	MoveUndoStep(m, MoveDropSlots, m->src_name, psprintf("replication slot %s", m->token));
	MoveUndoStep(m, MoveUndoPartition, NULL, psprintf("foreign table %s", m->new_part_q));
	MoveNote(m, NULL, "move", m->leftovers ? "undone, with leftovers" : "undone");
	return UNDONE;
}

/* Step: finish a move whose source transaction committed, switching the router. */
static void
MoveRollForward(Move *m)
{
	(void) MoveLockParent(m, false);
	MoveSwitchRouter(m);
	MoveRecordSet(m, "state = 'switched', switched_at = pg_catalog.clock_timestamp()");
	MoveNote(m, NULL, "router", "switched");
}

/*
 * Bring a move that is not running to an end, from its committed state:
 * undo it, or finish it if it switched.  Records the outcome.
 */
static void
MoveResolve(Move *m, const char *error)
{
	ErrorData  *err = NULL;
	bool		forward = strcmp(m->state, "switched") == 0;
	MoveUndone undone = UNDONE;

	if (!forward)
		undone = MoveRollback(m);
	if (undone == UNKNOWN)
	{
		MoveCloseSessions(m);
		return;
	}
	if (undone == SWITCHED)
	{
		err = MoveTry(m, MoveRollForward);
		forward = err == NULL;
		if (err != NULL)
			MoveNote(m, NULL, "router", psprintf("not switched: %s", err->message));
	}
	if (forward)
	{
		err = MoveTry(m, MoveFinish);
		if (err != NULL)
		{
			m->leftovers = true;
			MoveNote(m, NULL, "move", psprintf("switched, left: %s", err->message));
			MoveRecordSet(m, psprintf("state = 'switched', error = %s", quote_literal_cstr(err->message)));
		}
	}
	else if (err == NULL)
		MoveRecordSet(m, psprintf("state = '%s', finished_at = pg_catalog.clock_timestamp(), error = %s",
								  m->leftovers ? "rollback" : "failed",
								  error ? quote_literal_cstr(error) : "NULL"));
	MoveCloseSessions(m);
}

/* ---------------------------------------------------------------------
 * The procedures
 * ---------------------------------------------------------------------
 */

static int	CleanupMoves(Oid parent, Move *collect, bool switching_only, int elevel);
static void MoveReportCopy(Move *collect, Move *m);

/* The committed state of a move. */
static char *
MoveState(Move *m)
{
	return SqlValue(m->cxt, psprintf("SELECT state FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
									 Ext("snowseq_moves"), m->id));
}

/* Let go of a move: its sessions and its advisory lock. */
static void
MoveRelease(Move *m)
{
	MoveReleaseParent(m);
	MoveCloseSessions(m);
	Sql(psprintf("SELECT pg_catalog.pg_advisory_unlock(%d, %d)", SNOWSEQ_LOCK_MOVE, (int32) m->id), SPI_OK_SELECT);
}

/*
 * Run one step of a move and commit.  On error undo the move (or finish it,
 * if the source committed its switch), then raise the error; returns false
 * if the move turned out complete after all.
 */
static bool
MoveRun(Move *m, MoveStep step, const char *next_state)
{
	ErrorData  *err = MoveTry(m, step);

	if (err != NULL)
	{
		m->state = MoveState(m);
		MoveResolve(m, err->message);
		SPI_commit();
		m->state = MoveState(m);
		MoveRelease(m);
		if (strcmp(m->state, "done") == 0)
		{
			/* the source committed before the error: the move is complete */
			ereport(WARNING,
					(errmsg("move " INT64_FORMAT " completed after an error: %s", m->id, err->message)));
			return false;
		}
		if (m->leftovers)
			ereport(WARNING,
					(errmsg("move " INT64_FORMAT " left objects behind", m->id),
					 errhint("SELECT * FROM snowseq_move_cleanup(); removes them once their servers are reachable.")));
		ReThrowError(err);
	}
	if (next_state != NULL)
		m->state = (char *) next_state;
	SPI_commit();
	return true;
}

/* Watch the copy to its end, committing its progress as it goes; false as MoveRun. */
static bool
MoveCopyAll(Move *m)
{
	while (!m->copied)
		if (!MoveRun(m, MoveCopyWatch, NULL))
			return false;
	return true;
}

/* Move genes first..last of a table to a server: the whole procedure. */
static void
MoveGenes(FunctionCallInfo fcinfo, Oid parent, int first, int last, const char *to_server)
{
	Move	   *m;

	MoveCheckNonAtomic(fcinfo);
	SPI_connect_ext(SPI_OPT_NONATOMIC);
	SetExtSchema(fcinfo);

	/* moves of this table that were interrupted end first */
	CleanupMoves(parent, NULL, false, NOTICE);
	SPI_commit();

	m = MoveNew();
	m->parent = parent;
	m->first = first;
	m->last = last;
	MovePlan(m, to_server);
	MoveRecordNew(m);
	SPI_commit();
	ereport(NOTICE,
			(errmsg("move " INT64_FORMAT ": genes %d to %d of table \"%s\" from server \"%s\" to server \"%s\"",
					m->id, first, last, m->parent_rel, m->src_name, m->dst_name)));

	if (!MoveRun(m, MovePrepareChecks, NULL) ||
		!MoveRun(m, MovePrepareObjects, "copy") ||
		!MoveRun(m, MoveCopyStart, NULL) ||
		!MoveCopyAll(m) ||
		!MoveRun(m, MoveBlock, "switch") ||
		!MoveRun(m, MoveSwitch, "switched"))
	{
		SPI_finish();
		return;
	}
	/* the router committed its switch: MoveFinish commits the source's */
	SNOWSEQ_TESTPOINT("move_after_router_commit");
	{
		char	   *pause = SqlValue(m->cxt, psprintf("SELECT pause_ms FROM %s WHERE move_id OPERATOR(pg_catalog.=) " INT64_FORMAT,
													  Ext("snowseq_moves"), m->id));

		ereport(NOTICE,
				(errmsg("genes %d to %d of table \"%s\" are on server \"%s\"; their writes were held back for %s ms",
						first, last, m->parent_rel, m->dst_name, pause ? pause : "?")));
	}
	{
		ErrorData  *err = MoveTry(m, MoveFinish);

		if (err != NULL)
		{
			MoveRecordSet(m, psprintf("error = %s", quote_literal_cstr(err->message)));
			ereport(WARNING,
					(errmsg("move " INT64_FORMAT " switched, but could not clean up: %s", m->id, err->message),
					 errhint("SELECT * FROM snowseq_move_cleanup(); finishes it.")));
		}
	}
	SPI_commit();
	MoveRelease(m);
	SPI_finish();
	MemoryContextDelete(m->cxt);
}

/* A move rebuilt from its record, for cleanup. */
static Move *
MoveLoad(HeapTuple t, TupleDesc d)
{
	Move	   *m = MoveNew();
	MemoryContext old = MemoryContextSwitchTo(m->cxt);
	bool		isnull;
	char	   *v;

#define COL(name) SPI_fnumber(d, name)
#define TEXT(name) (SPI_getvalue(t, d, COL(name)))
	m->id = DatumGetInt64(SPI_getbinval(t, d, COL("move_id"), &isnull));
	m->parent = DatumGetObjectId(SPI_getbinval(t, d, COL("parent"), &isnull));
	m->first = DatumGetInt32(SPI_getbinval(t, d, COL("first_gene"), &isnull));
	m->last = DatumGetInt32(SPI_getbinval(t, d, COL("last_gene"), &isnull));
	m->src_name = TEXT("source_server");
	m->dst_name = TEXT("dest_server");
	m->kind = TEXT("kind");
	m->part_q = TEXT("part_name");
	m->part_lo = DatumGetInt64(SPI_getbinval(t, d, COL("part_lower"), &isnull));
	m->part_has_lo = !isnull;
	m->part_hi = DatumGetInt64(SPI_getbinval(t, d, COL("part_upper"), &isnull));
	m->part_has_hi = !isnull;
	m->new_part_q = TEXT("new_part_name");
	m->src_table = TEXT("source_table");
	m->dst_table = TEXT("dest_table");
	m->id_col = TEXT("id_column");
	v = TEXT("dest_created");
	m->dest_created = v == NULL ? -1 : v[0] == 't' ? 1 : 0;
	m->token = TEXT("token");
	v = TEXT("fence_id");
	m->fence_id = v ? pg_strtoint32(v) : 0;
	v = TEXT("sub_oid");
	m->sub_oid = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
	m->state = TEXT("state");
	v = TEXT("mover");
	m->mover = v ? (Oid) strtoul(v, NULL, 10) : InvalidOid;
#undef COL
#undef TEXT
	m->parent_q = get_rel_name(m->parent) ?
		quote_qualified_identifier(get_namespace_name(get_rel_namespace(m->parent)), get_rel_name(m->parent)) :
		psprintf("%u", m->parent);
	m->parent_rel = get_rel_name(m->parent) ? get_rel_name(m->parent) : m->parent_q;
	m->dst_nsp = SPI_getvalue(t, d, SPI_fnumber(d, "dst_nsp"));
	m->src_rel = SPI_getvalue(t, d, SPI_fnumber(d, "src_rel"));
	m->dst_rel = SPI_getvalue(t, d, SPI_fnumber(d, "dst_rel"));
	MemoryContextSwitchTo(old);
	return m;
}

/*
 * Resolve the moves that are not running (of one table, or all; with
 * switching_only, those interrupted in or after the switch): undo or
 * finish them.  Reports into collect, if given, or at elevel.  Returns how
 * many are still unresolved (running ones do not count).
 */
static int
CleanupMoves(Oid parent, Move *collect, bool switching_only, int elevel)
{
	SPITupleTable *rows;
	uint64		n;
	int			left = 0;

	Sql(psprintf("SELECT *, (pg_catalog.parse_ident(dest_table))[1] AS dst_nsp, "
				 "(pg_catalog.parse_ident(dest_table))[2] AS dst_rel, "
				 "(pg_catalog.parse_ident(source_table))[2] AS src_rel "
				 "FROM %s WHERE state OPERATOR(pg_catalog.<>) ALL (ARRAY['done', 'failed']) %s%s ORDER BY move_id",
				 Ext("snowseq_moves"),
				 OidIsValid(parent) ? psprintf("AND parent OPERATOR(pg_catalog.=) %u ", parent) : "",
				 switching_only ? "AND state OPERATOR(pg_catalog.=) ANY (ARRAY['switch', 'switched'])" : ""),
		SPI_OK_SELECT);
	rows = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		Move	   *m = MoveLoad(rows->vals[i], rows->tupdesc);
		char	   *got = SqlValue(m->cxt, psprintf("SELECT pg_catalog.pg_try_advisory_lock(%d, %d)",
													SNOWSEQ_LOCK_MOVE, (int32) m->id));

		if (strcmp(got, "t") != 0)
			MoveNote(m, NULL, "move", "running");
		else
		{
			char	   *state;
			Oid			save_user;
			int			save_sec;

			/* at the router's start: as the role that ran the move, if it is still there */
			GetUserIdAndSecContext(&save_user, &save_sec);
			if (switching_only && OidIsValid(m->mover) &&
				SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(m->mover)))
				SetUserIdAndSecContext(m->mover, save_sec | SECURITY_LOCAL_USERID_CHANGE);
			MoveResolve(m, "interrupted");
			SetUserIdAndSecContext(save_user, save_sec);
			Sql(psprintf("SELECT pg_catalog.pg_advisory_unlock(%d, %d)", SNOWSEQ_LOCK_MOVE, (int32) m->id),
				SPI_OK_SELECT);
			state = MoveState(m);
			if (state == NULL || (strcmp(state, "done") != 0 && strcmp(state, "failed") != 0 &&
								  strcmp(state, "rollback") != 0))
				left++;
		}
		if (collect == NULL)
		{
			ListCell   *lc;

			foreach(lc, m->report)
			{
				MoveReport *r = lfirst(lc);

				ereport(elevel,
						(errmsg("interrupted move " INT64_FORMAT " of genes %d to %d: %s%s%s: %s",
								m->id, m->first, m->last, r->server ? r->server : "",
								r->server ? ": " : "", r->object, r->action)));
			}
		}
		else
			MoveReportCopy(collect, m);
		MemoryContextDelete(m->cxt);
	}
	return left;
}

/*
 * At the start of a router (from its resolver worker, in a transaction):
 * resolve the moves of this database interrupted in or after the switch,
 * as snowseq_move_cleanup() would, so that the prepared source transaction
 * of each, which holds its source table, commits or rolls back as the
 * router's record says.  Returns how many are left unresolved.
 */
int
MoveResolveSwitches(int elevel)
{
	int			left = 0;
	char	   *nsp;

	SPI_connect();
	nsp = SqlValue(TopMemoryContext, "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
				   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
				   "WHERE e.extname OPERATOR(pg_catalog.=) 'snowseq'");
	if (nsp != NULL)
	{
		if (ext_nsp != NULL)
			pfree(ext_nsp);
		ext_nsp = nsp;
		left = CleanupMoves(InvalidOid, NULL, true, elevel);
	}
	SPI_finish();
	return left;
}

/* Add the report of a move to a collection. */
static void
MoveReportCopy(Move *collect, Move *m)
{
	MemoryContext old = MemoryContextSwitchTo(collect->cxt);
	ListCell   *lc;

	foreach(lc, m->report)
	{
		MoveReport *r = lfirst(lc);
		MoveReport *c = palloc(sizeof(MoveReport));

		*c = *r;
		c->server = r->server ? pstrdup(r->server) : NULL;
		c->object = pstrdup(r->object);
		c->action = pstrdup(r->action);
		collect->report = lappend(collect->report, c);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Step (on a Move that stands for one server): find replication slots,
 * publications, subscriptions and half copies named after moves of this
 * router that are over or unknown, and drop them.  A slot left behind keeps
 * WAL on its server for ever.
 */
static void
CleanupOrphansOn(Move *o)
{
	RemoteConn *rc = Src(o);
	char	   *mine = psprintf("snowseq_move_%s_", o->node);
	PGresult   *res;

	res = RemoteExec(rc,
					 "SELECT 'replication slot', slot_name::text, slot_name::text, "
					 "coalesce(pg_catalog.pg_size_pretty(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), restart_lsn)), '') "
					 "FROM pg_catalog.pg_replication_slots WHERE slot_name::text OPERATOR(pg_catalog.~) '^snowseq_move_' "
					 "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
					 "UNION ALL SELECT 'prepared transaction', gid, gid, '' FROM pg_catalog.pg_prepared_xacts "
					 "WHERE gid OPERATOR(pg_catalog.~) '^snowseq_move_' "
					 "AND database OPERATOR(pg_catalog.=) pg_catalog.current_database() "
					 "UNION ALL SELECT 'publication', pubname::text, pubname::text, '' FROM pg_catalog.pg_publication "
					 "WHERE pubname::text OPERATOR(pg_catalog.~) '^snowseq_move_' "
					 "UNION ALL SELECT 'subscription', subname::text, subname::text, '' FROM pg_catalog.pg_subscription "
					 "WHERE subname::text OPERATOR(pg_catalog.~) '^snowseq_move_' AND subdbid OPERATOR(pg_catalog.=) "
					 "(SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
					 "UNION ALL SELECT 'table', c.oid::pg_catalog.regclass::text, pg_catalog.substring(d.description, "
					 "'^snowseq (snowseq_move_[0-9]+_[0-9]+): copy in progress$'), '' "
					 "FROM pg_catalog.pg_class c JOIN pg_catalog.pg_description d ON d.objoid OPERATOR(pg_catalog.=) c.oid "
					 "AND d.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objsubid OPERATOR(pg_catalog.=) 0 "
					 "WHERE d.description OPERATOR(pg_catalog.~) '^snowseq snowseq_move_[0-9]+_[0-9]+: copy in progress$'",
					 "list the objects of moves");
	for (int i = 0; i < PQntuples(res); i++)
	{
		char	   *kind = PQgetvalue(res, i, 0);
		char	   *name = PQgetvalue(res, i, 1);
		char	   *token = PQgetvalue(res, i, 2);
		char	   *wal = PQgetvalue(res, i, 3);
		char	   *object = psprintf("%s %s", kind, name);
		bool		switched = false;

		o->id = 0;
		o->parent = InvalidOid;
		o->first = o->last = 0;
		if (strncmp(token, mine, strlen(mine)) != 0)
		{
			MoveNote(o, o->src_name, object, "kept: made by another router");
			continue;
		}
		Sql(psprintf("SELECT move_id, parent, first_gene, last_gene, state FROM %s WHERE token OPERATOR(pg_catalog.=) %s",
					 Ext("snowseq_moves"), quote_literal_cstr(token)), SPI_OK_SELECT);
		if (SPI_processed == 1)
		{
			bool		isnull;
			char	   *state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5);

			o->id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			o->parent = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
			o->first = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
			o->last = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
			/* a move still under way, or to be resolved, owns its objects */
			if (strcmp(state, "done") != 0 && strcmp(state, "failed") != 0)
				continue;
			switched = strcmp(state, "done") == 0;
		}
		o->token = token;
		if (strcmp(kind, "prepared transaction") == 0)
		{
			/* it holds its table for ever: the record decides, or presumed abort */
			RemoteCommand(rc, psprintf("%s PREPARED %s", switched ? "COMMIT" : "ROLLBACK", quote_literal_cstr(name)),
						  "resolve the prepared transaction");
			MoveNote(o, o->src_name, object, switched ? "committed" : "rolled back");
			continue;
		}
		if (strcmp(kind, "replication slot") == 0)
		{
			MoveDropSlotNamed(rc, name);
			MoveNote(o, o->src_name, object, psprintf("dropped (it kept %s of WAL)", wal));
			continue;
		}
		if (strcmp(kind, "publication") == 0)
			RemoteCommand(rc, psprintf("DROP PUBLICATION IF EXISTS %s", quote_identifier(name)), "drop the publication");
		else if (strcmp(kind, "subscription") == 0)
		{
			o->dst_name = o->src_name;
			o->dst = o->src;
			MoveDropSubscription(o);
			o->dst = NULL;
		}
		else
			RemoteCommand(rc, psprintf("DROP TABLE IF EXISTS %s", name), "drop the half copy");
		MoveNote(o, o->src_name, object, "dropped");
	}
	PQclear(res);
}

/* Look for leftovers of moves on every server that moves have used. */
static void
CleanupOrphans(Move *collect)
{
	List	   *servers = NIL;
	ListCell   *lc;
	char	   *node = MoveLocalNode(collect);

	Sql(psprintf("SELECT DISTINCT x.s FROM (SELECT source_server s FROM %s UNION SELECT dest_server FROM %s) x "
				 "WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_foreign_server f WHERE f.srvname OPERATOR(pg_catalog.=) x.s) ORDER BY 1",
				 Ext("snowseq_moves"), Ext("snowseq_moves")), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
		servers = lappend(servers, MemoryContextStrdup(collect->cxt,
													   SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)));
	foreach(lc, servers)
	{
		Move	   *o = MoveNew();
		ErrorData  *err;

		o->src_name = lfirst(lc);
		o->node = node;
		err = MoveTry(o, CleanupOrphansOn);
		if (err != NULL)
		{
			o->id = 0;
			MoveNote(o, o->src_name, "server", psprintf("not checked: %s", err->message));
		}
		MoveCloseSessions(o);
		MoveReportCopy(collect, o);
		MemoryContextDelete(o->cxt);
	}
}

PG_FUNCTION_INFO_V1(snowseq_move_genes);
PG_FUNCTION_INFO_V1(snowseq_split_shard);
PG_FUNCTION_INFO_V1(snowseq_merge_shards);
PG_FUNCTION_INFO_V1(snowseq_move_cleanup);
PG_FUNCTION_INFO_V1(snowseq_shard_stats);

/* snowseq_move_genes(parent, first_gene, last_gene, to_server): a procedure. */
Datum
snowseq_move_genes(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table, genes and server of a move must not be NULL")));
	MoveGenes(fcinfo, PG_GETARG_OID(0), PG_GETARG_INT32(1), PG_GETARG_INT32(2),
			  NameStr(*PG_GETARG_NAME(3)));
	PG_RETURN_VOID();
}

/* Gene bounds of the partition of a parent that holds a gene (via SQL). */
static bool
PartitionOfGene(Oid parent, int gene, int *first, int *last, char **server)
{
	bool		found = false;

	Sql(psprintf("SELECT CASE WHEN b[1] OPERATOR(pg_catalog.=) 'MINVALUE' THEN NULL ELSE pg_catalog.btrim(b[1], '''')::pg_catalog.int8 END, "
				 "CASE WHEN b[2] OPERATOR(pg_catalog.=) 'MAXVALUE' THEN NULL ELSE pg_catalog.btrim(b[2], '''')::pg_catalog.int8 END, "
				 "(SELECT s.srvname FROM pg_catalog.pg_foreign_table ft JOIN pg_catalog.pg_foreign_server s "
				 "ON s.oid OPERATOR(pg_catalog.=) ft.ftserver WHERE ft.ftrelid OPERATOR(pg_catalog.=) i.inhrelid) "
				 "FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid, "
				 "LATERAL pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid), 'FROM \\((.*)\\) TO \\((.*)\\)') b "
				 "WHERE i.inhparent OPERATOR(pg_catalog.=) %u AND NOT i.inhdetachpending", parent), SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed && !found; i++)
	{
		bool		lo_null,
					hi_null;
		int64		lo = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &lo_null));
		int64		hi = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &hi_null));

		if (PartGenes(!lo_null, lo, !hi_null, hi, first, last) && *first <= gene && gene <= *last)
		{
			char	   *s = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3);

			/* outlives SPI_finish */
			*server = NULL;
			if (s != NULL)
			{
				*server = SPI_palloc(strlen(s) + 1);
				strcpy(*server, s);
			}
			found = true;
		}
	}
	return found;
}

/* snowseq_split_shard(parent, at_gene, to_server): genes at_gene..end of its partition move. */
Datum
snowseq_split_shard(PG_FUNCTION_ARGS)
{
	Oid			parent = PG_GETARG_OID(0);
	int			gene = PG_GETARG_INT32(1);
	int			first,
				last;
	char	   *server;

	SPI_connect();
	if (!PartitionOfGene(parent, gene, &first, &last, &server))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds gene %d", get_rel_name(parent), gene)));
	SPI_finish();
	MoveGenes(fcinfo, parent, gene, last, NameStr(*PG_GETARG_NAME(2)));
	PG_RETURN_VOID();
}

/*
 * snowseq_merge_shards(parent, gene): the partition holding gene moves to
 * the server of the partition before it (after it, for the first).
 */
Datum
snowseq_merge_shards(PG_FUNCTION_ARGS)
{
	Oid			parent = PG_GETARG_OID(0);
	int			gene = PG_GETARG_INT32(1);
	int			first,
				last,
				nf,
				nl;
	char	   *server;
	char	   *to = NULL;

	SPI_connect();
	if (!PartitionOfGene(parent, gene, &first, &last, &server))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds gene %d", get_rel_name(parent), gene)));
	if (first > 0 && PartitionOfGene(parent, first - 1, &nf, &nl, &to) && to != NULL)
		;
	else if (last < SNOWSEQ_MAX_GENE && PartitionOfGene(parent, last + 1, &nf, &nl, &to) && to != NULL)
		;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the partition holding gene %d has no neighbour on another server", gene)));
	SPI_finish();
	MoveGenes(fcinfo, parent, first, last, to);
	PG_RETURN_VOID();
}

/* snowseq_move_cleanup(): resolve every move that is not running; one row per object. */
Datum
snowseq_move_cleanup(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Move	   *collect;
	ListCell   *lc;

	InitMaterializedSRF(fcinfo, 0);
	SetExtSchema(fcinfo);
	collect = MoveNew();
	SPI_connect();
	CleanupMoves(InvalidOid, collect, false, NOTICE);
	CleanupOrphans(collect);
	SPI_finish();
	foreach(lc, collect->report)
	{
		MoveReport *r = lfirst(lc);
		Datum		v[7];
		bool		n[7] = {r->id == 0, r->id == 0, r->id == 0, r->id == 0, r->server == NULL, false, false};

		v[0] = Int64GetDatum(r->id);
		v[1] = ObjectIdGetDatum(r->parent);
		v[2] = Int32GetDatum(r->first);
		v[3] = Int32GetDatum(r->last);
		v[4] = (Datum) 0;
		if (r->server)
		{
			Name		nm = palloc0(NAMEDATALEN);

			namestrcpy(nm, r->server);
			v[4] = NameGetDatum(nm);
		}
		v[5] = CStringGetTextDatum(r->object);
		v[6] = CStringGetTextDatum(r->action);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	}
	MemoryContextDelete(collect->cxt);
	return (Datum) 0;
}

/*
 * snowseq_shard_stats(parent): for each map entry and each partition it
 * overlaps, the rows and row bytes there, counted where they live.
 */
Datum
snowseq_shard_stats(PG_FUNCTION_ARGS)
{
	Oid			parent = PG_GETARG_OID(0);
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Move	   *m;
	char	   *key;
	SPITupleTable *pieces;
	uint64		n;
	List	   *conns = NIL;

	InitMaterializedSRF(fcinfo, 0);
	SetExtSchema(fcinfo);
	m = MoveNew();
	m->parent = parent;
	SPI_connect();
	key = MoveParentKey(m);

	/* map entries cut by partitions: one row per piece */
	Sql(psprintf("WITH map AS (SELECT coalesce(pg_catalog.lag(upper_gene) OVER (ORDER BY upper_gene) OPERATOR(pg_catalog.+) 1, 0) AS f, "
				 "upper_gene AS l, shard FROM %s), "
				 "parts AS (SELECT c.oid, c.relkind, "
				 "CASE WHEN b[1] OPERATOR(pg_catalog.=) 'MINVALUE' THEN 0 ELSE (pg_catalog.btrim(b[1], '''')::pg_catalog.int8 OPERATOR(pg_catalog.>>) 48)::pg_catalog.int4 END AS f, "
				 "CASE WHEN b[2] OPERATOR(pg_catalog.=) 'MAXVALUE' THEN 32767 ELSE (pg_catalog.btrim(b[2], '''')::pg_catalog.int8 OPERATOR(pg_catalog.>>) 48)::pg_catalog.int4 OPERATOR(pg_catalog.-) 1 END AS l "
				 "FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.inhrelid, "
				 "LATERAL pg_catalog.regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid), 'FROM \\((.*)\\) TO \\((.*)\\)') b "
				 "WHERE i.inhparent OPERATOR(pg_catalog.=) %u AND NOT i.inhdetachpending) "
				 "SELECT GREATEST(map.f, p.f), LEAST(map.l, p.l), map.shard, p.oid, p.relkind, "
				 "ft.ftserver, coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
				 "WHERE option_name OPERATOR(pg_catalog.=) 'schema_name'), n.nspname), "
				 "coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
				 "WHERE option_name OPERATOR(pg_catalog.=) 'table_name'), c.relname), "
				 "coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(a.attfdwoptions) "
				 "WHERE option_name OPERATOR(pg_catalog.=) 'column_name'), a.attname), "
				 "pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname) "
				 "FROM map LEFT JOIN parts p ON p.f OPERATOR(pg_catalog.<=) map.l AND p.l OPERATOR(pg_catalog.>=) map.f "
				 "LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.oid "
				 "LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace "
				 "LEFT JOIN pg_catalog.pg_foreign_table ft ON ft.ftrelid OPERATOR(pg_catalog.=) p.oid "
				 "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) p.oid AND a.attname OPERATOR(pg_catalog.=) %s "
				 "ORDER BY 1",
				 Ext("snowseq_shard_map"), parent, quote_literal_cstr(key)), SPI_OK_SELECT);
	pieces = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	t = pieces->vals[i];
		TupleDesc	d = pieces->tupdesc;
		bool		isnull;
		Datum		v[6];
		bool		nulls[6] = {false, false, false, false, false, false};
		int			f = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
		int			l = DatumGetInt32(SPI_getbinval(t, d, 2, &isnull));
		Oid			part = DatumGetObjectId(SPI_getbinval(t, d, 4, &nulls[3]));
		char	   *cond;
		char	   *col = SPI_getvalue(t, d, 9);
		char	   *count_sql;

		v[0] = Int32GetDatum(f);
		v[1] = Int32GetDatum(l);
		v[2] = CStringGetTextDatum(SPI_getvalue(t, d, 3));
		v[3] = ObjectIdGetDatum(part);
		nulls[4] = nulls[5] = true;
		if (!nulls[3])
		{
			cond = psprintf("%s >= " INT64_FORMAT "%s", quote_identifier(col), (int64) f << SNOWSEQ_SEGMENT_BITS,
							l == SNOWSEQ_MAX_GENE ? "" :
							psprintf(" AND %s < " INT64_FORMAT, quote_identifier(col), (int64) (l + 1) << SNOWSEQ_SEGMENT_BITS));
			if (DatumGetChar(SPI_getbinval(t, d, 5, &isnull)) == RELKIND_FOREIGN_TABLE)
			{
				Oid			server = DatumGetObjectId(SPI_getbinval(t, d, 6, &isnull));
				RemoteConn *rc = NULL;
				ListCell   *lc;
				PGresult   *res;

				foreach(lc, conns)
					if (((RemoteConn *) lfirst(lc))->serverid == server)
						rc = lfirst(lc);
				if (rc == NULL)
				{
					rc = RemoteConnect(server);
					conns = lappend(conns, rc);
				}
				count_sql = psprintf("SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(pg_catalog.pg_column_size(t.*)), 0) "
									 "FROM %s t WHERE %s",
									 quote_qualified_identifier(SPI_getvalue(t, d, 7), SPI_getvalue(t, d, 8)), cond);
				res = RemoteExec(rc, count_sql, "count rows");
				v[4] = Int64GetDatum(pg_strtoint64(PQgetvalue(res, 0, 0)));
				v[5] = Int64GetDatum(pg_strtoint64(PQgetvalue(res, 0, 1)));
				nulls[4] = nulls[5] = false;
				PQclear(res);
			}
			else
			{
				SPITupleTable *saved = SPI_tuptable;

				Sql(psprintf("SELECT pg_catalog.count(*), coalesce(pg_catalog.sum(pg_catalog.pg_column_size(t.*)), 0)::pg_catalog.int8 "
							 "FROM %s t WHERE %s", SPI_getvalue(t, d, 10), cond), SPI_OK_SELECT);
				v[4] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
				v[5] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
				nulls[4] = nulls[5] = false;
				SPI_tuptable = saved;
			}
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, nulls);
	}
	{
		ListCell   *lc;

		foreach(lc, conns)
			RemoteClose(lfirst(lc));
	}
	SPI_finish();
	MemoryContextDelete(m->cxt);
	return (Datum) 0;
}
