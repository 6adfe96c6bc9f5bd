/*
 * guc.c
 *		snowseq's core settings: the node id, the snowflake layout, the
 *		epoch, the reservations and the lead of the clock.  All are fixed at
 *		server start, and every invalid value stops the server.
 */
#include "postgres.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>

#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/timestamp.h"

#include "guc.h"
#include "snowseq.h"
#include "timeutil.h"

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
int			snowseq_backfill_node_id = -1;
bool		snowseq_seq_before_node = false;
static char *snowseq_layout = NULL;
static bool layout_bits_given = false;	/* a bit setting came with the server's settings */

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

	GucLayoutNoteExplicit();
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
	GucLayoutInit();
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
	GucLayoutApply();

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

/* ---- the field order of the snowflake layout and the backfill node id ---- */

/* A layout as snowseq.layout gives it. */
typedef struct LayoutSpec
{
	int			time_bits;
	int			node_bits;
	int			seq_bits;
	bool		seq_before_node;
} LayoutSpec;

/*
 * Parse snowseq.layout, such as 'time:39,seq:8,node:16': each of time,
 * node and seq once, time first (the top field, so that IDs increase with
 * time), widths within the ranges of the three bit settings, 63 bits at
 * most.  False with a reason in *why.
 */
static bool
ParseLayout(const char *value, LayoutSpec *l, char **why)
{
	char	   *copy = pstrdup(value);
	char	   *save = NULL;
	int			bits[3] = {-1, -1, -1};
	static const char *const names[3] = {"time", "node", "seq"};
	static const int min_bits[3] = {1, 0, 1};
	static const int max_bits[3] = {62, 30, 31};
	int			order[3];
	int			nfields = 0;

	for (char *f = strtok_r(copy, ",", &save); f != NULL; f = strtok_r(NULL, ",", &save))
	{
		char	   *colon = strchr(f, ':');
		char	   *name = f;
		char	   *end;
		long		v;
		int			k;

		if (colon == NULL)
		{
			*why = psprintf("Field \"%s\" has no width: write name:bits, such as time:41.", f);
			return false;
		}
		*colon = '\0';
		while (isspace((unsigned char) *name))
			name++;
		for (end = name + strlen(name); end > name && isspace((unsigned char) end[-1]); end--)
			*(end - 1) = '\0';
		for (k = 0; k < 3; k++)
			if (pg_strcasecmp(name, names[k]) == 0)
				break;
		if (k == 3)
		{
			*why = psprintf("Unknown field \"%s\": the fields are time, node and seq.", name);
			return false;
		}
		if (bits[k] >= 0)
		{
			*why = psprintf("Field %s is given twice.", names[k]);
			return false;
		}
		errno = 0;
		v = strtol(colon + 1, &end, 10);
		while (isspace((unsigned char) *end))
			end++;
		if (errno != 0 || end == colon + 1 || *end != '\0' || v < min_bits[k] || v > max_bits[k])
		{
			*why = psprintf("Field %s must have %d to %d bits, not \"%s\".",
							names[k], min_bits[k], max_bits[k], colon + 1);
			return false;
		}
		bits[k] = (int) v;
		order[nfields++] = k;
	}
	for (int k = 0; k < 3; k++)
		if (bits[k] < 0)
		{
			*why = psprintf("Field %s is missing: give all of time, node and seq (node:0 for none).",
							names[k]);
			return false;
		}
	if (order[0] != 0)
	{
		*why = pstrdup("The time field must come first: IDs increase with time only when it is the top field.");
		return false;
	}
	if (bits[0] + bits[1] + bits[2] > 63)
	{
		*why = psprintf("The fields add up to %d bits, at most 63 are allowed.",
						bits[0] + bits[1] + bits[2]);
		return false;
	}
	l->time_bits = bits[0];
	l->node_bits = bits[1];
	l->seq_bits = bits[2];
	l->seq_before_node = order[1] == 2;
	pfree(copy);
	return true;
}

