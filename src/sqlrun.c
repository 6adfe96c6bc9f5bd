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
#include "catalog/pg_type.h"
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

/*
 * Run one statement with text parameters $1..$nargs (SQL_ARGS; a NULL value
 * is SQL NULL); returns the rows it processed.
 */
uint64
SpiRunParams(const char *sql, int nargs, const char *const *values, int expect)
{
	Oid		   *types = palloc(sizeof(Oid) * Max(nargs, 1));
	Datum	   *datums = palloc(sizeof(Datum) * Max(nargs, 1));
	char	   *nulls = palloc(Max(nargs, 1));

	for (int i = 0; i < nargs; i++)
	{
		types[i] = TEXTOID;
		datums[i] = values[i] ? CStringGetTextDatum(values[i]) : (Datum) 0;
		nulls[i] = values[i] ? ' ' : 'n';
	}
	return SpiRunArgs(sql, nargs, types, datums, nulls, expect);
}

/*
 * A list of C strings as the text of an array value, for a parameter cast
 * to an array type ($1::pg_catalog.text[]): each element double-quoted,
 * with its quotes and backslashes escaped, as array_in reads it.
 */
char *
SqlTextArray(List *values)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	foreach(lc, values)
	{
		appendStringInfoString(&buf, foreach_current_index(lc) > 0 ? ",\"" : "\"");
		for (const char *p = lfirst(lc); *p; p++)
		{
			if (*p == '"' || *p == '\\')
				appendStringInfoChar(&buf, '\\');
			appendStringInfoChar(&buf, *p);
		}
		appendStringInfoChar(&buf, '"');
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/* The first column of the first row of a query, as text in cxt, or NULL. */
char *
SpiValue(MemoryContext cxt, const char *sql)
{
	return SpiValueParams(cxt, sql, 0, NULL);
}

/* The same, with text parameters $1..$nargs. */
char *
SpiValueParams(MemoryContext cxt, const char *sql, int nargs, const char *const *values)
{
	char	   *v = NULL;

	SpiRunParams(sql, nargs, values, SPI_OK_SELECT);
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

/*
 * The schema of snowseq in this database, quoted for SQL text, or NULL if it
 * is not installed: from pg_extension, for code that no SQL function of
 * snowseq called (a background worker).  The caller is connected to SPI.
 */
char *
ExtSchemaInstalled(void)
{
	return SpiValue(CurrentMemoryContext, "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e "
					"JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					"WHERE e.extname OPERATOR(pg_catalog.=) 'snowseq'");
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
