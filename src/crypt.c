/*
 * crypt.c
 *		Public IDs: a gene ID whose segment is encrypted, so that two public
 *		IDs tell nothing about how many IDs were issued between them, while
 *		the gene stays in place and the public ID routes like the private one.
 *
 *	 63 62        48 47          48-v 47-v                              0
 *	 [0][gene: 15 ][key version: v ][FF1-AES256_{key, tweak = gene}(segment << c)]
 *
 * v is snowseq.public_version_bits (5 to 7, fixed at server start); c, the
 * check bits, belongs to each key.  128-bit gene IDs have a public form
 * with the same keys (section "128-bit gene IDs" below).  Decryption accepts a number only when
 * its version names a key that is not retired and the low c bits of the
 * decrypted value are zero.
 *
 * Keys live in the table snowseq_key_store (keystore.c: no rights for PUBLIC,
 * dumped by pg_dump, replicated like any table), managed by the functions
 * of keyadmin.c.  snowseq_new_key inserts a row
 * without a key, as the table's owner, and the table's trigger draws the
 * key with pg_strong_random and stores it wrapped under the cluster's wrap
 * key (keyring.c): no key is ever part of SQL text, a query parameter or a
 * plan, which log settings could print, nor of what logical decoding shows
 * of the row.  Each backend reads
 * the table with a plain heap scan (the caller needs EXECUTE on the
 * function, not SELECT on the table), keeps the expanded AES keys, and
 * drops them when a relcache invalidation for the table arrives (catcache.c:
 * the table's ALWAYS trigger sends one for every change, whether made by
 * SQL or applied by logical replication, and a physical standby replays it
 * from the commit record).
 *
 * A key version is made once per cluster (keyring.c records the highest,
 * durably, before snowseq_new_key returns it), and a key encrypts only once
 * the transaction that made it has committed, a commit snowseq_new_key
 * forces to WAL: a public ID that left the server never meets a second key
 * of its version, whatever was rolled back, dropped or crashed.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "catcache.h"
#include "compat.h"
#include "crypt.h"
#include "ff1.h"
#include "gene.h"
#include "keyring.h"
#include "keystore.h"
#include "shmem.h"
#include "sqlrun.h"

#define CRYPT_TWEAK_BYTES		2	/* the gene, big-endian */
#define CRYPT_WIDE_TWEAK_BYTES	3	/* the 23-bit gene of a 128-bit ID, big-endian */
#define CRYPT_SEGMENT_MASK		((((uint64) 1) << SNOWSEQ_SEGMENT_BITS) - 1)

/* One key version, expanded, in this backend's cache. */
typedef struct CryptKey
{
	int			version;
	KeyState	state;
	int			check_bits;
	uint64		max_segment;	/* largest segment this key can encrypt */
	Ff1Key		aes;			/* unset for a retired key */
	Ff1Bits		dom;			/* 48 - v bits, 2-byte tweak */
	Ff1Bits		wide;			/* 128-bit gene IDs: 79 bits, 3-byte tweak */
	bool		uncommitted;	/* row written by this transaction (parallel workers) */
} CryptKey;

static CryptKey *crypt_keys[1 << KEYSTORE_VERSION_BITS_MAX];
static CryptKey *crypt_current = NULL;
static CatCache crypt_cache = CATCACHE_INIT(KEYSTORE_TABLE);

/* ---- the per-backend key cache ---- */

/* This backend reloads its keys at their next use (after it changed the table). */
void
CryptInvalidateKeys(void)
{
	CatCacheInvalidate(&crypt_cache);
}


/* Drop the cached keys; OpenSSL wipes the expanded keys it frees. */
static void
CryptFreeKeys(void)
{
	for (int v = 0; v < lengthof(crypt_keys); v++)
	{
		if (crypt_keys[v] == NULL)
			continue;
		Ff1KeyFree(&crypt_keys[v]->aes);
		explicit_bzero(crypt_keys[v], sizeof(CryptKey));
		pfree(crypt_keys[v]);
		crypt_keys[v] = NULL;
	}
	crypt_current = NULL;
}

