/*
 * move_plan.c
 *		Elastic shards: planning a move, and every check made before
 *		anything is created.
 *
 * On the router: the partition that holds the genes and its bounds (a
 * parent's partitions and the foreign tables they are: move_parts.c), the
 * servers, the map, the user mappings, overlap with other moves, and the
 * record of the new move.  On the servers: the
 * version of snowseq there, a superuser session, node ids, wal_level,
 * max_prepared_transactions, the source table (a plain table whose primary
 * key holds the ID, referenced by no foreign key) and what the copy will
 * land in on the destination.
 */
#include "postgres.h"

#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "move_common.h"
#include "move_parts.h"
#include "move_plan.h"
#include "snowseq.h"
#include "nodes.h"
#include "sqlrun.h"

/*
 * A server's wal_level as a move reads it: "logical" where the logical
 * decoding a move needs can run without a restart, else the setting.  From
 * PostgreSQL 19 on (which has effective_wal_level), wal_level = replica
 * counts as logical: the first logical replication slot, made by the
 * move's subscription, raises effective_wal_level to logical at once.
 */
#define MOVE_WAL_LEVEL_SQL \
	"CASE WHEN pg_catalog.current_setting('wal_level') OPERATOR(pg_catalog.=) 'replica' " \
	"AND pg_catalog.current_setting('effective_wal_level', true) IS NOT NULL " \
	"THEN 'logical' ELSE pg_catalog.current_setting('wal_level') END"

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
	ListCell   *lc;

	foreach(lc, MovePartBounds(m->parent))
	{
		MovePartBound *b = lfirst(lc);
		char	   *name = get_rel_name(b->relid);
		int			f,
					l;

		MovePartGenes(m, b, &f, &l);
		if (l < m->first || f > m->last)
			continue;
		if (OidIsValid(part) || f > m->first || l < m->last)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("genes %d to %d are in more than one partition of table \"%s\"",
							m->first, m->last, m->parent_rel),
					 errdetail("Partition \"%s\" holds genes %d to %d.", name, f, l),
					 errhint("Move the genes of one partition at a time.")));
		part = b->relid;
		if (b->relkind != RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("partition \"%s\" of table \"%s\" is not a foreign table", name, m->parent_rel),
					 errhint("Moves take genes from a postgres_fdw foreign table to another server.")));
		m->part.q = MemoryContextStrdup(m->op.cxt,
										quote_qualified_identifier(get_namespace_name(get_rel_namespace(part)), name));
		m->part.has_lo = b->has_lo;
		m->part.lo = b->lo;
		m->part.has_hi = b->has_hi;
		m->part.hi = b->hi;
		pfirst = f;
		plast = l;
	}
	if (!OidIsValid(part))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no partition of table \"%s\" holds gene %d", m->parent_rel, m->first)));
	if (m->first == pfirst && m->last == plast)
		m->kind = MOVE_KIND_WHOLE;
	else if (m->first == pfirst)
		m->kind = MOVE_KIND_PREFIX;
	else if (m->last == plast)
		m->kind = MOVE_KIND_SUFFIX;
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

	SpiRun(psprintf("SELECT upper_gene, shard FROM %s ORDER BY upper_gene", MoveExt(m, "snowseq_shard_map")),
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
							g, Min(upper, m->last), shard, m->part.q, m->src_name),
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
void
MovePlan(Move *m, const char *to_server)
{
	char	   *key = MoveParentKey(m);
	Oid			part;
	ForeignServer *src;
	ForeignServer *dst;
	char	   *schema;
	char	   *table;
	char	   *col;
	char	   *v;

	if (m->first < 0 || m->last > SNOWSEQ_MAX_GENE || m->first > m->last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d are not a gene range", m->first, m->last),
				 errhint("Genes go from 0 to %d, and the first is not above the last.", SNOWSEQ_MAX_GENE)));
	v = SpiValue(m->op.cxt, psprintf("SELECT pg_catalog.pg_has_role(relowner, 'USAGE') FROM pg_catalog.pg_class "
								  "WHERE oid OPERATOR(pg_catalog.=) %u", m->parent));
	if (v == NULL || v[0] != 't')
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", m->parent_rel)));

	part = MovePartition(m);
	src = MovePartitionServer(part, m->part.q);
	m->src_name = MemoryContextStrdup(m->op.cxt, src->servername);
	dst = MoveServer(to_server);
	m->dst_name = MemoryContextStrdup(m->op.cxt, dst->servername);
	(void) MoveServer(m->src_name);
	if (src->serverid == dst->serverid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("genes %d to %d of table \"%s\" are already on server \"%s\"",
						m->first, m->last, m->parent_rel, m->dst_name)));
	MoveCheckMap(m);

	/* the remote table and ID column, as postgres_fdw resolves them */
	MoveForeignNames(part, key, &schema, &table, &col);
	m->src_table = MemoryContextStrdup(m->op.cxt, quote_qualified_identifier(schema, table));
	m->id_col = MemoryContextStrdup(m->op.cxt, col);
	m->dst_nsp = MemoryContextStrdup(m->op.cxt, schema);
	m->src_rel = MemoryContextStrdup(m->op.cxt, table);

	/* everyone who reads the partition must be able to read the new one */
	v = SpiValue(m->op.cxt, psprintf(
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
	m->newpart.cols = MoveParentColumns(m);
	MoveForeignOptions(m, part, &m->newpart.opts, &m->newpart.colopts);
}

/* Whether a live move (one whose advisory lock is held) has this id. */
static bool
MoveIsLive(int64 id)
{
	char	   *v = SpiValue(CurrentMemoryContext, psprintf(
															"SELECT pg_catalog.count(*) FROM pg_catalog.pg_locks WHERE locktype OPERATOR(pg_catalog.=) 'advisory' "
															"AND database OPERATOR(pg_catalog.=) (SELECT oid FROM pg_catalog.pg_database WHERE datname OPERATOR(pg_catalog.=) pg_catalog.current_database()) "
															"AND classid OPERATOR(pg_catalog.=) %u AND objid OPERATOR(pg_catalog.=) %u "
															"AND objsubid OPERATOR(pg_catalog.=) %d AND granted",
															(uint32) SNOWSEQ_LOCK_MOVE, (uint32) id, SNOWSEQ_LOCK_FIELD4));

	return v != NULL && strcmp(v, "0") != 0;
}

/* This server's node id, which the destination must not share. */
char *
MoveLocalNode(Move *m)
{
	char	   *node = MoveRecordsValue(m->op.ext, m->op.cxt, psprintf("SELECT node_id FROM %s", MoveExt(m, "snowseq_status")));

	if (node == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq.node_id is not set on this server"),
				 errhint("Set snowseq.node_id in postgresql.conf to a value no other server uses, and restart.")));
	return node;
}

