/*
 * snowseq.c
 *		Module entry point: wires the parts of snowseq together.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "compat.h"
#include "crypt.h"
#include "reserve.h"
#include "testpoint.h"

SNOWSEQ_MODULE_MAGIC;

void		_PG_init(void);

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
	CryptInit();
	TestPointInit();
	RmgrInit();
	GucReservePrefix();
	GucValidate();
	ClockInit();
	ShmemInit();
	WorkerRegister();
}
