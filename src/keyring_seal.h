/*
 * keyring_seal.h
 *		keyring_seal.c: wrap key identifiers, AES-256 key wrap, and the
 *		seal of keyring entries under snowseq.keyring_command.
 */
#ifndef SNOWSEQ_KEYRING_SEAL_H
#define SNOWSEQ_KEYRING_SEAL_H

#include "keyring.h"

#define KEK_BYTES			32	/* a key-encryption key: AES-256 */
#define KEK_ID_BYTES		8
/* an entry: wrap key identifier, KEK identifier (zeros: bare), wrap key or its seal */
#define ENTRY_BYTES			(WRAP_ID_BYTES + KEK_ID_BYTES + WRAP_KEY_BYTES + 8)
#define ENTRY_KEK(e)		((e) + WRAP_ID_BYTES)
#define ENTRY_BODY(e)		((e) + WRAP_ID_BYTES + KEK_ID_BYTES)

/* snowseq.keyring_command */
extern char *snowseq_keyring_command;
/* key-encryption keys it printed: -1 until it ran, 0 without one */
extern int	kek_count;

extern void KeyringId(const uint8 *wk, uint8 *id);
extern void KeyringEntryBare(const uint8 *wk, uint8 *entry);
extern bool KeyringEntryBareP(const uint8 *entry);
extern int	KeyringEntryKek(const uint8 *entry);
extern char *KeyringHex(const uint8 *id);
extern void KeyringEntryKey(const uint8 *entry, uint8 *wk);
extern bool KeyringEntrySeal(uint8 *entry);
extern void KeyringCipher(const uint8 *wk, const uint8 *in, int inlen, uint8 *out, bool wrap,
						  bool *ok);
extern void KeyringRunCommand(void);

#endif							/* SNOWSEQ_KEYRING_SEAL_H */
