/*
 * counter_floor.h
 *		The floors of named counters (counter_floor.c): the record of how far
 *		each counter issued, one sequence per counter in the schema
 *		snowseq_state that only snowseq writes, and the object its rights
 *		are granted on.
 */
#ifndef SNOWSEQ_COUNTER_FLOOR_H
#define SNOWSEQ_COUNTER_FLOOR_H

/* the schema of the floors, in every database, whatever the extension's schema */
#define COUNTER_FLOOR_SCHEMA	"snowseq_state"

/* a floor's value before its counter issued anything */
#define COUNTER_FLOOR_NONE		(-1)

/* What a floor says. */
typedef enum CounterFloorState
{
	COUNTER_FLOOR_MISSING,		/* no floor: none was made, or it was not restored */
	COUNTER_FLOOR_AWAITING,		/* made for a restored definition, never written */
	COUNTER_FLOOR_SET			/* written by snowseq: value is its record */
} CounterFloorState;

extern Oid	CounterFloorSchema(bool create);
extern Oid	CounterFloorFind(Oid nsp, const NameData *name);
extern Oid	CounterFloorFindLegacy(Oid ext_nsp, const NameData *name);
extern CounterFloorState CounterFloorRead(Oid seq, int64 *value);
extern void CounterFloorWrite(Oid seq, int64 value);
extern Oid	CounterFloorMake(Oid nsp, const NameData *name, const char *comment,
							 bool set, int64 value, bool replace);
extern void CounterFloorDrop(Oid seq);
extern char *CounterFloorQualified(Oid seq);
extern char *CounterFloorComment(const NameData *name, bool serial, const char *format);
extern char *CounterFloorCommentOf(Oid seq);

#endif							/* SNOWSEQ_COUNTER_FLOOR_H */
