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
 * clock: no number repeats across a period switch.  Its format (serial.c)
 * bounds the numbers of a period: the reservation never reaches past the
 * last number that fits its digits.
 *
 * How far a counter has issued is kept twice.  The reservation (cluster
 * wide, in shared memory, the state file and the WAL) counts its raw
 * values.  Its floor (counter_floor.c), a sequence in the schema
 * snowseq_state that only snowseq writes, holds the highest value its
 * reservation's bound allows, written before the bound is published.
 * Every load of a definition raises the reservation above the floor: a
 * counter restored into another database or cluster, re-created after
 * DROP EXTENSION (in any schema) or after its row was deleted, or with
 * another start or node count, continues above every value it issued; one
 * restored without its floor is refused until its record arrives or
 * snowseq_counter_raise() says where it stands.  Only restart => true
 * starts a floor over (in the transaction that restarts).  Advances of a
 * counter's reservation therefore happen in a backend of its database,
 * never in the worker.
 *
 * The definitions (snowseq_counters) are written by these functions alone,
 * as the table's owner: creating a counter is EXECUTE on the create
 * functions, everything else is a right on the counter itself
 * (counter_rights.c).  Each backend caches the definitions
 * (counter_cache.c).
 */
#include "postgres.h"

#include "access/parallel.h"
#include "catalog/pg_authid.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "counter.h"
#include "counter_cache.h"
#include "counter_floor.h"
#include "counter_rights.h"
#include "guc.h"
#include "reserve.h"
#include "sqlrun.h"
#include "testpoint.h"
#include "timeutil.h"


/* ---- places: a counter's reservation in shared memory ---- */

/* The identity of a counter's reservation. */
static void
CounterId(const NameData *name, ReserveId *id)
{
	memset(id, 0, sizeof(*id));
	id->tag = RESERVE_TAG_COUNTER;
	id->dboid = MyDatabaseId;
	id->name = *name;
}

/* ERROR: no place is left for a counter. */
void
CounterNoRoom(const NameData *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
			 errmsg("no room for counter \"%s\": all %d counters of snowseq.max_counters are taken",
					NameStr(*name), snowseq_max_counters),
			 errhint("Raise snowseq.max_counters and restart the server, or drop counters or databases no longer needed: their places are freed when one is needed, their floors keep their positions.")));
}

/* The reservation of a counter, taken on its first use; ERROR when none is free. */
Reservation *
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
		CounterNoRoom(name);
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
				 errhint("Its owner may create it again with the same definition to continue it.")));
}

/*
 * Free the places of dropped counters of this database that have a floor
 * (it keeps their position: created again, they continue above it).
 * Called by CounterHasRoom, inside the SPI connection of the create functions.
 */
