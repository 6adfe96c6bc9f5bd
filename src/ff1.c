/*
 * ff1.c
 *		FF1 format-preserving encryption, NIST SP 800-38G, over AES-256 from
 *		OpenSSL's libcrypto.
 *
 * FF1 is a ten-round Feistel network over numeral strings: the string is
 * split into A (the first u = floor(n/2) digits) and B (the other v), and
 * each round adds to one half a number derived from the other half through
 * an AES-CBC-MAC (the PRF) of a block P, which depends only on the key and
 * the lengths, and a block string Q holding the tweak, the round number and
 * the other half.  Every tweak gives another permutation of the domain.
 *
 * Two implementations of the same algorithm:
 *	- Ff1Bits*: radix 2, numbers of 20 to 112 bits, what public IDs use (up
 *	  to 64 bits as one word; the 79-bit segment of a 128-bit gene ID as two).
 *	  CIPH_K(P) is computed once per key and domain; with a tweak of at most
 *	  11 bytes Q is a single block, so a round is one AES block encryption.
 *	  No allocation, no branch on secret data.
 *	- Ff1Digits: any radix from 2 to 36 over digit strings, for the published
 *	  test vectors (NIST's samples are radix 10 and 36), limited to halves
 *	  below 2^56 so that 64-bit arithmetic suffices.
 * The regression tests check the second against NIST's FF1-AES256 samples
 * and the first against the second (and against a radix-2 vector of
 * another implementation).
 */
#include "postgres.h"

#include <openssl/evp.h>

#include "fmgr.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"

#include "compat.h"
#include "ff1.h"

/* Expand an AES-256 key for single-block ECB encryption. */
void
Ff1KeyInit(Ff1Key *key, const uint8 *raw)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory creating an AES context")));
	if (EVP_EncryptInit_ex(ctx, EVP_aes_256_ecb(), NULL, raw, NULL) != 1 ||
		EVP_CIPHER_CTX_set_padding(ctx, 0) != 1)
	{
		EVP_CIPHER_CTX_free(ctx);
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("could not set up AES-256 encryption in OpenSSL")));
	}
	key->ctx = ctx;
}

/* Free an expanded key; OpenSSL wipes the key schedule. */
void
Ff1KeyFree(Ff1Key *key)
{
	if (key->ctx != NULL)
		EVP_CIPHER_CTX_free(key->ctx);
	key->ctx = NULL;
}

/* One AES-256 block encryption, CIPH_K(in). */
static inline void
Ff1Aes(const Ff1Key *key, const uint8 *in, uint8 *out)
{
	int			outl;

	if (unlikely(EVP_EncryptUpdate(key->ctx, out, &outl, in, FF1_BLOCK) != 1 ||
				 outl != FF1_BLOCK))
		ereport(ERROR,
				(errcode(ERRCODE_EXTERNAL_ROUTINE_EXCEPTION),
				 errmsg("AES-256 block encryption failed in OpenSSL")));
}

/* dst ^= src, one block. */
static inline void
Ff1Xor(uint8 *dst, const uint8 *src)
{
	uint64		a[2],
				b[2];

	memcpy(a, dst, FF1_BLOCK);
	memcpy(b, src, FF1_BLOCK);
	a[0] ^= b[0];
	a[1] ^= b[1];
	memcpy(dst, a, FF1_BLOCK);
}

/*
 * P = [1]^1 [2]^1 [1]^1 [radix]^3 [10]^1 [u mod 256]^1 [n]^4 [t]^4, and
 * CIPH_K(P): the CBC-MAC state after P's block.
 */
static void
Ff1PMac(const Ff1Key *key, int radix, int u, int n, int t, uint8 *pmac)
{
	uint8		p[FF1_BLOCK];

	p[0] = 1;
	p[1] = 2;
	p[2] = 1;
	p[3] = (uint8) (radix >> 16);
	p[4] = (uint8) (radix >> 8);
	p[5] = (uint8) radix;
	p[6] = 10;
	p[7] = (uint8) u;
	p[8] = (uint8) (n >> 24);
	p[9] = (uint8) (n >> 16);
	p[10] = (uint8) (n >> 8);
	p[11] = (uint8) n;
	p[12] = (uint8) (t >> 24);
	p[13] = (uint8) (t >> 16);
	p[14] = (uint8) (t >> 8);
	p[15] = (uint8) t;
	Ff1Aes(key, p, pmac);
}

