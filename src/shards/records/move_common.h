/*
 * move_common.h
 *		What the files of a move share on the router: the types of the
 *		operations (MoveOp, common to all; Move, the move of one table, in
 *		typed parts; MoveCleanupItem), a move's steps, its record and
 *		sessions (move_common.c).  Each phase declares its
 *		helpers in the header named after its file: move_plan.h,
 *		move_repl.h, move_switch.h, move_cleanup.h.  Private to them and
 *		move.c, which runs the phases.
 */
#ifndef SNOWSEQ_MOVE_COMMON_H
#define SNOWSEQ_MOVE_COMMON_H

#include "nodes/pg_list.h"
#include "utils/timestamp.h"

#include "machine.h"
#include "move_schema.h"
#include "remote.h"

/*
 * The state of a move, stored in snowseq_moves.state under the names of
 * MoveStateNames (move_common.c); the enum type snowseq_move_state lists the
 * same names in the same order (test 064).
 */
typedef enum MoveStateId
{
	MOVE_STATE_NONE = 0,		/* no record; for MoveRun, no change */
	MOVE_STATE_PREPARE,			/* checks and objects: nothing serves yet */
	MOVE_STATE_COPY,			/* the initial copy, then catching up */
	MOVE_STATE_BLOCK,			/* (not stored since 1.1; read only) */
	MOVE_STATE_SWITCH,			/* writes held back, replication stopped */
	MOVE_STATE_SWITCHED,		/* the router committed its switch */
	MOVE_STATE_DONE,			/* finished */
	MOVE_STATE_FAILED,			/* undone */
	MOVE_STATE_ROLLBACK,		/* undone, with leftovers */
	MOVE_STATE_REVERTABLE,		/* switched, the source kept current */
	MOVE_STATE_REVERTED			/* switched back (by a revert of its own) */
} MoveStateId;

#define MOVE_STATE_COUNT (MOVE_STATE_REVERTED + 1)

/*
 * The steps that change a move's stored state (MoveTransitions in
 * move_common.c gives each one's next state from the committed one).
 */
typedef enum MoveTransitionStep
{
	MOVE_STEP_COPY = 0,			/* prepare -> copy */
	MOVE_STEP_BLOCK,			/* copy (or a revert's prepare) -> switch */
	MOVE_STEP_SWITCH,			/* switch (or 1.0's block) -> switched */
	MOVE_STEP_LEFT,				/* switched or revertable -> switched, with
								 * what finishing it left (an error) */
	MOVE_STEP_KEEP,				/* switched -> revertable */
	MOVE_STEP_FINALIZE,			/* revertable -> switched */
	MOVE_STEP_FINISH,			/* switched or revertable -> done */
	MOVE_STEP_REVERT,			/* revertable -> reverted */
	MOVE_STEP_UNDO,				/* not switched -> failed */
	MOVE_STEP_UNDO_LEFT			/* not switched -> rollback (leftovers) */
} MoveTransitionStep;

/*
 * What a move makes on a server, recorded in snowseq_move_objects in a
 * router transaction that commits before it is made (MoveRecordObject),
 * under the names of MoveObjectNames (move_common.c), the labels of the
 * type snowseq_move_object_kind.  Cleanup reads the records, never names.
 */
typedef enum MoveObjectKind
{
	MOVE_OBJECT_PUBLICATION = 0,
	MOVE_OBJECT_SLOT,			/* a logical replication slot (also a
								 * table-sync slot of the subscription) */
	MOVE_OBJECT_SUBSCRIPTION,
	MOVE_OBJECT_TABLE,			/* the partitioned table the replication back
								 * to the source publishes through */
	MOVE_OBJECT_FENCE,
	MOVE_OBJECT_PREPARED,		/* a prepared transaction of the switch */
	MOVE_OBJECT_VIEW,			/* a split's keep view on the source */
	MOVE_OBJECT_COPY,			/* a destination table the move creates,
								 * under the source table's name, while it
								 * carries the move's copy mark */
	MOVE_OBJECT_MERGED,			/* a merge's merged table, while it carries
								 * the merge's mark (MergeMark) */
	MOVE_OBJECT_MERGE_TRIGGER	/* a merge's triggers on a table it merges
								 * (the record names the table) */
} MoveObjectKind;

