/*
 * scatter.c
 *		Scattered writes: an exactly invertible reordering of an ID's bits
 *		that brings its low bits to the top, so that range partitions over
 *		the scattered value each receive an even share of new rows instead
 *		of all of them going to the newest range.
 *
 * For 0 <= b <= 62 and 0 <= id < 2^63, with high = id >> b (63 - b bits)
 * and low = id & (2^b - 1) (b bits):
 *
 *	 scatter(id, b)   = ((low XOR H(high)) & (2^b - 1)) << (63 - b)  |  high
 *	 unscatter(s, b)  = high << b  |  ((s >> (63 - b)) XOR H(high)) & (2^b - 1),
 *						where high = s & (2^(63 - b) - 1)
 *	 H(x)			  = XXH64 of x as 8 bytes little-endian, seed 0
 *
 * The low bits are the sequence field, which changes with every ID; they are
 * XORed with a hash of the rest (one Feistel round, so still a bijection of
 * [0, 2^63)) because the sequence restarts at 0 in every time unit: on a
 * server issuing less than one ID per time unit a plain rotation would give
 * every ID the same top bits.  Below the top b bits the scattered value is
 * id >> b, so the values within each of the 2^b ranges still increase with
 * time.  b = 0 is the identity.
 */
#include "postgres.h"

#include <xxhash.h>

#include "fmgr.h"

#define SCATTER_MAX_BITS	62

/* ERROR unless 0 <= bits <= 62. */
static void
CheckBits(int32 bits)
{
	if (bits < 0 || bits > SCATTER_MAX_BITS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scatter bits must be between 0 and %d, not %d", SCATTER_MAX_BITS, bits),
				 errhint("The top bits of a scattered value pick one of 2^bits equal ranges: use the base-2 logarithm of the number of range partitions.")));
}

/* H(x): XXH64 of x as 8 bytes little-endian, seed 0. */
static uint64
ScatterHash(uint64 x)
{
	unsigned char b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char) (x >> (8 * i));
	return (uint64) XXH64(b, sizeof(b), 0);
}

PG_FUNCTION_INFO_V1(snowseq_scatter);
PG_FUNCTION_INFO_V1(snowseq_unscatter);

/* snowseq_scatter(id, bits) -> bigint: the low bits of an ID moved to the top. */
Datum
snowseq_scatter(PG_FUNCTION_ARGS)
{
	int64		id = PG_GETARG_INT64(0);
	int32		bits = PG_GETARG_INT32(1);
	uint64		mask;
	uint64		high;
	uint64		top;

	CheckBits(bits);
	if (id < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("snowseq ID must not be negative: %lld", (long long) id),
				 errhint("snowseq IDs are positive 63-bit numbers.")));
	mask = ((uint64) 1 << bits) - 1;
	high = (uint64) id >> bits;
	top = (((uint64) id & mask) ^ ScatterHash(high)) & mask;
	PG_RETURN_INT64((int64) ((top << (63 - bits)) | high));
}

/* snowseq_unscatter(value, bits) -> bigint: the ID a scattered value was made from. */
Datum
snowseq_unscatter(PG_FUNCTION_ARGS)
{
	int64		value = PG_GETARG_INT64(0);
	int32		bits = PG_GETARG_INT32(1);
	uint64		mask;
	uint64		high;
	uint64		low;

	CheckBits(bits);
	if (value < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("scattered value must not be negative: %lld", (long long) value),
				 errhint("snowseq_scatter() returns values from 0 to 2^63 - 1.")));
	mask = ((uint64) 1 << bits) - 1;
	high = (uint64) value & (((uint64) 1 << (63 - bits)) - 1);
	low = (((uint64) value >> (63 - bits)) ^ ScatterHash(high)) & mask;
	PG_RETURN_INT64((int64) ((high << bits) | low));
}
