/*
 * auto_keys.h
 *		snowseq.auto_keys (auto_keys.c): the bigint serial or identity
 *		primary key of a new table becomes DEFAULT snowseq_next().
 */
#ifndef SNOWSEQ_AUTO_KEYS_H
#define SNOWSEQ_AUTO_KEYS_H

extern void AutoKeysInit(void);

#endif							/* SNOWSEQ_AUTO_KEYS_H */