/*
 * When cleanup removes a recorded object once its operation (move or
 * merge) is over, as Citus's cleanup records have it: always, only if the
 * operation was undone, or only if it was done; otherwise the record is
 * forgotten and the object stays.  The labels of snowseq_cleanup_policy
 * (MoveCleanupPolicyNames, move_common.c).
 */
typedef enum MoveCleanupPolicy
{
	MOVE_CLEANUP_ALWAYS = 0,
	MOVE_CLEANUP_ON_FAILURE,
	MOVE_CLEANUP_ON_SUCCESS
} MoveCleanupPolicy;

/* Which records of a move's group MoveForgetObjects forgets. */
typedef enum MoveForget
{
	MOVE_FORGET_ALL = 0,		/* the move is over, nothing of it is left */
	MOVE_FORGET_OWN,			/* the switch is done: all but the way back
								 * and the keep views */
	MOVE_FORGET_BACK			/* the way back is gone */
} MoveForget;

/* Which part of its partition a move takes, stored in snowseq_moves.kind. */
typedef enum MoveKind
{
	MOVE_KIND_WHOLE = 0,		/* the whole partition */
	MOVE_KIND_PREFIX,			/* its first genes */
	MOVE_KIND_SUFFIX			/* its last genes */
} MoveKind;

/* one thing done or left behind, for snowseq_move_cleanup's result */
typedef struct MoveReport
{
	int64		id;				/* 0: no known move */
	Oid			parent;
	int			first;
	int			last;
	char	   *server;
	char	   *object;
	char	   *action;
} MoveReport;

/* A partition of a gene-partitioned table and its bounds (MovePartBounds). */
typedef struct MovePartBound
{
	Oid			relid;
	char		relkind;
	bool		is_default;
	bool		has_lo;			/* false: MINVALUE */
	bool		has_hi;			/* false: MAXVALUE */
	int64		lo;
	int64		hi;
} MovePartBound;

/*
 * What every operation of the router has, whatever its kind: its record's
 * id and token, its state, who runs it and where, its memory and its
 * report.  Embedded as "op" in the typed operations (a Move, and through
 * its Moves a merge); alone, it collects the reports of many operations
 * (snowseq_move_cleanup, MoveOpNew).
 */
typedef struct MoveOp
{
	int64		id;
	char	   *token;			/* names the publication, slot, subscription */
	MoveStateId state;			/* as committed in snowseq_moves */
	Oid			mover;			/* the role that runs the operation */
	char	   *node;			/* this router's node id */
	char	   *ext;			/* quoted schema of snowseq on this server */
	MemoryContext cxt;
	List	   *report;			/* MoveReport */
	bool		leftovers;		/* something could not be removed */
} MoveOp;

/* The partition of the source the genes are in, and its bounds. */
typedef struct MoveSourcePart
{
	char	   *q;				/* the router's partition, qualified and quoted */
	bool		has_lo;			/* false: MINVALUE */
	bool		has_hi;			/* false: MAXVALUE */
	int64		lo;
	int64		hi;
} MoveSourcePart;

/* What the router needs for the new foreign table on the new table. */
typedef struct MoveNewPart
{
	char	   *q;				/* its name, qualified and quoted */
	char	   *cols;
	char	   *opts;
	char	   *colopts;
} MoveNewPart;

/* The sessions of a move on its servers. */
typedef struct MoveSessions
{
	RemoteConn *src;
	RemoteConn *lock;			/* source: holds the fence locks and the source
								 * transaction */
	int			lock_pid;		/* its backend there */
	RemoteConn *dst;
	RemoteConn *dst_lock;		/* a revert's destination: holds its transaction there */
} MoveSessions;

