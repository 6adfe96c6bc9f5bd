/*
 * counter.c
 *		Named counters and formatted serials: Leaf's segment mode, ticket
 *		servers and date-prefixed serial numbers, on the same durable
 *		reservation as the clock and the gene segments.
 *
 * A named counter is a reservation of its own (identity: database and
 * name), taken lock-free like every other.  Its k-th value on a node is
 *		start + (k - 1 - restart_base) * nodes + node_id % nodes,
 * so nodes interleave as ticket servers do with offset and increment.
 *
 * A serial is a counter whose reservation counts (period << 40) | k: the
 * next value is max(counter + 1, (period of now) << 40 | 1), installed with
 * compare-and-swap, so a new period starts at k = 1 by itself, a clock
 * that steps back keeps the period the counter is in, and the period a
 * number is printed with is the one in its counter value, not the caller's
 * clock: no number repeats across a period switch.
 *
 * The definitions live in the table snowseq_counters (pg_dump keeps them);
 * each backend caches them under catcache.c's rule, and triggers on the
 * table invalidate the cache.
 *
 * How far a counter has issued is kept twice.  The reservation (cluster
 * wide, in shared memory, the state file and the WAL) counts its raw
 * values.  Its floor sequence, snowseq_floor_<hash of the name> in the
 * extension's schema, holds the highest value (serials: period << 40 |
 * number) that its reservation's bound allows, written before the bound
 * is published, so before any value above it is handed out.  A sequence
 * is written outside the transaction, WAL-logged, read by pg_dump as it
 * stands (not as of the dump's snapshot) and restored with setval(); it is
 * no member of the extension, so DROP EXTENSION leaves it.  Every load of
 * a definition raises the reservation above the floor: a counter restored
 * into another database or cluster, re-created after DROP EXTENSION, after
 * its row was deleted, or with another start or node count, continues
 * above every value it issued.  Only restart => true replaces the floor
 * (in the transaction that restarts).  Advances of a counter's reservation
 * therefore happen in a backend of its database, never in the worker.
 *
 * Rights, as a sequence's USAGE: a definition row names its owner (the
 * role that created it) and its grants (aclitem[], USAGE only).  Drawing,
 * raising and reading the state need the owner's privileges or a grant to
 * the user, a role it has the privileges of, or PUBLIC.  The decision is
 * cached with the definition for one user id; a reload of the definitions
 * or a change of roles or memberships (syscache callbacks: role membership
 * is no table of snowseq's) makes it be taken again.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "common/sha2.h"
#include "commands/comment.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "catcache.h"
#include "reserve.h"
#include "sqlrun.h"
#include "testpoint.h"
#include "timeutil.h"

#define SERIAL_PERIOD_SHIFT		40
#define SERIAL_K_MASK			(((uint64) 1 << SERIAL_PERIOD_SHIFT) - 1)
#define SERIAL_MAX_FORMAT		200
#define SERIAL_MAX_WIDTH		18
#define COUNTER_MAX_NODES		(1 << 20)
#define COUNTER_FLOOR_NONE		(-1)	/* a floor sequence before any value */

typedef enum PeriodKind
{
	PERIOD_NONE,
	PERIOD_YEAR,
	PERIOD_MONTH,
	PERIOD_DAY
} PeriodKind;

typedef enum TokenKind
{
	TOK_LITERAL,
	TOK_YYYY,
	TOK_YY,
	TOK_MM,
	TOK_DD,
	TOK_NUMBER,
	TOK_NODE
} TokenKind;

typedef struct FormatToken
{
	TokenKind	kind;
	int			width;			/* digits of a number or node run */
	char	   *text;			/* literal text */
} FormatToken;

/* A definition as a backend caches it. */
typedef struct CounterEntry
{
	NameData	name;			/* hash key */
	bool		valid;
	uint64		version;		/* catalog cache generation it was loaded in */
	bool		serial;
	int64		start;
	int32		nodes;
	int64		restart_base;
	Reservation *r;
	uint64		r_generation;	/* r's generation when it was found */
	Oid			nsp;			/* the extension's schema */
	Oid			floor_seq;		/* its floor sequence, if it has one yet */
	char	   *format;			/* serials: the format */
	/* rights */
	bool		rights;			/* the table has owner and acl (1.2 on) */
	Oid			owner;			/* the owning role */
	Acl		   *acl;			/* USAGE grants, or NULL: the owner only */
	Oid			allowed_user;	/* a user found allowed, or InvalidOid */
	uint64		allowed_roles;	/* counter_roles when it was found so */
	/* serials */
	PeriodKind	period;
	pg_tz	   *tz;
	int			ntokens;
	FormatToken *tokens;
	int64		cached_sec;		/* the second whose period is cached */
	uint64		cached_period;
} CounterEntry;

/* What a call site remembers: the entry of the name it was last called with. */
typedef struct CounterCallCache
{
	int			len;
	char		name[NAMEDATALEN];
	CounterEntry *entry;
} CounterCallCache;

static CatCache counter_defs = CATCACHE_INIT("snowseq_counters");
static Oid	CounterFloorSeq(Oid nsp, const NameData *name);

static HTAB *counter_cache = NULL;
static MemoryContext counter_cxt = NULL;

/* Counts changes of roles and role memberships seen by this backend. */
static uint64 counter_roles = 1;

/* Schema-qualified name of the definitions table, in the extension's schema. */
static char *
CounterTableName(Oid fn_oid)
{
	return ExtObject(fn_oid, "snowseq_counters");
}

/* A counter's name as a NameData; ERROR if it is not a valid one. */
static void
CounterName(text *t, NameData *name)
{
	int			len = VARSIZE_ANY_EXHDR(t);

	if (len < 1 || len >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("counter name must have 1 to %d bytes, not %d", NAMEDATALEN - 1, len)));
	memset(name, 0, sizeof(*name));
	memcpy(NameStr(*name), VARDATA_ANY(t), len);
	if (memchr(NameStr(*name), '\0', len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("counter name must not contain a zero byte")));
}

/*
 * Parse a serial's format: YYYY, YY, MM and DD are the date of the period,
 * a run of # the number (zero-padded to its width), a run of @ the node id;
 * a backslash makes the next character literal; everything else is
 * literal.  ERROR with the reason for a bad format.
 */
