/*
 * keyring_file.c
 *		Wrap keys: the keyring file of the data directory, and this
 *		backend's copy of it.
 *
 * The file snowseq_keyring (mode 0600) holds a header (magic, the highest
 * key version made, the place of the cluster's own wrap key) and the
 * entries; files of 1.2 and of 1.3 before sealing hold bare wrap keys.
 * Each backend reads it into its copy (in TopMemoryContext) and reads it
 * again only when it meets an identifier it does not know; changes are
 * made under the cluster's lock on a fresh copy and written durably
 * (keyring.c).  A copy of another cluster's file is read the same way for
 * an import: a regular file only, opened without blocking.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "keyring.h"
#include "keyring_file.h"
#include "keyring_seal.h"
#include "statefile.h"

#define KEYRING_TMP			"snowseq_keyring.tmp"
#define KEYRING_MAGIC_1_2	"SNSQKR01"	/* 1.2: no own wrap key recorded */
#define KEYRING_MAGIC_32	"SNSQKR02"	/* 1.3 before sealing: bare wrap keys */
#define KEYRING_MAGIC		"SNSQKR03"	/* entries, sealed or not */
#define KEYRING_MAGIC_BYTES	8
#define KEYRING_HEADER_BYTES	16	/* magic, highest key version made, own wrap key */

/* this backend's copy of the file (in TopMemoryContext); n < 0 until read */
Keyring		keyring = {.n = -1, .own = -1};

/* Room for KEYRING_MAX entries in k (in TopMemoryContext, kept once made). */
static void
KeyringReserve(Keyring *k)
{
	if (k->entries == NULL)
	{
		k->entries = MemoryContextAllocZero(TopMemoryContext, (Size) KEYRING_MAX * ENTRY_BYTES);
		k->keys = MemoryContextAllocZero(TopMemoryContext, (Size) KEYRING_MAX * WRAP_KEY_BYTES);
		k->have = MemoryContextAllocZero(TopMemoryContext, (Size) KEYRING_MAX * sizeof(bool));
	}
}

/*
 * Parse a keyring file's bytes into k (entries, version mark, own wrap key
 * of a 1.3 file); false (with *why set) when the bytes are not a keyring.
 * Files of 1.2 and of 1.3 before sealing hold bare wrap keys of 32 bytes.
 */
bool
KeyringParse(const char *data, size_t len, Keyring *k, const char **why)
{
	bool		v1_2 = len >= KEYRING_MAGIC_BYTES && memcmp(data, KEYRING_MAGIC_1_2, KEYRING_MAGIC_BYTES) == 0;
	bool		bare = v1_2 || (len >= KEYRING_MAGIC_BYTES && memcmp(data, KEYRING_MAGIC_32, KEYRING_MAGIC_BYTES) == 0);
	size_t		size = bare ? WRAP_KEY_BYTES : ENTRY_BYTES;
	int			n;
	uint32		own;

	if (len < KEYRING_HEADER_BYTES ||
		(!bare && memcmp(data, KEYRING_MAGIC, KEYRING_MAGIC_BYTES) != 0))
	{
		*why = "it does not start as a snowseq keyring";
		return false;
	}
	if ((len - KEYRING_HEADER_BYTES) % size != 0)
	{
		*why = "its length is not a whole number of wrap keys";
		return false;
	}
	n = (int) ((len - KEYRING_HEADER_BYTES) / size);
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
	memcpy(&k->version, data + KEYRING_MAGIC_BYTES, sizeof(uint32));
	for (int i = 0; i < n; i++)
	{
		const char *at = data + KEYRING_HEADER_BYTES + (size_t) i * size;

		if (bare)
			KeyringEntryBare((const uint8 *) at, k->entries[i]);
		else
		{
			uint8		id[WRAP_ID_BYTES];

			memcpy(k->entries[i], at, ENTRY_BYTES);
			if (KeyringEntryBareP(k->entries[i]))
			{
				KeyringId(ENTRY_BODY(k->entries[i]), id);
				if (memcmp(id, k->entries[i], WRAP_ID_BYTES) != 0)
				{
					*why = "a wrap key does not match its identifier";
					return false;
				}
			}
		}
		if (k->have)
			k->have[i] = false;
	}
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
char *
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
	if (st.st_size > KEYRING_HEADER_BYTES + KEYRING_MAX * ENTRY_BYTES)
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
void
KeyringLoad(void)
{
	size_t		len = 0;
	char	   *data = KeyringSlurp(KEYRING_FILE, &len);
	const char *why = NULL;

	KeyringReserve(&keyring);
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

/*
 * Write this backend's copy as the data directory's keyring, durably (mode
 * 0600); with snowseq.keyring_command, every entry this server can seal is
 * sealed under its current key-encryption key first.
 */
void
KeyringSave(void)
{
	size_t		len = KEYRING_HEADER_BYTES + (size_t) keyring.n * ENTRY_BYTES;
	char	   *data = palloc0(len);
	uint32		own = (uint32) (keyring.own + 1);

	for (int i = 0; i < keyring.n; i++)
		(void) KeyringEntrySeal(keyring.entries[i]);
	memcpy(data, KEYRING_MAGIC, KEYRING_MAGIC_BYTES);
	memcpy(data + KEYRING_MAGIC_BYTES, &keyring.version, sizeof(uint32));
	memcpy(data + KEYRING_MAGIC_BYTES + sizeof(uint32), &own, sizeof(uint32));
	memcpy(data + KEYRING_HEADER_BYTES, keyring.entries, (size_t) keyring.n * ENTRY_BYTES);
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
int
KeyringFind(const uint8 *id)
{
	for (int i = 0; i < keyring.n; i++)
		if (memcmp(keyring.entries[i], id, WRAP_ID_BYTES) == 0)
			return i;
	return -1;
}

/* The wrap key at place i of this backend's copy (unsealed once, then kept). */
const uint8 *
KeyringKey(int i)
{
	if (!keyring.have[i])
	{
		KeyringEntryKey(keyring.entries[i], keyring.keys[i]);
		keyring.have[i] = true;
	}
	return keyring.keys[i];
}

/* Append an entry to this backend's copy (the caller saves); returns its place. */
int
KeyringAppend(const uint8 *entry)
{
	int			i = keyring.n;

	memcpy(keyring.entries[i], entry, ENTRY_BYTES);
	keyring.have[i] = false;
	keyring.n++;
	return i;
}
