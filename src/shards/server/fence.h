/*
 * fence.h
 *		fence.c: the states of a fence on a shard table, named once; the
 *		router's move files name them through these when they set one.
 */
#ifndef SNOWSEQ_FENCE_H
#define SNOWSEQ_FENCE_H

/* The state of a fence, stored in snowseq_fence.state under its name. */
typedef enum FenceState
{
	FENCE_OPEN = 0,				/* no effect */
	FENCE_BLOCK,				/* writers of its IDs wait */
	FENCE_REJECT,				/* they fail and retry */
	FENCE_MOVED					/* the IDs live elsewhere now: writes are refused */
} FenceState;

extern const char *FenceStateName(FenceState state);

#endif							/* SNOWSEQ_FENCE_H */
