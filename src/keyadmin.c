/*
 * keyadmin.c
 *		Managing the keys of public IDs: snowseq_new_key, snowseq_use_key and
 *		snowseq_retire_key.  They change the key table as its owner under a
 *		lock that orders key changes (readers go on), with the newest
 *		snapshot, so under REPEATABLE READ too two transactions never pick
 *		the same version; the version of a new key comes from the keyring's
 *		mark (keyring.c), never made twice in a cluster.
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "crypt.h"
#include "keyring.h"
#include "keystore.h"
#include "shmem.h"

PG_FUNCTION_INFO_V1(snowseq_new_key);
PG_FUNCTION_INFO_V1(snowseq_use_key);
PG_FUNCTION_INFO_V1(snowseq_retire_key);
PG_FUNCTION_INFO_V1(snowseq_drop_wrap_keys);

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
	relid = KeyStoreTable(fcinfo->flinfo->fn_oid);
	rel = table_open(relid, ExclusiveLock);
	owner = rel->rd_rel->relowner;
	admin->table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											  KEYSTORE_TABLE);
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
	CryptInvalidateKeys();
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
	for (int s = 0; s < KEY_RETIRED + 1; s++)
		if (state != NULL && strcmp(state, KeyStoreStateName((KeyState) s)) == 0)
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
KeyAdminVersionArg(FunctionCallInfo fcinfo, bool any_width)
{
	int32		version;
	int			width = any_width ? KEYSTORE_VERSION_BITS_MAX : snowseq_public_version_bits;

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
						   (1 << snowseq_public_version_bits) - 1, snowseq_public_version_bits),
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
	*version = KeyAdminVersionArg(fcinfo, any_width);
	KeyAdminBegin(fcinfo, admin);
	state = KeyAdminState(admin, *version);
	if (state < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key version %d does not exist", *version),
				 errhint("%s", missing_hint)));
	return state;
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
	if (check_bits < 0 || check_bits > KEYSTORE_CHECK_BITS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("check_bits must be between 0 and %d, not %d", KEYSTORE_CHECK_BITS_MAX, check_bits),
				 errhint("Each check bit halves both the chance that a mistyped public ID decrypts and the segments a key can encrypt.")));

	KeyAdminBegin(fcinfo, &admin);
	/* keys of another width: a new one would contradict them */
	args[0] = Int32GetDatum(snowseq_public_version_bits);
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
						snowseq_public_version_bits, count, other),
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
	version = KeyringNextVersion(isnull ? 1 : version + 1, (1 << snowseq_public_version_bits) - 1);
	if (version >= (1 << snowseq_public_version_bits))
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("all %d snowseq key versions are used", (1 << snowseq_public_version_bits) - 1),
				 errdetail("Versions are never reused in a cluster, whatever was rolled back or dropped: a reused version would decrypt its old public IDs to other IDs."),
				 errhint("Keep using the keys there are; a larger snowseq.public_version_bits gives more versions only to databases without keys, as it changes the layout of every public ID.")));
	args[0] = Int32GetDatum(version);
	args[1] = Int32GetDatum(snowseq_public_version_bits);
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
	KeyStoreMadeHere(version);
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
 * snowseq_drop_wrap_keys() -> integer: drop from the keyring every wrap
 * key but the cluster's own that no row of this database's key table uses
 * (an import of too many, or of the wrong keyring); returns how many were
 * dropped.  The key table is locked against key changes meanwhile.  Rows
 * of other databases' key tables are not seen: a dropped wrap key comes
 * back by importing its keyring file again.
 */
Datum
snowseq_drop_wrap_keys(PG_FUNCTION_ARGS)
{
	KeyAdmin	admin;
	uint8		(*keep)[WRAP_ID_BYTES];
	int			nkeep = 0;
	int			dropped;
	bool		isnull;

	ShmemCheckPreloaded();
	KeyAdminBegin(fcinfo, &admin);
	KeyAdminRun(psprintf("SELECT DISTINCT pg_catalog.substr(key, 1, %d) FROM %s "
						 "WHERE pg_catalog.octet_length(key) OPERATOR(pg_catalog.=) %d",
						 WRAP_ID_BYTES, admin.table, WRAPPED_KEY_BYTES),
				0, NULL, SPI_OK_SELECT);
	keep = palloc(sizeof(*keep) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bytea	   *id = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));

		memcpy(keep[nkeep++], VARDATA_ANY(id), WRAP_ID_BYTES);
	}
	dropped = KeyringDropUnused(nkeep, (const uint8 (*)[WRAP_ID_BYTES]) keep);
	KeyAdminEnd(&admin);
	PG_RETURN_INT32(dropped);
}