static FormatToken *
FormatParse(const char *fmt, int *ntokens, PeriodKind *period)
{
	int			len = strlen(fmt);
	FormatToken *tokens = palloc0(sizeof(FormatToken) * (len + 1));
	int			n = 0;
	int			numbers = 0,
				nodes = 0;
	StringInfoData lit;

	if (len == 0 || len > SERIAL_MAX_FORMAT)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format must have 1 to %d characters, not %d", SERIAL_MAX_FORMAT, len),
				 errhint("For example 'INV-YYYYMMDD-######'.")));
	*period = PERIOD_NONE;
	initStringInfo(&lit);
	for (int i = 0; i < len;)
	{
		TokenKind	kind = TOK_LITERAL;
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
			kind = TOK_YYYY, width = 4;
		else if (strncmp(fmt + i, "YY", 2) == 0)
			kind = TOK_YY, width = 2;
		else if (strncmp(fmt + i, "MM", 2) == 0)
			kind = TOK_MM, width = 2;
		else if (strncmp(fmt + i, "DD", 2) == 0)
			kind = TOK_DD, width = 2;
		else if (fmt[i] == '#' || fmt[i] == '@')
		{
			kind = fmt[i] == '#' ? TOK_NUMBER : TOK_NODE;
			while (i + width < len && fmt[i + width] == fmt[i])
				width++;
		}
		if (kind == TOK_LITERAL)
		{
			appendStringInfoChar(&lit, fmt[i++]);
			continue;
		}
		if (lit.len > 0)
		{
			tokens[n].kind = TOK_LITERAL;
			tokens[n++].text = pstrdup(lit.data);
			resetStringInfo(&lit);
		}
		tokens[n].kind = kind;
		tokens[n++].width = width;
		i += width;
		if (kind == TOK_NUMBER)
			numbers++;
		else if (kind == TOK_NODE)
			nodes++;
		else if (kind == TOK_DD)
			*period = PERIOD_DAY;
		else if (kind == TOK_MM && *period != PERIOD_DAY)
			*period = PERIOD_MONTH;
		else if ((kind == TOK_YYYY || kind == TOK_YY) && *period == PERIOD_NONE)
			*period = PERIOD_YEAR;
		if ((kind == TOK_NUMBER || kind == TOK_NODE) && width > SERIAL_MAX_WIDTH)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("serial format \"%s\" has a run of %d '%c', at most %d are allowed",
							fmt, width, kind == TOK_NUMBER ? '#' : '@', SERIAL_MAX_WIDTH)));
	}
	if (lit.len > 0)
	{
		tokens[n].kind = TOK_LITERAL;
		tokens[n++].text = pstrdup(lit.data);
	}
	if (numbers != 1 || nodes > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format \"%s\" must have one run of # for the number%s",
						fmt, nodes > 1 ? " and at most one run of @ for the node id" : ""),
				 errhint("For example 'INV-YYYYMMDD-######'; a backslash makes the next character literal.")));
	if (*period == PERIOD_DAY && !(strstr(fmt, "MM") && (strstr(fmt, "YY"))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format \"%s\" has a day without its month and year", fmt),
				 errhint("A number unique per day needs the whole date: YYYYMMDD, YYMMDD or the like.")));
	if (*period == PERIOD_MONTH && !strstr(fmt, "YY"))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("serial format \"%s\" has a month without its year", fmt),
				 errhint("A number unique per month needs the year too: YYYYMM or the like.")));
	*ntokens = n;
	return tokens;
}

/* The time zone named by a serial's definition; ERROR if unknown. */
static pg_tz *
CounterTimeZone(const char *name)
{
	pg_tz	   *tz = pg_tzset(name);

	if (tz == NULL || !pg_tz_acceptable(tz))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" is not recognized", name),
				 errhint("Name a time zone of pg_timezone_names, such as 'UTC' or 'Europe/Berlin'.")));
	return tz;
}

/* The identity of a counter's reservation. */
static void
CounterId(const NameData *name, ReserveId *id)
{
	memset(id, 0, sizeof(*id));
	id->tag = RESERVE_TAG_COUNTER;
	id->dboid = MyDatabaseId;
	id->name = *name;
}

/* The reservation of a counter, taken on its first use; ERROR when none is free. */
static Reservation *
CounterReservation(const NameData *name)
{
	ReserveId	id;
	Reservation *r;

	CounterId(name, &id);
	LWLockAcquire(Snowseq->lock, LW_SHARED);
	r = ReservationFind(&id, false);
	LWLockRelease(Snowseq->lock);
	if (r != NULL)
		return r;
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	r = ReservationFind(&id, true);
	LWLockRelease(Snowseq->lock);
	if (r == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no room for counter \"%s\": all %d counters of snowseq.max_counters are taken",
						NameStr(*name), snowseq_max_counters),
				 errhint("Raise snowseq.max_counters and restart the server, or drop counters or databases no longer needed: their places are freed when one is needed, their floor sequences keep their positions.")));
	return r;
}

/*
 * Free a counter's place; caller holds Snowseq->lock exclusively and saves
 * the state.  Its generation moves first, so a backend that still holds
 * the place for the old counter sees it after its next take and hands
 * nothing out of it.
 */
static void
CounterFreePlace(Reservation *r)
{
	pg_atomic_fetch_add_u64(&r->generation, 1);
	pg_write_barrier();
	r->in_use = false;
}

/*
 * ERROR if the place a backend found for a counter was freed since.  After
 * a take the compare-and-swap was the barrier: a place freed before the
 * value was taken shows here.
 */
static void
CounterCheckPlace(const CounterEntry *e)
{
	if (unlikely(pg_atomic_read_u64(&e->r->generation) != e->r_generation))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" was dropped", NameStr(e->name)),
				 errhint("Create it again with the same definition to continue it.")));
}

/*
 * Free the places of dropped counters of this database that have a floor
 * sequence (it keeps their position: created again, they continue above
 * it).  Called inside CounterCreate's SPI connection.
 */
static void
CounterFreeDroppedCounters(const char *table, Oid nsp)
{
	int			n;
	NameData   *names;
	int			freed = 0;

	n = (int) SpiRun(psprintf("SELECT name FROM %s WHERE dropped", table), SPI_OK_SELECT);
	names = palloc0(sizeof(NameData) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

		strlcpy(NameStr(names[i]), s, NAMEDATALEN);
		if (!OidIsValid(CounterFloorSeq(nsp, &names[i])))
			NameStr(names[i])[0] = '\0';
	}
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		ReserveId	id;
		Reservation *r;

		if (NameStr(names[i])[0] == '\0')
			continue;
		CounterId(&names[i], &id);
		r = ReservationFind(&id, false);
		if (r != NULL)
		{
			CounterFreePlace(r);
			freed++;
		}
	}
	if (freed > 0)
		ReservationSave(NULL, NULL);
	LWLockRelease(Snowseq->lock);
	pfree(names);
}

/*
 * Free the places of counters whose database no longer exists (nothing can
 * take values from them again), and save the state without them.  The
 * databases are looked up without the lock held; a place is freed only if
 * it still belongs to the database found missing.
 */
static void
CounterFreeDroppedDatabases(void)
{
	Oid		   *dbs = palloc(sizeof(Oid) * SnowseqResCount);
	int			n = 0;
	int			gone = 0;

	LWLockAcquire(Snowseq->lock, LW_SHARED);
	for (int i = RESERVE_FIXED; i < SnowseqResCount; i++)
		if (SnowseqRes[i].in_use && SnowseqRes[i].id.tag == RESERVE_TAG_COUNTER)
			dbs[n++] = SnowseqRes[i].id.dboid;
	LWLockRelease(Snowseq->lock);
	for (int j = 0; j < n; j++)
		if (dbs[j] != MyDatabaseId && !SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbs[j])))
			dbs[gone++] = dbs[j];
	if (gone > 0)
	{
		LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
		for (int i = RESERVE_FIXED; i < SnowseqResCount; i++)
		{
			Reservation *r = &SnowseqRes[i];

			if (!r->in_use || r->id.tag != RESERVE_TAG_COUNTER)
				continue;
			for (int j = 0; j < gone; j++)
				if (r->id.dboid == dbs[j])
					CounterFreePlace(r);
		}
		ReservationSave(NULL, NULL);
		LWLockRelease(Snowseq->lock);
	}
	pfree(dbs);
}

/* Is there a free place for one more counter (or does it have one already)? */
static bool
CounterPlaceFree(const NameData *name)
{
	ReserveId	id;
	bool		room = false;

	CounterId(name, &id);
	LWLockAcquire(Snowseq->lock, LW_SHARED);
	if (ReservationFind(&id, false) != NULL)
		room = true;
	for (int i = RESERVE_FIXED; i < SnowseqResCount && !room; i++)
		room = !SnowseqRes[i].in_use;
	LWLockRelease(Snowseq->lock);
	return room;
}

/*
 * Is there room for one more counter?  Places of dropped databases are
 * freed first, then, if none is left, those of this database's dropped
 * counters whose position their floor sequence keeps.
 */
