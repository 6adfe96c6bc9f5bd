/*
 * ff1.h
 *		FF1 format-preserving encryption (NIST SP 800-38G) with AES-256.
 *
 * The AES key schedule is expanded once per key (Ff1KeyInit) and the first
 * block of FF1's PRF, which depends only on the key and the lengths, once
 * per domain (Ff1BitsInit).  A call then costs ten AES block encryptions
 * and no memory allocation.
 */
#ifndef SNOWSEQ_FF1_H
#define SNOWSEQ_FF1_H

#include <openssl/evp.h>

#define FF1_KEY_BYTES		32	/* AES-256 */
#define FF1_BLOCK			16
#define FF1_ROUNDS			10

/* An AES-256 key, expanded. */
typedef struct Ff1Key
{
	EVP_CIPHER_CTX *ctx;		/* ECB encryption, no padding */
} Ff1Key;

/*
 * A binary domain: numeral strings of nbits digits in radix 2, that is
 * nbits-bit numbers, with tweaks of tweaklen bytes.
 */
typedef struct Ff1Bits
{
	int			nbits;			/* n */
	int			u;				/* floor(n / 2): digits of A */
	int			v;				/* n - u: digits of B */
	int			b;				/* bytes of NUM(B) in Q */
	int			tweaklen;		/* t */
	uint8		pmac[FF1_BLOCK];	/* CIPH_K(P): first block of every PRF */
} Ff1Bits;

/* smallest and largest binary domains of the fast path */
#define FF1_BITS_MIN		20	/* 2^20 >= 10^6, SP 800-38G Rev. 1's minimum domain */
#define FF1_BITS_MAX		64	/* as one word (Ff1BitsEncrypt, Ff1BitsDecrypt) */
#define FF1_WIDE_BITS_MAX	112 /* as two (Ff1BitsCryptWide): halves of <= 56 bits */

extern void Ff1KeyInit(Ff1Key *key, const uint8 *raw);
extern void Ff1KeyFree(Ff1Key *key);
extern void Ff1BitsInit(Ff1Bits *dom, const Ff1Key *key, int nbits, int tweaklen);
extern uint64 Ff1BitsEncrypt(const Ff1Key *key, const Ff1Bits *dom,
							 const uint8 *tweak, uint64 x);
extern uint64 Ff1BitsDecrypt(const Ff1Key *key, const Ff1Bits *dom,
							 const uint8 *tweak, uint64 x);
extern void Ff1BitsCryptWide(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak,
							 uint64 *hi, uint64 *lo, bool decrypt);

#endif							/* SNOWSEQ_FF1_H */
