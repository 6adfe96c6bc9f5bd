/*
 * serial.c
 *		Formats of serials: 'INV-YYYYMMDD-######' parsed once per definition,
 *		the period (day, month, year, in the serial's time zone) an instant
 *		falls in, and a number printed in its period.  What a serial counts
 *		and how it stays unique is counter.c's; this file only reads and
 *		writes the text.
 */
#include "postgres.h"

#include "common/int.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/datetime.h"

#include "guc.h"
#include "serial.h"
#include "snowseq.h"

#define SERIAL_MAX_FORMAT		200
#define SERIAL_MAX_WIDTH		18

/*
 * Parse a serial's format: YYYY, YY, MM and DD are the date of the period,
 * a run of # the number (zero-padded to its width), a run of @ the node id;
 * a backslash makes the next character literal; everything else is
 * literal.  ERROR with the reason for a bad format.
 */
static SerialToken *
SerialParseTokens(const char *fmt, int *ntokens, SerialPeriodKind *period)
{
	int			len = strlen(fmt);
	SerialToken *tokens = palloc0(sizeof(SerialToken) * (len + 1));
	int			n = 0;
	int			numbers = 0,
				nodes = 0;
	StringInfoData lit;

	if (len == 0 || len > SERIAL_MAX_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format must have 1 to %d characters, not %d", SERIAL_MAX_FORMAT, len),
				 errhint("For example 'INV-YYYYMMDD-######'.")));
	*period = SERIAL_PERIOD_NONE;
	initStringInfo(&lit);
	for (int i = 0; i < len;)
	{
		SerialTokenKind	kind = SERIAL_TOK_LITERAL;
		int			width = 0;

		if (fmt[i] == '\\')
		{
			if (i + 1 >= len)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("serial format \"%s\" ends in a lone backslash", fmt),
						 errhint("A backslash makes the next character literal: write \\\\ for a backslash.")));
			appendStringInfoChar(&lit, fmt[i + 1]);
			i += 2;
			continue;
		}
		if (strncmp(fmt + i, "YYYY", 4) == 0)
			kind = SERIAL_TOK_YYYY, width = 4;
		else if (strncmp(fmt + i, "YY", 2) == 0)
			kind = SERIAL_TOK_YY, width = 2;
		else if (strncmp(fmt + i, "MM", 2) == 0)
			kind = SERIAL_TOK_MM, width = 2;
		else if (strncmp(fmt + i, "DD", 2) == 0)
			kind = SERIAL_TOK_DD, width = 2;
		else if (fmt[i] == '#' || fmt[i] == '@')
		{
			kind = fmt[i] == '#' ? SERIAL_TOK_NUMBER : SERIAL_TOK_NODE;
			while (i + width < len && fmt[i + width] == fmt[i])
				width++;
		}
		if (kind == SERIAL_TOK_LITERAL)
		{
			appendStringInfoChar(&lit, fmt[i++]);
			continue;
		}
		if (lit.len > 0)
		{
			tokens[n].kind = SERIAL_TOK_LITERAL;
			tokens[n++].text = pstrdup(lit.data);
			resetStringInfo(&lit);
		}
		tokens[n].kind = kind;
		tokens[n++].width = width;
		i += width;
		if (kind == SERIAL_TOK_NUMBER)
			numbers++;
		else if (kind == SERIAL_TOK_NODE)
			nodes++;
		else if (kind == SERIAL_TOK_DD)
			*period = SERIAL_PERIOD_DAY;
		else if (kind == SERIAL_TOK_MM && *period != SERIAL_PERIOD_DAY)
			*period = SERIAL_PERIOD_MONTH;
		else if ((kind == SERIAL_TOK_YYYY || kind == SERIAL_TOK_YY) && *period == SERIAL_PERIOD_NONE)
			*period = SERIAL_PERIOD_YEAR;
		if ((kind == SERIAL_TOK_NUMBER || kind == SERIAL_TOK_NODE) && width > SERIAL_MAX_WIDTH)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("serial format \"%s\" has a run of %d '%c', at most %d are allowed",
							fmt, width, kind == SERIAL_TOK_NUMBER ? '#' : '@', SERIAL_MAX_WIDTH)));
	}
	if (lit.len > 0)
	{
		tokens[n].kind = SERIAL_TOK_LITERAL;
		tokens[n++].text = pstrdup(lit.data);
	}
	if (numbers != 1 || nodes > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format \"%s\" must have one run of # for the number%s",
						fmt, nodes > 1 ? " and at most one run of @ for the node id" : ""),
				 errhint("For example 'INV-YYYYMMDD-######'; a backslash makes the next character literal.")));
	if (*period == SERIAL_PERIOD_DAY && !(strstr(fmt, "MM") && (strstr(fmt, "YY"))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format \"%s\" has a day without its month and year", fmt),
				 errhint("A number unique per day needs the whole date: YYYYMMDD, YYMMDD or the like.")));
	if (*period == SERIAL_PERIOD_MONTH && !strstr(fmt, "YY"))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format \"%s\" has a month without its year", fmt),
				 errhint("A number unique per month needs the year too: YYYYMM or the like.")));
	*ntokens = n;
	return tokens;
}

/* The time zone named by a serial's definition; ERROR if unknown. */
static pg_tz *
SerialTimeZone(const char *name)
{
	pg_tz	   *tz = pg_tzset(name);

	if (tz == NULL || !pg_tz_acceptable(tz))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" is not recognized", name),
				 errhint("Name a time zone of pg_timezone_names, such as 'UTC' or 'Europe/Berlin'.")));
	return tz;
}

