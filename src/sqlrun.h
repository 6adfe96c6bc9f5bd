/*
 * sqlrun.h
 *		Running SQL through SPI, and naming snowseq's own objects (sqlrun.c).
 *
 * Every part of snowseq that runs SQL in the server it is called in goes
 * through these: one rule for a failed statement (an internal ERROR naming
 * the statement's result code) and one way to find the extension's schema
 * (the schema of the SQL function called, which is where the install
 * script put every object).
 */
#ifndef SNOWSEQ_SQLRUN_H
#define SNOWSEQ_SQLRUN_H

#include "executor/spi.h"

/* Any successful result: for SpiRun's expect. */
#define SPI_ANY_OK	(-1)

extern uint64 SpiRun(const char *sql, int expect);
extern uint64 SpiRunArgs(const char *sql, int nargs, Oid *types, Datum *values,
						 const char *nulls, int expect);
extern char *SpiValue(MemoryContext cxt, const char *sql);

extern Oid	ExtNamespace(Oid fn_oid);
extern char *ExtSchemaQuoted(Oid fn_oid);
extern char *ExtObject(Oid fn_oid, const char *name);
extern Oid	ExtRelationOwner(Oid relid);
extern void ExtBecome(Oid role, Oid *save_user, int *save_sec);

#endif							/* SNOWSEQ_SQLRUN_H */
