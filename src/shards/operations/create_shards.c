/*
 * create_shards.c
 *		snowseq_create_shards: the first partitions of a gene-sharded table,
 *		on gene boundaries, and the routing map to match.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "partitioning/partdesc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"

#include "compat.h"
#include "gene.h"
#include "nodes.h"
#include "snowseq.h"
#include "sqlrun.h"

PG_FUNCTION_INFO_V1(snowseq_create_shards);

/*
 * snowseq_create_shards(parent, n): n range partitions of a table
 * partitioned by range on its bigint ID column, on gene boundaries, and the
 * routing map to match.
 */
Datum
snowseq_create_shards(PG_FUNCTION_ARGS)
{
	Oid			parent = PG_GETARG_OID(0);
	int32		n = PG_GETARG_INT32(1);
	Relation	rel;
	PartitionKey key;
	char	   *nspname;
	char	   *relname;
	char	   *qparent;
	char	   *qmap = ExtObject(fcinfo->flinfo->fn_oid, "snowseq_shard_map");
	int			genes;
	StringInfoData q;
	int			existing;

	if (n < 1 || n > SNOWSEQ_MAX_GENE + 1 || (n & (n - 1)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("number of partitions must be a power of two from 1 to %d, not %d",
						SNOWSEQ_MAX_GENE + 1, n),
				 errhint("The partitions hold equal gene ranges, so their number divides 32768.")));

	/* the owner's right, checked before any lock is taken */
	if (!SnowseqClassOwnercheck(parent, GetUserId()))
	{
		char	   *name = get_rel_name(parent);

		if (name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("relation with OID %u does not exist", parent)));
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(parent)), name);
	}
	rel = table_open(parent, AccessExclusiveLock);
	relname = pstrdup(RelationGetRelationName(rel));
	nspname = get_namespace_name(RelationGetNamespace(rel));
	qparent = quote_qualified_identifier(nspname, relname);
	if (rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" is not partitioned", relname),
				 errhint("Create it with PARTITION BY RANGE (id_column) on its bigint ID column.")));
	key = RelationGetPartitionKey(rel);
	if (key->strategy != PARTITION_STRATEGY_RANGE || key->partnatts != 1 ||
		key->partattrs[0] == 0 || key->parttypid[0] != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("table \"%s\" must be partitioned by range on one bigint column", relname),
				 errhint("Create it with PARTITION BY RANGE (id_column) on its bigint ID column.")));
	if (RelationGetPartitionDesc(rel, true)->nparts > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" already has partitions", relname),
				 errhint("snowseq_create_shards creates all partitions of a table at once.")));
	table_close(rel, NoLock);

	/* partition names are parent_0 .. parent_{n-1}: they must fit unshortened */
	if (strlen(relname) + 1 + strlen(psprintf("%d", n - 1)) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("partition names of table \"%s\" would exceed %d characters", relname, NAMEDATALEN - 1),
				 errhint("Use a shorter table name; partitions are named table_0 to table_%d.", n - 1)));

	/* no shards for a server whose IDs collide with another's */
	NodesRefuseCollision(NULL, "create shards");

	genes = (SNOWSEQ_MAX_GENE + 1) / n;
	SPI_connect();
	initStringInfo(&q);
	/* a map already there must describe the same gene ranges */
	appendStringInfo(&q,
					 "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE (upper_gene OPERATOR(pg_catalog.%%) %d) "
					 "OPERATOR(pg_catalog.=) %d) FROM %s",
					 genes, genes - 1, qmap);
	SpiRun(q.data, SPI_OK_SELECT);
	{
		bool		isnull;
		HeapTuple	row = SPI_tuptable->vals[0];
		int			aligned;

		existing = (int) DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull));
		aligned = (int) DatumGetInt64(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull));
		if (existing > 0 && (aligned != existing || existing != n))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("snowseq_shard_map already describes %d shards with other gene ranges", existing),
					 errhint("Empty snowseq_shard_map first, or create %d shards to match it.", existing)));
	}
	for (int i = 0; i < n; i++)
	{
		char	   *part = psprintf("%s_%d", relname, i);
		char	   *qpart = quote_qualified_identifier(nspname, part);

		/* the last partition ends at the top of bigint */
		char	   *upper = i == n - 1 ? "MAXVALUE" :
			psprintf(INT64_FORMAT, GeneFirstId((i + 1) * genes));

		resetStringInfo(&q);
		appendStringInfo(&q, "CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (" INT64_FORMAT ") TO (%s)",
						 qpart, qparent, GeneFirstId(i * genes), upper);
		SpiRun(q.data, SPI_OK_UTILITY);
		if (existing == 0)
		{
			resetStringInfo(&q);
			appendStringInfo(&q, "INSERT INTO %s (upper_gene, shard) "
							 "VALUES ($1::pg_catalog.int4, $2::pg_catalog.text)", qmap);
			SpiRunParams(q.data, SQL_ARGS(psprintf("%d", (i + 1) * genes - 1), qpart), SPI_OK_INSERT);
		}
	}
	SPI_finish();
	if (existing > 0)
		ereport(NOTICE,
				(errmsg("snowseq_shard_map already matches %d shards and was left as it is", n)));
	PG_RETURN_VOID();
}
