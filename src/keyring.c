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
 * The file's first wrap key wraps new keys; others were imported from
 * clusters whose key rows arrived by pg_dump or logical replication.  A
 * wrap key is made on first need on a primary, written to the WAL (a
 * record of snowseq's resource manager, which logical decoding does not
 * decode) and flushed before any key is wrapped under it, so standbys,
 * crash recovery and point-in-time recovery rebuild the file, and
 * pg_basebackup copies it.  Wrap keys are only ever added, so each
 * backend keeps the file's contents and reads it again only for an
 * identifier it does not know.
 *
 * The file also holds the highest key version made in this cluster, raised
 * (and WAL-logged) by every snowseq_new_key before it returns the version:
 * a version is never made twice in a cluster, whatever happened to the
 * key table since (a rolled-back transaction, DROP EXTENSION, DROP
 * DATABASE), so a public ID that left the server never meets another key
 * of its version here.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"

#include "ff1.h"
#include "keyring.h"
#include "rmgr.h"
#include "shmem.h"

#define KEYRING_FILE		"snowseq_keyring"
#define KEYRING_TMP			"snowseq_keyring.tmp"
#define KEYRING_MAGIC		"SNSQKR01"
#define KEYRING_MAGIC_BYTES	8
#define KEYRING_HEADER_BYTES	16	/* magic, highest key version made, 4 reserved */
#define KEYRING_MAX			64

/* this backend's copy of the file; keyring_n < 0 until read */
static uint8 keyring[KEYRING_MAX][WRAP_KEY_BYTES];
static uint8 keyring_ids[KEYRING_MAX][WRAP_ID_BYTES];
static int	keyring_n = -1;
static uint32 keyring_version = 0;	/* highest key version made in this cluster */

/* The identifier of a wrap key: AES-256 of a fixed block, first 8 bytes. */
static void
KeyringId(const uint8 *wk, uint8 *id)
{
	static const uint8 block[16] = "snowseq wrap id";
	uint8		out[32];
	int			outl = 0;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

	if (ctx == NULL ||
		EVP_EncryptInit_ex(ctx, EVP_aes_256_ecb(), NULL, wk, NULL) != 1 ||
		EVP_CIPHER_CTX_set_padding(ctx, 0) != 1 ||
		EVP_EncryptUpdate(ctx, out, &outl, block, sizeof(block)) != 1)
	{
		EVP_CIPHER_CTX_free(ctx);
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute the identifier of a snowseq wrap key")));
	}
	EVP_CIPHER_CTX_free(ctx);
	memcpy(id, out, WRAP_ID_BYTES);
	explicit_bzero(out, sizeof(out));
}

/*
 * Parse a keyring file's bytes into keys[]; returns their number, or -1
 * (with *why set) when the bytes are not a keyring.
 */
static int
KeyringParse(const char *data, size_t len, uint8 (*keys)[WRAP_KEY_BYTES], uint32 *version,
			 const char **why)
{
	int			n;

	if (len < KEYRING_HEADER_BYTES || memcmp(data, KEYRING_MAGIC, KEYRING_MAGIC_BYTES) != 0)
	{
		*why = "it does not start as a snowseq keyring";
		return -1;
	}
	if ((len - KEYRING_HEADER_BYTES) % WRAP_KEY_BYTES != 0)
	{
		*why = "its length is not a whole number of wrap keys";
		return -1;
	}
	n = (int) ((len - KEYRING_HEADER_BYTES) / WRAP_KEY_BYTES);
	if (n > KEYRING_MAX)
	{
		*why = "it holds too many wrap keys";
		return -1;
	}
	memcpy(version, data + KEYRING_MAGIC_BYTES, sizeof(uint32));
	memcpy(keys, data + KEYRING_HEADER_BYTES, (size_t) n * WRAP_KEY_BYTES);
	return n;
}

/* Read a whole file; NULL when it does not exist. */
static char *
KeyringSlurp(const char *path, size_t *len)
{
	int			fd;
	struct stat st;
	char	   *data;
	ssize_t		got;

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return NULL;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	if (fstat(fd, &st) < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (st.st_size > KEYRING_HEADER_BYTES + KEYRING_MAX * WRAP_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" is too large for a snowseq keyring", path),
				 errhint("A keyring holds at most %d wrap keys.", KEYRING_MAX)));
	data = palloc(st.st_size + 1);
	got = read(fd, data, st.st_size);
	if (got != st.st_size)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	CloseTransientFile(fd);
	*len = (size_t) got;
	return data;
}

/* Read the data directory's keyring into this backend. */
static void
KeyringLoad(void)
{
	size_t		len = 0;
	char	   *data = KeyringSlurp(KEYRING_FILE, &len);
	const char *why = NULL;
	int			n = 0;
	uint32		version = 0;

	if (data != NULL)
	{
		n = KeyringParse(data, len, keyring, &version, &why);
		explicit_bzero(data, len);
		pfree(data);
		if (n < 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("file \"%s\" of the data directory is not a valid snowseq keyring: %s",
							KEYRING_FILE, why),
					 errhint("Restore it from a backup of this cluster or from its primary.")));
	}
	for (int i = 0; i < n; i++)
		KeyringId(keyring[i], keyring_ids[i]);
	keyring_n = n;
	keyring_version = version;
}

