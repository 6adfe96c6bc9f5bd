/*
 * keyring_seal.c
 *		Wrap keys: their identifiers, AES-256 key wrap, and the seal of the
 *		keyring's entries under snowseq.keyring_command.
 *
 * An entry of the keyring is a wrap key's identifier, the identifier of
 * the key-encryption key that seals it (zeros: stored as it is), and the
 * wrap key or its seal.  snowseq.keyring_command prints the key-encryption
 * key (and, while the keyring is sealed again, the previous one on a
 * second line); it runs once, in the postmaster at start, and children
 * inherit what it printed.  A wrap key sealed under a key-encryption key
 * this server does not have cannot be unsealed here (an ERROR), but its
 * entry is kept and written as it is.  The keyring itself is in
 * keyring_file.c and keyring.c.
 */
#include "postgres.h"

#include <ctype.h>

#include <openssl/evp.h>

#include "lib/stringinfo.h"
#include "storage/fd.h"
#include "utils/builtins.h"

#include "keyring.h"
#include "keyring_seal.h"

/* snowseq.keyring_command, and the key-encryption keys it printed */
char	   *snowseq_keyring_command = NULL;
int			kek_count = -1;		/* -1 until the command ran; 0 without one */
static uint8 kek[2][KEK_BYTES];	/* the current one, then the previous one */
static uint8 kek_id[2][KEK_ID_BYTES];

/* The identifier of an AES-256 key: AES-256 of a fixed block, first 8 bytes. */
static void
KeyringIdOf(const uint8 *wk, const uint8 *block, uint8 *id)
{
	uint8		out[32];
	int			outl = 0;
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

	if (ctx == NULL ||
		EVP_EncryptInit_ex(ctx, EVP_aes_256_ecb(), NULL, wk, NULL) != 1 ||
		EVP_CIPHER_CTX_set_padding(ctx, 0) != 1 ||
		EVP_EncryptUpdate(ctx, out, &outl, block, 16) != 1)
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

/* The identifier of a wrap key. */
void
KeyringId(const uint8 *wk, uint8 *id)
{
	static const uint8 block[16] = "snowseq wrap id";

	KeyringIdOf(wk, block, id);
}

/* A bare entry for a wrap key. */
void
KeyringEntryBare(const uint8 *wk, uint8 *entry)
{
	memset(entry, 0, ENTRY_BYTES);
	KeyringId(wk, entry);
	memcpy(ENTRY_BODY(entry), wk, WRAP_KEY_BYTES);
}

/* Is an entry bare (its wrap key stored as it is)? */
bool
KeyringEntryBareP(const uint8 *entry)
{
	static const uint8 zeros[KEK_ID_BYTES] = {0};

	return memcmp(ENTRY_KEK(entry), zeros, KEK_ID_BYTES) == 0;
}

/* The place of an entry's key-encryption key among the command's, or -1. */
int
KeyringEntryKek(const uint8 *entry)
{
	for (int i = 0; i < Max(kek_count, 0); i++)
		if (memcmp(ENTRY_KEK(entry), kek_id[i], KEK_ID_BYTES) == 0)
			return i;
	return -1;
}

/* Hex text of an identifier, for messages. */
char *
KeyringHex(const uint8 *id)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int j = 0; j < WRAP_ID_BYTES; j++)
		appendStringInfo(&s, "%02x", id[j]);
	return s.data;
}

/*
 * The wrap key of an entry into wk: as it is, or unsealed with the
 * key-encryption key of snowseq.keyring_command; an ERROR when this server
 * has not that key.
 */
void
KeyringEntryKey(const uint8 *entry, uint8 *wk)
{
	int			k;
	bool		ok;

	if (KeyringEntryBareP(entry))
	{
		memcpy(wk, ENTRY_BODY(entry), WRAP_KEY_BYTES);
		return;
	}
	k = KeyringEntryKek(entry);
	if (k < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snowseq wrap key %s is sealed under a key-encryption key this server does not have",
						KeyringHex(entry)),
				 kek_count > 0 ?
				 errdetail("snowseq.keyring_command prints another key-encryption key.") :
				 errdetail("snowseq.keyring_command is not set: the keyring file alone unwraps no key."),
				 errhint("Set snowseq.keyring_command to a command that prints the key-encryption key of the cluster that sealed the keyring, as there, and restart the server.")));
	KeyringCipher(kek[k], ENTRY_BODY(entry), WRAP_KEY_BYTES + 8, wk, false, &ok);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("snowseq wrap key %s does not unseal", KeyringHex(entry)),
				 errdetail("Its sealed form fails the integrity check of AES key wrap."),
				 errhint("Restore the file %s from a backup of this cluster or from its primary.",
						 KEYRING_FILE)));
}