static void
CounterFreeDroppedCounters(const char *table, Oid floor_nsp)
{
	int			n;
	NameData   *names;
	int			freed = 0;

	n = (int) SpiRun(psprintf("SELECT name FROM %s WHERE dropped", table), SPI_OK_SELECT);
	names = palloc0(sizeof(NameData) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		char	   *s = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		int64		value;

		Oid			seq;

		strlcpy(NameStr(names[i]), s, NAMEDATALEN);
		seq = CounterFloorFind(floor_nsp, &names[i]);
		if (!OidIsValid(seq) || CounterFloorRead(seq, &value) != COUNTER_FLOOR_SET)
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
 * counters whose position their floor keeps.
 */
bool
CounterHasRoom(const NameData *name, const char *table, Oid floor_nsp)
{
	CounterFreeDroppedDatabases();
	if (CounterPlaceFree(name))
		return true;
	CounterFreeDroppedCounters(table, floor_nsp);
	return CounterPlaceFree(name);
}

/* How far a counter's reservation in this database went (counter or bound); 0 if none. */
uint64
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

/* ---- values: raw counter values and what they mean ---- */

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
 * The first raw counter value past a counter's space, for the raw value
 * `at`: a counter's past its last value; a serial's past the last number of
 * the period `at` is in.
 */
static uint64
CounterEnd(const CounterEntry *e, uint64 at)
{
	if (e->serial)
		return ((at >> SERIAL_PERIOD_SHIFT) << SERIAL_PERIOD_SHIFT) | (e->k_last + 1);
	return (uint64) e->restart_base + e->k_last + 1;
}

/*
 * The floor that covers every value up to raw counter value c under a
 * definition: a counter's value; a serial's period << 40 | number, or the
 * whole period (its successor << 40) when the number does not fit in 40
 * bits.  COUNTER_FLOOR_NONE when c covers nothing.
 */
int64
CounterRecordOf(const CounterEntry *e, uint64 c)
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
CounterDefinitionTag(const CounterEntry *e)
{
	int64		parts[4] = {e->start, e->restart_base, e->nodes, e->serial};
	uint64		h = hash_bytes_extended((const unsigned char *) parts, sizeof(parts), 0);

	if (e->serial && e->fmt.format != NULL)
		h ^= hash_bytes_extended((const unsigned char *) e->fmt.format, strlen(e->fmt.format), 1);
	return h == 0 ? 1 : h;
}

/* ---- the record: a counter's floor and its reservation ---- */

/*
 * Raise the reservation above a floor f, unless f is the very floor the
 * reservation wrote (or absorbed) under this very definition (owner_mark
 * is that floor + 1, owner_tag the definition's); then the next value
 * advances it and writes a floor of this definition.  A floor that is
 * another than ours, lower ones too, was written by someone else (a
 * restore, another cluster's values): what it covers is absorbed.
 */
static void
CounterAbsorbFloor(CounterEntry *e, int64 f)
{
	uint64		tag = CounterDefinitionTag(e);

	if (f == COUNTER_FLOOR_NONE)
		return;
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	if (e->r->owner_mark != (uint64) f + 1 || e->r->owner_tag != tag)
	{
		uint64		bound = pg_atomic_read_u64(&e->r->bound);

		ReserveRaise(e->r, Max(CounterRawAbove(e, f), bound));
		e->r->owner_mark = (uint64) f + 1;
		e->r->owner_tag = tag;
	}
	LWLockRelease(Snowseq->lock);
}

/*
 * After a load: the counter's place, and its reservation raised above its
 * floors (in catalogs before 1.3 also the floor it had in the extension's
 * schema).  That is a counter restored into another database or cluster,
 * re-created after DROP EXTENSION or after its row was deleted, its row
 * changed, or the server restarted (where it stands at its bound anyway).
 */
static void
CounterPrepare(CounterEntry *e)
{
	int64		f;

	e->r = CounterReservation(&e->name);
	e->r_generation = pg_atomic_read_u64(&e->r->generation);
	if (OidIsValid(e->floor_seq) && CounterFloorRead(e->floor_seq, &f) == COUNTER_FLOOR_SET)
		CounterAbsorbFloor(e, f);
	if (e->catalog != COUNTER_CATALOG_1_3)
	{
		Oid			legacy = CounterFloorFindLegacy(e->ext_nsp, &e->name);

		if (OidIsValid(legacy) && CounterFloorRead(legacy, &f) == COUNTER_FLOOR_SET)
			CounterAbsorbFloor(e, f);
	}
	e->prepared = true;
}

/* The cached definition named by argument 0 of a call, ready to take values. */
static CounterEntry *
CounterLookup(FunctionCallInfo fcinfo, CounterWant want)
{
	CounterEntry *e = CounterCacheGet(fcinfo, want);

	if (unlikely(!e->prepared))
		CounterPrepare(e);
	return e;
}

/*
 * A counter's floor, made (in its schema, made on first need) when it has
 * none yet; the definitions table is locked first, so makers go one at a
 * time.  A counter of a catalog before 1.3 gets its first floor here.
 */
static Oid
CounterFloorEnsure(CounterEntry *e, int64 value)
{
	Oid			nsp;

	if (OidIsValid(e->floor_seq) &&
		SearchSysCacheExists1(RELOID, ObjectIdGetDatum(e->floor_seq)))
		return e->floor_seq;
	LockRelationOid(get_relname_relid("snowseq_counters", e->ext_nsp), ShareUpdateExclusiveLock);
	nsp = CounterFloorSchema(true);
	e->floor_seq = CounterFloorMake(nsp, &e->name,
									CounterFloorComment(&e->name, e->serial, e->fmt.format),
									true, value, false);
	return e->floor_seq;
}

/*
 * How a counter's reservation may advance for raw value `at`: within its
 * space (CounterEnd), at its rate of values issued.
 */
static void
CounterSpec(const CounterEntry *e, uint64 at, ReserveSpec *spec)
{
	memset(spec, 0, sizeof(*spec));
	spec->floor = 0;
	spec->ceiling = PG_INT64_MAX;
	spec->end = CounterEnd(e, at);
	spec->block_min = snowseq_segment_block_min;
	spec->block_max = snowseq_segment_block_max;
	spec->margin_min = 0;
	spec->jumps_are_use = false;
}

/*
 * Advance a counter's reservation so that raw value `need` may be taken (0:
 * past the low-water mark, skipped when another backend is at it), its
 * floor first: the floor covers the new bound before the bound is
 * published.  One advancer per counter at a time (a lock on its floor,
 * released at once).  A read-only transaction or a parallel worker cannot
 * write the floor: it takes values up to the bound and then stops with an
 * ERROR.
 */
static void
CounterAdvance(CounterEntry *e, uint64 need)
{
	Reservation *r = e->r;
	ReserveSpec spec;
	uint64		bound;
	uint64		next;
	Oid			floor_seq;

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
	floor_seq = CounterFloorEnsure(e, CounterRecordOf(e, pg_atomic_read_u64(&r->bound)));
	if (need != 0)
		LockRelationOid(floor_seq, ShareUpdateExclusiveLock);
	else if (!ConditionalLockRelationOid(floor_seq, ShareUpdateExclusiveLock))
		return;
	CounterCheckPlace(e);

	/*
	 * Past the low-water mark, the next block goes above the bound even if
	 * the rate fell: otherwise every value up to the bound would come here.
	 */
	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	bound = pg_atomic_read_u64(&r->bound);
	next = bound;
	if (need == 0 && pg_atomic_read_u64(&r->counter) > pg_atomic_read_u64(&r->low_water) &&
		bound < (uint64) PG_INT64_MAX)
		need = bound + 1;
	CounterSpec(e, Max(need, pg_atomic_read_u64(&r->counter)), &spec);
	if (need > bound)
		next = ReserveNextBound(r, &spec, need);
	LWLockRelease(Snowseq->lock);
	if (next > bound)
	{
		CounterFloorWrite(floor_seq, CounterRecordOf(e, next));
		SNOWSEQ_TESTPOINT("counter_floor_written");
		spec.ceiling = next;
		LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
		if (pg_atomic_read_u64(&r->generation) != e->r_generation)
		{
			LWLockRelease(Snowseq->lock);
			CounterCheckPlace(e);
		}
		ReserveAdvance(r, &spec, need);
		r->owner_mark = (uint64) CounterRecordOf(e, next) + 1;
		r->owner_tag = CounterDefinitionTag(e);
		LWLockRelease(Snowseq->lock);
		ConditionVariableBroadcast(&Snowseq->advanced);
	}
	UnlockRelationOid(floor_seq, ShareUpdateExclusiveLock);
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
CounterValue(const CounterEntry *e, uint64 k)
{
	int64		v;

	if (pg_mul_s64_overflow((int64) (k - 1 - (uint64) e->restart_base), e->nodes, &v) ||
		pg_add_s64_overflow(v, e->start + snowseq_node_id % e->nodes, &v))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq counter \"%s\" reached the end of bigint", NameStr(e->name))));
	return v;
}