/* A new move id, from the identity of the records of moves. */
static int64
MoveNextId(Move *m)
{
	return pg_strtoint64(MoveRecordsValueParams(m->op.ext, m->op.cxt,
												"SELECT pg_catalog.nextval(pg_catalog.pg_get_serial_sequence($1::pg_catalog.text, 'move_id'))",
												SQL_ARGS(MoveExt(m, "snowseq_moves"))));
}

/*
 * Record a move, or a table of its group, in snowseq_moves in state prepare,
 * as the records' owner (ext: the extension's schema): dest_created,
 * reverts and group_move as given (NULL: SQL NULL); its mover is the
 * session's role, as which the resolver at the router's start acts, with
 * its user mappings.
 */
static void
MoveInsertRecord(Move *t, const char *ext, const char *dest_created, const char *reverts,
				 const char *group_move)
{
	MoveRecordsRunParams(ext, psprintf("INSERT INTO %s.snowseq_moves (move_id, parent, first_gene, last_gene, "
									   "source_server, dest_server, kind, part_name, part_lower, part_upper, new_part_name, "
									   "source_table, dest_table, id_column, token, state, dest_created, reverts, mover, "
									   "group_move) OVERRIDING SYSTEM VALUE VALUES ("
									   "$1::pg_catalog.int8, $2::pg_catalog.oid, $3::pg_catalog.int4, $4::pg_catalog.int4, "
									   "$5::pg_catalog.name, $6::pg_catalog.name, $7::pg_catalog.text, $8::pg_catalog.text, "
									   "$9::pg_catalog.int8, $10::pg_catalog.int8, $11::pg_catalog.text, $12::pg_catalog.text, "
									   "$13::pg_catalog.text, $14::pg_catalog.text, $15::pg_catalog.text, $16::pg_catalog.text, "
									   "$17::pg_catalog.bool, $18::pg_catalog.int8, $19::pg_catalog.oid, $20::pg_catalog.int8)",
									   ext),
						 SQL_ARGS(psprintf(INT64_FORMAT, t->op.id), psprintf("%u", t->parent),
								  psprintf("%d", t->first), psprintf("%d", t->last), t->src_name, t->dst_name,
								  MoveKindName(t->kind), t->part.q, Int8Arg(t->part.has_lo, t->part.lo),
								  Int8Arg(t->part.has_hi, t->part.hi), t->newpart.q, t->src_table,
								  t->dst_table, t->id_col, t->op.token, MoveStateName(MOVE_STATE_PREPARE),
								  dest_created, reverts, psprintf("%u", GetUserId()), group_move),
						 SPI_OK_INSERT);
}

