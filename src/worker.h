/*
 * worker.h
 *		The background workers: the reservation worker and the move
 *		resolver (worker.c).
 */
#ifndef SNOWSEQ_WORKER_H
#define SNOWSEQ_WORKER_H

extern void WorkerRegister(void);

#endif							/* SNOWSEQ_WORKER_H */