/* The copy and the subscription that carries it, as the move watches them. */
typedef struct MoveCopyTrack
{
	Oid			sub_oid;		/* the subscription on the destination */
	TimestampTz started;		/* the copy's clock, for its notices */
	TimestampTz noticed;
	TimestampTz probed;
	bool		caught_up;		/* the copy is done and caught up */
	/* the subscription's errors, as MoveCheckSubscription saw them */
	int64		sub_errors;		/* errors PostgreSQL counted so far */
	int			sub_failures;	/* of them in a row: the same error, no progress */
	char	   *sub_error;		/* the last error's SQLSTATE and text */
	char	   *sub_done;		/* what the subscription had done at that error */
} MoveCopyTrack;

/* The block and the switch: the fence, the locks held. */
typedef struct MoveSwitchHold
{
	int			fence_id;		/* 0: none yet */
	bool		fence_moved;	/* MoveUndoFence: the source says it switched */
	bool		parent_held;	/* the parent's session lock (MoveHoldParent) */
	TimestampTz blocked_at;
	int			wait_ms;		/* MoveLockParentOnce: 0 NOWAIT, or lock_timeout */
	bool		keys_locked;	/* the source transaction locked tables of a foreign key */
} MoveSwitchHold;

/* The placement group: one Move per table, the first one leads. */
typedef struct MoveGroupPart
{
	struct Move *lead;			/* NULL: this one leads */
	List	   *members;		/* the lead's: the other tables' Moves */
} MoveGroupPart;

/* Keeping the source current after the switch, and reverts. */
typedef struct MoveRevertPart
{
	int			window;			/* seconds to keep it revertable (0: finish) */
	char	   *back_lsn;		/* the destination's WAL position at the block */
	int64		reverts;		/* a revert: the move it reverts (0: none) */
	struct Move *of;			/* a revert: the Move of that table it reverts */
} MoveRevertPart;

/* A merge's table (merge.h), for a Move that runs a merge's steps. */
struct MergeTable;

/* The move of one table (the lead's op is the group's). */
typedef struct Move
{
	MoveOp		op;
	Oid			parent;
	char	   *parent_q;		/* qualified and quoted */
	char	   *parent_rel;
	int			first;
	int			last;
	MoveKind	kind;			/* whole, prefix or suffix of the partition */
	MoveSourcePart part;		/* the partition the genes are in */
	char	   *src_name;
	char	   *dst_name;
	char	   *src_table;		/* qualified and quoted, on the source */
	char	   *src_rel;		/* unquoted, as the copy lands under this name */
	char	   *dst_table;		/* qualified and quoted, on the destination */
	char	   *dst_nsp;		/* unquoted parts of dst_table (and the schema */
	char	   *dst_rel;		/* of src_table) */
	char	   *id_col;			/* the ID column on the shards, unquoted */
	int			dest_created;	/* 1 created by the move, 0 reused, -1 not yet */
	MoveNewPart newpart;		/* the router's foreign table on the new table */
	MoveSessions sess;
	MoveCopyTrack copy;
	MoveSwitchHold hold;
	MoveGroupPart group;
	MoveRevertPart revert;
	struct MergeTable *merge;	/* a merge whose steps run through this Move, or NULL */
} Move;

/*
 * One object a move recorded in snowseq_move_objects, as cleanup drops it
 * (CleanupRecorded): the Move of its move (id, token, table, genes, and
 * the server in src_name), the object, and its move's lead.
 */
typedef struct MoveCleanupItem
{
	Move	   *move;
	MoveObjectKind kind;
	char	   *name;
	char	   *lead_token;		/* the lead's token, which marks the table back */
	MoveStateId lead_state;		/* over: done, failed, rollback or reverted */
} MoveCleanupItem;

/* The Move that leads a move's group (itself, if it leads). */
#define MoveLead(m)		((m)->group.lead ? (m)->group.lead : (m))

typedef void (*MoveStep) (Move *m);