static bool
CounterHasRoom(const NameData *name, const char *table, Oid nsp)
{
	CounterFreeDroppedDatabases();
	if (CounterPlaceFree(name))
		return true;
	CounterFreeDroppedCounters(table, nsp);
	return CounterPlaceFree(name);
}

/* How far a counter's reservation in this database went (counter or bound); 0 if none. */
static uint64
CounterTaken(const NameData *name)
{
	ReserveId	id;
	Reservation *r;
	uint64		c = 0;

	CounterId(name, &id);
	LWLockAcquire(Snowseq->lock, LW_SHARED);
	r = ReservationFind(&id, false);
	if (r != NULL)
		c = Max(pg_atomic_read_u64(&r->counter), pg_atomic_read_u64(&r->bound));
	LWLockRelease(Snowseq->lock);
	return c;
}

/* The name of a counter's floor sequence: snowseq_floor_ and a hash of its name. */
static void
CounterFloorName(const NameData *name, char *buf)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[33];

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) NameStr(*name), strlen(NameStr(*name))) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not hash the name of counter \"%s\"", NameStr(*name));
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, 16, hex);
	hex[32] = '\0';
	snprintf(buf, NAMEDATALEN, "snowseq_floor_%s", hex);
}

/* A counter's floor sequence in the extension's schema, or InvalidOid. */
static Oid
CounterFloorSeq(Oid nsp, const NameData *name)
{
	char		seqname[NAMEDATALEN];

	CounterFloorName(name, seqname);
	return get_relname_relid(seqname, nsp);
}

/* The schema-qualified name of a counter's floor sequence, quoted. */
static char *
CounterFloorQualified(Oid nsp, const NameData *name)
{
	char		seqname[NAMEDATALEN];

	CounterFloorName(name, seqname);
	return quote_qualified_identifier(get_namespace_name(nsp), seqname);
}

/*
 * What a floor sequence's comment says about the values it covers: the kind
 * and, for a serial, the format (its numbers only mean something in it).
 */
static char *
CounterFloorComment(const NameData *name, bool serial, const char *format)
{
	if (serial)
		return psprintf("floor of snowseq serial \"%s\" in format '%s'", NameStr(*name), format);
	return psprintf("floor of snowseq counter \"%s\"", NameStr(*name));
}

/*
 * Switch to the owner of a relation (the definitions table, whose owner
 * makes the floor sequences, or a floor sequence) for a step that callers
 * with EXECUTE alone may need; saves what to switch back to.
 */
static void
CounterAsOwner(Oid relid, Oid *save_user, int *save_sec)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	GetUserIdAndSecContext(save_user, save_sec);
	SetUserIdAndSecContext(owner, *save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/* Read a floor sequence (as its owner): the highest value covered, or COUNTER_FLOOR_NONE. */
static int64
CounterFloorRead(Oid seq)
{
	Oid			save_user;
	int			save_sec;
	int64		floor;
	bool		isnull;

	CounterAsOwner(seq, &save_user, &save_sec);
	SPI_connect();
	if (SPI_execute(psprintf("SELECT last_value FROM %s",
							 quote_qualified_identifier(get_namespace_name(get_rel_namespace(seq)),
														get_rel_name(seq))),
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read floor sequence %u", seq);
	floor = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	return floor;
}

/* Write a floor sequence as its owner (not undone by a rollback, like nextval()). */
static void
CounterFloorWrite(Oid seq, int64 floor)
{
	Oid			save_user;
	int			save_sec;

	CounterAsOwner(seq, &save_user, &save_sec);
	DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq), Int64GetDatum(floor));
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * Make a counter's floor sequence, covering `floor`; with replace, in place
 * of the one it has (a restart, undone if its transaction is).  One maker
 * at a time: the lock on the definitions is held to the end of the
 * transaction, so a second maker finds the first one's sequence.
 */
static Oid
CounterFloorMake(Oid nsp, Oid defs_relid, const NameData *name, const char *comment,
				 int64 floor, bool replace)
{
	char	   *qualified = CounterFloorQualified(nsp, name);
	Oid			save_user;
	int			save_sec;
	Oid			seq;

	LockRelationOid(defs_relid, ShareUpdateExclusiveLock);
	seq = CounterFloorSeq(nsp, name);
	if (OidIsValid(seq) && !replace)
		return seq;
	CounterAsOwner(defs_relid, &save_user, &save_sec);
	SPI_connect();
	if (OidIsValid(seq))
		SpiRun(psprintf("DROP SEQUENCE %s", qualified), SPI_OK_UTILITY);
	SpiRun(psprintf("CREATE SEQUENCE %s AS bigint MINVALUE %d START %d NO CYCLE",
					qualified, COUNTER_FLOOR_NONE, COUNTER_FLOOR_NONE), SPI_OK_UTILITY);
	SpiRun(psprintf("COMMENT ON SEQUENCE %s IS %s", qualified, quote_literal_cstr(comment)),
		   SPI_OK_UTILITY);
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	CommandCounterIncrement();
	seq = CounterFloorSeq(nsp, name);
	if (!OidIsValid(seq))
		elog(ERROR, "could not find %s after creating it", qualified);
	if (floor != COUNTER_FLOOR_NONE)
		CounterFloorWrite(seq, floor);
	return seq;
}

/* The k-th value of a counter or serial number (k from 1), saturating at the end of bigint. */
static int64
CounterValueOf(const CounterEntry *e, uint64 k)
{
	int64		v;

	if (k - 1 > (uint64) PG_INT64_MAX ||
		pg_mul_s64_overflow((int64) (k - 1), e->nodes, &v) ||
		pg_add_s64_overflow(v, e->start + snowseq_node_id % e->nodes, &v))
		return PG_INT64_MAX;
	return v;
}

/*
 * The floor that covers every value up to raw counter value c under a
 * definition: a counter's value; a serial's period << 40 | number, or the
 * whole period (its successor << 40) when the number does not fit in 40
 * bits.  COUNTER_FLOOR_NONE when c covers nothing.
 */
static int64
CounterFloorOf(const CounterEntry *e, uint64 c)
{
	if (!e->serial)
		return c <= (uint64) e->restart_base ? COUNTER_FLOOR_NONE :
			CounterValueOf(e, c - (uint64) e->restart_base);
	else
	{
		uint64		p = c >> SERIAL_PERIOD_SHIFT;
		uint64		k = c & SERIAL_K_MASK;
		int64		number = k == 0 ? 0 : CounterValueOf(e, k);

		if (c == 0)
			return COUNTER_FLOOR_NONE;
		if ((uint64) number > SERIAL_K_MASK)
			return (int64) ((p + 1) << SERIAL_PERIOD_SHIFT);
		return (int64) ((p << SERIAL_PERIOD_SHIFT) | (uint64) number);
	}
}

/* How many values of a counter's sequence (from k = 1) are at most v. */
static uint64
CounterCountUpTo(const CounterEntry *e, int64 v)
{
	int64		first;

	if (pg_add_s64_overflow(e->start, snowseq_node_id % e->nodes, &first) || v < first)
		return 0;
	return (uint64) ((v - first) / e->nodes) + 1;
}

/*
 * The raw counter value a counter must stand at so that its next value is
 * above floor f: every value it hands out after that is above f.
 */
static uint64
CounterRawAbove(const CounterEntry *e, int64 f)
{
	if (f < 0)
		return 0;
	if (!e->serial)
		return (uint64) e->restart_base + CounterCountUpTo(e, f);
	else
	{
		uint64		p = (uint64) f >> SERIAL_PERIOD_SHIFT;
		uint64		m = CounterCountUpTo(e, (int64) ((uint64) f & SERIAL_K_MASK));

		if (m >= SERIAL_K_MASK)
			return (p + 1) << SERIAL_PERIOD_SHIFT;
		return (p << SERIAL_PERIOD_SHIFT) | m;
	}
}

/*
 * A fingerprint of how a definition maps raw counter values to values (in
 * shared memory only: which definition the reservation's floor is of).
 * Never 0, which a new place holds.
 */
static uint64
CounterDefTag(const CounterEntry *e)
{
	int64		parts[4] = {e->start, e->restart_base, e->nodes, e->serial};
	uint64		h = hash_bytes_extended((const unsigned char *) parts, sizeof(parts), 0);

	if (e->serial && e->format != NULL)
		h ^= hash_bytes_extended((const unsigned char *) e->format, strlen(e->format), 1);
	return h == 0 ? 1 : h;
}

/*
 * A definition was loaded: find its floor sequence and, unless the
 * reservation already covers that floor under this very definition (it
 * wrote it, or absorbed it before: owner_mark is the floor + 1, owner_tag
 * the definition's), raise the reservation above it and to its bound, so
 * that the next value advances it and writes a floor of this definition.
 * That is a counter restored into another database or cluster, re-created
 * after DROP EXTENSION or after its row was deleted, its row changed by
 * hand, or the server restarted (where the counter stands at its bound
 * anyway).
 */
static void
CounterFloorLoad(CounterEntry *e)
{
	int64		floor;
	uint64		tag = CounterDefTag(e);

	e->floor_seq = CounterFloorSeq(e->nsp, &e->name);
	if (!OidIsValid(e->floor_seq))
		return;
	floor = CounterFloorRead(e->floor_seq);
	if (floor == COUNTER_FLOOR_NONE)
		return;
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	if (e->r->owner_mark < (uint64) floor + 1 || e->r->owner_tag != tag)
	{
		uint64		bound = pg_atomic_read_u64(&e->r->bound);

		ReserveRaise(e->r, Max(CounterRawAbove(e, floor), bound));
		e->r->owner_mark = (uint64) floor + 1;
		e->r->owner_tag = tag;
	}
	LWLockRelease(Snowseq->lock);
}

/* A role or a membership changed: rights found before are looked at again. */
static void
CounterRolesChanged(Datum arg, int cacheid, uint32 hashvalue)
{
	counter_roles++;
}

/* Does the definitions table in schema nsp have owners and grants (1.2 on)? */
static bool
CounterHasRights(Oid nsp)
{
	Oid			relid = get_relname_relid("snowseq_counters", nsp);

	return OidIsValid(relid) &&
		get_attnum(relid, "owner") != InvalidAttrNumber &&
		get_attnum(relid, "acl") != InvalidAttrNumber;
}

/* The grants of a definition row as stored: NULL for none (NULL or empty). */
static Acl *
CounterAcl(Datum d, bool isnull)
{
	Acl		   *acl;

	if (isnull)
		return NULL;
	acl = DatumGetAclPCopy(d);
	if (ARR_NDIM(acl) == 0)
		return NULL;
	return acl;
}

/*
 * May user draw from a counter and see its state: it has the privileges of
 * the owner (is it, a member of its role or a superuser), or USAGE granted
 * to it, to a role whose privileges it has, or to PUBLIC.
 */
static bool
CounterMayUse(Oid user, Oid owner, Acl *acl)
{
	if (has_privs_of_role(user, owner))
		return true;
	return acl != NULL && aclmask(acl, user, owner, ACL_USAGE, ACLMASK_ANY) != 0;
}

/* ERROR: the current user may not use this counter. */
static void
CounterDenied(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for counter \"%s\"", name),
			 errhint("The counter's owner, or a member of the owner's role, may grant it with snowseq_grant_counter(name, role).")));
}

