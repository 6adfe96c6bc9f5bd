/*
 * keyring.c
 *		Wrap keys: the keys of public IDs are stored wrapped.
 *
 * A row of the key table holds a key as 48 bytes: the 8-byte identifier of
 * a wrap key, then the key wrapped under it with AES-256 key wrap (RFC
 * 3394, which also checks integrity).  The wrap keys live in the file
 * snowseq_keyring of the data directory (readable by the server's OS user
 * only), never in a table: logical decoding, which shows every row change
 * of every table to any role with REPLICATION, sees wrapped keys only.
 *
 * New keys are wrapped under the cluster's own wrap key, one this cluster
 * made, on first need on a primary, with pg_strong_random(); no caller
 * chooses it.  The other wrap keys were imported from clusters whose key
 * rows arrived by pg_dump or logical replication: they only unwrap those
 * rows.  (Until 1.2 the file's first wrap key wrapped new keys, imported or
 * not: a file of 1.2 is read with no own wrap key, and one is made.)
 * Every wrap key is written to the WAL (records of snowseq's resource
 * manager, which logical decoding does not decode) and flushed before it
 * is used or saved, so standbys, crash recovery and point-in-time recovery
 * rebuild the file, and pg_basebackup copies it.  Wrap keys are only added
 * (but by snowseq_drop_wrap_keys), so each backend keeps the file's
 * contents and reads it again only for an identifier it does not know.
 *
 * With snowseq.keyring_command, whatever copies the data directory (a
 * REPLICATION role's pg_basebackup) or its WAL gets no wrap key: the
 * command prints a key-encryption key from outside the data directory,
 * run once in the postmaster at start (children inherit it), and every
 * wrap key of the file and of the WAL is sealed under it with AES-256 key
 * wrap.  Each entry of the file names the key-encryption key that seals
 * it, so redo appends entries as they are and never needs that key; a
 * server without it (a copy started without the command) starts, and
 * unsealing a wrap key is an ERROR there.  Entries stored as they are (a
 * keyring of 1.3 before sealing) or sealed under the previous
 * key-encryption key (printed on a second line) are sealed at start.
 *
 * The file also holds the highest key version made in this cluster, raised
 * (and WAL-logged) by every snowseq_new_key before it returns the version:
 * a version is never made twice in a cluster, whatever happened to the
 * key table since (a rolled-back transaction, DROP EXTENSION, DROP
 * DATABASE), so a public ID that left the server never meets another key
 * of its version here.  An imported keyring brings its cluster's mark
 * along: after importing the keyring of a cluster whose (older) dump was
 * restored here, no version that cluster made is made again here.
 *
 * An import adds all of a file's new wrap keys or none, reads nothing but
 * a regular file in the keyring format (opened without blocking: a FIFO or
 * a device is refused, never waited on), and needs the privileges of
 * pg_read_server_files, as reading any server file does.  It keeps room for
 * the cluster's own wrap key and refuses a version mark that leaves no key
 * version to make: either would end key creation.
 *
 * This file changes the keyring under the cluster's lock (new wrap keys,
 * the version mark, imports and drops), logs and redoes those changes, and
 * wraps and unwraps keys.  The file itself and this backend's copy of it
 * are in keyring_file.c; identifiers, AES key wrap and the seal under
 * snowseq.keyring_command's key-encryption key in keyring_seal.c.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "ff1.h"
#include "keyring.h"
#include "keyring_file.h"
#include "keyring_seal.h"
#include "keystore.h"
#include "rmgr.h"
#include "shmem.h"

/* snowseq.public_version_bits: its value lives with the version mark it bounds */
int			snowseq_public_version_bits = 6;

#define XLOG_SNOWSEQ_WRAP_KEYS_DROP	0x70	/* imported wrap keys dropped */

/*
 * Log the cluster's own new wrap key (its entry: sealed with
 * snowseq.keyring_command) and flush it before any key is wrapped under
 * it.  Logical decoding does not decode snowseq's records; physical
 * replication and recovery rebuild the keyring file.
 */
