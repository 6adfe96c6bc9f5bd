/*
 * apply_error.h
 *		The last error of each subscription's workers, for moves
 *		(apply_error.c).
 */
#ifndef SNOWSEQ_APPLY_ERROR_H
#define SNOWSEQ_APPLY_ERROR_H

extern void ApplyErrorInit(void);
extern Size ApplyErrorShmemSize(void);
extern void ApplyErrorShmemInit(void);

#endif							/* SNOWSEQ_APPLY_ERROR_H */
