/*
 * tableguard.h
 *		Keeping other roles' code and locks out of snowseq's own tables
 *		(tableguard.c).
 */
#ifndef SNOWSEQ_TABLEGUARD_H
#define SNOWSEQ_TABLEGUARD_H

extern void TableGuardInit(void);

#endif							/* SNOWSEQ_TABLEGUARD_H */