static void
KeyringLogWrapKey(const uint8 *entry)
{
	XLogRecPtr	lsn;

	XLogBeginInsert();
	XLogRegisterData((char *) entry, ENTRY_BYTES);
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_WRAP_KEY);
	XLogFlush(lsn);
}

/* Log the highest key version made in the cluster and flush it; rmgr.c redoes it. */
static void
KeyringLogVersion(uint32 version)
{
	XLogRecPtr	lsn;

	XLogBeginInsert();
	XLogRegisterData((char *) &version, sizeof(version));
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_KEY_VERSION);
	XLogFlush(lsn);
}

/* Log an import, whole: the imported entries (sealed where this server seals) and version mark, flushed. */
static void
KeyringLogImport(uint32 version, int n, uint8 (*entries)[ENTRY_BYTES])
{
	XLogRecPtr	lsn;
	uint32		count = (uint32) n;

	XLogBeginInsert();
	XLogRegisterData((char *) &version, sizeof(version));
	XLogRegisterData((char *) &count, sizeof(count));
	XLogRegisterData((char *) entries, (size_t) n * ENTRY_BYTES);
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_WRAP_KEYS);
	XLogFlush(lsn);
}

/* Log the identifiers of dropped wrap keys, flushed. */
static void
KeyringLogDrop(int n, uint8 (*ids)[WRAP_ID_BYTES])
{
	XLogRecPtr	lsn;
	uint32		count = (uint32) n;

	XLogBeginInsert();
	XLogRegisterData((char *) &count, sizeof(count));
	XLogRegisterData((char *) ids, (size_t) n * WRAP_ID_BYTES);
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_WRAP_KEYS_DROP);
	XLogFlush(lsn);
}

/*
 * Change the data directory's keyring under the lock: fn runs on this
 * backend's copy, freshly read, and saves it if it changed anything; on
 * an ERROR the copy is read again at the next use.
 */
static void
KeyringChange(void (*fn) (void *arg), void *arg)
{
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	PG_TRY();
	{
		KeyringLoad();
		fn(arg);
	}
	PG_CATCH();
	{
		keyring.n = -1;
		LWLockRelease(Snowseq->lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LWLockRelease(Snowseq->lock);
}

/* What KeyringChange's steps are given. */
typedef struct KeyringStep
{
	bool		log;			/* write the WAL first (not in redo) */
	uint32		version;		/* a version mark to raise to */
	uint32		before;			/* the mark before */
	const uint8 *entry;			/* the entry of an own wrap key */
	Keyring    *import;			/* wrap keys to import */
	int			added;
	int			nkeep;			/* wrap keys a drop keeps: their identifiers */
	const uint8 (*keep)[WRAP_ID_BYTES];
	int			ndrop;			/* wrap keys to drop (in redo), or dropped */
	uint8		(*drop)[WRAP_ID_BYTES];
} KeyringStep;

/* Raise the version mark (KeyringChange step). */
static void
KeyringStepVersion(void *arg)
{
	KeyringStep *st = arg;

	st->before = keyring.version;
	if (st->version > keyring.version)
	{
		if (st->log)
			KeyringLogVersion(st->version);
		keyring.version = st->version;
		KeyringSave();
	}
}

/*
 * Add the cluster's own wrap key, unless it has one already (another
 * backend made it first: the first stays) (KeyringChange step).
 */
static void
KeyringStepOwn(void *arg)
{
	KeyringStep *st = arg;
	int			i;

	if (keyring.own >= 0)
		return;
	i = KeyringFind(st->entry);
	if (i < 0)
	{
		if (keyring.n >= KEYRING_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the snowseq keyring holds %d wrap keys already, no room for this cluster's own", KEYRING_MAX),
					 errhint("Drop the imported wrap keys that no key row uses: SELECT snowseq_drop_wrap_keys();")));
		if (st->log)
			KeyringLogWrapKey(st->entry);
		i = KeyringAppend(st->entry);
	}
	keyring.own = i;
	KeyringSave();
}

/*
 * Import wrap keys and a version mark, all or nothing: the keys not there
 * yet are counted first, then logged in one record, added and saved once
 * (KeyringChange step).  An import (not its redo) leaves room for the
 * cluster's own wrap key.
 */
static void
KeyringStepImport(void *arg)
{
	KeyringStep *st = arg;
	Keyring    *in = st->import;
	uint8		(*fresh)[ENTRY_BYTES] = palloc(sizeof(*fresh) * Max(in->n, 1));
	int			n = 0;
	int			room = KEYRING_MAX - (keyring.own < 0 && st->log ? 1 : 0);

	for (int i = 0; i < in->n; i++)
	{
		bool		dup = KeyringFind(in->entries[i]) >= 0;

		for (int j = 0; j < i && !dup; j++)
			dup = memcmp(in->entries[j], in->entries[i], WRAP_ID_BYTES) == 0;
		if (!dup)
		{
			memcpy(fresh[n], in->entries[i], ENTRY_BYTES);
			if (st->log)
				(void) KeyringEntrySeal(fresh[n]);
			n++;
		}
	}
	if (keyring.n + n > room)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("importing %d new wrap keys would give the snowseq keyring %d, more than the %d it may hold%s",
						n, keyring.n + n, room,
						room < KEYRING_MAX ? " besides this cluster's own" : ""),
				 errdetail("Nothing was imported."),
				 errhint("Import only the keyrings of clusters whose key rows this one holds; SELECT snowseq_drop_wrap_keys(); drops the imported wrap keys no key row uses.")));
	if (n > 0 || in->version > keyring.version)
	{
		if (st->log)
			KeyringLogImport(in->version, n, fresh);
		for (int i = 0; i < n; i++)
			KeyringAppend(fresh[i]);
		keyring.version = Max(keyring.version, in->version);
		KeyringSave();
	}
	explicit_bzero(fresh, sizeof(*fresh) * Max(in->n, 1));
	pfree(fresh);
	st->added = n;
}

