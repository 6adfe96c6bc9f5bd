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
 * Keys live in the table snowseq_key_store (no rights for PUBLIC, dumped by
 * pg_dump, replicated like any table).  snowseq_new_key inserts a row
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
#include "crypt.h"
#include "ff1.h"
#include "gene.h"
#include "keyring.h"
#include "shmem.h"
#include "sqlrun.h"

#define CRYPT_KEY_TABLE			"snowseq_key_store"
#define CRYPT_VERSION_BITS_MIN	5
#define CRYPT_VERSION_BITS_MAX	7
#define CRYPT_CHECK_BITS_MAX	16
#define CRYPT_TWEAK_BYTES		2	/* the gene, big-endian */
#define CRYPT_WIDE_TWEAK_BYTES	3	/* the 23-bit gene of a 128-bit ID, big-endian */
#define CRYPT_SEGMENT_MASK		((((uint64) 1) << SNOWSEQ_SEGMENT_BITS) - 1)

/* snowseq.public_version_bits */
static int	crypt_version_bits = 6;

typedef enum KeyState
{
	KEY_ACTIVE,					/* decrypts; new public IDs use another key */
	KEY_CURRENT,				/* encrypts new public IDs and decrypts */
	KEY_RETIRED					/* erased: its public IDs no longer decrypt */
} KeyState;

static const char *const key_state_names[] = {"active", "current", "retired"};

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

static CryptKey *crypt_keys[1 << CRYPT_VERSION_BITS_MAX];
static CryptKey *crypt_current = NULL;
static CatCache crypt_cache = CATCACHE_INIT(CRYPT_KEY_TABLE);

/*
 * Key versions made by this backend's open transaction.  A key encrypts
 * only once the transaction that made it has committed: a public ID made
 * before could leave the server, the transaction roll back, and the
 * version be made again with another key.
 */
static bool crypt_made_here[1 << CRYPT_VERSION_BITS_MAX];
static bool crypt_made_any = false;
static bool crypt_xact_callback_registered = false;

/* One row of the key table, read and checked. */
typedef struct KeyRow
{
	int32		version;
	KeyState	state;
	bytea	   *key;			/* NULL when retired */
	int32		version_bits;
	int32		check_bits;
	TransactionId xmin;			/* writer of the row; Invalid when unknown */
} KeyRow;

/* columns of the key table, by name, so that later versions may add some */
enum
{
	COL_VERSION, COL_STATE, COL_KEY, COL_VERSION_BITS, COL_CHECK_BITS, COL_CREATED, NCOLS
};
static const char *const key_columns[NCOLS] = {
	"version", "state", "key", "version_bits", "check_bits", "created"
};

/* snowseq.public_version_bits: key versions are 1 to 2^bits - 1. */
int
CryptVersionBits(void)
{
	return crypt_version_bits;
}

/* Define snowseq.public_version_bits; called from _PG_init at preload. */
void
CryptInit(void)
{
	GucDefineInt("snowseq.public_version_bits",
				 "Bits of a public ID that name the key version it was made with (the FF1 ciphertext fills the 48 - public_version_bits bits below them).",
				 &crypt_version_bits, 6, CRYPT_VERSION_BITS_MIN, CRYPT_VERSION_BITS_MAX, 0);
}

/* ---- the key table ---- */

/* Attribute numbers (0-based) of the key table's columns. */
static void
KeyColumns(TupleDesc desc, int *cols)
{
	for (int c = 0; c < NCOLS; c++)
	{
		cols[c] = -1;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);

			if (!att->attisdropped && strcmp(NameStr(att->attname), key_columns[c]) == 0)
				cols[c] = a;
		}
		if (cols[c] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("table %s has no column \"%s\"", CRYPT_KEY_TABLE, key_columns[c]),
					 errhint("Reinstall the snowseq extension's key table.")));
	}
}

/* ERROR for a key row that breaks the rules; never shows the key. */
static void
KeyRowInvalid(int32 version, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 version > 0 ?
			 errmsg("invalid row for snowseq key version %d in %s: %s",
					version, CRYPT_KEY_TABLE, what) :
			 errmsg("invalid row in %s: %s", CRYPT_KEY_TABLE, what),
			 errhint("Manage keys with snowseq_new_key(), snowseq_use_key() and snowseq_retire_key().")));
}

