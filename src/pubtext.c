/*
 * pubtext.c
 *		Public IDs as text: the public ID of snowseq_encrypt written in
 *		Crockford's base32 with a check character, short enough to read out,
 *		safe in URLs, and refused rather than misread when mistyped.
 *
 *	  code = d0 d1 ... d12 c		always 14 characters, upper case
 *
 * d0 .. d12 are the public ID's base-32 digits, most significant first (13
 * digits hold 65 bits, so d0 is 0 to 7 for a 63-bit number), in Crockford's
 * alphabet 0123456789ABCDEFGHJKMNPQRSTVWXYZ.  The check character c is a
 * symbol of the same alphabet, chosen so that in GF(32) = GF(2)[x] /
 * (x^5 + x^2 + 1), with a = x, a generator of its 31 nonzero elements,
 *
 *	  sum over i = 0 .. 13 of a^(13 - i) * d_i = 0		(d_13 = c)
 *
 * Every position i has its own weight w_i = a^(13 - i), and the 14 weights
 * are distinct and nonzero: changing one digit by a nonzero difference e
 * changes the sum by w_i * e, never 0, and swapping two different digits
 * x, y at positions i, j changes it by (w_i + w_j) * (x + y), never 0.  So
 * every single substitution and every transposition (of neighbours or not)
 * is refused, before any decryption.  Crockford's own check symbol, the
 * number mod 37, refuses the same errors, but needs five symbols beyond the
 * alphabet (*, ~, $, = and U): URL encoders escape $ and =, and linkifiers
 * and double clicks stop at some of them.
 *
 * Reading: case is ignored, hyphens anywhere are ignored, and O reads as 0,
 * I and L as 1 (Crockford's decoding of look-alikes).  That decoding maps
 * each character on its own, so a single mistyped character still changes
 * at most one digit, and a swap of neighbours swaps at most two digits: the
 * check refuses it, or it reads as the code that was meant.  U stays an
 * invalid character.  The length is fixed, so a character left out or typed
 * twice is refused by the length alone.
 *
 * Type prefixes: snowseq_public_text(id, 'ord') writes ord_<code>, as TypeID
 * and Stripe-style IDs do, so that an ID says what it names; a prefix is 1
 * to 63 lower-case letters a to z and underscores, beginning and ending
 * with a letter.  snowseq_from_public_text(code, 'ord') reads only codes of
 * that prefix (in either case, as the code): an order's ID passed where a
 * customer's is expected is refused before any decryption.  The check
 * character covers the code, not the prefix; the prefix is compared whole.
 */
#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

#include "compat.h"
#include "crypt.h"

#define PUBTEXT_DIGITS		13	/* base-32 digits of a 63-bit number */
#define PUBTEXT_LENGTH		(PUBTEXT_DIGITS + 1)	/* and the check character */
#define PUBTEXT_POLY		0x25	/* x^5 + x^2 + 1 */

static const char pubtext_alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/*
 * Value + 1 of each character that reads as a digit, 0 for every other
 * character: both cases, and Crockford's look-alikes O, I and L.
 */
#define PUBTEXT_SYM(upper, lower, value) [upper] = (value) + 1, [lower] = (value) + 1
static const uint8 pubtext_digit[256] = {
	['0'] = 1, ['1'] = 2, ['2'] = 3, ['3'] = 4, ['4'] = 5,
	['5'] = 6, ['6'] = 7, ['7'] = 8, ['8'] = 9, ['9'] = 10,
	PUBTEXT_SYM('A', 'a', 10), PUBTEXT_SYM('B', 'b', 11), PUBTEXT_SYM('C', 'c', 12),
	PUBTEXT_SYM('D', 'd', 13), PUBTEXT_SYM('E', 'e', 14), PUBTEXT_SYM('F', 'f', 15),
	PUBTEXT_SYM('G', 'g', 16), PUBTEXT_SYM('H', 'h', 17), PUBTEXT_SYM('J', 'j', 18),
	PUBTEXT_SYM('K', 'k', 19), PUBTEXT_SYM('M', 'm', 20), PUBTEXT_SYM('N', 'n', 21),
	PUBTEXT_SYM('P', 'p', 22), PUBTEXT_SYM('Q', 'q', 23), PUBTEXT_SYM('R', 'r', 24),
	PUBTEXT_SYM('S', 's', 25), PUBTEXT_SYM('T', 't', 26), PUBTEXT_SYM('V', 'v', 27),
	PUBTEXT_SYM('W', 'w', 28), PUBTEXT_SYM('X', 'x', 29), PUBTEXT_SYM('Y', 'y', 30),
	PUBTEXT_SYM('Z', 'z', 31),
	PUBTEXT_SYM('O', 'o', 0), PUBTEXT_SYM('I', 'i', 1), PUBTEXT_SYM('L', 'l', 1),
};