/* Add one row to the cache, expanding its key. */
static void
CryptCacheRow(const KeyRow *row)
{
	CryptKey   *k;

	/* a retired key of another width: nothing to decrypt with */
	if (row->version_bits != snowseq_public_version_bits)
		return;
	k = MemoryContextAllocZero(TopMemoryContext, sizeof(CryptKey));
	k->version = row->version;
	k->uncommitted = TransactionIdIsValid(row->xmin) &&
		TransactionIdIsCurrentTransactionId(row->xmin);
	k->state = row->state;
	k->check_bits = row->check_bits;
	k->max_segment = (((uint64) 1) << (SNOWSEQ_SEGMENT_BITS - snowseq_public_version_bits - row->check_bits)) - 1;
	/* in the cache before the key is expanded: freed with it on any error */
	crypt_keys[row->version] = k;
	if (row->state != KEY_RETIRED && VARSIZE_ANY_EXHDR(row->key) == WRAPPED_KEY_BYTES)
	{
		uint8		raw[FF1_KEY_BYTES];

		KeyringUnwrap(row->version, (const uint8 *) VARDATA_ANY(row->key), raw);
		Ff1KeyInit(&k->aes, raw);
		explicit_bzero(raw, sizeof(raw));
		Ff1BitsInit(&k->dom, &k->aes, SNOWSEQ_SEGMENT_BITS - snowseq_public_version_bits,
					CRYPT_TWEAK_BYTES);
		Ff1BitsInit(&k->wide, &k->aes, SNOWSEQ_WIDE_SEGMENT_BITS, CRYPT_WIDE_TWEAK_BYTES);
	}
	else if (row->state != KEY_RETIRED)
	{
		/* a key made before 1.2, stored as it is */
		Ff1KeyInit(&k->aes, (const uint8 *) VARDATA_ANY(row->key));
		Ff1BitsInit(&k->dom, &k->aes, SNOWSEQ_SEGMENT_BITS - snowseq_public_version_bits,
					CRYPT_TWEAK_BYTES);
		Ff1BitsInit(&k->wide, &k->aes, SNOWSEQ_WIDE_SEGMENT_BITS, CRYPT_WIDE_TWEAK_BYTES);
	}
	if (row->state == KEY_CURRENT)
	{
		if (crypt_current != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("snowseq key versions %d and %d are both current",
							crypt_current->version, row->version),
					 errhint("Call snowseq_use_key() with the version new public IDs should use.")));
		crypt_current = k;
	}
}

/*
 * Load every key of the key table into this backend, under catcache.c's
 * rule: a key committed a moment ago decrypts at once, and a key retired a
 * moment ago no longer encrypts or decrypts, in any open transaction too.
 */
static void
CryptLoad(CatCache *cache)
{
	Relation	rel;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;
	int			cols[NCOLS];

	ShmemCheckPreloaded();
	CryptFreeKeys();

	rel = table_open(cache->relid, AccessShareLock);
	KeyStoreColumns(RelationGetDescr(rel), cols);
	snapshot = CatCacheSnapshot();
	slot = table_slot_create(rel, NULL);
	scan = SnowseqTableBeginScan(rel, snapshot);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		KeyRow		row;

		bool		isnull;

		slot_getallattrs(slot);
		KeyStoreRowRead(cols, slot->tts_values, slot->tts_isnull, &row, false);
		row.xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));
		CryptCacheRow(&row);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	CatCacheSnapshotDone(snapshot);
	table_close(rel, AccessShareLock);
}

/* The cache, loaded if stale. */
static inline void
CryptEnsureLoaded(FunctionCallInfo fcinfo)
{
	CatCacheEnsure(&crypt_cache, fcinfo->flinfo->fn_oid, CryptLoad);
}

