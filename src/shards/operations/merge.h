/*
 * merge.h
 *		What the files of a merge of neighbouring partitions share: the
 *		table of a merge and its states.  merge.c runs the steps,
 *		merge_switch.c the switch and the finish, merge_records.c keeps
 *		the records and the lock, merge_cleanup.c undoes and resolves
 *		(each declares its API in the header of its name).
 */
#ifndef SNOWSEQ_MERGE_H
#define SNOWSEQ_MERGE_H

#include "move_common.h"

/* One table of a merge: the partitions that become one. */
typedef struct MergeTable
{
	List	   *parts;			/* the router's partitions (quoted), in order */
	List	   *tables;			/* the tables they read on the server (quoted) */
	char	   *triggers;		/* the lead's: its merge triggers as made
								 * (MergeTriggers), checked at the switch */
} MergeTable;

/*
 * The states of a merge are those of moves it goes through (MoveStateName):
 * prepare, copy, switch, switched, then done, failed or rollback.  Each
 * step of a merge moves its stored state as MergeTransitions
 * (merge_records.c) declares, through MergeRecordStep, the one writer of
 * that state.
 */
typedef enum MergeStep
{
	MERGE_STEP_COPY = 0,		/* prepare -> copy: the server's tables made */
	MERGE_STEP_BLOCK,			/* copy -> switch: copied, writes held back */
	MERGE_STEP_SWITCH,			/* switch -> switched: the router switched */
	MERGE_STEP_FINISH,			/* switched -> done: the server's part
								 * committed */
	MERGE_STEP_UNDO,			/* (not switched) -> failed: undone */
	MERGE_STEP_UNDO_LEFT		/* (not switched) -> rollback: undone, with
								 * something left to remove */
} MergeStep;

/* The table of a Move of a merge. */
static inline MergeTable *
MergeOf(Move *t)
{
	return t->merge;
}

#endif							/* SNOWSEQ_MERGE_H */