/* The period an instant (ms since 1970) falls in for a serial's format (cached per second). */
uint64
SerialPeriodOf(SerialFormat *e, int64 ms)
{
	int64		sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	pg_time_t	t = (pg_time_t) sec;
	struct pg_tm *tm;
	int64		p;

	if (likely(sec == e->cached_sec))
		return e->cached_period;
	if (e->period == SERIAL_PERIOD_NONE)
		p = 0;
	else
	{
		tm = pg_localtime(&t, e->tz);
		if (tm == NULL)
			elog(ERROR, "could not convert the time to time zone");
		switch (e->period)
		{
			case SERIAL_PERIOD_DAY:
				p = date2j(tm->tm_year + 1900, tm->tm_mon + 1, tm->tm_mday) - UNIX_EPOCH_JDATE;
				break;
			case SERIAL_PERIOD_MONTH:
				p = (int64) (tm->tm_year + 1900 - 1970) * 12 + tm->tm_mon;
				break;
			default:
				p = tm->tm_year + 1900 - 1970;
				break;
		}
	}
	if (p < 0 || p >= ((int64) 1 << (63 - SERIAL_PERIOD_SHIFT)))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("serial periods start in 1970; the clock says %lld ms since then", (long long) ms)));
	e->cached_sec = sec;
	e->cached_period = (uint64) p;
	return (uint64) p;
}

/* Append n zero-padded to width digits; ERROR when it needs more. */
static void
AppendPadded(StringInfo buf, int64 n, int width, const char *name, const char *what)
{
	char		digits[32];
	int			len = snprintf(digits, sizeof(digits), "%lld", (long long) n);

	if (len > width)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("%s %lld of serial \"%s\" does not fit in its %d digits",
						what, (long long) n, name, width),
				 errhint("Give the format more digits; the numbers of this period up to here are taken.")));
	for (int i = len; i < width; i++)
		appendStringInfoChar(buf, '0');
	appendBinaryStringInfo(buf, digits, len);
}

/* The year, month and day period p of a format starts on. */
static void
SerialPeriodDate(const SerialFormat *f, uint64 p, int *y, int *m, int *d)
{
	*y = 1970;
	*m = 1;
	*d = 1;
	switch (f->period)
	{
		case SERIAL_PERIOD_DAY:
			j2date((int) p + UNIX_EPOCH_JDATE, y, m, d);
			break;
		case SERIAL_PERIOD_MONTH:
			*y = 1970 + (int) (p / 12);
			*m = (int) (p % 12) + 1;
			break;
		case SERIAL_PERIOD_YEAR:
			*y = 1970 + (int) p;
			break;
		case SERIAL_PERIOD_NONE:
			break;
	}
}

/* The text of number in period p of a serial's format. */
text *
SerialText(const SerialFormat *f, uint64 p, int64 number, const char *name)
{
	int			y,
				m,
				d;
	StringInfoData buf;

	SerialPeriodDate(f, p, &y, &m, &d);
	initStringInfo(&buf);
	for (int i = 0; i < f->ntokens; i++)
	{
		const SerialToken *t = &f->tokens[i];

		switch (t->kind)
		{
			case SERIAL_TOK_LITERAL:
				appendStringInfoString(&buf, t->text);
				break;
			case SERIAL_TOK_YYYY:
				appendStringInfo(&buf, "%04d", y);
				break;
			case SERIAL_TOK_YY:
				appendStringInfo(&buf, "%02d", y % 100);
				break;
			case SERIAL_TOK_MM:
				appendStringInfo(&buf, "%02d", m);
				break;
			case SERIAL_TOK_DD:
				appendStringInfo(&buf, "%02d", d);
				break;
			case SERIAL_TOK_NUMBER:
				AppendPadded(&buf, number, t->width, name, "number");
				break;
			case SERIAL_TOK_NODE:
				AppendPadded(&buf, snowseq_node_id, t->width, name, "node id");
				break;
		}
	}
	return cstring_to_text_with_len(buf.data, buf.len);
}

/* Period p as people read it, for messages: 2026-11-27, 2026-11, 2026, or "". */
const char *
SerialPeriodText(const SerialFormat *f, uint64 p)
{
	int			y,
				m,
				d;

	SerialPeriodDate(f, p, &y, &m, &d);
	switch (f->period)
	{
		case SERIAL_PERIOD_DAY:
			return psprintf("%04d-%02d-%02d", y, m, d);
		case SERIAL_PERIOD_MONTH:
			return psprintf("%04d-%02d", y, m);
		case SERIAL_PERIOD_YEAR:
			return psprintf("%04d", y);
		case SERIAL_PERIOD_NONE:
			break;
	}
	return "";
}

/*
 * Parse a serial's format and time zone into f (allocated in the current
 * memory context); ERROR with the reason for a bad one.
 */
void
SerialParse(const char *format, const char *time_zone, SerialFormat *f)
{
	memset(f, 0, sizeof(*f));
	f->tokens = SerialParseTokens(format, &f->ntokens, &f->period);
	for (int i = 0; i < f->ntokens; i++)
		if (f->tokens[i].kind == SERIAL_TOK_NUMBER)
			f->number_width = f->tokens[i].width;
	f->tz = SerialTimeZone(time_zone);
	f->format = pstrdup(format);
	f->cached_sec = PG_INT64_MIN;
}

/* Free what SerialParse allocated. */
void
SerialFree(SerialFormat *f)
{
	for (int i = 0; i < f->ntokens; i++)
		if (f->tokens[i].text)
			pfree(f->tokens[i].text);
	if (f->tokens)
		pfree(f->tokens);
	if (f->format)
		pfree(f->format);
	memset(f, 0, sizeof(*f));
}
