/*
 * syncrep.h
 *		Waiting for a synchronous standby to confirm a reservation's WAL
 *		record (syncrep.c).
 */
#ifndef SNOWSEQ_SYNCREP_H
#define SNOWSEQ_SYNCREP_H

#include "access/xlogdefs.h"

extern void SyncRepWaitReservation(XLogRecPtr lsn);

#endif							/* SNOWSEQ_SYNCREP_H */
