/*
 * move_schema.h
 *		The destination table of a move gets what the source table has
 *		(move_schema.c): defaults, constraints, triggers, policies, and its
 *		indexes once the initial copy is done.
 */
#ifndef SNOWSEQ_MOVE_SCHEMA_H
#define SNOWSEQ_MOVE_SCHEMA_H

#include "remote.h"

/*
 * The tables of one move.  "table" names the source table (qualified,
 * quoted) on the source, and the copy on the destination until replication
 * stops, since the copy lands in a table of the same name; both live in
 * schema "nsp".  The copy is then renamed dst_rel, which the names of the
 * objects made for it follow.
 */
typedef struct MoveSchemaTables
{
	RemoteConn *src;
	RemoteConn *dst;
	const char *table;
	const char *nsp;			/* unquoted */
	const char *src_rel;		/* unquoted */
	const char *dst_rel;		/* unquoted */
	const char *group;			/* the source tables moving with it, as the
								 * value of a text[] parameter, or NULL */
	const char *target;			/* the table on "dst" that the statements
								 * build on (qualified, quoted), if not
								 * "table": a merge's new table, beside the
								 * tables it merges */
} MoveSchemaTables;

/*
 * SQL for the oids of the tables named by the text[] parameter n (a group's
 * tables: MoveSchemaTables.group, MoveGroupRelations), in their order.
 */
#define MOVE_GROUP_OIDS(n) \
	"ARRAY(SELECT pg_catalog.to_regclass(u.x)::pg_catalog.oid " \
	"FROM pg_catalog.unnest($" #n "::pg_catalog.text[]) WITH ORDINALITY u(x, i) ORDER BY u.i)"

extern void MoveSchemaCheck(const MoveSchemaTables *t);
extern void MoveSchemaCreate(const MoveSchemaTables *t);
extern void MoveSchemaIndexes(const MoveSchemaTables *t);
extern void MoveSchemaTriggersOn(const MoveSchemaTables *t);

#endif							/* SNOWSEQ_MOVE_SCHEMA_H */
