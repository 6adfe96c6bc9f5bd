/*
 * admin.c
 *		Administrative SQL: adopting a changed configuration, or starting
 *		over after a corrupt state file, without ever issuing an ID twice;
 *		and the guard of the tables only snowseq writes.
 */
#include "postgres.h"

#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/datetime.h"

#include "clock.h"
#include "guc.h"
#include "reserve.h"

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
	ReserveResetArgs args;
	char		resumes[MAXDATELEN + 1];

	memset(&args, 0, sizeof(args));
	args.segment_floor_given = !PG_ARGISNULL(0);
	args.segment_floor = args.segment_floor_given ? PG_GETARG_INT64(0) : 0;
	if (args.segment_floor < 0)
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
	rr = StateReadFile(SNOWSEQ_STATE_FILE, &old, msg, sizeof(msg));
	if (rr != STATE_READ_OK &&
		StateReadFile(SNOWSEQ_STATE_COPY, &old, msg, sizeof(msg)) == STATE_READ_OK)
	{
		from_copy = true;
		rr = STATE_READ_OK;
	}

	/*
	 * Where the old configuration left off, in the new one: each fixed
	 * reservation by its owner's reset rule (under the same configuration,
	 * the saved bounds themselves, as at any start); named counters keep
	 * their bounds.  Counters only ever rise.
	 */
	args.old = rr == STATE_READ_OK ? &old : NULL;
	args.same_config = rr == STATE_READ_OK && !StateConfigDiffers(&old.config, msg, sizeof(msg));
	ReserveResetAll(&args);

	ReservationSave(NULL, NULL);
	Snowseq->state_error = STATE_OK;
	Snowseq->state_message[0] = '\0';
	strlcpy(resumes, timestamptz_to_str(ClockCounterInstant(pg_atomic_read_u64(&SnowseqRes[RESERVE_CLOCK].counter))),
			sizeof(resumes));
	snprintf(msg, sizeof(msg), "snowseq state reset: %s; clock resumes at %s, segment counter at %llu",
			 from_copy ? "previous state file unreadable, its copy converted" :
			 rr == STATE_READ_OK ? "previous state converted" :
			 rr == STATE_READ_MISSING ? "no previous state file" : "previous state file unreadable",
			 resumes, (unsigned long long) pg_atomic_read_u64(&SnowseqRes[RESERVE_SEGMENT].counter));
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
