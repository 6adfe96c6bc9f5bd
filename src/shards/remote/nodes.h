/*
 * nodes.h
 *		The node registry: which node ids and configurations the servers of
 *		a fleet use (nodes.c).
 */
#ifndef SNOWSEQ_NODES_H
#define SNOWSEQ_NODES_H

extern void NodesRefuseCollision(const char *server, const char *what);

#endif							/* SNOWSEQ_NODES_H */