/*
 * Read and check one row of the key table.  The checks run before any
 * constraint of the table, whose errors would print the whole row, key
 * included.  A retired row made for another snowseq.public_version_bits
 * passes (it holds no key, and retiring must work whatever the setting);
 * any other row of another width is an ERROR naming both ways out, unless
 * any_width (the old row of an update that retires it).
 */
static void
KeyRowRead(const int *cols, Datum *values, bool *nulls, KeyRow *row, bool any_width)
{
	int			max_version;
	int			width;
	char	   *state;
	int			s;

	if (nulls[cols[COL_VERSION]])
		KeyRowInvalid(0, "version is NULL");
	row->version = DatumGetInt32(values[cols[COL_VERSION]]);
	if (nulls[cols[COL_VERSION_BITS]] || nulls[cols[COL_CHECK_BITS]] ||
		nulls[cols[COL_STATE]] || nulls[cols[COL_CREATED]])
		KeyRowInvalid(row->version, "only key and retired may be NULL");
	row->version_bits = DatumGetInt32(values[cols[COL_VERSION_BITS]]);
	row->check_bits = DatumGetInt32(values[cols[COL_CHECK_BITS]]);
	row->xmin = InvalidTransactionId;
	state = TextDatumGetCString(values[cols[COL_STATE]]);
	/* another width first: it explains any version out of range too */
	if (row->version_bits != crypt_version_bits && !any_width && strcmp(state, "retired") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq key version %d was made for snowseq.public_version_bits = %d, but the server runs with %d",
						row->version, row->version_bits, crypt_version_bits),
				 errdetail("Public IDs made with one width of the version field cannot be read with another."),
				 errhint("Set snowseq.public_version_bits = %d again and restart the server; only if the public IDs of key version %d are no longer needed, retire it: SELECT snowseq_retire_key(%d);",
						 row->version_bits, row->version, row->version)));
	width = row->version_bits;
	if (width < CRYPT_VERSION_BITS_MIN || width > CRYPT_VERSION_BITS_MAX)
		KeyRowInvalid(row->version, psprintf("version_bits must be between %d and %d",
											 CRYPT_VERSION_BITS_MIN, CRYPT_VERSION_BITS_MAX));
	max_version = (1 << width) - 1;
	if (row->version < 1 || row->version > max_version)
		KeyRowInvalid(row->version,
					  psprintf("versions run from 1 to %d with snowseq.public_version_bits = %d",
							   max_version, width));
	if (row->check_bits < 0 || row->check_bits > CRYPT_CHECK_BITS_MAX)
		KeyRowInvalid(row->version, psprintf("check_bits must be between 0 and %d",
											 CRYPT_CHECK_BITS_MAX));
	for (s = 0; s < lengthof(key_state_names); s++)
		if (strcmp(state, key_state_names[s]) == 0)
			break;
	if (s == lengthof(key_state_names))
		KeyRowInvalid(row->version, "state must be 'active', 'current' or 'retired'");
	row->state = (KeyState) s;
	row->key = nulls[cols[COL_KEY]] ? NULL : DatumGetByteaPP(values[cols[COL_KEY]]);
	if (row->state == KEY_RETIRED && row->key != NULL)
		KeyRowInvalid(row->version, "a retired key is erased (key is NULL)");
	if (row->state != KEY_RETIRED &&
		(row->key == NULL || (VARSIZE_ANY_EXHDR(row->key) != WRAPPED_KEY_BYTES &&
							  VARSIZE_ANY_EXHDR(row->key) != FF1_KEY_BYTES)))
		KeyRowInvalid(row->version, psprintf("key must be %d bytes (wrapped) or %d (made before 1.2)",
											 WRAPPED_KEY_BYTES, FF1_KEY_BYTES));
}

/* ---- the per-backend key cache ---- */

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

/* The key table in the schema of the calling function. */
static Oid
CryptKeyTable(Oid fn_oid)
{
	Oid			nsp = ExtNamespace(fn_oid);
	Oid			relid = get_relname_relid(CRYPT_KEY_TABLE, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table %s does not exist in schema \"%s\"",
						CRYPT_KEY_TABLE, get_namespace_name(nsp)),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));
	return relid;
}