/*
 * Seal an entry under the current key-encryption key, if there is one and
 * the entry is bare or sealed under the previous one; true if it changed.
 */
bool
KeyringEntrySeal(uint8 *entry)
{
	uint8		wk[WRAP_KEY_BYTES];
	bool		ok;

	if (kek_count <= 0 || KeyringEntryKek(entry) == 0)
		return false;
	if (!KeyringEntryBareP(entry) && KeyringEntryKek(entry) < 0)
		return false;			/* another cluster's seal: kept as it is */
	KeyringEntryKey(entry, wk);
	KeyringCipher(kek[0], wk, WRAP_KEY_BYTES, ENTRY_BODY(entry), true, &ok);
	memcpy(ENTRY_KEK(entry), kek_id[0], KEK_ID_BYTES);
	explicit_bzero(wk, sizeof(wk));
	return true;
}

/* Run AES-256 key wrap or unwrap; *ok false when unwrapping finds damage. */
void
KeyringCipher(const uint8 *wk, const uint8 *in, int inlen, uint8 *out, bool wrap, bool *ok)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	int			outl = 0;
	int			finl = 0;

	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	EVP_CIPHER_CTX_set_flags(ctx, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
	*ok = EVP_CipherInit_ex(ctx, EVP_aes_256_wrap(), NULL, wk, NULL, wrap ? 1 : 0) == 1 &&
		EVP_CipherUpdate(ctx, out, &outl, in, inlen) == 1 &&
		EVP_CipherFinal_ex(ctx, out + outl, &finl) == 1 &&
		outl + finl == (wrap ? inlen + 8 : inlen - 8);
	EVP_CIPHER_CTX_free(ctx);
	if (!*ok && wrap)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not wrap a snowseq key")));
}

/*
 * Run snowseq.keyring_command and keep the key-encryption keys it prints:
 * 64 hexadecimal digits, the current one, then optionally a line with the
 * previous one (while the keyring is sealed again under the current).  What
 * it prints is never shown.
 */
void
KeyringRunCommand(void)
{
	char		buf[512];
	size_t		got = 0;
	FILE	   *fh;
	int			rc;
	int			n = 0;
	const char *p;

	if (kek_count >= 0)
		return;
	if (snowseq_keyring_command == NULL || snowseq_keyring_command[0] == '\0')
	{
		kek_count = 0;
		return;
	}
	fh = OpenPipeStream(snowseq_keyring_command, "r");
	if (fh == NULL)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not run snowseq.keyring_command: %m")));
	while (got < sizeof(buf) - 1)
	{
		size_t		r = fread(buf + got, 1, sizeof(buf) - 1 - got, fh);

		if (r == 0)
			break;
		got += r;
	}
	buf[got] = '\0';
	rc = ClosePipeStream(fh);
	if (rc != 0)
	{
		explicit_bzero(buf, sizeof(buf));
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("snowseq.keyring_command failed: %s", wait_result_to_str(rc)),
				 errhint("The command must print the keyring's key-encryption key (64 hexadecimal digits) and exit with status 0.")));
	}
	for (p = buf; *p != '\0' && n <= 2;)
	{
		int			digits = 0;

		while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
			p++;
		if (*p == '\0')
			break;
		while (isxdigit((unsigned char) p[digits]))
			digits++;
		if (n == 2 || digits != 2 * KEK_BYTES ||
			(p[digits] != '\0' && p[digits] != '\n' && p[digits] != '\r'))
		{
			n = -1;
			break;
		}
		if (hex_decode(p, digits, (char *) kek[n]) != KEK_BYTES)
		{
			n = -1;
			break;
		}
		p += digits;
		n++;
	}
	explicit_bzero(buf, sizeof(buf));
	if (n <= 0)
	{
		explicit_bzero(kek, sizeof(kek));
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("snowseq.keyring_command printed no valid key-encryption key"),
				 errdetail("It must print 64 hexadecimal digits (32 bytes), then optionally a line with the previous key-encryption key."),
				 errhint("Make one with: openssl rand -hex 32")));
	}
	for (int i = 0; i < n; i++)
	{
		static const uint8 block[16] = "snowseq kek id";

		KeyringIdOf(kek[i], block, kek_id[i]);
	}
	kek_count = n;
}