/* Bytes of zero padding in Q: (-t - b - 1) mod 16. */
static inline int
Ff1Pad(int t, int b)
{
	return (int) (((-(int64) t - b - 1) % FF1_BLOCK + FF1_BLOCK) % FF1_BLOCK);
}

/*
 * Start the PRF of one call: feed the blocks of Q that hold only the tweak
 * and padding (none when t + b < 16) into the CBC-MAC state, and return in
 * last the final block of Q with the round number and NUM(B) left zero.
 */
static void
Ff1StartQ(const Ff1Key *key, const uint8 *pmac, const uint8 *tweak, int t, int b,
		  uint8 *state, uint8 *last)
{
	int			qlen = t + Ff1Pad(t, b) + 1 + b;

	memcpy(state, pmac, FF1_BLOCK);
	for (int off = 0; off < qlen; off += FF1_BLOCK)
	{
		uint8	   *blk = last;

		/* bytes of the tweak in this block; the rest is padding */
		memset(blk, 0, FF1_BLOCK);
		if (off < t)
			memcpy(blk, tweak + off, Min(FF1_BLOCK, t - off));
		if (off + FF1_BLOCK < qlen)
		{
			Ff1Xor(state, blk);
			Ff1Aes(key, state, state);
		}
	}
}

/* Set up a binary domain of nbits-bit numbers and tweaklen-byte tweaks. */
void
Ff1BitsInit(Ff1Bits *dom, const Ff1Key *key, int nbits, int tweaklen)
{
	Assert(nbits >= FF1_BITS_MIN && nbits <= FF1_WIDE_BITS_MAX && tweaklen >= 0);
	dom->nbits = nbits;
	dom->u = nbits / 2;
	dom->v = nbits - dom->u;
	/* b = ceil(ceil(v * log2(2)) / 8); v <= 56, so b <= 7 and d = 8 or 12 */
	dom->b = (dom->v + 7) / 8;
	dom->tweaklen = tweaklen;
	Ff1PMac(key, 2, dom->u, nbits, tweaklen, dom->pmac);
}

/* Low m bits (m <= 56). */
#define FF1_MASK(m)		((((uint64) 1) << (m)) - 1)

/*
 * The input of the last AES block of the PRF, but for the round's [i] and
 * NUM(B): the CBC-MAC state so far XOR Q's last block, as two words in
 * memory order.  [i] and NUM(B) are the last 1 + b <= 5 bytes of Q, so a
 * round only XORs them into the second word.
 */
typedef struct Ff1Round
{
	uint64		w[2];
} Ff1Round;

/* Set up the rounds of one call: the PRF's blocks up to Q's last one. */
static inline void
Ff1BitsStart(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak, Ff1Round *r)
{
	uint8		state[FF1_BLOCK];
	uint8		last[FF1_BLOCK];

	Ff1StartQ(key, dom->pmac, tweak, dom->tweaklen, dom->b, state, last);
	Ff1Xor(state, last);
	memcpy(r->w, state, FF1_BLOCK);
}

/*
 * One round's y mod 2^64: R = PRF(P || Q) with [i] and NUM(B) = num in Q's
 * last block, y = NUM(S) of S = R's first d bytes.  Only y mod 2^m is
 * used, m <= 56, so the last 8 of the d bytes suffice: bytes 0-7 when
 * d = 8 (b <= 4), bytes 4-11 when d = 12.
 */
static inline uint64
Ff1BitsY(const Ff1Key *key, const Ff1Bits *dom, const Ff1Round *r, int i, uint64 num)
{
	uint64		blk[2];
	uint64		out[2];

	blk[0] = r->w[0];
	blk[1] = r->w[1] ^ pg_hton64(((uint64) i << (8 * dom->b)) | num);
	Ff1Aes(key, (const uint8 *) blk, (uint8 *) out);
	if (dom->b <= 4)
		return pg_ntoh64(out[0]);
	return (pg_ntoh64(out[0]) << 32) | (pg_ntoh64(out[1]) >> 32);
}

/* FF1 encryption of the halves A (u bits) and B (v bits) of a number. */
static inline void
Ff1BitsEncryptHalves(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak,
					 uint64 *pa, uint64 *pb)
{
	Ff1Round	r;
	uint64		a = *pa;
	uint64		b = *pb;

	Ff1BitsStart(key, dom, tweak, &r);
	for (int i = 0; i < FF1_ROUNDS; i++)
	{
		int			m = (i % 2 == 0) ? dom->u : dom->v;
		uint64		c = (a + Ff1BitsY(key, dom, &r, i, b)) & FF1_MASK(m);

		a = b;
		b = c;
	}
	*pa = a;
	*pb = b;
}

