/*
 * guc.c
 *		snowseq's core settings: the node id, the snowflake layout, the
 *		epoch, the reservations and the lead of the clock.  All are fixed at
 *		server start, and every invalid value stops the server.
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>

#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
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
int			snowseq_max_lead_ms = 10000;
int			snowseq_max_counters = 64;
static char *snowseq_epoch = NULL;
int64		SnowseqEpochMs = 0;

/* ms in a year of 365.25 days: the lifetime warning's threshold */
#define SNOWSEQ_YEAR_MS		((int64) 31557600000)

/*
 * A value for a setting given before the library defined it (in
 * postgresql.conf or on the command line) is applied by the definition with
 * only a WARNING if it is invalid, and the default is kept.  Check it again
 * with ERROR, so the server does not start on a value it was not given.
 */
static void
GucRecheck(const char *name, const char *raw)
{
	if (raw != NULL)
		(void) set_config_option(name, raw, PGC_POSTMASTER, PGC_S_FILE,
								 GUC_ACTION_SET, false, ERROR, false);
}

/* The value a setting was given before its definition, or NULL. */
static char *
GucPlaceholder(const char *name)
{
	const char *raw = GetConfigOption(name, true, false);

	return raw != NULL ? pstrdup(raw) : NULL;
}

/*
 * Stop the server on an integer setting given as a number with a fraction
 * (in its unit): PostgreSQL rounds it, so snowseq.node_id = 1.5 would run
 * as node 2.  A check hook sees only the rounded value, so this looks at
 * the text as given, which for a PGC_POSTMASTER setting is the
 * placeholder's (postgresql.conf, ALTER SYSTEM or the command line).
 * "1.5s" for a setting in ms is a whole number of ms and passes.
 */
static void
GucRefuseFraction(const char *name, const char *raw, int flags)
{
	double		value;
	const char *hint = NULL;

	if (raw == NULL || !parse_real(raw, &value, flags, &hint))
		return;					/* not a number: the definition says so */
	if (value != rint(value))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for parameter \"%s\": \"%s\"", name, raw),
				 errdetail("%s takes a whole number%s, and PostgreSQL would round %g to %.0f.",
						   name, (flags & GUC_UNIT_MS) ? " of milliseconds" : "", value, rint(value)),
				 errhint("Set %s to a whole number.", name)));
}

/*
 * Define one PGC_POSTMASTER integer setting; an invalid value stops the
 * server.  Other modules define theirs through it too.
 */
void
GucDefineInt(const char *name, const char *desc, int *var, int boot, int min, int max,
			 int flags)
{
	char	   *raw = GucPlaceholder(name);

	GucRefuseFraction(name, raw, flags);
	DefineCustomIntVariable(name, desc, NULL, var, boot, min, max,
							PGC_POSTMASTER, flags, NULL, NULL, NULL);
	GucRecheck(name, raw);
}

/*
 * Define one PGC_POSTMASTER boolean setting; an invalid value stops the
 * server.
 */
void
GucDefineBool(const char *name, const char *desc, bool *var, bool boot, int flags)
{
	char	   *raw = GucPlaceholder(name);

	DefineCustomBoolVariable(name, desc, NULL, var, boot, PGC_POSTMASTER, flags,
							 NULL, NULL, NULL);
	GucRecheck(name, raw);
}

