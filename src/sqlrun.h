/*
 * sqlrun.h
 *		Running SQL through SPI, and naming snowseq's own objects (sqlrun.c).
 *
 * SQL that changes something, run in the server snowseq is called in, goes
 * through SpiRun, SpiRunArgs and SpiRunParams (values as parameters,
 * SQL_ARGS): one rule for a failed statement (an
 * internal ERROR naming the statement's result code); and every part finds
 * the extension's schema one way (the schema of the SQL function called,
 * which is where the install script put every object).
 *
 * Six reads call SPI themselves, because these run statements read-write
 * (a new snapshot each, as a procedure's steps need) and keep no tuples:
 *   - counter_cache.c (a counter's definition), counter_floor.c (a floor's
 *     position), route.c (the routing map) and nodes.c (the extension's
 *     version, the foreign servers) read with read_only: the caller's
 *     snapshot, so that a STABLE function (shard_of, the status views)
 *     sees one state through its statement, and they read the rows they
 *     fetch;
 *   - keyadmin.c runs a prepared plan on the latest snapshot
 *     (SPI_execute_snapshot), so that a key administrator in a REPEATABLE
 *     READ transaction still sees a key version made since it began and
 *     never makes it twice (test/specs/keys_repeatable_read.spec).
 * SQL for other servers goes through remote.h, never SPI.
 */
#ifndef SNOWSEQ_SQLRUN_H
#define SNOWSEQ_SQLRUN_H

#include "executor/spi.h"

/* Any successful result: for SpiRun's expect. */
#define SPI_ANY_OK	(-1)

/*
 * Text parameters of one statement: SQL_ARGS(a, b) is a count and an array
 * of values for $1, $2, for the *Params functions here, in remote.h and in
 * move_common.h.  A NULL value is SQL NULL.  The statement casts each $n to
 * the type it needs ($1::pg_catalog.int8): the values are never spliced into
 * SQL text, so no value needs quoting and none can change the statement.
 */
#define SQL_ARGS(...) \
	((int) (sizeof((const char *const[]) {__VA_ARGS__}) / sizeof(const char *))), \
	((const char *const[]) {__VA_ARGS__})

extern uint64 SpiRun(const char *sql, int expect);
extern uint64 SpiRunParams(const char *sql, int nargs, const char *const *values, int expect);
extern char *SqlTextArray(List *values);
extern char *SpiValueParams(MemoryContext cxt, const char *sql, int nargs,
							const char *const *values);
extern uint64 SpiRunArgs(const char *sql, int nargs, Oid *types, Datum *values,
						 const char *nulls, int expect);
extern char *SpiValue(MemoryContext cxt, const char *sql);

extern Oid	ExtNamespace(Oid fn_oid);
extern char *ExtSchemaQuoted(Oid fn_oid);
extern char *ExtSchemaInstalled(void);
extern char *ExtObject(Oid fn_oid, const char *name);
extern Oid	ExtRelationOwner(Oid relid);
extern void ExtBecome(Oid role, Oid *save_user, int *save_sec);

#endif							/* SNOWSEQ_SQLRUN_H */