/*
 * Drop wrap keys other than the own one: those not among st->keep (with
 * log), or those in st->drop (redo); logged in one record, saved once
 * (KeyringChange step).
 */
static void
KeyringStepDrop(void *arg)
{
	KeyringStep *st = arg;
	int			kept = 0;
	int			own = -1;

	if (st->log)
	{
		st->ndrop = 0;
		for (int i = 0; i < keyring.n; i++)
		{
			bool		used = i == keyring.own;

			for (int j = 0; j < st->nkeep && !used; j++)
				used = memcmp(keyring.entries[i], st->keep[j], WRAP_ID_BYTES) == 0;
			if (!used)
				memcpy(st->drop[st->ndrop++], keyring.entries[i], WRAP_ID_BYTES);
		}
		if (st->ndrop == 0)
			return;
		KeyringLogDrop(st->ndrop, st->drop);
	}
	for (int i = 0; i < keyring.n; i++)
	{
		bool		gone = false;

		for (int j = 0; j < st->ndrop && !gone && i != keyring.own; j++)
			gone = memcmp(keyring.entries[i], st->drop[j], WRAP_ID_BYTES) == 0;
		if (gone)
			continue;
		if (i == keyring.own)
			own = kept;
		memmove(keyring.entries[kept], keyring.entries[i], ENTRY_BYTES);
		keyring.have[kept] = false;
		kept++;
	}
	if (kept == keyring.n)
		return;
	keyring.n = kept;
	keyring.own = own;
	KeyringSave();
}

/*
 * Raise the highest key version made to version (log: WAL-logged and
 * flushed first, not in redo); returns the version it was before.
 */
static uint32
KeyringRaiseVersion(uint32 version, bool log)
{
	KeyringStep st = {.log = log, .version = version};

	KeyringChange(KeyringStepVersion, &st);
	return st.before;
}

