/*
 * crypt.h
 *		Public IDs: gene IDs whose segment is encrypted with FF1-AES256 under
 *		a versioned key (crypt.c).
 */
#ifndef SNOWSEQ_CRYPT_H
#define SNOWSEQ_CRYPT_H

#include "fmgr.h"

extern void CryptInvalidateKeys(void);
extern int64 CryptEncryptId(FunctionCallInfo fcinfo, int64 id);
extern int64 CryptDecryptId(FunctionCallInfo fcinfo, int64 public_id);

#endif							/* SNOWSEQ_CRYPT_H */