/* Refuse overlapping moves; record this one and take its lock. */
void
MoveRecordNew(Move *m)
{
	char	   *part_rel;
	char	   *name;

	m->op.node = MoveLocalNode(m);
	MoveLockStart();
	MoveRecordsRunParams(m->op.ext, psprintf("SELECT move_id, first_gene, last_gene, dest_server, state, part_name "
										  "FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
										  "AND state::pg_catalog.text OPERATOR(pg_catalog.<>) ALL ($1::pg_catalog.text[]) ORDER BY move_id",
										  MoveExt(m, "snowseq_moves"), m->parent),
						 SQL_ARGS(MoveStatesOver()),
						 SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		id = DatumGetInt64(SPI_getbinval(t, d, 1, &isnull));
		int			f = DatumGetInt32(SPI_getbinval(t, d, 2, &isnull));
		int			l = DatumGetInt32(SPI_getbinval(t, d, 3, &isnull));
		char	   *dst = SPI_getvalue(t, d, 4);
		MoveStateId state = MoveStateFromName(SPI_getvalue(t, d, 5));
		char	   *part = SPI_getvalue(t, d, 6);
		SPITupleTable *saved = SPI_tuptable;
		uint64		n = SPI_processed;
		bool		live;

		if ((l < m->first || f > m->last) && strcmp(part, m->part.q) != 0)
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
		if (state == MOVE_STATE_REVERTABLE)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("genes %d to %d of table \"%s\" can still be moved back by reverting move " INT64_FORMAT,
							f, l, m->parent_rel, id),
					 errdetail("Its source is kept current until it is finalized."),
					 errhint("Finalize it first: CALL snowseq_move_finalize(" INT64_FORMAT "), or revert it: CALL snowseq_move_revert(" INT64_FORMAT ").",
							 id, id)));
		if (state == MOVE_STATE_SWITCH || state == MOVE_STATE_SWITCHED)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("move " INT64_FORMAT " of genes %d to %d of table \"%s\" was interrupted while switching",
							id, f, l, m->parent_rel),
					 errhint("Run SELECT * FROM snowseq_move_cleanup(); once its servers are reachable.")));
	}

	/* nor a merge of these genes that is not over (merge.c) */
	{
		char	   *merge = MoveRecordsValue(m->op.ext, m->op.cxt,
											 psprintf("SELECT merge_id::pg_catalog.text OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) state OPERATOR(pg_catalog.||) ')' "
													  "FROM %s WHERE parent OPERATOR(pg_catalog.=) %u "
													  "AND NOT %s(state) "
													  "AND last_gene OPERATOR(pg_catalog.>=) %d AND first_gene OPERATOR(pg_catalog.<=) %d "
													  "ORDER BY merge_id LIMIT 1",
													  MoveExt(m, "snowseq_merges"), m->parent, MoveExt(m, "snowseq_merge_is_over"),
													  m->first, m->last));

		if (merge != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("genes %d to %d of table \"%s\" are in merge %s", m->first, m->last, m->parent_rel, merge),
					 errhint("Wait for it to end; snowseq_move_cleanup() ends one that was interrupted.")));
	}

	m->op.id = MoveNextId(m);

	/*
	 * Its objects are named after it: the router's node, this database and
	 * the move.  Slot names and the names of prepared transactions are one
	 * space per server, and every database of a router numbers its moves
	 * from 1: without the database, the moves of two router databases from
	 * one server took one name, and the second one's undo dropped the
	 * first one's slot.
	 */
	m->op.token = psprintf("snowseq_move_%s_%u_" INT64_FORMAT, m->op.node, MyDatabaseId, m->op.id);
	m->op.token = MemoryContextStrdup(m->op.cxt, m->op.token);

	/* names of the new objects: the parent's, with the range */
	name = psprintf("%s_g%d_%d", m->parent_rel, m->first, m->last);
	part_rel = name;
	if (OidIsValid(get_relname_relid(part_rel, get_rel_namespace(m->parent))))
		part_rel = psprintf("%s_m" INT64_FORMAT, name, m->op.id);
	if (strlen(part_rel) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("the name of the new partition, \"%s\", is too long", part_rel),
				 errhint("Use a shorter table name.")));
	m->newpart.q = MemoryContextStrdup(m->op.cxt,
										quote_qualified_identifier(get_namespace_name(get_rel_namespace(m->parent)),
																   part_rel));
	m->dst_rel = MemoryContextStrdup(m->op.cxt, name);
	m->dst_table = MemoryContextStrdup(m->op.cxt, quote_qualified_identifier(m->dst_nsp, m->dst_rel));

	MoveInsertRecord(m, m->op.ext, NULL, NULL, NULL);
	/*
	 * What the move will make is recorded now, committed (MoveGenes) before
	 * any of it is made: the lead's publication and slot on the source, its
	 * subscription on the destination, its prepared transaction on the
	 * source; each table's fence on the source.  The copy is recorded once
	 * the checks know the move creates it (MovePrepareChecks), the
	 * table-sync slots and keep views once their names are known
	 * (MoveRecordSyncSlots, MoveRecordKeepView), each in a step that commits
	 * before they are made.
	 */
	if (m->group.lead == NULL)
	{
		MoveRecordObject(m, m->src_name, MOVE_OBJECT_PUBLICATION, m->op.token);
		MoveRecordObject(m, m->src_name, MOVE_OBJECT_SLOT, m->op.token);
		MoveRecordObject(m, m->dst_name, MOVE_OBJECT_SUBSCRIPTION, m->op.token);
		MoveRecordObject(m, m->src_name, MOVE_OBJECT_PREPARED, m->op.token);
	}
	MoveRecordObject(m, m->src_name, MOVE_OBJECT_FENCE, m->op.token);
	/*
	 * Kept revertable after its switch: what the way back will make, too.
	 */
	if (m->revert.window > 0)
	{
		MoveRecordSet(m, psprintf("revert_window = pg_catalog.make_interval(secs => %d)", m->revert.window));
		if (m->group.lead == NULL)
		{
			MoveRecordObject(m, m->dst_name, MOVE_OBJECT_PUBLICATION, MoveBackName(m));
			MoveRecordObject(m, m->dst_name, MOVE_OBJECT_SLOT, MoveBackName(m));
			MoveRecordObject(m, m->src_name, MOVE_OBJECT_SUBSCRIPTION, MoveBackName(m));
		}
		if (strcmp(m->src_table, m->dst_table) != 0)
			MoveRecordObject(m, m->dst_name, MOVE_OBJECT_TABLE, m->src_table);
	}
	m->op.state = MOVE_STATE_PREPARE;
	/* held until the move ends: others see it running */
	(void) MoveLock(m->op.id, true);
}