/* Check hook of snowseq.layout: empty, or a layout ParseLayout accepts. */
static bool
LayoutCheck(char **newval, void **extra, GucSource source)
{
	LayoutSpec	l;
	char	   *why;

	if (*newval == NULL || **newval == '\0')
		return true;
	if (!ParseLayout(*newval, &l, &why))
	{
		GUC_check_errdetail("%s", why);
		GUC_check_errhint("Write the fields from the most significant on, such as 'time:41,node:10,seq:12' or 'time:39,seq:8,node:16'.");
		return false;
	}
	return true;
}

/*
 * Note whether any of the three bit settings was given: called before they
 * are defined, while a value given in the configuration is a placeholder.
 */
void
GucLayoutNoteExplicit(void)
{
	layout_bits_given = GetConfigOption("snowseq.time_bits", true, false) != NULL ||
		GetConfigOption("snowseq.node_bits", true, false) != NULL ||
		GetConfigOption("snowseq.seq_bits", true, false) != NULL;
}

/* Define snowseq.layout and snowseq.backfill_node_id. */
void
GucLayoutInit(void)
{
	char	   *raw = GucPlaceholder("snowseq.layout");

	DefineCustomStringVariable("snowseq.layout",
							   "Fields of a snowflake ID from the most significant on, such as 'time:39,seq:8,node:16'.",
							   "Empty: time | node | seq with snowseq.time_bits, node_bits and seq_bits.",
							   &snowseq_layout, "",
							   PGC_POSTMASTER, 0, LayoutCheck, NULL, NULL);
	GucRecheck("snowseq.layout", raw);
	GucDefineInt("snowseq.backfill_node_id",
				 "Node id that the IDs snowseq_id_at() makes for past instants carry (-1: unset).",
				 &snowseq_backfill_node_id, -1, -1, INT_MAX, 0);
}

/*
 * Apply snowseq.layout to the three bit settings (refusing both kinds of
 * setting at once), then check the backfill node id against the layout
 * and the node id.  Runs in the postmaster at preload: an ERROR stops the
 * server.
 */
void
GucLayoutApply(void)
{
	LayoutSpec	l;
	char	   *why;

	if (snowseq_layout != NULL && snowseq_layout[0] != '\0')
	{
		if (layout_bits_given)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowseq.layout cannot be combined with snowseq.time_bits, snowseq.node_bits or snowseq.seq_bits"),
					 errdetail("snowseq.layout = '%s' gives the widths of all fields.", snowseq_layout),
					 errhint("Set either snowseq.layout or the three bit settings, not both.")));
		/* checked by LayoutCheck already */
		if (!ParseLayout(snowseq_layout, &l, &why))
			elog(ERROR, "invalid snowseq.layout: %s", why);
		snowseq_time_bits = l.time_bits;
		snowseq_node_bits = l.node_bits;
		snowseq_seq_bits = l.seq_bits;
		snowseq_seq_before_node = l.seq_before_node;
	}

	if (snowseq_backfill_node_id >= 0)
	{
		if ((int64) snowseq_backfill_node_id >= ((int64) 1 << snowseq_node_bits))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowseq.backfill_node_id = %d does not fit in snowseq.node_bits = %d",
							snowseq_backfill_node_id, snowseq_node_bits),
					 errhint("Use a node id from 0 to %lld that no server uses as its snowseq.node_id.",
							 (long long) (((int64) 1 << snowseq_node_bits) - 1))));
		if (snowseq_backfill_node_id == snowseq_node_id)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snowseq.backfill_node_id = %d is the node id of this server", snowseq_backfill_node_id),
					 errdetail("IDs for past instants must carry a node id the clock never uses, or they could equal IDs the clock issued."),
					 errhint("Use a node id that no server uses as its snowseq.node_id or snowseq.backfill_node_id.")));
	}
}