/* The key of a version, or NULL. */
static CryptKey *
CryptKeyOf(FunctionCallInfo fcinfo, int version)
{
	CryptEnsureLoaded(fcinfo);
	return crypt_keys[version];
}

/* ---- encryption and decryption ---- */

/* Bits of a public ID below the version field: the FF1 domain. */
static inline int
CryptDomainBits(void)
{
	return SNOWSEQ_SEGMENT_BITS - snowseq_public_version_bits;
}

/* The tweak of a gene: its two bytes, big-endian. */
static inline void
CryptTweak(uint64 gene, uint8 *tweak)
{
	tweak[0] = (uint8) (gene >> 8);
	tweak[1] = (uint8) gene;
}

/* ERROR for an ID whose segment is too wide for the current key. */
static void
CryptTooWide(int64 id, const CryptKey *k)
{
	uint64		segment = (uint64) id & CRYPT_SEGMENT_MASK;
	int			bits = pg_leftmost_one_pos64(segment) + 1;
	int			room = SNOWSEQ_SEGMENT_BITS - snowseq_public_version_bits - k->check_bits;
	int			fewer = CryptDomainBits() - bits;

	if (fewer >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("ID %lld does not fit in a public ID of key version %d", (long long) id, k->version),
				 errdetail("Its segment needs %d bits; with snowseq.public_version_bits = %d and the %d check bits of key version %d, a public ID holds segments of up to %d bits.",
						   bits, snowseq_public_version_bits, k->check_bits, k->version, room),
				 errhint("Make a key with at most %d check bits current: SELECT snowseq_use_key(snowseq_new_key(check_bits => %d));",
						 fewer, fewer)));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("ID %lld has no public form", (long long) id),
			 errdetail("Its segment needs %d bits; a public ID holds at most %d with snowseq.public_version_bits = %d.",
					   bits, CryptDomainBits(), snowseq_public_version_bits),
			 errhint("Its key version field is not 0: if it is a public ID already, snowseq_decrypt() reads it.")));
}

/* ERROR when no key is current, saying whether one could be. */
static void
CryptNoCurrentKey(void)
{
	bool		usable = false;

	for (int v = 0; v < lengthof(crypt_keys); v++)
		usable |= crypt_keys[v] != NULL && crypt_keys[v]->state != KEY_RETIRED;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("no snowseq key is in use"),
			 usable ?
			 errhint("Choose the key new public IDs use: SELECT snowseq_use_key(version); snowseq_keys lists the versions.") :
			 errhint("Make a key and use it: SELECT snowseq_use_key(snowseq_new_key());")));
}

/*
 * ERROR when the current key was made by the open transaction: a public ID
 * made with it could leave the server, the transaction roll back, and the
 * version be made again with another key, to which that public ID would
 * decrypt to another ID.  The leader knows the versions it made; a
 * parallel worker only sees that the row was written by the leader's
 * transaction, and refuses then too.
 */
static void
CryptCheckCommitted(const CryptKey *k)
{
	if (!KeyStoreMadeInThisTransaction(k->version) && !(IsParallelWorker() && k->uncommitted))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snowseq key version %d was made in this transaction, which has not committed",
					k->version),
			 errdetail("A key encrypts only once the transaction that made it has committed: were it rolled back, the version would be made again with another key and public IDs made now would decrypt to other IDs."),
			 errhint("Commit the transaction that made the key, then encrypt.")));
}

/* The public ID of a gene ID, under the current key. */
static int64
CryptEncrypt(FunctionCallInfo fcinfo, int64 id)
{
	uint64		gene = (uint64) id >> SNOWSEQ_SEGMENT_BITS;
	uint64		segment = (uint64) id & CRYPT_SEGMENT_MASK;
	uint8		tweak[CRYPT_TWEAK_BYTES];
	CryptKey   *k;
	uint64		y;

	CryptEnsureLoaded(fcinfo);
	k = crypt_current;
	if (unlikely(k == NULL))
		CryptNoCurrentKey();
	if (unlikely(KeyStoreMadeAny() || IsParallelWorker()))
		CryptCheckCommitted(k);
	if (unlikely(segment > k->max_segment))
		CryptTooWide(id, k);
	CryptTweak(gene, tweak);
	y = Ff1BitsEncrypt(&k->aes, &k->dom, tweak, segment << k->check_bits);
	return (int64) ((gene << SNOWSEQ_SEGMENT_BITS) |
					((uint64) k->version << CryptDomainBits()) | y);
}

