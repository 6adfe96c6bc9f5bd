/*
 * compat.h
 *		The differences between the PostgreSQL major versions snowseq builds
 *		against (15 to 19) that its code meets, each in one place: the rest
 *		of snowseq calls the names below and tests no version itself.
 *
 * Checked against the headers of 15, 17, 18 and 19 and the same in all of them,
 * so used directly: RegisterCustomRmgr and RmgrData (custom WAL resource
 * managers, new in 15), XLogBeginInsert / XLogRegisterData / XLogInsert /
 * XLogFlush, SyncRepWaitForLSN(lsn, commit), shmem_request_hook (new in 15),
 * RequestNamedLWLockTranche / GetNamedLWLockTranche, background workers,
 * latches and WaitLatch, condition variables, pg_atomic_*,
 * InitMaterializedSRF, MarkGUCPrefixReserved, heap_getattr and
 * PG_WAIT_EXTENSION.  The number of PGPROCs is MaxBackends +
 * NUM_AUXILIARY_PROCS + max_prepared_xacts in every version (18 counts its
 * I/O workers in NUM_AUXILIARY_PROCS).
 */
#ifndef SNOWSEQ_COMPAT_H
#define SNOWSEQ_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "snowseq needs PostgreSQL 15 or later (custom WAL resource managers)"
#endif

#include "fmgr.h"
#include "access/tableam.h"
#include "replication/syncrep.h"
#include "replication/walsender_private.h"
#include "storage/proc.h"
#include "catalog/pg_class.h"
#include "utils/acl.h"
#include "utils/rangetypes.h"
#if PG_VERSION_NUM >= 160000
#include "utils/guc_hooks.h"	/* assign_synchronous_commit, syncrep.h before */
#include "varatt.h"				/* VARDATA_ANY and friends, out of postgres.h */
#endif

/*
 * The module's magic block; from 18 on it also names the module and its
 * version (pg_get_loaded_modules()).  SNOWSEQ_VERSION comes from the
 * Makefile's EXTVERSION.
 */
#if PG_VERSION_NUM >= 180000
#define SNOWSEQ_MODULE_MAGIC \
	PG_MODULE_MAGIC_EXT(.name = "snowseq", .version = SNOWSEQ_VERSION)
#else
#define SNOWSEQ_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/*
 * This process's index in the array of all PGPROCs: PGPROC.pgprocno until
 * 16, MyProcNumber (a ProcNumber) from 17 on.
 */
static inline int
SnowseqMyProcNumber(void)
{
#if PG_VERSION_NUM >= 170000
	return MyProcNumber;
#else
	return MyProc->pgprocno;
#endif
}

/*
 * make_range() without a soft-error context: 16 added the escontext
 * argument (NULL: errors are thrown, as before).
 */
static inline RangeType *
SnowseqMakeRange(TypeCacheEntry *typcache, RangeBound *lower,
				 RangeBound *upper, bool empty)
{
#if PG_VERSION_NUM >= 160000
	return make_range(typcache, lower, upper, empty, NULL);
#else
	return make_range(typcache, lower, upper, empty);
#endif
}

/*
 * A sequential scan of rel under snapshot, without scan keys: 19 added the
 * flags argument (SO_NONE: a plain scan, as before).
 */
static inline TableScanDesc
SnowseqTableBeginScan(Relation rel, Snapshot snapshot)
{
#if PG_VERSION_NUM >= 190000
	return table_beginscan(rel, snapshot, 0, NULL, SO_NONE);
#else
	return table_beginscan(rel, snapshot, 0, NULL);
#endif
}

/* Does roleid own the relation?  16 made the owner checks generic. */
static inline bool
SnowseqClassOwnercheck(Oid relid, Oid roleid)
{
#if PG_VERSION_NUM >= 160000
	return object_ownercheck(RelationRelationId, relid, roleid);
#else
	return pg_class_ownercheck(relid, roleid);
#endif
}

/*
 * Are synchronous standbys defined?  Not a major version difference: later
 * minor releases of each branch replaced the bool sync_standbys_defined
 * with the flags sync_standbys_status.  Caller holds SyncRepLock.
 */
static inline bool
SnowseqSyncStandbysDefined(void)
{
#ifdef SYNC_STANDBY_DEFINED
	return (WalSndCtl->sync_standbys_status & SYNC_STANDBY_DEFINED) != 0;
#else
	return WalSndCtl->sync_standbys_defined;
#endif
}

/*
 * Running a portal to its end, as a client's statement at top level runs
 * (a background rebalance's CALL): 18 took PortalRun's run_once argument
 * away (it was always true here).
 */
#if PG_VERSION_NUM >= 180000
#define SnowseqPortalRunAll(portal, dest, qc) \
	PortalRun((portal), FETCH_ALL, true, (dest), (dest), (qc))
#else
#define SnowseqPortalRunAll(portal, dest, qc) \
	PortalRun((portal), FETCH_ALL, true, true, (dest), (dest), (qc))
#endif

/*
 * USAGE on a foreign server (a background rebalance reads a server's
 * standbys through its user mapping): 16 folded the per-kind ACL checks
 * into object_aclcheck.
 */
#if PG_VERSION_NUM >= 160000
#define SnowseqForeignServerAclcheck(server, role, mode) \
	object_aclcheck(ForeignServerRelationId, (server), (role), (mode))
#else
#define SnowseqForeignServerAclcheck(server, role, mode) \
	pg_foreign_server_aclcheck((server), (role), (mode))
#endif

#endif							/* SNOWSEQ_COMPAT_H */
