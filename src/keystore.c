/*
 * keystore.c
 *		The table of keys of public IDs, snowseq_key_store: its rows and
 *		the rules they keep, its trigger (which draws a new key and stores
 *		it wrapped), the width of the version field
 *		(snowseq.public_version_bits), and the key versions this backend's
 *		open transaction made, which encrypt only once it commits.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/inval.h"
#include "utils/rel.h"

#include "ff1.h"
#include "guc.h"
#include "keyring.h"
#include "keystore.h"
#include "shmem.h"
#include "snowseq.h"
#include "sqlrun.h"

static const char *const key_state_names[] = {"active", "current", "retired"};
static const char *const key_columns[NCOLS] = {
	"version", "state", "key", "version_bits", "check_bits", "created"
};

/*
 * Key versions made by this backend's open transaction.  A key encrypts
 * only once the transaction that made it has committed: a public ID made
 * before could leave the server, the transaction roll back, and the
 * version be made again with another key.
 */
static bool keystore_made_here[1 << KEYSTORE_VERSION_BITS_MAX];
static bool keystore_made_any = false;
static bool keystore_xact_callback_registered = false;

/* Define snowseq.public_version_bits; called from _PG_init at preload. */
void
KeyStoreInit(void)
{
	GucDefineInt("snowseq.public_version_bits",
				 "Bits of a public ID that name the key version it was made with (the FF1 ciphertext fills the 48 - public_version_bits bits below them).",
				 &snowseq_public_version_bits, 6, KEYSTORE_VERSION_BITS_MIN, KEYSTORE_VERSION_BITS_MAX, 0);
}

/* The key table in the schema of the calling function. */
Oid
KeyStoreTable(Oid fn_oid)
{
	Oid			nsp = ExtNamespace(fn_oid);
	Oid			relid = get_relname_relid(KEYSTORE_TABLE, nsp);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table %s does not exist in schema \"%s\"",
						KEYSTORE_TABLE, get_namespace_name(nsp)),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));
	return relid;
}

/* The name of a key state, as the table stores it. */
const char *
KeyStoreStateName(KeyState state)
{
	return key_state_names[state];
}

/* Attribute numbers (0-based) of the key table's columns. */
void
KeyStoreColumns(TupleDesc desc, int *cols)
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
					 errmsg("table %s has no column \"%s\"", KEYSTORE_TABLE, key_columns[c]),
					 errhint("Reinstall the snowseq extension's key table.")));
	}
}

/* ERROR for a key row that breaks the rules; never shows the key. */
void
KeyStoreRowInvalid(int32 version, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 version > 0 ?
			 errmsg("invalid row for snowseq key version %d in %s: %s",
					version, KEYSTORE_TABLE, what) :
			 errmsg("invalid row in %s: %s", KEYSTORE_TABLE, what),
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
void
KeyStoreRowRead(const int *cols, Datum *values, bool *nulls, KeyRow *row, bool any_width)
{
	int			max_version;
	int			width;
	char	   *state;
	int			s;

	if (nulls[cols[COL_VERSION]])
		KeyStoreRowInvalid(0, "version is NULL");
	row->version = DatumGetInt32(values[cols[COL_VERSION]]);
	if (nulls[cols[COL_VERSION_BITS]] || nulls[cols[COL_CHECK_BITS]] ||
		nulls[cols[COL_STATE]] || nulls[cols[COL_CREATED]])
		KeyStoreRowInvalid(row->version, "only key and retired may be NULL");
	row->version_bits = DatumGetInt32(values[cols[COL_VERSION_BITS]]);
	row->check_bits = DatumGetInt32(values[cols[COL_CHECK_BITS]]);
	row->xmin = InvalidTransactionId;
	state = TextDatumGetCString(values[cols[COL_STATE]]);
	/* another width first: it explains any version out of range too */
	if (row->version_bits != snowseq_public_version_bits && !any_width && strcmp(state, "retired") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq key version %d was made for snowseq.public_version_bits = %d, but the server runs with %d",
						row->version, row->version_bits, snowseq_public_version_bits),
				 errdetail("Public IDs made with one width of the version field cannot be read with another."),
				 errhint("Set snowseq.public_version_bits = %d again and restart the server; only if the public IDs of key version %d are no longer needed, retire it: SELECT snowseq_retire_key(%d);",
						 row->version_bits, row->version, row->version)));
	width = row->version_bits;
	if (width < KEYSTORE_VERSION_BITS_MIN || width > KEYSTORE_VERSION_BITS_MAX)
		KeyStoreRowInvalid(row->version, psprintf("version_bits must be between %d and %d",
											 KEYSTORE_VERSION_BITS_MIN, KEYSTORE_VERSION_BITS_MAX));
	max_version = (1 << width) - 1;
	if (row->version < 1 || row->version > max_version)
		KeyStoreRowInvalid(row->version,
					  psprintf("versions run from 1 to %d with snowseq.public_version_bits = %d",
							   max_version, width));
	if (row->check_bits < 0 || row->check_bits > KEYSTORE_CHECK_BITS_MAX)
		KeyStoreRowInvalid(row->version, psprintf("check_bits must be between 0 and %d",
											 KEYSTORE_CHECK_BITS_MAX));
	for (s = 0; s < lengthof(key_state_names); s++)
		if (strcmp(state, key_state_names[s]) == 0)
			break;
	if (s == lengthof(key_state_names))
		KeyStoreRowInvalid(row->version, "state must be 'active', 'current' or 'retired'");
	row->state = (KeyState) s;
	row->key = nulls[cols[COL_KEY]] ? NULL : DatumGetByteaPP(values[cols[COL_KEY]]);
	if (row->state == KEY_RETIRED && row->key != NULL)
		KeyStoreRowInvalid(row->version, "a retired key is erased (key is NULL)");
	if (row->state != KEY_RETIRED &&
		(row->key == NULL || (VARSIZE_ANY_EXHDR(row->key) != WRAPPED_KEY_BYTES &&
							  VARSIZE_ANY_EXHDR(row->key) != FF1_KEY_BYTES)))
		KeyStoreRowInvalid(row->version, psprintf("key must be %d bytes (wrapped) or %d (made before 1.2)",
											 WRAPPED_KEY_BYTES, FF1_KEY_BYTES));
}

