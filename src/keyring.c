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
 * rebuild the file, and pg_basebackup copies it.  Wrap keys are only ever
 * added, so each backend keeps the file's contents and reads it again only
 * for an identifier it does not know.
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
 * pg_read_server_files, as reading any server file does.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "access/xlog.h"
#include "access/xloginsert.h"
#include "catalog/pg_authid.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/lwlock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "ff1.h"
#include "keyring.h"
#include "rmgr.h"
#include "shmem.h"
#include "statefile.h"

#define KEYRING_FILE		"snowseq_keyring"
#define KEYRING_TMP			"snowseq_keyring.tmp"
#define KEYRING_MAGIC_1_2	"SNSQKR01"	/* 1.2: no own wrap key recorded */
#define KEYRING_MAGIC		"SNSQKR02"	/* 1.3: the own wrap key's place */
#define KEYRING_MAGIC_BYTES	8
#define KEYRING_HEADER_BYTES	16	/* magic, highest key version made, own wrap key */
#define KEYRING_MAX			1024

/* A keyring's contents: wrap keys, their identifiers, the own one, the version mark. */
typedef struct Keyring
{
	int			n;
	int			own;			/* index of the own wrap key, or -1 */
	uint32		version;		/* highest key version made in the cluster */
	uint8		(*keys)[WRAP_KEY_BYTES];
	uint8		(*ids)[WRAP_ID_BYTES];
} Keyring;

/* this backend's copy of the file (keys in TopMemoryContext); n < 0 until read */
static Keyring keyring = {.n = -1, .own = -1};

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

/* Room for n wrap keys in k (its arrays in TopMemoryContext, kept if big enough). */
static void
KeyringReserve(Keyring *k, int n)
{
	if (k->keys == NULL)
	{
		k->keys = MemoryContextAllocZero(TopMemoryContext, (Size) KEYRING_MAX * WRAP_KEY_BYTES);
		k->ids = MemoryContextAllocZero(TopMemoryContext, (Size) KEYRING_MAX * WRAP_ID_BYTES);
	}
	Assert(n <= KEYRING_MAX);
}

/*
 * Parse a keyring file's bytes into k (keys, version mark, own wrap key of
 * a 1.3 file); false (with *why set) when the bytes are not a keyring.
 */
static bool
KeyringParse(const char *data, size_t len, Keyring *k, const char **why)
{
	bool		v1_2 = len >= KEYRING_MAGIC_BYTES && memcmp(data, KEYRING_MAGIC_1_2, KEYRING_MAGIC_BYTES) == 0;
	int			n;
	uint32		own;

	if (len < KEYRING_HEADER_BYTES ||
		(!v1_2 && memcmp(data, KEYRING_MAGIC, KEYRING_MAGIC_BYTES) != 0))
	{
		*why = "it does not start as a snowseq keyring";
		return false;
	}
	if ((len - KEYRING_HEADER_BYTES) % WRAP_KEY_BYTES != 0)
	{
		*why = "its length is not a whole number of wrap keys";
		return false;
	}
	n = (int) ((len - KEYRING_HEADER_BYTES) / WRAP_KEY_BYTES);
	if (n > KEYRING_MAX)
	{
		*why = psprintf("it holds %d wrap keys, more than the %d a keyring may hold", n, KEYRING_MAX);
		return false;
	}
	memcpy(&own, data + KEYRING_MAGIC_BYTES + sizeof(uint32), sizeof(uint32));
	if (v1_2)
		own = 0;
	if (own > (uint32) n)
	{
		*why = "its own wrap key is not among its wrap keys";
		return false;
	}
	KeyringReserve(k, n);
	memcpy(&k->version, data + KEYRING_MAGIC_BYTES, sizeof(uint32));
	memcpy(k->keys, data + KEYRING_HEADER_BYTES, (size_t) n * WRAP_KEY_BYTES);
	for (int i = 0; i < n; i++)
		KeyringId(k->keys[i], k->ids[i]);
	k->n = n;
	k->own = (int) own - 1;
	return true;
}

/*
 * Read a whole file as a keyring may be; NULL when it does not exist.  It
 * is opened without blocking and must be a regular file (a FIFO, a device
 * or a directory is refused before any read could wait), at most the size
 * of a full keyring.
 */
static char *
KeyringSlurp(const char *path, size_t *len)
{
	int			fd;
	struct stat st;
	char	   *data;
	size_t		got = 0;

	fd = OpenTransientFile(path, O_RDONLY | O_NONBLOCK | PG_BINARY);
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
	if (!S_ISREG(st.st_mode))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a regular file", path),
				 errhint("Copy the file %s of the other cluster's data directory to a plain file on this server.",
						 KEYRING_FILE)));
	if (st.st_size > KEYRING_HEADER_BYTES + KEYRING_MAX * WRAP_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" is too large for a snowseq keyring", path),
				 errhint("A keyring holds at most %d wrap keys.", KEYRING_MAX)));
	data = palloc(st.st_size + 1);
	while (got < (size_t) st.st_size)
	{
		ssize_t		r = read(fd, data + got, st.st_size - got);

		if (r < 0 && (errno == EINTR || errno == EAGAIN))
		{
			CHECK_FOR_INTERRUPTS();
			continue;
		}
		if (r <= 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read file \"%s\": %m", path)));
		got += r;
	}
	CloseTransientFile(fd);
	*len = got;
	return data;
}