/* What decrypting a number found. */
typedef enum PublicResult
{
	PUBLIC_OK,
	PUBLIC_VERSION_ZERO,		/* version field 0: a private ID, not a public one */
	PUBLIC_UNKNOWN_VERSION,
	PUBLIC_RETIRED,
	PUBLIC_CHECK_FAILED			/* check bits not zero: not made by snowseq_encrypt */
} PublicResult;

/* Decrypt a non-negative number; *id is set when the result is PUBLIC_OK. */
static PublicResult
CryptDecrypt(FunctionCallInfo fcinfo, int64 public_id, int64 *id, CryptKey **key)
{
	uint64		gene = (uint64) public_id >> SNOWSEQ_SEGMENT_BITS;
	int			version = (int) (((uint64) public_id >> CryptDomainBits()) &
								 ((1 << snowseq_public_version_bits) - 1));
	uint64		y = (uint64) public_id & ((((uint64) 1) << CryptDomainBits()) - 1);
	uint8		tweak[CRYPT_TWEAK_BYTES];
	CryptKey   *k;
	uint64		x;

	/* a server that cannot read its keys says so, whatever the input */
	ShmemCheckPreloaded();
	CryptEnsureLoaded(fcinfo);
	*key = NULL;
	if (version == 0)
		return PUBLIC_VERSION_ZERO;
	k = CryptKeyOf(fcinfo, version);
	*key = k;
	if (k == NULL)
		return PUBLIC_UNKNOWN_VERSION;
	if (k->state == KEY_RETIRED)
		return PUBLIC_RETIRED;
	CryptTweak(gene, tweak);
	x = Ff1BitsDecrypt(&k->aes, &k->dom, tweak, y);
	if ((x & ((((uint64) 1) << k->check_bits) - 1)) != 0)
		return PUBLIC_CHECK_FAILED;
	*id = (int64) ((gene << SNOWSEQ_SEGMENT_BITS) | (x >> k->check_bits));
	return PUBLIC_OK;
}

/* ERROR for a NULL argument: NULL has no public form and is no public ID. */
static void
CryptCheckNull(FunctionCallInfo fcinfo, const char *what)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what),
				 errhint("Public IDs are made from gene IDs by snowseq_encrypt() and read back by snowseq_decrypt().")));
}

/* ERROR for a negative argument. */
static void
CryptCheckNegative(int64 value, const char *what)
{
	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%s must not be negative: %lld", what, (long long) value),
				 errhint("Gene IDs and public IDs are positive; their top 15 bits are the gene.")));
}

PG_FUNCTION_INFO_V1(snowseq_encrypt);
PG_FUNCTION_INFO_V1(snowseq_decrypt);
PG_FUNCTION_INFO_V1(snowseq_is_public_id);

/*
 * The public ID of a gene ID, with every check of snowseq_encrypt; fcinfo
 * is that of the calling SQL function, whose schema holds the key table.
 */
int64
CryptEncryptId(FunctionCallInfo fcinfo, int64 id)
{
	CryptCheckNegative(id, "ID to encrypt");
	ShmemCheckPreloaded();
	return CryptEncrypt(fcinfo, id);
}

/* snowseq_encrypt(id) -> bigint: the public ID of a gene ID. */
Datum
snowseq_encrypt(PG_FUNCTION_ARGS)
{
	CryptCheckNull(fcinfo, "ID to encrypt");
	PG_RETURN_INT64(CryptEncryptId(fcinfo, PG_GETARG_INT64(0)));
}