/* v * a in GF(32): a shift, reduced by the field's polynomial. */
static inline uint32
PubtextTimesA(uint32 v)
{
	v <<= 1;
	return (v & 0x20) ? v ^ PUBTEXT_POLY : v;
}

/* The check digit of 13 digits: sum of a^(13 - i) * d_i, by Horner's rule. */
static inline uint32
PubtextCheck(const uint8 *digits)
{
	uint32		sum = 0;

	for (int i = 0; i < PUBTEXT_DIGITS; i++)
		sum = PubtextTimesA(sum ^ digits[i]);
	return sum;
}

/* The 14-character code of a non-negative number. */
static text *
PubtextEncode(int64 value)
{
	text	   *result = palloc(VARHDRSZ + PUBTEXT_LENGTH);
	char	   *out = VARDATA(result);
	uint8		digits[PUBTEXT_DIGITS];

	Assert(value >= 0);
	for (int i = 0; i < PUBTEXT_DIGITS; i++)
	{
		digits[i] = (uint8) (((uint64) value >> (5 * (PUBTEXT_DIGITS - 1 - i))) & 31);
		out[i] = pubtext_alphabet[digits[i]];
	}
	out[PUBTEXT_DIGITS] = pubtext_alphabet[PubtextCheck(digits)];
	SET_VARSIZE(result, VARHDRSZ + PUBTEXT_LENGTH);
	return result;
}

/* ERROR for a character that is neither a digit nor a hyphen. */
static void
PubtextBadCharacter(const char *p, const char *end, int position)
{
	unsigned char c = (unsigned char) *p;
	char	   *name;

	if (IS_HIGHBIT_SET(c))
		name = psprintf("\"%s\"", pnstrdup(p, Min(pg_mblen(p), end - p)));
	else if (c < 0x20 || c == 0x7f)
		name = psprintf("U+%04X", c);
	else
		name = psprintf("\"%c\"", c);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid character %s at position %d of public text ID", name, position),
			 errdetail("A public text ID is written with the digits 0 to 9 and the letters A to Z except U, in either case; hyphens are ignored."),
			 errhint("Check the code for a typing error.")));
}

/* ERROR for a code of the wrong length (hyphens not counted). */
static void
PubtextBadLength(int ndigits, int nhyphens)
{
	if (ndigits == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("public text ID is empty"),
				 nhyphens > 0 ? errdetail("It has only hyphens, which are ignored.") : 0,
				 errhint("Pass the %d-character code made by snowseq_public_text().", PUBTEXT_LENGTH)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 ndigits > PUBTEXT_LENGTH ?
			 errmsg("public text ID is too long: %d characters instead of %d", ndigits, PUBTEXT_LENGTH) :
			 errmsg("public text ID is too short: %d characters instead of %d", ndigits, PUBTEXT_LENGTH),
			 errdetail("Hyphens are not counted."),
			 errhint("Check the code for a character left out or typed twice.")));
}

/*
 * The number a code stands for, or an ERROR.  canonical gets the code as
 * snowseq_public_text writes it (upper case, no hyphens, look-alikes read).
 */
