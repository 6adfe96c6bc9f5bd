/*
 * sqlrun.c
 *		Running SQL through SPI, and naming snowseq's own objects.
 *
 * The caller has connected to SPI.  A statement whose result is not the
 * one expected is a bug of snowseq (the statements are its own), so it is
 * an internal ERROR that names the statement.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "sqlrun.h"

/* Fail unless rc is expect (SPI_ANY_OK: any success). */
static void
SpiCheck(const char *sql, int rc, int expect)
{
	if (rc < 0 || (expect != SPI_ANY_OK && rc != expect))
		elog(ERROR, "snowseq: statement failed (%s): %s",
			 SPI_result_code_string(rc), sql);
}

/* Run one statement; returns the rows it processed. */
uint64
SpiRun(const char *sql, int expect)
{
	SpiCheck(sql, SPI_execute(sql, false, 0), expect);
	return SPI_processed;
}

/* Run one statement with parameters $1..$nargs; returns the rows it processed. */
uint64
SpiRunArgs(const char *sql, int nargs, Oid *types, Datum *values,
		   const char *nulls, int expect)
{
	SpiCheck(sql, SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0),
			 expect);
	return SPI_processed;
}

/* The first column of the first row of a query, as text in cxt, or NULL. */
char *
SpiValue(MemoryContext cxt, const char *sql)
{
	char	   *v = NULL;

	SpiRun(sql, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (s != NULL)
			v = MemoryContextStrdup(cxt, s);
	}
	return v;
}

/* The schema of snowseq here: that of the SQL function fn_oid. */
Oid
ExtNamespace(Oid fn_oid)
{
	return get_func_namespace(fn_oid);
}

/* The schema of snowseq, quoted for SQL text. */
char *
ExtSchemaQuoted(Oid fn_oid)
{
	return pstrdup(quote_identifier(get_namespace_name(ExtNamespace(fn_oid))));
}

/* One of snowseq's objects, schema-qualified and quoted for SQL text. */
char *
ExtObject(Oid fn_oid, const char *name)
{
	return quote_qualified_identifier(get_namespace_name(ExtNamespace(fn_oid)), name);
}

/* The owner of one of snowseq's relations (a table, a floor). */
Oid
ExtRelationOwner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Run the next statements as role (a security-restricted operation, as
 * PostgreSQL runs an index build as the table's owner): snowseq's functions
 * write the state they alone write as its owner.  Saves what to switch
 * back to with SetUserIdAndSecContext; an ERROR switches back by itself.
 */
void
ExtBecome(Oid role, Oid *save_user, int *save_sec)
{
	GetUserIdAndSecContext(save_user, save_sec);
	SetUserIdAndSecContext(role, *save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}