/* snowseq_decrypt(public_id) -> bigint: the gene ID of a public ID, or an ERROR. */
Datum
snowseq_decrypt(PG_FUNCTION_ARGS)
{
	CryptCheckNull(fcinfo, "public ID");
	PG_RETURN_INT64(CryptDecryptId(fcinfo, PG_GETARG_INT64(0)));
}

/*
 * The gene ID of a public ID, or the ERROR of snowseq_decrypt; fcinfo as
 * for CryptEncryptId.
 */
int64
CryptDecryptId(FunctionCallInfo fcinfo, int64 public_id)
{
	int64		id = 0;
	CryptKey   *k;
	int			version;

	CryptCheckNegative(public_id, "public ID");
	switch (CryptDecrypt(fcinfo, public_id, &id, &k))
	{
		case PUBLIC_OK:
			break;
		case PUBLIC_VERSION_ZERO:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%lld is not a public ID", (long long) public_id),
					 errdetail("Its key version field is 0, which snowseq_encrypt() never writes: it looks like a private ID."),
					 errhint("Pass a number made by snowseq_encrypt().")));
			break;
		case PUBLIC_UNKNOWN_VERSION:
			version = (int) (((uint64) public_id >> CryptDomainBits()) & ((1 << snowseq_public_version_bits) - 1));
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%lld is not a valid public ID", (long long) public_id),
					 errdetail("Its key version %d does not exist.", version),
					 errhint("Check the number for a typing error; snowseq_keys lists the key versions.")));
			break;
		case PUBLIC_RETIRED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("public ID %lld was made with retired key version %d",
							(long long) public_id, k->version),
					 errdetail("A retired key is erased; its public IDs no longer decrypt.")));
			break;
		case PUBLIC_CHECK_FAILED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%lld is not a valid public ID", (long long) public_id),
					 errdetail("It was not made by snowseq_encrypt() with key version %d: its %d check bits are not zero.",
							   k->version, k->check_bits),
					 errhint("Check the number for a typing error.")));
			break;
	}
	return id;
}

/* snowseq_is_public_id(public_id) -> bool: would snowseq_decrypt return an ID? */
Datum
snowseq_is_public_id(PG_FUNCTION_ARGS)
{
	int64		public_id = PG_GETARG_INT64(0);
	int64		id;
	CryptKey   *k;

	if (public_id < 0)
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(CryptDecrypt(fcinfo, public_id, &id, &k) == PUBLIC_OK);
}

/* ---- 128-bit gene IDs ---- */

/*
 * The public form of a 128-bit gene ID (snowseq_gene_uuid) keeps the
 * layout of snowseq.h: the 23-bit gene stays, so it routes like the
 * private one; the 20-bit key version field holds the key's version; the
 * 79-bit segment becomes FF1-AES256_{key, tweak = the gene's 3 bytes}
 * (segment << c) over 79 bits, c being the key's check bits.  The same
 * keys, versions, rotation and rules as the 64-bit public IDs above.
 */

/* A UUID as text, for messages. */
static char *
CryptUuidText(const pg_uuid_t *uuid)
{
	return DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum((pg_uuid_t *) uuid)));
}

/* The fields of a 128-bit gene ID argument; ERROR for NULL or another UUID. */
static pg_uuid_t *
CryptWideArg(FunctionCallInfo fcinfo, const char *what, WideId *w)
{
	pg_uuid_t  *uuid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what),
				 errhint("Public 128-bit gene IDs are made from snowseq_gene_uuid() IDs by snowseq_encrypt_uuid() and read back by snowseq_decrypt_uuid().")));
	uuid = PG_GETARG_UUID_P(0);
	if (!WideIdFromUuid(uuid, w))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is not a 128-bit gene ID", CryptUuidText(uuid)),
				 errdetail("A 128-bit gene ID is an RFC 9562 version 8 UUID: its third group begins with 8, its fourth with 8, 9, a or b."),
				 errhint("Make 128-bit gene IDs with snowseq_gene_uuid(key).")));
	return uuid;
}