/* FF1 decryption of the halves A (u bits) and B (v bits) of a number. */
static inline void
Ff1BitsDecryptHalves(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak,
					 uint64 *pa, uint64 *pb)
{
	Ff1Round	r;
	uint64		a = *pa;
	uint64		b = *pb;

	Ff1BitsStart(key, dom, tweak, &r);
	for (int i = FF1_ROUNDS - 1; i >= 0; i--)
	{
		int			m = (i % 2 == 0) ? dom->u : dom->v;
		uint64		c = (b - Ff1BitsY(key, dom, &r, i, a)) & FF1_MASK(m);

		b = a;
		a = c;
	}
	*pa = a;
	*pb = b;
}

/* FF1 encryption of an nbits-bit number x (nbits <= 64). */
uint64
Ff1BitsEncrypt(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak, uint64 x)
{
	uint64		a = x >> dom->v;
	uint64		b = x & FF1_MASK(dom->v);

	Assert(dom->nbits <= FF1_BITS_MAX);
	Ff1BitsEncryptHalves(key, dom, tweak, &a, &b);
	return (a << dom->v) | b;
}

/* FF1 decryption of an nbits-bit number x (nbits <= 64). */
uint64
Ff1BitsDecrypt(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak, uint64 x)
{
	uint64		a = x >> dom->v;
	uint64		b = x & FF1_MASK(dom->v);

	Assert(dom->nbits <= FF1_BITS_MAX);
	Ff1BitsDecryptHalves(key, dom, tweak, &a, &b);
	return (a << dom->v) | b;
}

/*
 * FF1 encryption or decryption, in place, of an nbits-bit number of up to
 * FF1_WIDE_BITS_MAX bits, given as *hi * 2^64 + *lo.
 */
void
Ff1BitsCryptWide(const Ff1Key *key, const Ff1Bits *dom, const uint8 *tweak,
				 uint64 *hi, uint64 *lo, bool decrypt)
{
	/* 0 < v < 64: A is the bits above v, B the v bits below */
	uint64		a = (*hi << (64 - dom->v)) | (*lo >> dom->v);
	uint64		b = *lo & FF1_MASK(dom->v);

	if (decrypt)
		Ff1BitsDecryptHalves(key, dom, tweak, &a, &b);
	else
		Ff1BitsEncryptHalves(key, dom, tweak, &a, &b);
	*lo = (a << dom->v) | b;
	*hi = a >> (64 - dom->v);
}

/* ---- any radix: the reference path for published test vectors ---- */

/* the general path keeps radix^v below this, so sums fit in 64 bits */
#define FF1_DIGITS_LIMIT	((uint64) 1 << 56)

/* NUM_radix of m digits. */
static uint64
Ff1Num(const uint8 *digits, int m, int radix)
{
	uint64		x = 0;

	for (int k = 0; k < m; k++)
		x = x * radix + digits[k];
	return x;
}

/* STR^m_radix of x. */
static void
Ff1Str(uint64 x, int m, int radix, uint8 *digits)
{
	for (int k = m - 1; k >= 0; k--)
	{
		digits[k] = (uint8) (x % radix);
		x /= radix;
	}
}

/*
 * FF1 of a string of n digits (each below radix): out = FF1.Encrypt or
 * FF1.Decrypt (SP 800-38G, Algorithms 7 and 8).  Returns NULL, or why the
 * parameters are outside what this implementation takes.
 */
