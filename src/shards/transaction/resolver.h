/*
 * resolver.h
 *		The move resolver, a background worker started with the server
 *		(resolver.c).
 */
#ifndef SNOWSEQ_RESOLVER_H
#define SNOWSEQ_RESOLVER_H

extern void ResolverRegister(void);

#endif							/* SNOWSEQ_RESOLVER_H */