/*
 * A revert of a revertable move (o, loaded with its group): a Move for each
 * table, the move's own with its servers and tables the other way round
 * (its source is the move's destination table, its destination the move's
 * source table), recorded (reverts names the move), locked, with the fence
 * it will open on the destination of the move recorded before it is made.
 * Its objects are named after the move's token (MoveBackName): the
 * subscription, slot and publication of the way back, the fence and the
 * prepared transaction.
 */
Move *
MoveRevertNew(Move *o)
{
	Move	   *r = MoveNew(o->op.ext);
	ListCell   *lc;

	r->op.node = MoveLocalNode(r);
	MoveLockStart();
	foreach(lc, MoveGroup(o))
	{
		Move	   *ot = lfirst(lc);
		Move	   *t = ot->group.lead == NULL ? r : MoveNewMember(r, ot->parent);
		MemoryContext old = MemoryContextSwitchTo(r->op.cxt);

		t->revert.of = ot;
		t->revert.reverts = ot->op.id;
		t->parent = ot->parent;
		t->parent_q = pstrdup(ot->parent_q);
		t->parent_rel = pstrdup(ot->parent_rel);
		t->first = ot->first;
		t->last = ot->last;
		t->kind = ot->kind;
		t->part.q = pstrdup(ot->part.q);
		t->part.has_lo = ot->part.has_lo;
		t->part.lo = ot->part.lo;
		t->part.has_hi = ot->part.has_hi;
		t->part.hi = ot->part.hi;
		t->newpart.q = pstrdup(ot->newpart.q);
		t->src_name = pstrdup(ot->dst_name);
		t->dst_name = pstrdup(ot->src_name);
		t->src_table = pstrdup(ot->dst_table);
		t->src_rel = pstrdup(ot->dst_rel);
		t->dst_table = pstrdup(ot->src_table);
		t->dst_rel = pstrdup(ot->src_rel);
		t->dst_nsp = pstrdup(ot->dst_nsp);
		t->id_col = pstrdup(ot->id_col);
		t->dest_created = 0;
		t->op.token = MoveBackName(ot);
		t->op.node = r->op.node;
		t->op.id = MoveNextId(r);
		MemoryContextSwitchTo(old);
		MoveInsertRecord(t, r->op.ext, "false", psprintf(INT64_FORMAT, t->revert.reverts), Int8Arg(t->group.lead != NULL, r->op.id));
		t->op.state = MOVE_STATE_PREPARE;
		(void) MoveLock(t->op.id, true);
		MoveRecordObject(t, t->src_name, MOVE_OBJECT_FENCE, t->op.token);
	}
	/* its transactions of the switch, one on each server, under one name */
	MoveRecordObject(r, r->src_name, MOVE_OBJECT_PREPARED, r->op.token);
	MoveRecordObject(r, r->dst_name, MOVE_OBJECT_PREPARED, r->op.token);
	return r;
}