/* ERROR: every number of a serial's period p is taken. */
static void
CounterSerialFull(CounterEntry *e, uint64 p)
{
	text	   *last = SerialText(&e->fmt, p, CounterValueOf(e, e->k_last), NameStr(e->name));
	const char *when = SerialPeriodText(&e->fmt, p);

	/* a promotion's jump took what was left of this period (rmgr.c) */
	bool		promoted = e->r->promote_full &&
		e->r->space_end == CounterEnd(e, (p << SERIAL_PERIOD_SHIFT) | 1);

	ereport(ERROR,
			(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
			 errmsg("serial \"%s\" ran out of numbers%s", NameStr(e->name),
					when[0] ? psprintf(" for period %s", when) : ""),
			 promoted ?
			 errdetail("This server was promoted after the old primary had been unheard for long enough to issue every number left (at its last rate), so none of them is issued here.") :
			 errdetail("Its last number, %s, was taken: its format holds %llu numbers a period.",
					   text_to_cstring(last), (unsigned long long) e->k_last),
			 errhint("%s%s", when[0] ?
					 "Numbers start again in the next period" :
					 "Create a serial with more digits under a new name",
					 promoted ? "; synchronous replication keeps a promotion from skipping numbers." :
					 when[0] ? "; for more a period, create a serial with more digits under a new name." : ".")));
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
	e = CounterLookup(fcinfo, COUNTER_WANT_COUNTER);
	if (unlikely(!CounterTake(e, (uint64) e->restart_base + 1, CounterEnd(e, 0), &k)))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq counter \"%s\" ran out", NameStr(e->name)),
				 errdetail("Its last value, %lld, was taken.", (long long) CounterValueOf(e, e->k_last)),
				 errhint("Create a counter under a new name.")));
	PG_RETURN_INT64(CounterValue(e, k));
}