/* Add one row to the cache, expanding its key. */
static void
CryptCacheRow(const KeyRow *row)
{
	CryptKey   *k;

	/* a retired key of another width: nothing to decrypt with */
	if (row->version_bits != crypt_version_bits)
		return;
	k = MemoryContextAllocZero(TopMemoryContext, sizeof(CryptKey));
	k->version = row->version;
	k->uncommitted = TransactionIdIsValid(row->xmin) &&
		TransactionIdIsCurrentTransactionId(row->xmin);
	k->state = row->state;
	k->check_bits = row->check_bits;
	k->max_segment = (((uint64) 1) << (SNOWSEQ_SEGMENT_BITS - crypt_version_bits - row->check_bits)) - 1;
	/* in the cache before the key is expanded: freed with it on any error */
	crypt_keys[row->version] = k;
	if (row->state != KEY_RETIRED && VARSIZE_ANY_EXHDR(row->key) == WRAPPED_KEY_BYTES)
	{
		uint8		raw[FF1_KEY_BYTES];

		KeyringUnwrap(row->version, (const uint8 *) VARDATA_ANY(row->key), raw);
		Ff1KeyInit(&k->aes, raw);
		explicit_bzero(raw, sizeof(raw));
		Ff1BitsInit(&k->dom, &k->aes, SNOWSEQ_SEGMENT_BITS - crypt_version_bits,
					CRYPT_TWEAK_BYTES);
		Ff1BitsInit(&k->wide, &k->aes, SNOWSEQ_WIDE_SEGMENT_BITS, CRYPT_WIDE_TWEAK_BYTES);
	}
	else if (row->state != KEY_RETIRED)
	{
		/* a key made before 1.2, stored as it is */
		Ff1KeyInit(&k->aes, (const uint8 *) VARDATA_ANY(row->key));
		Ff1BitsInit(&k->dom, &k->aes, SNOWSEQ_SEGMENT_BITS - crypt_version_bits,
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
	KeyColumns(RelationGetDescr(rel), cols);
	snapshot = CatCacheSnapshot();
	slot = table_slot_create(rel, NULL);
	scan = table_beginscan(rel, snapshot, 0, NULL);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		KeyRow		row;

		bool		isnull;

		slot_getallattrs(slot);
		KeyRowRead(cols, slot->tts_values, slot->tts_isnull, &row, false);
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
	return SNOWSEQ_SEGMENT_BITS - crypt_version_bits;
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
	int			room = SNOWSEQ_SEGMENT_BITS - crypt_version_bits - k->check_bits;
	int			fewer = CryptDomainBits() - bits;

	if (fewer >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("ID %lld does not fit in a public ID of key version %d", (long long) id, k->version),
				 errdetail("Its segment needs %d bits; with snowseq.public_version_bits = %d and the %d check bits of key version %d, a public ID holds segments of up to %d bits.",
						   bits, crypt_version_bits, k->check_bits, k->version, room),
				 errhint("Make a key with at most %d check bits current: SELECT snowseq_use_key(snowseq_new_key(check_bits => %d));",
						 fewer, fewer)));
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("ID %lld has no public form", (long long) id),
			 errdetail("Its segment needs %d bits; a public ID holds at most %d with snowseq.public_version_bits = %d.",
					   bits, CryptDomainBits(), crypt_version_bits),
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
	if (!crypt_made_here[k->version] && !(IsParallelWorker() && k->uncommitted))
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
	if (unlikely(crypt_made_any || IsParallelWorker()))
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
								 ((1 << crypt_version_bits) - 1));
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
PG_FUNCTION_INFO_V1(snowseq_new_key);
PG_FUNCTION_INFO_V1(snowseq_use_key);
PG_FUNCTION_INFO_V1(snowseq_retire_key);
PG_FUNCTION_INFO_V1(snowseq_key_store_trigger);

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
			version = (int) (((uint64) public_id >> CryptDomainBits()) & ((1 << crypt_version_bits) - 1));
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
	if (unlikely(crypt_made_any || IsParallelWorker()))
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
	if (w->key_version >= (1U << crypt_version_bits))
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

/* ---- key management ---- */

/* What the key management functions hold while they change keys. */
typedef struct KeyAdmin
{
	char	   *table;			/* schema-qualified name of the key table */
	Oid			saved_user;
	int			saved_context;
} KeyAdmin;

/*
 * Lock the key table against other key changes (readers go on) and run
 * SPI as its owner: the caller needs EXECUTE on the function, no right on
 * the table.  Every statement names its objects with their schema.
 */
static void
KeyAdminBegin(FunctionCallInfo fcinfo, KeyAdmin *admin)
{
	Oid			relid;
	Relation	rel;
	Oid			owner;

	ShmemCheckPreloaded();
	relid = CryptKeyTable(fcinfo->flinfo->fn_oid);
	rel = table_open(relid, ExclusiveLock);
	owner = rel->rd_rel->relowner;
	admin->table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  CRYPT_KEY_TABLE);
	table_close(rel, NoLock);

	GetUserIdAndSecContext(&admin->saved_user, &admin->saved_context);
	SetUserIdAndSecContext(owner, admin->saved_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/* Back to the caller's identity; this backend reloads its keys. */
static void
KeyAdminEnd(KeyAdmin *admin)
{
	SPI_finish();
	SetUserIdAndSecContext(admin->saved_user, admin->saved_context);
	CatCacheInvalidate(&crypt_cache);
}

/*
 * Run one statement on the key table with int4 parameters.  Never
 * read-only: each statement sees what the ones before it did, even in the
 * same outer statement (snowseq_use_key(snowseq_new_key())).  Each runs
 * with the newest snapshot, taken under the key table's lock: under
 * REPEATABLE READ too it sees every key committed before, so two
 * transactions never pick the same version.
 */
static void
KeyAdminRun(const char *sql, int nargs, const Datum *args, int expect)
{
	Oid			types[4] = {INT4OID, INT4OID, INT4OID, INT4OID};
	SPIPlanPtr	plan;
	int			rc;

	Assert(nargs <= lengthof(types));
	plan = SPI_prepare(sql, nargs, types);
	if (plan == NULL)
		elog(ERROR, "snowseq key statement failed: %s", SPI_result_code_string(SPI_result));
	rc = SPI_execute_snapshot(plan, (Datum *) args, NULL, GetLatestSnapshot(),
							  InvalidSnapshot, false, true, 0);
	SPI_freeplan(plan);
	if (rc != expect)
		elog(ERROR, "snowseq key statement failed: %s", SPI_result_code_string(rc));
}

/* The state of a key version, or -1 when it does not exist; under KeyAdminBegin. */
static int
KeyAdminState(KeyAdmin *admin, int32 version)
{
	Datum		arg = Int32GetDatum(version);
	char	   *state;

	KeyAdminRun(psprintf("SELECT state FROM %s WHERE version OPERATOR(pg_catalog.=) $1",
						 admin->table), 1, &arg, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return -1;
	state = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	for (int s = 0; s < lengthof(key_state_names); s++)
		if (state != NULL && strcmp(state, key_state_names[s]) == 0)
			return s;
	elog(ERROR, "snowseq key version %d has an unknown state", version);
	return -1;					/* keep compiler quiet */
}

/*
 * ERROR for a NULL or out-of-range key version argument; any_width admits
 * the versions of every snowseq.public_version_bits (retiring a key made
 * for another width).
 */
static int32
KeyVersionArg(FunctionCallInfo fcinfo, bool any_width)
{
	int32		version;
	int			width = any_width ? CRYPT_VERSION_BITS_MAX : crypt_version_bits;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("key version must not be NULL"),
				 errhint("snowseq_keys lists the key versions.")));
	version = PG_GETARG_INT32(0);
	if (version < 1 || version >= (1 << width))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key version %d does not exist", version),
				 errdetail("Key versions run from 1 to %d with snowseq.public_version_bits = %d.",
						   (1 << crypt_version_bits) - 1, crypt_version_bits),
				 errhint("snowseq_keys lists the key versions.")));
	return version;
}