/* Parse an epoch: ms since 1970-01-01 UTC, or false with a reason in *why. */
static bool
ParseEpoch(const char *value, int64 *ms, char **why)
{
	pg_tz	   *saved_tz = session_timezone;
	MemoryContext cxt = CurrentMemoryContext;
	volatile TimestampTz ts = 0;
	ErrorData  *volatile edata = NULL;
	char	   *words = pstrdup(value);
	char	   *w;

	/* relative words name a different instant at every start */
	for (char *p = words; *p; p++)
		*p = isalpha((unsigned char) *p) ? pg_tolower((unsigned char) *p) : ' ';
	for (w = strtok(words, " "); w != NULL; w = strtok(NULL, " "))
	{
		if (strcmp(w, "now") == 0 || strcmp(w, "today") == 0 ||
			strcmp(w, "tomorrow") == 0 || strcmp(w, "yesterday") == 0 ||
			strcmp(w, "allballs") == 0)
		{
			*why = psprintf("\"%s\" is relative to the moment it is read; an epoch must be a fixed instant.", w);
			return false;
		}
	}

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
	{
		*why = pstrdup(edata->message);
		return false;
	}
	if (TIMESTAMP_NOT_FINITE(ts))
	{
		*why = pstrdup("An epoch must be a finite timestamp.");
		return false;
	}
	/* microseconds since 2000-01-01 to milliseconds since 1970-01-01 */
	*ms = (ts >= 0 ? ts / 1000 : -((-ts + 999) / 1000)) + SNOWSEQ_UNIX_TO_PG_MS;
	if (*ms > GetCurrentTimestamp() / 1000 + SNOWSEQ_UNIX_TO_PG_MS)
	{
		*why = pstrdup("The epoch is in the future.");
		return false;
	}
	return true;
}

/* Check hook of snowseq.epoch: a fixed instant in the past. */
static bool
EpochCheck(char **newval, void **extra, GucSource source)
{
	int64		ms;
	char	   *why;

	if (*newval == NULL)
		return true;
	if (!ParseEpoch(*newval, &ms, &why))
	{
		GUC_check_errdetail("%s", why);
		GUC_check_errhint("Set snowseq.epoch to an instant in the past, such as '2025-01-01 00:00:00+00'.");
		return false;
	}
	return true;
}

/* Define snowseq's core settings. */
void
GucInit(void)
{
	char	   *raw;

	GucDefineInt("snowseq.node_id",
				 "Node id of this server, unique among the servers that share IDs (-1: unset).",
				 &snowseq_node_id, -1, -1, INT_MAX, 0);
	GucDefineInt("snowseq.time_bits", "Bits of the time field of a snowflake ID.",
				 &snowseq_time_bits, 41, 1, 62, 0);
	GucDefineInt("snowseq.node_bits", "Bits of the node field of a snowflake ID.",
				 &snowseq_node_bits, 10, 0, 30, 0);
	GucDefineInt("snowseq.seq_bits", "Bits of the sequence field of a snowflake ID.",
				 &snowseq_seq_bits, 12, 1, 31, 0);
	GucDefineInt("snowseq.time_unit_ms", "Length of one tick of the time field.",
				 &snowseq_time_unit_ms, 1, 1, 86400000, GUC_UNIT_MS);
	raw = GucPlaceholder("snowseq.epoch");
	DefineCustomStringVariable("snowseq.epoch",
							   "Instant at which the time field of snowflake IDs is zero.",
							   "Without a UTC offset the value is read as UTC.",
							   &snowseq_epoch, "2025-01-01 00:00:00+00",
							   PGC_POSTMASTER, 0, EpochCheck, NULL, NULL);
	GucRecheck("snowseq.epoch", raw);
	GucDefineInt("snowseq.reserve_buffer_ms",
				 "How many milliseconds of IDs, at the observed rate, each reservation covers.",
				 &snowseq_reserve_buffer_ms, 5000, 10, 3600000, GUC_UNIT_MS);
	GucDefineInt("snowseq.clock_block_min_ms", "Smallest advance of the clock reservation.",
				 &snowseq_clock_block_min_ms, 1000, 1, 3600000, GUC_UNIT_MS);
	GucDefineInt("snowseq.clock_block_max_ms", "Largest advance of the clock reservation.",
				 &snowseq_clock_block_max_ms, 60000, 1, 86400000, GUC_UNIT_MS);
	GucDefineInt("snowseq.segment_block_min", "Smallest advance of a counter reservation.",
				 &snowseq_segment_block_min, 1000, 1, INT_MAX, 0);
	GucDefineInt("snowseq.segment_block_max", "Largest advance of a counter reservation.",
				 &snowseq_segment_block_max, 100000000, 1, INT_MAX, 0);
	GucDefineInt("snowseq.promote_margin_ms",
				 "Logical time added above the replayed reservation when a standby is promoted.",
				 &snowseq_promote_margin_ms, 10000, 0, 86400000, GUC_UNIT_MS);
	GucDefineInt("snowseq.max_lead_ms",
				 "How far the logical clock may run ahead of the wall clock before callers wait for it.",
				 &snowseq_max_lead_ms, 10000, 0, 86400000, GUC_UNIT_MS);
	GucDefineInt("snowseq.max_counters",
				 "Named counters and serials the shared memory has room for.",
				 &snowseq_max_counters, 64, 0, 100000, 0);
}