/*
 * ERROR unless the current user may use a cached counter.  The decision is
 * kept for one user id until the definition is reloaded (any change of the
 * table, a grant or a revoke among them) or a role or membership changes.
 */
static inline void
CounterCheckUse(CounterEntry *e)
{
	Oid			user;

	if (!e->rights)
		return;
	user = GetUserId();
	if (likely(e->allowed_user == user && e->allowed_roles == counter_roles))
		return;
	if (!CounterMayUse(user, e->owner, e->acl))
		CounterDenied(NameStr(e->name));
	e->allowed_user = user;
	e->allowed_roles = counter_roles;
}

/*
 * Load a definition into the cache; ERROR if there is none.  catcache.c's
 * rule: the generation is read before the definition, with the newest
 * snapshot, so a drop committed meanwhile leaves the entry stale.
 */
static CounterEntry *
CounterLoad(Oid fn_oid, const NameData *name)
{
	char	   *table = CounterTableName(fn_oid);
	uint64		stamp = CatCacheBeginLoad(&counter_defs, fn_oid);
	Snapshot	snapshot;
	CounterEntry *e;
	bool		found;
	Datum		arg = CStringGetTextDatum(NameStr(*name));
	Oid			argtype = TEXTOID;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char	   *kind;
	MemoryContext old;
	bool		rights;

	if (counter_cache == NULL)
	{
		HASHCTL		ctl;

		counter_cxt = AllocSetContextCreate(TopMemoryContext, "snowseq counters",
											ALLOCSET_SMALL_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(CounterEntry);
		ctl.hcxt = counter_cxt;
		counter_cache = hash_create("snowseq counters", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterSyscacheCallback(AUTHOID, CounterRolesChanged, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, CounterRolesChanged, (Datum) 0);
	}
	rights = CounterHasRights(ExtNamespace(fn_oid));

	SNOWSEQ_TESTPOINT("counter_cache_load");
	snapshot = CatCacheSnapshot();
	SPI_connect();
	if (SPI_execute_with_args(psprintf("SELECT kind, start, nodes, restart_base, format, time_zone, dropped%s "
									   "FROM %s WHERE name OPERATOR(pg_catalog.=) $1",
									   rights ? ", owner, acl" : "", table),
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read %s", table);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" does not exist", NameStr(*name)),
				 errhint("Create it with snowseq_create_counter() or snowseq_create_serial().")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	if (DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" was dropped", NameStr(*name)),
				 errhint("Create it again with the same definition to continue it.")));

	e = hash_search(counter_cache, NameStr(*name), HASH_ENTER, &found);
	if (found && e->tokens != NULL)
	{
		for (int i = 0; i < e->ntokens; i++)
			if (e->tokens[i].text)
				pfree(e->tokens[i].text);
		pfree(e->tokens);
	}
	if (found && e->format != NULL)
		pfree(e->format);
	if (found && e->acl != NULL)
		pfree(e->acl);
	e->valid = false;
	e->tokens = NULL;
	e->ntokens = 0;
	e->format = NULL;
	e->acl = NULL;
	e->rights = rights;
	e->owner = InvalidOid;
	e->allowed_user = InvalidOid;
	if (rights)
	{
		Datum		d;

		e->owner = DatumGetObjectId(SPI_getbinval(tup, desc, 8, &isnull));
		d = SPI_getbinval(tup, desc, 9, &isnull);
		old = MemoryContextSwitchTo(counter_cxt);
		e->acl = CounterAcl(d, isnull);
		MemoryContextSwitchTo(old);
		/* refused before the counter takes a place or reads its floor */
		if (!CounterMayUse(GetUserId(), e->owner, e->acl))
			CounterDenied(NameStr(*name));
		e->allowed_user = GetUserId();
		e->allowed_roles = counter_roles;
	}
	kind = SPI_getvalue(tup, desc, 1);
	e->serial = strcmp(kind, "serial") == 0;
	e->start = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
	e->nodes = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
	e->restart_base = DatumGetInt64(SPI_getbinval(tup, desc, 4, &isnull));
	e->period = PERIOD_NONE;
	e->tz = NULL;
	e->cached_sec = PG_INT64_MIN;
	if (e->serial)
	{
		char	   *fmt = SPI_getvalue(tup, desc, 5);
		char	   *tzname = SPI_getvalue(tup, desc, 6);

		old = MemoryContextSwitchTo(counter_cxt);
		e->tokens = FormatParse(fmt, &e->ntokens, &e->period);
		e->format = pstrdup(fmt);
		MemoryContextSwitchTo(old);
		e->tz = CounterTimeZone(tzname);
	}
	SPI_finish();
	CatCacheSnapshotDone(snapshot);
	e->r = CounterReservation(name);
	e->r_generation = pg_atomic_read_u64(&e->r->generation);
	e->nsp = ExtNamespace(fn_oid);
	CounterFloorLoad(e);
	e->version = stamp;
	e->valid = true;
	return e;
}

/* The cached definition of the counter named by argument 0 of a call. */
static CounterEntry *
CounterLookup(FunctionCallInfo fcinfo, bool serial)
{
	CounterCallCache *cc = fcinfo->flinfo->fn_extra;
	text	   *t;
	int			len;
	CounterEntry *e = NULL;
	NameData	name;
	uint64		generation;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("counter name must not be NULL")));
	t = PG_GETARG_TEXT_PP(0);
	len = VARSIZE_ANY_EXHDR(t);
	if (cc != NULL && cc->len == len && memcmp(cc->name, VARDATA_ANY(t), len) == 0)
		e = cc->entry;
	generation = CatCacheGeneration(&counter_defs);
	if (likely(e != NULL && e->valid && e->version == generation))
	{
		CounterCheckUse(e);
		return e;
	}

	CounterName(t, &name);
	if (counter_cache != NULL)
		e = hash_search(counter_cache, NameStr(name), HASH_FIND, NULL);
	if (e == NULL || !e->valid || e->version != generation)
		e = CounterLoad(fcinfo->flinfo->fn_oid, &name);
	CounterCheckUse(e);
	if (e->serial != serial)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("snowseq counter \"%s\" is a %s", NameStr(name), e->serial ? "serial" : "counter"),
				 errhint("Use %s() for it.", e->serial ? "snowseq_serial" : "snowseq_counter_next")));
	if (cc == NULL)
		cc = fcinfo->flinfo->fn_extra =
			MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CounterCallCache));
	cc->len = len;
	memcpy(cc->name, VARDATA_ANY(t), len);
	cc->entry = e;
	return e;
}

