/*
 * gene.c
 *		Sharding genes: 15 bits of hash of a business key, the top of an ID
 *		so that the ID says which shard holds its row.
 *
 * gene = (XXH64(bytes, 0) ^ h1 of MurmurHash3_x64_128(bytes, 0)) & 0x7FFF,
 * with text as UTF-8, bigint as 8 bytes little-endian, bytea as is.
 */
#include "postgres.h"

#include <murmurhash.h>
#include <xxhash.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/uuid.h"

#include "gene.h"
#include "guc.h"
#include "segment.h"
#include "shmem.h"

/* The hash of a byte string whose low 15 bits are its gene (23 bits: its wide gene). */
static uint64
GeneHashOfBytes(const char *data, size_t len)
{
	uint64_t	mm[2];

	lmmh_x64_128(data, (unsigned int) len, 0, mm);
	return XXH64(data, len, 0) ^ mm[0];
}

/* The gene of a byte string. */
int
GeneOfBytes(const char *data, size_t len)
{
	return (int) (GeneHashOfBytes(data, len) & SNOWSEQ_MAX_GENE);
}

/*
 * Hash of a text key, as UTF-8 whatever the database encoding.  A char(n)
 * key is hashed without its padding, as its cast to text is.
 */
static uint64
HashOfChars(char *data, int len)
{
	char	   *utf8 = pg_server_to_any(data, len, PG_UTF8);
	uint64		h;

	if (utf8 != data)
		len = strlen(utf8);
	h = GeneHashOfBytes(utf8, len);
	if (utf8 != data)
		pfree(utf8);
	return h;
}

/* Hash of a text key. */
static uint64
HashOfText(text *t)
{
	return HashOfChars(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
}

/* Hash of a bigint key: its 8 bytes, little-endian. */
static uint64
HashOfInt8(int64 v)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char) ((uint64) v >> (8 * i));
	return GeneHashOfBytes((const char *) b, 8);
}

/* Hash of a bytea key. */
static uint64
HashOfBytea(bytea *b)
{
	return GeneHashOfBytes(VARDATA_ANY(b), VARSIZE_ANY_EXHDR(b));
}

/* Hash of a char(n) key: its text, trailing blanks dropped as its cast to text drops them. */
static uint64
HashOfBpchar(BpChar *b)
{
	char	   *data = VARDATA_ANY(b);

	return HashOfChars(data, bpchartruelen(data, VARSIZE_ANY_EXHDR(b)));
}

/* Hash of a name key: its characters, as its cast to text. */
static uint64
HashOfName(Name n)
{
	return HashOfChars(NameStr(*n), strlen(NameStr(*n)));
}

/* Gene of a text key given as characters. */
static int
GeneOfChars(char *data, int len)
{
	return (int) (HashOfChars(data, len) & SNOWSEQ_MAX_GENE);
}

/* Gene of a text key. */
static int
GeneOfText(text *t)
{
	return (int) (HashOfText(t) & SNOWSEQ_MAX_GENE);
}

/* Gene of a bigint key. */
static int
GeneOfInt8(int64 v)
{
	return (int) (HashOfInt8(v) & SNOWSEQ_MAX_GENE);
}

/* Gene of a bytea key. */
static int
GeneOfBytea(bytea *b)
{
	return (int) (HashOfBytea(b) & SNOWSEQ_MAX_GENE);
}

/*
 * The 23-bit gene of a 128-bit gene ID: the 15-bit gene on top, so that
 * wide >> 8 is the gene of the same key, then the next 8 bits of the hash.
 */
static uint32
WideGeneOfHash(uint64 h)
{
	return (uint32) (((h & SNOWSEQ_MAX_GENE) << SNOWSEQ_WIDE_EXTRA_BITS) |
					 ((h >> SNOWSEQ_GENE_BITS) & ((1 << SNOWSEQ_WIDE_EXTRA_BITS) - 1)));
}

/* The 128-bit gene ID of its fields (layout in snowseq.h). */
void
WideIdToUuid(const WideId *w, pg_uuid_t *uuid)
{
	/* segment bits 78..74, then 73..62, then 61..0 */
	uint64		hi = ((uint64) w->gene << 41) |
		((uint64) w->key_version << 21) |
		((w->seg_hi >> 10) << 16) |
		(UINT64CONST(8) << 12) |
		(((w->seg_hi & 0x3FF) << 2) | (w->seg_lo >> 62));
	uint64		lo = (UINT64CONST(2) << 62) | (w->seg_lo & ((UINT64CONST(1) << 62) - 1));

	for (int i = 7; i >= 0; i--)
	{
		uuid->data[i] = (unsigned char) hi;
		uuid->data[8 + i] = (unsigned char) lo;
		hi >>= 8;
		lo >>= 8;
	}
}