/* move_common.c: the Move, its sessions and record, running a step */
extern const char *const MoveStateNames[];
extern const Machine MoveMachine;
extern const char *MoveStateName(MoveStateId state);
extern MoveStateId MoveStateFromName(const char *name);
extern const char *MoveKindName(MoveKind kind);
extern char *MoveStateArray(int first,...);
extern char *MoveStatesOver(void);
extern const char *MoveObjectName(MoveObjectKind kind);
extern MoveObjectKind MoveObjectFromName(const char *name);
extern const char *MoveCleanupPolicyName(MoveCleanupPolicy policy);
extern MoveCleanupPolicy MoveObjectPolicy(MoveObjectKind kind);
extern void MoveRecordObject(Move *m, const char *server, MoveObjectKind kind, const char *name);
extern void MoveForgetObjects(Move *m, MoveForget which);
extern void MoveForgetObject(Move *m, const char *server, MoveObjectKind kind, const char *name);
extern List *MoveRecordedNames(Move *m, const char *server, MoveObjectKind kind);
extern char *MoveBackName(Move *m);
extern MoveKind MoveKindFromName(const char *name);
extern void MoveRecordStep(Move *m, MoveTransitionStep step, const char *sets);
extern bool MoveLock(int64 id, bool wait);
extern void MoveUnlock(int64 id);
extern void MoveLockStart(void);
extern void MoveCheckNonAtomic(FunctionCallInfo fcinfo, const char *what);
extern void MoveSleep(long ms);
extern double MsSince(TimestampTz t);
extern char *MoveExt(Move *m, const char *name);
extern char *MoveOpExt(MoveOp *op, const char *name);
extern char *MoveRemoteExt(RemoteConn *rc, const char *name);
extern char *Int8Arg(bool has, int64 v);
extern void MoveCancelAutovacuum(RemoteConn *rc, List *tables);
extern char *MoveLockHolders(RemoteConn *rc, List *tables);
extern char *BoundSql(bool has, int64 v, const char *infinite);
extern void MoveIds(Move *m, bool *has_lo, int64 *lo, bool *has_hi, int64 *hi);
extern char *MoveIdCondition(Move *m);
extern char *MoveIdConditionOf(Move *m, const char *alias);
extern void MoveNote(Move *m, const char *server, const char *object, const char *action);
extern void MoveRecordSet(Move *m, const char *sets);
extern void MoveRecordSetParams(Move *m, const char *sets, int nargs, const char *const *values);
extern ErrorData *MoveTry(Move *m, MoveStep step);
extern RemoteConn *MoveSession(Move *m, RemoteConn **slot, const char *server);
extern RemoteConn *MoveSrc(Move *m);
extern RemoteConn *MoveDst(Move *m);
extern RemoteConn *MoveHolder(Move *m);
extern MoveSchemaTables *MoveTables(Move *m);
extern void MoveCloseSessions(Move *m);
extern Move *MoveNew(const char *ext);
extern MoveOp *MoveOpNew(const char *ext);
extern Move *MoveNewMember(Move *lead, Oid parent);
extern List *MoveGroup(Move *m);
extern List *MoveGroupTables(Move *m, bool dst, bool created_only);
extern char *MoveGroupRelations(Move *m, bool dst, bool created_only);

extern bool MoveGroupsRecorded(const char *ext);
extern bool MoveObjectsRecorded(const char *ext);
extern void MoveCheckCleaner(const char *ext);
extern uint64 MoveRecordsRun(const char *ext, const char *sql, int expect);
extern char *MoveRecordsValue(const char *ext, MemoryContext cxt, const char *sql);
extern uint64 MoveRecordsRunParams(const char *ext, const char *sql, int nargs,
								   const char *const *values, int expect);
extern char *MoveRecordsValueParams(const char *ext, MemoryContext cxt, const char *sql,
									int nargs, const char *const *values);
extern MoveStateId MoveStateRead(Move *m);

#endif							/* SNOWSEQ_MOVE_COMMON_H */