/* Read the data directory's keyring into this backend. */
static void
KeyringLoad(void)
{
	size_t		len = 0;
	char	   *data = KeyringSlurp(KEYRING_FILE, &len);
	const char *why = NULL;

	KeyringReserve(&keyring, 0);
	keyring.n = 0;
	keyring.own = -1;
	keyring.version = 0;
	if (data == NULL)
		return;
	if (!KeyringParse(data, len, &keyring, &why))
	{
		keyring.n = -1;
		explicit_bzero(data, len);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("file \"%s\" of the data directory is not a valid snowseq keyring: %s",
						KEYRING_FILE, why),
				 errhint("Restore it from a backup of this cluster or from its primary.")));
	}
	explicit_bzero(data, len);
	pfree(data);
}

/* Write this backend's copy as the data directory's keyring, durably (mode 0600). */
static void
KeyringSave(void)
{
	size_t		len = KEYRING_HEADER_BYTES + (size_t) keyring.n * WRAP_KEY_BYTES;
	char	   *data = palloc0(len);
	uint32		own = (uint32) (keyring.own + 1);

	memcpy(data, KEYRING_MAGIC, KEYRING_MAGIC_BYTES);
	memcpy(data + KEYRING_MAGIC_BYTES, &keyring.version, sizeof(uint32));
	memcpy(data + KEYRING_MAGIC_BYTES + sizeof(uint32), &own, sizeof(uint32));
	memcpy(data + KEYRING_HEADER_BYTES, keyring.keys, (size_t) keyring.n * WRAP_KEY_BYTES);
	PG_TRY();
	{
		StateWriteDurably(data, len, KEYRING_FILE, KEYRING_TMP, S_IRUSR | S_IWUSR);
	}
	PG_FINALLY();
	{
		explicit_bzero(data, len);
	}
	PG_END_TRY();
	pfree(data);
}

/* The place of wrap key id in this backend's copy, or -1. */
static int
KeyringFind(const uint8 *id)
{
	for (int i = 0; i < keyring.n; i++)
		if (memcmp(keyring.ids[i], id, WRAP_ID_BYTES) == 0)
			return i;
	return -1;
}

/* Append a wrap key to this backend's copy (the caller saves); returns its place. */
static int
KeyringAppend(const uint8 *wk)
{
	int			i = keyring.n;

	memcpy(keyring.keys[i], wk, WRAP_KEY_BYTES);
	KeyringId(wk, keyring.ids[i]);
	keyring.n++;
	return i;
}

/*
 * Log the cluster's own new wrap key and flush it before any key is
 * wrapped under it.  Logical decoding does not decode snowseq's records;
 * physical replication and recovery rebuild the keyring file.
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

/* Log an import, whole: the imported wrap keys and version mark, flushed. */
static void
KeyringLogImport(uint32 version, int n, uint8 (*keys)[WRAP_KEY_BYTES])
{
	XLogRecPtr	lsn;
	uint32		count = (uint32) n;

	XLogBeginInsert();
	XLogRegisterData((char *) &version, sizeof(version));
	XLogRegisterData((char *) &count, sizeof(count));
	XLogRegisterData((char *) keys, (size_t) n * WRAP_KEY_BYTES);
	lsn = XLogInsert(RM_SNOWSEQ_ID, XLOG_SNOWSEQ_WRAP_KEYS);
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
	const uint8 *wk;			/* an own wrap key */
	Keyring    *import;			/* wrap keys to import */
	int			added;
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
	uint8		id[WRAP_ID_BYTES];
	int			i;

	if (keyring.own >= 0)
		return;
	KeyringId(st->wk, id);
	i = KeyringFind(id);
	if (i < 0)
	{
		if (keyring.n >= KEYRING_MAX)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the snowseq keyring holds %d wrap keys already, no room for this cluster's own", KEYRING_MAX)));
		if (st->log)
			KeyringLogWrapKey(st->wk);
		i = KeyringAppend(st->wk);
	}
	keyring.own = i;
	KeyringSave();
}

/*
 * Import wrap keys and a version mark, all or nothing: the keys not there
 * yet are counted first, then logged in one record, added and saved once
 * (KeyringChange step).
 */
static void
KeyringStepImport(void *arg)
{
	KeyringStep *st = arg;
	Keyring    *in = st->import;
	uint8		(*fresh)[WRAP_KEY_BYTES] = palloc(sizeof(*fresh) * Max(in->n, 1));
	int			n = 0;

	for (int i = 0; i < in->n; i++)
	{
		bool		dup = KeyringFind(in->ids[i]) >= 0;

		for (int j = 0; j < i && !dup; j++)
			dup = memcmp(in->ids[j], in->ids[i], WRAP_ID_BYTES) == 0;
		if (!dup)
			memcpy(fresh[n++], in->keys[i], WRAP_KEY_BYTES);
	}
	if (keyring.n + n > KEYRING_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("importing %d new wrap keys would give the snowseq keyring %d, more than the %d it may hold",
						n, keyring.n + n, KEYRING_MAX),
				 errdetail("Nothing was imported."),
				 errhint("Import only the keyrings of clusters whose key rows this one holds.")));
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