/*
 * Reserve the "snowseq." prefix, so that a misspelt setting is reported;
 * after every module has defined its settings (it drops the placeholders
 * of settings not defined yet).
 */
void
GucReservePrefix(void)
{
	MarkGUCPrefixReserved("snowseq");
}

/*
 * Check the settings as a whole.  Runs in the postmaster while
 * shared_preload_libraries is processed, where an ERROR stops the server
 * with the message in the log: a wrong layout never issues an ID.
 */
void
GucValidate(void)
{
	int			sum = snowseq_time_bits + snowseq_node_bits + snowseq_seq_bits;
	int64		now_ms = GetCurrentTimestamp() / 1000 + SNOWSEQ_UNIX_TO_PG_MS;
	int64		span_ms;
	int64		end_ms;
	char	   *why;

	/* checked by EpochCheck already */
	if (!ParseEpoch(snowseq_epoch, &SnowseqEpochMs, &why))
		elog(ERROR, "invalid snowseq.epoch: %s", why);

	if (sum > 63)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("snowseq layout adds up to %d bits, at most 63 are allowed", sum),
				 errdetail("snowseq.time_bits = %d, snowseq.node_bits = %d, snowseq.seq_bits = %d.",
						   snowseq_time_bits, snowseq_node_bits, snowseq_seq_bits),
				 errhint("Change the three settings so that time_bits + node_bits + seq_bits <= 63 (53 or less for IDs that JavaScript numbers hold exactly).")));

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

	/*
	 * The end of the time field: a warning a year ahead, louder once past.
	 * An end beyond the range of int64 ms is far enough; the epoch may be
	 * before 1970 (negative), so the sum is checked, not bounded by hand.
	 */
	if (!pg_mul_s64_overflow((int64) 1 << snowseq_time_bits, snowseq_time_unit_ms, &span_ms) &&
		!pg_add_s64_overflow(SnowseqEpochMs, span_ms, &end_ms))
	{
		if (end_ms <= now_ms)
			ereport(WARNING,
					(errmsg("the snowseq time field has run out: snowseq_next() will fail"),
					 errdetail("snowseq.time_bits = %d with snowseq.time_unit_ms = %d from snowseq.epoch ended %lld days ago.",
							   snowseq_time_bits, snowseq_time_unit_ms,
							   (long long) ((now_ms - end_ms) / 86400000)),
					 errhint("Choose a later snowseq.epoch or more time bits, and reset the state with snowseq_reset_state().")));
		else if (end_ms - now_ms < SNOWSEQ_YEAR_MS)
			ereport(WARNING,
					(errmsg("the snowseq time field runs out in %lld days",
							(long long) ((end_ms - now_ms) / 86400000)),
					 errdetail("snowseq.time_bits = %d with snowseq.time_unit_ms = %d from snowseq.epoch last until then; snowseq_next() fails after that.",
							   snowseq_time_bits, snowseq_time_unit_ms),
					 errhint("Plan a move to a later snowseq.epoch or more time bits.")));
	}
}