/*
 * How a counter's reservation may advance: within bigint (what a counter
 * may take), its rate of values issued.
 */
static void
CounterSpec(ReserveSpec *spec, uint64 floor)
{
	spec->floor = floor;
	spec->ceiling = PG_INT64_MAX;
	spec->block_min = snowseq_segment_block_min;
	spec->block_max = snowseq_segment_block_max;
	spec->margin_min = 0;
	spec->jumps_are_use = false;
}

/*
 * Advance a counter's reservation so that raw value `need` may be taken (0:
 * past the low-water mark, skipped when another backend is at it), its
 * floor first: the floor sequence covers the new bound before the bound is
 * published.  One advancer per counter at a time (a lock on its floor
 * sequence, released at once).  A read-only transaction or a parallel
 * worker cannot write the floor: it takes values up to the bound and then
 * stops with an ERROR.
 */
static void
CounterAdvance(CounterEntry *e, uint64 need)
{
	Reservation *r = e->r;
	ReserveSpec spec;
	uint64		bound;
	uint64		next;

	if (XactReadOnly || IsInParallelMode())
	{
		if (need == 0)
			return;
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("snowseq counter \"%s\" must record how far it issued before it issues more, which a read-only transaction cannot",
						NameStr(e->name)),
				 errhint("Take values of this counter in a read-write transaction (it records its position about once per %d ms of its traffic).",
						 snowseq_reserve_buffer_ms / 2)));
	}
	if (!OidIsValid(e->floor_seq) ||
		!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->floor_seq)))
		e->floor_seq = CounterFloorMake(e->nsp, get_relname_relid("snowseq_counters", e->nsp), &e->name,
										CounterFloorComment(&e->name, e->serial, e->format),
										CounterFloorOf(e, pg_atomic_read_u64(&r->bound)), false);
	if (need != 0)
		LockRelationOid(e->floor_seq, ShareUpdateExclusiveLock);
	else if (!ConditionalLockRelationOid(e->floor_seq, ShareUpdateExclusiveLock))
		return;
	CounterCheckPlace(e);

	/*
	 * Past the low-water mark, the next block goes above the bound even if
	 * the rate fell: otherwise every value up to the bound would come here.
	 */
	CounterSpec(&spec, 0);
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	bound = pg_atomic_read_u64(&r->bound);
	next = bound;
	if (need == 0 && pg_atomic_read_u64(&r->counter) > pg_atomic_read_u64(&r->low_water) &&
		bound < (uint64) PG_INT64_MAX)
		need = bound + 1;
	if (need > bound)
		next = ReserveNextBound(r, &spec, need);
	LWLockRelease(Snowseq->lock);
	if (next > bound)
	{
		CounterFloorWrite(e->floor_seq, CounterFloorOf(e, next));
		SNOWSEQ_TESTPOINT("counter_floor_written");
		spec.ceiling = next;
		LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
		if (pg_atomic_read_u64(&r->generation) != e->r_generation)
		{
			LWLockRelease(Snowseq->lock);
			CounterCheckPlace(e);
		}
		ReserveAdvance(r, &spec, need);
		r->owner_mark = (uint64) CounterFloorOf(e, next) + 1;
		r->owner_tag = CounterDefTag(e);
		LWLockRelease(Snowseq->lock);
		ConditionVariableBroadcast(&Snowseq->advanced);
	}
	UnlockRelationOid(e->floor_seq, ShareUpdateExclusiveLock);
}

/*
 * Take the next value of a counter's reservation at or above floor and
 * below limit; false when the limit is reached.  Lock-free but for the
 * advance.
 */
static bool
CounterTake(CounterEntry *e, uint64 floor, uint64 limit, uint64 *value)
{
	uint64		last;

	for (;;)
	{
		ReserveResult rr = ReserveTake(e->r, floor, 1, limit, value, &last);

		if (likely(rr == RESERVE_OK))
		{
			CounterCheckPlace(e);
			return true;
		}
		if (rr == RESERVE_LIMIT)
			return false;
		if (rr == RESERVE_LOW)
		{
			CounterCheckPlace(e);
			CounterAdvance(e, 0);
			return true;
		}
		CounterAdvance(e, last);
	}
}

/* The k-th value of a counter on this node. */
static int64
CounterValue(const CounterEntry *e, uint64 k, const char *name)
{
	int64		v;

	if (pg_mul_s64_overflow((int64) (k - 1 - (uint64) e->restart_base), e->nodes, &v) ||
		pg_add_s64_overflow(v, e->start + snowseq_node_id % e->nodes, &v))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq counter \"%s\" reached the end of bigint", name)));
	return v;
}