static int64
PubtextDecode(const text *code, char *canonical)
{
	const char *p = VARDATA_ANY(code);
	const char *end = p + VARSIZE_ANY_EXHDR(code);
	uint8		digits[PUBTEXT_LENGTH];
	int			ndigits = 0;
	int			nhyphens = 0;
	uint64		value = 0;

	for (const char *q = p; q < end; q++)
	{
		uint8		d = pubtext_digit[(unsigned char) *q];

		if (d == 0)
		{
			/* every character before q is ASCII: its position is q - p + 1 */
			if (*q != '-')
				PubtextBadCharacter(q, end, (int) (q - p) + 1);
			nhyphens++;
			continue;
		}
		if (ndigits < PUBTEXT_LENGTH)
			digits[ndigits] = d - 1;
		ndigits++;
	}
	if (ndigits != PUBTEXT_LENGTH)
		PubtextBadLength(ndigits, nhyphens);

	for (int i = 0; i < PUBTEXT_LENGTH; i++)
		canonical[i] = pubtext_alphabet[digits[i]];
	canonical[PUBTEXT_LENGTH] = '\0';
	if (PubtextCheck(digits) != digits[PUBTEXT_DIGITS])
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("public text ID \"%s\" is mistyped", canonical),
				 errdetail("Its check character, the last one, does not match the other %d.", PUBTEXT_DIGITS),
				 errhint("Check the code for a changed character or two swapped neighbours.")));
	if (digits[0] > 7)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("public text ID \"%s\" is out of range", canonical),
				 errdetail("Its first character is %c; public IDs are below 2^63, so it is 0 to 7.", canonical[0]),
				 errhint("Pass a code made by snowseq_public_text().")));
	for (int i = 0; i < PUBTEXT_DIGITS; i++)
		value = (value << 5) | digits[i];
	return (int64) value;
}

#define PUBTEXT_PREFIX_MAX	63	/* as TypeID: at most 63 characters */

/* ERROR unless prefix is 1 to 63 of a-z and '_', beginning and ending with a letter. */
static void
PubtextCheckPrefix(const char *prefix, int len)
{
	bool		ok = len >= 1 && len <= PUBTEXT_PREFIX_MAX &&
		prefix[0] >= 'a' && prefix[0] <= 'z' &&
		prefix[len - 1] >= 'a' && prefix[len - 1] <= 'z';

	for (int i = 0; ok && i < len; i++)
		ok = (prefix[i] >= 'a' && prefix[i] <= 'z') || prefix[i] == '_';
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid type prefix \"%s\" for public text IDs", pnstrdup(prefix, Min(len, 80))),
				 errdetail("A type prefix is 1 to %d lower-case letters a to z and underscores, beginning and ending with a letter.",
						   PUBTEXT_PREFIX_MAX),
				 errhint("Use a short name of what the ID names, such as 'ord' or 'customer'.")));
}

/* The prefix argument (argument 1), checked; an ERROR for NULL. */
static text *
PubtextPrefixArg(FunctionCallInfo fcinfo)
{
	text	   *prefix;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("type prefix of public text IDs must not be NULL"),
				 errhint("Pass a prefix such as 'ord', or call the function without one.")));
	prefix = PG_GETARG_TEXT_PP(1);
	PubtextCheckPrefix(VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix));
	return prefix;
}

/*
 * The code part of a prefixed public text ID: code must begin with prefix
 * and '_' (the prefix in either case); an ERROR naming both otherwise.
 */
static text *
PubtextStripPrefix(text *code, const text *prefix)
{
	const char *c = VARDATA_ANY(code);
	int			clen = VARSIZE_ANY_EXHDR(code);
	const char *p = VARDATA_ANY(prefix);
	int			plen = VARSIZE_ANY_EXHDR(prefix);
	const char *sep = memchr(c, '_', clen);
	int			found = 0;

	/* the prefix of the code: up to its last '_' (prefixes may hold '_') */
	for (const char *q = c; q < c + clen; q++)
		if (*q == '_')
			sep = q;
	if (sep == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("public text ID has no type prefix, expected \"%.*s\"", plen, p),
				 errhint("Pass a code made by snowseq_public_text(id, '%.*s').", plen, p)));
	found = sep - c;
	if (found != plen || pg_strncasecmp(c, p, plen) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("public text ID has type prefix \"%s\", expected \"%.*s\"",
						pnstrdup(c, Min(found, 80)), plen, p),
				 errhint("The ID names another kind of thing: pass an ID of prefix \"%.*s\".", plen, p)));
	return cstring_to_text_with_len(sep + 1, c + clen - sep - 1);
}

/* Context line of a decryption ERROR: which code it was. */
static void
PubtextErrorContext(void *arg)
{
	errcontext("public text ID \"%s\"", (const char *) arg);
}

