/*
 * admin.c
 *		Administrative SQL: adopting a changed configuration, or starting
 *		over after a corrupt state file, without ever issuing an ID twice;
 *		and the guard of the tables only snowseq writes.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/datetime.h"

#include "backfill.h"
#include "clock.h"
#include "reserve.h"
#include "segment.h"
#include "testpoint.h"

PG_FUNCTION_INFO_V1(snowseq_reset_state);

/*
 * snowseq_reset_state(segment_floor) -> text: adopt the configuration in
 * force after a deliberate change, or start over after a corrupt state
 * file.  Every counter resumes above anything the old state (or its copy)
 * could have issued, composed in the old layout, or the reset refuses and
 * says why; with neither copy readable, the gene segment counter needs
 * segment_floor, the highest counter value it issued.  Counters only ever
 * rise, so callers generating meanwhile never get a value twice.  Who may
 * call it is a GRANT (REVOKEd from PUBLIC).
 */
Datum
snowseq_reset_state(PG_FUNCTION_ARGS)
{
	SavedState old;
	char		msg[512];
	StateRead	rr;
	bool		from_copy = false;
	bool		same_config;
	bool		floor_given = !PG_ARGISNULL(0);
	int64		segment_floor = floor_given ? PG_GETARG_INT64(0) : 0;
	Reservation *seg;
	uint64		clock_floor = 0;
	uint64		seg_floor = 0;
	uint64		seg_limit;
	uint64		backfill_floor = 0;
	uint64		wide_floor = 0;
	SavedSlot	raised;
	char		resumes[MAXDATELEN + 1];

	if (segment_floor < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("segment_floor must not be negative"),
				 errhint("Pass the highest segment counter this node issued, or 0 if it never issued gene IDs.")));
	ShmemCheckPreloaded();
	if (snowseq_node_id < 0)
		ShmemCheckUsableSlow();
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot reset the snowseq state during recovery"),
				 errhint("Reset it on the primary; a standby follows its WAL.")));

	LWLockAcquire(Snowseq->lock, LW_EXCLUSIVE);
	seg = &SnowseqRes[RESERVE_SEGMENT];
	rr = StateReadFile(SNOWSEQ_STATE_FILE, &old, msg, sizeof(msg));
	if (rr != STATE_READ_OK &&
		StateReadFile(SNOWSEQ_STATE_COPY, &old, msg, sizeof(msg)) == STATE_READ_OK)
	{
		from_copy = true;
		rr = STATE_READ_OK;
	}
	if (rr != STATE_READ_OK && !floor_given && pg_atomic_read_u64(&seg->counter) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot tell where the gene segment counter stood: no readable state file or copy"),
				 errhint("Pass the highest segment counter this node issued, snowseq_reset_state(segment_floor => (SELECT max((id & (2^48 - 1)::bigint) >> %d) FROM your_table)), or 0 if it never issued gene IDs.",
						 snowseq_node_bits)));

	/*
	 * Where the old configuration left off, in the new one.  Under the same
	 * configuration that is the saved bounds themselves, as at any start.
	 */
	same_config = rr == STATE_READ_OK && !StateConfigDiffers(&old.config, msg, sizeof(msg));
	if (rr == STATE_READ_OK)
	{
		for (int i = 0; i < old.nslots; i++)
		{
			SavedSlot  *slot = &old.slots[i];

			if (slot->tag == RESERVE_TAG_CLOCK)
				clock_floor = same_config ? slot->bound :
					ClockFloorAfterReset(&old.config, slot->bound);
			else if (slot->tag == RESERVE_TAG_SEGMENT)
				seg_floor = same_config ? slot->bound :
					SegmentFloorAfterReset(&old.config, slot->bound);
			else if (slot->tag == RESERVE_TAG_WIDE_SEGMENT)
				wide_floor = slot->bound;
			else if (slot->tag == RESERVE_TAG_BACKFILL)
				backfill_floor = slot->bound;
		}
		/* IDs for past instants carry another node id: the clock stays above them too */
		for (int i = 0; i < old.nslots && !same_config && backfill_floor > 0; i++)
		{
			SavedConfig any = old.config;

			any.node_id = -1;
			if (old.slots[i].tag == RESERVE_TAG_CLOCK)
				clock_floor = Max(clock_floor, ClockFloorAfterReset(&any, old.slots[i].bound));
		}
	}
	if (floor_given)
		seg_floor = Max(seg_floor, (uint64) segment_floor + 1);
	seg_limit = (uint64) 1 << (SNOWSEQ_SEGMENT_BITS - snowseq_node_bits);
	if (seg_floor >= seg_limit)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the gene segment counter would have to resume at %llu, past its end at %llu",
						(unsigned long long) seg_floor, (unsigned long long) seg_limit),
				 errhint("Restore the previous settings, or use fewer snowseq.node_bits.")));

	/*
	 * isolation tests pause here: the floors are known and the lock is
	 * held, nothing is raised yet (generation goes on lock-free below the
	 * durable bounds; test/specs/reset_race.spec)
	 */
	SNOWSEQ_TESTPOINT("reset_locked");

	/* raise, never lower: the clock first, since it may refuse */
	ClockRaiseForReset(clock_floor, !same_config, &raised);
	memset(&raised, 0, sizeof(raised));
	raised.tag = RESERVE_TAG_SEGMENT;
	raised.bound = seg_floor;
	ReservationRaise(seg, seg_floor, &raised);
	memset(&raised, 0, sizeof(raised));
	raised.tag = RESERVE_TAG_WIDE_SEGMENT;
	raised.bound = wide_floor;
	ReservationRaise(&SnowseqRes[RESERVE_WIDE_SEGMENT], wide_floor, &raised);

	/*
	 * IDs for past instants: where the old state left off (1.2's one
	 * reservation, read when there is no backfill file).  Without it, or in
	 * another layout, any new one for an instant before the reset could
	 * equal an old one: those time units count as used up.
	 */
	if (!same_config)
		backfill_floor = (uint64) 1 << snowseq_seq_bits;
	memset(&raised, 0, sizeof(raised));
	raised.tag = RESERVE_TAG_BACKFILL;
	raised.bound = backfill_floor;
	ReservationRaise(&SnowseqRes[RESERVE_BACKFILL], backfill_floor, &raised);
	/* the time units up to the clock's after the reset are the old layout's */
	BackfillReset(pg_atomic_read_u64(&SnowseqRes[RESERVE_CLOCK].counter) >> snowseq_seq_bits, !same_config);

	/* named counters of the old state keep their bounds */
	if (rr == STATE_READ_OK)
	{
		for (int i = 0; i < old.nslots; i++)
		{
			SavedSlot  *slot = &old.slots[i];
			Reservation *r;

			if (slot->tag != RESERVE_TAG_COUNTER)
				continue;
			r = ReservationOfSlot(slot, true);
			if (r == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("the saved state holds more named counters than snowseq.max_counters = %d allows",
								snowseq_max_counters),
						 errhint("Raise snowseq.max_counters and restart the server.")));
			ReservationRaise(r, slot->bound, slot);
		}
	}

	ReservationSave(NULL, NULL);
	Snowseq->state_error = STATE_OK;
	Snowseq->state_message[0] = '\0';
	strlcpy(resumes, timestamptz_to_str(ClockCounterInstant(pg_atomic_read_u64(&SnowseqRes[RESERVE_CLOCK].counter))),
			sizeof(resumes));
	snprintf(msg, sizeof(msg), "snowseq state reset: %s; clock resumes at %s, segment counter at %llu",
			 from_copy ? "previous state file unreadable, its copy converted" :
			 rr == STATE_READ_OK ? "previous state converted" :
			 rr == STATE_READ_MISSING ? "no previous state file" : "previous state file unreadable",
			 resumes, (unsigned long long) pg_atomic_read_u64(&seg->counter));
	LWLockRelease(Snowseq->lock);
	ConditionVariableBroadcast(&Snowseq->advanced);
	PG_RETURN_TEXT_P(cstring_to_text(msg));
}

PG_FUNCTION_INFO_V1(snowseq_guard);

/*
 * Trigger (before each statement) on the tables whose rows snowseq's
 * promises rest on (the counter definitions, the keys): only snowseq's
 * functions, which write them as the table's owner, and roles with the
 * owner's privileges (a restore, a superuser) may change them.  A table
 * grant that an administrator gives is refused here, so no role can go
 * around the functions' checks (draw from another role's counter, plant a
 * key it knows).
 */
Datum
snowseq_guard(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Relation	rel;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "snowseq_guard must be called as a trigger");
	rel = td->tg_relation;
	if (!has_privs_of_role(GetUserId(), rel->rd_rel->relowner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("table %s is written by snowseq's functions alone",
						RelationGetRelationName(rel)),
				 errdetail("A grant on the table lets no role around the checks of those functions."),
				 errhint("Use the functions that manage it (docs/security.md lists who may call which), and revoke the grant.")));
	return PointerGetDatum(NULL);
}
