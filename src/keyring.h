/*
 * keyring.h
 *		Wrap keys of the data directory's keyring, under which the keys of
 *		public IDs are stored (keyring.c).
 */
#ifndef SNOWSEQ_KEYRING_H
#define SNOWSEQ_KEYRING_H

#include "lib/stringinfo.h"

#define WRAP_KEY_BYTES		32	/* AES-256 */
#define WRAP_ID_BYTES		8	/* identifier of a wrap key */
#define WRAPPED_KEY_BYTES	48	/* identifier, then RFC 3394 wrap of 32 bytes */
#define KEYRING_FILE		"snowseq_keyring"	/* in the data directory */
#define KEYRING_MAX			1024	/* wrap keys a keyring may hold */

/*
 * snowseq.public_version_bits (registered by keystore.c): the width of the
 * key version field, which bounds the version mark kept here
 */
extern int	snowseq_public_version_bits;

extern void KeyringWrap(const uint8 *key, uint8 *out);
extern void KeyringUnwrap(int version, const uint8 *wrapped, uint8 *key);
extern void KeyringRedo(const char *data, size_t len);
extern int32 KeyringNextVersion(int32 table_next, int32 max_version);
extern void KeyringRedoVersion(uint32 version);
extern void KeyringDescribe(StringInfo buf, const char *data, size_t len);
extern void KeyringRedoImport(const char *data, size_t len);
extern void KeyringDescribeImport(StringInfo buf, const char *data, size_t len);
extern bool KeyringKnows(const uint8 *id);
extern uint32 KeyringVersionMark(void);
extern int	KeyringDropUnused(int nkeep, const uint8 (*keep)[WRAP_ID_BYTES]);
extern void KeyringInit(void);
extern void KeyringStartup(void);

#endif							/* SNOWSEQ_KEYRING_H */