/* The tweak of a 23-bit gene: its three bytes, big-endian. */
static inline void
CryptWideTweak(uint32 gene, uint8 *tweak)
{
	tweak[0] = (uint8) (gene >> 16);
	tweak[1] = (uint8) (gene >> 8);
	tweak[2] = (uint8) gene;
}

/* Bits a 128-bit gene ID's segment needs. */
static int
CryptWideSegmentBits(const WideId *w)
{
	if (w->seg_hi != 0)
		return 64 + pg_leftmost_one_pos64(w->seg_hi) + 1;
	return w->seg_lo == 0 ? 0 : pg_leftmost_one_pos64(w->seg_lo) + 1;
}

/* The public form of a private 128-bit gene ID, under the current key. */
static void
CryptEncryptWide(FunctionCallInfo fcinfo, const pg_uuid_t *uuid, WideId *w)
{
	CryptKey   *k;
	uint8		tweak[CRYPT_WIDE_TWEAK_BYTES];
	int			c;
	int			bits;
	uint64		hi = w->seg_hi;
	uint64		lo = w->seg_lo;

	if (w->key_version != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" is a public 128-bit gene ID already", CryptUuidText(uuid)),
				 errdetail("Its key version field is %u; snowseq_gene_uuid() writes 0 there.",
						   w->key_version),
				 errhint("snowseq_decrypt_uuid() reads it back.")));
	ShmemCheckPreloaded();
	CryptEnsureLoaded(fcinfo);
	k = crypt_current;
	if (unlikely(k == NULL))
		CryptNoCurrentKey();
	if (unlikely(KeyStoreMadeAny() || IsParallelWorker()))
		CryptCheckCommitted(k);
	c = k->check_bits;
	bits = CryptWideSegmentBits(w);
	if (unlikely(bits > SNOWSEQ_WIDE_SEGMENT_BITS - c))
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("128-bit gene ID \"%s\" does not fit in a public ID of key version %d",
						CryptUuidText(uuid), k->version),
				 errdetail("Its segment needs %d bits; with the %d check bits of key version %d, a public 128-bit gene ID holds segments of up to %d bits.",
						   bits, c, k->version, SNOWSEQ_WIDE_SEGMENT_BITS - c),
				 errhint("Make a key with at most %d check bits current: SELECT snowseq_use_key(snowseq_new_key(check_bits => %d));",
						 SNOWSEQ_WIDE_SEGMENT_BITS - bits, SNOWSEQ_WIDE_SEGMENT_BITS - bits)));
	if (c > 0)
	{
		hi = (hi << c) | (lo >> (64 - c));
		lo <<= c;
	}
	CryptWideTweak(w->gene, tweak);
	Ff1BitsCryptWide(&k->aes, &k->wide, tweak, &hi, &lo, false);
	w->key_version = (uint32) k->version;
	w->seg_hi = hi;
	w->seg_lo = lo;
}

/* Decrypt a 128-bit gene ID's fields in place when the result is PUBLIC_OK. */
static PublicResult
CryptDecryptWide(FunctionCallInfo fcinfo, WideId *w, CryptKey **key)
{
	uint8		tweak[CRYPT_WIDE_TWEAK_BYTES];
	CryptKey   *k;
	int			c;
	uint64		hi = w->seg_hi;
	uint64		lo = w->seg_lo;

	/* a server that cannot read its keys says so, whatever the input */
	ShmemCheckPreloaded();
	CryptEnsureLoaded(fcinfo);
	*key = NULL;
	if (w->key_version == 0)
		return PUBLIC_VERSION_ZERO;
	if (w->key_version >= (1U << snowseq_public_version_bits))
		return PUBLIC_UNKNOWN_VERSION;
	k = crypt_keys[w->key_version];
	*key = k;
	if (k == NULL)
		return PUBLIC_UNKNOWN_VERSION;
	if (k->state == KEY_RETIRED)
		return PUBLIC_RETIRED;
	CryptWideTweak(w->gene, tweak);
	Ff1BitsCryptWide(&k->aes, &k->wide, tweak, &hi, &lo, true);
	c = k->check_bits;
	if ((lo & ((((uint64) 1) << c) - 1)) != 0)
		return PUBLIC_CHECK_FAILED;
	if (c > 0)
	{
		lo = (lo >> c) | (hi << (64 - c));
		hi >>= c;
	}
	w->key_version = 0;
	w->seg_hi = hi;
	w->seg_lo = lo;
	return PUBLIC_OK;
}