static const char *
Ff1Digits(const Ff1Key *key, int radix, const uint8 *tweak, int t,
		  const uint8 *in, uint8 *out, int n, bool decrypt)
{
	int			u = n / 2;
	int			v = n - u;
	uint64		pow_u = 1,
				pow_v = 1,
				pow_n = 1;
	int			bits = 0;
	int			b,
				d;
	uint8		pmac[FF1_BLOCK];
	uint8		state[FF1_BLOCK];
	uint8		last[FF1_BLOCK];
	uint8	   *a,
			   *bb,
			   *c;

	if (radix < 2 || radix > 36)
		return "radix must be between 2 and 36";
	if (n < 2)
		return "a numeral string has at least 2 digits";
	for (int k = 0; k < v; k++)
	{
		if (k < u)
			pow_u *= radix;
		pow_v *= radix;
		if (pow_v >= FF1_DIGITS_LIMIT)
			return "radix^ceil(n/2) must be below 2^56";
	}
	for (int k = 0; k < n && pow_n < 1000000; k++)
		pow_n *= radix;
	if (pow_n < 1000000)
		return "radix^n must be at least 1000000";
	/* b = ceil(ceil(v * log2(radix)) / 8): bytes of the largest NUM(B) */
	while (bits < 64 && ((uint64) 1 << bits) < pow_v)
		bits++;
	b = (bits + 7) / 8;
	d = 4 * ((b + 3) / 4) + 4;
	Assert(d <= FF1_BLOCK);

	a = palloc(v);
	bb = palloc(v);
	c = palloc(v);
	memcpy(a, in, u);
	memcpy(bb, in + u, v);

	Ff1PMac(key, radix, u, n, t, pmac);
	Ff1StartQ(key, pmac, tweak, t, b, state, last);
	for (int r = 0; r < FF1_ROUNDS; r++)
	{
		int			i = decrypt ? FF1_ROUNDS - 1 - r : r;
		int			m = (i % 2 == 0) ? u : v;
		uint64		pow_m = (m == u) ? pow_u : pow_v;
		/* encryption feeds B to the PRF, decryption A: v digits in even rounds */
		uint64		num = Ff1Num(decrypt ? a : bb, (i % 2 == 0) ? v : u, radix);
		uint8		blk[FF1_BLOCK];
		uint64		y = 0;
		uint64		x;
		uint8	   *tmp;

		last[FF1_BLOCK - 1 - b] = (uint8) i;
		for (int k = 0; k < b; k++)
			last[FF1_BLOCK - 1 - k] = (uint8) (num >> (8 * k));
		memcpy(blk, state, FF1_BLOCK);
		Ff1Xor(blk, last);
		Ff1Aes(key, blk, blk);
		/* y = NUM(S) mod radix^m, S = first d bytes of R */
		for (int k = 0; k < d; k++)
			y = (y * 256 + blk[k]) % pow_m;
		if (!decrypt)
		{
			x = (Ff1Num(a, m, radix) + y) % pow_m;
			Ff1Str(x, m, radix, c);
			/* A = B, B = C */
			tmp = a;
			a = bb;
			bb = c;
			c = tmp;
		}
		else
		{
			x = (Ff1Num(bb, m, radix) + pow_m - y) % pow_m;
			Ff1Str(x, m, radix, c);
			/* B = A, A = C */
			tmp = bb;
			bb = a;
			a = c;
			c = tmp;
		}
	}
	memcpy(out, a, u);
	memcpy(out + u, bb, v);
	pfree(a);
	pfree(bb);
	pfree(c);
	return NULL;
}

/* ---- SQL-callable test entry points (not part of the extension) ---- */

/*
 * One expanded key kept between calls of the test functions, so that an
 * exhaustive run over a domain does not set up AES a million times.
 */
static uint8 test_raw[FF1_KEY_BYTES];
static Ff1Key test_key = {NULL};

/* The expanded key of a bytea argument. */
static const Ff1Key *
Ff1TestKey(bytea *raw)
{
	if (VARSIZE_ANY_EXHDR(raw) != FF1_KEY_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("FF1 key must be %d bytes, not %d",
						FF1_KEY_BYTES, (int) VARSIZE_ANY_EXHDR(raw)),
				 errhint("FF1 here uses AES-256.")));
	if (test_key.ctx == NULL || memcmp(test_raw, VARDATA_ANY(raw), FF1_KEY_BYTES) != 0)
	{
		Ff1KeyFree(&test_key);
		Ff1KeyInit(&test_key, (const uint8 *) VARDATA_ANY(raw));
		memcpy(test_raw, VARDATA_ANY(raw), FF1_KEY_BYTES);
	}
	return &test_key;
}

PG_FUNCTION_INFO_V1(snowseq_ff1_test_vector);
PG_FUNCTION_INFO_V1(snowseq_ff1_test_bits);
PG_FUNCTION_INFO_V1(snowseq_ff1_test_wide);

/*
 * snowseq_ff1_test_vector(key bytea, tweak bytea, radix int, input text,
 * decrypt bool) -> text: FF1 of a string of digits 0-9a-z, for test vectors.
 */