/* Redo of an own wrap key record: the cluster's own wrap key afterwards. */
void
KeyringRedo(const uint8 *wk)
{
	KeyringStep st = {.log = false, .wk = wk};

	KeyringChange(KeyringStepOwn, &st);
}

/* Redo of an import record (version mark, count, keys): imported afterwards. */
void
KeyringRedoImport(const char *data, size_t len)
{
	Keyring		in = {0};
	KeyringStep st = {.log = false, .import = &in};
	uint32		count;

	memcpy(&in.version, data, sizeof(uint32));
	memcpy(&count, data + sizeof(uint32), sizeof(uint32));
	if (len != 2 * sizeof(uint32) + (size_t) count * WRAP_KEY_BYTES || count > KEYRING_MAX)
		elog(PANIC, "snowseq: wrap key import record of %zu bytes for %u keys", len, count);
	in.n = (int) count;
	in.keys = (uint8 (*)[WRAP_KEY_BYTES]) palloc((size_t) Max(count, 1) * WRAP_KEY_BYTES);
	in.ids = (uint8 (*)[WRAP_ID_BYTES]) palloc((size_t) Max(count, 1) * WRAP_ID_BYTES);
	memcpy(in.keys, data + 2 * sizeof(uint32), (size_t) count * WRAP_KEY_BYTES);
	for (int i = 0; i < in.n; i++)
		KeyringId(in.keys[i], in.ids[i]);
	KeyringChange(KeyringStepImport, &st);
	explicit_bzero(in.keys, (size_t) Max(count, 1) * WRAP_KEY_BYTES);
}

/* An import record, described: the version mark and the identifiers, never a key. */
void
KeyringDescribeImport(StringInfo buf, const char *data, size_t len)
{
	uint32		version;
	uint32		count;

	memcpy(&version, data, sizeof(uint32));
	memcpy(&count, data + sizeof(uint32), sizeof(uint32));
	appendStringInfo(buf, "import of %u wrap keys, key versions made up to %u", count, version);
	for (uint32 i = 0; i < count && 2 * sizeof(uint32) + (i + 1) * WRAP_KEY_BYTES <= len; i++)
	{
		appendStringInfoString(buf, i == 0 ? ": " : ", ");
		KeyringDescribe(buf, (const uint8 *) data + 2 * sizeof(uint32) + i * WRAP_KEY_BYTES);
	}
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
 * Wrap a new key (FF1_KEY_BYTES) under the cluster's own wrap key into out
 * (WRAPPED_KEY_BYTES), making the wrap key on first need.
 */
void
KeyringWrap(const uint8 *key, uint8 *out)
{
	if (keyring.n < 0 || keyring.own < 0)
		KeyringLoad();
	if (keyring.own < 0)
	{
		uint8		wk[WRAP_KEY_BYTES];
		KeyringStep st = {.log = true, .wk = wk};

		if (RecoveryInProgress())
			ereport(ERROR,
					(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
					 errmsg("this server has no snowseq wrap key of its own and cannot make one during recovery"),
					 errhint("Make keys on the primary.")));
		if (!pg_strong_random(wk, sizeof(wk)))
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("could not generate a random wrap key")));
		/* another backend may have made one first: the first wins */
		KeyringChange(KeyringStepOwn, &st);
		explicit_bzero(wk, sizeof(wk));
	}
	memcpy(out, keyring.ids[keyring.own], WRAP_ID_BYTES);
	KeyringCipher(keyring.keys[keyring.own], key, FF1_KEY_BYTES, out + WRAP_ID_BYTES, true);
}

/*
 * Unwrap a stored key (WRAPPED_KEY_BYTES) into key (FF1_KEY_BYTES).  An
 * ERROR for a wrap key this cluster does not have, or for damage.
 */
void
KeyringUnwrap(int version, const uint8 *wrapped, uint8 *key)
{
	int			i;

	if (!KeyringKnows(wrapped))
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
	i = KeyringFind(wrapped);
	if (!KeyringCipher(keyring.keys[i], wrapped + WRAP_ID_BYTES, WRAPPED_KEY_BYTES - WRAP_ID_BYTES,
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
 * copy of another cluster's keyring file, and its version mark; returns
 * how many wrap keys were new.  All of them or none.  Reads a file of the
 * server: the caller needs the privileges of pg_read_server_files too.
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
	in.keys = (uint8 (*)[WRAP_KEY_BYTES]) palloc0((size_t) KEYRING_MAX * WRAP_KEY_BYTES);
	in.ids = (uint8 (*)[WRAP_ID_BYTES]) palloc0((size_t) KEYRING_MAX * WRAP_ID_BYTES);
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
	KeyringChange(KeyringStepImport, &st);
	explicit_bzero(in.keys, (size_t) KEYRING_MAX * WRAP_KEY_BYTES);
	PG_RETURN_INT32(st.added);
}