/*
 * A remote server fit for a move: snowseq 1.3 or later (the fences' locks
 * no other role can take, the subscription's last error), a superuser
 * session.
 */
void
MoveCheckServer(RemoteConn *rc)
{
	char	   *v;

	if (rc->extschema == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq is not installed on server \"%s\"", rc->server),
				 errhint("Run CREATE EXTENSION snowseq in that database.")));
	if (strcmp(rc->extversion, "1.3") < 0)
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
	return RemoteValue(rc, psprintf("SELECT node_id FROM %s", MoveRemoteExt(rc, "snowseq_status")),
					   "read the node id");
}

/* Column definitions of a remote table, for comparing and creating. */
char *
MoveRemoteColumns(RemoteConn *rc, const char *table)
{
	return RemoteValueParams(rc,
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
							 "WHERE a.attrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
							 "AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped",
							 SQL_ARGS(table), "read the columns of the table");
}

/* The primary key definition of a remote table. */
char *
MoveRemotePkey(RemoteConn *rc, const char *table)
{
	return RemoteValueParams(rc, "SELECT pg_catalog.pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint "
							 "WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND contype OPERATOR(pg_catalog.=) 'p'",
							 SQL_ARGS(table), "read the primary key of the table");
}

/* Whether a table exists on a remote server. */
static bool
MoveDstHas(RemoteConn *rc, const char *table)
{
	char	   *v = RemoteValueParams(rc, "SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NOT NULL",
									  SQL_ARGS(table), "look up a table");

	return strcmp(v, "t") == 0;
}

/* Whether a router partition of any table reads a remote table. */
char *
MoveTableReadBy(Move *m, const char *server, const char *nsp, const char *rel)
{
	return SpiValueParams(m->op.cxt,
						  "SELECT ft.ftrelid::pg_catalog.regclass::text FROM pg_catalog.pg_foreign_table ft "
						  "JOIN pg_catalog.pg_foreign_server s ON s.oid OPERATOR(pg_catalog.=) ft.ftserver "
						  "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) ft.ftrelid "
						  "WHERE s.srvname OPERATOR(pg_catalog.=) $1::pg_catalog.name "
						  "AND coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
						  "WHERE option_name OPERATOR(pg_catalog.=) 'schema_name'), "
						  "(SELECT nspname FROM pg_catalog.pg_namespace WHERE oid OPERATOR(pg_catalog.=) c.relnamespace)) "
						  "OPERATOR(pg_catalog.=) $2::pg_catalog.text "
						  "AND coalesce((SELECT option_value FROM pg_catalog.pg_options_to_table(ft.ftoptions) "
						  "WHERE option_name OPERATOR(pg_catalog.=) 'table_name'), c.relname::text) OPERATOR(pg_catalog.=) $3::pg_catalog.text "
						  "LIMIT 1",
						  SQL_ARGS(server, nsp, rel));
}

