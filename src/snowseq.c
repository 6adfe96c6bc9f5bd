/*
 * snowseq.c
 *		Module entry point: wires the parts of snowseq together.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "snowseq.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * Define the settings always; shared memory, the WAL resource manager and
 * the reservation worker exist only when preloaded.  Without preload the
 * generating functions say what is missing.
 */
void
_PG_init(void)
{
	GucInit();
	GucValidate();

	if (!process_shared_preload_libraries_in_progress)
		return;

	ShmemInit();
	ReserveInit();
	WorkerRegister();
}