/*
 * The fields of a 128-bit gene ID; false for a UUID that is not RFC 9562
 * version 8 of the RFC variant, which no 128-bit gene ID is.
 */
bool
WideIdFromUuid(const pg_uuid_t *uuid, WideId *w)
{
	uint64		hi = 0;
	uint64		lo = 0;

	for (int i = 0; i < 8; i++)
	{
		hi = (hi << 8) | uuid->data[i];
		lo = (lo << 8) | uuid->data[8 + i];
	}
	if (((hi >> 12) & 0xF) != 8 || (lo >> 62) != 2)
		return false;
	w->gene = (uint32) (hi >> 41);
	w->key_version = (uint32) ((hi >> 21) & ((1 << SNOWSEQ_WIDE_VERSION_BITS) - 1));
	w->seg_hi = (((hi >> 16) & 0x1F) << 10) | ((hi & 0xFFF) >> 2);
	w->seg_lo = ((hi & 0x3) << 62) | (lo & ((UINT64CONST(1) << 62) - 1));
	return true;
}

/*
 * A 128-bit gene ID of a key's hash: key version 0, the next wide segment
 * of this node, (counter << 30) | node id.
 */
static pg_uuid_t *
GeneUuid(uint64 h)
{
	pg_uuid_t  *uuid = palloc(sizeof(pg_uuid_t));
	WideId		w;
	uint64		counter;

	SnowseqCheckUsable();
	counter = WideSegmentNext();
	w.gene = WideGeneOfHash(h);
	w.key_version = 0;
	w.seg_hi = counter >> (64 - SNOWSEQ_WIDE_NODE_BITS);
	w.seg_lo = (counter << SNOWSEQ_WIDE_NODE_BITS) | (uint64) snowseq_node_id;
	WideIdToUuid(&w, uuid);
	return uuid;
}

/* ERROR for a NULL key: an ID without a gene is never issued. */
static void
CheckKey(FunctionCallInfo fcinfo)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the key of %s() must not be NULL", get_func_name(fcinfo->flinfo->fn_oid)),
				 errhint("Pass the business key (text, bigint or bytea) the ID is to be routed by.")));
}

/* Gene ID: gene << 48 | the next segment of this node. */
static int64
GeneNext(int gene)
{
	SnowseqCheckUsable();
	return GeneFirstId(gene) | (int64) SegmentNext();
}

PG_FUNCTION_INFO_V1(snowseq_gene_text);
PG_FUNCTION_INFO_V1(snowseq_gene_int8);
PG_FUNCTION_INFO_V1(snowseq_gene_bytea);
PG_FUNCTION_INFO_V1(snowseq_gene_next_text);
PG_FUNCTION_INFO_V1(snowseq_gene_next_int8);
PG_FUNCTION_INFO_V1(snowseq_gene_next_bytea);
PG_FUNCTION_INFO_V1(snowseq_fill_gene_id);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_text);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_int8);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_bytea);
PG_FUNCTION_INFO_V1(snowseq_gene_int4);
PG_FUNCTION_INFO_V1(snowseq_gene_next_int4);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_int4);
PG_FUNCTION_INFO_V1(snowseq_gene_int2);
PG_FUNCTION_INFO_V1(snowseq_gene_next_int2);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_int2);
PG_FUNCTION_INFO_V1(snowseq_gene_varchar);
PG_FUNCTION_INFO_V1(snowseq_gene_next_varchar);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_varchar);
PG_FUNCTION_INFO_V1(snowseq_gene_bpchar);
PG_FUNCTION_INFO_V1(snowseq_gene_next_bpchar);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_bpchar);
PG_FUNCTION_INFO_V1(snowseq_gene_name);
PG_FUNCTION_INFO_V1(snowseq_gene_next_name);
PG_FUNCTION_INFO_V1(snowseq_gene_uuid_name);

/* snowseq_gene_uuid(text) -> uuid */
Datum
snowseq_gene_uuid_text(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfText(PG_GETARG_TEXT_PP(0))));
}

/* snowseq_gene_uuid(bigint) -> uuid */
Datum
snowseq_gene_uuid_int8(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfInt8(PG_GETARG_INT64(0))));
}

/* snowseq_gene_uuid(bytea) -> uuid */
Datum
snowseq_gene_uuid_bytea(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfBytea(PG_GETARG_BYTEA_PP(0))));
}