/* End of transaction: the keys it made are committed or gone. */
static void
KeyStoreXactCallback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			if (keystore_made_any)
			{
				memset(keystore_made_here, 0, sizeof(keystore_made_here));
				keystore_made_any = false;
			}
			break;
		default:
			break;
	}
}

/* The open transaction made key version (snowseq_new_key): it encrypts once that commits. */
void
KeyStoreMadeHere(int32 version)
{
	if (!keystore_xact_callback_registered)
	{
		RegisterXactCallback(KeyStoreXactCallback, NULL);
		keystore_xact_callback_registered = true;
	}
	keystore_made_here[version] = true;
	keystore_made_any = true;
}

/* Did this backend's open transaction make key version? */
bool
KeyStoreMadeInThisTransaction(int32 version)
{
	return keystore_made_here[version];
}

/* Did this backend's open transaction make any key? */
bool
KeyStoreMadeAny(void)
{
	return keystore_made_any;
}

PG_FUNCTION_INFO_V1(snowseq_key_store_trigger);

/*
 * Store a key (FF1_KEY_BYTES) in the key column of a row, wrapped under the
 * cluster's wrap key (keyring.c), so that the row, its WAL record and what
 * logical decoding makes of it hold no usable key.  values and nulls are
 * updated to the new row.
 */
static HeapTuple
KeyStoreWrap(HeapTuple tuple, TupleDesc desc, int col, const uint8 *raw,
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
KeyStoreDraw(HeapTuple tuple, TupleDesc desc, int col, Datum *values, bool *nulls)
{
	uint8		raw[FF1_KEY_BYTES];
	HeapTuple	drawn;

	if (!pg_strong_random(raw, FF1_KEY_BYTES))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random key")));
	drawn = KeyStoreWrap(tuple, desc, col, raw, values, nulls);
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
	KeyStoreColumns(desc, cols);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	tuple = TRIGGER_FIRED_BY_UPDATE(td->tg_event) ? td->tg_newtuple : td->tg_trigtuple;
	heap_deform_tuple(tuple, desc, values, nulls);
	if (TRIGGER_FIRED_BY_INSERT(td->tg_event) && nulls[cols[COL_KEY]] &&
		!nulls[cols[COL_STATE]] &&
		strcmp(TextDatumGetCString(values[cols[COL_STATE]]), "retired") != 0)
		tuple = KeyStoreDraw(tuple, desc, cols[COL_KEY], values, nulls);
	KeyStoreRowRead(cols, values, nulls, &row, false);

	if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		Datum	   *old_values = palloc(sizeof(Datum) * desc->natts);
		bool	   *old_nulls = palloc(sizeof(bool) * desc->natts);
		KeyRow		old;

		heap_deform_tuple(td->tg_trigtuple, desc, old_values, old_nulls);
		/* retiring works whatever width the key was made for */
		KeyStoreRowRead(cols, old_values, old_nulls, &old, row.state == KEY_RETIRED);
		if (row.version != old.version || row.check_bits != old.check_bits)
			KeyStoreRowInvalid(old.version, "version and check_bits never change");
		if (old.state == KEY_RETIRED && row.state != KEY_RETIRED)
			KeyStoreRowInvalid(old.version, "a retired key stays retired");
		if (row.key != NULL && old.key != NULL &&
			(VARSIZE_ANY_EXHDR(row.key) != VARSIZE_ANY_EXHDR(old.key) ||
			 memcmp(VARDATA_ANY(row.key), VARDATA_ANY(old.key), VARSIZE_ANY_EXHDR(row.key)) != 0))
			KeyStoreRowInvalid(old.version, "a key never changes; make a new one with snowseq_new_key()");
	}

	/*
	 * A key stored as it is (made before 1.2, or restored or replicated
	 * from such a server) is wrapped by any insert or update of its row:
	 * the update to 1.2 touches every such row, so that no later change of
	 * the row shows the key to logical decoding.
	 */
	if (row.key != NULL && VARSIZE_ANY_EXHDR(row.key) == FF1_KEY_BYTES)
		tuple = KeyStoreWrap(tuple, desc, cols[COL_KEY], (const uint8 *) VARDATA_ANY(row.key),
								values, nulls);
	CacheInvalidateRelcache(td->tg_relation);
	return PointerGetDatum(tuple);
}