/* The highest key version made in this cluster (the keyring's mark). */
uint32
KeyringVersionMark(void)
{
	uint32		v;

	LWLockAcquire(Snowseq->lock, LW_SHARED);
	PG_TRY();
	{
		KeyringLoad();
	}
	PG_CATCH();
	{
		LWLockRelease(Snowseq->lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	v = keyring.version;
	LWLockRelease(Snowseq->lock);
	return v;
}

/*
 * The version of a new key: above every version of the key table
 * (table_next is its largest plus one) and above every version ever made
 * in this cluster; recorded durably before it is returned.  A version
 * above max_version is returned unrecorded (the caller refuses it).  The
 * caller holds the key table's lock; the cluster's is taken here.
 */
int32
KeyringNextVersion(int32 table_next, int32 max_version)
{
	for (;;)
	{
		uint32		made;
		int32		next;

		made = KeyringVersionMark();
		next = Max(table_next, (int32) Min(made, (uint32) PG_INT32_MAX - 1) + 1);
		if (next > max_version)
			return next;
		/* another database's key may have taken it meanwhile: try again */
		if (KeyringRaiseVersion((uint32) next, true) < (uint32) next)
			return next;
	}
}

/* Does this cluster's keyring hold the wrap key with this identifier? */
bool
KeyringKnows(const uint8 *id)
{
	if (keyring.n < 0 || KeyringFind(id) < 0)
		KeyringLoad();
	return KeyringFind(id) >= 0;
}

/* Redo of a key version record: the highest version made is raised. */
void
KeyringRedoVersion(uint32 version)
{
	KeyringRaiseVersion(version, false);
}

/* Redo of a KEY_VERSION record: the version mark it raised. */
static void
KeyringRedoVersionRecord(const char *data, size_t len)
{
	uint32		version;

	Assert(len == sizeof(version));
	memcpy(&version, data, sizeof(version));
	KeyringRedoVersion(version);
}

/* Description of a KEY_VERSION record. */
static void
KeyringDescribeVersion(StringInfo buf, const char *data, size_t len)
{
	uint32		version;

	memcpy(&version, data, Min(len, sizeof(version)));
	appendStringInfo(buf, "key version %u", version);
}

/*
 * Redo of an own wrap key record (1.2 and 1.3 before sealing: the bare key;
 * now its entry, sealed or not): the cluster's own wrap key afterwards.
 * Redo never needs the key-encryption key.
 */
void
KeyringRedo(const char *data, size_t len)
{
	uint8		entry[ENTRY_BYTES];
	KeyringStep st = {.log = false, .entry = entry};

	if (len == WRAP_KEY_BYTES)
		KeyringEntryBare((const uint8 *) data, entry);
	else if (len == ENTRY_BYTES)
		memcpy(entry, data, ENTRY_BYTES);
	else
		elog(PANIC, "snowseq: wrap key record of %zu bytes", len);
	KeyringChange(KeyringStepOwn, &st);
	explicit_bzero(entry, sizeof(entry));
}

/* Redo of an import record (version mark, count, keys or entries): imported afterwards. */
void
KeyringRedoImport(const char *data, size_t len)
{
	Keyring		in = {0};
	KeyringStep st = {.log = false, .import = &in};
	uint32		count;
	bool		bare;

	memcpy(&in.version, data, sizeof(uint32));
	memcpy(&count, data + sizeof(uint32), sizeof(uint32));
	bare = count > 0 && len == 2 * sizeof(uint32) + (size_t) count * WRAP_KEY_BYTES;
	if (count > KEYRING_MAX ||
		(!bare && len != 2 * sizeof(uint32) + (size_t) count * ENTRY_BYTES))
		elog(PANIC, "snowseq: wrap key import record of %zu bytes for %u keys", len, count);
	in.n = (int) count;
	in.entries = (uint8 (*)[ENTRY_BYTES]) palloc((size_t) Max(count, 1) * ENTRY_BYTES);
	for (int i = 0; i < in.n; i++)
	{
		if (bare)
			KeyringEntryBare((const uint8 *) data + 2 * sizeof(uint32) + (size_t) i * WRAP_KEY_BYTES,
							 in.entries[i]);
		else
			memcpy(in.entries[i], data + 2 * sizeof(uint32) + (size_t) i * ENTRY_BYTES, ENTRY_BYTES);
	}
	KeyringChange(KeyringStepImport, &st);
	explicit_bzero(in.entries, (size_t) Max(count, 1) * ENTRY_BYTES);
}

/* Redo of a drop record (count, identifiers): those wrap keys gone. */
static void
KeyringRedoDrop(const char *data, size_t len)
{
	KeyringStep st = {.log = false};
	uint32		count;

	memcpy(&count, data, sizeof(uint32));
	if (count > KEYRING_MAX || len != sizeof(uint32) + (size_t) count * WRAP_ID_BYTES)
		elog(PANIC, "snowseq: wrap key drop record of %zu bytes for %u keys", len, count);
	st.ndrop = (int) count;
	st.drop = (uint8 (*)[WRAP_ID_BYTES]) palloc((size_t) Max(count, 1) * WRAP_ID_BYTES);
	memcpy(st.drop, data + sizeof(uint32), (size_t) count * WRAP_ID_BYTES);
	KeyringChange(KeyringStepDrop, &st);
}

/* A drop record, described: the identifiers. */
static void
KeyringDescribeDrop(StringInfo buf, const char *data, size_t len)
{
	uint32		count;

	memcpy(&count, data, sizeof(uint32));
	appendStringInfo(buf, "drop of %u wrap keys", count);
	for (uint32 i = 0; i < count && sizeof(uint32) + (i + 1) * WRAP_ID_BYTES <= len; i++)
		appendStringInfo(buf, "%s%s", i == 0 ? ": " : ", ",
						 KeyringHex((const uint8 *) data + sizeof(uint32) + i * WRAP_ID_BYTES));
}

/* An import record, described: the version mark and the identifiers, never a key. */
void
KeyringDescribeImport(StringInfo buf, const char *data, size_t len)
{
	uint32		version;
	uint32		count;
	size_t		size;

	memcpy(&version, data, sizeof(uint32));
	memcpy(&count, data + sizeof(uint32), sizeof(uint32));
	size = count > 0 && len == 2 * sizeof(uint32) + (size_t) count * WRAP_KEY_BYTES ?
		WRAP_KEY_BYTES : ENTRY_BYTES;
	appendStringInfo(buf, "import of %u wrap keys, key versions made up to %u", count, version);
	for (uint32 i = 0; i < count && 2 * sizeof(uint32) + (i + 1) * size <= len; i++)
	{
		appendStringInfoString(buf, i == 0 ? ": " : ", ");
		KeyringDescribe(buf, data + 2 * sizeof(uint32) + i * size, size);
	}
}

/* Identifier of a wrap key (bare, or an entry's), as text for a record's description. */
void
KeyringDescribe(StringInfo buf, const char *data, size_t len)
{
	uint8		id[WRAP_ID_BYTES];

	if (len == WRAP_KEY_BYTES)
		KeyringId((const uint8 *) data, id);
	else
		memcpy(id, data, WRAP_ID_BYTES);
	appendStringInfo(buf, "wrap key %s", KeyringHex(id));
	if (len == ENTRY_BYTES && !KeyringEntryBareP((const uint8 *) data))
		appendStringInfoString(buf, " (sealed)");
}

/*
 * Wrap a new key (FF1_KEY_BYTES) under the cluster's own wrap key into out
 * (WRAPPED_KEY_BYTES), making the wrap key on first need.
 */
void
KeyringWrap(const uint8 *key, uint8 *out)
{
	bool		ok;

	if (keyring.n < 0 || keyring.own < 0)
		KeyringLoad();
	if (keyring.own < 0)
	{
		uint8		wk[WRAP_KEY_BYTES];
		uint8		entry[ENTRY_BYTES];
		KeyringStep st = {.log = true, .entry = entry};

		if (RecoveryInProgress())
			ereport(ERROR,
					(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
					 errmsg("this server has no snowseq wrap key of its own and cannot make one during recovery"),
					 errhint("Make keys on the primary.")));
		if (!pg_strong_random(wk, sizeof(wk)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random wrap key")));
		KeyringEntryBare(wk, entry);
		explicit_bzero(wk, sizeof(wk));
		(void) KeyringEntrySeal(entry);
		/* another backend may have made one first: the first wins */
		KeyringChange(KeyringStepOwn, &st);
		explicit_bzero(entry, sizeof(entry));
	}
	memcpy(out, keyring.entries[keyring.own], WRAP_ID_BYTES);
	KeyringCipher(KeyringKey(keyring.own), key, FF1_KEY_BYTES, out + WRAP_ID_BYTES, true, &ok);
}

/*
 * Unwrap a stored key (WRAPPED_KEY_BYTES) into key (FF1_KEY_BYTES).  An
 * ERROR for a wrap key this cluster does not have, or cannot unseal, or
 * for damage.
 */
void
KeyringUnwrap(int version, const uint8 *wrapped, uint8 *key)
{
	int			i;
	bool		ok;

	if (!KeyringKnows(wrapped))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq key version %d is wrapped with wrap key %s, which this cluster's keyring does not have",
						version, KeyringHex(wrapped)),
				 errdetail("Key rows restored by pg_dump or applied by logical replication stay wrapped with the wrap key of the cluster that made them."),
				 errhint("Copy the file %s of that cluster's data directory to this server and import it: SELECT snowseq_import_wrap_keys('/path/to/copy');",
						 KEYRING_FILE)));
	i = KeyringFind(wrapped);
	KeyringCipher(KeyringKey(i), wrapped + WRAP_ID_BYTES, WRAPPED_KEY_BYTES - WRAP_ID_BYTES,
				  key, false, &ok);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowseq key version %d does not unwrap", version),
				 errdetail("Its wrapped key fails the integrity check of AES key wrap."),
				 errhint("Restore the key table or the file %s from a backup.", KEYRING_FILE)));
}