/* snowseq_gene(text) -> int */
Datum
snowseq_gene_text(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32(GeneOfText(PG_GETARG_TEXT_PP(0)));
}

/* snowseq_gene(bigint) -> int */
Datum
snowseq_gene_int8(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32(GeneOfInt8(PG_GETARG_INT64(0)));
}

/* snowseq_gene(bytea) -> int */
Datum
snowseq_gene_bytea(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32(GeneOfBytea(PG_GETARG_BYTEA_PP(0)));
}

/* snowseq_gene_next(text) -> bigint */
Datum
snowseq_gene_next_text(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext(GeneOfText(PG_GETARG_TEXT_PP(0))));
}

/* snowseq_gene_next(bigint) -> bigint */
Datum
snowseq_gene_next_int8(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext(GeneOfInt8(PG_GETARG_INT64(0))));
}

/* snowseq_gene_next(bytea) -> bigint */
Datum
snowseq_gene_next_bytea(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext(GeneOfBytea(PG_GETARG_BYTEA_PP(0))));
}

/*
 * Exact overloads for the argument types callers pass most (integer and
 * smallint columns for bigint keys; varchar, char(n) and name for text
 * keys).  Each gives what its key cast to bigint or text gives: without
 * them such a call resolves through an implicit cast, and an overload of
 * that exact type that a role with CREATE on a schema of the search path
 * planted would win over snowseq's (docs/security.md).  Each has a symbol of
 * its own: an integer Datum is not a bigint Datum where bigint is passed by
 * reference, and a C symbol keeps one argument list (test/t/060_upgrade.pl).
 */

/* snowseq_gene(integer) -> int, as snowseq_gene(bigint) */
Datum
snowseq_gene_int4(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32(GeneOfInt8((int64) PG_GETARG_INT32(0)));
}

/* snowseq_gene_next(integer) -> bigint, as snowseq_gene_next(bigint) */
Datum
snowseq_gene_next_int4(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext(GeneOfInt8((int64) PG_GETARG_INT32(0))));
}

/* snowseq_gene_uuid(integer) -> uuid, as snowseq_gene_uuid(bigint) */
Datum
snowseq_gene_uuid_int4(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfInt8((int64) PG_GETARG_INT32(0))));
}

/* snowseq_gene(smallint) -> int, as snowseq_gene(bigint) */
Datum
snowseq_gene_int2(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32(GeneOfInt8((int64) PG_GETARG_INT16(0)));
}

/* snowseq_gene_next(smallint) -> bigint, as snowseq_gene_next(bigint) */
Datum
snowseq_gene_next_int2(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext(GeneOfInt8((int64) PG_GETARG_INT16(0))));
}

/* snowseq_gene_uuid(smallint) -> uuid, as snowseq_gene_uuid(bigint) */
Datum
snowseq_gene_uuid_int2(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfInt8((int64) PG_GETARG_INT16(0))));
}

/* snowseq_gene(varchar) -> int, as snowseq_gene(text) */
Datum
snowseq_gene_varchar(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32(GeneOfText(PG_GETARG_TEXT_PP(0)));
}

/* snowseq_gene_next(varchar) -> bigint, as snowseq_gene_next(text) */
Datum
snowseq_gene_next_varchar(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext(GeneOfText(PG_GETARG_TEXT_PP(0))));
}

/* snowseq_gene_uuid(varchar) -> uuid, as snowseq_gene_uuid(text) */
Datum
snowseq_gene_uuid_varchar(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfText(PG_GETARG_TEXT_PP(0))));
}

/* snowseq_gene(char(n)) -> int, as snowseq_gene(text) */
Datum
snowseq_gene_bpchar(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32((int) (HashOfBpchar(PG_GETARG_BPCHAR_PP(0)) & SNOWSEQ_MAX_GENE));
}

/* snowseq_gene_next(char(n)) -> bigint, as snowseq_gene_next(text) */
Datum
snowseq_gene_next_bpchar(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext((int) (HashOfBpchar(PG_GETARG_BPCHAR_PP(0)) & SNOWSEQ_MAX_GENE)));
}

/* snowseq_gene_uuid(char(n)) -> uuid, as snowseq_gene_uuid(text) */
Datum
snowseq_gene_uuid_bpchar(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfBpchar(PG_GETARG_BPCHAR_PP(0))));
}

/* snowseq_gene(name) -> int, as snowseq_gene(text) */
Datum
snowseq_gene_name(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT32((int) (HashOfName(PG_GETARG_NAME(0)) & SNOWSEQ_MAX_GENE));
}