/* The period an instant falls in for a serial (cached per second). */
static uint64
SerialPeriod(CounterEntry *e, int64 ms)
{
	int64		sec = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	pg_time_t	t = (pg_time_t) sec;
	struct pg_tm *tm;
	int64		p;

	if (likely(sec == e->cached_sec))
		return e->cached_period;
	if (e->period == PERIOD_NONE)
		p = 0;
	else
	{
		tm = pg_localtime(&t, e->tz);
		if (tm == NULL)
			elog(ERROR, "could not convert the time to time zone");
		switch (e->period)
		{
			case PERIOD_DAY:
				p = date2j(tm->tm_year + 1900, tm->tm_mon + 1, tm->tm_mday) - UNIX_EPOCH_JDATE;
				break;
			case PERIOD_MONTH:
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

/* A serial's text for a counter value (period << 40 | k). */
static text *
SerialFormat(const CounterEntry *e, uint64 c, const char *name)
{
	uint64		p = c >> SERIAL_PERIOD_SHIFT;
	int64		number = CounterValue(e, c & SERIAL_K_MASK, name);
	int			y = 1970,
				m = 1,
				d = 1;
	StringInfoData buf;

	switch (e->period)
	{
		case PERIOD_DAY:
			j2date((int) p + UNIX_EPOCH_JDATE, &y, &m, &d);
			break;
		case PERIOD_MONTH:
			y = 1970 + (int) (p / 12);
			m = (int) (p % 12) + 1;
			break;
		case PERIOD_YEAR:
			y = 1970 + (int) p;
			break;
		case PERIOD_NONE:
			break;
	}
	initStringInfo(&buf);
	for (int i = 0; i < e->ntokens; i++)
	{
		const FormatToken *t = &e->tokens[i];

		switch (t->kind)
		{
			case TOK_LITERAL:
				appendStringInfoString(&buf, t->text);
				break;
			case TOK_YYYY:
				appendStringInfo(&buf, "%04d", y);
				break;
			case TOK_YY:
				appendStringInfo(&buf, "%02d", y % 100);
				break;
			case TOK_MM:
				appendStringInfo(&buf, "%02d", m);
				break;
			case TOK_DD:
				appendStringInfo(&buf, "%02d", d);
				break;
			case TOK_NUMBER:
				AppendPadded(&buf, number, t->width, name, "number");
				break;
			case TOK_NODE:
				AppendPadded(&buf, snowseq_node_id, t->width, name, "node id");
				break;
		}
	}
	return cstring_to_text_with_len(buf.data, buf.len);
}

PG_FUNCTION_INFO_V1(snowseq_counter_next);
PG_FUNCTION_INFO_V1(snowseq_serial);

/* snowseq_counter_next(name) -> bigint: the next value of a named counter. */
Datum
snowseq_counter_next(PG_FUNCTION_ARGS)
{
	CounterEntry *e;
	uint64		k;

	SnowseqCheckUsable();
	e = CounterLookup(fcinfo, false);
	if (unlikely(!CounterTake(e, (uint64) e->restart_base + 1, PG_INT64_MAX, &k)))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq counter \"%s\" ran out", NameStr(e->name))));
	PG_RETURN_INT64(CounterValue(e, k, NameStr(e->name)));
}

/* snowseq_serial(name) -> text: the next formatted serial number. */
Datum
snowseq_serial(PG_FUNCTION_ARGS)
{
	CounterEntry *e;
	uint64		p;
	uint64		c;

	SnowseqCheckUsable();
	e = CounterLookup(fcinfo, true);
	p = SerialPeriod(e, TimeWallMs());
	for (;;)
	{
		if (CounterTake(e, (p << SERIAL_PERIOD_SHIFT) | 1, (p + 1) << SERIAL_PERIOD_SHIFT, &c))
			break;
		/* the counter is in a later period (the clock went back), or this one is full */
		if ((pg_atomic_read_u64(&e->r->counter) >> SERIAL_PERIOD_SHIFT) > p)
			p = pg_atomic_read_u64(&e->r->counter) >> SERIAL_PERIOD_SHIFT;
		else
			ereport(ERROR,
					(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
					 errmsg("serial \"%s\" ran out of numbers for this period", NameStr(e->name))));
	}
	PG_RETURN_TEXT_P(SerialFormat(e, c, NameStr(e->name)));
}

/*
 * A counter of this name has no definition row: what its floor sequence
 * and its reservation say it issued decides.  Returns its restart_base
 * (the raw counter when it starts over) and whether its floor sequence
 * must be replaced; ERROR when values it issued could be issued again.
 */
static int64
CounterCreateFresh(Oid nsp, const NameData *name, bool serial, const char *comment,
				   bool restart, bool *replace)
{
	Oid			seq = CounterFloorSeq(nsp, name);
	uint64		taken = CounterTaken(name);

	*replace = false;
	if (OidIsValid(seq))
	{
		int64		floor = CounterFloorRead(seq);
		char	   *had = GetComment(seq, RelationRelationId, 0);

		if (restart)
		{
			*replace = true;
			return (int64) taken;
		}
		if (floor != COUNTER_FLOOR_NONE && (had == NULL || strcmp(had, comment) != 0))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("snowseq counter \"%s\" issued values before as another kind or format",
							NameStr(*name)),
					 errdetail("Its floor sequence says: %s.", had ? had : "(nothing)"),
					 errhint(serial ?
							 "Create the serial with the format it had to continue it, or create a serial under a new name." :
							 "Create it as the kind it was to continue it, or pass restart => true to start it over and issue its old values again.")));
		/* continued above its floor when loaded */
		return 0;
	}
	if (taken == 0)
		return 0;
	if (restart)
		return (int64) taken;
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("snowseq counter \"%s\" issued values before, under a definition that is gone",
					NameStr(*name)),
			 errdetail("Its reservation in this database has taken values, but no floor sequence says which, so a new definition could issue them again."),
			 errhint(serial ? "Create a serial under a new name." :
					 "Pass restart => true to start it over and issue its old values again, or create a counter under a new name.")));
	return 0;					/* keep the compiler quiet */
}

/*
 * Create a counter or a serial, or continue a dropped one with the same
 * definition, or, with restart, start it over.  Its place among the
 * reservations and its floor sequence are taken here, not at first use.
 */