/*
 * Drop the wrap keys other than the cluster's own whose identifiers are
 * not among the nkeep in keep (those the key rows use); returns how many
 * were dropped.
 */
int
KeyringDropUnused(int nkeep, const uint8 (*keep)[WRAP_ID_BYTES])
{
	KeyringStep st = {.log = true, .nkeep = nkeep, .keep = keep};

	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot drop snowseq wrap keys during recovery"),
				 errhint("Drop them on the primary: its standbys follow through the WAL.")));
	st.drop = (uint8 (*)[WRAP_ID_BYTES]) palloc((size_t) KEYRING_MAX * WRAP_ID_BYTES);
	KeyringChange(KeyringStepDrop, &st);
	return st.ndrop;
}

/*
 * Define snowseq.keyring_command and run it (at preload, in the
 * postmaster: a command that fails, or prints no key, stops the server);
 * register the redo of the keyring's WAL records.
 */
void
KeyringInit(void)
{
	DefineCustomStringVariable("snowseq.keyring_command",
							   "Shell command that prints the key-encryption key (64 hexadecimal digits) under which the wrap keys of the keyring file are sealed; empty: stored as they are.",
							   NULL, &snowseq_keyring_command, "",
							   PGC_POSTMASTER, GUC_SUPERUSER_ONLY, NULL, NULL, NULL);
	RmgrRegisterKind(XLOG_SNOWSEQ_WRAP_KEY, "WRAP_KEY", KeyringRedo, KeyringDescribe);
	RmgrRegisterKind(XLOG_SNOWSEQ_WRAP_KEYS, "WRAP_KEYS", KeyringRedoImport, KeyringDescribeImport);
	RmgrRegisterKind(XLOG_SNOWSEQ_KEY_VERSION, "KEY_VERSION", KeyringRedoVersionRecord, KeyringDescribeVersion);
	RmgrRegisterKind(XLOG_SNOWSEQ_WRAP_KEYS_DROP, "WRAP_KEYS_DROP", KeyringRedoDrop, KeyringDescribeDrop);
	KeyringRunCommand();
}

