/*
 * keyring_file.h
 *		keyring_file.c: the keyring file of the data directory, and this
 *		backend's copy of it.
 */
#ifndef SNOWSEQ_KEYRING_FILE_H
#define SNOWSEQ_KEYRING_FILE_H

#include "keyring_seal.h"

/* A keyring's contents: entries, the own one, the version mark, bare keys read. */
typedef struct Keyring
{
	int			n;
	int			own;			/* index of the own wrap key, or -1 */
	uint32		version;		/* highest key version made in the cluster */
	uint8		(*entries)[ENTRY_BYTES];
	uint8		(*keys)[WRAP_KEY_BYTES];	/* bare wrap keys, where have[] */
	bool	   *have;
} Keyring;

/* this backend's copy of the file (in TopMemoryContext); n < 0 until read */
extern Keyring keyring;

extern bool KeyringParse(const char *data, size_t len, Keyring *k, const char **why);
extern char *KeyringSlurp(const char *path, size_t *len);
extern void KeyringLoad(void);
extern void KeyringSave(void);
extern int	KeyringFind(const uint8 *id);
extern const uint8 *KeyringKey(int i);
extern int	KeyringAppend(const uint8 *entry);

#endif							/* SNOWSEQ_KEYRING_FILE_H */
