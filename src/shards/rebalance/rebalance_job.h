/*
 * rebalance_job.h
 *		Background rebalances (rebalance_job.c).
 */
#ifndef SNOWSEQ_REBALANCE_JOB_H
#define SNOWSEQ_REBALANCE_JOB_H

extern void RebalanceJobsResume(int elevel);

#endif							/* SNOWSEQ_REBALANCE_JOB_H */
