/*
 * snowseq.c
 *		Module entry point: wires the parts of snowseq together.  Each part
 *		defines its settings and registers what it needs at preload; each
 *		owns its shared memory (XxxShmemSize/XxxShmemInit), which the hooks
 *		here request and create in order, as pg_stat_statements does.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"

#include "apply_error.h"
#include "auto_keys.h"
#include "backfill.h"
#include "clock.h"
#include "compat.h"
#include "guc.h"
#include "keyring.h"
#include "keystore.h"
#include "move.h"
#include "reserve.h"
#include "resolver.h"
#include "rmgr.h"
#include "segment.h"
#include "shard_ddl.h"
#include "tableguard.h"
#include "testpoint.h"
#include "worker.h"

SNOWSEQ_MODULE_MAGIC;

void		_PG_init(void);

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Bytes of shared memory snowseq uses; fixed once the server has started. */
Size
SnowseqShmemSize(void)
{
	Size		size = ShmemSize();

	size = add_size(size, ReserveShmemSize());
	size = add_size(size, ClockShmemSize());
	size = add_size(size, BackfillShmemSize());
	size = add_size(size, ApplyErrorShmemSize());
	return size;
}

/* Ask for the shared memory and the lock. */
static void
SnowseqShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(SnowseqShmemSize());
	RequestNamedLWLockTranche("snowseq", 2);
}

/*
 * Create (or attach to) every part's shared memory; when the reservations
 * are new (the postmaster, also after a crash reset), load the state file.
 */
static void
SnowseqShmemStartup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	(void) ShmemInit();
	found = ReserveShmemInit();
	ClockShmemInit();
	BackfillShmemInit();
	ApplyErrorShmemInit();
	if (!found)
	{
		ReserveLoadState();
		BackfillLoadState();
	}
	LWLockRelease(AddinShmemInitLock);
	KeyringStartup();
}

/*
 * Everything but the pure hash and routing functions needs the settings
 * and shared memory, which exist only when preloaded (PGC_POSTMASTER
 * settings cannot be defined later).  Without preload the functions that
 * need them say what is missing.
 */
void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	GucInit();
	KeyStoreInit();
	KeyringInit();
	TestPointInit();
	MoveInit();
	ShardDdlInit();
	AutoKeysInit();
	RmgrInit();
	GucReservePrefix();
	GucValidate();
	ClockInit();
	SegmentInit();
	BackfillInit();
	ApplyErrorInit();
	TableGuardInit();

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = SnowseqShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = SnowseqShmemStartup;

	WorkerRegister();
	ResolverRegister();
}
