/*
 * counter_cache.h
 *		The definitions of named counters as a backend caches them
 *		(counter_cache.c), under catcache.c's rule.
 */
#ifndef SNOWSEQ_COUNTER_CACHE_H
#define SNOWSEQ_COUNTER_CACHE_H

#include "fmgr.h"
#include "utils/acl.h"

#include "reserve.h"
#include "serial.h"

/* Which release's catalog the definitions table is (the library serves them all). */
typedef enum CounterCatalog
{
	COUNTER_CATALOG_1_1,		/* no rights; floors in the extension's schema */
	COUNTER_CATALOG_1_2,		/* owner and acl in the row; floors there too */
	COUNTER_CATALOG_1_3			/* rights and floors in snowseq_state */
} CounterCatalog;

/* What a lookup is for. */
typedef enum CounterWant
{
	COUNTER_WANT_COUNTER,		/* drawing from a counter */
	COUNTER_WANT_SERIAL,		/* drawing from a serial */
	COUNTER_WANT_ANY			/* raising either, also one awaiting its record */
} CounterWant;

/* A definition as a backend caches it. */
typedef struct CounterEntry
{
	NameData	name;			/* hash key */
	bool		valid;
	uint64		version;		/* catalog cache generation it was loaded in */
	CounterCatalog catalog;
	bool		serial;
	int64		start;
	int32		nodes;
	int64		restart_base;
	int64		maximum;		/* a counter's largest value (PG_INT64_MAX: none) */
	uint64		k_last;			/* the largest k whose value fits; 0: none */
	Oid			ext_nsp;		/* the extension's schema */
	Oid			table_owner;	/* the owner of snowseq_counters */
	Oid			floor_seq;		/* its floor in snowseq_state, or InvalidOid */
	bool		unrecorded;		/* 1.3: its floor is missing or awaiting its record */
	/* set up by counter.c once per load */
	bool		prepared;
	Reservation *r;
	uint64		r_generation;	/* r's generation when it was found */
	/* rights */
	Oid			owner;			/* 1.2 catalogs: the row's owner */
	Acl		   *acl;			/* 1.2 catalogs: the row's grants, or NULL */
	Oid			allowed_user;	/* a user found allowed, or InvalidOid */
	uint64		allowed_generation; /* CounterRightsGeneration() then */
	SerialFormat fmt;			/* serials */
} CounterEntry;

extern CounterEntry *CounterCacheGet(FunctionCallInfo fcinfo, CounterWant want);
extern CounterCatalog CounterCacheCatalog(Oid ext_nsp);
extern uint64 CounterCacheLastK(bool serial, int64 start, int32 nodes, int64 maximum,
								int number_width);
extern void CounterCacheName(text *t, NameData *name);
extern bool CounterCacheMayUseName(Oid fn_oid, const NameData *name);
extern bool CounterCacheReadNow(Oid fn_oid, const NameData *name, CounterEntry *e, bool *dropped);
extern bool CounterCacheMayUseEntry(const CounterEntry *e);

#endif							/* SNOWSEQ_COUNTER_CACHE_H */