/* Write this backend's copy as the data directory's keyring, durably. */
static void
KeyringSave(void)
{
	int			fd;
	size_t		len = KEYRING_HEADER_BYTES + (size_t) keyring_n * WRAP_KEY_BYTES;
	char	   *data = palloc0(len);

	memcpy(data, KEYRING_MAGIC, KEYRING_MAGIC_BYTES);
	memcpy(data + KEYRING_MAGIC_BYTES, &keyring_version, sizeof(uint32));
	memcpy(data + KEYRING_HEADER_BYTES, keyring, (size_t) keyring_n * WRAP_KEY_BYTES);
	fd = OpenTransientFilePerm(KEYRING_TMP, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY,
							   S_IRUSR | S_IWUSR);
	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", KEYRING_TMP)));
	if (write(fd, data, len) != (ssize_t) len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", KEYRING_TMP)));
	explicit_bzero(data, len);
	pfree(data);
	if (pg_fsync(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", KEYRING_TMP)));
	CloseTransientFile(fd);
	durable_rename(KEYRING_TMP, KEYRING_FILE, ERROR);
}

/*
 * Log a new wrap key and flush it before any key
 * is wrapped under it.  Logical decoding does not decode snowseq's
 * records; physical replication and recovery rebuild the keyring file.
 */
static void
KeyringLogWrapKey(const uint8 *wk)
{
	XLogRecPtr	lsn;

	XLogBeginInsert();
	XLogRegisterData((char *) wk, WRAP_KEY_BYTES);
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

/*
 * Add a wrap key to the data directory's keyring unless it is there;
 * log says whether to write it to the WAL first (not in redo).  Returns
 * true when it was added.
 */
static bool
KeyringAdd(const uint8 *wk, bool log)
{
	uint8		id[WRAP_ID_BYTES];
	volatile bool added = false;

	KeyringId(wk, id);
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	PG_TRY();
	{
		bool		found = false;

		KeyringLoad();
		for (int i = 0; i < keyring_n && !found; i++)
			found = memcmp(keyring_ids[i], id, WRAP_ID_BYTES) == 0;
		if (!found)
		{
			if (keyring_n >= KEYRING_MAX)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("the snowseq keyring holds %d wrap keys already", KEYRING_MAX),
						 errhint("Import only the wrap keys of clusters whose key rows this one holds.")));
			if (log)
				KeyringLogWrapKey(wk);
			memcpy(keyring[keyring_n], wk, WRAP_KEY_BYTES);
			memcpy(keyring_ids[keyring_n], id, WRAP_ID_BYTES);
			keyring_n++;
			KeyringSave();
			added = true;
		}
	}
	PG_CATCH();
	{
		keyring_n = -1;
		LWLockRelease(Snowseq->lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LWLockRelease(Snowseq->lock);
	return added;
}

/*
 * Raise the highest key version made to version (log: WAL-logged and
 * flushed first, not in redo); returns the version it was before.
 */
static uint32
KeyringRaiseVersion(uint32 version, bool log)
{
	volatile uint32 before = 0;

	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	PG_TRY();
	{
		KeyringLoad();
		before = keyring_version;
		if (version > keyring_version)
		{
			if (log)
				KeyringLogVersion(version);
			keyring_version = version;
			KeyringSave();
		}
	}
	PG_CATCH();
	{
		keyring_n = -1;
		LWLockRelease(Snowseq->lock);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LWLockRelease(Snowseq->lock);
	return before;
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
		made = keyring_version;
		LWLockRelease(Snowseq->lock);
		next = Max(table_next, (int32) Min(made, (uint32) PG_INT32_MAX - 1) + 1);
		if (next > max_version)
			return next;
		/* another database's key may have taken it meanwhile: try again */
		if (KeyringRaiseVersion((uint32) next, true) < (uint32) next)
			return next;
	}
}

/* Redo of a key version record: the highest version made is raised. */
void
KeyringRedoVersion(uint32 version)
{
	KeyringRaiseVersion(version, false);
}

/* Redo of a wrap key record: the key is in the keyring afterwards. */
void
KeyringRedo(const uint8 *wk)
{
	KeyringAdd(wk, false);
}

/* Identifier of a wrap key, as text for a record's description. */
void
KeyringDescribe(StringInfo buf, const uint8 *wk)
{
	uint8		id[WRAP_ID_BYTES];

	KeyringId(wk, id);
	appendStringInfoString(buf, "wrap key ");
	for (int i = 0; i < WRAP_ID_BYTES; i++)
		appendStringInfo(buf, "%02x", id[i]);
}

/* Run AES-256 key wrap or unwrap; false when unwrapping finds damage. */
static bool
KeyringCipher(const uint8 *wk, const uint8 *in, int inlen, uint8 *out, bool wrap)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int			outl = 0;
	int			finl = 0;
	bool		ok;

	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	EVP_CIPHER_CTX_set_flags(ctx, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
	ok = EVP_CipherInit_ex(ctx, EVP_aes_256_wrap(), NULL, wk, NULL, wrap ? 1 : 0) == 1 &&
		EVP_CipherUpdate(ctx, out, &outl, in, inlen) == 1 &&
		EVP_CipherFinal_ex(ctx, out + outl, &finl) == 1 &&
		outl + finl == (wrap ? inlen + 8 : inlen - 8);
	EVP_CIPHER_CTX_free(ctx);
	if (!ok && wrap)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not wrap a snowseq key")));
	return ok;
}

/*
 * Wrap a new key (FF1_KEY_BYTES) under the cluster's first wrap key into
 * out (WRAPPED_KEY_BYTES), making the wrap key on first need.
 */
void
KeyringWrap(const uint8 *key, uint8 *out)
{
	if (keyring_n <= 0)
		KeyringLoad();
	if (keyring_n == 0)
	{
		uint8		wk[WRAP_KEY_BYTES];

		if (RecoveryInProgress())
			ereport(ERROR,
					(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
					 errmsg("this server has no snowseq keyring and cannot make one during recovery"),
					 errhint("Make keys on the primary.")));
		if (!pg_strong_random(wk, sizeof(wk)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random wrap key")));
		/* another backend may have made one first: the file's first wins */
		KeyringAdd(wk, true);
		explicit_bzero(wk, sizeof(wk));
		KeyringLoad();
	}
	memcpy(out, keyring_ids[0], WRAP_ID_BYTES);
	KeyringCipher(keyring[0], key, FF1_KEY_BYTES, out + WRAP_ID_BYTES, true);
}

/*
 * Unwrap a stored key (WRAPPED_KEY_BYTES) into key (FF1_KEY_BYTES).  An
 * ERROR for a wrap key this cluster does not have, or for damage.
 */
void
KeyringUnwrap(int version, const uint8 *wrapped, uint8 *key)
{
	int			i = -1;

	for (int pass = 0; pass < 2 && i < 0; pass++)
	{
		/* a wrap key made or imported since: read the file again */
		if (pass == 1 || keyring_n < 0)
			KeyringLoad();
		for (int j = 0; j < keyring_n && i < 0; j++)
			if (memcmp(keyring_ids[j], wrapped, WRAP_ID_BYTES) == 0)
				i = j;
	}
	if (i < 0)
	{
		StringInfoData id;

		initStringInfo(&id);
		for (int j = 0; j < WRAP_ID_BYTES; j++)
			appendStringInfo(&id, "%02x", wrapped[j]);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq key version %d is wrapped with wrap key %s, which this cluster's keyring does not have",
						version, id.data),
				 errdetail("Key rows restored by pg_dump or applied by logical replication stay wrapped with the wrap key of the cluster that made them."),
				 errhint("Copy the file %s of that cluster's data directory to this server and import it: SELECT snowseq_import_wrap_keys('/path/to/copy');",
						 KEYRING_FILE)));
	}
	if (!KeyringCipher(keyring[i], wrapped + WRAP_ID_BYTES, WRAPPED_KEY_BYTES - WRAP_ID_BYTES,
					   key, false))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowseq key version %d does not unwrap", version),
				 errdetail("Its wrapped key fails the integrity check of AES key wrap."),
				 errhint("Restore the key table or the file %s from a backup.", KEYRING_FILE)));
}

PG_FUNCTION_INFO_V1(snowseq_import_wrap_keys);

/*
 * snowseq_import_wrap_keys(path text) -> integer: add the wrap keys of a
 * copy of another cluster's keyring file; returns how many were new.
 */
Datum
snowseq_import_wrap_keys(PG_FUNCTION_ARGS)
{
	char	   *path;
	char	   *data;
	size_t		len = 0;
	const char *why = NULL;
	uint8		keys[KEYRING_MAX][WRAP_KEY_BYTES];
	uint32		version;
	int			n;
	int			added = 0;

	ShmemCheckPreloaded();
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("path must not be NULL"),
				 errhint("Pass the path, on this server, of a copy of another cluster's %s file.",
						 KEYRING_FILE)));
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
	/* the other cluster's versions are in the key rows it sent */
	n = KeyringParse(data, len, keys, &version, &why);
	explicit_bzero(data, len);
	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("file \"%s\" is not a snowseq keyring: %s", path, why),
				 errhint("Copy the file %s of the data directory of the cluster that made the keys.",
						 KEYRING_FILE)));
	for (int i = 0; i < n; i++)
		added += KeyringAdd(keys[i], true) ? 1 : 0;
	explicit_bzero(keys, sizeof(keys));
	PG_RETURN_INT32(added);
}