PG_FUNCTION_INFO_V1(snowseq_encrypt_uuid);
PG_FUNCTION_INFO_V1(snowseq_decrypt_uuid);
PG_FUNCTION_INFO_V1(snowseq_is_public_uuid);

/* snowseq_encrypt_uuid(id uuid) -> uuid: the public form of a 128-bit gene ID. */
Datum
snowseq_encrypt_uuid(PG_FUNCTION_ARGS)
{
	WideId		w;
	pg_uuid_t  *uuid = CryptWideArg(fcinfo, "128-bit gene ID to encrypt", &w);
	pg_uuid_t  *result = palloc(sizeof(pg_uuid_t));

	CryptEncryptWide(fcinfo, uuid, &w);
	WideIdToUuid(&w, result);
	PG_RETURN_UUID_P(result);
}

/* snowseq_decrypt_uuid(public_id uuid) -> uuid: the 128-bit gene ID of a public one, or an ERROR. */
Datum
snowseq_decrypt_uuid(PG_FUNCTION_ARGS)
{
	WideId		w;
	pg_uuid_t  *uuid = CryptWideArg(fcinfo, "public 128-bit gene ID", &w);
	pg_uuid_t  *result;
	CryptKey   *k;
	uint32		version = w.key_version;

	switch (CryptDecryptWide(fcinfo, &w, &k))
	{
		case PUBLIC_OK:
			break;
		case PUBLIC_VERSION_ZERO:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not a public 128-bit gene ID", CryptUuidText(uuid)),
					 errdetail("Its key version field is 0, which snowseq_encrypt_uuid() never writes: it looks like a private one, as snowseq_gene_uuid() makes them."),
					 errhint("Pass a UUID made by snowseq_encrypt_uuid().")));
			break;
		case PUBLIC_UNKNOWN_VERSION:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not a valid public 128-bit gene ID", CryptUuidText(uuid)),
					 errdetail("Its key version %u does not exist.", version),
					 errhint("Check the UUID for a typing error; snowseq_keys lists the key versions.")));
			break;
		case PUBLIC_RETIRED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("public 128-bit gene ID \"%s\" was made with retired key version %d",
							CryptUuidText(uuid), k->version),
					 errdetail("A retired key is erased; its public IDs no longer decrypt.")));
			break;
		case PUBLIC_CHECK_FAILED:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%s\" is not a valid public 128-bit gene ID", CryptUuidText(uuid)),
					 errdetail("It was not made by snowseq_encrypt_uuid() with key version %d: its %d check bits are not zero.",
							   k->version, k->check_bits),
					 errhint("Check the UUID for a typing error.")));
			break;
	}
	result = palloc(sizeof(pg_uuid_t));
	WideIdToUuid(&w, result);
	PG_RETURN_UUID_P(result);
}

/* snowseq_is_public_uuid(public_id uuid) -> bool: would snowseq_decrypt_uuid return an ID? */
Datum
snowseq_is_public_uuid(PG_FUNCTION_ARGS)
{
	WideId		w;
	CryptKey   *k;

	if (!WideIdFromUuid(PG_GETARG_UUID_P(0), &w))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(CryptDecryptWide(fcinfo, &w, &k) == PUBLIC_OK);
}