/* snowseq_gene_next(name) -> bigint, as snowseq_gene_next(text) */
Datum
snowseq_gene_next_name(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_INT64(GeneNext((int) (HashOfName(PG_GETARG_NAME(0)) & SNOWSEQ_MAX_GENE)));
}

/* snowseq_gene_uuid(name) -> uuid, as snowseq_gene_uuid(text) */
Datum
snowseq_gene_uuid_name(PG_FUNCTION_ARGS)
{
	CheckKey(fcinfo);
	PG_RETURN_UUID_P(GeneUuid(HashOfName(PG_GETARG_NAME(0))));
}

/* Column number of a trigger argument, or a clear ERROR. */
static int
TriggerColumn(Relation rel, const char *name, const char *role)
{
	int			attnum = SPI_fnumber(RelationGetDescr(rel), name);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" of snowseq_fill_gene_id does not exist in table \"%s\"",
						role, name, RelationGetRelationName(rel)),
				 errhint("Use EXECUTE FUNCTION snowseq_fill_gene_id('id_column', 'key_column').")));
	return attnum;
}

/*
 * BEFORE INSERT row trigger: fill the ID column (first argument) from the
 * business-key column (second argument) when the ID is NULL.  Key columns
 * of text, varchar, bigint, integer, smallint or bytea are accepted.
 */
Datum
snowseq_fill_gene_id(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Trigger    *tg;
	Relation	rel;
	TupleDesc	desc;
	HeapTuple	tuple;
	int			id_att,
				key_att;
	Oid			key_type;
	bool		isnull;
	Datum		key;
	int			gene;
	Datum		newval;
	bool		newnull = false;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_fill_gene_id must be called as a trigger")));
	if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!(TRIGGER_FIRED_BY_INSERT(td->tg_event) || TRIGGER_FIRED_BY_UPDATE(td->tg_event)))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_fill_gene_id must be a BEFORE INSERT ... FOR EACH ROW trigger")));
	tg = td->tg_trigger;
	rel = td->tg_relation;
	if (tg->tgnargs != 2)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_fill_gene_id takes 2 arguments, got %d", tg->tgnargs),
				 errhint("Use EXECUTE FUNCTION snowseq_fill_gene_id('id_column', 'key_column').")));
	desc = RelationGetDescr(rel);
	id_att = TriggerColumn(rel, tg->tgargs[0], "ID");
	key_att = TriggerColumn(rel, tg->tgargs[1], "key");
	if (TupleDescAttr(desc, id_att - 1)->atttypid != INT8OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("ID column \"%s\" of snowseq_fill_gene_id must be bigint, not %s",
						tg->tgargs[0], format_type_be(TupleDescAttr(desc, id_att - 1)->atttypid))));
	key_type = getBaseType(TupleDescAttr(desc, key_att - 1)->atttypid);

	tuple = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	(void) heap_getattr(tuple, id_att, desc, &isnull);
	if (!isnull)
		return PointerGetDatum(tuple);

	key = heap_getattr(tuple, key_att, desc, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("key column \"%s\" is NULL, so the row gets no gene ID", tg->tgargs[1]),
				 errhint("Every row needs a business key to give its ID a gene.")));
	switch (key_type)
	{
		case TEXTOID:
		case VARCHAROID:
			gene = GeneOfText(DatumGetTextPP(key));
			break;
		case BPCHAROID:
			{
				BpChar	   *c = DatumGetBpCharPP(key);

				gene = GeneOfChars(VARDATA_ANY(c), bpchartruelen(VARDATA_ANY(c), VARSIZE_ANY_EXHDR(c)));
				break;
			}
		case INT8OID:
			gene = GeneOfInt8(DatumGetInt64(key));
			break;
		case INT4OID:
			gene = GeneOfInt8((int64) DatumGetInt32(key));
			break;
		case INT2OID:
			gene = GeneOfInt8((int64) DatumGetInt16(key));
			break;
		case BYTEAOID:
			gene = GeneOfBytea(DatumGetByteaPP(key));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("key column \"%s\" of snowseq_fill_gene_id has type %s",
							tg->tgargs[1], format_type_be(key_type)),
					 errhint("Use a text, varchar, bigint, integer, smallint or bytea key column.")));
			gene = 0;			/* keep compiler quiet */
	}
	newval = Int64GetDatum(GeneNext(gene));
	return PointerGetDatum(heap_modify_tuple_by_cols(tuple, desc, 1, &id_att, &newval, &newnull));
}