/* snowseq_serial(name) -> text: the next formatted serial number. */
Datum
snowseq_serial(PG_FUNCTION_ARGS)
{
	CounterEntry *e;
	uint64		p;
	uint64		c;

	SnowseqCheckUsable();
	e = CounterLookup(fcinfo, COUNTER_WANT_SERIAL);
	p = SerialPeriodOf(&e->fmt, TimeWallMs());
	for (;;)
	{
		uint64		first = (p << SERIAL_PERIOD_SHIFT) | 1;

		if (CounterTake(e, first, CounterEnd(e, first), &c))
			break;
		/* the counter is in a later period (the clock went back), or this one is full */
		if ((pg_atomic_read_u64(&e->r->counter) >> SERIAL_PERIOD_SHIFT) > p)
			p = pg_atomic_read_u64(&e->r->counter) >> SERIAL_PERIOD_SHIFT;
		else
			CounterSerialFull(e, p);
	}
	PG_RETURN_TEXT_P(SerialText(&e->fmt, c >> SERIAL_PERIOD_SHIFT,
								CounterValue(e, c & SERIAL_K_MASK), NameStr(e->name)));
}

PG_FUNCTION_INFO_V1(snowseq_counter_raise);

/*
 * snowseq_counter_raise(name, above): the counter's next value is above
 * `above` (a serial's: the next number of the period it is in); after a
 * restore that lacked its record, into a new cluster, or when taking over
 * from a sequence.  Never lowers; durable before it returns.
 */
Datum
snowseq_counter_raise(PG_FUNCTION_ARGS)
{
	CounterEntry *e;
	int64		above;
	uint64		raw;
	uint64		next;
	uint64		base = 0;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("above must not be NULL")));
	SnowseqCheckUsable();
	e = CounterLookup(fcinfo, COUNTER_WANT_ANY);
	above = PG_GETARG_INT64(1);
	if (e->serial)
	{
		uint64		p = Max(SerialPeriodOf(&e->fmt, TimeWallMs()),
							pg_atomic_read_u64(&e->r->counter) >> SERIAL_PERIOD_SHIFT);

		base = p << SERIAL_PERIOD_SHIFT;
		raw = base | CounterCountUpTo(e, above);
	}
	else
		raw = CounterRawAbove(e, above);
	next = Max(raw, pg_atomic_read_u64(&e->r->counter)) + 1;
	/* the next value must be one the counter can hand out */
	if (above < 0 || next >= CounterEnd(e, next))
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("snowseq %s \"%s\" has no value above %lld",
						e->serial ? "serial" : "counter", NameStr(e->name), (long long) above),
				 errdetail("Its last value is %lld%s.", (long long) CounterValueOf(e, e->k_last),
						   e->serial ? " a period" : ""),
				 errhint("Raise it to a smaller value, or use a new counter.")));
	ReserveRaise(e->r, raw);
	/* durable before it returns: the bound and the floor cover the raise */
	CounterAdvance(e, raw + 1);
	if (e->unrecorded)
	{
		int64		f;

		/* its record now: what the reservation allows, the raise included */
		CounterFloorWrite(e->floor_seq, CounterRecordOf(e, Max(raw, pg_atomic_read_u64(&e->r->bound))));
		e->unrecorded = CounterFloorRead(e->floor_seq, &f) != COUNTER_FLOOR_SET;
	}
	PG_RETURN_INT64(CounterValue(e, (pg_atomic_read_u64(&e->r->counter) & (e->serial ? SERIAL_K_MASK : PG_UINT64_MAX)) + 1));
}


PG_FUNCTION_INFO_V1(snowseq_counter_state);
PG_FUNCTION_INFO_V1(snowseq_counter_state_1_3);

/* The raw reservation of counter `name` of this database: counter and bound; false if none. */
static bool
CounterState(const NameData *name, uint64 *counter, uint64 *bound)
{
	ReserveId	id;
	Reservation *r;

	CounterId(name, &id);
	LWLockAcquire(Snowseq->lock, LW_SHARED);
	r = ReservationFind(&id, false);
	if (r != NULL)
	{
		*counter = pg_atomic_read_u64(&r->counter);
		*bound = pg_atomic_read_u64(&r->bound);
	}
	LWLockRelease(Snowseq->lock);
	return r != NULL;
}