/* The comment that marks a destination table as a copy made by this move. */
char *
MoveCopyMark(Move *m)
{
	return psprintf("snowseq %s: copy in progress", m->op.token);
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
void
MoveRefuseReferenced(Move *m, RemoteConn *rc)
{
	List	   *group = NIL;
	ListCell   *lc;
	PGresult   *res;

	/* foreign keys between tables of the group: MoveCheckGroupKeys */
	foreach(lc, MoveGroup(m))
		group = lappend(group, ((Move *) lfirst(lc))->src_table);
	res = RemoteExecParams(rc, "SELECT pg_catalog.quote_ident(c.conname), c.conrelid::pg_catalog.regclass::text, "
						   "c.confdeltype::text FROM pg_catalog.pg_constraint c "
						   "WHERE c.contype OPERATOR(pg_catalog.=) 'f' "
						   "AND c.confrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1::pg_catalog.text) "
						   "AND NOT coalesce(c.conrelid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT pg_catalog.to_regclass(g)::pg_catalog.oid "
						   "FROM pg_catalog.unnest($2::pg_catalog.text[]) g)), false) "
						   "ORDER BY c.conrelid, c.conname LIMIT 1",
						   SQL_ARGS(m->src_table, SqlTextArray(group)),
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

/* Step: check both servers and decide about the destination table. */
void
MovePrepareChecks(Move *m)
{
	RemoteConn *src = MoveSrc(m);
	RemoteConn *dst = MoveDst(m);
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
	if (strcmp(dst_node, m->op.node) == 0)
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
	v = RemoteValue(src, "SELECT " MOVE_WAL_LEVEL_SQL, "read wal_level");
	if (v == NULL || strcmp(v, "logical") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("wal_level is \"%s\" on server \"%s\"", v ? v : "?", m->src_name),
				 errhint("Set wal_level = logical on the source server and restart it "
						 "(from PostgreSQL 19 on, wal_level = replica is enough).")));
	/* the switch commits on the source in two phases */
	v = RemoteValue(src, "SELECT pg_catalog.current_setting('max_prepared_transactions')",
					"read max_prepared_transactions");
	if (v == NULL || strcmp(v, "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("max_prepared_transactions is 0 on server \"%s\"", m->src_name),
				 errhint("Set max_prepared_transactions to 1 or more on the source server and restart it: the switch commits there in two phases.")));
	/* kept revertable: the destination publishes back, and a revert switches there in two phases */
	if (m->revert.window > 0)
	{
		v = RemoteValue(dst, "SELECT " MOVE_WAL_LEVEL_SQL " OPERATOR(pg_catalog.||) ' ' "
						"OPERATOR(pg_catalog.||) pg_catalog.current_setting('max_prepared_transactions')",
						"read wal_level and max_prepared_transactions");
		if (v == NULL || strncmp(v, "logical ", 8) != 0 || strcmp(v + 8, "0") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("server \"%s\" cannot keep the source of a move current: wal_level and max_prepared_transactions are %s",
							m->dst_name, v ? v : "?"),
					 errhint("Set wal_level = logical (from PostgreSQL 19 on, replica is enough) and max_prepared_transactions to 1 or more "
							 "on the destination server and restart it, or set snowseq.move_revert_window to 0.")));
	}

	/* the source table: a plain table whose replica identity holds the ID */
	res = RemoteExecParams(src,
						   "SELECT c.relkind, c.relreplident, a.attnum IS NOT NULL, "
						   "a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype, "
						   "EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid "
						   "AND i.indisprimary AND a.attnum OPERATOR(pg_catalog.=) ANY (i.indkey)) "
						   "FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid "
						   "AND a.attname OPERATOR(pg_catalog.=) $1::pg_catalog.name AND NOT a.attisdropped "
						   "WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($2::pg_catalog.text)",
						   SQL_ARGS(m->id_col, m->src_table), "look up the source table");
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
	/* the copy, under the source table's name, made in the next step */
	if (m->dest_created == 1)
		MoveRecordObject(m, m->dst_name, MOVE_OBJECT_COPY, m->src_table);
}

/*
 * A procedure cannot be STRICT: a NULL argument of one is an ERROR that
 * names it, before anything reads it (a NULL server went on into the plan's
 * string compares and crashed the backend; a NULL gene read as gene 0).
 */
void
MoveArgsGiven(FunctionCallInfo fcinfo, const char *what, const char *const *names)
{
	for (int i = 0; i < PG_NARGS(); i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s of %s must not be NULL", names[i], what),
					 errhint("Give every argument of the CALL.")));
}
