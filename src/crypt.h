/*
 * crypt.h
 *		Public IDs: gene IDs whose segment is encrypted with FF1-AES256 under
 *		a versioned key (crypt.c).
 */
#ifndef SNOWSEQ_CRYPT_H
#define SNOWSEQ_CRYPT_H

extern void CryptInit(void);

#endif							/* SNOWSEQ_CRYPT_H */