static void
CounterCreate(FunctionCallInfo fcinfo, bool serial, NameData *name, int64 start, int32 nodes,
			  const char *format, const char *tzname, bool restart)
{
	char	   *table = CounterTableName(fcinfo->flinfo->fn_oid);
	Oid			nsp = ExtNamespace(fcinfo->flinfo->fn_oid);
	Oid			types[7] = {TEXTOID, TEXTOID, INT8OID, INT4OID, TEXTOID, TEXTOID, INT8OID};
	Datum		values[7];
	char		nulls[7] = {' ', ' ', ' ', ' ', ' ', ' ', ' '};
	const char *kind = serial ? "serial" : "counter";
	char	   *comment = CounterFloorComment(name, serial, format);
	bool		replace = false;
	Reservation *r;
	CounterEntry def;

	if (start < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start must not be negative, not %lld", (long long) start)));
	if (nodes < 1 || nodes > COUNTER_MAX_NODES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("nodes must be between 1 and %d, not %d", COUNTER_MAX_NODES, nodes),
				 errhint("nodes is how many servers interleave their values: each takes every nodes-th value, offset by its node id.")));
	ShmemCheckPreloaded();
	if (serial)
	{
		int			n;
		PeriodKind	p;

		(void) FormatParse(format, &n, &p);
		(void) CounterTimeZone(tzname);
	}

	values[0] = CStringGetTextDatum(NameStr(*name));
	values[1] = CStringGetTextDatum(kind);
	values[2] = Int64GetDatum(start);
	values[3] = Int32GetDatum(nodes);
	values[4] = serial ? CStringGetTextDatum(format) : (Datum) 0;
	values[5] = serial ? CStringGetTextDatum(tzname) : (Datum) 0;
	nulls[4] = nulls[5] = serial ? ' ' : 'n';

	SPI_connect();
	SpiRunArgs(psprintf("SELECT kind, start, nodes, format, time_zone, dropped, restart_base FROM %s "
						"WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE", table),
			   1, types, values, nulls, SPI_OK_SELECT);
	memset(&def, 0, sizeof(def));
	def.serial = serial;
	def.start = start;
	def.nodes = nodes;
	if (SPI_processed == 0)
	{
		Oid			itypes[8];
		Datum		ivalues[8];
		char		inulls[8];
		bool		rights = CounterHasRights(nsp);

		def.restart_base = CounterCreateFresh(nsp, name, serial, comment, restart, &replace);
		values[6] = Int64GetDatum(def.restart_base);
		/* the creating role owns it (1.2 on); no one else may use it yet */
		memcpy(itypes, types, sizeof(types));
		memcpy(ivalues, values, sizeof(values));
		memcpy(inulls, nulls, sizeof(nulls));
		itypes[7] = REGROLEOID;
		ivalues[7] = ObjectIdGetDatum(GetUserId());
		inulls[7] = ' ';
		SpiRunArgs(psprintf("INSERT INTO %s (name, kind, start, nodes, format, time_zone, restart_base%s) "
							"VALUES ($1, $2, $3, $4, $5, $6, $7%s)", table,
							rights ? ", owner" : "", rights ? ", $8" : ""),
				   rights ? 8 : 7, itypes, ivalues, inulls, SPI_OK_INSERT);
	}
	else
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *old_format = SPI_getvalue(tup, desc, 4);
		char	   *old_tz = SPI_getvalue(tup, desc, 5);
		bool		same = strcmp(SPI_getvalue(tup, desc, 1), kind) == 0 &&
			DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull)) == start &&
			DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull)) == nodes &&
			((old_format == NULL && format == NULL) ||
			 (old_format && format && strcmp(old_format, format) == 0)) &&
			((old_tz == NULL && tzname == NULL) || (old_tz && tzname && strcmp(old_tz, tzname) == 0));

		if (!DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull)))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("snowseq counter \"%s\" already exists", NameStr(*name))));
		def.restart_base = DatumGetInt64(SPI_getbinval(tup, desc, 7, &isnull));
		if (same && !restart)
			SpiRunArgs(psprintf("UPDATE %s SET dropped = false WHERE name OPERATOR(pg_catalog.=) $1", table),
					   1, types, values, nulls, SPI_OK_UPDATE);
		else if (!restart)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("a dropped snowseq counter \"%s\" had another definition", NameStr(*name)),
					 errdetail("Continuing it under another start, node count, format or time zone could issue its values again."),
					 errhint("Create it with the definition it had to continue it, or pass restart => true to start it over and issue its old values again.")));
		else if (serial)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a serial cannot start over"),
					 errhint("Create a serial under a new name.")));
		else
		{
			/* start over above what was taken: restart_base is its counter */
			Datum		base = Int64GetDatum((int64) CounterTaken(name));
			Oid			btypes[5] = {TEXTOID, INT8OID, INT8OID, INT4OID, TEXTOID};
			Datum		bvalues[5] = {values[0], base, values[2], values[3], values[1]};

			def.restart_base = DatumGetInt64(base);
			replace = true;
			SpiRunArgs(psprintf("UPDATE %s SET dropped = false, restart_base = $2, start = $3, nodes = $4, "
								"kind = $5, format = NULL, time_zone = NULL "
								"WHERE name OPERATOR(pg_catalog.=) $1", table),
					   5, btypes, bvalues, NULL, SPI_OK_UPDATE);
		}
	}
	if (!CounterHasRoom(name, table, nsp))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("no room for counter \"%s\": all %d counters of snowseq.max_counters are taken",
						NameStr(*name), snowseq_max_counters),
				 errhint("Raise snowseq.max_counters and restart the server, or drop counters or databases no longer needed: their places are freed when one is needed, their floor sequences keep their positions.")));
	SPI_finish();

	/*
	 * Its place, and a floor covering what its reservation allows so far.
	 * A definition other than the one its floor was written under is
	 * raised above the floor when it is loaded.
	 */
	r = CounterReservation(name);
	(void) CounterFloorMake(nsp, get_relname_relid("snowseq_counters", nsp), name, comment,
							CounterFloorOf(&def, pg_atomic_read_u64(&r->bound)), replace);
}

PG_FUNCTION_INFO_V1(snowseq_create_counter);
PG_FUNCTION_INFO_V1(snowseq_create_serial);
PG_FUNCTION_INFO_V1(snowseq_drop_counter);
PG_FUNCTION_INFO_V1(snowseq_counter_raise);
PG_FUNCTION_INFO_V1(snowseq_counters_changed);

/* ERROR for a NULL argument that must have a value. */
static void
CounterRequire(FunctionCallInfo fcinfo, int arg, const char *what)
{
	if (PG_ARGISNULL(arg))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
}

/* snowseq_create_counter(name, start, nodes, restart) */
Datum
snowseq_create_counter(PG_FUNCTION_ARGS)
{
	NameData	name;

	CounterRequire(fcinfo, 0, "counter name");
	CounterRequire(fcinfo, 1, "start");
	CounterRequire(fcinfo, 2, "nodes");
	CounterRequire(fcinfo, 3, "restart");
	CounterName(PG_GETARG_TEXT_PP(0), &name);
	CounterCreate(fcinfo, false, &name, PG_GETARG_INT64(1), PG_GETARG_INT32(2), NULL, NULL,
				  PG_GETARG_BOOL(3));
	PG_RETURN_VOID();
}

/* snowseq_create_serial(name, format, time_zone, start, nodes) */
Datum
snowseq_create_serial(PG_FUNCTION_ARGS)
{
	NameData	name;

	CounterRequire(fcinfo, 0, "serial name");
	CounterRequire(fcinfo, 1, "format");
	CounterRequire(fcinfo, 2, "time_zone");
	CounterRequire(fcinfo, 3, "start");
	CounterRequire(fcinfo, 4, "nodes");
	CounterName(PG_GETARG_TEXT_PP(0), &name);
	CounterCreate(fcinfo, true, &name, PG_GETARG_INT64(3), PG_GETARG_INT32(4),
				  text_to_cstring(PG_GETARG_TEXT_PP(1)), text_to_cstring(PG_GETARG_TEXT_PP(2)), false);
	PG_RETURN_VOID();
}

/* snowseq_drop_counter(name): no more values; its place and its values are kept. */
Datum
snowseq_drop_counter(PG_FUNCTION_ARGS)
{
	NameData	name;
	char	   *table = CounterTableName(fcinfo->flinfo->fn_oid);
	Oid			type = TEXTOID;
	Datum		value;

	CounterRequire(fcinfo, 0, "counter name");
	CounterName(PG_GETARG_TEXT_PP(0), &name);
	value = CStringGetTextDatum(NameStr(name));
	SPI_connect();
	if (SpiRunArgs(psprintf("UPDATE %s SET dropped = true WHERE name OPERATOR(pg_catalog.=) $1 AND NOT dropped",
							table), 1, &type, &value, NULL, SPI_OK_UPDATE) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" does not exist", NameStr(name))));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * snowseq_counter_raise(name, above): the counter's next value is above
 * `above` (after a restore into a new cluster, or when taking over from a
 * sequence).  Never lowers; durable before it returns.
 */
Datum
snowseq_counter_raise(PG_FUNCTION_ARGS)
{
	CounterEntry *e;
	int64		above;
	uint64		raw;
	uint64		next;

	CounterRequire(fcinfo, 1, "above");
	SnowseqCheckUsable();
	e = CounterLookup(fcinfo, false);
	above = PG_GETARG_INT64(1);
	/* the raw counter whose next value is the first above `above` */
	raw = CounterRawAbove(e, above);
	next = Max(raw, pg_atomic_read_u64(&e->r->counter)) + 1;
	/* the next value must be one snowseq_counter_next can hand out */
	if (next >= (uint64) PG_INT64_MAX ||
		CounterValueOf(e, next - (uint64) e->restart_base) == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq counter \"%s\" has no value above %lld before the end of bigint",
						NameStr(e->name), (long long) above),
				 errhint("Raise it to a smaller value, or use a new counter.")));
	ReserveRaise(e->r, raw);
	/* durable before it returns: the bound and the floor cover the raise */
	CounterAdvance(e, raw + 1);
	PG_RETURN_INT64(CounterValue(e, pg_atomic_read_u64(&e->r->counter) + 1, NameStr(e->name)));
}

