/*
 * route.h
 *		route.c: the routing map as the routing functions read it.
 */
#ifndef SNOWSEQ_ROUTE_H
#define SNOWSEQ_ROUTE_H

#include "nodes/pg_list.h"

/* One server's genes, first to last. */
typedef struct RouteRange
{
	int			first;
	int			last;
	char	   *shard;
} RouteRange;

extern List *RouteRanges(Oid fn_oid);

#endif							/* SNOWSEQ_ROUTE_H */