/*
 * At start, in the postmaster: with snowseq.keyring_command, the keyring's
 * own wrap key must unseal (a command printing another key stops the
 * server), and every wrap key stored as it is, or sealed under the
 * previous key-encryption key, is sealed under the current one.
 */
void
KeyringStartup(void)
{
	bool		changed = false;
	uint8		wk[WRAP_KEY_BYTES];

	if (IsUnderPostmaster || kek_count <= 0)
		return;
	KeyringLoad();
	if (keyring.own >= 0)
	{
		if (KeyringEntryKek(keyring.entries[keyring.own]) < 0 &&
			!KeyringEntryBareP(keyring.entries[keyring.own]))
			ereport(ERROR,
					(errcode(ERRCODE_CONFIG_FILE_ERROR),
					 errmsg("snowseq.keyring_command prints a key-encryption key that does not unseal this cluster's keyring"),
					 errhint("Set snowseq.keyring_command to print the key-encryption key the keyring was sealed under; to change it, print the new key, then the old one on a second line, and restart.")));
		KeyringEntryKey(keyring.entries[keyring.own], wk);
		explicit_bzero(wk, sizeof(wk));
	}
	for (int i = 0; i < keyring.n; i++)
		changed |= KeyringEntrySeal(keyring.entries[i]);
	if (changed)
		KeyringSave();
	keyring.n = -1;
}