PG_FUNCTION_INFO_V1(snowseq_public_text);
PG_FUNCTION_INFO_V1(snowseq_from_public_text);
PG_FUNCTION_INFO_V1(snowseq_public_text_prefixed);
PG_FUNCTION_INFO_V1(snowseq_from_public_text_prefixed);
PG_FUNCTION_INFO_V1(snowseq_pubtext_test_encode);
PG_FUNCTION_INFO_V1(snowseq_pubtext_test_decode);

/* snowseq_public_text(id [, prefix]) -> text: the public ID of a gene ID, as a code (prefix_code). */
Datum
snowseq_public_text(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("ID to encrypt must not be NULL"),
				 errhint("Public text IDs are made from gene IDs by snowseq_public_text() and read back by snowseq_from_public_text().")));
	if (PG_NARGS() > 1)
	{
		text	   *prefix = PubtextPrefixArg(fcinfo);
		text	   *code = PubtextEncode(CryptEncryptId(fcinfo, PG_GETARG_INT64(0)));
		StringInfoData out;

		initStringInfo(&out);
		appendBinaryStringInfo(&out, VARDATA_ANY(prefix), VARSIZE_ANY_EXHDR(prefix));
		appendStringInfoChar(&out, '_');
		appendBinaryStringInfo(&out, VARDATA(code), PUBTEXT_LENGTH);
		PG_RETURN_TEXT_P(cstring_to_text_with_len(out.data, out.len));
	}
	PG_RETURN_TEXT_P(PubtextEncode(CryptEncryptId(fcinfo, PG_GETARG_INT64(0))));
}

/* snowseq_from_public_text(code [, prefix]) -> bigint: the gene ID of a code, or an ERROR. */
Datum
snowseq_from_public_text(PG_FUNCTION_ARGS)
{
	char		canonical[PUBTEXT_LENGTH + 1];
	int64		public_id;
	int64		id;
	text	   *code;
	ErrorContextCallback context;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("public text ID must not be NULL"),
				 errhint("Public text IDs are made from gene IDs by snowseq_public_text() and read back by snowseq_from_public_text().")));
	code = PG_GETARG_TEXT_PP(0);
	if (PG_NARGS() > 1)
		code = PubtextStripPrefix(code, PubtextPrefixArg(fcinfo));
	else if (memchr(VARDATA_ANY(code), '_', VARSIZE_ANY_EXHDR(code)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("public text ID has a type prefix"),
				 errhint("Pass its prefix too: snowseq_from_public_text(code, prefix) checks it.")));
	public_id = PubtextDecode(code, canonical);

	context.callback = PubtextErrorContext;
	context.arg = canonical;
	context.previous = error_context_stack;
	error_context_stack = &context;
	id = CryptDecryptId(fcinfo, public_id);
	error_context_stack = context.previous;
	PG_RETURN_INT64(id);
}

/*
 * The functions with a type prefix: symbols of their own (a symbol keeps
 * its arguments across versions), the same bodies, which read PG_NARGS().
 */
Datum
snowseq_public_text_prefixed(PG_FUNCTION_ARGS)
{
	return snowseq_public_text(fcinfo);
}

/* snowseq_from_public_text(code, prefix): see snowseq_from_public_text. */
Datum
snowseq_from_public_text_prefixed(PG_FUNCTION_ARGS)
{
	return snowseq_from_public_text(fcinfo);
}

/* ---- SQL-callable test entry points (not part of the extension) ---- */

/*
 * snowseq_pubtext_test_encode(value bigint) -> text: the code of a number,
 * without encryption, so that tests can build codes digit by digit.
 */
Datum
snowseq_pubtext_test_encode(PG_FUNCTION_ARGS)
{
	int64		value = PG_GETARG_INT64(0);

	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value to encode must not be negative: %lld", (long long) value)));
	PG_RETURN_TEXT_P(PubtextEncode(value));
}

/* snowseq_pubtext_test_decode(code text) -> bigint: the number of a code, without decryption. */
Datum
snowseq_pubtext_test_decode(PG_FUNCTION_ARGS)
{
	char		canonical[PUBTEXT_LENGTH + 1];

	PG_RETURN_INT64(PubtextDecode(PG_GETARG_TEXT_PP(0), canonical));
}
