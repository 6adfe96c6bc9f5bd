/*
 * move_schema.c
 *		The destination table of a move gets what the source table has.
 *
 * move.c creates the destination table with the source's columns, NOT
 * NULL, primary key and grants (the primary key is the replica identity
 * that the subscription's updates and deletes find rows by, so it must be
 * there before the copy).  This file adds the rest, read on the source
 * through the move's connection (pg_get_expr, pg_get_constraintdef,
 * pg_get_triggerdef, pg_get_indexdef: that session's search_path is
 * pg_catalog alone, so every name in those texts is qualified):
 *
 *	before the copy  defaults, check constraints, triggers, policies and
 *					 ENABLE / FORCE ROW LEVEL SECURITY, REPLICA IDENTITY
 *					 FULL, column comments (MoveSchemaCreate);
 *	after the copy	 secondary indexes and unique and exclusion constraints,
 *					 built once on the copied rows instead of row by row
 *					 during the copy, as Citus does (MoveSchemaIndexes);
 *					 the subscription goes on streaming meanwhile, and the
 *					 catch-up that follows includes what arrived;
 *	after streaming  triggers that are ENABLE REPLICA or ENABLE ALWAYS on
 *					 the source get that state (MoveSchemaTriggersOn): until
 *					 the subscription is dropped they stay disabled, since
 *					 logical apply fires exactly these and they already fired
 *					 on the source.  Ordinary triggers are created as they
 *					 are: the apply worker does not fire them.
 *
 * Foreign keys are not created: the table they reference does not move
 * with the genes (a NOTICE names each).  Every function, sequence and role
 * that these objects use must exist on the destination: MoveSchemaCheck
 * refuses the move before it starts and names the first one missing.
 * Objects with a name of their own in the schema (indexes, and so unique
 * constraints) and check constraints are named after the destination table:
 * the source table's name at the start of theirs is replaced, or the
 * destination table's name is put in front.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/pg_list.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "move_schema.h"

/* triggers of snowseq's own: moves and merges create them where they need them */
#define FENCE_TRIGGERS "'{snowseq_fence,snowseq_fence_truncate,snowseq_merge,snowseq_merge_truncate}'::pg_catalog.name[]"

/*
 * The queries about the source table get it as parameters: $1 as a
 * regclass, and $2, where they build statements that name it, as text.
 */

/* The table on the destination that the statements build on. */
static const char *
SchemaTarget(const MoveSchemaTables *t)
{
	return t->target ? t->target : t->table;
}

/* The name of an object of the destination table, after its source name. */
static char *
SchemaObjectName(const MoveSchemaTables *t, const char *name)
{
	size_t		len = strlen(t->src_rel);
	char	   *s;

	if (strncmp(name, t->src_rel, len) == 0 && name[len] != '\0')
		s = psprintf("%s%s", t->dst_rel, name + len);
	else
		s = psprintf("%s_%s", t->dst_rel, name);
	if (strlen(s) >= NAMEDATALEN)
		s[pg_mbcliplen(s, strlen(s), NAMEDATALEN - 1)] = '\0';
	return s;
}

/*
 * A name for an index on the destination that no relation of the schema
 * has, nor one of *used: name, or name_1, name_2...
 */
static char *
SchemaFreeName(const MoveSchemaTables *t, const char *name, List **used)
{
	for (int n = 0;; n++)
	{
		char	   *cand = pstrdup(name);
		bool		taken = false;
		ListCell   *lc;

		if (n > 0)
		{
			char	   *suffix = psprintf("_%d", n);
			size_t		room = NAMEDATALEN - 1 - strlen(suffix);

			if (strlen(cand) > room)
				cand[pg_mbcliplen(cand, strlen(cand), room)] = '\0';
			cand = psprintf("%s%s", cand, suffix);
		}
		foreach(lc, *used)
			taken |= strcmp(lfirst(lc), cand) == 0;
		if (!taken)
		{
			char	   *v = RemoteValueParams(t->dst, "SELECT pg_catalog.to_regclass($1::pg_catalog.text) IS NULL",
											  SQL_ARGS(quote_qualified_identifier(t->nsp, cand)),
											  "look up an index name");

			taken = strcmp(v, "t") != 0;
		}
		if (!taken)
		{
			*used = lappend(*used, cand);
			return cand;
		}
	}
}

