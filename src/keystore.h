/*
 * keystore.h
 *		The table of keys of public IDs, snowseq_key_store (keystore.c): its
 *		rows and their rules, the width of the version field, and the key
 *		versions the open transaction made.
 */
#ifndef SNOWSEQ_KEYSTORE_H
#define SNOWSEQ_KEYSTORE_H

#include "access/htup.h"
#include "access/tupdesc.h"

#define KEYSTORE_TABLE			"snowseq_key_store"
#define KEYSTORE_VERSION_BITS_MIN	5
#define KEYSTORE_VERSION_BITS_MAX	7
#define KEYSTORE_CHECK_BITS_MAX	16

typedef enum KeyState
{
	KEY_ACTIVE,					/* decrypts; new public IDs use another key */
	KEY_CURRENT,				/* encrypts new public IDs and decrypts */
	KEY_RETIRED					/* erased: its public IDs no longer decrypt */
} KeyState;

/* One row of the key table, read and checked. */
typedef struct KeyRow
{
	int32		version;
	KeyState	state;
	bytea	   *key;			/* NULL when retired */
	int32		version_bits;
	int32		check_bits;
	TransactionId xmin;			/* writer of the row; Invalid when unknown */
} KeyRow;

/* columns of the key table, by name, so that later versions may add some */
enum
{
	COL_VERSION, COL_STATE, COL_KEY, COL_VERSION_BITS, COL_CHECK_BITS, COL_CREATED, NCOLS
};

extern void KeyStoreInit(void);
extern Oid	KeyStoreTable(Oid fn_oid);
extern const char *KeyStoreStateName(KeyState state);
extern void KeyStoreColumns(TupleDesc desc, int *cols);
extern void KeyStoreRowRead(const int *cols, Datum *values, bool *nulls, KeyRow *row, bool any_width);
extern void KeyStoreRowInvalid(int32 version, const char *what);
extern void KeyStoreMadeHere(int32 version);
extern bool KeyStoreMadeInThisTransaction(int32 version);
extern bool KeyStoreMadeAny(void);

#endif							/* SNOWSEQ_KEYSTORE_H */
