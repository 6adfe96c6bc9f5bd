/*
 * convert.h
 *		Switching the key column of a table to DEFAULT snowseq_next()
 *		(convert.c): snowseq_convert, and the new tables of
 *		snowseq.auto_keys (auto_keys.c), which reuse its checks.
 */
#ifndef SNOWSEQ_CONVERT_H
#define SNOWSEQ_CONVERT_H

#include "nodes/pg_list.h"

extern char *ConvertRun(Oid relid, const char *col, bool keep, const char *extschema);
extern List *ConvertDefaultSequences(List *rels, const char *col);

#endif							/* SNOWSEQ_CONVERT_H */
