/*
 * serial.h
 *		Formats of serials (serial.c): 'INV-YYYYMMDD-######' parsed, the
 *		period an instant falls in, a number printed in its period.
 */
#ifndef SNOWSEQ_SERIAL_H
#define SNOWSEQ_SERIAL_H

#include "lib/stringinfo.h"
#include "pgtime.h"

/* a serial's raw counter value is period << SERIAL_PERIOD_SHIFT | k */
#define SERIAL_PERIOD_SHIFT		40
#define SERIAL_K_MASK			(((uint64) 1 << SERIAL_PERIOD_SHIFT) - 1)

typedef enum SerialPeriodKind
{
	SERIAL_PERIOD_NONE,
	SERIAL_PERIOD_YEAR,
	SERIAL_PERIOD_MONTH,
	SERIAL_PERIOD_DAY
} SerialPeriodKind;

typedef enum SerialTokenKind
{
	SERIAL_TOK_LITERAL,
	SERIAL_TOK_YYYY,
	SERIAL_TOK_YY,
	SERIAL_TOK_MM,
	SERIAL_TOK_DD,
	SERIAL_TOK_NUMBER,
	SERIAL_TOK_NODE
} SerialTokenKind;

typedef struct SerialToken
{
	SerialTokenKind kind;
	int			width;			/* digits of a number or node run */
	char	   *text;			/* literal text */
} SerialToken;

/* A parsed format, with the time zone its periods are in. */
typedef struct SerialFormat
{
	char	   *format;			/* as written */
	int			ntokens;
	SerialToken *tokens;
	SerialPeriodKind period;
	int			number_width;	/* digits of the number */
	pg_tz	   *tz;
	int64		cached_sec;		/* the second whose period is cached */
	uint64		cached_period;
} SerialFormat;

extern void SerialParse(const char *format, const char *time_zone, SerialFormat *f);
extern void SerialFree(SerialFormat *f);
extern uint64 SerialPeriodOf(SerialFormat *f, int64 ms);
extern text *SerialText(const SerialFormat *f, uint64 period, int64 number, const char *name);
extern const char *SerialPeriodText(const SerialFormat *f, uint64 period);

#endif							/* SNOWSEQ_SERIAL_H */