/*
 * The start of snowseq_use_key and snowseq_retire_key: the version argument
 * checked, the key table locked (KeyAdminBegin), and the version's state;
 * an ERROR with missing_hint when the version does not exist.
 */
static int
KeyAdminOpen(FunctionCallInfo fcinfo, KeyAdmin *admin, int32 *version, bool any_width,
			 const char *missing_hint)
{
	int			state;

	ShmemCheckPreloaded();
	*version = KeyVersionArg(fcinfo, any_width);
	KeyAdminBegin(fcinfo, admin);
	state = KeyAdminState(admin, *version);
	if (state < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key version %d does not exist", *version),
				 errhint("%s", missing_hint)));
	return state;
}

/* End of transaction: the keys it made are committed or gone. */
static void
CryptXactCallback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (crypt_made_any)
			{
				memset(crypt_made_here, 0, sizeof(crypt_made_here));
				crypt_made_any = false;
			}
			break;
		default:
			break;
	}
}

/* Register CryptXactCallback once per backend. */
static void
CryptRegisterXactCallback(void)
{
	if (!crypt_xact_callback_registered)
	{
		RegisterXactCallback(CryptXactCallback, NULL);
		crypt_xact_callback_registered = true;
	}
}

/*
 * snowseq_new_key(check_bits int) -> int: a new key, made inside the server;
 * returns its version.  The key decrypts at once; snowseq_use_key makes it
 * the one new public IDs use.  The INSERT leaves the key out: the table's
 * trigger draws it, so it is in no statement, parameter or plan that a log
 * setting could print.
 */
