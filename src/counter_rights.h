/*
 * counter_rights.h
 *		Who may use, grant and drop a named counter (counter_rights.c).
 */
#ifndef SNOWSEQ_COUNTER_RIGHTS_H
#define SNOWSEQ_COUNTER_RIGHTS_H

#include "utils/acl.h"

extern bool CounterRightsMayUse(Oid floor_seq, Oid user);
extern bool CounterRightsMayUseLegacy(Oid user, Oid owner, Acl *acl);
extern bool CounterRightsIsOwner(Oid floor_seq, Oid user);
extern void CounterRightsSetOwner(Oid floor_seq, Oid role);
extern void CounterRightsGrant(Oid floor_seq, Oid grantee, bool grant);
extern void CounterRightsDenied(const char *name);
extern Oid	CounterRightsOwner(Oid floor_seq);
extern uint64 CounterRightsGeneration(void);

#endif							/* SNOWSEQ_COUNTER_RIGHTS_H */
