/*
 * move.h
 *		move.c: the procedures of elastic shards; what the module calls at
 *		load time.  The phases of a move declare theirs in move_common.h
 *		and the header named after each phase's file.
 */
#ifndef SNOWSEQ_MOVE_H
#define SNOWSEQ_MOVE_H

extern void MoveInit(void);

#endif							/* SNOWSEQ_MOVE_H */
