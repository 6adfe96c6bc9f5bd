/*
 * worker.h
 *		The reservation worker (worker.c); the move resolver is
 *		src/shards/transaction/resolver.c.
 */
#ifndef SNOWSEQ_WORKER_H
#define SNOWSEQ_WORKER_H

extern void WorkerRegister(void);

#endif							/* SNOWSEQ_WORKER_H */