/* Trigger on the definitions: tell every backend to reload them. */
Datum
snowseq_counters_changed(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "snowseq_counters_changed must be called as a trigger");
	CacheInvalidateRelcache(td->tg_relation);
	return PointerGetDatum(NULL);
}

PG_FUNCTION_INFO_V1(snowseq_counter_state);
PG_FUNCTION_INFO_V1(snowseq_grant_counter);
PG_FUNCTION_INFO_V1(snowseq_revoke_counter);

/*
 * ERROR unless the current user may see the state of a counter: read its
 * owner and grants as they stand (a dropped counter's too, which the cache
 * does not hold).  A name without a definition has nothing to protect.
 */
static void
CounterCheckState(Oid fn_oid, const NameData *name)
{
	Oid			nsp = ExtNamespace(fn_oid);
	Datum		arg = CStringGetTextDatum(NameStr(*name));
	Oid			argtype = TEXTOID;
	bool		allowed = true;

	if (!CounterHasRights(nsp))
		return;
	SPI_connect();
	if (SPI_execute_with_args(psprintf("SELECT owner, acl FROM %s WHERE name OPERATOR(pg_catalog.=) $1",
									   CounterTableName(fn_oid)),
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the definition of counter \"%s\"", NameStr(*name));
	if (SPI_processed == 1)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Oid			owner = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
		Datum		d = SPI_getbinval(tup, desc, 2, &isnull);

		allowed = CounterMayUse(GetUserId(), owner, CounterAcl(d, isnull));
	}
	SPI_finish();
	if (!allowed)
		CounterDenied(NameStr(*name));
}

/*
 * Grant or revoke USAGE of a counter (drawing values, raising it, seeing
 * its state) to a role or PUBLIC.  Only a role with the owner's privileges
 * may; the row is written as the owner of the definitions table, so the
 * counter's owner needs no right on the table.  The change reaches every
 * backend through the table's triggers: a revoke holds from the next call.
 */
static void
CounterGrant(FunctionCallInfo fcinfo, bool grant)
{
	NameData	name;
	char	   *role;
	Oid			grantee;
	Oid			nsp = ExtNamespace(fcinfo->flinfo->fn_oid);
	char	   *table = CounterTableName(fcinfo->flinfo->fn_oid);
	Oid			user = GetUserId();
	Oid			save_user;
	int			save_sec;
	Oid			types[2] = {TEXTOID, ACLITEMARRAYOID};
	Datum		values[2];
	char		nulls[2] = {' ', ' '};
	Oid			owner;
	Acl		   *acl;
	AclItem    *items;
	int			n = 0;
	bool		isnull;
	HeapTuple	tup;
	TupleDesc	desc;

	CounterRequire(fcinfo, 0, "counter name");
	CounterRequire(fcinfo, 1, "role");
	CounterName(PG_GETARG_TEXT_PP(0), &name);
	role = text_to_cstring(PG_GETARG_TEXT_PP(1));
	if (pg_strcasecmp(role, "public") == 0)
		grantee = ACL_ID_PUBLIC;
	else if (!OidIsValid(grantee = get_role_oid(role, true)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role \"%s\" does not exist", role),
				 errhint("Name a role as pg_roles.rolname has it (not quoted), or 'public'.")));
	if (!CounterHasRights(nsp))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("counters of snowseq %s have no owners or grants", "1.1"),
				 errhint("Update the extension: ALTER EXTENSION snowseq UPDATE.")));
	values[0] = CStringGetTextDatum(NameStr(name));

	CounterAsOwner(get_relname_relid("snowseq_counters", nsp), &save_user, &save_sec);
	SPI_connect();
	SpiRunArgs(psprintf("SELECT owner, acl FROM %s WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE", table),
			   1, types, values, nulls, SPI_OK_SELECT);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("snowseq counter \"%s\" does not exist", NameStr(name)),
				 errhint("Create it with snowseq_create_counter() or snowseq_create_serial().")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	owner = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
	if (!has_privs_of_role(user, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of counter \"%s\" to %s it", NameStr(name),
						grant ? "grant" : "revoke"),
				 errhint("Its owner, a member of the owner's role or a superuser may grant and revoke it.")));
	values[1] = SPI_getbinval(tup, desc, 2, &isnull);
	acl = CounterAcl(values[1], isnull);

	/* the grants of other roles, then this one's unless revoked */
	items = palloc0(sizeof(AclItem) * ((acl ? ACL_NUM(acl) : 0) + 1));
	for (int i = 0; acl != NULL && i < ACL_NUM(acl); i++)
		if (ACL_DAT(acl)[i].ai_grantee != grantee)
			items[n++] = ACL_DAT(acl)[i];
	if (grant)
	{
		items[n].ai_grantee = grantee;
		items[n].ai_grantor = owner;
		ACLITEM_SET_PRIVS_GOPTIONS(items[n], ACL_USAGE, ACL_NO_RIGHTS);
		n++;
	}
	if (n == 0)
		nulls[1] = 'n';
	else
	{
		int16		typlen;
		bool		typbyval;
		char		typalign;
		Datum	   *elems = palloc(sizeof(Datum) * n);

		get_typlenbyvalalign(ACLITEMOID, &typlen, &typbyval, &typalign);
		for (int i = 0; i < n; i++)
			elems[i] = PointerGetDatum(&items[i]);
		values[1] = PointerGetDatum(construct_array(elems, n, ACLITEMOID, typlen, typbyval, typalign));
	}
	SpiRunArgs(psprintf("UPDATE %s SET acl = $2 WHERE name OPERATOR(pg_catalog.=) $1", table),
			   2, types, values, nulls, SPI_OK_UPDATE);
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
}

/* snowseq_grant_counter(name, role): role (or PUBLIC) may use the counter. */
Datum
snowseq_grant_counter(PG_FUNCTION_ARGS)
{
	CounterGrant(fcinfo, true);
	PG_RETURN_VOID();
}

/* snowseq_revoke_counter(name, role): role (or PUBLIC) may no longer use it. */
Datum
snowseq_revoke_counter(PG_FUNCTION_ARGS)
{
	CounterGrant(fcinfo, false);
	PG_RETURN_VOID();
}

/*
 * snowseq_counter_state(name) -> (last bigint, reserved bigint): the raw
 * reservation counter of a counter of this database, for the view.
 */
Datum
snowseq_counter_state(PG_FUNCTION_ARGS)
{
	NameData	name;
	ReserveId	id;
	Reservation *r;
	TupleDesc	tupdesc;
	Datum		v[2];
	bool		n[2] = {true, true};

	ShmemCheckPreloaded();
	CounterName(PG_GETARG_TEXT_PP(0), &name);
	CounterCheckState(fcinfo->flinfo->fn_oid, &name);
	CounterId(&name, &id);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	LWLockAcquire(Snowseq->lock, LW_SHARED);
	r = ReservationFind(&id, false);
	if (r != NULL)
	{
		v[0] = Int64GetDatum((int64) pg_atomic_read_u64(&r->counter));
		v[1] = Int64GetDatum((int64) pg_atomic_read_u64(&r->bound));
		n[0] = n[1] = false;
	}
	LWLockRelease(Snowseq->lock);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, v, n)));
}