Datum
snowseq_new_key(PG_FUNCTION_ARGS)
{
	int32		check_bits;
	KeyAdmin	admin;
	int32		version;
	bool		isnull;
	Datum		args[3];

	ShmemCheckPreloaded();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("check_bits must not be NULL"),
				 errhint("Omit it for the default of 4 check bits.")));
	check_bits = PG_GETARG_INT32(0);
	if (check_bits < 0 || check_bits > CRYPT_CHECK_BITS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("check_bits must be between 0 and %d, not %d", CRYPT_CHECK_BITS_MAX, check_bits),
				 errhint("Each check bit halves both the chance that a mistyped public ID decrypts and the segments a key can encrypt.")));

	KeyAdminBegin(fcinfo, &admin);
	/* keys of another width: a new one would contradict them */
	args[0] = Int32GetDatum(crypt_version_bits);
	KeyAdminRun(psprintf("SELECT version_bits, pg_catalog.count(*)::integer FROM %s "
						 "WHERE version_bits OPERATOR(pg_catalog.<>) $1 GROUP BY version_bits "
						 "ORDER BY 2 DESC, 1 LIMIT 1", admin.table),
				1, args, SPI_OK_SELECT);
	if (SPI_processed > 0)
	{
		int32		other = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		int32		count = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot make a snowseq key for snowseq.public_version_bits = %d: %d existing key version(s) were made for %d",
						crypt_version_bits, count, other),
				 errdetail("Public IDs of one width of the version field, read with another, would decrypt to other IDs."),
				 errhint("Set snowseq.public_version_bits = %d again and restart the server.", other)));
	}
	/*
	 * Key rows of another cluster (a restore, logical replication) whose
	 * keyring was not imported: that keyring carries the versions that
	 * cluster made, so no version is made here before it is imported
	 */
	KeyAdminRun(psprintf("SELECT version, pg_catalog.substr(key, 1, %d) FROM %s "
						 "WHERE pg_catalog.octet_length(key) OPERATOR(pg_catalog.=) %d ORDER BY version",
						 WRAP_ID_BYTES, admin.table, WRAPPED_KEY_BYTES),
				0, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bytea	   *id = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));

		if (!KeyringKnows((const uint8 *) VARDATA_ANY(id)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot make a snowseq key while key version %d of another cluster waits for its keyring",
							DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull))),
					 errdetail("That cluster's keyring also says which key versions it made; a version made here first could be one of them, and its public IDs would decrypt to other IDs."),
					 errhint("Import the keyring of the cluster the key rows came from: SELECT snowseq_import_wrap_keys('/path/to/copy/of/snowseq_keyring');")));
	}
	KeyAdminRun(psprintf("SELECT pg_catalog.max(version) FROM %s", admin.table),
				0, NULL, SPI_OK_SELECT);
	version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	/* above the table and above every version this cluster ever made */
	version = KeyringNextVersion(isnull ? 1 : version + 1, (1 << crypt_version_bits) - 1);
	if (version >= (1 << crypt_version_bits))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("all %d snowseq key versions are used", (1 << crypt_version_bits) - 1),
				 errdetail("Versions are never reused in a cluster, whatever was rolled back or dropped: a reused version would decrypt its old public IDs to other IDs."),
				 errhint("Keep using the keys there are; a larger snowseq.public_version_bits gives more versions only to databases without keys, as it changes the layout of every public ID.")));
	args[0] = Int32GetDatum(version);
	args[1] = Int32GetDatum(crypt_version_bits);
	args[2] = Int32GetDatum(check_bits);
	KeyAdminRun(psprintf("INSERT INTO %s (version, state, version_bits, check_bits) "
						 "VALUES ($1, 'active', $2, $3)", admin.table),
				3, args, SPI_OK_INSERT);
	KeyAdminEnd(&admin);

	/*
	 * The key encrypts once this transaction commits, and its commit is
	 * flushed to WAL before any other session sees it, whatever
	 * synchronous_commit says: no public ID is made with a key that a crash
	 * could take back.
	 */
	CryptRegisterXactCallback();
	crypt_made_here[version] = true;
	crypt_made_any = true;
	ForceSyncCommit();
	PG_RETURN_INT32(version);
}

