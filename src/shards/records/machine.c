/*
 * machine.c
 *		What follows from a declared state machine (machine.h): the one
 *		place that reads the rows, so that no property of a state is
 *		listed twice.
 */
#include "postgres.h"

#include "nodes/pg_list.h"

#include "machine.h"
#include "sqlrun.h"

/* The state a step takes a record to from a state (0: the step is not allowed there). */
int
MachineNext(const Machine *m, int from, int step)
{
	for (int i = 0; i < m->nrows; i++)
		if (m->rows[i].from == from && m->rows[i].step == step)
			return m->rows[i].to;
	return 0;
}

/* Whether a step leads from a state to another. */
bool
MachineLeads(const Machine *m, int from, int to)
{
	for (int i = 0; i < m->nrows; i++)
		if (m->rows[i].from == from && m->rows[i].to == to)
			return true;
	return false;
}

/* Whether a state is over: entered by a step and left by none. */
bool
MachineOver(const Machine *m, int state)
{
	bool		entered = false;

	for (int i = 0; i < m->nrows; i++)
	{
		if (m->rows[i].from == state)
			return false;
		entered |= m->rows[i].to == state;
	}
	return entered;
}

/* Whether a step leads to a state (from any state). */
bool
MachineEnters(const Machine *m, int state, int step)
{
	for (int i = 0; i < m->nrows; i++)
		if (m->rows[i].step == step && m->rows[i].to == state)
			return true;
	return false;
}

/*
 * The states that are over, as an array parameter's value
 * ($n::pg_catalog.text[]): for queries that read the records as text,
 * those of an older version's catalog too.
 */
char *
MachineStatesOver(const Machine *m)
{
	List	   *names = NIL;

	for (int s = 1; s < m->nnames; s++)
		if (MachineOver(m, s))
			names = lappend(names, (char *) m->names[s]);
	return SqlTextArray(names);
}

/* The state of a name (-1: not a state of the machine). */
int
MachineStateOf(const Machine *m, const char *name)
{
	for (int s = 1; s < m->nnames; s++)
		if (strcmp(m->names[s], name) == 0)
			return s;
	return -1;
}