/*
 * Refuse a move whose destination lacks a function, sequence or role that
 * the source table's defaults, constraints, indexes, triggers, policies or
 * grants use: creating them there would fail, or worse, a default would
 * fail on the first insert after the switch.  Foreign keys are not
 * created: say so, naming each.
 */
void
MoveSchemaCheck(const MoveSchemaTables *t)
{
	PGresult   *res;
	List	   *used[4] = {NIL, NIL, NIL, NIL}; /* kind, schema, name, arguments */
	int			n;

	res = RemoteExecParams(t->src,
						   "WITH o(classid, objid) AS ("
						   "SELECT 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid, indexrelid FROM pg_catalog.pg_index "
						   "WHERE indrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "UNION ALL SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid, oid FROM pg_catalog.pg_constraint "
						   "WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND contype OPERATOR(pg_catalog.<>) 'f' "
						   "UNION ALL SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass::pg_catalog.oid, oid FROM pg_catalog.pg_trigger "
						   "WHERE tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND NOT tgisinternal "
						   "AND tgname OPERATOR(pg_catalog.<>) ALL (" FENCE_TRIGGERS ") "
						   "UNION ALL SELECT 'pg_catalog.pg_policy'::pg_catalog.regclass::pg_catalog.oid, oid FROM pg_catalog.pg_policy "
						   "WHERE polrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "UNION ALL SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid, oid FROM pg_catalog.pg_attrdef "
						   "WHERE adrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass), "
						   "d AS (SELECT DISTINCT d.refclassid, d.refobjid FROM pg_catalog.pg_depend d JOIN o "
						   "ON o.classid OPERATOR(pg_catalog.=) d.classid AND o.objid OPERATOR(pg_catalog.=) d.objid) "
						   "SELECT * FROM ("
						   "SELECT 'function' k, n.nspname::text nsp, p.proname::text nm, pg_catalog.oidvectortypes(p.proargtypes) args "
						   "FROM d JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.refobjid "
						   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace "
						   "WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass "
						   "AND n.nspname OPERATOR(pg_catalog.<>) 'pg_catalog' "
						   "UNION ALL SELECT 'sequence', n.nspname::text, s.relname::text, '' "
						   "FROM d JOIN pg_catalog.pg_class s ON s.oid OPERATOR(pg_catalog.=) d.refobjid "
						   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.relnamespace "
						   "WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
						   "AND s.relkind OPERATOR(pg_catalog.=) 'S' "
						   "UNION ALL SELECT 'role', '', r.rolname::text, '' FROM pg_catalog.pg_roles r "
						   "WHERE r.oid OPERATOR(pg_catalog.=) ANY (SELECT x.grantee FROM pg_catalog.pg_class c, "
						   "pg_catalog.aclexplode(c.relacl) x WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "UNION SELECT pg_catalog.unnest(polroles) FROM pg_catalog.pg_policy WHERE polrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "UNION SELECT relowner FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass)"
						   ") x ORDER BY 1, 2, 3, 4",
						   SQL_ARGS(t->table), "read what the source table uses");
	n = PQntuples(res);
	for (int i = 0; i < n; i++)
		for (int j = 0; j < 4; j++)
			used[j] = lappend(used[j], pstrdup(PQgetvalue(res, i, j)));
	PQclear(res);
	if (n > 0)
	{
		/* by the catalogs, not to_regprocedure: a missing argument type must not raise */
		res = RemoteExecParams(t->dst,
							   "SELECT v.k, CASE v.k WHEN 'role' THEN pg_catalog.quote_ident(v.nm) "
							   "ELSE pg_catalog.quote_ident(v.nsp) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) "
							   "pg_catalog.quote_ident(v.nm) END OPERATOR(pg_catalog.||) "
							   "CASE v.k WHEN 'function' THEN '(' OPERATOR(pg_catalog.||) v.args OPERATOR(pg_catalog.||) ')' ELSE '' END "
							   "FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]), "
							   "pg_catalog.unnest($3::pg_catalog.text[]), pg_catalog.unnest($4::pg_catalog.text[])) "
							   "WITH ORDINALITY v(k, nsp, nm, args, i) WHERE NOT CASE v.k "
							   "WHEN 'function' THEN EXISTS (SELECT 1 FROM pg_catalog.pg_proc p "
							   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace "
							   "WHERE n.nspname OPERATOR(pg_catalog.=) v.nsp AND p.proname OPERATOR(pg_catalog.=) v.nm "
							   "AND pg_catalog.oidvectortypes(p.proargtypes) OPERATOR(pg_catalog.=) v.args) "
							   "WHEN 'sequence' THEN EXISTS (SELECT 1 FROM pg_catalog.pg_class s "
							   "JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) s.relnamespace "
							   "WHERE n.nspname OPERATOR(pg_catalog.=) v.nsp AND s.relname OPERATOR(pg_catalog.=) v.nm "
							   "AND s.relkind OPERATOR(pg_catalog.=) 'S') "
							   "ELSE EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) v.nm) END "
							   "ORDER BY v.i LIMIT 1",
							   SQL_ARGS(SqlTextArray(used[0]), SqlTextArray(used[1]), SqlTextArray(used[2]),
										SqlTextArray(used[3])),
							   "look up what the source table uses");
		if (PQntuples(res) == 1)
		{
			char	   *kind = pstrdup(PQgetvalue(res, 0, 0));
			char	   *name = pstrdup(PQgetvalue(res, 0, 1));

			PQclear(res);
			ereport(ERROR,
					(errcode(strcmp(kind, "function") == 0 ? ERRCODE_UNDEFINED_FUNCTION : ERRCODE_UNDEFINED_OBJECT),
					 errmsg("%s %s does not exist on server \"%s\"", kind, name, t->dst->server),
					 errdetail("Table %s on server \"%s\" uses it (a default, constraint, index, trigger, policy, grant or its owner), "
							   "and the moved genes get all of these on server \"%s\".",
							   t->table, t->src->server, t->dst->server),
					 errhint("Create the %s on server \"%s\", then move the genes.", kind, t->dst->server)));
		}
		PQclear(res);
	}

	/* foreign keys reference a table that does not move with the genes (but those of its group) */
	res = RemoteExecParams(t->src, "SELECT pg_catalog.quote_ident(conname), confrelid::pg_catalog.regclass::pg_catalog.text "
						   "FROM pg_catalog.pg_constraint WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "AND contype OPERATOR(pg_catalog.=) 'f' "
						   "AND NOT coalesce(confrelid OPERATOR(pg_catalog.=) ANY (" MOVE_GROUP_OIDS(2) "), false) "
						   "ORDER BY conname",
						   SQL_ARGS(t->table, t->group), "read the foreign keys of the source table");
	for (int i = 0; i < PQntuples(res); i++)
		ereport(NOTICE,
				(errmsg("foreign key %s of table %s is not created on server \"%s\"",
						PQgetvalue(res, i, 0), t->table, t->dst->server),
				 errdetail("It references table %s, which does not move with the genes to server \"%s\".",
						   PQgetvalue(res, i, 1), t->dst->server)));
	PQclear(res);
}