/*
 * snowseq_counter_state(name) -> (issued bigint, reserved bigint): the raw
 * reservation of a counter of this database (the view of catalogs before
 * 1.3); ERROR for a counter the caller may not use.
 */
Datum
snowseq_counter_state(PG_FUNCTION_ARGS)
{
	NameData	name;
	TupleDesc	tupdesc;
	Datum		v[2];
	bool		n[2] = {true, true};
	uint64		counter,
				bound;

	ShmemCheckPreloaded();
	CounterCacheName(PG_GETARG_TEXT_PP(0), &name);
	if (!CounterCacheMayUseName(fcinfo->flinfo->fn_oid, &name))
		CounterRightsDenied(NameStr(name));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (CounterState(&name, &counter, &bound))
	{
		v[0] = Int64GetDatum((int64) counter);
		v[1] = Int64GetDatum((int64) bound);
		n[0] = n[1] = false;
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, v, n)));
}

/*
 * What is left of a counter's space: capacity (how many values it holds;
 * a serial: numbers a period) and how many of them were used (a serial:
 * in the period it is in, if that is the current one).
 */
static void
CounterCapacity(CounterEntry *e, uint64 counter, uint64 *capacity, uint64 *used)
{
	*capacity = e->k_last;
	if (e->serial)
	{
		uint64		now = SerialPeriodOf(&e->fmt, TimeWallMs());

		*used = (counter >> SERIAL_PERIOD_SHIFT) >= now ? counter & SERIAL_K_MASK : 0;
	}
	else
		*used = counter > (uint64) e->restart_base ? counter - (uint64) e->restart_base : 0;
	*used = Min(*used, *capacity);
}

/*
 * snowseq_counter_state_1_3(name) -> setof (issued bigint, reserved
 * bigint, last_value bigint, owner regrole, recorded boolean, capacity
 * bigint, used bigint, remaining bigint): the raw reservation of a counter
 * of this database, the last value this node issued (a serial's: in the
 * period it is in), its owner, whether its floor holds its record, and
 * what is left of its space; no row for a counter the caller may not use
 * (or that does not exist), so a view over every definition shows the
 * caller's counters only (a role with the privileges of
 * pg_read_all_stats, as pg_monitor: every counter).
 */
Datum
snowseq_counter_state_1_3(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	NameData	name;
	CounterEntry e;
	bool		dropped;
	Datum		v[8];
	bool		n[8] = {true, true, true, true, false, false, false, false};
	uint64		counter = 0,
				bound = 0,
				capacity,
				used;
	int64		f;

	ShmemCheckPreloaded();
	InitMaterializedSRF(fcinfo, 0);
	CounterCacheName(PG_GETARG_TEXT_PP(0), &name);
	if (!CounterCacheReadNow(fcinfo->flinfo->fn_oid, &name, &e, &dropped) ||
		!(CounterCacheMayUseEntry(&e) || has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS)))
		return (Datum) 0;
	if (CounterState(&name, &counter, &bound))
	{
		v[0] = Int64GetDatum((int64) counter);
		v[1] = Int64GetDatum((int64) bound);
		n[0] = n[1] = false;
		if ((counter & (e.serial ? SERIAL_K_MASK : PG_UINT64_MAX)) > (e.serial ? 0 : (uint64) e.restart_base))
		{
			v[2] = Int64GetDatum(CounterValueOf(&e, e.serial ? counter & SERIAL_K_MASK :
												counter - (uint64) e.restart_base));
			n[2] = false;
		}
	}
	if (OidIsValid(e.floor_seq))
	{
		Oid			owner = CounterRightsOwner(e.floor_seq);

		n[3] = !OidIsValid(owner);
		v[3] = ObjectIdGetDatum(owner);
	}
	v[4] = BoolGetDatum(OidIsValid(e.floor_seq) && CounterFloorRead(e.floor_seq, &f) == COUNTER_FLOOR_SET);
	CounterCapacity(&e, counter, &capacity, &used);
	v[5] = Int64GetDatum((int64) capacity);
	v[6] = Int64GetDatum((int64) used);
	v[7] = Int64GetDatum((int64) (capacity - used));
	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, v, n);
	return (Datum) 0;
}