/* snowseq_use_key(version): new public IDs use this key from now on. */
Datum
snowseq_use_key(PG_FUNCTION_ARGS)
{
	int32		version;
	KeyAdmin	admin;
	Datum		arg;
	int			state;

	state = KeyAdminOpen(fcinfo, &admin, &version, false,
						 "Make a key with snowseq_new_key(); snowseq_keys lists the key versions.");
	arg = Int32GetDatum(version);
	if (state == KEY_RETIRED)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key version %d is retired", version),
				 errdetail("A retired key is erased and cannot be used again."),
				 errhint("Make a new key with snowseq_new_key().")));
	if (state == KEY_ACTIVE)
	{
		/* one current key at a time: step the old one down first */
		KeyAdminRun(psprintf("UPDATE %s SET state = 'active' WHERE state OPERATOR(pg_catalog.=) 'current'",
							 admin.table), 0, NULL, SPI_OK_UPDATE);
		KeyAdminRun(psprintf("UPDATE %s SET state = 'current' WHERE version OPERATOR(pg_catalog.=) $1",
							 admin.table), 1, &arg, SPI_OK_UPDATE);
	}
	KeyAdminEnd(&admin);
	PG_RETURN_VOID();
}

/*
 * snowseq_retire_key(version): erase a key that is not current.  Its public
 * IDs fail to decrypt from then on; its version is never used again.
 */
Datum
snowseq_retire_key(PG_FUNCTION_ARGS)
{
	int32		version;
	KeyAdmin	admin;
	Datum		arg;
	int			state;

	state = KeyAdminOpen(fcinfo, &admin, &version, true, "snowseq_keys lists the key versions.");
	arg = Int32GetDatum(version);
	if (state == KEY_CURRENT)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("key version %d is the current key", version),
				 errdetail("New public IDs are made with it."),
				 errhint("Make another key current first: SELECT snowseq_use_key(snowseq_new_key());")));
	if (state == KEY_RETIRED)
		ereport(NOTICE,
				(errmsg("key version %d is already retired", version)));
	else
		KeyAdminRun(psprintf("UPDATE %s SET state = 'retired', key = NULL, retired = pg_catalog.now() "
							 "WHERE version OPERATOR(pg_catalog.=) $1", admin.table),
					1, &arg, SPI_OK_UPDATE);
	KeyAdminEnd(&admin);
	PG_RETURN_VOID();
}

/*
 * Store a key (FF1_KEY_BYTES) in the key column of a row, wrapped under the
 * cluster's wrap key (keyring.c), so that the row, its WAL record and what
 * logical decoding makes of it hold no usable key.  values and nulls are
 * updated to the new row.
 */
static HeapTuple
KeyStoreWrapped(HeapTuple tuple, TupleDesc desc, int col, const uint8 *raw,
				Datum *values, bool *nulls)
{
	bytea	   *key = palloc(VARHDRSZ + WRAPPED_KEY_BYTES);
	int			attnum = col + 1;
	Datum		value = PointerGetDatum(key);
	bool		isnull = false;
	HeapTuple	stored;

	SET_VARSIZE(key, VARHDRSZ + WRAPPED_KEY_BYTES);
	KeyringWrap(raw, (uint8 *) VARDATA(key));
	stored = heap_modify_tuple_by_cols(tuple, desc, 1, &attnum, &value, &isnull);
	pfree(key);
	heap_deform_tuple(stored, desc, values, nulls);
	return stored;
}