PG_FUNCTION_INFO_V1(snowseq_import_wrap_keys);

/*
 * snowseq_import_wrap_keys(path text) -> integer: add the wrap keys of a
 * copy of another cluster's keyring file, and its version mark; returns
 * how many wrap keys were new.  All of them or none; refused when the mark
 * leaves no key version to make here, or the keys leave no room for this
 * cluster's own.  Reads a file of the server: the caller needs the
 * privileges of pg_read_server_files too.
 */
Datum
snowseq_import_wrap_keys(PG_FUNCTION_ARGS)
{
	char	   *path;
	char	   *data;
	size_t		len = 0;
	const char *why = NULL;
	Keyring		in = {0};
	KeyringStep st = {.log = true, .import = &in};
	uint32		max_version = ((uint32) 1 << snowseq_public_version_bits) - 1;

	ShmemCheckPreloaded();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("path must not be NULL"),
				 errhint("Pass the path, on this server, of a copy of another cluster's %s file.",
						 KEYRING_FILE)));
	if (!has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to import snowseq wrap keys from a file"),
				 errdetail("Only roles with privileges of the \"%s\" role may read files of the server.",
						   "pg_read_server_files"),
				 errhint("Ask an administrator to grant pg_read_server_files to the role that imports keyrings.")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot import snowseq wrap keys during recovery"),
				 errhint("Import them on the primary: its standbys receive them through the WAL.")));
	path = text_to_cstring(PG_GETARG_TEXT_PP(0));
	data = KeyringSlurp(path, &len);
	if (data == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FILE),
				 errmsg("file \"%s\" does not exist", path),
				 errhint("Pass the path, on this server, of a copy of another cluster's %s file.",
						 KEYRING_FILE)));
	in.entries = (uint8 (*)[ENTRY_BYTES]) palloc0((size_t) KEYRING_MAX * ENTRY_BYTES);
	if (!KeyringParse(data, len, &in, &why))
	{
		explicit_bzero(data, len);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("file \"%s\" is not a snowseq keyring: %s", path, why),
				 errhint("Copy the file %s of the data directory of the cluster that made the keys.",
						 KEYRING_FILE)));
	}
	explicit_bzero(data, len);
	if (in.version >= max_version)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("keyring file \"%s\" says key versions up to %u were made, which leaves no key version of the %u of snowseq.public_version_bits = %d to make",
						path, in.version, max_version, snowseq_public_version_bits),
				 errdetail("Nothing was imported."),
				 errhint("Import only a copy of the keyring file of a cluster whose key rows this one holds.")));
	KeyringChange(KeyringStepImport, &st);
	explicit_bzero(in.entries, (size_t) KEYRING_MAX * ENTRY_BYTES);
	PG_RETURN_INT32(st.added);
}