Datum
snowseq_ff1_test_vector(PG_FUNCTION_ARGS)
{
	const Ff1Key *key = Ff1TestKey(PG_GETARG_BYTEA_PP(0));
	bytea	   *tweak = PG_GETARG_BYTEA_PP(1);
	int32		radix = PG_GETARG_INT32(2);
	char	   *input = text_to_cstring(PG_GETARG_TEXT_PP(3));
	bool		decrypt = PG_GETARG_BOOL(4);
	int			n = strlen(input);
	uint8	   *in = palloc(n + 1);
	uint8	   *out = palloc(n + 1);
	char	   *result = palloc(n + 1);
	const char *problem;

	for (int k = 0; k < n; k++)
	{
		char		ch = input[k];
		int			digit = (ch >= '0' && ch <= '9') ? ch - '0' :
			(ch >= 'a' && ch <= 'z') ? ch - 'a' + 10 : 99;

		if (digit >= radix)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%c\" is not a digit in radix %d", ch, radix),
					 errhint("Digits are 0-9 then a-z.")));
		in[k] = (uint8) digit;
	}
	problem = Ff1Digits(key, radix, (const uint8 *) VARDATA_ANY(tweak),
						VARSIZE_ANY_EXHDR(tweak), in, out, n, decrypt);
	if (problem != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unsupported FF1 parameters: %s", problem)));
	for (int k = 0; k < n; k++)
		result[k] = out[k] < 10 ? '0' + out[k] : 'a' + out[k] - 10;
	result[n] = '\0';
	PG_RETURN_TEXT_P(cstring_to_text(result));
}

/*
 * snowseq_ff1_test_bits(key bytea, tweak bytea, nbits int, x bigint,
 * decrypt bool) -> bigint: the radix-2 path public IDs use, on any tweak.
 */
Datum
snowseq_ff1_test_bits(PG_FUNCTION_ARGS)
{
	const Ff1Key *key = Ff1TestKey(PG_GETARG_BYTEA_PP(0));
	bytea	   *tweak = PG_GETARG_BYTEA_PP(1);
	int32		nbits = PG_GETARG_INT32(2);
	uint64		x = (uint64) PG_GETARG_INT64(3);
	bool		decrypt = PG_GETARG_BOOL(4);
	Ff1Bits		dom;

	if (nbits < FF1_BITS_MIN || nbits > 62)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("nbits must be between %d and 62, not %d", FF1_BITS_MIN, nbits)));
	if (PG_GETARG_INT64(3) < 0 || (x >> nbits) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("%lld is not a %d-bit number", (long long) PG_GETARG_INT64(3), nbits)));
	Ff1BitsInit(&dom, key, nbits, VARSIZE_ANY_EXHDR(tweak));
	PG_RETURN_INT64((int64) (decrypt ?
							 Ff1BitsDecrypt(key, &dom, (const uint8 *) VARDATA_ANY(tweak), x) :
							 Ff1BitsEncrypt(key, &dom, (const uint8 *) VARDATA_ANY(tweak), x)));
}

/*
 * snowseq_ff1_test_wide(key bytea, tweak bytea, bits text, decrypt bool)
 * -> text: the radix-2 path of 128-bit public IDs (Ff1BitsCryptWide) on a
 * string of 20 to 112 binary digits, most significant first.
 */
Datum
snowseq_ff1_test_wide(PG_FUNCTION_ARGS)
{
	const Ff1Key *key = Ff1TestKey(PG_GETARG_BYTEA_PP(0));
	bytea	   *tweak = PG_GETARG_BYTEA_PP(1);
	char	   *bits = text_to_cstring(PG_GETARG_TEXT_PP(2));
	bool		decrypt = PG_GETARG_BOOL(3);
	int			nbits = strlen(bits);
	uint64		hi = 0;
	uint64		lo = 0;
	Ff1Bits		dom;
	char	   *result;

	if (nbits < FF1_BITS_MIN || nbits > FF1_WIDE_BITS_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a binary string of %d to %d digits is needed, not %d",
						FF1_BITS_MIN, FF1_WIDE_BITS_MAX, nbits)));
	for (int k = 0; k < nbits; k++)
	{
		if (bits[k] != '0' && bits[k] != '1')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("\"%c\" is not a binary digit", bits[k])));
		hi = (hi << 1) | (lo >> 63);
		lo = (lo << 1) | (uint64) (bits[k] - '0');
	}
	Ff1BitsInit(&dom, key, nbits, VARSIZE_ANY_EXHDR(tweak));
	Ff1BitsCryptWide(key, &dom, (const uint8 *) VARDATA_ANY(tweak), &hi, &lo, decrypt);
	result = palloc(nbits + 1);
	for (int k = nbits - 1; k >= 0; k--)
	{
		result[k] = (char) ('0' + (lo & 1));
		lo = (lo >> 1) | (hi << 63);
		hi >>= 1;
	}
	result[nbits] = '\0';
	PG_RETURN_TEXT_P(cstring_to_text(result));
}