/* A new key, 32 bytes from pg_strong_random, in a row inserted without one. */
static HeapTuple
KeyDraw(HeapTuple tuple, TupleDesc desc, int col, Datum *values, bool *nulls)
{
	uint8		raw[FF1_KEY_BYTES];
	HeapTuple	drawn;

	if (!pg_strong_random(raw, FF1_KEY_BYTES))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random key")));
	drawn = KeyStoreWrapped(tuple, desc, col, raw, values, nulls);
	explicit_bzero(raw, sizeof(raw));
	return drawn;
}

/*
 * Trigger on the key table, ENABLE ALWAYS so that it also fires for rows
 * applied by logical replication: BEFORE each INSERT or UPDATE it draws
 * the key of a row inserted without one, checks the row (before the table's
 * constraints, whose errors would print the key) and sends a relcache
 * invalidation, so every backend reloads its keys once the change commits;
 * BEFORE DELETE and TRUNCATE it refuses.
 */
Datum
snowseq_key_store_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	int			cols[NCOLS];
	Datum	   *values;
	bool	   *nulls;
	HeapTuple	tuple;
	KeyRow		row;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_key_store_trigger must be called as a trigger")));
	if (TRIGGER_FIRED_BY_DELETE(td->tg_event) || TRIGGER_FIRED_BY_TRUNCATE(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq keys are never deleted"),
				 errdetail("A key version deleted and made again would decrypt the old key's public IDs to other IDs."),
				 errhint("Retire a key with snowseq_retire_key(version): it is erased, its public IDs no longer decrypt, and its version is kept.")));
	if (!TRIGGER_FIRED_BEFORE(td->tg_event) || !TRIGGER_FIRED_FOR_ROW(td->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("snowseq_key_store_trigger must fire BEFORE each row")));
	ShmemCheckPreloaded();

	desc = RelationGetDescr(td->tg_relation);
	KeyColumns(desc, cols);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	tuple = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	heap_deform_tuple(tuple, desc, values, nulls);
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event) && nulls[cols[COL_KEY]] &&
		!nulls[cols[COL_STATE]] &&
		strcmp(TextDatumGetCString(values[cols[COL_STATE]]), "retired") != 0)
		tuple = KeyDraw(tuple, desc, cols[COL_KEY], values, nulls);
	KeyRowRead(cols, values, nulls, &row, false);

	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		Datum	   *old_values = palloc(sizeof(Datum) * desc->natts);
		bool	   *old_nulls = palloc(sizeof(bool) * desc->natts);
		KeyRow		old;

		heap_deform_tuple(td->tg_trigtuple, desc, old_values, old_nulls);
		/* retiring works whatever width the key was made for */
		KeyRowRead(cols, old_values, old_nulls, &old, row.state == KEY_RETIRED);
		if (row.version != old.version || row.check_bits != old.check_bits)
			KeyRowInvalid(old.version, "version and check_bits never change");
		if (old.state == KEY_RETIRED && row.state != KEY_RETIRED)
			KeyRowInvalid(old.version, "a retired key stays retired");
		if (row.key != NULL && old.key != NULL &&
			(VARSIZE_ANY_EXHDR(row.key) != VARSIZE_ANY_EXHDR(old.key) ||
			 memcmp(VARDATA_ANY(row.key), VARDATA_ANY(old.key), VARSIZE_ANY_EXHDR(row.key)) != 0))
			KeyRowInvalid(old.version, "a key never changes; make a new one with snowseq_new_key()");
	}

	/*
	 * A key stored as it is (made before 1.2, or restored or replicated
	 * from such a server) is wrapped by any insert or update of its row:
	 * the update to 1.2 touches every such row, so that no later change of
	 * the row shows the key to logical decoding.
	 */
	if (row.key != NULL && VARSIZE_ANY_EXHDR(row.key) == FF1_KEY_BYTES)
		tuple = KeyStoreWrapped(tuple, desc, cols[COL_KEY], (const uint8 *) VARDATA_ANY(row.key),
								values, nulls);
	CacheInvalidateRelcache(td->tg_relation);
	return PointerGetDatum(tuple);
}
