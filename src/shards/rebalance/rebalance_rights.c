/*
 * rebalance_rights.c
 *		Whose rights a rebalance's record functions act with: the role that
 *		called them.
 *
 * The records of a run are written by snowseq alone (the guard), so the
 * functions that write them run as the records' owner, SECURITY DEFINER.
 * Inside one, the current user is that owner, and the role that called it
 * is known to no SQL function: the session's outer role (SET ROLE's) is
 * not it when a SECURITY DEFINER function of another role made the call,
 * and checking that role let such a function act on the runs of an owner
 * who called it (a confused deputy).  So each record function granted to
 * roles is a C function, snowseq_rebalance_as_caller, that runs as its
 * caller (no SECURITY DEFINER): it notes the current user, the caller,
 * and runs the function's body, <name>_impl in the same schema with the
 * same arguments, SECURITY DEFINER and granted to no one (fmgr runs it
 * without asking for EXECUTE, which no role has).  snowseq_caller_owns
 * and snowseq_caller_has_privs_of, the checks of those bodies, ask about
 * the noted caller.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/* The role that called the record function running now (InvalidOid: none runs). */
static Oid	RebalanceCaller = InvalidOid;

/* The role whose rights the checks ask about: the caller, or outside a record function the current user. */
static Oid
CallerId(void)
{
	return OidIsValid(RebalanceCaller) ? RebalanceCaller : GetUserId();
}

PG_FUNCTION_INFO_V1(snowseq_rebalance_as_caller);

/*
 * A record function: run its body, <name>_impl (same schema, same
 * arguments), with its caller noted.  A set-returning body fills the
 * caller's ReturnSetInfo.  Calls nest (a body calling a record function
 * keeps the first caller).
 */
Datum
snowseq_rebalance_as_caller(PG_FUNCTION_ARGS)
{
	FmgrInfo   *body = fcinfo->flinfo->fn_extra;
	LOCAL_FCINFO(inner, FUNC_MAX_ARGS);
	Oid			saved = RebalanceCaller;
	Datum		result = (Datum) 0;

	if (body == NULL)
	{
		HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
		Form_pg_proc proc;
		char	   *schema;
		char	   *name;
		Oid			impl;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
		proc = (Form_pg_proc) GETSTRUCT(tup);
		schema = get_namespace_name(proc->pronamespace);
		name = psprintf("%s_impl", NameStr(proc->proname));
		impl = LookupFuncName(list_make2(makeString(schema), makeString(name)), proc->pronargs,
							  proc->proargtypes.values, true);
		if (!OidIsValid(impl))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("function %s.%s, the body of a rebalance record function, does not exist", schema, name),
					 errhint("ALTER EXTENSION snowseq UPDATE; makes it.")));
		/* the body is snowseq's: SECURITY DEFINER, of the same result, owned as the function is */
		{
			HeapTuple	itup = SearchSysCache1(PROCOID, ObjectIdGetDatum(impl));
			Form_pg_proc iproc;
			bool		ok;

			if (!HeapTupleIsValid(itup))
				elog(ERROR, "cache lookup failed for function %u", impl);
			iproc = (Form_pg_proc) GETSTRUCT(itup);
			ok = iproc->prosecdef && !iproc->proisstrict && iproc->prorettype == proc->prorettype &&
				iproc->proretset == proc->proretset && iproc->proowner == proc->proowner;
			ReleaseSysCache(itup);
			if (!ok)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
						 errmsg("function %s.%s is not the body of a rebalance record function", schema, name),
						 errdetail("The body is SECURITY DEFINER, not STRICT, returns what the function does and has its owner."),
						 errhint("ALTER EXTENSION snowseq UPDATE; or reinstalling the extension makes it again.")));
		}
		ReleaseSysCache(tup);
		body = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(FmgrInfo));
		fmgr_info_cxt(impl, body, fcinfo->flinfo->fn_mcxt);
		fmgr_info_set_expr(fcinfo->flinfo->fn_expr, body);
		fcinfo->flinfo->fn_extra = body;
	}
	InitFunctionCallInfoData(*inner, body, PG_NARGS(), PG_GET_COLLATION(), fcinfo->context, fcinfo->resultinfo);
	for (int i = 0; i < PG_NARGS(); i++)
	{
		inner->args[i].value = fcinfo->args[i].value;
		inner->args[i].isnull = fcinfo->args[i].isnull;
	}
	if (!OidIsValid(RebalanceCaller))
		RebalanceCaller = GetUserId();
	PG_TRY();
	{
		result = FunctionCallInvoke(inner);
	}
	PG_FINALLY();
	{
		RebalanceCaller = saved;
	}
	PG_END_TRY();
	fcinfo->isnull = inner->isnull;
	return result;
}

PG_FUNCTION_INFO_V1(snowseq_caller_owns);

/*
 * snowseq_caller_owns(rel): whether the role that called the record
 * function running now has the privileges of the owner of rel, so that a
 * role granted those functions records runs of its own tables alone.
 */
Datum
snowseq_caller_owns(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		PG_RETURN_BOOL(false);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	PG_RETURN_BOOL(has_privs_of_role(CallerId(), owner));
}

PG_FUNCTION_INFO_V1(snowseq_caller_has_privs_of);

/*
 * snowseq_caller_has_privs_of(role): whether that caller has the
 * privileges of role (the status's check of pg_monitor).
 */
Datum
snowseq_caller_has_privs_of(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(has_privs_of_role(CallerId(), PG_GETARG_OID(0)));
}