/*
 * Give the new destination table, before the copy, the defaults, check
 * constraints, triggers, policies, row level security, replica identity
 * and column comments of the source table, in one remote transaction.
 */
void
MoveSchemaCreate(const MoveSchemaTables *t)
{
	char	   *genes = psprintf("%s_genes", t->dst_rel);
	char	   *pkey = psprintf("%s_pkey", t->dst_rel);
	PGresult   *res;
	StringInfoData sql;

	res = RemoteExecParams(t->src,
						   "SELECT k, nm, def FROM ("
						   "SELECT 1 o, 'sql' k, a.attname::text nm, pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', "
						   "$2::pg_catalog.text, a.attname, pg_catalog.pg_get_expr(d.adbin, d.adrelid)) def "
						   "FROM pg_catalog.pg_attrdef d JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.adrelid "
						   "AND a.attnum OPERATOR(pg_catalog.=) d.adnum WHERE d.adrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "AND a.attgenerated OPERATOR(pg_catalog.=) '' AND NOT a.attisdropped "
						   "UNION ALL SELECT 2, 'check', conname::text, pg_catalog.pg_get_constraintdef(oid) "
						   "FROM pg_catalog.pg_constraint WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND contype OPERATOR(pg_catalog.=) 'c' "
						   "UNION ALL SELECT 3, 'sql', tgname::text, pg_catalog.replace(pg_catalog.pg_get_triggerdef(oid), "
						   "' ON ' OPERATOR(pg_catalog.||) $1::pg_catalog.regclass::pg_catalog.text OPERATOR(pg_catalog.||) ' ', "
						   "' ON ' OPERATOR(pg_catalog.||) $2::pg_catalog.text OPERATOR(pg_catalog.||) ' ') OPERATOR(pg_catalog.||) "
						   "CASE WHEN tgenabled OPERATOR(pg_catalog.=) 'O' THEN '' ELSE "
						   "pg_catalog.format('; ALTER TABLE %s DISABLE TRIGGER %I', $2::pg_catalog.text, tgname) END "
						   "FROM pg_catalog.pg_trigger WHERE tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND NOT tgisinternal "
						   "AND tgname OPERATOR(pg_catalog.<>) ALL (" FENCE_TRIGGERS ") "
						   "UNION ALL SELECT 4, 'sql', polname::text, pg_catalog.format('CREATE POLICY %I ON %s AS %s FOR %s TO %s%s%s', "
						   "polname, $2::pg_catalog.text, CASE WHEN polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END, "
						   "CASE polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' "
						   "WHEN 'd' THEN 'DELETE' ELSE 'ALL' END, "
						   "(SELECT pg_catalog.string_agg(CASE WHEN r OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' "
						   "ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(r)) END, ', ') FROM pg_catalog.unnest(polroles) r), "
						   "coalesce(' USING (' OPERATOR(pg_catalog.||) pg_catalog.pg_get_expr(polqual, polrelid) OPERATOR(pg_catalog.||) ')', ''), "
						   "coalesce(' WITH CHECK (' OPERATOR(pg_catalog.||) pg_catalog.pg_get_expr(polwithcheck, polrelid) "
						   "OPERATOR(pg_catalog.||) ')', '')) "
						   "FROM pg_catalog.pg_policy WHERE polrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "UNION ALL SELECT 5, 'sql', '', pg_catalog.concat_ws('; ', "
						   "CASE WHEN relrowsecurity THEN pg_catalog.format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', $2::pg_catalog.text) END, "
						   "CASE WHEN relforcerowsecurity THEN pg_catalog.format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', $2::pg_catalog.text) END, "
						   "CASE WHEN relreplident OPERATOR(pg_catalog.=) 'f' THEN pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', $2::pg_catalog.text) END) "
						   "FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "UNION ALL SELECT 6, 'sql', a.attname::text, pg_catalog.format('COMMENT ON COLUMN %s.%I IS %L', $2::pg_catalog.text, a.attname, ds.description) "
						   "FROM pg_catalog.pg_description ds JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) ds.objoid "
						   "AND a.attnum OPERATOR(pg_catalog.=) ds.objsubid WHERE ds.objoid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "AND ds.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
						   "AND ds.objsubid OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
						   ") x WHERE def OPERATOR(pg_catalog.<>) '' ORDER BY o, nm",
						   SQL_ARGS(t->table, SchemaTarget(t)),
						   "read the definitions of the source table");
	initStringInfo(&sql);
	for (int i = 0; i < PQntuples(res); i++)
	{
		const char *kind = PQgetvalue(res, i, 0);
		const char *def = PQgetvalue(res, i, 2);

		if (strcmp(kind, "check") == 0)
		{
			char	   *name = SchemaObjectName(t, PQgetvalue(res, i, 1));

			/*
			 * A source table made by a move has a check of its genes: the
			 * destination has its own, on the moved genes only.
			 */
			if (strcmp(name, genes) == 0 || strcmp(name, pkey) == 0)
				continue;
			appendStringInfo(&sql, "ALTER TABLE %s ADD CONSTRAINT %s %s; ",
							 SchemaTarget(t), quote_identifier(name), def);
		}
		else
			appendStringInfo(&sql, "%s; ", def);
	}
	PQclear(res);
	if (sql.len > 0)
		RemoteCommand(t->dst, sql.data, "create the defaults, constraints, triggers and policies of the destination table");
}

/*
 * Build the source table's secondary indexes and its unique and exclusion
 * constraints on the copy, once the initial copy is done.
 */
void
MoveSchemaIndexes(const MoveSchemaTables *t)
{
	PGresult   *res;
	StringInfoData sql;
	List	   *used = NIL;
	TimestampTz start = GetCurrentTimestamp();
	int			n;

	/* the text of pg_get_indexdef after "CREATE [UNIQUE] INDEX name ON table " */
	res = RemoteExecParams(t->src,
						   "SELECT 'index', c.relname::text, CASE WHEN pg_catalog.starts_with(x.def, x.head) "
						   "THEN pg_catalog.substr(x.def, pg_catalog.length(x.head) OPERATOR(pg_catalog.+) 1) END, "
						   "i.indisunique FROM pg_catalog.pg_index i "
						   "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid, "
						   "LATERAL (SELECT pg_catalog.pg_get_indexdef(i.indexrelid) def, 'CREATE ' OPERATOR(pg_catalog.||) "
						   "CASE WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END OPERATOR(pg_catalog.||) 'INDEX ' OPERATOR(pg_catalog.||) "
						   "pg_catalog.quote_ident(c.relname) OPERATOR(pg_catalog.||) ' ON ' OPERATOR(pg_catalog.||) $2::pg_catalog.text "
						   "OPERATOR(pg_catalog.||) ' ' head) x "
						   "WHERE i.indrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass AND i.indisvalid AND NOT EXISTS (SELECT 1 "
						   "FROM pg_catalog.pg_constraint k WHERE k.conindid OPERATOR(pg_catalog.=) i.indexrelid "
						   "AND k.conrelid OPERATOR(pg_catalog.=) i.indrelid AND k.contype OPERATOR(pg_catalog.=) ANY ('{p,u,x}')) "
						   "UNION ALL SELECT 'constraint', conname::text, pg_catalog.pg_get_constraintdef(oid), false "
						   "FROM pg_catalog.pg_constraint WHERE conrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
						   "AND contype OPERATOR(pg_catalog.=) ANY ('{u,x}') ORDER BY 1, 2",
						   SQL_ARGS(t->table, SchemaTarget(t)),
						   "read the indexes of the source table");
	n = PQntuples(res);
	initStringInfo(&sql);
	for (int i = 0; i < n; i++)
	{
		const char *kind = PQgetvalue(res, i, 0);
		const char *src_name = PQgetvalue(res, i, 1);
		char	   *name = SchemaFreeName(t, SchemaObjectName(t, src_name), &used);

		if (PQgetisnull(res, i, 2))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("could not read the definition of index %s of table %s on server \"%s\"",
							quote_identifier(src_name), t->table, t->src->server),
					 errhint("Drop the index, move the genes, then create it again on both servers.")));
		if (strcmp(kind, "index") == 0)
			appendStringInfo(&sql, "CREATE %sINDEX %s ON %s %s; ",
							 strcmp(PQgetvalue(res, i, 3), "t") == 0 ? "UNIQUE " : "",
							 quote_identifier(name), SchemaTarget(t), PQgetvalue(res, i, 2));
		else
			appendStringInfo(&sql, "ALTER TABLE %s ADD CONSTRAINT %s %s; ",
							 SchemaTarget(t), quote_identifier(name), PQgetvalue(res, i, 2));
	}
	PQclear(res);
	if (n == 0)
		return;
	RemoteCommand(t->dst, sql.data, "build the indexes of the destination table");
	ereport(NOTICE,
			(errmsg("built %d indexes and constraints of table %s on server \"%s\" in %.1f s",
					n, SchemaTarget(t), t->dst->server,
					(double) (GetCurrentTimestamp() - start) / 1000000.0)));
}

/*
 * Once replication has stopped: triggers that are ENABLE REPLICA or ENABLE
 * ALWAYS on the source get that state on the copy (they were disabled while
 * the subscription applied, since apply fires them).
 */
void
MoveSchemaTriggersOn(const MoveSchemaTables *t)
{
	char	   *v = RemoteValueParams(t->src,
									  "SELECT pg_catalog.string_agg(pg_catalog.format('ALTER TABLE %s ENABLE %s TRIGGER %I', $2::pg_catalog.text, "
									  "CASE tgenabled WHEN 'R' THEN 'REPLICA' ELSE 'ALWAYS' END, tgname), '; ') "
									  "FROM pg_catalog.pg_trigger WHERE tgrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass "
									  "AND NOT tgisinternal AND tgenabled OPERATOR(pg_catalog.=) ANY ('{R,A}') "
									  "AND tgname OPERATOR(pg_catalog.<>) ALL (" FENCE_TRIGGERS ")",
									  SQL_ARGS(t->table, SchemaTarget(t)),
									  "read the replica triggers of the source table");

	if (v != NULL)
		RemoteCommand(t->dst, v, "enable the replica triggers of the destination table");
}
