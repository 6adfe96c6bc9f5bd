/*
 * guc.c
 *		snowseq's settings: the node id, the snowflake layout, the epoch and
 *		the reservation sizes.  All are fixed at server start.
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "snowseq.h"

int			snowseq_node_id = -1;
int			snowseq_time_bits = 41;
int			snowseq_node_bits = 10;
int			snowseq_seq_bits = 12;
int			snowseq_time_unit_ms = 1;
int			snowseq_reserve_buffer_ms = 5000;
int			snowseq_clock_block_min_ms = 1000;
int			snowseq_clock_block_max_ms = 60000;
int			snowseq_segment_block_min = 1000;
int			snowseq_segment_block_max = 100000000;
int			snowseq_promote_margin_ms = 10000;
static char *snowseq_epoch = NULL;
int64		SnowseqEpochMs = 0;

/* Define one PGC_POSTMASTER integer setting. */
static void
DefineInt(const char *name, const char *desc, int *var, int boot, int min, int max,
		  int flags)
{
	DefineCustomIntVariable(name, desc, NULL, var, boot, min, max,
							PGC_POSTMASTER, flags, NULL, NULL, NULL);
}

/* Define snowseq's settings and reserve the "snowseq." prefix. */
void
GucInit(void)
{
	DefineInt("snowseq.node_id",
			  "Node id of this server, unique among the servers that share IDs (-1: unset).",
			  &snowseq_node_id, -1, -1, INT_MAX, 0);
	DefineInt("snowseq.time_bits", "Bits of the time field of a snowflake ID.",
			  &snowseq_time_bits, 41, 1, 62, 0);
	DefineInt("snowseq.node_bits", "Bits of the node field of a snowflake ID.",
			  &snowseq_node_bits, 10, 0, 31, 0);
	DefineInt("snowseq.seq_bits", "Bits of the sequence field of a snowflake ID.",
			  &snowseq_seq_bits, 12, 1, 31, 0);
	DefineInt("snowseq.time_unit_ms", "Length of one tick of the time field.",
			  &snowseq_time_unit_ms, 1, 1, 86400000, GUC_UNIT_MS);
	DefineCustomStringVariable("snowseq.epoch",
							   "Instant at which the time field of snowflake IDs is zero.",
							   "Without a UTC offset the value is read as UTC.",
							   &snowseq_epoch, "2025-01-01 00:00:00+00",
							   PGC_POSTMASTER, 0, NULL, NULL, NULL);
	DefineInt("snowseq.reserve_buffer_ms",
			  "How many milliseconds of IDs, at the observed rate, each reservation covers.",
			  &snowseq_reserve_buffer_ms, 5000, 10, 3600000, GUC_UNIT_MS);
	DefineInt("snowseq.clock_block_min_ms", "Smallest advance of the clock reservation.",
			  &snowseq_clock_block_min_ms, 1000, 1, 3600000, GUC_UNIT_MS);
	DefineInt("snowseq.clock_block_max_ms", "Largest advance of the clock reservation.",
			  &snowseq_clock_block_max_ms, 60000, 1, 86400000, GUC_UNIT_MS);
	DefineInt("snowseq.segment_block_min", "Smallest advance of the gene segment reservation.",
			  &snowseq_segment_block_min, 1000, 1, INT_MAX, 0);
	DefineInt("snowseq.segment_block_max", "Largest advance of the gene segment reservation.",
			  &snowseq_segment_block_max, 100000000, 1, INT_MAX, 0);
	DefineInt("snowseq.promote_margin_ms",
			  "Logical time added above the replayed reservation when a standby is promoted.",
			  &snowseq_promote_margin_ms, 10000, 0, 86400000, GUC_UNIT_MS);

	MarkGUCPrefixReserved("snowseq");
}

/* Parse snowseq.epoch, reading a value without a UTC offset as UTC. */
static int64
ParseEpoch(const char *value)
{
	pg_tz	   *saved_tz = session_timezone;
	MemoryContext cxt = CurrentMemoryContext;
	volatile TimestampTz ts = 0;
	ErrorData  *volatile edata = NULL;

	session_timezone = pg_tzset_offset(0);
	PG_TRY();
	{
		ts = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
													 CStringGetDatum(value),
													 ObjectIdGetDatum(InvalidOid),
													 Int32GetDatum(-1)));
	}
	PG_CATCH();
	{
		session_timezone = saved_tz;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	session_timezone = saved_tz;

	if (edata != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for snowseq.epoch: \"%s\"", value),
				 errdetail("%s", edata->message),
				 errhint("Set snowseq.epoch to a timestamp such as '2025-01-01 00:00:00+00'.")));
	if (TIMESTAMP_NOT_FINITE(ts))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq.epoch must be a finite timestamp, not \"%s\"", value)));

	/* microseconds since 2000-01-01 to milliseconds since 1970-01-01 */
	return ts / 1000 + SNOWSEQ_UNIX_TO_PG_MS;
}

/*
 * Check the settings as a whole.  Runs in the postmaster while
 * shared_preload_libraries is processed, where an ERROR stops the server
 * with the message in the log: a wrong layout never issues an ID.
 */
void
GucValidate(void)
{
	int64		now_ms = GetCurrentTimestamp() / 1000 + SNOWSEQ_UNIX_TO_PG_MS;

	if (snowseq_time_bits + snowseq_node_bits + snowseq_seq_bits != 63)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq layout adds up to %d bits, it must add up to 63",
						snowseq_time_bits + snowseq_node_bits + snowseq_seq_bits),
				 errdetail("snowseq.time_bits = %d, snowseq.node_bits = %d, snowseq.seq_bits = %d.",
						   snowseq_time_bits, snowseq_node_bits, snowseq_seq_bits),
				 errhint("Change the three settings so that time_bits + node_bits + seq_bits = 63.")));

	if (snowseq_node_bits + SNOWSEQ_GENE_BITS > 62 || snowseq_node_bits > 30)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq.node_bits = %d is too large", snowseq_node_bits),
				 errhint("Use at most 30 node bits.")));

	if (snowseq_node_id >= 0 && (int64) snowseq_node_id >= ((int64) 1 << snowseq_node_bits))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq.node_id = %d does not fit in snowseq.node_bits = %d",
						snowseq_node_id, snowseq_node_bits),
				 errhint("Use a node id from 0 to %lld, or more node bits.",
						 (long long) (((int64) 1 << snowseq_node_bits) - 1))));

	if (snowseq_clock_block_min_ms > snowseq_clock_block_max_ms ||
		snowseq_segment_block_min > snowseq_segment_block_max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq reservation block minimum exceeds its maximum"),
				 errhint("Check snowseq.clock_block_min_ms/max_ms and snowseq.segment_block_min/max.")));

	SnowseqEpochMs = ParseEpoch(snowseq_epoch);
	if (SnowseqEpochMs > now_ms)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq.epoch \"%s\" is in the future", snowseq_epoch),
				 errhint("Set snowseq.epoch to an instant in the past, such as '2025-01-01 00:00:00+00'.")));
}
