/*
 * machine.h
 *		machine.c: what follows from a declared state machine, a table of
 *		(state, step, next state) rows.
 *
 * Each kind of operation declares its machine beside the names of its
 * states (moves in move_common.c, merges in merge_records.c, rebalance
 * runs and their steps in rebalance_state.c).  Everything else said of a
 * state is derived here from those rows, not listed again: the state a
 * step leads to, whether a state is over (entered and never left), and
 * which states a step enters (the SQL predicates snowseq_move_is_copying,
 * snowseq_rebalance_is_running and the like).  State 0 is "no record".
 */
#ifndef SNOWSEQ_MACHINE_H
#define SNOWSEQ_MACHINE_H

/* One row: from a state, a step, to a state. */
typedef struct MachineRow
{
	int			from;
	int			step;
	int			to;
} MachineRow;

/* A machine: its rows and the names of its states (index 0 unused). */
typedef struct Machine
{
	const MachineRow *rows;
	int			nrows;
	const char *const *names;
	int			nnames;
} Machine;

extern int	MachineNext(const Machine *m, int from, int step);
extern bool MachineLeads(const Machine *m, int from, int to);
extern bool MachineOver(const Machine *m, int state);
extern bool MachineEnters(const Machine *m, int state, int step);
extern char *MachineStatesOver(const Machine *m);
extern int	MachineStateOf(const Machine *m, const char *name);

#endif							/* SNOWSEQ_MACHINE_H */
